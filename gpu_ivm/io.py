"""Input layer: read edge lists and update batches into validated numpy arrays.

Every reader accepts a file path (SNAP/plain text, optionally gzip-compressed, CSV, Parquet
or Arrow IPC) or an in-memory table (numpy array, mapping of columns, ``pyarrow.Table`` /
``RecordBatch``, ``pandas.DataFrame``, a cuDF or Polars DataFrame (anything with
``to_arrow()``), tuple of arrays) and returns plain numpy arrays:

* node ids are ``int64``, or ``object`` arrays of ``str`` when the keys are strings;
* signs, multiplicities and timestamps are ``int64``; relation codes are ``int8``.

Every problem with the input raises :class:`gpu_ivm.errors.InputError` naming the column
and the 0-based index of the first offending row. Validation is vectorised with numpy and
pyarrow; only columns of Python objects are inspected element by element.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import pathlib
import re
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from gpu_ivm.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "BATCH_EXTENSIONS",
    "EdgeList",
    "GraphUpdates",
    "RelationUpdates",
    "TableSource",
    "list_batch_files",
    "read_edges",
    "read_graph_updates",
    "read_relation",
    "read_relation_updates",
]

TableSource: TypeAlias = (
    "str | os.PathLike[str] | np.ndarray | Mapping[Any, Any] | pa.Table | pa.RecordBatch"
    " | pd.DataFrame | tuple[Any, ...]"
)
"""Anything the readers accept: a file path or an in-memory table (see :func:`read_edges`)."""

#: File extensions :func:`list_batch_files` picks up (matched case-insensitively).
BATCH_EXTENSIONS: tuple[str, ...] = (
    ".parquet",
    ".pq",
    ".csv",
    ".csv.gz",
    ".arrow",
    ".feather",
    ".ipc",
)

_INT64_MAX = int(np.iinfo(np.int64).max)
_INT64_MIN = int(np.iinfo(np.int64).min)
_TWO_63 = 2.0**63
_INT_PATTERN = r"^-?[0-9]+$"  # applied after stripping one leading "+"


# --------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EdgeList:
    """A static edge list.

    Attributes
    ----------
    src, dst : numpy.ndarray
        Endpoint ids: ``int64``, or ``object`` arrays of ``str`` when the keys are strings.
        Both have the same dtype.
    time : numpy.ndarray or None
        ``int64`` timestamps when the source had a time column (SNAP ``u v t``), else None.
    """

    src: np.ndarray
    dst: np.ndarray
    time: np.ndarray | None = None

    @property
    def keys_are_strings(self) -> bool:
        """True when the node ids are strings (``object`` arrays), False for ``int64``."""
        return self.src.dtype == object

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True, eq=False)
class GraphUpdates:
    """A batch of edge inserts (``sign == +1``) and deletes (``sign == -1``).

    Attributes
    ----------
    src, dst : numpy.ndarray
        Endpoint ids, ``int64`` or ``object`` arrays of ``str`` (same dtype).
    sign : numpy.ndarray
        ``int64``, each value +1 or -1.
    """

    src: np.ndarray
    dst: np.ndarray
    sign: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True, eq=False)
class RelationUpdates:
    """A batch of multiplicity changes to the three relations R, S and T.

    Attributes
    ----------
    rel : numpy.ndarray
        ``int8`` relation codes: 0 = R, 1 = S, 2 = T.
    src, dst : numpy.ndarray
        Tuple attributes, ``int64`` or ``object`` arrays of ``str`` (same dtype).
    mult : numpy.ndarray
        ``int64`` multiplicity changes. Rows with 0 are kept (the engine drops them).
    """

    rel: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    mult: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


# --------------------------------------------------------------------------------------
# Column layouts
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Which columns a reader wants.

    ``keys`` are canonical names in positional order; the first ``required`` are mandatory.
    ``aliases[key]`` lists the accepted column names (the first is used for positional
    sources and in messages). ``ids`` are the node-id columns; ``text_str`` are columns read
    as strings from text files (e.g. ``rel``).
    """

    keys: tuple[str, ...]
    required: int
    aliases: Mapping[str, tuple[str, ...]]
    ids: tuple[str, ...] = ("src", "dst")
    text_str: tuple[str, ...] = ()

    def display(self, key: str) -> str:
        return self.aliases[key][0]

    def expected_fields(self) -> str:
        if self.required == len(self.keys):
            return f"{self.required}"
        return f"{self.required} to {len(self.keys)}"


def _edge_layout(src: str, dst: str) -> _Layout:
    return _Layout(
        keys=("src", "dst", "time"),
        required=2,
        aliases={"src": (src,), "dst": (dst,), "time": ("time", "t")},
    )


_GRAPH_UPDATES = _Layout(
    keys=("src", "dst", "sign"),
    required=3,
    aliases={"src": ("src",), "dst": ("dst",), "sign": ("sign",)},
)
_RELATION_UPDATES = _Layout(
    keys=("rel", "src", "dst", "mult"),
    required=4,
    aliases={"rel": ("rel",), "src": ("src",), "dst": ("dst",), "mult": ("mult",)},
    text_str=("rel",),
)
_RELATION = _Layout(
    keys=("src", "dst", "mult"),
    required=2,
    aliases={"src": ("src",), "dst": ("dst",), "mult": ("mult",)},
)


