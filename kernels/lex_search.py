"""Prefix ranges in lexicographically sorted key rows: the lookup of the query engine's runs.

A run of the query engine (:mod:`gpu_ivm.cq.lsm`) is an ``(n, k)`` int64 array whose rows are
sorted lexicographically. A lookup asks, for each probe row of ``p <= k`` values, the rows whose
first ``p`` columns equal it: a range ``[lo, hi)``, its start found by a binary search of
O(p log n) and its end by galloping from the start (O(p log |range|)).
:func:`prefix_bounds` is the per-probe body, shared unchanged by the CUDA twin
(:mod:`gpu_ivm.kernels.cuda_lex`).

>>> import numpy as np
>>> keys = np.array([[1, 5], [2, 0], [2, 7], [3, 1]])
>>> lo, hi = prefix_ranges(keys, np.array([[2], [4], [0]]))
>>> lo.tolist(), hi.tolist()
([1, 4, 0], [3, 4, 0])
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .int64_checks import add_overflows
from .jit import helper

__all__ = ["fences", "merge_sorted", "prefix_bounds", "prefix_ranges"]


@nb.njit(cache=True, inline="always")
def _below(keys, r, probes, q, p, strict):
    """Whether row r's first p columns are < probe q (``strict``) or <= it (otherwise)."""
    for c in range(p):
        a = keys[r, c]
        b = probes[q, c]
        if a < b:
            return True
        if a > b:
            return False
    return not strict


@nb.njit(cache=True, inline="always")
def _bisect(keys, probes, q, p, lo, hi, strict):
    """The first row in [lo, hi) not below probe q (see :func:`_below`), or hi."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if _below(keys, mid, probes, q, p, strict):
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, inline="always")
def _gallop(keys, probes, q, p, lo, strict):
    """The first row at or after ``lo`` that is not below probe q (``strict``: not < it, the
    lower bound; otherwise not <= it, the upper bound), rows before ``lo`` being below it:
    steps of 1, 2, 4... then a binary search between the last two, O(p log distance)."""
    n = keys.shape[0]
    hi = n
    step = 1
    while lo + step - 1 < n:
        j = lo + step - 1
        if not _below(keys, j, probes, q, p, strict):
            hi = j
            break
        lo = j + 1
        step <<= 1
    return _bisect(keys, probes, q, p, lo, hi, strict)


@nb.njit(cache=True, inline="always")
def prefix_bounds(keys, probes, q, p):
    """``(lo, hi)``: the rows of ``keys`` whose first ``p`` columns equal probe row ``q``
    (a binary search for the start, galloping from there to the end)."""
    lo = _bisect(keys, probes, q, p, 0, keys.shape[0], True)
    return lo, _gallop(keys, probes, q, p, lo, False)


@nb.njit(cache=True, inline="always")
def _probe_not_below(probes, q, p):
    """Whether probe q's first p columns are >= probe q - 1's."""
    for c in range(p):
        if probes[q, c] != probes[q - 1, c]:
            return probes[q, c] > probes[q - 1, c]
    return True


@helper
def _ranges(keys, probes, lo, hi):
    """A probe not below the one before it starts its search where that one's range did
    (sorted probes, as the rows of a sorted delta often are, walk the run once); any other
    probe searches the whole run."""
    p = probes.shape[1]
    for q in range(probes.shape[0]):
        if q > 0 and _probe_not_below(probes, q, p):
            first = _gallop(keys, probes, q, p, lo[q - 1], True)
            lo[q], hi[q] = first, _gallop(keys, probes, q, p, first, False)
        else:
            lo[q], hi[q] = prefix_bounds(keys, probes, q, p)


FENCE_STEP = 64  # a fence row every this many key rows
FENCE_MIN = 1 << 14  # runs of fewer rows are searched without fences


def fences(keys: np.ndarray) -> np.ndarray | None:
    """Every ``FENCE_STEP``-th row of a large run (None for a small one): a copy small enough
    for the cache, searched first so that the search in the run itself stays within one
    block of rows (a binary search over a run of millions of rows misses the cache at almost
    every step)."""
    if keys.shape[0] < FENCE_MIN:
        return None
    return np.ascontiguousarray(keys[::FENCE_STEP])


@helper
def _ranges_fenced(keys, fence, step, probes, lo, hi):
    p = probes.shape[1]
    n = keys.shape[0]
    for q in range(probes.shape[0]):
        a = _bisect(fence, probes, q, p, 0, fence.shape[0], True)  # first fence not below
        start = (a - 1) * step + 1 if a > 0 else 0  # the run's first row not below the
        start = _bisect(keys, probes, q, p, start, min(a * step, n), True)  # probe: in there
        lo[q] = start
        hi[q] = _gallop(keys, probes, q, p, start, False)


def prefix_ranges(keys: np.ndarray, probes: np.ndarray,
                  fence: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` per probe row: ``keys[lo[q]:hi[q]]`` are the rows that start with
    ``probes[q]`` (``keys`` sorted lexicographically; both int64, C-contiguous). ``fence``:
    :func:`fences` of ``keys``, if it has them.

    >>> keys = np.arange(40000).reshape(20000, 2)
    >>> lo, hi = prefix_ranges(keys, np.array([[18], [19], [39998]]), fences(keys))
    >>> lo.tolist(), hi.tolist()
    ([9, 10, 19999], [10, 10, 20000])
    """
    m = probes.shape[0]
    lo = np.empty(m, np.int64)
    hi = np.empty(m, np.int64)
    if m:
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        probes = np.ascontiguousarray(probes, dtype=np.int64)
        if fence is None:
            _ranges(keys, probes, lo, hi)
        else:
            _ranges_fenced(keys, fence, FENCE_STEP, probes, lo, hi)
    return lo, hi


