"""The header rule: is the first row of a text or CSV file a header or data?

Unless the caller says (``header=True``/``False``, ``--header``/``--no-header``):

* a first row whose fields parse like the data rows (integers where the rows below hold
  integers) is data;
* a first row of non-integers over integer columns is a header;
* when no column holds integers throughout (string ids), a first row made only of usual
  column names (``src``, ``dst``, ``source``, ``target``, ``u``, ``v``, ``from``, ``to``,
  ``weight``, ``time``, ``sign``, ``mult``, ``rel``, ... or a name passed as a column option)
  is a header;
* anything else is refused with an :class:`~gpu_ivm.errors.InputError`: a row is never dropped
  or kept on a guess.

The rows below the first that it looks at are the next 64 data rows (those within the first
16 KiB of the file; :data:`gpu_ivm.io.text.PEEK_BYTES`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gpu_ivm.errors import InputError

from .layout import HEADER_WORDS

_INT = re.compile(r"[+-]?[0-9]+")


def is_int(token: str) -> bool:
    """True for a decimal integer token (one optional sign, no blanks)."""
    return _INT.fullmatch(token) is not None


def has_header(
    rows: Sequence[Sequence[str]],
    header: bool | None,
    *,
    where: str,
    line: int,
    extra_words: Iterable[str] = (),
) -> bool:
    """Apply the header rule to a file's first rows (``rows[0]`` is the candidate header).

    ``where`` names the file and ``line`` is the candidate's 1-based line, for the message.
    """
    if header is not None:
        return bool(header)
    if not rows:
        return False
    first, rest = rows[0], rows[1:]
    int_cols = [
        j for j in range(len(first)) if rest and all(j < len(r) and is_int(r[j]) for r in rest)
    ]
    if int_cols:
        ints = [is_int(first[j]) for j in int_cols]
        if all(ints):
            return False
        if not any(ints):
            return True
    elif not rest and all(is_int(f) for f in first):
        return False
    else:
        words = HEADER_WORDS | {w.strip().lower() for w in extra_words}
        if all(f.strip().lower() in words for f in first):
            return True
    shown = " ".join(first)[:80]
    raise InputError(
        f"{where}: cannot tell whether line {line} (1-based), {shown!r}, is a header or data; "
        "say which with header=True or header=False (--header or --no-header on the command "
        "line)"
    )