@dataclass
class _Gathered:
    """Raw columns picked from a source: ``cols[key] = (column name, raw column)``."""

    cols: dict[str, tuple[str, Any]]
    nrows: int
    text_like: bool = False  # ids from a text format: unify int/str key kinds to str


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def _file_kind(path: pathlib.Path) -> str:
    name = path.name.lower()
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".csv"):
        return "csv"
    if base.endswith((".parquet", ".pq")):
        return "parquet"
    if base.endswith((".arrow", ".feather", ".ipc")):
        return "ipc"
    return "text"


def _check_file(path: pathlib.Path) -> None:
    if not path.exists():
        raise InputError(f"input file {str(path)!r} does not exist")
    if path.is_dir():
        raise InputError(f"input path {str(path)!r} is a directory, not a file")


def _read_bytes(path: pathlib.Path) -> bytes:
    """Read a whole file, transparently decompressing gzip."""
    _check_file(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc
    if path.name.lower().endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"cannot decompress {str(path)!r}: truncated or corrupt gzip data ({exc})"
            ) from exc
    return data


def _collapse_whitespace(body: bytes) -> bytes:
    """Tabs -> spaces, runs of blanks -> one space, no leading/trailing blanks on lines."""
    a = np.frombuffer(body, dtype=np.uint8)
    blank = (a == 32) | (a == 9)
    newline = a == 10
    drop = np.empty(a.shape[0], dtype=bool)
    drop[:-1] = blank[:-1] & (blank[1:] | newline[1:])
    drop[-1] = blank[-1]
    b = a[~drop]
    if b.shape[0]:
        blank = (b == 32) | (b == 9)
        lead = np.empty(b.shape[0], dtype=bool)
        lead[0] = blank[0]
        lead[1:] = blank[1:] & (b[:-1] == 10)
        b = b[~lead]
    b[b == 9] = 32
    return b.tobytes()


_NON_BLANK = re.compile(rb"[^ \t\n]")


def _is_blank(body: bytes) -> bool:
    """True if the bytes hold only blanks and newlines (without copying them)."""
    return _NON_BLANK.search(body) is None


def _drop_comment_lines(body: bytes) -> bytes:
    """Remove every line whose first byte is '#' or '%' (vectorised)."""
    a = np.frombuffer(body, dtype=np.uint8)
    n = a.shape[0]
    ends = np.flatnonzero(a == 10) + 1  # exclusive end of each newline-terminated line
    starts = np.concatenate(([0], ends))
    ends = np.concatenate((ends, [n]))
    live = starts < n
    starts, ends = starts[live], ends[live]
    first = a[starts]
    comment = (first == 35) | (first == 37)
    if not comment.any():
        return body
    keep = np.repeat(~comment, ends - starts)
    return a[keep].tobytes()


def _prepare_text(data: bytes) -> tuple[bytes, bytes, bool]:
    """Cheap first pass: CR/LF, comment header, delimiter choice.

    Returns (body, delimiter, simple): ``simple`` is False when the body mixes tabs and
    spaces, in which case it must go through :func:`_clean_text` before parsing.
    """
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    pos, n = 0, len(data)
    while pos < n:  # skip the comment header (usually all the comments there are)
        end = data.find(b"\n", pos)
        if end < 0:
            end = n
        line = data[pos:end].strip(b" \t")
        if line and line[:1] not in (b"#", b"%"):
            break
        pos = end + 1
    body = data[pos:] if pos else data
    has_tab = b"\t" in body
    has_space = has_tab and b" " in body
    return body, (b"\t" if has_tab else b" "), not (has_tab and has_space)


def _clean_text(body: bytes, delim: bytes) -> tuple[bytes, bytes]:
    """Thorough pass: one delimiter between fields, no stray blanks, no comment lines."""
    if not body:
        return body, delim
    if b"\t" in body and b" " in body:
        irregular = True
    else:
        irregular = (
            body[:1] == delim
            or body.endswith(delim)
            or delim + delim in body
            or b"\n" + delim in body
            or delim + b"\n" in body
        )
    if irregular:
        body = _collapse_whitespace(body)
        delim = b" "
    if b"\n#" in body or b"\n%" in body:
        body = _drop_comment_lines(body)
    return body, delim


