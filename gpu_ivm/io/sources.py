"""In-memory sources: pick a reader's columns from tables, frames, arrays, rows and graphs."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_ivm.errors import InputError

from .columns import is_dataframe, is_series
from .layout import Gathered, Layout, choose, label, note_ignored


def _is_networkx_graph(source: Any) -> bool:
    nx = sys.modules.get("networkx")
    return nx is not None and isinstance(source, nx.Graph)


def _is_rows(source: Any) -> bool:
    """A list of row tuples/lists, e.g. ``[(1, 2), (2, 3)]`` or ``[(1, 2, -1)]``."""
    return isinstance(source, list) and all(isinstance(r, (tuple, list)) for r in source[:1])


def _has_to_arrow(source: Any) -> bool:
    """True for data frames that convert themselves to Arrow (cuDF, Polars), not pandas."""
    return callable(getattr(source, "to_arrow", None)) and not is_dataframe(source)


def _column_length(raw: Any) -> int:
    if isinstance(raw, (pa.Array, pa.ChunkedArray)):
        return len(raw)
    if isinstance(raw, np.ndarray):
        return int(raw.shape[0]) if raw.ndim else 1
    try:
        return len(raw)
    except TypeError:
        return 1


def _named(names: list[Any], getter: Any, layout: Layout, picks: Mapping[str, Any],
           what: str) -> dict[str, tuple[str, Any]]:
    chosen, ignored = choose(names, len(names), layout, picks, positional_ok=False)
    out: dict[str, tuple[str, Any]] = {}
    for key, i in chosen.items():
        name = names[i]
        try:
            out[key] = (str(name), getter(name))
        except InputError:
            raise
        except (KeyError, ValueError, pa.ArrowException) as exc:
            raise InputError(f"cannot select column {name!r}: {exc}", column=str(name)) from exc
    note_ignored(what, [repr(str(names[i])) for i in ignored])
    return out


def _positional(columns: Sequence[Any], layout: Layout, picks: Mapping[str, Any],
                what: str) -> dict[str, tuple[str, Any]]:
    k = len(columns)
    if k < layout.required:
        raise InputError(
            f"{what} must have at least {layout.required} columns ({layout.describe()}), got {k}",
            column=label(layout, layout.keys[k], picks),
        )
    chosen, ignored = choose(None, k, layout, picks, positional_ok=True)
    note_ignored(what, [f"at position {i}" for i in ignored])
    return {key: (label(layout, key, picks), columns[i]) for key, i in chosen.items()}


def gather_table(table: pa.Table | pa.RecordBatch, layout: Layout, picks: Mapping[str, Any],
                 what: str) -> Gathered:
    """Pick the layout's columns from an Arrow table (read from a file named ``what``)."""
    return Gathered(cols=_named(table.schema.names, table.column, layout, picks, what), where=what)


def gather_memory(source: Any, layout: Layout, picks: Mapping[str, Any]) -> Gathered:
    """Pick the layout's columns from an in-memory source."""
    if isinstance(source, (pa.Table, pa.RecordBatch)):
        cols = _named(source.schema.names, source.column, layout, picks, "table")
    elif _has_to_arrow(source):
        # a cuDF (or Polars) DataFrame: its columns come to the host once, as Arrow, where the
        # id dictionary lives; the engine uploads the encoded batch to its backend once
        table = source.to_arrow()
        if not isinstance(table, (pa.Table, pa.RecordBatch)):
            raise InputError(f"{type(source).__name__}.to_arrow() returned "
                             f"{type(table).__name__}, not a pyarrow Table")
        cols = _named(table.schema.names, table.column, layout, picks, "table")
    elif is_dataframe(source):

        def df_getter(name: Any) -> Any:
            col = source[name]
            if not is_series(col):
                raise InputError(f"duplicate column {name!r}", column=str(name))
            return col

        cols = _named(list(source.columns), df_getter, layout, picks, "data frame")
    elif isinstance(source, np.ndarray):
        if source.dtype.names is not None:
            if source.ndim != 1:
                raise InputError(
                    f"a structured array must be one-dimensional, got shape {source.shape}"
                )
            cols = _named(list(source.dtype.names), source.__getitem__, layout, picks, "array")
        else:
            if source.ndim != 2:
                raise InputError(
                    f"a numpy array source must have shape (n, k), got shape {source.shape}"
                )
            cols = _positional([source[:, j] for j in range(source.shape[1])], layout, picks,
                               "array")
    elif isinstance(source, Mapping):
        cols = _named(list(source.keys()), source.__getitem__, layout, picks, "mapping")
    elif isinstance(source, tuple):
        cols = _positional(list(source), layout, picks, "tuple")
    elif _is_networkx_graph(source):
        if source.is_multigraph():
            raise InputError("networkx multigraphs are not supported: pass nx.Graph(G) or "
                             "nx.DiGraph(G), or an edge list")
        cols = _positional(_transpose(list(source.edges()), 2), layout, picks, "graph")
    elif _is_rows(source):
        width = len(source[0]) if source else layout.required
        cols = _positional(_transpose(source, width), layout, picks, "rows")
    else:
        raise InputError(
            f"unsupported source type {type(source).__name__}: expected a file path, numpy "
            "array, mapping of columns, pyarrow Table/RecordBatch, pandas/cuDF DataFrame, "
            "tuple of columns, list of row tuples or networkx graph"
        )
    lengths = {name: _column_length(raw) for name, raw in cols.values()}
    first_name = next(iter(lengths))
    nrows = lengths[first_name]
    for name, length in lengths.items():
        if length != nrows:
            raise InputError(
                f"column {name!r} has {length} rows but column {first_name!r} has {nrows}",
                column=name,
            )
    return Gathered(cols=cols)


def _transpose(rows: Sequence[Any], width: int) -> list[Any]:
    """Rows to columns (lists); every row must have ``width`` fields."""
    bad = next((i for i, r in enumerate(rows)
                if not isinstance(r, (tuple, list)) or len(r) != width), None)
    if bad is not None:
        r = rows[bad]
        got = len(r) if isinstance(r, (tuple, list)) else type(r).__name__
        raise InputError(f"row {bad} has {got} fields but row 0 has {width}", row=bad)
    if not rows:
        return [np.empty(0, np.int64) for _ in range(width)]
    return [list(c) for c in zip(*rows)]
