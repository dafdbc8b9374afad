"""Text (SNAP style) and CSV files, read with ``pyarrow.csv`` from a (decompressing) stream.

A first block (at least :data:`PEEK_BYTES`) is looked at to skip the comment lines at the top,
apply the header rule (:mod:`.header`), pick the columns (:mod:`.layout`) and choose their
types; then the whole file is parsed once with those types. A text file with irregular blanks
or with comment lines below the top, or whose typed parse fails, is read again as one column
of whole lines split with pyarrow compute kernels (:func:`text_rows`); a CSV file is parsed
again with every picked column as text. These slower reads also find field-count errors and
the 1-based line of a bad row.
"""

from __future__ import annotations

import csv
import io
import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from gpu_ivm.errors import InputError

from .files import check_file, compression, corrupt, open_stream, peek
from .header import has_header, is_int
from .layout import Gathered, Layout, choose, label, note_ignored

PEEK_BYTES = 1 << 14
"""How much of a text or CSV file is looked at before it is parsed (more when the comment
lines at its top fill that)."""
_SAMPLE_ROWS = 64
def text_rows(source: Callable[[], Any],
              where: str) -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]:
    """Every data row of a text file: ``(fields, first, count, line)``, the fields of all data
    rows in one array, each row's first field and number of fields, and its 1-based line.

    ``source()`` opens the file. Runs of spaces and tabs separate fields; blank lines and lines
    whose first non-blank byte is ``#`` or ``%`` are not data rows. Lines end with LF, CRLF or
    CR. The file is read as one column of whole lines, split at a control character that the
    file does not hold.
    """
    for delimiter in "\x1f\x1e\x01":
        options = {
            "read_options": pacsv.ReadOptions(column_names=["line"]),
            "parse_options": pacsv.ParseOptions(delimiter=delimiter, quote_char=False,
                                                ignore_empty_lines=False),
            "convert_options": pacsv.ConvertOptions(column_types={"line": pa.large_binary()},
                                                    null_values=[]),
        }
        try:
            with source() as stream:
                lines = pacsv.read_csv(stream, **options).column(0).combine_chunks()
            break
        except pa.ArrowInvalid as exc:
            error = exc
    else:
        raise InputError(f"{where}: cannot parse: {error}") from error
    parts = pc.split_pattern(pc.replace_substring(lines, "\t", " "), " ")
    fields = pc.list_flatten(parts)
    kept = pc.greater(pc.binary_length(fields), 0)
    fields = fields.filter(kept)
    count = np.bincount(pc.list_parent_indices(parts).filter(kept).to_numpy(),
                        minlength=len(lines))
    first = np.cumsum(count) - count
    data = count > 0
    heads = fields.take(first[data])
    comment = pc.or_(pc.starts_with(heads, "#"), pc.starts_with(heads, "%"))
    data[data] = ~comment.to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(data)
    return fields, first[rows], count[rows], rows + 1


def _row(fields: pa.Array, first: int, count: int) -> list[str]:
    return [f.decode("utf-8", "replace") for f in fields.slice(first, count).to_pylist()]


def csv_rows(stream: pa.NativeFile) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(1-based line, fields)`` for every non-empty CSV row (error path only)."""
    reader = csv.reader(io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=""))
    start = 1
    for fields in reader:
        if fields:
            yield start, fields
        start = reader.line_num + 1


def is_regular(head: bytes) -> bool:
    """True when text can go straight to the delimited parser: one kind of blank, never two
    in a row, none at a line's ends, no comment line."""
    if b"\t" in head and b" " in head:
        return False
    for d in (b"\t", b" "):
        if d + d in head or b"\n" + d in head or d + b"\n" in head or d + b"\r" in head:
            return False
    return not (head[:1] in (b" ", b"\t") or b"\n#" in head or b"\n%" in head)


def _first_rows(path: pathlib.Path, codec: str | None,
                kind: str) -> tuple[int, list[list[str]], bytes, bool]:
    """(lines before the first data row, fields of the first data rows, their bytes, whether
    the whole file was looked at)."""
    size = PEEK_BYTES
    while True:
        head = peek(path, codec, size + 1)
        complete = len(head) <= size
        if not complete:  # keep whole lines only
            head = head[: max(head.rfind(b"\n"), head.rfind(b"\r"), -1) + 1]
        if not head.removeprefix(b"\xef\xbb\xbf"):  # pyarrow refuses an empty file
            skip, rows, lines = 0, [], []
        elif kind == "csv":
            lines = head.removeprefix(b"\xef\xbb\xbf").splitlines()
            skip = next((i for i, s in enumerate(lines) if s.strip()), len(lines))
            body = b"\n".join(lines[skip : skip + 2 * _SAMPLE_ROWS]).decode("utf-8", "replace")
            rows = [r for r in csv.reader(body.split("\n")) if r][:_SAMPLE_ROWS]
        else:
            fields, first, count, numbers = text_rows(lambda b=head: pa.BufferReader(b),
                                                      path.name)
            skip = int(numbers[0]) - 1 if numbers.size else 0
            rows = [_row(fields, f, c) for f, c in zip(first[:_SAMPLE_ROWS], count)]
            lines = head.splitlines()
        if rows or complete:
            return skip, rows, b"\n".join(lines[skip : skip + 2 * _SAMPLE_ROWS]), complete
        size *= 8


