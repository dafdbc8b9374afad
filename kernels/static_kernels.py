"""Numba kernels for static (from-scratch) triangle counting.

Every function here works on contiguous ``int64`` arrays (never mix unsigned and signed
integers: Numba promotes ``uint64`` with ``int64`` to ``float64``) and is compiled with
``cache=True``. The parallel kernels split their iteration space into many small chunks and
hand chunks to threads round-robin (chunk ``k`` goes to block ``k % n_blocks``), so skewed
work (hubs) is spread over threads even with Numba's static ``prange`` schedule. Each block
writes its partial result into its own slot of an output array; the caller sums the slots.

Kernels
-------
csr_order
    Stable two-pass counting sort by ``(row, col)``: CSR row pointer and permutation.
dense_ids_small_range
    Order-preserving dense relabelling of keys spanning a small range.
run_starts
    Mask of the first element of each run of equal consecutive ``(row, col)`` pairs.
in_tails
    In-edges of an oriented CSR with the out-list tail of each source.
count_oriented
    Undirected triangles of an oriented CSR (out-list tails looked up in a mark array).
count_oriented_cycles
    Directed 3-cycles of an oriented CSR with per-pair arc flags.
relation_triangle_kernel
    ``sum_{a,b,c} R(a,b) S(b,c) T(c,a)`` with int64 sum and float64 sum of ``|terms|``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

CHUNK = 512  # edges (or tuples) per work chunk
VCHUNK = 64  # vertices per work chunk
BLOCKS_PER_THREAD = 16


def n_blocks(n_items: int, chunk: int = CHUNK) -> int:
    """Number of round-robin blocks to use for ``n_items`` work items (at least 1)."""
    n_chunks = (n_items + chunk - 1) // chunk
    return int(max(1, min(n_chunks, nb.get_num_threads() * BLOCKS_PER_THREAD)))


@nb.njit(cache=True)
def csr_order(rows, cols, n_rows, n_cols):
    """Stable counting sort of the pairs ``(rows[i], cols[i])`` by row, then by column.

    Parameters
    ----------
    rows, cols : int64 arrays
        Pair coordinates, ``0 <= rows < n_rows`` and ``0 <= cols < n_cols``.
    n_rows, n_cols : int
        Bounds of the coordinates.

    Returns
    -------
    indptr : int64 array of length ``n_rows + 1``
        Row ``r`` occupies ``[indptr[r], indptr[r + 1])`` of the sorted order.
    perm : int64 array
        ``rows[perm]`` is non-decreasing and ``cols[perm]`` is sorted within each row.
    """
    m = rows.shape[0]
    # pass 1: stable counting sort by column
    cnt = np.zeros(n_cols + 1, dtype=np.int64)
    for i in range(m):
        cnt[cols[i] + 1] += 1
    for c in range(n_cols):
        cnt[c + 1] += cnt[c]
    order1 = np.empty(m, dtype=np.int64)
    for i in range(m):
        c = cols[i]
        order1[cnt[c]] = i
        cnt[c] += 1
    # pass 2: stable counting sort by row
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(m):
        indptr[rows[i] + 1] += 1
    for r in range(n_rows):
        indptr[r + 1] += indptr[r]
    pos = indptr[:-1].copy()
    perm = np.empty(m, dtype=np.int64)
    for k in range(m):
        i = order1[k]
        r = rows[i]
        perm[pos[r]] = i
        pos[r] += 1
    return indptr, perm


@nb.njit(cache=True, parallel=True)
def dense_ids_small_range(keys, lo, span):
    """Dense, order-preserving ids for ``keys`` with ``lo <= keys < lo + span``.

    Returns
    -------
    ids : int64 array
        ``ids[i]`` is the rank of ``keys[i]`` among the distinct keys.
    n : int
        Number of distinct keys.
    """
    seen = np.zeros(span, dtype=np.int64)
    for i in nb.prange(keys.shape[0]):
        seen[keys[i] - lo] = 1  # racing writes all store the same value
    n = 0
    for x in range(span):
        if seen[x]:
            seen[x] = n
            n += 1
        else:
            seen[x] = -1
    ids = np.empty(keys.shape[0], dtype=np.int64)
    for i in nb.prange(keys.shape[0]):
        ids[i] = seen[keys[i] - lo]
    return ids, n


@nb.njit(cache=True)
def run_starts(rows, cols):
    """``mask[i]`` is True iff ``(rows[i], cols[i])`` differs from the previous pair."""
    m = rows.shape[0]
    mask = np.empty(m, dtype=np.bool_)
    for i in range(m):
        mask[i] = i == 0 or rows[i] != rows[i - 1] or cols[i] != cols[i - 1]
    return mask


@nb.njit(cache=True)
def in_tails(indptr, hi):
    """In-edges of an oriented CSR, each with the tail of its source's out-list.

    For every edge ``e`` from ``u`` to ``v = hi[e]`` whose tail ``hi[e+1:indptr[u+1]]`` (the
    out-neighbours of ``u`` ranked above ``v``) is non-empty, record ``e`` and
    ``indptr[u+1]`` in row ``v`` of a CSR.

    Returns
    -------
    in_ptr : int64 array of length ``n + 1``
    in_edge, tail_end : int64 arrays
        Row ``v`` occupies ``[in_ptr[v], in_ptr[v + 1])``.
    """
    n = indptr.shape[0] - 1
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):
        end = indptr[u + 1]
        for e in range(indptr[u], end - 1):
            in_ptr[hi[e] + 1] += 1
    for v in range(n):
        in_ptr[v + 1] += in_ptr[v]
    pos = in_ptr[:-1].copy()
    k = in_ptr[n]
    in_edge = np.empty(k, dtype=np.int64)
    tail_end = np.empty(k, dtype=np.int64)
    for u in range(n):
        end = indptr[u + 1]
        for e in range(indptr[u], end - 1):
            v = hi[e]
            q = pos[v]
            in_edge[q] = e
            tail_end[q] = end
            pos[v] = q + 1
    return in_ptr, in_edge, tail_end


@nb.njit(cache=True, parallel=True)
def count_oriented(indptr, hi, in_ptr, in_edge, tail_end, nblk):
    """Count triangles of an oriented graph in CSR form.

    Row ``u`` of the CSR (``hi[indptr[u]:indptr[u+1]]``) lists the out-neighbours of ``u``,
    all of higher rank, sorted, without duplicates; ``in_ptr, in_edge, tail_end`` come from
    :func:`in_tails`. Every triangle ``u < v < w`` is found exactly once, from its middle
    vertex ``v``: the out-list of ``v`` is marked in a per-thread array, then for each in-edge
    ``u -> v`` the out-neighbours of ``u`` after ``v`` are looked up in the marks
    (branch-free). The work is ``sum_u C(outdeg(u), 2)`` lookups, ``O(m^1.5)``.
    """
    n = indptr.shape[0] - 1
    n_chunks = (n + VCHUNK - 1) // VCHUNK
    partial = np.zeros(nblk, dtype=np.int64)
    for blk in nb.prange(nblk):
        mark = np.zeros(n, dtype=np.int8)
        acc = 0
        for ch in range(blk, n_chunks, nblk):
            v_end = min(n, (ch + 1) * VCHUNK)
            for v in range(ch * VCHUNK, v_end):
                s = indptr[v]
                e = indptr[v + 1]
                k0 = in_ptr[v]
                k1 = in_ptr[v + 1]
                if e == s or k0 == k1:
                    continue
                for i in range(s, e):
                    mark[hi[i]] = 1
                for k in range(k0, k1):
                    for j in range(in_edge[k] + 1, tail_end[k]):
                        acc += mark[hi[j]]
                for i in range(s, e):
                    mark[hi[i]] = 0
        partial[blk] = acc
    return partial.sum()


@nb.njit(cache=True, inline="always")
def _middle_vertex(v, indptr, hi, in_ptr, in_edge, tail_end, mark, emit, base, ou, ov, ow):
    """Triangles u < v < w found from their middle vertex v (see :func:`count_oriented`):
    the count, and with ``emit`` the triangles written from ``base`` on."""
    s = indptr[v]
    e = indptr[v + 1]
    k0 = in_ptr[v]
    k1 = in_ptr[v + 1]
    if e == s or k0 == k1:
        return 0
    for i in range(s, e):
        mark[hi[i]] = 1
    c = 0
    for k in range(k0, k1):
        ek = in_edge[k]
        for j in range(ek + 1, tail_end[k]):
            w = hi[j]
            if mark[w]:
                if emit:
                    ou[base + c] = ek  # the edge u -> v; u is recovered by the caller
                    ov[base + c] = v
                    ow[base + c] = w
                c += 1
    for i in range(s, e):
        mark[hi[i]] = 0
    return c


@nb.njit(cache=True, parallel=True)
def list_oriented(indptr, hi, in_ptr, in_edge, tail_end, nblk):
    """Every triangle of an oriented CSR once, as (edge index of u -> v, v, w) with
    u < v < w in rank space: a count pass per vertex, a prefix sum, an emit pass (both over
    the vertex chunks of :func:`count_oriented`)."""
    n = indptr.shape[0] - 1
    n_chunks = (n + VCHUNK - 1) // VCHUNK
    per = np.zeros(n + 1, dtype=np.int64)
    dummy = np.empty(0, dtype=np.int64)
    for blk in nb.prange(nblk):
        mark = np.zeros(n, dtype=np.int8)
        for ch in range(blk, n_chunks, nblk):
            for v in range(ch * VCHUNK, min(n, (ch + 1) * VCHUNK)):
                per[v + 1] = _middle_vertex(v, indptr, hi, in_ptr, in_edge, tail_end, mark,
                                            False, 0, dummy, dummy, dummy)
    for v in range(n):
        per[v + 1] += per[v]
    total = per[n]
    ou = np.empty(total, dtype=np.int64)
    ov = np.empty(total, dtype=np.int64)
    ow = np.empty(total, dtype=np.int64)
    for blk in nb.prange(nblk):
        mark = np.zeros(n, dtype=np.int8)
        for ch in range(blk, n_chunks, nblk):
            for v in range(ch * VCHUNK, min(n, (ch + 1) * VCHUNK)):
                _middle_vertex(v, indptr, hi, in_ptr, in_edge, tail_end, mark, True, per[v],
                               ou, ov, ow)
    return ou, ov, ow


@nb.njit(cache=True, parallel=True)
def count_oriented_cycles(indptr, hi, flags, in_ptr, in_edge, tail_end, nblk):
    """Count directed 3-cycles given an oriented CSR of the underlying undirected pairs.

    Layout as in :func:`count_oriented`; ``flags[e]`` (1, 2 or 3) has bit 0 set if the arc
    ``x -> hi[e]`` exists and bit 1 set if the arc ``hi[e] -> x`` exists, where ``x`` is the
    row of ``e``. For each undirected triangle ``u < v < w`` the two cyclic orientations
    ``u->v->w->u`` and ``u->w->v->u`` are checked independently, so a vertex triple
    contributes 0, 1 or 2.
    """
    n = indptr.shape[0] - 1
    n_chunks = (n + VCHUNK - 1) // VCHUNK
    partial = np.zeros(nblk, dtype=np.int64)
    for blk in nb.prange(nblk):
        mark = np.zeros(n, dtype=np.int8)  # flags of (v, w) for w in out(v), else 0
        acc = 0
        for ch in range(blk, n_chunks, nblk):
            v_end = min(n, (ch + 1) * VCHUNK)
            for v in range(ch * VCHUNK, v_end):
                s = indptr[v]
                e = indptr[v + 1]
                k0 = in_ptr[v]
                k1 = in_ptr[v + 1]
                if e == s or k0 == k1:
                    continue
                for i in range(s, e):
                    mark[hi[i]] = np.int8(flags[i])
                for k in range(k0, k1):
                    e_uv = in_edge[k]
                    f_uv = flags[e_uv]
                    for j in range(e_uv + 1, tail_end[k]):
                        f_vw = np.int64(mark[hi[j]])
                        f_uw = flags[j]
                        # u->v, v->w, w->u
                        acc += f_uv & f_vw & (f_uw >> 1) & 1
                        # u->w, w->v, v->u
                        acc += f_uw & (f_vw >> 1) & (f_uv >> 1) & 1
                for i in range(s, e):
                    mark[hi[i]] = 0
        partial[blk] = acc
    return partial.sum()


@nb.njit(cache=True, inline="always")
def _lower_bound(cols, lo, hi, x):
    """First index ``p`` in ``[lo, hi]`` with ``p == hi or cols[p] >= x`` (sorted slice)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if cols[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, parallel=True)