@nb.njit(cache=True, inline="always")
def _compare_rows(a, i, b, j):
    """-1, 0 or 1 as row i of ``a`` is below, equal to or above row j of ``b``."""
    for c in range(a.shape[1]):
        x = a[i, c]
        y = b[j, c]
        if x < y:
            return -1
        if x > y:
            return 1
    return 0


@helper
def _merge(k1, m1, k2, m2, keys, mult, overflow):
    i = 0
    j = 0
    n = 0
    while i < k1.shape[0] or j < k2.shape[0]:
        if j == k2.shape[0]:
            c = -1
        elif i == k1.shape[0]:
            c = 1
        else:
            c = _compare_rows(k1, i, k2, j)
        if c < 0:
            src, r, v = 0, i, m1[i]
            i += 1
        elif c > 0:
            src, r, v = 1, j, m2[j]
            j += 1
        else:
            a = m1[i]
            b = m2[j]
            if add_overflows(a, b):  # tested before the addition (see int64_checks)
                overflow[0] = i
            v = a + b
            src, r = 0, i
            i += 1
            j += 1
        if v == 0:
            continue
        for col in range(keys.shape[1]):
            keys[n, col] = k1[r, col] if src == 0 else k2[r, col]
        mult[n] = v
        n += 1
    return n


def merge_sorted(k1: np.ndarray, m1: np.ndarray, k2: np.ndarray,
                 m2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two runs of unique, lexicographically sorted key rows with multiplicities, merged into
    one: equal keys summed, zero sums dropped; one linear pass. A sum outside int64 raises
    :class:`~gpu_ivm.errors.IntegerOverflowError`.

    >>> k, m = merge_sorted(np.array([[1, 2], [3, 4]]), np.array([1, 2]),
    ...                     np.array([[1, 2], [2, 0]]), np.array([-1, 5]))
    >>> k.tolist(), m.tolist()
    ([[2, 0], [3, 4]], [5, 2])
    """
    cols = k1.shape[1]
    keys = np.empty((k1.shape[0] + k2.shape[0], cols), np.int64)
    mult = np.empty(k1.shape[0] + k2.shape[0], np.int64)
    overflow = np.full(1, -1, np.int64)
    n = _merge(np.ascontiguousarray(k1, dtype=np.int64), np.ascontiguousarray(m1, np.int64),
               np.ascontiguousarray(k2, dtype=np.int64), np.ascontiguousarray(m2, np.int64),
               keys, mult, overflow)
    if overflow[0] >= 0:
        from gpu_ivm.errors import IntegerOverflowError

        i = int(overflow[0])
        raise IntegerOverflowError(f"a multiplicity would leave the int64 range (key "
                                   f"{k1[i].tolist()})")
    return keys[:n], mult[:n]