def _field_count_error(where: str, layout: Layout, picks: Mapping[str, Any], fields: list[str],
                       ncols: int, row: int, line: int, named: bool) -> InputError:
    k = len(fields)
    if k < layout.required:
        problem = f"has {k} field(s), fewer than the {layout.required} required fields"
    elif named:
        problem = f"has {k} fields but the header has {ncols}"
    else:
        problem = f"has {k} fields but the first data row has {ncols}"
    pos = min(k, ncols)
    column = label(layout, layout.keys[pos], picks) if pos < len(layout.keys) else None
    return InputError(
        f"{where}: data row {problem} ({layout.describe()}): {' '.join(fields)[:80]!r}",
        column=None if named and k >= layout.required else column, row=row, line=line,
    )


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
    skip, rows, sample, complete = _first_rows(path, codec, kind)
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
        if key in ("src", "dst"):
            return ids == "str" or not all(i < len(r) and is_int(r[i]) for r in data)
        return False

    types = {i: pa.string() if is_text(k, i) else pa.int64() for k, i in chosen.items()}
    names_f = [f"f{i}" for i in range(ncols)]
    named = names is not None

    def parse(types: Mapping[int, pa.DataType], delimiter: str) -> pa.Table:
        options = {
            "read_options": pacsv.ReadOptions(skip_rows=skip + hdr, column_names=names_f),
            "parse_options": pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=True,
                                                quote_char='"' if kind == "csv" else False),
            "convert_options": pacsv.ConvertOptions(
                column_types={names_f[i]: t for i, t in types.items()},
                include_columns=[names_f[i] for i in sorted(types)],
                null_values=[""] if kind == "csv" else [], strings_can_be_null=kind == "csv",
                quoted_strings_can_be_null=False),
        }
        with open_stream(path, codec) as stream:
            return pacsv.read_csv(stream, **options)

    def text_lines() -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]:
        return text_rows(lambda: open_stream(path, codec), where)

    def csv_line(row: int) -> int:
        with open_stream(path, codec) as stream:
            return next(line for n, (line, _) in enumerate(csv_rows(stream)) if n == row + hdr)

    def gathered(columns: Mapping[str, Any], line_of: Callable[[int], int]) -> Gathered:
        return Gathered(cols={k: (shown[k], columns[k]) for k in chosen}, text_like=True,
                        line_of=line_of, where=where)

    try:
        table = None
        if kind == "csv" or (is_regular(sample) and pa.string() not in types.values()):
            try:  # the fast path: one typed parse
                table = parse(types, "," if kind == "csv" else "\t" if b"\t" in sample else " ")
            except pa.ArrowInvalid:
                pass
        if table is None and kind == "csv":
            try:
                table = parse(dict.fromkeys(types, pa.string()), ",")
            except pa.ArrowInvalid as exc:
                with open_stream(path, codec) as stream:
                    bad = next(((n - hdr, line, f) for n, (line, f) in
                                enumerate(csv_rows(stream)) if len(f) != ncols), None)
                if bad is None:
                    raise InputError(f"cannot parse {where}: {exc}") from exc
                raise _field_count_error(where, layout, picks, bad[2], ncols, bad[0], bad[1],
                                         named) from None
        if table is not None:
            columns = {k: table.column(names_f[i]) for k, i in chosen.items()}
            return gathered(columns, csv_line if kind == "csv" else
                            lambda row: int(text_lines()[3][row + hdr]))
        fields, first, count, numbers = text_lines()
        bad = np.flatnonzero(count != ncols)
        if bad.size:
            r = int(bad[0])
            raise _field_count_error(where, layout, picks, _row(fields, first[r], count[r]),
                                     ncols, r - hdr, int(numbers[r]), named)
        try:
            columns = {k: pc.cast(fields.take(first[hdr:] + i), pa.large_string())
                       for k, i in chosen.items()}
        except pa.ArrowInvalid as exc:
            raise InputError(f"{where}: a picked column is not valid UTF-8 text: {exc}") from exc
        return gathered(columns, lambda row: int(numbers[row + hdr]))
    except OSError as exc:
        raise corrupt(path, codec, exc) from exc


def _empty(layout: Layout, picks: Mapping[str, Any], where: str,
           keys: list[str] | None = None, shown: Mapping[str, str] | None = None) -> Gathered:
    """Zero rows (an empty, comment-only or header-only file)."""
    keys = keys if keys is not None else list(layout.keys[: layout.required])
    shown = shown or {k: label(layout, k, picks) for k in keys}
    return Gathered(cols={k: (shown[k], np.empty(0, np.int64)) for k in keys}, text_like=True,
                    where=where)
