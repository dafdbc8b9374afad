"""Kernels of the insert-only and known-lifespan modes: common neighbours with stamp tests.

These count on stamped edges kept in a :class:`gpu_ivm.store.ZStore` (both directions, no
deletes, so no tombstones) whose value is a positive stamp, the arrival order of the edge:
the insert-only engine's state until it moved to the sliding window's layout
(:mod:`gpu_ivm.kernels.insert_adj`, which still takes ``PAR_MIN`` and
:func:`long_endpoint_groups` from here); the CUDA twins (:mod:`gpu_ivm.kernels.cuda_stamp`)
and their tests keep this layout.
:func:`common_values` lists, for the common neighbours ``w`` of ``u`` and ``v``, the stored
values of ``(u, w)`` and ``(v, w)``, merging (or galloping, when the lengths differ a lot) the
sorted rows run pair by run pair; :func:`common_values_mk` does it by marks. Each ``w`` is
stored in one run of each row, so it is found exactly once. Plain ``numba.njit`` functions:
the CUDA kernels may call them unchanged. Also here: the offline evaluator's kernels and the
sliding window's due lists (its step kernels are in :mod:`gpu_ivm.kernels.window_step`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import EMPTY, find_or_add
from .jit import helper
from .lsm import LO_MASK, gallop, run_mask, run_range, run_range_a


@helper
def _match_ranges(keys, vals, lo1, hi1, lo2, hi2, out1, out2, n):
    """Append the values of equal second ids of two sorted single-first-key ranges."""
    n1 = hi1 - lo1
    n2 = hi2 - lo2
    if n1 <= 0 or n2 <= 0:
        return n
    if n1 * 8 < n2 or n2 * 8 < n1:
        swap = n2 < n1
        if swap:
            lo1, hi1, lo2, hi2 = lo2, hi2, lo1, hi1
        base = keys[lo2] & ~LO_MASK
        p = lo2
        for i in range(lo1, hi1):
            t = base | (keys[i] & LO_MASK)
            p = gallop(keys, p, hi2, t)
            if p >= hi2:
                break
            if keys[p] == t:
                if swap:
                    out1[n] = vals[p]
                    out2[n] = vals[i]
                else:
                    out1[n] = vals[i]
                    out2[n] = vals[p]
                n += 1
        return n
    i = lo1
    j = lo2
    while i < hi1 and j < hi2:
        c1 = keys[i] & LO_MASK
        c2 = keys[j] & LO_MASK
        if c1 < c2:
            i += 1
        elif c2 < c1:
            j += 1
        else:
            out1[n] = vals[i]
            out2[n] = vals[j]
            n += 1
            i += 1
            j += 1
    return n


@helper
def _row_ranges(st, x, lo, hi):
    """The non-empty [lo, hi) ranges of first key x over the runs; returns how many (the
    store's arrays taken once, see :func:`~gpu_ivm.kernels.lsm.run_range_a`)."""
    keys = st[0]
    bounds = st[2]
    dirptr = st[3]
    dirlen = st[4]
    dirs = st[5]
    m = run_mask(st, x)
    n = 0
    j = 0
    while m != 0:
        if m & 1:
            a, b = run_range_a(keys, bounds, dirptr, dirlen, dirs, j, x)
            if b > a:
                lo[n] = a
                hi[n] = b
                n += 1
        m >>= 1
        j += 1
    return n


@nb.njit(cache=True)
def common_values(st, u, v, out1, out2):
    """For every common neighbour w of u and v: out1[i] = value of (u, w), out2[i] = value of
    (v, w). Returns how many; ``out1`` / ``out2`` need room for min(deg u, deg v). Each row's
    ranges are looked up once (one per run holding it), then merged pairwise."""
    keys = st[0]
    vals = st[1]
    if run_mask(st, u) == 0 or run_mask(st, v) == 0:
        return 0
    lo1 = np.empty(64, np.int64)
    hi1 = np.empty(64, np.int64)
    lo2 = np.empty(64, np.int64)
    hi2 = np.empty(64, np.int64)
    n1 = _row_ranges(st, u, lo1, hi1)
    n2 = _row_ranges(st, v, lo2, hi2)
    n = 0
    for i in range(n1):
        for j in range(n2):
            n = _match_ranges(keys, vals, lo1[i], hi1[i], lo2[j], hi2[j], out1, out2, n)
    return n


@helper
def _mark_ranges(keys, vals, lo, hi, n, marks, on):
    """marks[c] = value of entry c (``on``) or 0 (not ``on``) over the ranges lo[:n], hi[:n]
    of one row; ids at or beyond the scratch's last slot (padding included) go to that slot,
    a bin kept at 0."""
    cap = marks.shape[0] - 1
    for r in range(n):
        for p in range(lo[r], hi[r]):
            marks[min(keys[p] & LO_MASK, cap)] = vals[p] if on else 0
    marks[cap] = 0


@nb.njit(cache=True)  # calls common_values, which allocates: reference counting stays
def common_values_mk(st, u, v, marks, out1, out2, rlo, rhi):
    """:func:`common_values` by marks: the shorter row's values are written into ``marks``
    (indexed by the second id; all zero before and after; one slot more than the ids), the
    longer row is read once and looked up, the marks are cleared. So each entry of either row
    is read once (the short one twice), where the run-pair merge reads each entry once per run
    of the other row, and each row is located in the runs once. Values must be nonzero.
    ``rlo`` / ``rhi``: scratch of 128 for the rows' ranges. ``marks`` of length 0: the
    merge."""
    if marks.shape[0] == 0:
        return common_values(st, u, v, out1, out2)
    keys = st[0]
    vals = st[1]
    cap = marks.shape[0] - 1
    lv = st[7]
    swap = lv[v] < lv[u]
    a = v if swap else u  # marked
    b = u if swap else v  # read
    na = _row_ranges(st, a, rlo, rhi)
    nb_ = _row_ranges(st, b, rlo[64:], rhi[64:])
    if na == 0 or nb_ == 0:
        return 0
    _mark_ranges(keys, vals, rlo, rhi, na, marks, True)
    n = 0
    for r in range(64, 64 + nb_):
        for p in range(rlo[r], rhi[r]):
            w = marks[min(keys[p] & LO_MASK, cap)]
            if w != 0:
                if swap:
                    out1[n] = vals[p]
                    out2[n] = w
                else:
                    out1[n] = w
                    out2[n] = vals[p]
                n += 1
    _mark_ranges(keys, vals, rlo, rhi, na, marks, False)
    return n


# ---------------------------------------------------------------------------- insert-only
@nb.njit(cache=True)
def _buffers(deg, us, vs):
    """Two scratch arrays big enough for the common neighbours of any (us[j], vs[j])."""
    m = 1
    for j in range(us.shape[0]):
        m = max(m, min(deg[us[j]], deg[vs[j]]))
    return np.empty(m, np.int64), np.empty(m, np.int64)


@nb.njit(cache=True)  # calls common_values_mk (see there)
def older_common_buf(st, u, v, s, a, b, marks, rlo, rhi):
    """Common neighbours w of u and v whose edges (u, w) and (v, w) both have stamps below s:
    the triangles that the edge (u, v) with stamp s closes under the ordered delta rule
    (``a``, ``b``: scratch of room min(deg u, deg v); ``marks``, ``rlo``, ``rhi``: see
    :func:`common_values_mk`)."""
    n = common_values_mk(st, u, v, marks, a, b, rlo, rhi)
    c = 0
    for i in range(n):
        if a[i] < s and b[i] < s:
            c += 1
    return c


@nb.njit(cache=True)
def older_common(st, deg, u, v, s):
    """:func:`older_common_buf` with its own scratch."""
    m = min(deg[u], deg[v])
    if m <= 1:  # (u, v) itself is one of the neighbours
        return 0
    z = np.empty(0, np.int64)
    return older_common_buf(st, u, v, s, np.empty(m, np.int64), np.empty(m, np.int64), z, z, z)


@nb.njit(cache=True, parallel=True)
def closed_by_batch_par(st, deg, us, vs, stamps, out):
    """out[i] = triangles closed by the batch edge (us[i], vs[i]) with stamp stamps[i]: each
    new triangle is counted once, by its edge with the largest stamp."""
    for i in nb.prange(us.shape[0]):
        out[i] = older_common(st, deg, us[i], vs[i], stamps[i])


@nb.njit(cache=True)
def long_endpoint_groups(deg, us, vs):
    """The edges (us[j], vs[j]) grouped by their endpoint of larger degree: (longv, order,
    starts), ``longv[j]`` that endpoint, ``order`` the edges sorted by it and group k at
    ``order[starts[k]:starts[k + 1]]``."""
    n = us.shape[0]
    longv = np.empty(n, np.int64)
    for j in range(n):
        longv[j] = us[j] if deg[us[j]] >= deg[vs[j]] else vs[j]
    order = np.argsort(longv)
    starts = np.empty(n + 1, np.int64)
    k = 0
    for t in range(n):
        if t == 0 or longv[order[t]] != longv[order[t - 1]]:
            starts[k] = t
            k += 1
    starts[k] = n
    return longv, order, starts[: k + 1]


@nb.njit(cache=True)
def closed_by_batch_serial(st, deg, us, vs, stamps, out, marks):
    """:func:`closed_by_batch_par` on one thread (small batches: no thread start-up).

    The batch's edges are grouped by their endpoint of larger degree: a group of two or more
    edges marks that long row once (values into ``marks``, see :func:`common_values_mk`) and
    reads each edge's short row against it, so a hub that many of the batch's edges touch is
    read twice per batch instead of once per edge (on CollegeMsg's daily batches, 1.6x fewer
    entries read). A single edge is intersected by :func:`older_common_buf`. ``marks`` of
    length 0: merges, edge by edge."""
    a, b = _buffers(deg, us, vs)
    rlo = np.empty(128, np.int64)
    rhi = np.empty(128, np.int64)
    longv, order, starts = long_endpoint_groups(deg, us, vs)
    keys = st[0]
    vals = st[1]
    cap = marks.shape[0] - 1
    for k in range(starts.shape[0] - 1):
        i = starts[k]
        g = starts[k + 1]
        big = longv[order[i]]
        if g - i == 1 or cap < 0:
            for t in range(i, g):
                e = order[t]
                if min(deg[us[e]], deg[vs[e]]) <= 1:  # (u, v) itself is a neighbour
                    out[e] = 0
                else:
                    out[e] = older_common_buf(st, us[e], vs[e], stamps[e], a, b, marks, rlo,
                                              rhi)
            continue
        na = _row_ranges(st, big, rlo, rhi)
        _mark_ranges(keys, vals, rlo, rhi, na, marks, True)
        for t in range(i, g):
            e = order[t]
            small = vs[e] if us[e] == big else us[e]
            s = stamps[e]
            c = 0
            ns = _row_ranges(st, small, rlo[64:], rhi[64:])
            for r in range(64, 64 + ns):
                for p in range(rlo[r], rhi[r]):
                    w = marks[min(keys[p] & LO_MASK, cap)]
                    if w != 0 and w < s and vals[p] < s:
                        c += 1
            out[e] = c
        _mark_ranges(keys, vals, rlo, rhi, na, marks, False)


@nb.njit(cache=True)
def closed_by_batch_list(st, deg, us, vs, stamps, marks):
    """The triangles that the batch edges (us[e], vs[e]) with stamps stamps[e] close under
    the ordered rule (those :func:`closed_by_batch_serial` counts): for the k-th, the batch
    edge ``edge[k]`` that closed it (its youngest edge), the third vertex ``w[k]`` and the
    stamps ``s1[k]`` of (us[e], w) and ``s2[k]`` of (vs[e], w). Grouped by edge in batch
    order (the shorter row marked, the longer one read). ``marks``: zeros, one slot more than
    the ids (see :func:`common_values_mk`)."""
    n = us.shape[0]
    total = 0
    for e in range(n):
        total += max(min(deg[us[e]], deg[vs[e]]) - 1, 0)  # w is not the other endpoint
    edge = np.empty(total + 1, np.int64)
    w_out = np.empty(total + 1, np.int64)
    s1 = np.empty(total + 1, np.int64)
    s2 = np.empty(total + 1, np.int64)
    rlo = np.empty(128, np.int64)
    rhi = np.empty(128, np.int64)
    keys = st[0]
    vals = st[1]
    cap = marks.shape[0] - 1
    q = 0
    for e in range(n):
        if min(deg[us[e]], deg[vs[e]]) <= 1:
            continue
        u = us[e]
        v = vs[e]
        s = stamps[e]
        swap = deg[v] < deg[u]
        a = v if swap else u  # marked
        b = u if swap else v  # read
        na = _row_ranges(st, a, rlo, rhi)
        nb_ = _row_ranges(st, b, rlo[64:], rhi[64:])
        _mark_ranges(keys, vals, rlo, rhi, na, marks, True)
        for r in range(64, 64 + nb_):
            for p in range(rlo[r], rhi[r]):
                c = keys[p] & LO_MASK
                m = marks[min(c, cap)]
                if m != 0 and m < s and vals[p] < s:
                    edge[q] = e
                    w_out[q] = c
                    s1[q] = vals[p] if swap else m
                    s2[q] = m if swap else vals[p]
                    q += 1
        _mark_ranges(keys, vals, rlo, rhi, na, marks, False)
    return edge[:q], w_out[:q], s1[:q], s2[:q]


@helper
def _older_pairs(keys, vals, lo1, hi1, lo2, hi2, s, ow, o1, o2, q, emit):
    """Equal second ids w of two sorted single-first-key ranges (u's row, v's row) whose
    values are both below s (merge, or gallop the longer range when the lengths differ by
    more than 8x): returns q plus their number; with ``emit`` each is also written at
    ow / o1 / o2[q ...] (w, the value in u's row, the value in v's row)."""
    n1 = hi1 - lo1
    n2 = hi2 - lo2
    if n1 <= 0 or n2 <= 0:
        return q
    if n1 * 8 < n2 or n2 * 8 < n1:
        swap = n2 < n1
        if swap:
            lo1, hi1, lo2, hi2 = lo2, hi2, lo1, hi1
        base = keys[lo2] & ~LO_MASK
        p = lo2
        for i in range(lo1, hi1):
            t = base | (keys[i] & LO_MASK)
            p = gallop(keys, p, hi2, t)
            if p >= hi2:
                break
            if keys[p] == t and vals[i] < s and vals[p] < s:
                if emit:
                    ow[q] = t & LO_MASK
                    o1[q] = vals[p] if swap else vals[i]
                    o2[q] = vals[i] if swap else vals[p]
                q += 1
        return q
    i = lo1
    j = lo2
    while i < hi1 and j < hi2:
        c1 = keys[i] & LO_MASK
        c2 = keys[j] & LO_MASK
        if c1 < c2:
            i += 1
        elif c2 < c1:
            j += 1
        else:
            if vals[i] < s and vals[j] < s:
                if emit:
                    ow[q] = c1
                    o1[q] = vals[i]
                    o2[q] = vals[j]
                q += 1
            i += 1
            j += 1
    return q


@helper
def older_common_runs(st, deg, u, v, s, ow, o1, o2, q, emit):
    """The common neighbours w of u and v whose edges (u, w) and (v, w) have stamps below s,
    without scratch memory (run pairs merged in place): returns q plus their number, and
    with ``emit`` writes them from q on (see :func:`_older_pairs`). The inner loop of the
    CUDA twins in :mod:`gpu_ivm.kernels.cuda_stamp`."""
    if min(deg[u], deg[v]) <= 1:
        return q
    keys = st[0]
    vals = st[1]
    mu = run_mask(st, u)
    mvfull = run_mask(st, v)
    ju = 0
    while mu != 0:
        if mu & 1:
            lo1, hi1 = run_range(st, ju, u)
            if hi1 > lo1:
                mv = mvfull
                jv = 0
                while mv != 0:
                    if mv & 1:
                        lo2, hi2 = run_range(st, jv, v)
                        q = _older_pairs(keys, vals, lo1, hi1, lo2, hi2, s, ow, o1, o2, q,
                                         emit)
                    mv >>= 1
                    jv += 1
        mu >>= 1
        ju += 1
    return q


PAR_MIN = 1 << 14  # merge work (sum of the smaller degrees) from which all threads run


def closed_by_batch(st, deg, us, vs, stamps, out, marks):
    """Dispatch on the batch's work: one thread below ``PAR_MIN`` (with ``marks``, zeros of
    one slot more than the ids), all threads above."""
    work = int(np.minimum(deg[us], deg[vs]).sum()) if us.shape[0] else 0
    if work >= PAR_MIN:
        closed_by_batch_par(st, deg, us, vs, stamps, out)
    else:
        closed_by_batch_serial(st, deg, us, vs, stamps, out, marks)


# ---------------------------------------------------------------------------- offline
@helper
def _segment_sweep(sa, ea, lo1, hi1, lo2, hi2, lo3, hi3, diff):
    """Add +1 at the start and -1 after the end of every common interval of three sorted
    lists of disjoint closed intervals [sa, ea] (ranges of the flat arrays)."""
    i = lo1
    j = lo2
    t = lo3
    while i < hi1 and j < hi2 and t < hi3:
        s = max(sa[i], max(sa[j], sa[t]))
        e = min(ea[i], min(ea[j], ea[t]))
        if s <= e:
            diff[s] += 1
            diff[e + 1] -= 1
        # drop the interval that ends first
        if ea[i] == e:
            i += 1
        elif ea[j] == e:
            j += 1
        else:
            t += 1


@nb.njit(cache=True)
def lifespan_triangles(indptr, indices, edge_of, seg_ptr, seg_start, seg_end, diff):
    """Static evaluation with lifespans: for every triangle of the degree-oriented union graph
    (CSR ``indptr`` / ``indices`` sorted per row, ``edge_of[p]`` = edge id of entry p), add
    its alive steps (the common intervals of its three edges' segment lists, edge e's being
    ``seg_start/seg_end[seg_ptr[e]:seg_ptr[e+1]]``) to the difference array ``diff``."""
    n = indptr.shape[0] - 1
    for u in range(n):
        for p in range(indptr[u], indptr[u + 1]):
            v = indices[p]
            e_uv = edge_of[p]
            # common out-neighbours w of u and v (rows sorted): triangle u < v < w in rank
            i = p + 1
            j = indptr[v]
            hi1 = indptr[u + 1]
            hi2 = indptr[v + 1]
            while i < hi1 and j < hi2:
                if indices[i] < indices[j]:
                    i += 1
                elif indices[j] < indices[i]:
                    j += 1
                else:
                    e_uw = edge_of[i]
                    e_vw = edge_of[j]
                    _segment_sweep(seg_start, seg_end, seg_ptr[e_uv], seg_ptr[e_uv + 1],
                                   seg_ptr[e_uw], seg_ptr[e_uw + 1],
                                   seg_ptr[e_vw], seg_ptr[e_vw + 1], diff)
                    i += 1
                    j += 1


@nb.njit(cache=True)
def lifespan_segments(a, b, first, last, n_steps):
    """The lifespans of the undirected edges (a[i], b[i]) (dense ids, a < b) alive at steps
    first[i] .. last[i] (1 <= first <= last <= n_steps): per edge, its intervals merged where
    they overlap or touch, in O(events) (a hash of the edges, then two counting sorts: by
    first step, and stably by edge).

    Returns (keys, seg_ptr, seg_start, seg_end, ediff): ``keys[e]`` = a << 32 | b of edge e
    (edges in order of first appearance); edge e's segments, by start, at
    ``seg_ptr[e]:seg_ptr[e + 1]``; ``ediff`` the difference array (length n_steps + 2) of
    the number of edges alive per step."""
    n = a.shape[0]
    cap = 16
    while cap < 2 * n:
        cap *= 2
    mask = cap - 1
    tk = np.empty(cap, np.int64)
    tv = np.full(cap, EMPTY, np.int64)
    eidx = np.empty(n, np.int64)
    keys = np.empty(n, np.int64)
    ne = 0
    for i in range(n):
        key = (a[i] << 32) | b[i]
        e, added = find_or_add(tk, tv, key, mask, ne)
        if added:
            keys[ne] = key
            ne += 1
        eidx[i] = e
    cnt = np.zeros(n_steps + 2, np.int64)
    for i in range(n):
        cnt[first[i] + 1] += 1
    for k in range(n_steps + 1):
        cnt[k + 1] += cnt[k]
    by_first = np.empty(n, np.int64)
    for i in range(n):
        by_first[cnt[first[i]]] = i
        cnt[first[i]] += 1
    eptr = np.zeros(ne + 1, np.int64)
    for i in range(n):
        eptr[eidx[i] + 1] += 1
    for e in range(ne):
        eptr[e + 1] += eptr[e]
    pos = eptr[:ne].copy()
    by_edge = np.empty(n, np.int64)
    for t in range(n):
        i = by_first[t]
        by_edge[pos[eidx[i]]] = i
        pos[eidx[i]] += 1
    seg_ptr = np.empty(ne + 1, np.int64)
    seg_start = np.empty(n, np.int64)
    seg_end = np.empty(n, np.int64)
    ediff = np.zeros(n_steps + 2, np.int64)
    ns = 0
    for e in range(ne):
        seg_ptr[e] = ns
        cs = -1
        ce = -1
        for t in range(eptr[e], eptr[e + 1]):
            i = by_edge[t]
            if cs < 0:
                cs = first[i]
                ce = last[i]
            elif first[i] <= ce + 1:
                ce = max(ce, last[i])
            else:
                seg_start[ns] = cs
                seg_end[ns] = ce
                ediff[cs] += 1
                ediff[ce + 1] -= 1
                ns += 1
                cs = first[i]
                ce = last[i]
        seg_start[ns] = cs
        seg_end[ns] = ce
        ediff[cs] += 1
        ediff[ce + 1] -= 1
        ns += 1
    seg_ptr[ne] = ns
    return keys[:ne], seg_ptr, seg_start[:ns], seg_end[:ns], ediff


@nb.njit(cache=True)
def segmented_cummax(values, new_group, out):
    """out[i] = max of values over i's group up to i (groups start where new_group is True)."""
    m = values[0]
    for i in range(values.shape[0]):
        if new_group[i] or values[i] > m:
            m = values[i]
        out[i] = m


@nb.njit(cache=True)
def due_push(head, nxt, cend, eids):
    """File each edge e of ``eids`` under the ring slot (cend[e] + 1) mod len(head): a linked
    list per slot (``head[slot]`` first edge, ``nxt[e]`` the next, -1 ends)."""
    r = head.shape[0]
    for i in range(eids.shape[0]):
        e = eids[i]
        s = (cend[e] + 1) % r
        nxt[e] = head[s]
        head[s] = e


@nb.njit(cache=True)
def due_pop(head, nxt, slot, out):
    """Move the edges filed under ``slot`` to ``out`` (room for all of them); returns how
    many. The slot is left empty."""
    n = 0
    e = head[slot]
    while e >= 0:
        out[n] = e
        n += 1
        e = nxt[e]
    head[slot] = -1
    return n
