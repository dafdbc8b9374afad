"""One level of a worst-case optimal join (Generic Join) over sorted key columns.

The query engine (:mod:`gpu_ivm.cq.wcoj`) joins its relations variable by variable. After the
first ``d`` variables are bound, each partial tuple ``p`` holds, per relation, the range of the
relation's rows (sorted in the join's variable order) that agree with ``p`` on the variables
bound so far. Binding the next variable X intersects, per partial tuple, the X values of the
relations that contain X; in each such range those values are one sorted column.
:func:`extend` does that for every partial tuple in one pass: it walks the distinct values of
the smallest range (the candidates) and looks each one up in the other ranges by galloping
from a cursor that only moves forward (the candidates ascend), so a partial tuple costs
O(min range · k · log) and never more than its smallest relation allows: Generic Join's
bound, O(N^{ρ*}) candidates over a whole join (Ngo, Ré, Rudra, "Skew strikes back").

The columns of the ``k`` relations that contain X are concatenated into ``vals``; ranges are
offsets into it.

>>> import numpy as np
>>> vals = np.array([1, 2, 2, 5, 7,   2, 5, 5, 9])   # two relations' X columns, one range each
>>> lo, hi = np.array([[0], [5]]), np.array([[5], [9]])
>>> parent, val, nlo, nhi, n, work = extend_level(vals, lo, hi)
>>> val[:n].tolist(), nlo[:, :n].tolist(), nhi[:, :n].tolist(), work
([2, 5], [[1, 3], [5, 6]], [[3, 4], [6, 8]], 3)
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper

__all__ = ["check_extend", "extend_level", "extend_tuple"]


@nb.njit(cache=True, inline="always")
def _lower(vals, lo, hi, v):
    """The first index in [lo, hi) whose value is >= v (``hi`` if none), the values there
    being sorted: galloping from ``lo`` (steps 1, 2, 4, ...), then a binary search,
    O(log distance)."""
    step = 1
    while lo + step - 1 < hi and vals[lo + step - 1] < v:
        lo += step
        step <<= 1
    top = min(lo + step - 1, hi)
    while lo < top:
        mid = (lo + top) >> 1
        if vals[mid] < v:
            lo = mid + 1
        else:
            top = mid
    return lo


@nb.njit(cache=True, inline="always")
def _upper(vals, lo, hi, v):
    """The first index in [lo, hi) whose value is > v (``hi`` if none): galloping from lo."""
    step = 1
    while lo + step - 1 < hi and vals[lo + step - 1] <= v:
        lo += step
        step <<= 1
    top = min(lo + step - 1, hi)
    while lo < top:
        mid = (lo + top) >> 1
        if vals[mid] <= v:
            lo = mid + 1
        else:
            top = mid
    return lo


@nb.njit(cache=True, inline="always")
def extend_tuple(vals, lo, hi, p, cur, start, row, write, n, out_parent, out_val, out_lo,
                 out_hi):
    """The extensions of partial tuple p (a column of ``lo``/``hi``): the values present in
    every relation's range, in ascending order, each with the sub-range of every relation
    holding it. With ``write`` they are written from output ``n`` on (parent p, value,
    sub-ranges); without, only counted. ``cur``, ``start``: scratch of one entry per
    relation in their row ``row``. Returns ``(extensions, candidates visited)``.

    Shared unchanged by the CPU pass (one scratch row, every tuple in turn) and the CUDA
    twin (one thread and one scratch row per partial tuple, counting, then writing)."""
    k = lo.shape[0]
    s = 0
    for j in range(1, k):
        if hi[j, p] - lo[j, p] < hi[s, p] - lo[s, p]:
            s = j
    end = hi[s, p]
    found = 0
    work = 0
    if end <= lo[s, p]:
        return found, work
    for j in range(k):
        cur[row, j] = lo[j, p]
    i = lo[s, p]
    while i < end:
        v = vals[i]
        e = _upper(vals, i + 1, end, v)
        work += 1
        ok = True
        for j in range(k):
            if j == s:
                continue
            a = _lower(vals, cur[row, j], hi[j, p], v)
            cur[row, j] = a
            if a == hi[j, p] or vals[a] != v:
                ok = False
                break
            start[row, j] = a
            cur[row, j] = _upper(vals, a + 1, hi[j, p], v)
        if ok:
            if write:
                out_parent[n] = p
                out_val[n] = v
                for j in range(k):
                    if j == s:
                        out_lo[j, n] = i
                        out_hi[j, n] = e
                    else:
                        out_lo[j, n] = start[row, j]
                        out_hi[j, n] = cur[row, j]
                n += 1
            found += 1
        i = e
    return found, work


@helper
def _extend(vals, lo, hi, out_parent, out_val, out_lo, out_hi, cur, start, work):
    """Every partial tuple's extensions (:func:`extend_tuple`) in turn; ``cur``, ``start``:
    scratch of one row of one entry per relation; ``work[0]`` counts the candidates
    visited. Returns the number of values written."""
    n = 0
    for p in range(lo.shape[1]):
        found, w = extend_tuple(vals, lo, hi, p, cur, start, 0, True, n, out_parent, out_val,
                                out_lo, out_hi)
        n += found
        work[0] += w
    return n


def check_extend(vals, lo, hi) -> None:
    """Refuse ranges that do not fit (ValueError): ``lo`` and ``hi`` of one shape ``(k, P)``
    with ``k >= 1`` relations, ``vals`` 1-D."""
    if len(vals.shape) != 1 or len(lo.shape) != 2 or lo.shape != hi.shape or lo.shape[0] < 1:
        raise ValueError(f"extend_level: vals {vals.shape}, lo {lo.shape} and hi {hi.shape} "
                         "do not fit")


def extend_level(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """``(parent, val, new_lo, new_hi, n, work)``: the first ``n`` entries are the extensions
    of the partial tuples (columns of the ``(k, P)`` range arrays ``lo``, ``hi`` into
    ``vals``) by a value in all ``k`` of their ranges, in (parent, value) order, with the
    sub-ranges holding that value; ``work`` is the number of candidates visited (the distinct
    values of the smallest range of each partial tuple)."""
    vals = np.ascontiguousarray(vals, dtype=np.int64)
    lo = np.ascontiguousarray(lo, dtype=np.int64)
    hi = np.ascontiguousarray(hi, dtype=np.int64)
    check_extend(vals, lo, hi)
    k = lo.shape[0]
    cap = int((hi - lo).min(axis=0).clip(0).sum()) if lo.shape[1] else 0
    out_parent = np.empty(cap, np.int64)
    out_val = np.empty(cap, np.int64)
    out_lo = np.empty((k, cap), np.int64)
    out_hi = np.empty((k, cap), np.int64)
    work = np.zeros(1, np.int64)
    n = 0
    if cap:
        n = _extend(vals, lo, hi, out_parent, out_val, out_lo, out_hi,
                    np.empty((1, k), np.int64), np.empty((1, k), np.int64), work)
    return out_parent, out_val, out_lo, out_hi, n, int(work[0])