def relation_triangle_kernel(ra, rb, rm, s_ptr, s_col, s_val, t_ptr, t_col, t_val, nblk):
    """``sum_k rm[k] * sum_c S(rb[k], c) * T^t(ra[k], c)`` over CSR forms of S and T^t.

    ``S`` row ``b`` holds ``(c, S(b, c))`` in ``s_col/s_val[s_ptr[b]:s_ptr[b+1]]`` sorted by
    ``c``; ``T^t`` row ``a`` holds ``(c, T(c, a))`` likewise. For each tuple of R the shorter
    list is iterated and the longer one searched (merged when their lengths are close), so the
    cost is ``O(sum min(|S(b,.)|, |T(.,a)|) log N)``, worst-case ``O(N^1.5 log N)``.

    Returns
    -------
    total : int
        The int64 sum (meaningful only if ``abs_total`` is small enough).
    abs_total : float
        The float64 sum of ``|R(a,b) S(b,c) T(c,a)|`` over all terms.
    """
    m = ra.shape[0]
    n_chunks = (m + CHUNK - 1) // CHUNK
    part = np.zeros(nblk, dtype=np.int64)
    part_abs = np.zeros(nblk, dtype=np.float64)
    for blk in nb.prange(nblk):
        # the block's work is a call: Numba's parfor reduction analysis fails on the inlined
        # intersection loops under Python 3.12's bytecode ("unexpected cycle in lookup()")
        acc, acc_abs = _relation_block(blk, nblk, n_chunks, m, ra, rb, rm, s_ptr, s_col,
                                       s_val, t_ptr, t_col, t_val)
        part[blk] = acc
        part_abs[blk] = acc_abs
    return part.sum(), part_abs.sum()


