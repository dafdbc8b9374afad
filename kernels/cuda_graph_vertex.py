"""CUDA kernels of the per-vertex counts kept off the graph's stores: the ``vertex`` part of
the cuda kernel set (:mod:`gpu_ivm.kernels.graph_vertex` is the CPU one; same function, same
result).

Two launches per batch, nothing read back: one thread per tuple of the batch for the pair
terms (the tuples (x, y) with x < y: the shorter row after the batch walked, each entry
searched in the longer one, ``graph_vertex.member`` without marks or bitmaps, which a
device's stores do not keep), and one thread per tuple (a, b) for the wedge terms whose
smaller end is a (the part of the batch's row b above a, each c looked up in B and in the
batch, the CPU kernel's lookup branch). Every term goes into ``dense`` by ``atomic.add``
where the CPU adds in place; the row choice, the orientation, the membership test and the
searches are the CPU module's functions.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, empty, grid, launch
from .graph_vertex import batch_value, member, oriented, row_above, row_store
from .lsm import LO_MASK, get, real_end, run_mask, run_range


@cuda.jit(cache=True)
def _pairs_kernel(io, hst, lst, hv, n):
    """The pair terms of tuple i = (x, y), x < y: 2·D·term to each common neighbour c after
    the batch, 2·D·w to x and to y. Launch config: 1-D grid-stride over the batch's tuples."""
    dkeys, dvals, dense, marks = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        d2 = 2 * dvals[i]
        if x < y and d2 != 0:
            sl, xl, ss, xs = oriented(x, y, hst, lst, heavy)
            keys = ss[0]
            vals = ss[1]
            w = 0
            m = run_mask(ss, xs)
            j = 0
            while m != 0:
                if m & 1:
                    lo, hi = run_range(ss, j, xs)
                    hi = real_end(keys, lo, hi, xs)
                    for p in range(lo, hi):
                        v = vals[p]
                        if v != 0:
                            c = keys[p] & LO_MASK
                            u = member(sl, xl, c, False, False, marks)
                            if u != 0:
                                w += v * u
                                cuda.atomic.add(dense, c, d2 * v * u)
                m >>= 1
                j += 1
            if w != 0:
                cuda.atomic.add(dense, x, d2 * w)
                cuda.atomic.add(dense, y, d2 * w)
        i += stride


@cuda.jit(cache=True)
def _wedges_kernel(io, hst, lst, hv, n):
    """The wedge terms of tuple i = (a, b): for each c > a in the batch's row b
    (p = 2·D(b,a)·D(b,c)), a, c and b lose p·B(a,c), and b gains p·D(a,c). Launch config:
    1-D grid-stride over the batch's tuples."""
    dkeys, dvals, dense = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        a = dkeys[i] >> 32
        b = dkeys[i] & LO_MASK
        dba = dvals[i]
        if dba != 0:
            sa = row_store(hst, lst, heavy, a)
            lo, k = row_above(dkeys, b, a)
            for q in range(lo, lo + k):
                pr = 2 * dba * dvals[q]
                if pr != 0:
                    c = dkeys[q] & LO_MASK
                    bac = get(sa, (a << 32) | c)
                    if bac != 0:
                        cuda.atomic.add(dense, a, -pr * bac)
                        cuda.atomic.add(dense, c, -pr * bac)
                        cuda.atomic.add(dense, b, -pr * bac)
                    dac = batch_value(dkeys, dvals, 0, n, (a << 32) | c)
                    if dac != 0:
                        cuda.atomic.add(dense, b, pr * dac)
        i += stride


def vertex_delta(dkeys, dvals, hst, lst, heavy, dense) -> None:
    """dense[v] += the change of Δ1(v) caused by the batch (see the CPU function)."""
    check_1d("dkeys", dkeys)
    n = dkeys.shape[0]
    if n == 0:
        return
    launch(_pairs_kernel, *grid(n), (dkeys, dvals, dense, empty(0, np.int8)), hst, lst,
           (heavy,), n)
    launch(_wedges_kernel, *grid(n), (dkeys, dvals, dense), hst, lst, (heavy,), n)
