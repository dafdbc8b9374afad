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

from .cuda_launch import SIMULATOR, check_1d, grid, on_device, scalar, zeros
from .lsm import gallop, lower_bound

# ----------------------------------------------------------------------------- per-edge body


@nb.njit(cache=True)
def edge_triangles(indptr, hi, e):
    """Triangles u < v < w closed by the oriented edge ``e`` (u → v = ``hi[e]``).

    ``indptr, hi`` is an oriented CSR (rows sorted, duplicate-free, every entry above its row,
    as built by ``gpu_ivm.static._oriented_csr``). Returns |out(u) after v ∩ out(v)|; summed
    over all edges this is the triangle count, each triangle counted once by its edge u → v.
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
                c += 1
                a += 1
                b += 1
    elif la < lb:
        c = _walk_and_gallop(hi, a, a_end, b, b_end)
    else:
        c = _walk_and_gallop(hi, b, b_end, a, a_end)
    return c


@nb.njit(cache=True)
def _walk_and_gallop(hi, a, a_end, b, b_end):
    """|hi[a:a_end] ∩ hi[b:b_end]| (both sorted, duplicate-free): walk the first range (the
    shorter) and gallop in the second; the targets increase, so each search resumes where
    the last one stopped."""
    c = 0
    while a < a_end:
        x = hi[a]
        b = gallop(hi, b, b_end, x)
        if b == b_end:
            break
        if hi[b] == x:
            c += 1
            b += 1
        a += 1
    return c


# ----------------------------------------------------------------------------- kernel


@cuda.jit
def _count_edges_kernel(io, m):
    """total[0] += Σ_e edge_triangles(e) over the m oriented edges.

    Launch config: 1-D grid-stride, one thread per oriented edge, any block size (the tree
    handles non-powers of two); dynamic shared memory of ``blockDim.x * 8`` bytes for the block
    sum; one ``atomic.add`` per block. Work per edge ≤ |out(u)| + |out(v)| ≤ 2·sqrt(2m) reads
    (merge) and much less when one list is short (gallop); see docs/gpu.md for the imbalance.
    """
    indptr, hi, total = io
    sh = cuda.shared.array(0, nb.int64)
    t = cuda.threadIdx.x
    ntid = cuda.blockDim.x
    acc = 0
    e = cuda.grid(1)
    stride = cuda.gridsize(1)
    while e < m:
        acc += edge_triangles(indptr, hi, e)
        e += stride
    sh[t] = acc
    cuda.syncthreads()
    s = 1
    while s < ntid:
        s *= 2
    s //= 2
    while s > 0:  # same trip count in every thread: syncthreads is safe
        if t < s and t + s < ntid:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0 and sh[0] != 0:
        cuda.atomic.add(total, 0, sh[0])


# ----------------------------------------------------------------------------- launcher


def _device_input(a):
    """Read-only inputs go up once (a host array passed to a launch is also copied back)."""
    if SIMULATOR or on_device(a):
        return a
    return cuda.to_device(a)


def count_oriented_edges(indptr, hi) -> int:
    """Triangles of an oriented CSR (``indptr`` of n + 1 row pointers, ``hi`` of m sorted
    out-lists in rank space), counted on the device; the same number as the CPU's
    ``count_oriented`` on the same CSR.

    Host or device int64 arrays in; one launch of :func:`_count_edges_kernel` and one scalar
    read back. Returns 0 without a launch when there are no edges.
    """
    check_1d("indptr", indptr)
    check_1d("hi", hi)
    m = hi.shape[0]
    if m == 0:
        return 0
    if indptr.shape[0] < 2:
        raise ValueError("indptr needs n + 1 >= 2 row pointers when hi is not empty")
    total = zeros(1)
    blocks, tpb = grid(m)
    _count_edges_kernel[blocks, tpb, 0, tpb * np.dtype(np.int64).itemsize](
        (_device_input(indptr), _device_input(hi), total), m)
    return scalar(total, 0)
