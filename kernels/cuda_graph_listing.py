"""CUDA twin of :mod:`gpu_ivm.kernels.graph_listing`: the common neighbours above a floor of
pairs of vertices, read off a device's stores (the ``local`` part's ``common_above``), and of
:mod:`gpu_ivm.kernels.batch_triangles` (``batch_pair_triangles``, the change feed's rows).

One pass over all the pairs, four calls and one read: a thread per pair counts its common
neighbours (the CPU's :func:`~gpu_ivm.kernels.graph_listing.walk_above`: the shorter row
walked from above the floor, each entry searched in the longer row's runs, as a device's
stores keep no bitmaps and a thread no marks), one scan gives each pair its slots, the total
is read back to size the output, and the same walk writes the ids with their pair index.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .batch_triangles import kept_triangle
from .cuda_launch import check_1d, empty, grid, launch, padded_scan, scalar, zeros
from .graph_listing import walk_above
from .graph_local import oriented
from .lsm import LO_MASK


@cuda.jit(cache=True)
def _above_kernel(io, hst, lst, hv, n, fill):
    """Pair i = (xs[i], ys[i]) with floor floors[i]: its common neighbours c > floor,
    counted into counts[i + 1] (``fill`` 0), or written (``fill`` 1) with their pair index at
    [ptr[i], ptr[i + 1]). Launch config: 1-D grid-stride over the pairs."""
    xs, ys, floors, counts, ptr, idx, out_c = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        sl, xl, ss, xs_ = oriented(xs[i], ys[i], hst, lst, heavy)
        if fill == 0:
            # out_c is empty here: counted, nothing written (and no marks: a search)
            counts[i + 1] = walk_above(sl, xl, False, False, out_c, ss, xs_, floors[i], out_c,
                                       0)
        else:
            b = ptr[i]
            k = walk_above(sl, xl, False, False, out_c, ss, xs_, floors[i], out_c, b)
            for t in range(b, b + k):
                idx[t] = i
        i += stride


def common_above(ls, ss, floors, hst, lst, heavy, start=0):
    """As the CPU function (one pass over every pair from ``start``): ``(idx, c, stop)``."""
    check_1d("ls", ls)
    n = ls.shape[0] - start
    if n <= 0:
        return zeros(0), zeros(0), ls.shape[0]
    xs, ys, fl = ls[start:], ss[start:], floors[start:]
    counts = zeros(n + 1)
    none = empty(0)
    launch(_above_kernel, *grid(n), (xs, ys, fl, counts, none, none, none), hst, lst,
           (heavy,), n, 0)
    ptr = padded_scan(counts)
    total = scalar(ptr, n)
    idx = empty(total)
    out_c = empty(total)
    if total:
        launch(_above_kernel, *grid(n), (xs, ys, fl, counts, ptr, idx, out_c), hst, lst,
               (heavy,), n, 1)
    return idx + start if start else idx, out_c, ls.shape[0]


@cuda.jit(cache=True)
def _batch_pairs_kernel(io, hst, lst, hv, n, sign, fill):
    """Batch key i = (x, y) with x < y and net change ``sign``: the common neighbours c of
    x and y, counted into counts[i + 1] (``fill`` 0; other keys count 0, and thread 0 writes
    counts[0] = 0), or (``fill`` 1) written at [ptr[i], ptr[i + 1]) as the rows (lo, mid, hi)
    of the triangles, lo = -1 where :func:`~gpu_ivm.kernels.batch_triangles.kept_triangle`
    drops the row (found at a smaller pair of the batch). Launch config: 1-D grid-stride
    over the batch's keys."""
    keys, vals, counts, ptr, lo, mid, hi = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    if i == 0 and fill == 0:
        counts[0] = 0
    while i < n:
        x = keys[i] >> 32
        y = keys[i] & LO_MASK
        mine = x < y and vals[i] == sign
        if fill == 0:
            k = 0
            if mine:  # lo is empty here: counted, nothing written
                sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
                k = walk_above(sl, xl, False, False, lo, ss, xs_, -1, lo, 0)
            counts[i + 1] = k
        elif mine:
            b = ptr[i]
            sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
            k = walk_above(sl, xl, False, False, lo, ss, xs_, -1, lo, b)
            for t in range(b, b + k):
                kept, a, m, h = kept_triangle(x, y, lo[t], keys, vals, sign)
                lo[t] = a if kept else -1
                mid[t] = m
                hi[t] = h
        i += stride


def batch_pair_triangles(dkeys, dvals, sign, hst, lst, heavy):
    """As the CPU function, with the rows it drops left in place as ``lo = -1``
    (:func:`~gpu_ivm.kernels.batch_triangles.live_rows` drops them): two launches, one
    scan and one read."""
    check_1d("dkeys", dkeys)
    n = dkeys.shape[0]
    if n == 0:
        z = empty(0)
        return z, z, z
    counts = empty(n + 1)
    none = empty(0)
    launch(_batch_pairs_kernel, *grid(n), (dkeys, dvals, counts, none, none, none, none), hst,
           lst, (heavy,), n, np.int64(sign), 0)
    ptr = padded_scan(counts)
    total = scalar(ptr, n)
    lo, mid, hi = empty(total), empty(total), empty(total)
    if total:
        launch(_batch_pairs_kernel, *grid(n), (dkeys, dvals, counts, ptr, lo, mid, hi), hst,
               lst, (heavy,), n, np.int64(sign), 1)
    return lo, mid, hi
