"""Command-line options for reading inputs, shared by ``count``, ``replay`` and
``spark-replay``: :func:`add_input_options` registers them, :func:`input_options` turns them
into reader keyword arguments, :func:`show_input_notes` prints the readers' notes.

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> add_input_options(p)
>>> input_options(p.parse_args(["--no-header", "--src-col", "1", "--dst-col", "0"]))
{'src': 1, 'dst': 0, 'header': False, 'ids': 'auto'}
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from .errors import InputNote


def _column(text: str) -> str | int:
    """A column option: a 0-based position when it is a number, else a column name."""
    return int(text) if text.isdigit() else text


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """Register ``--header/--no-header``, ``--src-col``, ``--dst-col``, ``--sign-col`` and
    ``--string-ids`` on a subcommand's parser."""
    g = parser.add_argument_group(
        "input options", "how text and CSV files are read (Parquet and Arrow name their columns)")
    g.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="the first row of text/CSV inputs is (--header) or is not (--no-header) "
                        "a header; default: a first row of non-integers over integer data is a "
                        "header, one that parses like the data is data, and an unclear case "
                        "is an error")
    g.add_argument("--src-col", type=_column, default=None, metavar="COL",
                   help="the source-vertex column: a name, or a 0-based position "
                        "(default: src/source, else the first column)")
    g.add_argument("--dst-col", type=_column, default=None, metavar="COL",
                   help="the target-vertex column: a name, or a 0-based position "
                        "(default: dst/target, else the second column)")
    g.add_argument("--sign-col", type=_column, default=None, metavar="COL",
                   help="the sign column (+1 insert, -1 delete) of batch files: a name, or a "
                        "0-based position (default: sign, else the third column)")
    g.add_argument("--string-ids", action="store_true",
                   help="read every vertex id as a string (default: integer ids when every id "
                        "is an integer, string ids when none is, an error for a mix)")


def input_options(args: argparse.Namespace, *, sign: bool = False) -> dict[str, Any]:
    """Reader keyword arguments from the parsed options (``sign=True``: batch files)."""
    out: dict[str, Any] = {}
    for key in ("src", "dst") + (("sign",) if sign else ()):
        value = getattr(args, f"{key}_col", None)
        if value is not None:
            out[key] = value
    out["header"] = getattr(args, "header", None)
    out["ids"] = "str" if getattr(args, "string_ids", False) else "auto"
    return out


def in_file(name: str, error: Exception) -> str:
    """``"<name>: <error>"``, without naming the file twice when the reader already did.

    >>> in_file("b.csv", ValueError("b.csv: bad"))
    'b.csv: bad'
    """
    text = str(error)
    return text if text.startswith(f"{name}:") else f"{name}: {text}"


@contextlib.contextmanager
def show_input_notes() -> Iterator[None]:
    """Print every :class:`~gpu_ivm.errors.InputNote` as ``gpu-ivm: note: ...`` on stderr."""
    shown: set[str] = set()

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, InputNote):
            text = str(message)
            if text not in shown:
                shown.add(text)
                print(f"gpu-ivm: note: {text}", file=sys.stderr)
        else:
            previous(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", InputNote)
        previous = warnings.showwarning
        warnings.showwarning = show
        yield
