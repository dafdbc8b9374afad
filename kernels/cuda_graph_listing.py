"""CUDA twin of :mod:`gpu_ivm.kernels.graph_listing`: the common neighbours above a floor of
pairs of vertices, read off a device's stores (the ``local`` part's ``common_above``), and of
:mod:`gpu_ivm.kernels.batch_triangles` (``batch_pair_triangles``, the change feed's rows).

One pass over all the pairs, four calls and one read: a thread per pair counts its common
neighbours (the CPU's :func:`~gpu_ivm.kernels.graph_listing.walk_above`: the shorter row
walked from above the floor, each entry searched in the longer row's runs, as a device's
stores keep no bitmaps and a thread no marks), one scan gives each pair its slots, the total
is read back to size the output, and the same walk writes the ids with their pair index.
A pair whose shorter row has ``cuda_delta.COOP_MIN`` entries or more (a hub pair) is walked
by a whole block instead, in the same launch (the count kernel's binning): its threads
stride the row, add their counts in shared memory, and claim their output slots there.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import cuda

from . import cuda_delta
from .batch_triangles import kept_triangle
from .cuda_delta import NO_BLOCKS
from .cuda_launch import CONFIG, check_1d, empty, launch, padded_scan, scalar, zeros
from .graph_listing import walk_above
from .graph_local import member, oriented, pair_cost
from .lsm import LO_MASK, lower_bound, real_end, run_mask, run_range


@cuda.jit(device=True)
def _above_lane(sl, xl, ss, xs, floor, out_c, base, acc, lane, lanes):
    """Lane ``lane`` of ``lanes``' share of a pair's walk (:func:`walk_above` with the short
    row's entries above the floor taken lane, lane + lanes, ...; each searched in the long
    row): with ``out_c`` empty its count is added to acc[0], else each common neighbour is
    written at out_c[base + s], s a slot claimed from acc[0]."""
    keys = ss[0]
    vals = ss[1]
    emit = out_c.shape[0] > 0
    k = 0
    m = run_mask(ss, xs)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(ss, j, xs)
            hi = real_end(keys, lo, hi, xs)
            p = lower_bound(keys, lo, hi, (xs << 32) | (floor + 1)) + lane
            while p < hi:
                if vals[p] != 0:
                    c = keys[p] & LO_MASK
                    if member(sl, xl, c, False, False, out_c) != 0:
                        if emit:
                            out_c[base + cuda.atomic.add(acc, 0, 1)] = c
                        k += 1
                p += lanes
        m >>= 1
        j += 1
    if not emit and k:
        cuda.atomic.add(acc, 0, k)


@cuda.jit(device=True)
def _block_walk(sl, xl, ss, xs, floor, out_c, base, acc):
    """One pair's walk by a whole block (every thread of the block calls it): the count of
    its common neighbours above ``floor``, or (``out_c`` not empty) that many written from
    out_c[base] on, in no particular order; returns the count to every thread."""
    lane = cuda.threadIdx.x
    if lane == 0:
        acc[0] = 0
    cuda.syncthreads()
    _above_lane(sl, xl, ss, xs, floor, out_c, base, acc, lane, cuda.blockDim.x)
    cuda.syncthreads()
    total = acc[0]
    cuda.syncthreads()  # every thread has read it before the next pair resets it
    return total


@cuda.jit(cache=True)
def _above_kernel(io, hst, lst, hv, n, fill, coop_min):
    """Pair i = (xs[i], ys[i]) with floor floors[i]: its common neighbours c > floor,
    counted into counts[i + 1] (``fill`` 0), or written (``fill`` 1) with their pair index at
    [ptr[i], ptr[i + 1]). Binned by cost in one launch, as the count's path weights are: a
    pair whose shorter row has fewer than ``coop_min`` entries is walked by one thread
    (:func:`walk_above`), a longer one by a whole block (:func:`_block_walk`). Launch config:
    1-D; threads grid-stride over the short pairs, then blocks over the long ones (every
    thread of a block takes the same decisions, so the barriers are reached by all).
    ``coop_min`` = ``cuda_delta.NO_BLOCKS``: one thread per pair."""
    xs, ys, floors, counts, ptr, idx, out_c = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if pair_cost(xs[i], ys[i], hst, lst, heavy) < coop_min:
            sl, xl, ss, xs_ = oriented(xs[i], ys[i], hst, lst, heavy)
            if fill == 0:
                # out_c is empty here: counted, nothing written (and no marks: a search)
                counts[i + 1] = walk_above(sl, xl, False, False, out_c, ss, xs_, floors[i],
                                           out_c, 0)
            else:
                b = ptr[i]
                k = walk_above(sl, xl, False, False, out_c, ss, xs_, floors[i], out_c, b)
                for t in range(b, b + k):
                    idx[t] = i
        i += stride
    if coop_min == NO_BLOCKS:
        return
    acc = cuda.shared.array(1, nb.int64)
    lane = cuda.threadIdx.x
    g = cuda.blockIdx.x
    while g < n:
        if pair_cost(xs[g], ys[g], hst, lst, heavy) >= coop_min:
            sl, xl, ss, xs_ = oriented(xs[g], ys[g], hst, lst, heavy)
            b = ptr[g] if fill else 0
            total = _block_walk(sl, xl, ss, xs_, floors[g], out_c, b, acc)
            if fill == 0:
                if lane == 0:
                    counts[g + 1] = total
            else:
                for t in range(b + lane, b + total, cuda.blockDim.x):
                    idx[t] = g
        g += cuda.gridDim.x


def _binned(n: int) -> tuple[int, int]:
    """The launch shape of the binned kernels: enough threads for one per item, and up to one
    block per item for the items walked by blocks."""
    return min(n, CONFIG.max_blocks), CONFIG.tpb


def common_above(ls, ss, floors, hst, lst, heavy, start=0):
    """As the CPU function (one pass over every pair from ``start``): ``(idx, c, stop)``."""
    check_1d("ls", ls)
    n = ls.shape[0] - start
    if n <= 0:
        return zeros(0), zeros(0), ls.shape[0]
    xs, ys, fl = ls[start:], ss[start:], floors[start:]
    counts = zeros(n + 1)
    none = empty(0)
    coop = np.int64(cuda_delta.COOP_MIN)
    launch(_above_kernel, *_binned(n), (xs, ys, fl, counts, none, none, none), hst, lst,
           (heavy,), n, 0, coop)
    ptr = padded_scan(counts)
    total = scalar(ptr, n)
    idx = empty(total)
    out_c = empty(total)
    if total:
        launch(_above_kernel, *_binned(n), (xs, ys, fl, counts, ptr, idx, out_c), hst, lst,
               (heavy,), n, 1, coop)
    return idx + start if start else idx, out_c, ls.shape[0]


@cuda.jit(cache=True)
def _batch_pairs_kernel(io, hst, lst, hv, n, sign, fill, coop_min):
    """Batch key i = (x, y) with x < y and net change ``sign``: the common neighbours c of
    x and y, counted into counts[i + 1] (``fill`` 0; other keys count 0, and thread 0 writes
    counts[0] = 0), or (``fill`` 1) written at [ptr[i], ptr[i + 1]) as the rows (lo, mid, hi)
    of the triangles, lo = -1 where :func:`~gpu_ivm.kernels.batch_triangles.kept_triangle`
    drops the row (found at a smaller pair of the batch). Binned by cost as
    :func:`_above_kernel` is. Launch config: as there, over the batch's keys."""
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
        cheap = mine and pair_cost(x, y, hst, lst, heavy) < coop_min
        if fill == 0:
            k = 0
            if cheap:  # lo is empty here: counted, nothing written
                sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
                k = walk_above(sl, xl, False, False, lo, ss, xs_, -1, lo, 0)
            if cheap or not mine:  # a block writes the count of an expensive pair
                counts[i + 1] = k
        elif cheap:
            b = ptr[i]
            sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
            k = walk_above(sl, xl, False, False, lo, ss, xs_, -1, lo, b)
            _keep_rows(x, y, b, b + k, 1, keys, vals, sign, lo, mid, hi)
        i += stride
    if coop_min == NO_BLOCKS:
        return
    acc = cuda.shared.array(1, nb.int64)
    lane = cuda.threadIdx.x
    g = cuda.blockIdx.x
    while g < n:
        x = keys[g] >> 32
        y = keys[g] & LO_MASK
        if x < y and vals[g] == sign and pair_cost(x, y, hst, lst, heavy) >= coop_min:
            sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
            b = ptr[g] if fill else 0
            total = _block_walk(sl, xl, ss, xs_, -1, lo, b, acc)
            if fill == 0:
                if lane == 0:
                    counts[g + 1] = total
            else:
                _keep_rows(x, y, b + lane, b + total, cuda.blockDim.x, keys, vals, sign, lo,
                           mid, hi)
        g += cuda.gridDim.x


@cuda.jit(device=True)
def _keep_rows(x, y, s, e, step, keys, vals, sign, lo, mid, hi):
    """The slots s, s + step, ... below e of pair {x, y}, each holding a common neighbour in
    lo, rewritten as the triangle's row (lo = -1 where it is dropped)."""
    for t in range(s, e, step):
        kept, a, m, h = kept_triangle(x, y, lo[t], keys, vals, sign)
        lo[t] = a if kept else -1
        mid[t] = m
        hi[t] = h


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
    coop = np.int64(cuda_delta.COOP_MIN)
    launch(_batch_pairs_kernel, *_binned(n), (dkeys, dvals, counts, none, none, none, none),
           hst, lst, (heavy,), n, np.int64(sign), 0, coop)
    ptr = padded_scan(counts)
    total = scalar(ptr, n)
    lo, mid, hi = empty(total), empty(total), empty(total)
    if total:
        launch(_batch_pairs_kernel, *_binned(n), (dkeys, dvals, counts, ptr, lo, mid, hi),
               hst, lst, (heavy,), n, np.int64(sign), 1, coop)
    return lo, mid, hi
