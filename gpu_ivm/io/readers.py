"""The public readers: any source to validated numpy arrays (see :mod:`gpu_ivm.io`)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa

from gpu_ivm.errors import InputError

from .columns import int_column, rel_column, sign_column
from .files import file_kind, read_ipc, read_parquet
from .ids import check_ids, id_pair
from .layout import EDGES, GRAPH_UPDATES, RELATION, RELATION_UPDATES, Gathered, Layout, check_picks
from .results import EdgeList, GraphUpdates, RelationUpdates
from .sources import gather_memory, gather_table
from .text import read_delimited

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

TableSource: TypeAlias = (
    "str | os.PathLike[str] | np.ndarray | Mapping[Any, Any] | pa.Table | pa.RecordBatch"
    " | pd.DataFrame | tuple[Any, ...] | list[tuple[Any, ...]]"
)
"""Anything the readers accept: a file path or an in-memory table (see :func:`read_edges`)."""

Column: TypeAlias = "str | int | None"
"""A column option: a column name, a 0-based position, or None for the usual choice."""

_CONVERT = {"time": int_column, "sign": sign_column, "mult": int_column, "rel": rel_column}


_PLAIN = frozenset({"src", "dst", "time", "sign"})


def _plain_columns(source: Any, layout: Layout, picks: Mapping[str, Any], header: bool | None,
                   ids: str) -> dict[str, np.ndarray] | None:
    """The columns of the usual in-memory batch, read without the general gathering: a
    ``dict`` whose keys are the layout's own column names (``src``, ``dst``, and ``time`` or
    ``sign``), each a 1-D NumPy signed-integer array of one length, signs all +1 or -1, and
    no reader option. The result equals the general path's; anything else gives None (and
    goes the general way, which also words the errors)."""
    if (type(source) is not dict or header is not None or ids != "auto"
            or not set(layout.keys) <= _PLAIN or any(v is not None for v in picks.values())):
        return None
    if not set(source) <= set(layout.keys) or not all(k in source
                                                       for k in layout.keys[:layout.required]):
        return None
    out = {}
    n = -1
    for key, v in source.items():
        if type(v) is not np.ndarray or v.ndim != 1 or v.dtype.kind != "i":
            return None
        if n >= 0 and v.shape[0] != n:
            return None
        n = v.shape[0]
        out[key] = v.astype(np.int64, copy=True)  # a fresh array, as the general path's
    sign = out.get("sign")
    if sign is not None and not ((sign == 1) | (sign == -1)).all():
        return None
    return out


def _read(source: Any, layout: Layout, picks: Mapping[str, Any], header: bool | None,
          ids: str) -> dict[str, np.ndarray]:
    """The layout's columns of a source, converted and validated (ids first, then the other
    columns in layout order); a file's errors also name the 1-based line of the bad row."""
    plain = _plain_columns(source, layout, picks, header, ids)
    if plain is not None:
        return plain
    g = _gather(source, layout, check_picks(layout, picks), header, check_ids(ids))
    try:
        out = dict(zip(("src", "dst"), id_pair(g, ids)))
        for key in layout.keys:
            if key in g.cols and key not in out:
                name, raw = g.cols[key]
                out[key] = _CONVERT[key](raw, name)
        return out
    except InputError as e:
        if g.line_of is None or e.row is None or e.line is not None:
            raise
        where = "" if e.detail.startswith(f"{g.where}:") else f"{g.where}: "
        raise InputError(where + e.detail, column=e.column, row=e.row,
                         line=g.line_of(e.row)) from None


def _gather(source: Any, layout: Layout, picks: Mapping[str, Any], header: bool | None,
            ids: str) -> Gathered:
    if header is not None and not isinstance(header, bool):
        raise InputError(f"header= must be True, False or None, got {header!r}")
    if not isinstance(source, (str, os.PathLike)):
        if header is not None:
            raise InputError("header= applies to text and CSV files only")
        return gather_memory(source, layout, picks)
    path = pathlib.Path(source)
    kind = file_kind(path)
    if kind in ("text", "csv"):
        return read_delimited(path, kind, layout, picks, header, ids)
    if header is not None:
        raise InputError(f"{path.name}: header= applies to text and CSV files only; "
                         f"{kind} files name their columns")
    table = read_parquet(path) if kind == "parquet" else read_ipc(path)
    return gather_table(table, layout, picks, path.name)


