"""Group-and-sum over lexicographically sorted key rows: consolidate and marginalize.

The query engine (:mod:`gpu_ivm.cq`) keeps relations as ``(n, k)`` int64 key rows with an int64
multiplicity each. Two of its view-tree operators end in the same step over rows that are
already sorted:

- **consolidate**: after a sort, equal rows are summed and zero sums dropped (``p = k``);
- **marginalize** onto a column prefix: rows whose first ``p`` columns agree are summed into
  one row of those ``p`` columns, zero sums dropped.

:func:`reduce_sorted` does both in one pass. Its per-row bodies, :func:`starts_group` (is row
``r`` the first of its group) and :func:`segment_sum` (a group's exact sum), are shared
unchanged by the CUDA twin (:func:`gpu_ivm.kernels.cuda_lex.reduce_sorted`).

A sum is exact or refused: int64 additions wrap, and :func:`segment_sum` counts the wraps in
each direction; a group whose wraps do not cancel has a true sum outside int64 and raises
:class:`~gpu_ivm.errors.IntegerOverflowError` (a group whose partial sums leave the range but
whose total fits is summed exactly).

>>> import numpy as np
>>> keys = np.array([[1, 5], [1, 7], [2, 0], [2, 0], [3, 1]])
>>> k, m = reduce_sorted(keys, np.array([2, 3, 4, -4, 1]), 1)
>>> k.tolist(), m.tolist()
([[1], [3]], [5, 1])
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .int64_checks import I64_MAX, I64_MIN, add_overflows
from .jit import helper

__all__ = ["reduce_sorted", "segment_sum", "starts_group"]


@nb.njit(cache=True, inline="always")
def starts_group(keys, r, p):
    """Whether row ``r`` is the first of its group: row 0, or its first ``p`` columns differ
    from row ``r - 1``'s (compared without an early exit: one branch per row)."""
    if r == 0:
        return True
    d = 0
    for c in range(p):
        d |= keys[r, c] ^ keys[r - 1, c]
    return d != 0


@nb.njit(cache=True, inline="always")
def segment_sum(mult, lo, hi):
    """``(sum, exact)`` of ``mult[lo:hi]``: the sum modulo 2⁶⁴, and whether the true sum
    equals it (the additions that wrapped upwards and downwards cancel). A wrap is detected
    before the addition (:func:`~gpu_ivm.kernels.int64_checks.add_overflows`)."""
    s = np.int64(0)
    wraps = 0
    for i in range(lo, hi):
        v = mult[i]
        if not add_overflows(s, v):
            s += v
        elif v > 0:  # s + v - 2^64, written with no step outside int64
            s = (s - I64_MAX - 1) + (v - I64_MAX - 1)
            wraps += 1
        else:  # s + v + 2^64
            s = (s - I64_MIN) + (v - I64_MIN)
            wraps -= 1
    return s, wraps == 0


@helper
def _reduce(keys, mult, p, out_keys, out_mult, overflow):
    """One pass: a group is summed from its first row to the next group's first row."""
    n = keys.shape[0]
    w = 0
    r = 0
    while r < n:
        e = r + 1
        while e < n and not starts_group(keys, e, p):
            e += 1
        if e == r + 1:  # a group of one row (most of them in a consolidation)
            v, exact = mult[r], True
        else:
            v, exact = segment_sum(mult, r, e)
        if not exact and overflow[0] < 0:
            overflow[0] = r
        if v != 0:
            for c in range(p):
                out_keys[w, c] = keys[r, c]
            out_mult[w] = v
            w += 1
        r = e
    return w


def check_shapes(keys, mult, p: int) -> None:
    """Refuse keys that are not 2-D, a prefix wider than the keys, or one multiplicity per
    row missing (ValueError)."""
    if len(keys.shape) != 2 or not 0 <= p <= keys.shape[1] or keys.shape[0] != mult.shape[0]:
        raise ValueError(f"reduce_sorted: keys {keys.shape}, mult {mult.shape} and p = {p} "
                         "do not fit")


def overflow_error(keys: np.ndarray | None, row: int, p: int):
    """The error for the group starting at sorted row ``row`` whose sum leaves int64 (its key
    named when ``keys`` are on the host)."""
    from gpu_ivm.errors import IntegerOverflowError

    what = (f"the key {keys[row, :p].tolist()}" if keys is not None
            else f"the group at sorted row {row}")
    return IntegerOverflowError(f"a multiplicity would leave the int64 range (the sum for "
                                f"{what})")


def reduce_sorted(keys: np.ndarray, mult: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keys', mult')``: the groups of rows of ``keys`` (sorted lexicographically, at least
    on the first ``p`` columns) that agree on the first ``p`` columns, one row of those
    columns each with the group's summed multiplicity; zero sums dropped. A sum outside int64
    raises :class:`~gpu_ivm.errors.IntegerOverflowError`.

    >>> k, m = reduce_sorted(np.array([[4, 1], [4, 1], [5, 2]]), np.array([1, 1, 3]), 2)
    >>> k.tolist(), m.tolist()
    ([[4, 1], [5, 2]], [2, 3])
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    mult = np.ascontiguousarray(mult, dtype=np.int64)
    check_shapes(keys, mult, p)
    out_keys = np.empty((keys.shape[0], p), np.int64)
    out_mult = np.empty(keys.shape[0], np.int64)
    overflow = np.full(1, -1, np.int64)
    w = _reduce(keys, mult, p, out_keys, out_mult, overflow)
    if overflow[0] >= 0:
        raise overflow_error(keys, int(overflow[0]), p)
    return out_keys[:w], out_mult[:w]