def _parse_delimited(body: bytes, delim: bytes, types: Mapping[str, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(
        pa.py_buffer(body),
        read_options=pacsv.ReadOptions(autogenerate_column_names=True),
        parse_options=pacsv.ParseOptions(
            delimiter=delim.decode(), quote_char=False, ignore_empty_lines=True
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=dict(types), null_values=[], strings_can_be_null=False
        ),
    )


def _is_field_count_error(exc: Exception) -> bool:
    msg = str(exc)
    return "Expected" in msg and "columns" in msg


def _try_int64(arr: pa.Array) -> pa.Array | None:
    """Cast a string array to int64, or None if any value is not a decimal int64.

    Arrow's failing cast is slow (it formats an error for every bad value), so a cheap
    prefix test and a regex screen go first.
    """
    try:
        pc.cast(arr.slice(0, 1024), pa.int64())
    except pa.ArrowInvalid:
        return None
    if not pc.all(pc.match_substring_regex(arr, _INT_PATTERN)).as_py():
        return None
    try:
        return pc.cast(arr, pa.int64())
    except pa.ArrowInvalid:  # int64 overflow
        return None


def _raise_field_count(
    body: bytes, delim: bytes, layout: _Layout, path: pathlib.Path, exc: Exception | None
) -> None:
    """Find the first data row with a bad number of fields and raise (slow, error path)."""
    nmax = len(layout.keys)
    expected: int | None = None
    row = 0
    for line in body.split(b"\n"):
        if not line:
            continue
        k = line.count(delim) + 1
        if expected is None:
            expected = k
        if k < layout.required or k > nmax or k != expected:
            if k < layout.required:
                problem = f"has {k} field(s), fewer than the {layout.required} required"
                column: str | None = layout.display(layout.keys[k])
            elif k > nmax:
                problem = f"has {k} fields, more than the {nmax} allowed"
                column = None
            else:
                problem = f"has {k} fields but the first data row has {expected}"
                column = layout.display(layout.keys[min(k, expected)])
            text = line[:80].decode("utf-8", "replace")
            raise InputError(
                f"{path.name}: data row {problem} (expected {layout.expected_fields()} "
                f"fields: {' '.join(layout.display(key) for key in layout.keys)}): {text!r}",
                column=column,
                row=row,
            )
        row += 1
    raise InputError(f"cannot parse {str(path)!r}: {exc}")


def _empty_gathered(layout: _Layout) -> _Gathered:
    """Zero rows from an empty (or comment-only) text file."""
    keys = layout.keys[: layout.required]
    return _Gathered(
        cols={key: (layout.display(key), np.empty(0, np.int64)) for key in keys},
        nrows=0,
        text_like=True,
    )


def _read_text(path: pathlib.Path, layout: _Layout) -> _Gathered:
    """Whitespace-separated text (SNAP style): positional columns, comments '#' and '%'."""
    body, delim, simple = _prepare_text(_read_bytes(path))
    nmax = len(layout.keys)
    names = [f"f{i}" for i in range(nmax)]
    first_types = {
        name: pa.string() if key in layout.text_str else pa.int64()
        for name, key in zip(names, layout.keys, strict=True)
    }
    if layout.text_str and (b"\n#" in body or b"\n%" in body):
        simple = False  # a comment line could pass for data in a string column
    table: pa.Table | None = None
    conversion_failed = False
    if simple and not _is_blank(body):
        # Optimistic fast path: parse as integers straight away. A comment line, a stray
        # blank (empty field) or a non-integer id cannot parse as int64, so any such file
        # fails here and takes the careful path below.
        try:
            table = _parse_delimited(body, delim, first_types)
        except pa.ArrowInvalid as exc:
            conversion_failed = not _is_field_count_error(exc)
        else:
            if not layout.required <= table.num_columns <= nmax:
                table = None  # e.g. a trailing blank on every line: clean and retry
    all_strings = False
    if table is None:
        cleaned, delim = _clean_text(body, delim)
        if _is_blank(cleaned):
            return _empty_gathered(layout)
        if conversion_failed and cleaned is body:
            all_strings = True  # nothing to clean: the ids (or another column) are text
        else:
            try:
                table = _parse_delimited(cleaned, delim, first_types)
            except pa.ArrowInvalid as exc:
                if _is_field_count_error(exc):
                    _raise_field_count(cleaned, delim, layout, path, exc)
                all_strings = True
        body = cleaned
    if all_strings:
        try:
            table = _parse_delimited(body, delim, dict.fromkeys(names, pa.string()))
        except pa.ArrowInvalid as exc2:
            if _is_field_count_error(exc2):
                _raise_field_count(body, delim, layout, path, exc2)
            raise InputError(f"cannot parse {str(path)!r}: {exc2}") from exc2
    assert table is not None
    ncols = table.num_columns
    if ncols < layout.required or ncols > nmax:
        _raise_field_count(body, delim, layout, path, None)
    cols: dict[str, Any] = {
        key: table.column(i).combine_chunks() for i, key in enumerate(layout.keys[:ncols])
    }
    if all_strings:
        # Ids are integers only if every id parses as one; otherwise keep the original text.
        as_int = [_try_int64(cols[key]) for key in layout.ids]
        if all(col is not None for col in as_int):
            cols.update(zip(layout.ids, as_int, strict=True))
    return _Gathered(
        cols={key: (layout.display(key), col) for key, col in cols.items()},
        nrows=table.num_rows,
        text_like=True,
    )


def _csv_bad_row(data: bytes) -> tuple[int, int, int] | None:
    """(data row index, fields, expected) of the first CSV row with a wrong field count."""
    reader = csv.reader(io.StringIO(data.decode("utf-8", "replace")))
    header = next(reader, None)
    if header is None:
        return None
    row = 0
    for fields in reader:
        if not fields:
            continue
        if len(fields) != len(header):
            return row, len(fields), len(header)
        row += 1
    return None


def _read_csv_table(path: pathlib.Path) -> pa.Table | None:
    """CSV with a header row. Returns None for an empty file."""
    data = _read_bytes(path)
    if _is_blank(data):
        return None

    try:
        # read_csv infers each column's type over the whole file (all blocks).
        return pacsv.read_csv(
            pa.py_buffer(data), convert_options=pacsv.ConvertOptions(strings_can_be_null=True)
        )
    except pa.ArrowInvalid as exc:
        if _is_field_count_error(exc):
            bad = _csv_bad_row(data)
            if bad is not None:
                row, got, want = bad
                raise InputError(
                    f"{path.name}: CSV data row has {got} fields, the header has {want}",
                    row=row,
                ) from exc
            raise InputError(f"cannot parse CSV file {str(path)!r}: {exc}") from exc
        raise InputError(f"cannot parse CSV file {str(path)!r}: {exc}") from exc


def _read_parquet(path: pathlib.Path) -> pa.Table:
    import pyarrow.parquet as pq

    _check_file(path)
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"cannot read Parquet file {str(path)!r}: truncated or corrupt ({exc})"
        ) from exc


def _read_ipc(path: pathlib.Path) -> pa.Table:
    _check_file(path)
    try:
        buf = pa.py_buffer(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc
    try:
        return pa.ipc.open_file(buf).read_all()
    except (pa.ArrowException, OSError, ValueError):
        pass
    try:
        return pa.ipc.open_stream(buf).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"cannot read Arrow IPC file {str(path)!r}: not an Arrow file or stream, or "
            f"truncated/corrupt ({exc})"
        ) from exc


# --------------------------------------------------------------------------------------
# Gathering columns from any source
# --------------------------------------------------------------------------------------


def _select_named(
    found: Sequence[Any],
    getter: Callable[[Any], Any],
    layout: _Layout,
    *,
    allow_positional: bool,
) -> dict[str, tuple[str, Any]]:
    chosen: dict[str, Any] = {}
    for key in layout.keys:
        for alias in layout.aliases[key]:
            if alias in found:
                chosen[key] = alias
                break
    missing = [key for key in layout.keys[: layout.required] if key not in chosen]
    if missing:
        if allow_positional and not chosen and layout.required <= len(found) <= len(layout.keys):
            chosen = dict(zip(layout.keys[: len(found)], found, strict=True))
        else:
            want = layout.aliases[missing[0]]
            also = f" (or {', '.join(repr(w) for w in want[1:])})" if len(want) > 1 else ""
            raise InputError(
                f"missing column {want[0]!r}{also}; found columns: {list(found)!r}",
                column=want[0],
            )
    out: dict[str, tuple[str, Any]] = {}
    for key, name in chosen.items():
        try:
            out[key] = (str(name), getter(name))
        except InputError:
            raise
        except (KeyError, ValueError, pa.ArrowException) as exc:
            raise InputError(f"cannot select column {name!r}: {exc}", column=str(name)) from exc
    return out


def _table_columns(table: pa.Table | pa.RecordBatch) -> tuple[list[str], Callable[[str], Any]]:
    names = list(table.schema.names)

    def getter(name: str) -> Any:
        if names.count(name) > 1:
            raise InputError(f"duplicate column {name!r}", column=name)
        return table.column(name)

    return names, getter


def _positional(columns: Sequence[Any], layout: _Layout, what: str) -> dict[str, tuple[str, Any]]:
    k = len(columns)
    if k < layout.required or k > len(layout.keys):
        column = layout.display(layout.keys[k]) if k < layout.required else None
        raise InputError(
            f"{what} must have {layout.expected_fields()} columns "
            f"({', '.join(layout.display(key) for key in layout.keys)}), got {k}",
            column=column,
        )
    return {
        key: (layout.display(key), col) for key, col in zip(layout.keys[:k], columns, strict=True)
    }


def _is_dataframe(source: Any) -> bool:
    pd_mod = sys.modules.get("pandas")
    return pd_mod is not None and isinstance(source, pd_mod.DataFrame)


def _is_series(obj: Any) -> bool:
    pd_mod = sys.modules.get("pandas")
    return pd_mod is not None and isinstance(obj, pd_mod.Series)


def _column_length(raw: Any) -> int:
    if isinstance(raw, (pa.Array, pa.ChunkedArray)):
        return len(raw)
    if isinstance(raw, np.ndarray):
        return int(raw.shape[0]) if raw.ndim else 1
    try:
        return len(raw)
    except TypeError:
        return 1


def _has_to_arrow(source: Any) -> bool:
    """True for data frames that convert themselves to Arrow (cuDF, Polars), not pandas."""
    return callable(getattr(source, "to_arrow", None)) and not _is_dataframe(source)


def _gather(source: Any, layout: _Layout) -> _Gathered:
    text_like = False
    if isinstance(source, (str, os.PathLike)):
        path = pathlib.Path(source)
        kind = _file_kind(path)
        if kind == "text":
            return _read_text(path, layout)
        if kind == "csv":
            table = _read_csv_table(path)
            if table is None:
                return _empty_gathered(layout)
            names, getter = _table_columns(table)
            cols = _select_named(names, getter, layout, allow_positional=True)
            text_like = True
        else:
            table = _read_parquet(path) if kind == "parquet" else _read_ipc(path)
            names, getter = _table_columns(table)
            cols = _select_named(names, getter, layout, allow_positional=False)
    elif isinstance(source, (pa.Table, pa.RecordBatch)):
        names, getter = _table_columns(source)
        cols = _select_named(names, getter, layout, allow_positional=False)
    elif _has_to_arrow(source):
        # a cuDF (or Polars) DataFrame: its columns come to the host once, as Arrow, where the
        # id dictionary lives; the engine uploads the encoded batch to its backend once
        table = source.to_arrow()
        if not isinstance(table, (pa.Table, pa.RecordBatch)):
            raise InputError(f"{type(source).__name__}.to_arrow() returned "
                             f"{type(table).__name__}, not a pyarrow Table")
        names, getter = _table_columns(table)
        cols = _select_named(names, getter, layout, allow_positional=False)
    elif _is_dataframe(source):
        names = list(source.columns)

        def df_getter(name: Any) -> Any:
            col = source[name]
            if not _is_series(col):
                raise InputError(f"duplicate column {name!r}", column=str(name))
            return col

        cols = _select_named(names, df_getter, layout, allow_positional=False)
    elif isinstance(source, np.ndarray):
        if source.dtype.names is not None:
            if source.ndim != 1:
                raise InputError(
                    f"a structured array must be one-dimensional, got shape {source.shape}"
                )
            cols = _select_named(
                list(source.dtype.names),
                source.__getitem__,
                layout,
                allow_positional=False,
            )
        else:
            if source.ndim != 2:
                raise InputError(
                    f"a numpy array source must have shape (n, k), got shape {source.shape}"
                )
            cols = _positional([source[:, j] for j in range(source.shape[1])], layout, "array")
    elif isinstance(source, Mapping):
        cols = _select_named(
            list(source.keys()), source.__getitem__, layout, allow_positional=False
        )
    elif isinstance(source, tuple):
        cols = _positional(list(source), layout, "tuple")
    else:
        raise InputError(
            f"unsupported source type {type(source).__name__}: expected a file path, numpy "
            "array, mapping of columns, pyarrow Table/RecordBatch, pandas/cuDF DataFrame or tuple"
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
    return _Gathered(cols=cols, nrows=nrows, text_like=text_like)


# --------------------------------------------------------------------------------------
# Column conversion and validation
# --------------------------------------------------------------------------------------


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def _null_error(name: str, row: int, what: str = "null value") -> InputError:
    return InputError(f"{what} in column {name!r}", column=name, row=row)


def _primitive_to_numpy(arr: pa.Array) -> np.ndarray:
    """Zero-copy view of a null-free integer/float Arrow array.

    Read straight from the data buffer: ``Array.to_numpy`` would import pandas (when it is
    installed) on first use, which costs a few hundred milliseconds.
    """
    t = arr.type
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _arrow_values(arr: pa.Array | pa.ChunkedArray, name: str) -> tuple[np.ndarray, bool]:
    """Null-check an Arrow column and convert it to numpy. Returns (values, all_str)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count:
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        raise _null_error(name, _first(nulls))
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _primitive_to_numpy(arr), False
    if pa.types.is_boolean(t):
        if len(arr) == 0:
            return np.empty(0, dtype=np.int64), False
        raise InputError(
            f"column {name!r} holds booleans, which are not valid here", column=name, row=0
        )
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.to_numpy(zero_copy_only=False), True
    if pa.types.is_null(t):  # only reachable with zero rows
        return np.empty(0, dtype=np.int64), False
    raise InputError(
        f"column {name!r} has unsupported type {t}",
        column=name,
        row=0 if len(arr) else None,
    )


def _pandas_values(series: Any, name: str) -> tuple[np.ndarray, bool]:
    na = np.asarray(series.isna(), dtype=bool)
    if na.any():
        raise _null_error(name, _first(na))
    if isinstance(series.dtype, np.dtype):
        return _column_values(series.to_numpy(), name)
    try:
        arr = pa.array(series)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputError(
            f"column {name!r} has unsupported dtype {series.dtype}", column=name
        ) from exc
    return _arrow_values(arr, name)


def _column_values(raw: Any, name: str) -> tuple[np.ndarray, bool]:
    """Turn any column-like into a 1-D numpy array (nulls rejected). (values, all_str)."""
    if isinstance(raw, (pa.Array, pa.ChunkedArray)):
        return _arrow_values(raw, name)
    if _is_series(raw):
        return _pandas_values(raw, name)
    if isinstance(raw, np.ndarray):
        arr = raw
    elif isinstance(raw, (list, tuple)):
        arr = np.empty(len(raw), dtype=object)
        for i, v in enumerate(raw):  # never let numpy stringify or nest a list of values
            arr[i] = v
    else:
        try:
            arr = np.asarray(raw)
        except (TypeError, ValueError) as exc:
            raise InputError(f"column {name!r} is not array-like: {exc}", column=name) from exc
    if arr.ndim != 1:
        raise InputError(
            f"column {name!r} must be one-dimensional, got shape {arr.shape}", column=name
        )
    if arr.dtype == object:
        return _object_values(arr, name)
    if arr.dtype.kind == "U":
        return arr.astype(object), True
    return arr, False


_KINDS: dict[type, str] = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    type(None): "null",
}


def _kind_of(v: Any) -> str:
    kind = _KINDS.get(type(v))
    if kind is not None:
        return kind
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if type(v).__name__ in ("NAType", "NaTType"):
        return "null"
    return "other"


def _ints_to_int64(values: list[int], name: str) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        for i, v in enumerate(values):
            if not _INT64_MIN <= v <= _INT64_MAX:
                raise InputError(
                    f"int64 overflow: value {v} in column {name!r} is outside the int64 range",
                    column=name,
                    row=i,
                ) from None
        raise


def _object_values(arr: np.ndarray, name: str) -> tuple[np.ndarray, bool]:
    """Validate a column of Python objects: no nulls, one kind (str or number), no bools."""
    if arr.shape[0] == 0:
        return arr.copy(), True
    try:  # fast path: pyarrow infers one type for the whole column in C
        inferred = pa.array(arr, from_pandas=True)
    except Exception:  # noqa: BLE001 - any failure means mixed or odd values: inspect
        inferred = None
    if inferred is not None:
        if inferred.null_count:
            nulls = inferred.is_null().to_numpy(zero_copy_only=False)
            raise _null_error(name, _first(nulls))
        t = inferred.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return arr.copy(), True
        if pa.types.is_integer(t):
            return inferred.to_numpy(zero_copy_only=False), False
    # Slow path: classify every value.
    vals = arr.tolist()
    first_group: str | None = None
    has_float = False
    for i, v in enumerate(vals):
        kind = _kind_of(v)
        if kind == "null" or (kind == "float" and v != v):
            raise _null_error(name, i)
        if kind == "bool":
            raise InputError(
                f"boolean value {v!r} in column {name!r}: booleans are not valid here",
                column=name,
                row=i,
            )
        if kind == "other":
            raise InputError(
                f"unsupported value {v!r} of type {type(v).__name__} in column {name!r}",
                column=name,
                row=i,
            )
        group = "str" if kind == "str" else "number"
        if first_group is None:
            first_group = group
        elif group != first_group:
            raise InputError(
                f"mixed value types in column {name!r}: row 0 holds a {first_group} but this "
                f"row holds {type(v).__name__} {v!r}",
                column=name,
                row=i,
            )
        if kind == "float":
            has_float = True
    if first_group == "str":
        return np.array([str(v) for v in vals], dtype=object), True
    if not has_float:
        return _ints_to_int64([int(v) for v in vals], name), False
    ints: list[int] = []
    for i, v in enumerate(vals):
        if isinstance(v, (float, np.floating)):
            f = float(v)
            if not np.isfinite(f) or f != int(f):
                what = "non-finite" if not np.isfinite(f) else "non-integral"
                raise InputError(f"{what} value {f!r} in column {name!r}", column=name, row=i)
            ints.append(int(f))
        else:
            ints.append(int(v))
    return _ints_to_int64(ints, name), False


def _floats_to_int64(v: np.ndarray, name: str) -> np.ndarray:
    v = v.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.trunc(v) == v) & (v >= -_TWO_63) & (v < _TWO_63)
    if not ok.all():
        i = _first(~ok)
        x = float(v[i])
        if np.isnan(x):
            raise _null_error(name, i, "null value (NaN)")
        if np.isinf(x):
            raise InputError(f"non-finite value {x!r} in column {name!r}", column=name, row=i)
        if x != np.trunc(x):
            raise InputError(f"non-integral value {x!r} in column {name!r}", column=name, row=i)
        raise InputError(
            f"int64 overflow: value {x!r} in column {name!r} is outside the int64 range",
            column=name,
            row=i,
        )
    return v.astype(np.int64)


def _strings_to_int64(values: np.ndarray, name: str) -> np.ndarray:
    """Parse a column of decimal integer strings, naming the first row that is not one."""
    arr = pc.replace_substring_regex(pa.array(values, type=pa.string()), r"^\+", "")
    try:
        return pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False).copy()
    except pa.ArrowInvalid:
        pass
    ok = pc.match_substring_regex(arr, _INT_PATTERN).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = _first(~ok)
        raise InputError(
            f"value {values[i]!r} in column {name!r} is not an integer", column=name, row=i
        )
    _ints_to_int64([int(s) for s in values], name)  # raises the overflow error with its row
    raise InputError(f"cannot parse column {name!r} as int64", column=name)  # pragma: no cover


def _numbers_to_int64(values: np.ndarray, name: str) -> np.ndarray:
    """Convert a validated numeric numpy array to a fresh int64 array."""
    kind = values.dtype.kind
    if kind == "i":
        return values.astype(np.int64, copy=True)
    if kind == "u":
        if values.dtype.itemsize == 8 and values.shape[0]:
            big = values > np.uint64(_INT64_MAX)
            if big.any():
                i = _first(big)
                raise InputError(
                    f"int64 overflow: value {int(values[i])} in column {name!r} exceeds the "
                    "int64 maximum",
                    column=name,
                    row=i,
                )
        return values.astype(np.int64)
    if kind == "f":
        return _floats_to_int64(values, name)
    if kind == "b":
        if values.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        raise InputError(
            f"column {name!r} holds booleans, which are not valid here", column=name, row=0
        )
    raise InputError(
        f"column {name!r} has unsupported dtype {values.dtype}",
        column=name,
        row=0 if values.shape[0] else None,
    )


def _id_column(raw: Any, name: str) -> np.ndarray:
    """Node ids: int64, or an object array of str."""
    values, all_str = _column_values(raw, name)
    if all_str:
        return values if values.dtype == object else values.astype(object)
    if values.dtype.kind == "b" and values.shape[0]:
        raise InputError(
            f"column {name!r} holds booleans: booleans are not node ids", column=name, row=0
        )
    return _numbers_to_int64(values, name)


def _int_column(raw: Any, name: str) -> np.ndarray:
    """An integer column (sign, mult, time): integral floats and integer strings accepted."""
    values, all_str = _column_values(raw, name)
    if all_str:
        return _strings_to_int64(values, name)
    return _numbers_to_int64(values, name)


def _sign_column(raw: Any, name: str) -> np.ndarray:
    sign = _int_column(raw, name)
    bad = (sign != 1) & (sign != -1)
    if bad.any():
        i = _first(bad)
        raise InputError(
            f"sign must be +1 or -1, got {int(sign[i])} in column {name!r}", column=name, row=i
        )
    return sign


def _rel_column(raw: Any, name: str) -> np.ndarray:
    values, all_str = _column_values(raw, name)
    if all_str:
        arr = pc.utf8_upper(pa.array(values, type=pa.string()))
        idx = pc.index_in(arr, value_set=pa.array(["R", "S", "T", "0", "1", "2"]))
        if idx.null_count:
            i = _first(idx.is_null().to_numpy(zero_copy_only=False))
            raise InputError(
                f"invalid relation {values[i]!r} in column {name!r}: expected 'R', 'S', 'T' "
                "or 0, 1, 2",
                column=name,
                row=i,
            )
        return (idx.to_numpy(zero_copy_only=False) % 3).astype(np.int8)
    codes = _numbers_to_int64(values, name)
    bad = (codes < 0) | (codes > 2)
    if bad.any():
        i = _first(bad)
        raise InputError(
            f"invalid relation {int(codes[i])} in column {name!r}: expected 'R', 'S', 'T' "
            "or 0, 1, 2",
            column=name,
            row=i,
        )
    return codes.astype(np.int8)


def _id_pair(g: _Gathered) -> tuple[np.ndarray, np.ndarray]:
    src_name, src_raw = g.cols["src"]
    dst_name, dst_raw = g.cols["dst"]
    src = _id_column(src_raw, src_name)
    dst = _id_column(dst_raw, dst_name)
    src_str, dst_str = src.dtype == object, dst.dtype == object
    if src_str != dst_str:
        if src.shape[0] == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        if g.text_like:  # a text format: any non-integer id makes every id a string
            if src_str:
                dst = dst.astype(str).astype(object)
            else:
                src = src.astype(str).astype(object)
        else:
            kinds = {True: "strings", False: "integers"}
            raise InputError(
                f"src and dst must have the same key kind: column {src_name!r} holds "
                f"{kinds[bool(src_str)]} but column {dst_name!r} holds {kinds[bool(dst_str)]}",
                column=dst_name,
                row=0,
            )
    return src, dst


# --------------------------------------------------------------------------------------
# Public readers
# --------------------------------------------------------------------------------------


def read_edges(source: TableSource, *, src: str = "src", dst: str = "dst") -> EdgeList:
    """Read a static edge list.

    Parameters
    ----------
    source : path or table
        One of:

        * a path (``str`` or ``os.PathLike``) to

          - SNAP / plain text (``.txt``, ``.tsv``, ``.edges``, ``.el`` or any other
            extension, optionally ``.gz``): one edge ``u v`` or ``u v t`` per line,
            separated by spaces or tabs; lines starting with ``#`` or ``%`` are comments,
            blank lines are skipped, CRLF is fine. All-integer ids give ``int64`` keys;
            if any id is not an integer every id is kept as a string;
          - CSV with a header (``.csv``, ``.csv.gz``): columns ``src``/``dst`` (see below)
            and optionally ``time`` or ``t``; a header with none of them but exactly 2 or 3
            columns is used positionally;
          - Parquet (``.parquet``, ``.pq``) or Arrow IPC file/stream (``.arrow``,
            ``.feather``, ``.ipc``), with named columns;

        * a numpy array of shape ``(n, 2)`` or ``(n, 3)`` (``src, dst[, time]``), or a
          structured array with named fields;
        * a mapping of column name to array-like;
        * a ``pyarrow.Table`` or ``pyarrow.RecordBatch``;
        * a ``pandas.DataFrame``;
        * a tuple ``(src_array, dst_array)`` or ``(src_array, dst_array, time_array)``.
    src, dst : str, optional
        Names of the endpoint columns in named sources (and in error messages).

    Returns
    -------
    EdgeList
        ``src``/``dst`` as ``int64`` or ``object`` (``str``) arrays; ``time`` as ``int64``
        when the source had a time column, else None.

    Raises
    ------
    gpu_ivm.errors.InputError
        Unreadable, missing or corrupt file; missing column; null, non-integral, boolean,
        out-of-range or mixed-type value; src and dst of different key kinds. The error's
        ``column`` and ``row`` name the first offending value.

    Examples
    --------
    >>> import numpy as np
    >>> edges = read_edges(np.array([[0, 1], [1, 2], [2, 0]]))
    >>> edges.src.tolist(), edges.dst.tolist(), edges.time
    ([0, 1, 2], [1, 2, 0], None)
    >>> read_edges({"a": ["x", "y"], "b": ["y", "z"]}, src="a", dst="b").keys_are_strings
    True
    """
    layout = _edge_layout(src, dst)
    g = _gather(source, layout)
    s, d = _id_pair(g)
    time = None
    if "time" in g.cols:
        name, raw = g.cols["time"]
        time = _int_column(raw, name)
    return EdgeList(src=s, dst=d, time=time)


def read_graph_updates(source: TableSource) -> GraphUpdates:
    """Read a batch of edge inserts and deletes: columns ``src``, ``dst``, ``sign``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. Text files hold ``src dst sign`` per line;
        numpy arrays and tuples are positional (``src, dst, sign``).

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
    """
    g = _gather(source, _GRAPH_UPDATES)
    s, d = _id_pair(g)
    name, raw = g.cols["sign"]
    return GraphUpdates(src=s, dst=d, sign=_sign_column(raw, name))


def read_relation_updates(source: TableSource) -> RelationUpdates:
    """Read a batch of relation updates: columns ``rel``, ``src``, ``dst``, ``mult``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. ``rel`` holds ``"R"``, ``"S"``, ``"T"``
        (any case) or 0, 1, 2. Text files hold ``rel src dst mult`` per line; numpy
        arrays and tuples are positional in that order.

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
    g = _gather(source, _RELATION_UPDATES)
    s, d = _id_pair(g)
    rel_name, rel_raw = g.cols["rel"]
    mult_name, mult_raw = g.cols["mult"]
    return RelationUpdates(
        rel=_rel_column(rel_raw, rel_name),
        src=s,
        dst=d,
        mult=_int_column(mult_raw, mult_name),
    )


def read_relation(source: TableSource) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read the contents of one relation: columns ``src``, ``dst`` and optional ``mult``.

    Parameters
    ----------
    source : path or table
        Any source :func:`read_edges` accepts. Text files hold ``src dst`` or
        ``src dst mult`` per line; numpy arrays and tuples are positional.

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
    g = _gather(source, _RELATION)
    s, d = _id_pair(g)
    if "mult" in g.cols:
        name, raw = g.cols["mult"]
        mult = _int_column(raw, name)
    else:
        mult = np.ones(s.shape[0], dtype=np.int64)
    return s, d, mult


def list_batch_files(directory: str | os.PathLike[str]) -> list[pathlib.Path]:
    """List the update-batch files in a folder, sorted by file name.

    Parameters
    ----------
    directory : str or os.PathLike
        The folder to scan (not recursively).

    Returns
    -------
    list of pathlib.Path
        Regular files whose name ends with one of :data:`BATCH_EXTENSIONS`
        (``.parquet .pq .csv .csv.gz .arrow .feather .ipc``, any case).

    Raises
    ------
    gpu_ivm.errors.InputError
        If the folder does not exist, is not a folder, or holds no such file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.csv", "a.parquet", "notes.txt"):
    ...     _ = (d / name).write_text("")
    >>> [p.name for p in list_batch_files(d)]
    ['a.parquet', 'b.csv']
    """
    folder = pathlib.Path(directory)
    if not folder.exists():
        raise InputError(f"batch folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise InputError(f"batch folder {str(folder)!r} is not a directory")
    files = sorted(
        (p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(BATCH_EXTENSIONS)),
        key=lambda p: p.name,
    )
    if not files:
        raise InputError(
            f"batch folder {str(folder)!r} holds no batch files "
            f"(extensions: {' '.join(BATCH_EXTENSIONS)})"
        )
    return files
