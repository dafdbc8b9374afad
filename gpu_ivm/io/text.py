"""Plain-text (SNAP style) files: the careful path for irregular whitespace and comments, and
the line scanner that turns 0-based data rows into 1-based file lines on the error path.

The fast path reads a regular file (one delimiter, comments only at the top) straight with
pyarrow's CSV reader; a file it cannot take comes here, is normalised with vectorised numpy
passes and is parsed again.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

_NON_BLANK = re.compile(rb"[^ \t\r\n]")
COMMENT_BYTES = (b"#", b"%")


def is_blank(body: bytes) -> bool:
    """True if the bytes hold only blanks and newlines (without copying them)."""
    return _NON_BLANK.search(body) is None


def is_regular(head: bytes) -> bool:
    """True when a text block can go straight to the delimited parser: one kind of blank,
    never two in a row, none at a line's ends, no comment line."""
    if b"\t" in head and b" " in head:
        return False
    for d in (b"\t", b" "):
        if d + d in head or b"\n" + d in head or d + b"\n" in head or d + b"\r" in head:
            return False
    return not (head[:1] in (b" ", b"\t") or b"\n#" in head or b"\n%" in head)


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


def normalise(data: bytes) -> bytes:
    """One space between fields, no blank or comment lines left that could pass for data."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if not data:
        return data
    return _drop_comment_lines(_collapse_whitespace(data))


def split_fields(line: str) -> list[str]:
    """The fields of a text line as the parser sees them: split at spaces and tabs only."""
    return [f for f in line.rstrip("\r\n").replace("\t", " ").split(" ") if f]


def data_rows(stream: pa.NativeFile, kind: str) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(1-based line, fields)`` for every data row (the header row included).

    Slow (Python per line): only for error messages.
    """
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
    if kind == "csv":
        reader = csv.reader(text)
        start = 1
        for fields in reader:
            if fields:
                yield start, fields
            start = reader.line_num + 1
        return
    for lineno, line in enumerate(text, 1):
        row = split_fields(line)
        if row and not row[0].startswith(("#", "%")):
            yield lineno, row