def read_edges(
    source: TableSource,
    *,
    src: Column = None,
    dst: Column = None,
    time: Column = None,
    header: bool | None = None,
    ids: str = "auto",
) -> EdgeList:
    """Read a static edge list.

    Parameters
    ----------
    source : path or table
        One of:

        * a path (``str`` or ``os.PathLike``) to

          - SNAP / plain text (``.txt``, ``.tsv``, ``.edges``, any other extension): one
            edge ``u v`` per line, fields separated by spaces or tabs; lines starting with
            ``#`` or ``%`` are comments, blank lines are skipped, CRLF is fine. A third
            column is the edge's ``time`` when the first data row holds an integer there
            (SNAP ``u v t``), otherwise it is ignored (a weight) with an
            :class:`~gpu_ivm.errors.InputNote`, as are further columns;
          - CSV (``.csv``): columns by name (``src``/``source``, ``dst``/``target``,
            ``time``/``t``) when the header has them, else by position as for text;
          - Parquet (``.parquet``, ``.pq``) or Arrow IPC file/stream (``.arrow``,
            ``.arrows``, ``.feather``, ``.ipc``), with named columns;

          text and CSV files may be compressed (``.gz``, ``.bz2``, ``.zst``, or recognised
          by their first bytes). Whether the first row of a text or CSV file is a header
          follows the rule of :mod:`gpu_ivm.io.header` unless ``header`` says;
        * a numpy array of shape ``(n, k)``, k >= 2 (``src, dst[, time]``), or a
          structured array with named fields;
        * a mapping of column name to array-like; a ``pyarrow.Table`` / ``RecordBatch``;
          a ``pandas.DataFrame`` (``nx.to_pandas_edgelist`` frames too); a cuDF or Polars
          frame (anything with ``to_arrow()``);
        * a tuple of columns ``(src_array, dst_array[, time_array])``; a list of row tuples
          ``[(u, v), ...]``; a networkx ``Graph`` or ``DiGraph`` (its edges).
    src, dst, time : str or int, optional
        The column to use: a name (named sources), or a 0-based position (text, headerless
        CSV, arrays, tuples, rows). Left out, the usual names or positions apply. Columns
        not used are ignored with an :class:`~gpu_ivm.errors.InputNote`.
    header : bool, optional
        Whether the first row of a text or CSV file is a header (default: the header rule).
    ids : {"auto", "str", "int"}
        ``"auto"``: ids read from text are integers when every id is one and strings when
        none is; a mix is an error. ``"str"``: every id is a string. ``"int"``: every id
        must be an integer.

    Returns
    -------
    EdgeList
        ``src``/``dst`` as ``int64`` or ``object`` (``str``) arrays; ``time`` as ``int64``
        when the source had a time column, else None.

    Raises
    ------
    gpu_ivm.errors.InputError
        Unreadable, missing or corrupt file; missing column; a first row that is neither
        clearly a header nor clearly data; null, non-integral, boolean, out-of-range or
        mixed-kind value; src and dst of different key kinds. The error's ``column`` and
        ``row`` (0-based) name the first offending value, and ``line`` (1-based) its line in
        a text or CSV file.

    Examples
    --------
    >>> import numpy as np
    >>> edges = read_edges(np.array([[0, 1], [1, 2], [2, 0]]))
    >>> edges.src.tolist(), edges.dst.tolist(), edges.time
    ([0, 1, 2], [1, 2, 0], None)
    >>> read_edges({"a": ["x", "y"], "b": ["y", "z"]}, src="a", dst="b").keys_are_strings
    True
    >>> read_edges([(1, 2), (2, 3)]).dst.tolist()
    [2, 3]
    """
    c = _read(source, EDGES, {"src": src, "dst": dst, "time": time}, header, ids)
    return EdgeList(src=c["src"], dst=c["dst"], time=c.get("time"))


