"""CUDA kernels of the per-vertex and per-edge counts kept off the graph's stores: the
``local`` part of the cuda kernel set (:mod:`gpu_ivm.kernels.graph_local` is the CPU one;
same functions, same results).

Two launches per batch, nothing read back: one for the pair terms (the tuples (x, y) with
x < y: the shorter row after the batch walked, each entry searched in the longer one,
``graph_local.member`` without marks or bitmaps, which a device's stores do not keep), a pair
on one thread or, when its shorter row has ``cuda_delta.COOP_MIN`` entries or more, on a
whole block whose threads stride the row (the count kernel's binning); and one thread per
tuple (a, b) for the wedge terms whose smaller end is a (the part of the batch's row b above
a, each c looked up in B and in the batch, the CPU kernel's lookup branch). Every vertex
term goes into ``dense`` by ``atomic.add`` where the CPU adds in place; every edge term into
the table of counts
(:mod:`gpu_ivm.kernels.count_table`) by a compare-and-swap that claims the key's slot and an
``atomic.add`` on its count. The row choice, the orientation, the membership test, the
searches and the table's hash are the CPU modules' functions.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import cuda

from . import cuda_delta
from .count_table import FREE, count_of
from .cuda_delta import NO_BLOCKS
from .cuda_launch import CONFIG, check_1d, empty, grid, launch
from .graph_local import (
    batch_value,
    edge_key,
    member,
    oriented,
    pair_cost,
    row_above,
    row_store,
    wedge_edge_terms,
)
from .hashmap import home_slot
from .lsm import LO_MASK, get, real_end, run_mask, run_range


@cuda.jit(device=True)
def _table_add(tab, k, v):
    """The count of key k += v on any number of threads: the slot claimed by compare-and-swap
    of its key from FREE to k (a slot's key never changes once set), the count added
    atomically (the layout of :mod:`gpu_ivm.kernels.count_table`)."""
    if v != 0:
        mask = (tab.shape[0] >> 1) - 1
        s = home_slot(k, mask)
        while True:
            old = cuda.atomic.cas(tab, 2 * s, FREE, k)
            if old == FREE or old == k:
                break
            s = (s + 1) & mask
        cuda.atomic.add(tab, 2 * s + 1, v)


@cuda.jit(device=True)
def _pair_lane(x, y, d, hst, lst, heavy, dense, tab, marks, lane, lanes):
    """Lane ``lane`` of ``lanes``' share of pair {x, y}'s terms (net change d): the entries
    lane, lane + lanes, ... of the shorter row after the batch (every run), each searched in
    the longer row; a common neighbour c gets 2·d·term in ``dense`` and d·term on the pairs
    {c, x} and {c, y} in the table (each output skipped when empty). Returns the lane's share
    of w, the pair's common neighbours (its own terms are added once w is whole)."""
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
            p = lo + lane
            while p < hi:
                v = vals[p]
                if v != 0:
                    c = keys[p] & LO_MASK
                    u = member(sl, xl, c, False, False, marks)
                    if u != 0:
                        w += v * u
                        if dense.shape[0] > 0:
                            cuda.atomic.add(dense, c, 2 * d * v * u)
                        if tab.shape[0] > 0:
                            _table_add(tab, edge_key(c, x), d * v * u)
                            _table_add(tab, edge_key(c, y), d * v * u)
                p += lanes
        m >>= 1
        j += 1
    return w


@cuda.jit(device=True)
def _pair_ends(x, y, d, w, dense, tab):
    """Pair {x, y}'s own terms once its w is whole: 2·d·w to x and y, d·w to {x, y}."""
    if w != 0:
        if dense.shape[0] > 0:
            cuda.atomic.add(dense, x, 2 * d * w)
            cuda.atomic.add(dense, y, 2 * d * w)
        if tab.shape[0] > 0:
            _table_add(tab, (x << 32) | y, d * w)


@cuda.jit(cache=True)
def _pairs_kernel(io, hst, lst, hv, n, coop_min):
    """The pair terms of tuple i = (x, y), x < y: 2·D·term to each common neighbour c after
    the batch, 2·D·w to x and to y; D·term to the pairs {c, x} and {c, y}, D·w to {x, y}.
    Binned by cost in one launch, as the count's path weights are
    (``cuda_delta._path_weights_kernel``): a pair whose shorter row has fewer than
    ``coop_min`` entries is walked by one thread, a longer one by a whole block, its threads
    the lanes of the row, their shares of w added in shared memory. Launch config: 1-D;
    threads grid-stride over the short pairs, then blocks grid-stride over the long ones
    (every thread of a block takes the same decisions, so the barriers are reached by all).
    ``coop_min`` = ``cuda_delta.NO_BLOCKS``: one thread per pair."""
    dkeys, dvals, dense, marks, tab = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        d = dvals[i]
        if x < y and d != 0 and pair_cost(x, y, hst, lst, heavy) < coop_min:
            w = _pair_lane(x, y, d, hst, lst, heavy, dense, tab, marks, 0, 1)
            _pair_ends(x, y, d, w, dense, tab)
        i += stride
    if coop_min == NO_BLOCKS:
        return
    acc = cuda.shared.array(1, nb.int64)
    lane = cuda.threadIdx.x
    b = cuda.blockIdx.x
    while b < n:
        x = dkeys[b] >> 32
        y = dkeys[b] & LO_MASK
        d = dvals[b]
        if x < y and d != 0 and pair_cost(x, y, hst, lst, heavy) >= coop_min:
            if lane == 0:
                acc[0] = 0
            cuda.syncthreads()
            w = _pair_lane(x, y, d, hst, lst, heavy, dense, tab, marks, lane, cuda.blockDim.x)
            if w != 0:
                cuda.atomic.add(acc, 0, w)
            cuda.syncthreads()
            if lane == 0:
                _pair_ends(x, y, d, acc[0], dense, tab)
            cuda.syncthreads()
        b += cuda.gridDim.x


@cuda.jit(cache=True)
def _wedges_kernel(io, hst, lst, hv, n):
    """The wedge terms of tuple i = (a, b): for each c > a in the batch's row b
    (p = 2·D(b,a)·D(b,c)), a, c and b lose p·B(a,c), and b gains p·D(a,c); with p/2, the
    pairs {a, b}, {c, b} and {a, c} lose p/2·B(a,c) and {a, c} gains p/2·D(a,c). Launch
    config: 1-D grid-stride over the batch's tuples."""
    dkeys, dvals, dense, tab = io
    heavy = hv[0]
    verts = dense.shape[0] > 0
    edges = tab.shape[0] > 0
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
                    dac = batch_value(dkeys, dvals, 0, n, (a << 32) | c)
                    if verts:
                        if bac != 0:
                            cuda.atomic.add(dense, a, -pr * bac)
                            cuda.atomic.add(dense, c, -pr * bac)
                            cuda.atomic.add(dense, b, -pr * bac)
                        if dac != 0:
                            cuda.atomic.add(dense, b, pr * dac)
                    if edges:
                        k1, v1, k2, v2, k3, v3 = wedge_edge_terms(a, b, c, pr, bac, dac)
                        _table_add(tab, k1, v1)
                        _table_add(tab, k2, v2)
                        _table_add(tab, k3, v3)
        i += stride


@cuda.jit(cache=True)
def _add_counts_kernel(io, n):
    """The count of keys[i] += vals[i]. Launch config: 1-D grid-stride over the keys."""
    tab, keys, vals = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        _table_add(tab, keys[i], vals[i])
        i += stride


@cuda.jit(cache=True)
def _get_counts_kernel(io, n):
    """out[i] = the count of keys[i] (the CPU's search). Launch config: 1-D grid-stride."""
    tab, keys, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = count_of(tab, keys[i])
        i += stride


def vertex_delta(dkeys, dvals, hst, lst, heavy, dense) -> None:
    """:func:`local_delta` for the per-vertex counts alone."""
    local_delta(dkeys, dvals, hst, lst, heavy, dense, empty(0, np.int64))


def local_delta(dkeys, dvals, hst, lst, heavy, dense, tab) -> None:
    """dense[v] and the table of per-edge counts += the change the batch causes (see the CPU
    function); an empty ``dense`` or table is left out."""
    check_1d("dkeys", dkeys)
    n = dkeys.shape[0]
    if n == 0:
        return
    launch(_pairs_kernel, min(n, CONFIG.max_blocks), CONFIG.tpb,
           (dkeys, dvals, dense, empty(0, np.int8), tab), hst, lst, (heavy,), n,
           np.int64(cuda_delta.COOP_MIN))
    launch(_wedges_kernel, *grid(n), (dkeys, dvals, dense, tab), hst, lst,
           (heavy,), n)


def add_counts(tab, keys, vals) -> None:
    """The count of keys[i] += vals[i] for each i (keys may repeat)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n:
        launch(_add_counts_kernel, *grid(n), (tab, keys, vals), n)


def get_counts(tab, keys, out) -> None:
    """out[i] = the count of keys[i] (0 when absent)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n:
        launch(_get_counts_kernel, *grid(n), (tab, keys, out), n)
