"""CUDA static triangle count of an oriented CSR: the GPU part of the cuda set's ``static``.

The CPU count (:func:`gpu_ivm.kernels.static_kernels.count_oriented`) finds every triangle
u < v < w once from its middle vertex v, marking out(v) in a per-thread array of n bytes: fine
for a few CPU threads, not for 10⁵ GPU threads. Here every **oriented edge** e = u → v is one
work item and counts its triangles by intersecting two sorted lists without any scratch memory:

- A = out(u) after v: ``hi[e + 1 : end(u)]`` (the rest of u's sorted out-list, all above v),
- B = out(v): ``hi[indptr[v] : indptr[v + 1]]`` (all above v too),

and |A ∩ B| is the number of triangles u < v < w with w in both, so each triangle is counted
exactly once, by its lowest edge u → v. The row end ``end(u)`` is found by a binary search of e
in ``indptr`` (no per-edge source array: 8 B per edge saved, log n reads instead). The body,
:func:`edge_triangles`, is a plain ``numba.njit`` function called unchanged by the kernel, by
the simulator and by the tests' CPU reference loop.

Intersection: merge when the lengths are within a factor 8, otherwise the shorter list is walked
and each entry galloped for in the longer one (``lsm.gallop``: the targets increase, so the
search restarts where the last one stopped), as ``relation_triangle_kernel`` does on the CPU.
Degree ordering bounds every out-list by sqrt(2m), so one edge costs O(sqrt m) reads at most
and the whole count O(m^1.5), like the CPU kernel.

Reduction: each thread sums its edges in a register, the block sums its threads in shared
memory (a tree, no warp shuffles: the simulator has none), and thread 0 of each block adds the
block's sum to one int64 counter with ``cuda.atomic.add`` (≤ ``CONFIG.max_blocks`` atomics on
one address, negligible). The host reads that one scalar back.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import cuda

from .cuda_launch import (
    SIMULATOR,
    check_1d,
    empty,
    exclusive_scan,
    grid,
    launch,
    on_device,
    scalar,
    zeros,
)
from .jit import helper
from .lsm import LO_MASK, dot_ranges, gallop, lower_bound

# ----------------------------------------------------------------------------- per-edge body


@nb.njit(cache=True, inline="always")
def _closure(flags, pa, pb, f_uv, directed):
    """What the triangle u < v < w closed at ``pa`` (entry u → w) and ``pb`` (entry v → w)
    contributes: 1 undirected; directed, its 3-cycles (0, 1 or 2) from the arc flags of its
    three edges (bit 0: the arc from the lower rank, bit 1: the arc back), as in the CPU's
    ``count_oriented_cycles``: u→v→w→u and u→w→v→u."""
    if not directed:
        return 1
    f_uw = flags[pa]
    f_vw = flags[pb]
    return (f_uv & f_vw & (f_uw >> 1) & 1) + (f_uw & (f_vw >> 1) & (f_uv >> 1) & 1)


@helper
def edge_closures(indptr, hi, flags, e, directed, out, base):
    """Triangles u < v < w closed by the oriented edge ``e`` (u → v = ``hi[e]``), or with
    ``directed`` their directed 3-cycles (``flags[e]``: arc flags of entry e).

    ``indptr, hi`` is an oriented CSR (rows sorted, duplicate-free, every entry above its row,
    as built by ``gpu_ivm.static._oriented_csr``). Walks out(u) after v ∩ out(v); summed over
    all edges this is the count, each triangle seen once, by its edge u → v. With a non-empty
    ``out`` (undirected only) the closing vertices w are also written to ``out[base:]``.
    """
    a = e + 1
    # end of u's row: the first row pointer above e (exists: indptr[n] = m > e)
    a_end = indptr[lower_bound(indptr, 0, indptr.shape[0], e + 1)]
    v = hi[e]
    b = indptr[v]
    b_end = indptr[v + 1]
    la = a_end - a
    lb = b_end - b
    if la <= 0 or lb <= 0:
        return 0
    if hi[a_end - 1] < hi[b] or hi[b_end - 1] < hi[a]:  # disjoint ranges
        return 0
    f_uv = flags[e] if directed else 0
    c = 0
    if la * 8 >= lb and lb * 8 >= la:  # comparable lengths: merge
        while a < a_end and b < b_end:
            x = hi[a]
            y = hi[b]
            if x < y:
                a += 1
            elif x > y:
                b += 1
            else:
                if out.shape[0]:
                    out[base + c] = x
                c += _closure(flags, a, b, f_uv, directed)
                a += 1
                b += 1
    elif la < lb:
        c = _walk_and_gallop(hi, flags, a, a_end, b, b_end, f_uv, directed, False, out, base)
    else:
        c = _walk_and_gallop(hi, flags, b, b_end, a, a_end, f_uv, directed, True, out, base)
    return c


@helper
def edge_triangles(indptr, hi, e):
    """Triangles u < v < w closed by the oriented edge ``e`` (see :func:`edge_closures`)."""
    return edge_closures(indptr, hi, hi, e, False, hi[:0], 0)


@helper
def _walk_and_gallop(hi, flags, a, a_end, b, b_end, f_uv, directed, swapped, out, base):
    """Σ closures over hi[a:a_end] ∩ hi[b:b_end] (both sorted, duplicate-free): walk the first
    range (the shorter) and gallop in the second; the targets increase, so each search resumes
    where the last one stopped. ``swapped``: the first range is out(v), the second out(u).
    Common entries are written to ``out[base:]`` when ``out`` is not empty."""
    c = 0
    while a < a_end:
        x = hi[a]
        b = gallop(hi, b, b_end, x)
        if b == b_end:
            break
        if hi[b] == x:
            if out.shape[0]:
                out[base + c] = x
            c += _closure(flags, b, a, f_uv, directed) if swapped else _closure(
                flags, a, b, f_uv, directed)
            b += 1
        a += 1
    return c


# ----------------------------------------------------------------------------- kernel


@cuda.jit(device=True)
def _tree_sum(sh, t, ntid):
    """Sum ``sh[0:ntid]`` into ``sh[0]`` (a block's values, written and synchronised by the
    caller): a tree over the next power of two, so any block size works; no warp shuffles
    (the simulator has none). Every thread of the block must call it (it synchronises)."""
    s = 1
    while s < ntid:
        s *= 2
    s //= 2
    while s > 0:  # same trip count in every thread: syncthreads is safe
        if t < s and t + s < ntid:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2


@cuda.jit(cache=True)
def _count_edges_kernel(io, m, directed):
    """total[0] += Σ_e edge_closures(e) over the m oriented edges.

    Launch config: 1-D grid-stride, one thread per oriented edge, any block size (the tree
    handles non-powers of two); dynamic shared memory of ``blockDim.x * 8`` bytes for the block
    sum; one ``atomic.add`` per block. Work per edge ≤ |out(u)| + |out(v)| ≤ 2·sqrt(2m) reads
    (merge) and much less when one list is short (gallop); see docs/gpu.md for the imbalance.
    """
    indptr, hi, flags, total = io
    sh = cuda.shared.array(0, nb.int64)
    t = cuda.threadIdx.x
    ntid = cuda.blockDim.x
    acc = 0
    e = cuda.grid(1)
    stride = cuda.gridsize(1)
    while e < m:
        acc += edge_closures(indptr, hi, flags, e, directed, hi[:0], 0)
        e += stride
    sh[t] = acc
    cuda.syncthreads()
    _tree_sum(sh, t, ntid)
    if t == 0 and sh[0] != 0:
        cuda.atomic.add(total, 0, sh[0])


@helper
def relation_terms(io, k):
    """R(a, b)·Σ_c S(b, c)·T(c, a) for the k-th tuple of R, and the same sum of absolute values
    (float64, for the overflow guard).

    ``io = (rk, rm, s_ptr, sk, sv, sa, t_ptr, tk, tv, ta, ...)``: R's packed keys (a, b) and
    values; S sorted by its packed keys (b, c) with row starts ``s_ptr``; T transposed, sorted
    by (a, c), with row starts ``t_ptr``; ``sa``/``ta`` the absolute values as float64. The
    two rows are intersected by ``lsm.dot_ranges`` (merge or gallop, as the views' products).
    """
    rk, rm, s_ptr, sk, sv, sa, t_ptr, tk, tv, ta = io[0], io[1], io[2], io[3], io[4], io[5], \
        io[6], io[7], io[8], io[9]
    a = rk[k] >> 32
    b = rk[k] & LO_MASK
    s0, s1 = s_ptr[b], s_ptr[b + 1]
    t0, t1 = t_ptr[a], t_ptr[a + 1]
    if s0 == s1 or t0 == t1:
        return 0, 0.0
    r = rm[k]
    return r * dot_ranges(sk, sv, s0, s1, tk, tv, t0, t1), \
        abs(r) * dot_ranges(sk, sa, s0, s1, tk, ta, t0, t1)


@cuda.jit(cache=True)
def _relation_kernel(io, m):
    """total[0] += Σ_k relation_terms(k) over the m tuples of R; total_abs[0] likewise.

    Launch config: 1-D grid-stride, one thread per tuple of R, at most 1024 threads per block
    (static shared arrays of 1024 int64 and 1024 float64 for the two block sums: 16 KB); one
    pair of atomics per block. Work per tuple O(min(|S(b,.)|, |T(.,a)|)·log) reads.
    """
    total = io[10]
    total_abs = io[11]
    sh = cuda.shared.array(1024, nb.int64)
    sha = cuda.shared.array(1024, nb.float64)
    t = cuda.threadIdx.x
    ntid = cuda.blockDim.x
    acc = 0
    acc_abs = 0.0
    k = cuda.grid(1)
    stride = cuda.gridsize(1)
    while k < m:
        x, y = relation_terms(io, k)
        acc += x
        acc_abs += y
        k += stride
    sh[t] = acc
    sha[t] = acc_abs
    cuda.syncthreads()
    _tree_sum(sh, t, ntid)
    _tree_sum(sha, t, ntid)
    if t == 0 and sha[0] != 0:
        cuda.atomic.add(total, 0, sh[0])
        cuda.atomic.add(total_abs, 0, sha[0])


@cuda.jit(cache=True)
def _edge_counts_kernel(io, m):
    """counts[e] = triangles closed by oriented edge e (the listing's first pass).
    Launch config: 1-D grid-stride, one thread per oriented edge."""
    indptr, hi, counts = io
    e = cuda.grid(1)
    stride = cuda.gridsize(1)
    while e < m:
        counts[e] = edge_closures(indptr, hi, hi, e, False, hi[:0], 0)
        e += stride


@cuda.jit(cache=True)
def _edge_list_kernel(io, m):
    """Write the triangles of each oriented edge e = u → v at its offset: ``(u, v, w)`` rows
    ``offs[e] .. offs[e + 1]`` (the listing's second pass; same walk as the first).
    Launch config: 1-D grid-stride, one thread per oriented edge."""
    indptr, hi, offs, ou, ov, ow = io
    e = cuda.grid(1)
    stride = cuda.gridsize(1)
    while e < m:
        b = offs[e]
        k = offs[e + 1] - b
        if k:
            edge_closures(indptr, hi, hi, e, False, ow, b)
            u = lower_bound(indptr, 0, indptr.shape[0], e + 1) - 1
            v = hi[e]
            for j in range(b, b + k):
                ou[j] = u
                ov[j] = v
        e += stride


@cuda.jit(cache=True)
def _abs_kernel(io, n):
    """out[i] = |vals[i]| as float64. Launch config: 1-D grid-stride, one thread per value."""
    vals, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = abs(vals[i])
        i += stride


# ----------------------------------------------------------------------------- launcher


def _device_input(a):
    """Read-only inputs go up once (a host array passed to a launch is also copied back)."""
    if SIMULATOR or on_device(a):
        return a
    return cuda.to_device(a)


def count_oriented_edges(indptr, hi, flags=None) -> int:
    """Triangles of an oriented CSR (``indptr`` of n + 1 row pointers, ``hi`` of m sorted
    out-lists in rank space), counted on the device; the same number as the CPU's
    ``count_oriented`` on the same CSR. With ``flags`` (arc flags per entry, as for the CPU's
    ``count_oriented_cycles``) the directed 3-cycles instead, the same number as that.

    Host or device int64 arrays in; one launch of :func:`_count_edges_kernel` and one scalar
    read back. Returns 0 without a launch when there are no edges.
    """
    check_1d("indptr", indptr)
    check_1d("hi", hi)
    directed = flags is not None
    if directed:
        check_1d("flags", flags)
        if flags.shape[0] != hi.shape[0]:
            raise ValueError(f"flags has {flags.shape[0]} entries, hi has {hi.shape[0]}")
    m = hi.shape[0]
    if m == 0:
        return 0
    if indptr.shape[0] < 2:
        raise ValueError("indptr needs n + 1 >= 2 row pointers when hi is not empty")
    total = zeros(1)
    blocks, tpb = grid(m)
    hi = _device_input(hi)
    launch(_count_edges_kernel, blocks, tpb,
           (_device_input(indptr), hi, _device_input(flags) if directed else hi, total), m,
           directed, shared=tpb * np.dtype(np.int64).itemsize)
    return scalar(total, 0)


def relation_sum(rk, rm, s_ptr, sk, sv, t_ptr, tk, tv) -> tuple[int, float]:
    """``(Σ R(a,b)·S(b,c)·T(c,a), Σ |R(a,b)·S(b,c)·T(c,a)|)`` on the device.

    ``rk, rm``: R's packed keys (a, b) and values, any order; ``sk, sv``: S sorted by packed
    key (b, c) with row starts ``s_ptr`` (n + 1 entries); ``tk, tv``: T transposed and sorted
    (keys (a, c)) with row starts ``t_ptr``. The int64 sum is exact when the float64 sum of
    absolute values is below 2**62 (the caller's guard, as on the CPU). One launch of
    :func:`_relation_kernel`; two scalars read back.
    """
    for name, a in (("rk", rk), ("rm", rm), ("s_ptr", s_ptr), ("sk", sk), ("sv", sv),
                    ("t_ptr", t_ptr), ("tk", tk), ("tv", tv)):
        check_1d(name, a)
    m = rk.shape[0]
    if m == 0 or sk.shape[0] == 0 or tk.shape[0] == 0:
        return 0, 0.0
    sv, tv = _device_input(sv), _device_input(tv)
    sa = empty(sv.shape[0], np.float64)
    ta = empty(tv.shape[0], np.float64)
    launch(_abs_kernel, *grid(sv.shape[0]), (sv, sa), sv.shape[0])
    launch(_abs_kernel, *grid(tv.shape[0]), (tv, ta), tv.shape[0])
    total = zeros(1)
    total_abs = zeros(1, np.float64)
    blocks, tpb = grid(m)
    launch(_relation_kernel, blocks, min(tpb, 1024),
           tuple(_device_input(a) for a in (rk, rm, s_ptr, sk)) + (sv, sa)
           + tuple(_device_input(a) for a in (t_ptr, tk)) + (tv, ta, total, total_abs), m)
    return scalar(total, 0), float(total_abs[0])


def list_oriented_edges(indptr, hi):
    """Every triangle of an oriented CSR once, as rank triples ``(u, v, w)`` with u < v < w
    by rank (u → v its lowest edge): the device twin of the CPU's ``list_oriented``.

    Two passes of the per-edge walk (:func:`edge_closures`): count per edge, exclusive scan
    (its total is the one scalar read back, to allocate the output), then each edge writes
    its triangles at its offset. Device int64 arrays in and out.
    """
    check_1d("indptr", indptr)
    check_1d("hi", hi)
    m = hi.shape[0]
    if m == 0:
        z = zeros(0)
        return z, z, z
    counts = empty(m)
    launch(_edge_counts_kernel, *grid(m), (indptr, hi, counts), m)
    offs = exclusive_scan(counts)
    total = scalar(offs, m)
    ou, ov, ow = empty(total), empty(total), empty(total)
    if total:
        launch(_edge_list_kernel, *grid(m), (indptr, hi, offs, ou, ov, ow), m)
    return ou, ov, ow
