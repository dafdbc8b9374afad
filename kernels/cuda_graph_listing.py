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


@cuda.jit(device=True)
def _item(i, a, b, f, sign):
    """(taken, x, y, floor) of item i: with ``sign`` 0 the pair (a[i], b[i]) with floor f[i];
    else batch key a[i] = (x, y), taken when x < y and its net change b[i] is ``sign``,
    floor -1 (all its common neighbours)."""
    if sign == 0:
        return True, a[i], b[i], f[i]
    x = a[i] >> 32
    y = a[i] & LO_MASK
    return x < y and b[i] == sign, x, y, -1


@cuda.jit(device=True)
def _finish(i, x, y, s, e, step, keys, vals, sign, o1, o2, o3):
    """The slots s, s + step, ... below e of item i (pair {x, y}), once its common neighbours
    are written: with ``sign`` 0 (in o2) each gets the pair's index in o1; else (in o1) each is
    rewritten as its triangle's row (o1, o2, o3) = (lo, mid, hi), lo = -1 where
    :func:`~gpu_ivm.kernels.batch_triangles.kept_triangle` drops it."""
    for t in range(s, e, step):
        if sign == 0:
            o1[t] = i
        else:
            kept, lo, m, h = kept_triangle(x, y, o1[t], keys, vals, sign)
            o1[t] = lo if kept else -1
            o2[t] = m
            o3[t] = h


@cuda.jit(cache=True)
def _listing_kernel(io, hst, lst, hv, n, sign, fill, coop_min):
    """Item i's common neighbours above its floor (:func:`_item`: a pair of ``common_above``
    with ``sign`` 0, a batch key of ``batch_pair_triangles`` with ``sign`` ±1), counted into
    counts[i + 1] (``fill`` 0: every item's count written, 0 where not taken, and counts[0] =
    0 by thread 0), or written at [ptr[i], ptr[i + 1]) and finished (:func:`_finish`).
    Binned by cost in one launch, as the count's path weights are: an item whose shorter row
    has fewer than ``coop_min`` entries is walked by one thread (:func:`walk_above`), a longer
    one by a whole block (:func:`_block_walk`). Launch config: 1-D; threads grid-stride over
    the cheap items, then blocks over the others (every thread of a block takes the same
    decisions, so the barriers are reached by all). ``coop_min`` = ``cuda_delta.NO_BLOCKS``:
    one thread per item."""
    a, b, f, counts, ptr, o1, o2, o3 = io
    heavy = hv[0]
    dst = o2 if sign == 0 else o1  # where the walk writes the common neighbours
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    if i == 0 and fill == 0:
        counts[0] = 0
    while i < n:
        taken, x, y, fl = _item(i, a, b, f, sign)
        cheap = taken and pair_cost(x, y, hst, lst, heavy) < coop_min
        if fill == 0:
            k = 0
            if cheap:  # dst is empty here: counted, nothing written (no marks: a search)
                sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
                k = walk_above(sl, xl, False, False, dst, ss, xs_, fl, dst, 0)
            if cheap or not taken:  # a block writes the count of an expensive item
                counts[i + 1] = k
        elif cheap:
            s0 = ptr[i]
            sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
            k = walk_above(sl, xl, False, False, dst, ss, xs_, fl, dst, s0)
            _finish(i, x, y, s0, s0 + k, 1, a, b, sign, o1, o2, o3)
        i += stride
    if coop_min == NO_BLOCKS:
        return
    acc = cuda.shared.array(1, nb.int64)
    lane = cuda.threadIdx.x
    g = cuda.blockIdx.x
    while g < n:
        taken, x, y, fl = _item(g, a, b, f, sign)
        if taken and pair_cost(x, y, hst, lst, heavy) >= coop_min:
            sl, xl, ss, xs_ = oriented(x, y, hst, lst, heavy)
            s0 = ptr[g] if fill else 0
            total = _block_walk(sl, xl, ss, xs_, fl, dst, s0, acc)
            if fill == 0:
                if lane == 0:
                    counts[g + 1] = total
            else:
                _finish(g, x, y, s0 + lane, s0 + total, cuda.blockDim.x, a, b, sign, o1, o2,
                        o3)
        g += cuda.gridDim.x


def _list(a, b, f, sign: int, hst, lst, heavy, outs: int):
    """The two passes of :func:`_listing_kernel` over the n items of ``a`` / ``b`` / ``f``
    (count, one scan, one read of the total, fill): ``outs`` output arrays of that total
    (the third left empty where ``outs`` is 2)."""
    n = a.shape[0]
    counts = empty(n + 1)
    none = empty(0)
    shape = (min(n, CONFIG.max_blocks), CONFIG.tpb)
    rest = (hst, lst, (heavy,), n, np.int64(sign))
    coop = np.int64(cuda_delta.COOP_MIN)
    launch(_listing_kernel, *shape, (a, b, f, counts, none, none, none, none), *rest, 0, coop)
    ptr = padded_scan(counts)
    total = scalar(ptr, n)
    out = [empty(total) for _ in range(outs)] + [none] * (3 - outs)
    if total:
        launch(_listing_kernel, *shape, (a, b, f, counts, ptr, *out), *rest, 1, coop)
    return out[:outs]


def common_above(ls, ss, floors, hst, lst, heavy, start=0):
    """As the CPU function (one pass over every pair from ``start``): ``(idx, c, stop)``."""
    check_1d("ls", ls)
    if ls.shape[0] - start <= 0:
        return zeros(0), zeros(0), ls.shape[0]
    idx, c = _list(ls[start:], ss[start:], floors[start:], 0, hst, lst, heavy, 2)
    return idx + start if start else idx, c, ls.shape[0]


def batch_pair_triangles(dkeys, dvals, sign, hst, lst, heavy):
    """As the CPU function, with the rows it drops left in place as ``lo = -1``
    (:func:`~gpu_ivm.kernels.batch_triangles.live_rows` drops them): two launches, one
    scan and one read."""
    check_1d("dkeys", dkeys)
    if dkeys.shape[0] == 0:
        z = empty(0)
        return z, z, z
    return tuple(_list(dkeys, dvals, dkeys, sign, hst, lst, heavy, 3))
