"""CUDA twin of the offline window evaluator's kernel (:func:`gpu_ivm.kernels.stamp_kernels.
lifespan_triangles`).

``lifespan_triangles`` has the CPU kernel's signature and result: for every triangle of the
degree-oriented union graph (CSR ``indptr`` / ``indices``, ``edge_of`` mapping each entry to its
edge), the steps at which its three edges are all alive (the common intervals of their segment
lists) are added to the difference array ``diff``. One thread per CSR entry, i.e. per oriented
edge u → v (grid-stride): it merges the out-rows of u (after v) and of v, and for each common
w sweeps the three segment lists. The CPU kernel adds to ``diff`` directly; here the additions
are atomic, which is the one difference (a plain ``njit`` body cannot call
``cuda.atomic.add``), so the sweep is the device function :func:`_sweep`, the same loop as
:func:`gpu_ivm.kernels.stamp_kernels._segment_sweep`. The offline evaluator runs on the cpu
backend; this twin is tested against it in the CUDA simulator
(``tests/cuda_sim_stamp_cases.py``) so the mode can move to the device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, grid, launch


@cuda.jit(device=True)
def _sweep(sa, ea, lo1, hi1, lo2, hi2, lo3, hi3, diff):
    """The common intervals of three sorted lists of disjoint closed intervals [sa, ea]: +1 at
    each start and -1 after each end, atomically."""
    i = lo1
    j = lo2
    t = lo3
    while i < hi1 and j < hi2 and t < hi3:
        s = max(sa[i], max(sa[j], sa[t]))
        e = min(ea[i], min(ea[j], ea[t]))
        if s <= e:
            cuda.atomic.add(diff, s, 1)
            cuda.atomic.add(diff, e + 1, -1)
        if ea[i] == e:
            i += 1
        elif ea[j] == e:
            j += 1
        else:
            t += 1


@cuda.jit(cache=True)
def _lifespan_kernel(csr, seg, diff, m):
    """One thread per CSR entry (oriented edge), grid-stride; the arrays travel in tuples."""
    indptr, indices, edge_of = csr
    seg_ptr, seg_start, seg_end = seg
    n = indptr.shape[0] - 1
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < m:
        lo = 0  # the tail u of entry p: the last row starting at or before p
        hi = n
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if indptr[mid] <= p:
                lo = mid
            else:
                hi = mid
        u = lo
        while indptr[u + 1] <= p:  # rows before p's may be empty
            u += 1
        v = indices[p]
        e_uv = edge_of[p]
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
                _sweep(seg_start, seg_end, seg_ptr[e_uv], seg_ptr[e_uv + 1], seg_ptr[e_uw],
                       seg_ptr[e_uw + 1], seg_ptr[e_vw], seg_ptr[e_vw + 1], diff)
                i += 1
                j += 1
        p += stride


def lifespan_triangles(indptr, indices, edge_of, seg_ptr, seg_start, seg_end, diff) -> None:
    """Add every union-graph triangle's alive steps to ``diff`` (see the module docstring);
    a thread finds its entry's row by a binary search of ``indptr``. Host (NumPy) arrays
    are taken under the simulator, device arrays on hardware."""
    for name, a in (("indptr", indptr), ("indices", indices), ("edge_of", edge_of),
                    ("seg_ptr", seg_ptr), ("seg_start", seg_start), ("seg_end", seg_end),
                    ("diff", diff)):
        check_1d(name, a, np.int64)
    m = indices.shape[0]
    if m == 0:
        return
    blocks, tpb = grid(m)
    launch(_lifespan_kernel, blocks, tpb, (indptr, indices, edge_of),
           (seg_ptr, seg_start, seg_end), diff, m)
