"""Host kernels that turn a graph batch's rows into the engine's consolidated updates.

A batch of edge rows ``(a, b, sign)`` (dense ids) becomes sorted unique packed keys with their
net signs, checked against set semantics and renumbered so that new vertex ids stay dense. The
steps were a few dozen NumPy calls of a few microseconds each (most of the host time of a batch
of 10³ beyond the count kernels); here they are three passes, with NumPy's own (vectorized)
argsort between them. The batch is prepared on the host for every backend (it goes to the
device once, validated), so these are CPU kernels only.

>>> ids = np.array([3, 1, 3, 2, 2, 0])  # rows (3,2), (1,2), (3,0): a's then b's
>>> key = pair_keys(ids, 3, False)
>>> [(int(k >> 32), int(k & 0xFFFFFFFF)) for k in key]
[(2, 3), (1, 2), (0, 3)]
>>> gkey, net, starts, known = sum_groups(key, np.argsort(key), np.array([1, 1, -1]), 3)
>>> net.tolist(), starts.tolist(), known.tolist()
([-1, 1, 1], [0, 1, 2], [1])
"""

from __future__ import annotations

import numba as nb
import numpy as np

LO_MASK = (1 << 32) - 1


@nb.njit(cache=True, inline="always")
def _edge_key(a, b, directed):
    """The packed key of edge (a, b): ``a << 32 | b``, undirected edges as (min, max)."""
    if not directed and b < a:
        a, b = b, a
    return (a << 32) | b


@nb.njit(cache=True)
def pair_keys(ids, m, directed):
    """Packed keys ``a << 32 | b`` of the rows (ids[i], ids[m + i]); undirected rows are
    ordered so that a < b (one key per edge)."""
    out = np.empty(m, np.int64)
    for i in range(m):
        out[i] = _edge_key(ids[i], ids[m + i], directed)
    return out


@nb.njit(cache=True)
def sum_groups(key, order, sign, n0):
    """The distinct keys of ``key[order]`` (sorted), the sum of their rows' signs, the start of
    each group in ``order``, and the indexes of the groups whose two ids are both below ``n0``
    (known vertices: their edge may be stored)."""
    m = key.shape[0]
    gkey = np.empty(m, np.int64)
    net = np.empty(m, np.int64)
    starts = np.empty(m, np.int64)
    known = np.empty(m, np.int64)
    g = -1
    nk = 0
    prev = -1
    for t in range(m):
        i = order[t]
        k = key[i]
        if t == 0 or k != prev:
            g += 1
            gkey[g] = k
            net[g] = 0
            starts[g] = t
            if (k >> 32) < n0 and (k & LO_MASK) < n0:
                known[nk] = g
                nk += 1
            prev = k
        net[g] += sign[i]
    return gkey[: g + 1], net[: g + 1], starts[: g + 1], known[:nk]


@nb.njit(cache=True)
def used_new_ids(gkey, n0):
    """The sorted distinct ids at or above ``n0`` (vertices new to the engine) in ``gkey``."""
    top = n0
    for i in range(gkey.shape[0]):
        top = max(top, (gkey[i] >> 32) + 1, (gkey[i] & LO_MASK) + 1)
    seen = np.zeros(top - n0, np.bool_)
    for i in range(gkey.shape[0]):
        a = gkey[i] >> 32
        b = gkey[i] & LO_MASK
        if a >= n0:
            seen[a - n0] = True
        if b >= n0:
            seen[b - n0] = True
    return np.flatnonzero(seen) + n0


@nb.njit(cache=True)
def renumber(gkey, used, n0, directed):
    """``gkey`` with the new ids ``used`` (sorted) renumbered to n0, n0 + 1, ... (undirected
    keys ordered again so that a < b), and the order that sorts the result."""
    remap = np.full(used[-1] - n0 + 1, -1, np.int64)
    for j in range(used.shape[0]):
        remap[used[j] - n0] = n0 + j
    out = np.empty(gkey.shape[0], np.int64)
    for i in range(gkey.shape[0]):
        a = gkey[i] >> 32
        b = gkey[i] & LO_MASK
        if a >= n0:
            a = remap[a - n0]
        if b >= n0:
            b = remap[b - n0]
        out[i] = _edge_key(a, b, directed)
    return out


@nb.njit(cache=True)
def both_orientations(gkey, net, tkey, torder):
    """The symmetric form of an undirected batch: the sorted keys ``gkey`` (a < b) and their
    transposes ``tkey`` (sorted by ``torder``) merged into one sorted array, with the net
    signs alongside."""
    n = gkey.shape[0]
    keys = np.empty(2 * n, np.int64)
    vals = np.empty(2 * n, np.int64)
    i = 0
    j = 0
    for w in range(2 * n):
        if j >= n or (i < n and gkey[i] < tkey[torder[j]]):
            keys[w] = gkey[i]
            vals[w] = net[i]
            i += 1
        else:
            keys[w] = tkey[torder[j]]
            vals[w] = net[torder[j]]
            j += 1
    return keys, vals


# the transposes are put in order by a counting sort over their first key when its range is
# at most this many times the batch (O(n + range)); else by a comparison sort
COUNTING_SORT_RANGE = 4


@nb.njit(cache=True)
def transpose_order(gkey):
    """The order that sorts the transposes (b, a) of the sorted unique keys ``gkey``
    (a, b), by a stable counting sort on b: ``gkey`` is sorted by a, so the keys with one b
    come in increasing a and the stable order is the sorted one. Returns None when b's range
    exceeds ``COUNTING_SORT_RANGE`` times the batch (the caller sorts by comparison)."""
    n = gkey.shape[0]
    hi = 0
    for i in range(n):
        b = gkey[i] & LO_MASK
        if b > hi:
            hi = b
    if hi + 1 > COUNTING_SORT_RANGE * n:
        return None
    start = np.zeros(hi + 2, np.int64)
    for i in range(n):
        start[(gkey[i] & LO_MASK) + 1] += 1
    for x in range(1, hi + 2):
        start[x] += start[x - 1]
    order = np.empty(n, np.int64)
    for i in range(n):
        b = gkey[i] & LO_MASK
        order[start[b]] = i
        start[b] += 1
    return order


@nb.njit(cache=True)
def symmetric_delta(gkey, net):
    """:func:`both_orientations` of the sorted unique undirected keys ``gkey`` (a < b) and
    their transposes, which are formed and sorted here (one call instead of three): by a
    counting sort on their first key where its range is small against the batch
    (:func:`transpose_order`; a batch of 10⁵ on R-MAT 16), else by ``np.argsort``."""
    n = gkey.shape[0]
    tkey = np.empty(n, np.int64)
    for i in range(n):
        tkey[i] = ((gkey[i] & LO_MASK) << 32) | (gkey[i] >> 32)
    order = transpose_order(gkey) if n else None
    if order is None:
        order = np.argsort(tkey)
    return both_orientations(gkey, net, tkey, order)
