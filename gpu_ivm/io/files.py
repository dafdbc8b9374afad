"""Files: format and compression detection, and reading with pyarrow's readers.

Text (SNAP style) and CSV files are read with ``pyarrow.csv`` from a (decompressing)
``pyarrow`` input stream with explicit options: a first block (up to :data:`PEEK_BYTES`) is
looked at to skip the leading comment lines, apply the header rule (:mod:`.header`), pick the
columns (:mod:`.layout`) and choose their types; then the whole file is parsed once. A text
file with irregular blanks or comment lines below the top, or one whose fast parse fails,
goes through :func:`.text.normalise` and is parsed again with every column as text.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import pathlib
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from gpu_ivm.errors import InputError

from .header import has_header, is_int
from .layout import Gathered, Layout, choose, label, note_ignored
from .sources import gather_table
from .text import data_rows, is_blank, is_regular, normalise, split_fields

PEEK_BYTES = 1 << 14
"""How much of a text or CSV file is looked at before it is parsed (more when the comment
lines at its top fill that)."""
_SAMPLE_ROWS = 64
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\x28\xb5\x2f\xfd", "zstd"))


def file_kind(path: pathlib.Path) -> str:
    """``"csv"``, ``"parquet"``, ``"ipc"`` or ``"text"``, from the name (compression aside)."""
    name = path.name.lower()
    for ext in _COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".arrow", ".arrows", ".feather", ".ipc")):
        return "ipc"
    return "text"


def check_file(path: pathlib.Path) -> None:
    if not path.exists():
        raise InputError(f"input file {str(path)!r} does not exist")
    if path.is_dir():
        raise InputError(f"input path {str(path)!r} is a directory, not a file")


def compression(path: pathlib.Path) -> str | None:
    """The codec of a compressed file, by extension or else by its magic bytes."""
    name = path.name.lower()
    for ext, codec in _COMPRESSED.items():
        if name.endswith(ext):
            return codec
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc
    return next((codec for m, codec in _MAGIC if magic.startswith(m)), None)


def _open(path: pathlib.Path, codec: str | None) -> pa.NativeFile:
    try:
        return pa.input_stream(str(path), compression=codec)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc


def _read(path: pathlib.Path, codec: str | None, size: int = -1) -> bytes:
    with _open(path, codec) as stream:
        try:
            return stream.read() if size < 0 else stream.read(size)
        except OSError as exc:
            raise _corrupt(path, codec, exc) from exc


def _peek(path: pathlib.Path, codec: str | None, size: int) -> bytes:
    """The first ``size`` bytes of the decompressed file. Python's gzip and bz2 readers
    decompress only what is asked for (pyarrow's stream decompresses whole blocks)."""
    opener = {"gzip": gzip.open, "bz2": bz2.open}.get(codec or "")
    if opener is None:
        return _read(path, codec, size)
    try:
        with opener(path, "rb") as f:
            return f.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise _corrupt(path, codec, exc) from exc


def _corrupt(path: pathlib.Path, codec: str | None, exc: Exception) -> InputError:
    if codec is None:
        return InputError(f"cannot read {str(path)!r}: {exc}")
    return InputError(
        f"cannot decompress {str(path)!r}: truncated or corrupt {codec} data ({exc})"
    )


# --------------------------------------------------------------------------------------
# Text and CSV
# --------------------------------------------------------------------------------------


def _first_rows(head: bytes, complete: bool,
                kind: str) -> tuple[int, list[list[str]], bytes]:
    """(raw lines before the first data row, fields of the first data rows, their bytes)."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    lines = head.splitlines()
    if not complete and lines:
        lines.pop()  # maybe cut short
    skip = 0
    for line in lines:
        s = line.strip()
        if s and (kind == "csv" or s[:1] not in (b"#", b"%")):
            break
        skip += 1
    raw = b"\n".join(lines[skip : skip + 2 * _SAMPLE_ROWS])
    body = raw.decode("utf-8", "replace")
    if kind == "csv":
        rows = [r for r in csv.reader(body.split("\n")) if r][:_SAMPLE_ROWS]
    else:
        split = (split_fields(line) for line in body.split("\n"))
        rows = [r for r in split if r and not r[0].startswith(("#", "%"))][:_SAMPLE_ROWS]
    return skip, rows, raw


def _options(kind: str, names: list[str], keep: Mapping[int, pa.DataType], skip: int,
             delimiter: str) -> dict[str, Any]:
    csv_file = kind == "csv"
    return {
        "read_options": pacsv.ReadOptions(skip_rows=skip, column_names=names),
        "parse_options": pacsv.ParseOptions(
            delimiter=delimiter, quote_char='"' if csv_file else False,
            ignore_empty_lines=True,
        ),
        "convert_options": pacsv.ConvertOptions(
            column_types={names[i]: t for i, t in keep.items()},
            include_columns=[names[i] for i in sorted(keep)],
            null_values=[""] if csv_file else [],
            strings_can_be_null=csv_file,
            quoted_strings_can_be_null=False,
        ),
    }


def read_delimited(
    path: pathlib.Path,
    kind: str,
    layout: Layout,
    picks: Mapping[str, Any],
    header: bool | None,
    ids: str,
) -> Gathered:
    """Read the layout's columns of a text (SNAP) or CSV file."""
    check_file(path)
    codec = compression(path)
    where = path.name
    size = PEEK_BYTES
    while True:
        head = _peek(path, codec, size + 1)
        complete = len(head) <= size
        head = head[:size]
        skip, rows, sample = _first_rows(head, complete, kind)
        if rows or complete:
            break
        size *= 8
    if not rows:
        return _empty(layout, picks, where)
    words = [v for v in picks.values() if isinstance(v, str)]
    hdr = has_header(rows, header, where=where, line=skip + 1, extra_words=words)
    names = rows[0] if hdr else None
    data = rows[1:] if hdr else rows
    ncols = len(rows[0])

    if names is None and ncols < layout.required:
        raise InputError(
            f"{where}: data row has {ncols} field(s), fewer than the {layout.required} "
            f"required fields ({layout.describe()})",
            column=label(layout, layout.keys[ncols], picks), row=0, line=skip + 1 + hdr,
        )

    def soft_ok(i: int) -> bool:
        return bool(data) and i < len(data[0]) and is_int(data[0][i])

    chosen, ignored = choose(names, ncols, layout, picks, positional_ok=True, soft_ok=soft_ok)
    if names is None:
        note_ignored(where, [f"at position {i} (0-based)" for i in ignored])
    else:
        note_ignored(where, [repr(names[i]) for i in ignored])
    shown = {k: (names[i] if names is not None else label(layout, k, picks))
             for k, i in chosen.items()}
    if hdr and not data and complete:
        return _empty(layout, picks, where, keys=list(chosen), shown=shown)

    def is_text(key: str, i: int) -> bool:
        if key in layout.text_str:
            return True
        if key in layout.ids:
            return ids == "str" or not all(i < len(r) and is_int(r[i]) for r in data)
        return False

    types = {i: pa.string() if is_text(k, i) else pa.int64() for k, i in chosen.items()}
    delimiter = "," if kind == "csv" else ("\t" if b"\t" in sample else " ")
    names_f = [f"f{i}" for i in range(ncols)]
    table = None
    fast = kind == "csv" or (
        is_regular(sample) and all(t == pa.int64() for t in types.values())
    )
    if fast:
        opts = _options(kind, names_f, types, skip + hdr, delimiter)
        try:
            with _open(path, codec) as stream:
                table = pacsv.read_csv(stream, **opts)
        except pa.ArrowInvalid:
            table = None
        except OSError as exc:
            raise _corrupt(path, codec, exc) from exc
    if table is None:
        as_text = dict.fromkeys(types, pa.string())
        table = _careful(path, codec, kind, layout, picks, names_f, as_text, skip, hdr,
                         delimiter, names is not None)
    cols = {k: (shown[k], table.column(names_f[i])) for k, i in chosen.items()}

    def line_of(row: int) -> int:
        with _open(path, codec) as stream:
            for n, (line, _) in enumerate(data_rows(stream, kind)):
                if n == row + hdr:
                    return line
        return -1  # pragma: no cover - rows come from the same file

    return Gathered(cols=cols, nrows=table.num_rows, text_like=True, line_of=line_of,
                    where=where)


def _careful(path: pathlib.Path, codec: str | None, kind: str, layout: Layout,
             picks: Mapping[str, Any], names_f: list[str], types: Mapping[int, pa.DataType],
             skip: int, hdr: bool, delimiter: str, named: bool) -> pa.Table:
    """Parse again with every picked column as text (text files: normalised first)."""
    try:
        if kind == "csv":
            with _open(path, codec) as stream:
                return pacsv.read_csv(stream, **_options(kind, names_f, types, skip + hdr, ","))
        body = normalise(_read(path, codec)).lstrip(b"\n")
        if is_blank(body):
            raise pa.ArrowInvalid("no data rows")  # pragma: no cover - head had some
        return pacsv.read_csv(pa.py_buffer(body), **_options(kind, names_f, types, hdr, " "))
    except pa.ArrowInvalid as exc:
        _raise_field_count(path, codec, kind, layout, picks, len(names_f), hdr, named)
        raise InputError(f"cannot parse {path.name}: {exc}") from exc
    except OSError as exc:
        raise _corrupt(path, codec, exc) from exc


def _raise_field_count(path: pathlib.Path, codec: str | None, kind: str, layout: Layout,
                       picks: Mapping[str, Any], ncols: int, hdr: bool, named: bool) -> None:
    """Find the first data row with a wrong number of fields and raise (error path)."""
    with _open(path, codec) as stream:
        rows = data_rows(stream, kind)
        if hdr:
            next(rows, None)
        for row, (line, fields) in enumerate(rows):
            k = len(fields)
            if k == ncols:
                continue
            text = " ".join(fields)[:80]
            if k < layout.required:
                problem = f"has {k} field(s), fewer than the {layout.required} required fields"
            elif named:
                problem = f"has {k} fields but the header has {ncols}"
            else:
                problem = f"has {k} fields but the first data row has {ncols}"
            pos = min(k, ncols)
            column = label(layout, layout.keys[pos], picks) if pos < len(layout.keys) else None
            raise InputError(
                f"{path.name}: data row {problem} ({layout.describe()}): {text!r}",
                column=None if named and k >= layout.required else column,
                row=row,
                line=line,
            )


def _empty(layout: Layout, picks: Mapping[str, Any], where: str,
           keys: Sequence[str] | None = None, shown: Mapping[str, str] | None = None) -> Gathered:
    """Zero rows (an empty, comment-only or header-only file)."""
    keys = list(keys) if keys is not None else list(layout.keys[: layout.required])
    shown = shown or {k: label(layout, k, picks) for k in keys}
    return Gathered(cols={k: (shown[k], np.empty(0, np.int64)) for k in keys}, nrows=0,
                    text_like=True, where=where)


# --------------------------------------------------------------------------------------
# Parquet and Arrow IPC
# --------------------------------------------------------------------------------------


def read_parquet(path: pathlib.Path) -> pa.Table:
    import pyarrow.parquet as pq

    check_file(path)
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"cannot read Parquet file {str(path)!r}: truncated or corrupt ({exc})"
        ) from exc


def read_ipc(path: pathlib.Path) -> pa.Table:
    """An Arrow IPC file or stream (``.arrow``, ``.arrows``, ``.feather``, ``.ipc``)."""
    check_file(path)
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


def read_file(path: pathlib.Path, layout: Layout, picks: Mapping[str, Any],
              header: bool | None, ids: str) -> Gathered:
    """Read the layout's columns from a file of any supported format."""
    kind = file_kind(path)
    if kind in ("text", "csv"):
        return read_delimited(path, kind, layout, picks, header, ids)
    if header is not None:
        raise InputError(f"{path.name}: header= applies to text and CSV files only; "
                         f"{kind} files name their columns")
    table = read_parquet(path) if kind == "parquet" else read_ipc(path)
    g = gather_table(table, layout, picks, path.name)
    g.where = path.name
    return g

