"""Argument types of the command line: each checks one option's value when it is parsed, so a
bad value is a one-line usage error (exit 2) naming the option, never a traceback.

Examples
--------
>>> epsilon_arg("1/3"), positive_int("4")
('1/3', 4)
>>> epsilon_arg("2")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: '2' is not a fraction in [0, 1] or auto (e.g. 1/2, 0.5, 0, 1, auto)
>>> positive_int("0")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: '0' is not a whole number of at least 1
"""

from __future__ import annotations

import argparse

from .errors import InputError

__all__ = ["BACKENDS", "epsilon_arg", "nonnegative_int", "positive_int"]

BACKENDS = ("cpu", "cuda", "auto")


def epsilon_arg(value: str) -> str:
    """An IVM^eps exponent: ``auto`` or a fraction in [0, 1] such as ``1/2``, ``0.5``, ``0`` or
    ``1``; returned as given (the engine parses it exactly)."""
    from .rational import parse_epsilon

    if value.strip().lower() == "auto":
        return value

    try:
        parse_epsilon(value)
    except InputError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a fraction in [0, 1] or auto (e.g. 1/2, 0.5, 0, 1, auto)") from None
    return value


def _int(value: str, least: int, words: str) -> int:
    try:
        n = int(value, 10)
    except ValueError:
        n = None
    if n is None or n < least:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of {words}")
    return n


def positive_int(value: str) -> int:
    """A whole number >= 1 (``--snapshot-every``, ``--batch-size``, ...)."""
    return _int(value, 1, "at least 1")


def nonnegative_int(value: str) -> int:
    """A whole number >= 0 (``--shards``: 0 means one engine)."""
    return _int(value, 0, "at least 0")