def read_graph_updates(
    source: TableSource,
    *,
    src: Column = None,
    dst: Column = None,
    sign: Column = None,
    header: bool | None = None,
    ids: str = "auto",
) -> GraphUpdates:
    """Read a batch of edge inserts and deletes: columns ``src``, ``dst``, ``sign``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. Text files hold ``src dst sign`` per line;
        numpy arrays, tuples and rows are positional (``src, dst, sign``).
    src, dst, sign, header, ids
        As for :func:`read_edges`.

    Returns
    -------
    GraphUpdates
        ``sign`` is ``int64`` and each value is +1 (insert) or -1 (delete).

    Raises
    ------
    gpu_ivm.errors.InputError
        As :func:`read_edges`, and for a sign that is not exactly +1 or -1.

    Examples
    --------
    >>> upd = read_graph_updates({"src": [1, 2], "dst": [2, 3], "sign": [1, -1]})
    >>> len(upd), upd.sign.tolist()
    (2, [1, -1])
    >>> read_graph_updates([(1, 2, 1), (2, 3, -1)]).sign.tolist()
    [1, -1]
    """
    c = _read(source, GRAPH_UPDATES, {"src": src, "dst": dst, "sign": sign}, header, ids)
    return GraphUpdates(src=c["src"], dst=c["dst"], sign=c["sign"])


def read_relation_updates(
    source: TableSource,
    *,
    rel: Column = None,
    src: Column = None,
    dst: Column = None,
    mult: Column = None,
    header: bool | None = None,
    ids: str = "auto",
) -> RelationUpdates:
    """Read a batch of relation updates: columns ``rel``, ``src``, ``dst``, ``mult``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. ``rel`` holds ``"R"``, ``"S"``, ``"T"``
        (any case) or 0, 1, 2. Text files hold ``rel src dst mult`` per line; numpy
        arrays, tuples and rows are positional in that order.
    rel, src, dst, mult, header, ids
        As for :func:`read_edges`.

    Returns
    -------
    RelationUpdates
        ``rel`` as ``int8`` codes (0 = R, 1 = S, 2 = T) and ``mult`` as ``int64``.

    Raises
    ------
    gpu_ivm.errors.InputError
        As :func:`read_edges`, and for an unknown relation or a non-integral or
        out-of-range multiplicity.

    Examples
    --------
    >>> upd = read_relation_updates(
    ...     {"rel": ["R", "s", "T"], "src": [1, 2, 3], "dst": [2, 3, 1], "mult": [1, 2, -1]}
    ... )
    >>> upd.rel.tolist(), upd.mult.tolist()
    ([0, 1, 2], [1, 2, -1])
    """
    picks = {"rel": rel, "src": src, "dst": dst, "mult": mult}
    c = _read(source, RELATION_UPDATES, picks, header, ids)
    return RelationUpdates(rel=c["rel"], src=c["src"], dst=c["dst"], mult=c["mult"])


def read_relation(
    source: TableSource,
    *,
    src: Column = None,
    dst: Column = None,
    mult: Column = None,
    header: bool | None = None,
    ids: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read the contents of one relation: columns ``src``, ``dst`` and optional ``mult``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. Text files hold ``src dst`` or
        ``src dst mult`` per line; numpy arrays, tuples and rows are positional.
    src, dst, mult, header, ids
        As for :func:`read_edges`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(src, dst, mult)``; ``mult`` is ``int64`` and defaults to all ones.

    Raises
    ------
    gpu_ivm.errors.InputError
        As :func:`read_edges`, and for a non-integral or out-of-range multiplicity.

    Examples
    --------
    >>> src, dst, mult = read_relation({"src": [1, 2], "dst": [2, 3]})
    >>> mult.tolist()
    [1, 1]
    """
    c = _read(source, RELATION, {"src": src, "dst": dst, "mult": mult}, header, ids)
    return c["src"], c["dst"], c.get("mult", np.ones(len(c["src"]), np.int64))
