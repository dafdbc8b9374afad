"""The order that sorts rows (a, b, c) of ids lexicographically, for the change feed's
triangle rows (``changed_triangles`` of both free-query states).

NumPy's three-key ``lexsort`` took 62 ms for 236,000 rows here (one-off script, NumPy 2.4),
most of what ``last_changes()`` cost after a batch of 1,000 updates on R-MAT 16. Ids are
dense and the rows many per first id, so a counting sort by a places the rows in buckets in
one pass, and each bucket is sorted on one int64 key, b and c packed (ids are below 2³¹).
When the first ids span far more values than there are rows, NumPy's ``lexsort`` is used.

>>> import numpy as np
>>> triple_order(np.array([2, 1, 2, 1]), np.array([0, 5, 0, 3]), np.array([9, 1, 4, 7])).tolist()
[3, 1, 2, 0]
"""

from __future__ import annotations

import numba as nb
import numpy as np

SPAN_SLACK = 1 << 16  # a counting sort's buckets: at most 4 per row plus this many
SMALL = 16  # buckets of at most this many rows are sorted by insertion


@nb.njit(cache=True)
def _order(a, b, c, lo, span):
    n = a.shape[0]
    start = np.zeros(span + 1, np.int64)
    for i in range(n):
        start[a[i] - lo + 1] += 1
    for k in range(span):
        start[k + 1] += start[k]
    fill = start[:span].copy()
    perm = np.empty(n, np.int64)
    for i in range(n):
        k = a[i] - lo
        perm[fill[k]] = i
        fill[k] += 1
    key = np.empty(n, np.int64)
    for i in range(n):
        key[i] = (b[perm[i]] << 32) | c[perm[i]]
    for k in range(span):
        s, e = start[k], start[k + 1]
        if e - s > SMALL:
            sub = np.argsort(key[s:e])
            perm[s:e] = perm[s:e][sub]
        else:  # a few rows: insertion sort in place
            for i in range(s + 1, e):
                kk, pp = key[i], perm[i]
                j = i - 1
                while j >= s and key[j] > kk:
                    key[j + 1] = key[j]
                    perm[j + 1] = perm[j]
                    j -= 1
                key[j + 1] = kk
                perm[j + 1] = pp
    return perm


def rows_order(a, b, c, xp=np):
    """:func:`triple_order` for arrays of the array module ``xp``: on a device CuPy's
    ``lexsort`` (which takes the keys as one 2-D array, the last row first)."""
    return triple_order(a, b, c) if xp is np else xp.lexsort(xp.stack([c, b, a]))


def triple_order(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indexes that sort the rows (a[i], b[i], c[i]) of non-negative ids below 2³¹
    lexicographically (equal rows in any order)."""
    n = a.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo + 1 > 4 * n + SPAN_SLACK:
        return np.lexsort((c, b, a))
    return _order(np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64),
                  np.ascontiguousarray(c, np.int64), lo, hi - lo + 1)
