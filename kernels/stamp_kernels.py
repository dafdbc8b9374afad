"""Kernels of the insert-only and known-lifespan modes, and the sliding window's due lists.

- The insert-only engine (:mod:`gpu_ivm.kernels.insert_adj`) takes ``PAR_MIN`` (the batch
  work from which all threads count) and :func:`long_endpoint_groups` (a batch's edges grouped
  by their endpoint of larger degree; also used by :mod:`gpu_ivm.kernels.window_adj`) from
  here.
- :func:`closed_by_batch_list` lists the triangles that a batch closes under the ordered rule
  on stamped edges kept in a :class:`gpu_ivm.store.ZStore` (both directions, value = the
  edge's stamp): the insert-only engine's state before it moved to the sliding window's
  layout. No engine calls it; ``tests/test_insert_only_state.py`` keeps it as an oracle.
- The offline evaluator's kernels (:func:`lifespan_segments`, :func:`lifespan_triangles`),
  the lifespans' :func:`segmented_cummax` and the sliding window's due lists (:func:`due_push`,
  :func:`due_pop`; its step kernels are in :mod:`gpu_ivm.kernels.window_step`).

Plain ``numba.njit`` functions: the CUDA kernels may call them unchanged.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import EMPTY, find_or_add
from .jit import helper
from .lsm import LO_MASK, run_mask, run_range_a


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


# ---------------------------------------------------------------------------- insert-only
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
def closed_by_batch_list(st, deg, us, vs, stamps, marks):
    """The triangles that the batch edges (us[e], vs[e]) with stamps stamps[e] close under
    the ordered rule, on a stamped store ``st`` (see the module docstring): for the k-th, the
    batch edge ``edge[k]`` that closed it (its youngest edge), the third vertex ``w[k]`` and the
    stamps ``s1[k]`` of (us[e], w) and ``s2[k]`` of (vs[e], w). Grouped by edge in batch
    order (the shorter row marked, the longer one read). ``marks``: zeros, one slot more than
    the ids (see :func:`_mark_ranges`; zeros again on return)."""
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


PAR_MIN = 1 << 14  # merge work (sum of the smaller degrees) from which all threads run


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
