"""Host kernels that turn a graph batch's rows into the engine's consolidated updates.

A batch of edge rows ``(a, b, sign)`` (dense ids) becomes sorted unique packed keys with their
net signs, checked against set semantics and renumbered so that new vertex ids stay dense. The
steps were a few dozen NumPy calls of a few microseconds each (most of the host time of a batch
of 10³ beyond the count kernels); here they are three passes, with a radix sort of the packed
keys between them (:func:`packed_order`). This is how the host backend prepares every batch,
and the cuda backend a batch given on the host below ``DEVICE_PREP_MIN`` rows (it then goes to
the device once, prepared).

The second half of the module is the device preparation's steps (:mod:`gpu_ivm.device_batch`:
a batch held in device memory, or a large one): the per-row and per-run helpers that the
CUDA kernels of :mod:`gpu_ivm.kernels.cuda_batch_prep` call, and their serial CPU twins
``prep_rows``, ``prep_groups``, ``prep_scatter``.

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

from . import hashmap

LO_MASK = (1 << 32) - 1
# the key of a row that forms no edge (self-loop, key not known yet): sorted after every edge
SENTINEL_KEY = (1 << 63) - 1

# The device preparation (:mod:`gpu_ivm.device_batch`): its ``stats`` slots (int64; a first
# bad row is kept as m - row, 0 for none, by a maximum) and the row pass's ``mode`` bits. The
# CPU twins below (:func:`prep_rows`, :func:`prep_groups`, :func:`prep_scatter`) run the same
# steps serially, for the tests and for any backend without a device.
BAD_SIGN = 0  # m - first row whose sign is not +1 / -1
BAD_KEY = 1  # m - first row with an unsigned 64-bit key above the int64 range
LOOPS = 2  # rows with src == dst
UNKNOWN = 3  # rows with a key the table does not know
BIG = 4  # runs whose net sign is beyond ±1 (a conflict under set semantics, for sure)
NEW_DELETE = 5  # runs with a net delete of an edge with a new vertex (absent: a conflict)
USED_NEW = 6  # distinct new ids in kept runs
KEPT = 7  # kept runs (net sign != 0), every orientation
PAIRS = 8  # kept runs with a < b (undirected), or every kept run (directed)
DELETES = 9  # kept runs with a negative net sign, every orientation
N_STATS = 16
DIRECTED = 1  # mode: a directed batch (one key per row)
PROBE = 2  # mode: look the keys up (else the ids are given)
KEYS_U64 = 4  # mode: the key columns are uint64 viewed as int64 (negative: out of range)
SIGN_U64 = 8  # mode: the sign column is uint64 viewed as int64 (-1 there is 2**64 - 1)
# mode: row keys carry their sign in the lowest bit (key << 1 | sign > 0), so that one sort of
# the keys alone orders the rows (no sort by key of a second array); needs ids below 2**30
PACKED = 16
PACKED_IDS = 1 << 30


@nb.njit(cache=True, inline="always")
def edge_key(a, b, directed):
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
        out[i] = edge_key(ids[i], ids[m + i], directed)
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
        out[i] = edge_key(a, b, directed)
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


RADIX_MIN = 64  # below this many keys :func:`packed_order` sorts by comparison
RADIX_BITS = 11  # a digit: 2,048 counters (16 KB, in the first-level cache)


@nb.njit(cache=True)
def packed_order(key):
    """An order that sorts the packed keys ``key`` (``a << 32 | b``, all >= 0), stable: a
    least-significant-digit radix sort of each key's ids packed tight, ``a`` above the bits
    that the largest ``b`` needs, so a batch over ids below 2**16 sorts in three passes of
    11 bits. NumPy's ``argsort`` took 5.0–5.4 ms for 10⁵ such keys on the 2-core machine
    (numpy 2.4), this 1.9–2.1 ms; 0.059 against 0.014 ms for 2,000 (one-off script). A key
    below 0 (not a packed pair) or a short batch is sorted by comparison."""
    n = key.shape[0]
    hb = 0
    neg = False
    for i in range(n):
        k = key[i]
        neg |= k < 0
        b = k & LO_MASK
        if b > hb:
            hb = b
    if neg or n < RADIX_MIN:
        return np.argsort(key, kind="mergesort")
    by = 0
    while (hb >> by) != 0:
        by += 1
    ka = np.empty(n, np.int64)
    top = 0
    for i in range(n):
        c = ((key[i] >> 32) << by) | (key[i] & LO_MASK)
        ka[i] = c
        if c > top:
            top = c
    kb = np.empty(n, np.int64)
    ia = np.arange(n)
    ib = np.empty(n, np.int64)
    mask = (1 << RADIX_BITS) - 1
    cnt = np.empty(mask + 2, np.int64)
    shift = 0
    while (top >> shift) != 0:
        cnt[:] = 0
        for i in range(n):
            cnt[((ka[i] >> shift) & mask) + 1] += 1
        for d in range(mask + 1):
            cnt[d + 1] += cnt[d]
        for i in range(n):
            d = (ka[i] >> shift) & mask
            q = cnt[d]
            kb[q] = ka[i]
            ib[q] = ia[i]
            cnt[d] = q + 1
        ka, kb = kb, ka
        ia, ib = ib, ia
        shift += RADIX_BITS
    return ia


@nb.njit(cache=True)
def symmetric_delta(gkey, net):
    """:func:`both_orientations` of the sorted unique undirected keys ``gkey`` (a < b) and
    their transposes, which are formed and sorted here (one call instead of three): by a
    counting sort on their first key where its range is small against the batch
    (:func:`transpose_order`; a batch of 10⁵ on R-MAT 16), else by :func:`packed_order`."""
    n = gkey.shape[0]
    tkey = np.empty(n, np.int64)
    for i in range(n):
        tkey[i] = ((gkey[i] & LO_MASK) << 32) | (gkey[i] >> 32)
    order = transpose_order(gkey) if n else None
    if order is None:
        order = packed_order(tkey)
    return both_orientations(gkey, net, tkey, order)


@nb.njit(cache=True, inline="always")
def key_at(keys, i, packed):
    """The packed edge key at ``i`` of sorted row keys (``packed``: with the row's sign in
    the lowest bit, see PACKED; the sentinel as it is)."""
    v = keys[i]
    if packed and v != SENTINEL_KEY:
        return v >> 1
    return v


@nb.njit(cache=True, inline="always")
def sign_at(keys, sg, i, packed):
    """The sign of the row key at ``i`` (from its lowest bit when ``packed``)."""
    if packed:
        return 2 * (keys[i] & 1) - 1
    return sg[i]


@nb.njit(cache=True, inline="always")
def run_sum(keys, sg, i, n, packed):
    """The sum of the signs over the run of rows with the edge key at ``i``, from ``i``."""
    k = key_at(keys, i, packed)
    s = 0
    j = i
    while j < n and key_at(keys, j, packed) == k:
        s += sign_at(keys, sg, j, packed)
        j += 1
    return s


@nb.njit(cache=True, inline="always")
def row_checks(s, ka, kb, mode):
    """(sign bad, key bad) of one row: a sign other than ±1; a uint64 key above int64."""
    bad_sign = (s != 1 and s != -1) or ((mode & SIGN_U64) != 0 and s < 0)
    bad_key = (mode & KEYS_U64) != 0 and (ka < 0 or kb < 0)
    return bad_sign, bad_key


@nb.njit(cache=True, inline="always")
def row_keys(a, b, ka, kb, directed):
    """(key, its transpose, what) of a row with ids (a, b) (-1: unknown) and user keys
    (ka, kb): what is 0 for an edge, 1 for a self-loop, 2 for a key not known yet (the keys
    are then the sentinel)."""
    if ka == kb:
        return SENTINEL_KEY, SENTINEL_KEY, 1
    if a < 0 or b < 0:
        return SENTINEL_KEY, SENTINEL_KEY, 2
    k = edge_key(a, b, directed)
    return k, ((k & LO_MASK) << 32) | (k >> 32), 0


@nb.njit(cache=True, inline="always")
def run_flags(k, s, n0, directed):
    """(pair, delete, big, new delete, a new, b new) of a kept run with key ``k`` and net
    sign ``s`` (ids at or above ``n0`` are new)."""
    a = k >> 32
    b = k & LO_MASK
    return ((directed or a < b), s < 0, (s > 1 or s < -1), (s < 0 and (a >= n0 or b >= n0)),
            a >= n0, b >= n0)


@nb.njit(cache=True, inline="always")
def pack_sign(k, s):
    """Row key ``k`` with sign ``s`` in its lowest bit (PACKED)."""
    return (k << 1) | (1 if s > 0 else 0)


@nb.njit(cache=True, inline="always")
def put_row(keys, sg, i, k0, k1, s, what, mode, directed):
    """Row ``i``'s keys and signs (two of each when undirected; an edge's keys with the sign
    in the lowest bit when ``mode`` has PACKED)."""
    if what == 0 and (mode & PACKED) != 0:
        k0, k1 = pack_sign(k0, s), pack_sign(k1, s)
    per = 1 if directed else 2
    keys[per * i] = k0
    sg[per * i] = s
    if not directed:
        keys[per * i + 1] = k1
        sg[per * i + 1] = s


@nb.njit(cache=True, inline="always")
def put_flags(flags, i, kept, pair, dele):
    """The run pass's three flags of key ``i``: a kept run's first key, a pair, a delete."""
    flags[0, i] = 1 if kept else 0
    flags[1, i] = 1 if pair else 0
    flags[2, i] = 1 if dele else 0


@nb.njit(cache=True)
def prep_rows(src, dst, sign, tkeys, tvals, ids, keys, sg, stats, mode):
    """CPU twin of the device row pass (:func:`gpu_ivm.kernels.cuda_batch_prep.rows`)."""
    m = src.shape[0]
    mask = tkeys.shape[0] - 1
    directed = (mode & DIRECTED) != 0
    for i in range(m):
        s = sign[i]
        ka = src[i]
        kb = dst[i]
        bad_sign, bad_key = row_checks(s, ka, kb, mode)
        if bad_sign:
            stats[BAD_SIGN] = max(stats[BAD_SIGN], m - i)
        if bad_key:
            stats[BAD_KEY] = max(stats[BAD_KEY], m - i)
        if (mode & PROBE) != 0:
            ids[i] = hashmap.probe(tkeys, tvals, ka, mask)
            ids[m + i] = hashmap.probe(tkeys, tvals, kb, mask)
        k0, k1, what = row_keys(ids[i], ids[m + i], ka, kb, directed)
        if what == 1:
            stats[LOOPS] += 1
        elif what == 2:
            stats[UNKNOWN] += 1
        put_row(keys, sg, i, k0, k1, s, what, mode, directed)


@nb.njit(cache=True)
def prep_groups(keys, sg, net, flags, used, stats, n0, directed, packed):
    """CPU twin of the device run pass (:func:`gpu_ivm.kernels.cuda_batch_prep.groups`)."""
    n = keys.shape[0]
    for i in range(n):
        k = key_at(keys, i, packed)
        put_flags(flags, i, False, False, False)
        if k == SENTINEL_KEY or (i > 0 and key_at(keys, i - 1, packed) == k):
            continue
        s = run_sum(keys, sg, i, n, packed)
        net[i] = s
        if s == 0:
            continue
        pair, dele, big, new_del, a_new, b_new = run_flags(k, s, n0, directed)
        put_flags(flags, i, True, pair, dele)
        stats[BIG] += big
        stats[NEW_DELETE] += new_del
        if a_new and used[(k >> 32) - n0] == 0:
            used[(k >> 32) - n0] = 1
            stats[USED_NEW] += 1
        if b_new and used[(k & LO_MASK) - n0] == 0:
            used[(k & LO_MASK) - n0] = 1
            stats[USED_NEW] += 1


@nb.njit(cache=True)
def prep_scatter(keys, net, flags, cs, out, stats, packed):
    """CPU twin of the device placement (:func:`gpu_ivm.kernels.cuda_batch_prep.scatter`)."""
    n = keys.shape[0]
    if n == 0:
        return
    stats[KEPT] = cs[0, n - 1]
    stats[PAIRS] = cs[1, n - 1]
    stats[DELETES] = cs[2, n - 1]
    for i in range(n):
        scatter_one(keys, net, flags, cs, out, i, packed)


@nb.njit(cache=True, inline="always")
def scatter_one(keys, net, flags, cs, out, i, packed):
    """Key ``i``'s writes of the placement: a kept run's key, net sign and multiplicity
    before the batch (1 for a delete), and a pair's (a, b, net)."""
    k = key_at(keys, i, packed)
    if flags[0, i] != 0:
        p = cs[0, i] - 1
        s = net[i]
        out[0, p] = k
        out[1, p] = s
        out[2, p] = 1 if s < 0 else 0
    if flags[1, i] != 0:
        q = cs[1, i] - 1
        out[3, q] = k >> 32
        out[4, q] = k & LO_MASK
        out[5, q] = net[i]
