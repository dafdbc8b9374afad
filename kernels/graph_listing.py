"""The triangles of an undirected graph listed off the count engine's own stores.

A triangle {a, b, c} with a < b < c is found once, at its edge {a, b}: the common neighbours
of a and b above b. More generally, for pairs (x, y) of vertices and a floor f per pair,
:func:`common_above` lists the common neighbours c > f of x and y in the graph as stored
(heavy store ``hst``, light store ``lst``, per-id ``heavy`` flags: every ε). The pairs come
oriented, the longer row first, and sorted by it, so that the pairs of one long row share
one marking of it (:mod:`.row_marks`) or test its bitmap (:mod:`.row_bits`); the short row is
walked from its first entry above the floor. Listing every edge so costs the marking of each
row once plus, per edge, the part of its shorter row above the floor: the min-degree bound of
a static listing. Pairs are taken in passes of at most ``EMIT_MAX`` output slots (each pair
reserves its short row's length), on all threads from ``PAR_MIN`` pairs on, cut into chunks
of equal estimated cost (:mod:`.work_split`).

The walk of one pair (:func:`walk_above`) is shared with the CUDA twin
(:mod:`gpu_ivm.kernels.cuda_graph_listing`), which gives each pair a thread and searches the
long row's runs (a device's stores keep no bitmaps, a thread no marks).

>>> import numpy as np
>>> from gpu_ivm.store import ZStore
>>> from gpu_ivm.encoding import pack
>>> a = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])  # K4: every pair of 0..3
>>> b = np.array([1, 2, 3, 0, 2, 3, 0, 1, 3, 0, 1, 2])
>>> st = ZStore.from_sorted(pack(a, b), np.ones(12, np.int64), 4).nt()
>>> idx, c, stop = common_above(np.array([0, 0]), np.array([1, 2]), np.array([1, 2]),
...                             st, st, np.zeros(4, np.bool_), 0)
>>> idx.tolist(), c.tolist(), stop  # above 1: 2 and 3 for {0, 1}; above 2: 3 for {0, 2}
([0, 0, 1], [2, 3, 3], 2)
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .delta_kernels import _thread_marks, mark_scratch
from .graph_local import member, row_store
from .jit import helper
from .lsm import LO_MASK, lower_bound, real_end, run_mask, run_range
from .row_bits import has_bits
from .row_index import row_live
from .row_marks import clear_row, mark_row
from .work_split import CHUNKS_PER_THREAD, ITEM_OVERHEAD, equal_cost_cuts

PAR_MIN = 512  # pairs of a pass from which the walks run on all threads
EMIT_MAX = 1 << 22  # output slots per pass (bounds a pass's memory: 8 bytes a slot)
LIST_MARK_RATIO = 32  # mark a long row when it is at most this many times its pairs' walks


@helper
def walk_above(sl, xl, bits, marked, marks, ss, xs, floor, out_c, base):
    """The common neighbours c > ``floor`` of row ``xl`` of store ``sl`` (tested by
    :func:`~gpu_ivm.kernels.graph_local.member`: its bitmap when ``bits``, its marks when
    ``marked``, else a search of its runs) and row ``xs`` of store ``ss`` (walked from its
    first entry above the floor, every run), written to out_c[base:] (nothing written when
    ``out_c`` is empty); returns how many."""
    keys = ss[0]
    vals = ss[1]
    emit = out_c.shape[0] > 0
    k = base
    m = run_mask(ss, xs)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(ss, j, xs)
            hi = real_end(keys, lo, hi, xs)
            lo = lower_bound(keys, lo, hi, (xs << 32) | (floor + 1))
            for p in range(lo, hi):
                if vals[p] != 0:
                    c = keys[p] & LO_MASK
                    if member(sl, xl, c, bits, marked, marks) != 0:
                        if emit:
                            out_c[k] = c
                        k += 1
        m >>= 1
        j += 1
    return k - base


@nb.njit(cache=True, inline="always")
def _group_end(ls, i, e):
    g = i + 1
    while g < e and ls[g] == ls[i]:
        g += 1
    return g


@nb.njit(cache=True, inline="always")
def _list_chunk(i, e, ls, ss, floors, hst, lst, heavy, ptr, out_c, nterms, marks):
    """The pairs [i, e) (sorted by their long row), group by group: the long row's bitmap
    tested, or the row marked once for the group when that is cheaper than searching it."""
    while i < e:
        g = _group_end(ls, i, e)
        x = ls[i]
        sl = row_store(hst, lst, heavy, x)
        bits = has_bits(sl, x)
        ok = False
        if not bits and marks.shape[0] > 1:
            probes = 0
            for q in range(i, g):
                probes += row_live(row_store(hst, lst, heavy, ss[q]), ss[q])
            if 2 * row_live(sl, x) <= LIST_MARK_RATIO * probes:
                ok, _ = mark_row(sl, x, marks)
        for q in range(i, g):
            y = ss[q]
            nterms[q] = walk_above(sl, x, bits, ok, marks, row_store(hst, lst, heavy, y), y,
                                   floors[q], out_c, ptr[q])
        if ok:
            clear_row(sl, x, marks)
        i = g


@nb.njit(cache=True)
def _list_one(ls, ss, floors, hst, lst, heavy, ptr, out_c, nterms, marks):
    _list_chunk(0, ls.shape[0], ls, ss, floors, hst, lst, heavy, ptr, out_c, nterms, marks[0])


@nb.njit(cache=True, parallel=True)
def _list_cut(cuts, ls, ss, floors, hst, lst, heavy, ptr, out_c, nterms, marks):
    """Chunk c is the pairs cuts[c]:cuts[c+1]; a long row's group split between chunks is
    marked by each."""
    for c in nb.prange(cuts.shape[0] - 1):
        _list_chunk(cuts[c], cuts[c + 1], ls, ss, floors, hst, lst, heavy, ptr, out_c, nterms,
                    _thread_marks(marks))


@nb.njit(cache=True)
def _pass_plan(ls, ss, hst, lst, heavy, start, slots):
    """The pass from pair ``start``: its end (at least one pair; then as many as fit in
    ``slots`` output slots), each pair's first slot (relative to the pass) and the pass's
    slots, each pair's estimated cost (its short row, its group's marking at a group's first
    pair)."""
    n = ls.shape[0]
    e = start
    total = 0
    while e < n:
        b = row_live(row_store(hst, lst, heavy, ss[e]), ss[e])
        if e > start and total + b > slots:
            break
        total += b
        e += 1
    ptr = np.empty(e - start, np.int64)
    cost = np.empty(e - start, np.int64)
    acc = 0
    for i in range(start, e):
        b = row_live(row_store(hst, lst, heavy, ss[i]), ss[i])
        ptr[i - start] = acc
        acc += b
        c = b + ITEM_OVERHEAD
        if i == start or ls[i] != ls[i - 1]:
            c += 2 * row_live(row_store(hst, lst, heavy, ls[i]), ls[i])
        cost[i - start] = c
    return e, ptr, total, cost


@nb.njit(cache=True)
def _compact(ptr, nterms, out_c, start):
    """(pair index, c) of every term written (pair indexes offset by ``start``)."""
    n = nterms.shape[0]
    total = 0
    for i in range(n):
        total += nterms[i]
    idx = np.empty(total, np.int64)
    c = np.empty(total, np.int64)
    k = 0
    for i in range(n):
        for t in range(nterms[i]):
            idx[k] = start + i
            c[k] = out_c[ptr[i] + t]
            k += 1
    return idx, c


def common_above(ls, ss, floors, hst, lst, heavy, start=0):
    """One pass of the listing from pair ``start``: ``(idx, c, stop)`` with, for every pair
    i in [start, stop), a row (i, c) for each common neighbour c > floors[i] of ls[i] and
    ss[i] (pairs sorted by ``ls``, the longer row of each; the pass ends where its output
    slots would pass ``EMIT_MAX``, after one pair at least)."""
    n = ls.shape[0]
    if start >= n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), n
    ls = np.ascontiguousarray(ls, np.int64)
    ss = np.ascontiguousarray(ss, np.int64)
    floors = np.ascontiguousarray(floors, np.int64)
    e, ptr, total, cost = _pass_plan(ls, ss, hst, lst, heavy, start, EMIT_MAX)
    out_c = np.empty(max(total, 1), np.int64)
    nterms = np.empty(e - start, np.int64)
    threads = nb.get_num_threads()
    marks = mark_scratch(threads, heavy.shape[0])
    args = (ls[start:e], ss[start:e], floors[start:e], hst, lst, heavy, ptr, out_c, nterms,
            marks)
    if e - start < PAR_MIN or threads == 1:
        _list_one(*args)
    else:
        cuts = equal_cost_cuts(cost, threads * CHUNKS_PER_THREAD)
        with nb.parallel_chunksize(1):
            _list_cut(cuts, *args)
    idx, c = _compact(ptr, nterms, out_c, start)
    return idx, c, e