@nb.njit(cache=True)
def _relation_block(blk, nblk, n_chunks, m, ra, rb, rm, s_ptr, s_col, s_val, t_ptr, t_col,
                    t_val):
    """One block of :func:`relation_triangle_kernel`: its chunks' int64 sum and float64 sum
    of absolute terms."""
    acc = 0
    acc_abs = 0.0
    for ch in range(blk, n_chunks, nblk):
        k_end = min(m, (ch + 1) * CHUNK)
        for k in range(ch * CHUNK, k_end):
            sub, sub_abs = _relation_pair(ra[k], rb[k], s_ptr, s_col, s_val, t_ptr, t_col,
                                          t_val)
            r = rm[k]
            acc += r * sub
            acc_abs += abs(float(r)) * sub_abs
    return acc, acc_abs


@nb.njit(cache=True)
def _relation_pair(a, b, s_ptr, s_col, s_val, t_ptr, t_col, t_val):
    """``sum_c S(b, c) * T^t(a, c)`` and the sum of its terms' absolute values: the shorter
    list iterated and the longer one searched, merged when their lengths are close."""
    i = s_ptr[b]
    i_end = s_ptr[b + 1]
    j = t_ptr[a]
    j_end = t_ptr[a + 1]
    ls = i_end - i
    lt = j_end - j
    sub = 0
    sub_abs = 0.0
    if ls == 0 or lt == 0:
        return sub, sub_abs
    if ls * 8 >= lt and lt * 8 >= ls:
        while i < i_end and j < j_end:
            x = s_col[i]
            y = t_col[j]
            if x < y:
                i += 1
            elif x > y:
                j += 1
            else:
                s = s_val[i]
                t = t_val[j]
                sub += s * t
                sub_abs += abs(float(s)) * abs(float(t))
                i += 1
                j += 1
    elif ls < lt:
        return _search_sum(s_col, s_val, i, i_end, t_col, t_val, j, j_end)
    else:
        return _search_sum(t_col, t_val, j, j_end, s_col, s_val, i, i_end)
    return sub, sub_abs


@nb.njit(cache=True)
def _search_sum(p_col, p_val, p, p_end, q_col, q_val, q, q_end):
    """Σ p_val·q_val over the columns common to ``p_col[p:p_end]`` and ``q_col[q:q_end]``,
    and the sum of the terms' absolute values: the first range walked, the second searched
    (the targets increase, so each search starts where the last one stopped)."""
    sub = 0
    sub_abs = 0.0
    for i in range(p, p_end):
        j = _lower_bound(q_col, q, q_end, p_col[i])
        q = j
        if j < q_end and q_col[j] == p_col[i]:
            s = p_val[i]
            t = q_val[j]
            sub += s * t
            sub_abs += abs(float(s)) * abs(float(t))
    return sub, sub_abs
