"""Prefix ranges in lexicographically sorted key rows: the lookup of the query engine's runs.

A run of the query engine (:mod:`gpu_ivm.cq.lsm`) is an ``(n, k)`` int64 array whose rows are
sorted lexicographically. A lookup asks, for each probe row of ``p <= k`` values, the rows whose
first ``p`` columns equal it: a range ``[lo, hi)`` found by two binary searches of
O(p log n) each. :func:`prefix_bounds` is the per-probe body, shared unchanged by the CUDA twin
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

__all__ = ["prefix_bounds", "prefix_ranges"]


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
def prefix_bounds(keys, probes, q, p):
    """``(lo, hi)``: the rows of ``keys`` whose first ``p`` columns equal probe row ``q``."""
    lo = 0
    hi = keys.shape[0]
    while lo < hi:  # first row not below the probe
        mid = (lo + hi) >> 1
        if _below(keys, mid, probes, q, p, True):
            lo = mid + 1
        else:
            hi = mid
    first = lo
    hi = keys.shape[0]
    while lo < hi:  # first row above the probe
        mid = (lo + hi) >> 1
        if _below(keys, mid, probes, q, p, False):
            lo = mid + 1
        else:
            hi = mid
    return first, lo


@nb.njit(cache=True)
def _ranges(keys, probes, lo, hi):
    p = probes.shape[1]
    for q in range(probes.shape[0]):
        lo[q], hi[q] = prefix_bounds(keys, probes, q, p)


def prefix_ranges(keys: np.ndarray, probes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` per probe row: ``keys[lo[q]:hi[q]]`` are the rows that start with
    ``probes[q]`` (``keys`` sorted lexicographically; both int64, C-contiguous)."""
    m = probes.shape[0]
    lo = np.empty(m, np.int64)
    hi = np.empty(m, np.int64)
    if m:
        _ranges(np.ascontiguousarray(keys, dtype=np.int64),
                np.ascontiguousarray(probes, dtype=np.int64), lo, hi)
    return lo, hi
