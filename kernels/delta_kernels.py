"""Batched delta kernels of the triangle family: count deltas, view deltas, batch wedges.

Every kernel takes stores as the tuples of :meth:`gpu_ivm.store.ZStore.nt` and works on whole
batches (flattened over the batch, one ``prange`` iteration per update), never one Python call
per tuple. The per-update inner functions (``path_weight``, ``expand_count``...) are plain
``njit`` functions, callable from CUDA kernels too.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .elements import emit_segment
from .jit import helper
from .lsm import (
    LO_MASK,
    SENTINEL,
    dot_ranges,
    first_key_end,
    first_key_starts,
    get,
    lower_bound,
    run_mask,
    run_range,
)
from .row_bits import has_bits, probe_bits
from .row_index import dot_range_row_ix, get_ix
from .row_marks import (
    MARK_RATIO,
    clear_range,
    clear_row,
    dot_rows_mk,
    mark_range_add,
    mark_row,
    mark_row_scaled,
    probe_marks,
    probe_range,
)
from .row_prefetch import STAGE_GAP, prefetch_pairs
from .view_kernels import vget
from .work_split import CHUNKS_PER_THREAD, ITEM_OVERHEAD, equal_cost_cuts

#: below this many items a kernel runs on the calling thread, as a plain loop: a parallel
#: kernel's launch costs tens of µs even on one thread (docs/design.md)
PAR_MIN = 512
PAR_CHUNK = 16  # prange chunk size: per-update costs are skewed, static halves were 1.8x slower


@nb.njit(cache=True, inline="always")
def _live(st, x):
    lv = st[7]
    if x < lv.shape[0]:
        return lv[x]
    return 0


@nb.njit(cache=True, inline="always")
def path_weight_n(x, y, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev, symmetric,
                  marks):
    """(w, entries read), w = Σ_c Next(y, c) · Prev(c, x), by the IVM^ε case split on y's part.

    y heavy in Next: view(y, x) (= Σ_c Next_h(y,c)·Prev_l(c,x)) plus the heavy-c terms, the
    inner product of the rows Next_h(y,·) and Prev_h(·,x) (= Prev_ht(x,·)).
    y light: the light row Next_l(y,·) against column x of Prev; with ``symmetric`` (Next = Prev
    = E symmetric) that column is the row E(x,·), an inner product again; otherwise the heavy
    part of the column is Prev_ht(x,·) and the light part is probed.
    Inner products mark the longer row in ``marks`` and look the shorter one up
    (:func:`~gpu_ivm.kernels.row_marks.dot_rows_mk`), or, for rows of very unequal lengths or
    with ``marks`` empty, walk the shorter row and probe the longer one's hash table or gallop
    it: O(min(deg)) either way.
    """
    if heavy_next[y]:
        s, t = dot_rows_mk(nh, y, pht, x, marks)
        return vget(vsp, vrow, vmat, (y << 32) | x) + s, t + 1
    if symmetric:
        if heavy_prev[x]:
            return dot_rows_mk(nl, y, ph, x, marks)
        return dot_rows_mk(nl, y, pl, x, marks)
    w, t = dot_rows_mk(nl, y, pht, x, marks)
    keys = nl[0]
    vals = nl[1]
    m = run_mask(nl, y)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(nl, j, y)
            for p in range(lo, hi):
                t += 1
                k = keys[p]
                c = k & LO_MASK
                if c == SENTINEL:
                    break
                a = vals[p]
                if a != 0 and not heavy_prev[c]:
                    v, n = get_ix(pl, c, x)
                    t += n
                    w += a * v
        m >>= 1
        j += 1
    return w, t


@nb.njit(cache=True)
def path_weight(x, y, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev, symmetric,
                marks):
    """w = Σ_c Next(y, c) · Prev(c, x) (see :func:`path_weight_n`)."""
    return path_weight_n(x, y, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                         symmetric, marks)[0]


@nb.njit(cache=True, inline="always")
def _cost(x, y, nh, nl, pht, heavy_next):
    if heavy_next[y]:
        return min(_live(nh, y), _live(pht, x))
    return _live(nl, y)


@nb.njit(cache=True, inline="always")
def _one_weight(i, xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                symmetric, out, work, marks):
    """out[i] = the path weight of update i; work[i] = entries it read when ``work`` is an
    array (the profile mode) — ``None`` selects the compiled variant without counters."""
    x = xs[i]
    y = ys[i]
    if symmetric and _cost(y, x, nh, nl, pht, heavy_next) < _cost(x, y, nh, nl, pht, heavy_next):
        x, y = y, x
    w, t = path_weight_n(x, y, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                         symmetric, marks)
    out[i] = w
    if work is not None:  # resolved when compiled: the variant without counters reads no t
        if work.shape[0] > i:
            work[i] = t


@helper
def dot_rows_lane(st1, x1, st2, x2, lane, lanes):
    """Lane ``lane`` of ``lanes``' share of Σ_c st1(x1, c)·st2(x2, c): the entries ``lane``,
    ``lane + lanes``... of x1's row in every run (padding skipped), each looked up in x2's
    row (a binary search per run of it): ``(sum, entries read)``. The lanes' shares add up
    to :func:`~gpu_ivm.kernels.lsm.dot_rows`; the CUDA count kernel hands a long update to a
    block whose threads are the lanes (``kernels/cuda_delta.py``)."""
    keys = st1[0]
    vals = st1[1]
    row = x2 << 32
    m = run_mask(st1, x1)
    s = 0
    t = 0
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st1, j, x1)
            p = lo + lane
            while p < hi:
                c = keys[p] & LO_MASK
                if c != SENTINEL:
                    v = vals[p]
                    if v != 0:
                        s += v * get(st2, row | c)
                        t += 1
                p += lanes
        m >>= 1
        j += 1
    return s, t


@helper
def sym_case(x, y, nh, nl, ph, pl, pht, heavy_next, heavy_prev):
    """``(x, y, case, cost)`` of a symmetric count's update (x, y), oriented as
    :func:`_one_weight` orients it: its path weight is the inner product of the rows
    nh(y)·pht(x) plus the view's (y, x) entry (case 0, y heavy), nl(y)·ph(x) (case 1, x
    heavy) or nl(y)·pl(x) (case 2); ``cost`` is the shorter row's length."""
    if _cost(y, x, nh, nl, pht, heavy_next) < _cost(x, y, nh, nl, pht, heavy_next):
        x, y = y, x
    if heavy_next[y]:
        return x, y, 0, min(_live(nh, y), _live(pht, x))
    if heavy_prev[x]:
        return x, y, 1, min(_live(nl, y), _live(ph, x))
    return x, y, 2, min(_live(nl, y), _live(pl, x))


@helper
def _lane_short(st1, x1, st2, x2, lane, lanes):
    """:func:`dot_rows_lane` walking the shorter of the two rows."""
    if _live(st1, x1) <= _live(st2, x2):
        return dot_rows_lane(st1, x1, st2, x2, lane, lanes)
    return dot_rows_lane(st2, x2, st1, x1, lane, lanes)


@helper
def lane_weight(case, x, y, nh, nl, ph, pl, pht, lane, lanes):
    """Lane ``lane`` of ``lanes``' share of the rows' inner product of :func:`sym_case`'s
    ``case`` (the view's entry of case 0 is not in it)."""
    if case == 0:
        return _lane_short(nh, y, pht, x, lane, lanes)
    if case == 1:
        return _lane_short(nl, y, ph, x, lane, lanes)
    return _lane_short(nl, y, pl, x, lane, lanes)


@nb.njit(cache=True, inline="always")
def _thread_marks(marks):
    """The calling thread's row of the mark scratch (a fresh one should the scratch have fewer
    rows than threads)."""
    tid = nb.get_thread_id()
    if tid < marks.shape[0]:
        return marks[tid]
    return np.zeros(marks.shape[1], np.int8)


@nb.njit(cache=True, parallel=True)
def _path_weights_par(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                      symmetric, out, work, marks):
    """One iteration per update; ``marks[t]`` is thread t's mark scratch."""
    for i in nb.prange(xs.shape[0]):
        own = _thread_marks(marks)
        _one_weight(i, xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                    symmetric, out, work, own)


@nb.njit(cache=True)
def _path_weights_one(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                      symmetric, out, work, marks):
    """:func:`_path_weights_par` on the calling thread, for small batches (see
    :data:`PAR_MIN`)."""
    own = marks[0]
    for i in range(xs.shape[0]):
        _one_weight(i, xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                    symmetric, out, work, own)


USE_MARKS = True  # False: intersections without marks (merge, gallop, table probes), for tests
_MARKS: dict = {}  # ids -> zeroed per-thread mark scratch, reused across calls


def mark_scratch(threads: int, id_space: int) -> np.ndarray:
    """A zeroed int8 scratch of ``threads`` rows (or more) of marks for the ids below
    ``id_space`` plus the bin of :mod:`~gpu_ivm.kernels.row_marks`; rows of width 0 (marking
    off) when ``USE_MARKS`` is False.

    Every kernel leaves it zeroed (each mark is cleared after its row's intersection), so it
    is allocated once and reused; a grown id space or more threads get a new one (the old
    freed).
    """
    ids = max(id_space, 1) + 1 if USE_MARKS else 0
    m = _MARKS.get(ids)
    if m is None or m.shape[0] < threads:
        _MARKS.clear()
        m = _MARKS[ids] = np.zeros((threads, ids), np.int8)
    return m


def path_weights(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                 symmetric, out, work=None, lim=None):
    """out[i] = Σ_c Next(ys[i], c)·Prev(c, xs[i]) for every update of the batch.

    ``symmetric``: Next = Prev = E with E symmetric, so w(x, y) = w(y, x) and each update is
    evaluated in its cheaper orientation. Small batches run on the calling thread (launching
    the pool costs more than they do: :data:`PAR_MIN`); larger ones are handed to the threads
    ``PAR_CHUNK`` updates at a time. (Cutting the batch into chunks of equal estimated cost,
    8 to 128 per thread, was measured slower: 3.0 ms against 2.3 ms per R-MAT 18 batch at
    ε=½.) ``work``: if given (length of ``xs``), work[i] = the adjacency entries and table
    slots update i read (the profile mode's counter). ``lim``: a one-slot array with the
    number of updates, the arrays padded behind it (the device's form for a batch whose
    size is not read back yet).
    """
    if lim is not None:
        k = int(lim[0])
        xs, ys, out = xs[:k], ys[:k], out[:k]
        work = None if work is None else work[:k]
    ids = max(heavy_next.shape[0], heavy_prev.shape[0])
    if xs.shape[0] < PAR_MIN:
        _path_weights_one(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next,
                          heavy_prev, symmetric, out, work, mark_scratch(1, ids))
        return
    # per-update costs are skewed (hub rows): small chunks balance the threads
    with nb.parallel_chunksize(PAR_CHUNK):
        _path_weights_par(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                          symmetric, out, work, mark_scratch(nb.get_num_threads(), ids))


@nb.njit(cache=True)
def orient_pairs(dkeys, st):
    """Indexes of one tuple per pair of a symmetric Δ, oriented (x, y) with x's row of ``st``
    the longer (ties: x < y); sorted by x, as dkeys is."""
    n = dkeys.shape[0]
    keep = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        lx = _live(st, x)
        ly = _live(st, y)
        if lx > ly or (lx == ly and x < y):
            keep[k] = i
            k += 1
    return keep[:k]


@nb.njit(cache=True, inline="always")
def _pair_group(s0, s1, okeys, stx, sty, out, work, marks):
    """out[i] = Σ_c stx(x,c)·sty(y_i,c) for the tuples [s0, s1) of one first key x: x's row
    of ``stx`` is marked once for the group when that is cheaper than intersecting each pair
    alone (the graph form passes its one store as both)."""
    x = okeys[s0] >> 32
    if has_bits(stx, x):  # x's marks are kept in the store: nothing to write or clear
        for i in range(s0, s1):
            out[i], work[i] = probe_bits(sty, okeys[i] & LO_MASK, stx, x)
        return
    probes = 0
    for i in range(s0, s1):
        probes += _live(sty, okeys[i] & LO_MASK)
    if marks.shape[0] > 1 and 2 * _live(stx, x) <= MARK_RATIO * probes:
        ok, t = mark_row(stx, x, marks)
        if ok:
            for i in range(s0, s1):
                w, tp = probe_marks(sty, okeys[i] & LO_MASK, marks)
                out[i] = w
                work[i] = tp + (t if i == s0 else 0)
            clear_row(stx, x, marks)
            return
    for i in range(s0, s1):
        out[i], work[i] = dot_rows_mk(stx, x, sty, okeys[i] & LO_MASK, marks)


@nb.njit(cache=True)
def grouped_work(dkeys, st):
    """The adaptive policy's estimate of :func:`pair_weights_grouped` on ``dkeys`` (sorted
    unique, both orientations of each pair): 4 per tuple, plus per pair oriented by
    :func:`orient_pairs`' rule the short row's length, plus each long row without a bitmap
    once (its marking). One pass, nothing allocated."""
    total = 4 * dkeys.shape[0]
    prev = -1
    for i in range(dkeys.shape[0]):
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        lx = _live(st, x)
        ly = _live(st, y)
        if lx > ly or (lx == ly and x < y):
            total += ly
            if x != prev:
                if not has_bits(st, x):
                    total += lx
                prev = x
    return total


@nb.njit(cache=True)
def _pair_costs(okeys, stx, sty):
    """The estimated cost of each pair (x, y) of ``okeys`` (sorted by x) for
    :func:`_pair_weights_cut`: y's row plus the lookups, and for the first pair of each x whose
    row has no bitmap the marking and clearing of x's row."""
    n = okeys.shape[0]
    cost = np.empty(n, np.int64)
    prev = -1
    for i in range(n):
        x = okeys[i] >> 32
        c = _live(sty, okeys[i] & LO_MASK) + ITEM_OVERHEAD
        if x != prev:
            if not has_bits(stx, x):
                c += 2 * _live(stx, x)
            prev = x
        cost[i] = c
    return cost


#: pairs between the stages of the rows' prefetch in the grouped pair kernel
#: (:mod:`.row_prefetch`; 0 turns it off)
PAIR_PREFETCH = STAGE_GAP


@nb.njit(cache=True, parallel=True)
def _pair_weights_cut(okeys, cuts, stx, sty, out, work, marks, gap):
    """The pairs of chunk c are okeys[cuts[c] : cuts[c+1]] (sorted by x); a chunk takes the
    runs of equal x inside it as groups (:func:`_pair_group`), so a hub's pairs may be split
    between chunks, each marking the hub's row on its own thread."""
    for c in nb.prange(cuts.shape[0] - 1):
        _pair_chunk(cuts[c], cuts[c + 1], okeys, stx, sty, out, work, _thread_marks(marks),
                    gap)


@nb.njit(cache=True, inline="always")
def _pair_chunk(i, e, okeys, stx, sty, out, work, own, gap):
    """The pairs okeys[i:e] (sorted by x), group by group (:func:`_pair_group`). With ``gap``
    > 0 the rows of the pairs ahead are prefetched in three stages (:mod:`.row_prefetch`),
    the first ``3·gap`` pairs ahead of the group walked, the last ``gap``."""
    c1 = c2 = c3 = i
    while i < e:
        g = first_key_end(okeys, i, e)
        if gap > 0:
            t3 = min(e, g + gap)
            t2 = min(e, g + 2 * gap)
            t1 = min(e, g + 3 * gap)
            prefetch_pairs(okeys, c1, t1, 1, stx, sty)
            prefetch_pairs(okeys, max(c2, i), t2, 2, stx, sty)
            prefetch_pairs(okeys, max(c3, i), t3, 3, stx, sty)
            c1, c2, c3 = max(c1, t1), max(c2, t2), max(c3, t3)
        _pair_group(i, g, okeys, stx, sty, out, work, own)
        i = g


@nb.njit(cache=True)
def _pair_weights_one(okeys, stx, sty, out, work, marks, gap):
    """:func:`_pair_weights_cut` of one chunk, the whole batch, on the calling thread."""
    _pair_chunk(0, okeys.shape[0], okeys, stx, sty, out, work, marks[0], gap)


def _grouped_weights(okeys, stx, sty, ids):
    """``(w, work)`` of the pairs of ``okeys`` (sorted by x) grouped by x: small batches on one
    thread, larger ones cut into chunks of equal estimated cost (:mod:`.work_split`) handed
    out to the threads one at a time."""
    n = okeys.shape[0]
    out = np.empty(n, np.int64)
    work = np.empty(n, np.int64)
    if n == 0:
        return out, work
    threads = nb.get_num_threads()
    if n < PAR_MIN or threads == 1:
        _pair_weights_one(okeys, stx, sty, out, work, mark_scratch(1, ids), PAIR_PREFETCH)
        return out, work
    cuts = equal_cost_cuts(_pair_costs(okeys, stx, sty), threads * CHUNKS_PER_THREAD)
    with nb.parallel_chunksize(1):
        _pair_weights_cut(okeys, cuts, stx, sty, out, work, mark_scratch(threads, ids),
                          PAIR_PREFETCH)
    return out, work


def pair_weights_grouped(dkeys, st, ids):
    """Path weights of a symmetric batch whose rows all live in one store ``st`` (ε = 1: no
    heavy part), one pass per long row: ``(sel, w, work)`` with ``sel`` the indexes of one
    tuple per pair of ``dkeys`` (sorted unique, both orientations present), w[i] =
    Σ_c E(x,c)·E(y,c) for tuple sel[i] = (x, y), and work[i] the entries it read.

    Each pair is oriented so that x has the longer row, and the pairs of one x share one
    marking of x's row: a batch costs Σ over distinct x of deg x plus Σ over pairs of deg y,
    against Σ over pairs of (2·deg x + deg y) pair by pair. ``ids``: the stores' id space.
    """
    sel = orient_pairs(dkeys, st)
    w, work = _grouped_weights(dkeys[sel], st, st, ids)
    return sel, w, work


def first_grouped_weights(keys, stx, sty, ids):
    """``(w, work)`` with w[i] = Σ_c stx(x_i, c)·sty(y_i, c) for sorted packed keys
    (x_i, y_i), and work[i] the entries that pair read.

    Two stores (the three-relation form's insert-only mode: ``stx`` a relation transposed,
    ``sty`` the next one). The pairs of one first key x share one marking of x's row of
    ``stx`` when its row is not much longer than theirs together; otherwise each pair is
    intersected alone at the min-degree bound (marks, bitmap, table probe or gallop:
    :func:`~gpu_ivm.kernels.row_marks.dot_rows_mk`). Small batches run on one thread.
    ``ids``: the stores' id space.
    """
    return _grouped_weights(keys, stx, sty, ids)


@helper
def _rows_len(st, x):
    m = run_mask(st, x)
    j = 0
    t = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            t += hi - lo
        m >>= 1
        j += 1
    return t


@nb.njit(cache=True)
def expand_counts(exp_keys, st, counts):
    """counts[i] = physical entries of first key exp_keys[i] (upper bound of live tuples)."""
    for i in range(exp_keys.shape[0]):
        counts[i] = _rows_len(st, exp_keys[i])


@nb.njit(cache=True, parallel=True)
def expand_emit(xs, ys, ms, st, left, ptr, out_keys, out_vals):
    """View deltas of a bilinear view under a batch of updates of one factor.

    left:  V(x, z) += m_i · st(y_i, z)   (update (x, y, m) of the left factor; st = right factor)
    right: V(z, y) += st(x_i, z) · m_i   (update (x, y, m) of the right factor; st = left factor
           transposed, so st(x, z) = Left(z, x))
    Writes into out[ptr[i]:ptr[i+1]]; unused slots get value 0 (dropped later).
    """
    for i in nb.prange(xs.shape[0]):
        emit_segment(i, xs, ys, ms, st, left, ptr, out_keys, out_vals)


@nb.njit(cache=True)
def segment_sum_sorted(keys, vals):
    """Group equal keys of a sorted array, sum values, drop zero sums."""
    n = keys.shape[0]
    ok = np.empty(n, np.int64)
    ov = np.empty(n, np.int64)
    w = 0
    i = 0
    while i < n:
        k = keys[i]
        s = 0
        while i < n and keys[i] == k:
            s += vals[i]
            i += 1
        if s != 0:
            ok[w] = k
            ov[w] = s
            w += 1
    return ok[:w], ov[:w]


@nb.njit(cache=True, inline="always")
def _wedges_symmetric(i0, i1, dkeys, dvals, eh, el, heavy, out):
    """:func:`_wedges_range` of the symmetric form for the tuples [i0, i1), halved: out[i] =
    2·Δ(a,b)·Σ_{c > a} Δ(b,c)·(3·E(a,c) + Δ(a,c)) for tuple i = (a, b), the part of Δ's row b
    above a (Δ and E symmetric: the terms with c < a are those with a and c swapped, c = a
    adds nothing), by inner products of sorted ranges. The loop is written here, not as a
    call per tuple: an inlined call that takes the stores' tuples assigns their arrays anew
    on every tuple, reference counts included (226 against 117 µs on a 388-tuple batch)."""
    n = dkeys.shape[0]
    for i in range(i0, i1):
        a = dkeys[i] >> 32
        b = dkeys[i] & LO_MASK
        lo = lower_bound(dkeys, 0, n, (b << 32) + a + 1)
        hi = lower_bound(dkeys, lo, n, (b + 1) << 32)
        if hi <= lo:
            # no c > a in Δ's row b (most tuples: a row b of {a} alone)
            out[i] = 0
            continue
        alo = lower_bound(dkeys, 0, n, a << 32)
        ahi = lower_bound(dkeys, alo, n, (a + 1) << 32)
        if heavy[a]:  # one call per part: a tuple chosen by a conditional is a new value
            e = dot_range_row_ix(dkeys, dvals, lo, hi, eh, a)[0]
        else:
            e = dot_range_row_ix(dkeys, dvals, lo, hi, el, a)[0]
        d = dot_ranges(dkeys, dvals, lo, hi, dkeys, dvals, alo, ahi)
        out[i] = 2 * dvals[i] * (3 * e + d)


@nb.njit(cache=True, inline="always")
def _wedges_probed(i0, i1, dkeys, dvals, eh, el, heavy, out):
    """:func:`_wedges_range` of the directed form for the tuples [i0, i1): E(c, a) and
    Δ(c, a) probed per c (loop written here, see :func:`_wedges_symmetric`)."""
    n = dkeys.shape[0]
    for i in range(i0, i1):
        a = dkeys[i] >> 32
        b = dkeys[i] & LO_MASK
        lo = lower_bound(dkeys, 0, n, b << 32)
        hi = lower_bound(dkeys, lo, n, (b + 1) << 32)
        acc = 0
        for p in range(lo, hi):
            c = dkeys[p] & LO_MASK
            m2 = dvals[p]
            ca = (c << 32) | a
            if heavy[c]:
                e = get_ix(eh, c, a)[0]
            else:
                e = get_ix(el, c, a)[0]
            q = lower_bound(dkeys, 0, n, ca)
            d = dvals[q] if q < n and dkeys[q] == ca else 0
            acc += m2 * (3 * e + d)
        out[i] = dvals[i] * acc


@nb.njit(cache=True, inline="always")
def _wedges_range(i0, i1, dkeys, dvals, eh, el, heavy, symmetric, out):
    """out[i] = Σ_c Δ(a,b)·Δ(b,c)·(3·E(c,a) + Δ(c,a)) for the Δ tuples i = (a, b) in
    [i0, i1): the share of :func:`batch_wedges` of one CPU thread's block, or of one CUDA
    thread (i1 = i0 + 1)."""
    if symmetric:
        _wedges_symmetric(i0, i1, dkeys, dvals, eh, el, heavy, out)
    else:
        _wedges_probed(i0, i1, dkeys, dvals, eh, el, heavy, out)


@nb.njit(cache=True)
def _delta_rows(dkeys, gstarts, ids):
    """Dense directory of Δ's rows over ``ids`` first keys: (start, length), length 0 for a
    first key without tuples."""
    rlo = np.zeros(ids, np.int64)
    rlen = np.zeros(ids, np.int64)
    for g in range(gstarts.shape[0] - 1):
        a = dkeys[gstarts[g]] >> 32
        rlo[a] = gstarts[g]
        rlen[a] = gstarts[g + 1] - gstarts[g]
    return rlo, rlen


WEDGE_BLOCK = 64  # Δ tuples per iteration of the parallel wedge loop
#: symmetric batches by Δ's rows (:func:`_half_wedge_group`: Δ's row a marked once, a tuple
#: (a, b) whose Δ row b is {a} alone told by one bit of :func:`multi_rows`); False: tuple by
#: tuple with binary searches (:func:`_wedges_symmetric`, the same terms), for tests
WEDGE_BY_ROWS = True


@nb.njit(cache=True)
def multi_rows(dkeys):
    """Bits of the first keys that hold two tuples or more in ``dkeys`` (sorted): word
    x >> 6, bit x & 63 (int64 words, read by :func:`has_multi`)."""
    n = dkeys.shape[0]
    words = np.zeros(((dkeys[n - 1] >> 32) >> 6) + 1 if n else 1, np.int64)
    i = 0
    while i < n:
        x = dkeys[i] >> 32
        g = i + 1
        while g < n and (dkeys[g] >> 32) == x:
            g += 1
        if g - i >= 2:
            words[x >> 6] |= np.int64(1) << (x & 63)
        i = g
    return words


@nb.njit(cache=True, inline="always")
def has_multi(words, x):
    """Whether first key ``x`` holds two tuples or more (``words`` of :func:`multi_rows`)."""
    w = x >> 6
    return w < words.shape[0] and ((words[w] >> (x & 63)) & 1) != 0


WEDGE_MARK_RATIO = 32  # mark E's row a when 2·deg(a) <= this many times the group's probes
WEDGE_GROUP_DENSITY = 8  # a dense directory of Δ's rows when 8 · |Δ| >= the id space


@nb.njit(cache=True, inline="always")
def _delta_row(b, gstarts, gkeys, rlo, rlen):
    """(lo, hi) of Δ's row b: from the dense directory (``rlo``, ``rlen``) when there is one,
    else by a binary search of the rows' first keys ``gkeys`` (row g is
    [gstarts[g], gstarts[g + 1]))."""
    if rlen.shape[0] != 0:
        lo = rlo[b]
        return lo, lo + rlen[b]
    h = lower_bound(gkeys, 0, gkeys.shape[0], b)
    if h < gkeys.shape[0] and gkeys[h] == b:
        return gstarts[h], gstarts[h + 1]
    return 0, 0


@nb.njit(cache=True, inline="always")
def _half_wedge_group(s0, s1, dkeys, dvals, st, multi, gstarts, gkeys, rlo, rlen, out, marks):
    """:func:`_wedges_symmetric`'s out[i] for the tuples i = (a, b) of Δ's row a = [s0, s1),
    Δ's row a marked once for all of them (marks[c] = Δ(a,c)) and E's row a (in part ``st``)
    probed by its bits or table, or marked too (marks[c] += 3·E(a,c)) when it has neither
    and is short against the group's probes. Each tuple then walks the part of Δ's row b
    above a, without the searches for Δ's row a. False, with nothing written and the marks
    clean, when a row does not fit the marks."""
    a = dkeys[s0] >> 32
    e_marked = False
    if not has_bits(st, a):
        probes = 0
        for i in range(s0, s1):
            b = dkeys[i] & LO_MASK
            if has_multi(multi, b):
                lo, hi = _delta_row(b, gstarts, gkeys, rlo, rlen)
                probes += hi - lo
        if probes == 0:  # every row b is {a} alone: nothing closes
            for i in range(s0, s1):
                out[i] = 0
            return True
        if marks.shape[0] > 1 and 2 * _live(st, a) <= WEDGE_MARK_RATIO * probes:
            e_marked = mark_row_scaled(st, a, marks, 3)[0]
    if not mark_range_add(dkeys, dvals, s0, s1, marks):
        if e_marked:
            clear_row(st, a, marks)
        return False
    for i in range(s0, s1):
        b = dkeys[i] & LO_MASK
        s = 0
        if has_multi(multi, b):
            lo, hi = _delta_row(b, gstarts, gkeys, rlo, rlen)
            q = lower_bound(dkeys, lo, hi, (b << 32) + a + 1)
            if q < hi:
                s = probe_range(dkeys, dvals, q, hi, marks)
                if not e_marked:
                    s += 3 * dot_range_row_ix(dkeys, dvals, q, hi, st, a)[0]
        out[i] = 2 * dvals[i] * s
    clear_range(dkeys, s0, s1, marks)
    if e_marked:
        clear_row(st, a, marks)
    return True


@nb.njit(cache=True, parallel=True)
def _half_wedges_par(dkeys, dvals, eh, el, heavy, multi, gstarts, gkeys, rlo, rlen, out,
                     marks):
    """:func:`_half_wedge_group`, one Δ row per iteration; a row that does not fit the marks
    by :func:`_wedges_symmetric` (the same terms)."""
    for g in nb.prange(gstarts.shape[0] - 1):
        own = _thread_marks(marks)
        s0 = gstarts[g]
        s1 = gstarts[g + 1]
        if heavy[dkeys[s0] >> 32]:  # one call per part (see _wedges_symmetric)
            done = _half_wedge_group(s0, s1, dkeys, dvals, eh, multi, gstarts, gkeys, rlo,
                                     rlen, out, own)
        else:
            done = _half_wedge_group(s0, s1, dkeys, dvals, el, multi, gstarts, gkeys, rlo,
                                     rlen, out, own)
        if not done:
            _wedges_symmetric(s0, s1, dkeys, dvals, eh, el, heavy, out)


@nb.njit(cache=True, parallel=True)
def _batch_wedges_par(dkeys, dvals, eh, el, heavy, symmetric, out):
    n = dkeys.shape[0]
    for blk in nb.prange((n + WEDGE_BLOCK - 1) // WEDGE_BLOCK):
        i0 = blk * WEDGE_BLOCK
        _wedges_range(i0, min(n, i0 + WEDGE_BLOCK), dkeys, dvals, eh, el, heavy, symmetric,
                      out)


@nb.njit(cache=True)
def _wedges_one(dkeys, dvals, eh, el, heavy, symmetric, out):
    """The wedge terms of every tuple on the calling thread, tuple by tuple, for small
    batches (see :data:`PAR_MIN`)."""
    _wedges_range(0, dkeys.shape[0], dkeys, dvals, eh, el, heavy, symmetric, out)


_NO_ROWS = np.zeros(0, np.int64)


def batch_wedges(dkeys, dvals, eh, el, heavy, symmetric, out):
    """Self-join batch terms whose sum is 3·tr(Δ²E) + tr(Δ³) (with E the state before the batch).

    ``dkeys`` sorted unique packed keys of Δ, ``dvals`` their multiplicities. In general
    out[i] = Σ_c Δ(a,b)·Δ(b,c)·(3·E(c,a) + Δ(c,a)) for Δ tuple i = (a, b), E and Δ probed.
    With ``symmetric`` (E and Δ symmetric and without self-loops, as the undirected
    GraphEngine keeps them) the summand is symmetric in a and c and zero at c = a, so
    out[i] = 2·Δ(a,b)·Σ_{c > a} Δ(b,c)·(3·E(a,c) + Δ(a,c)), half the wedges: the tuples of
    Δ's row a share one marking of it (and of E's row a where that is cheaper than probing
    it), and a tuple whose Δ row b is {a} alone adds nothing (:func:`_half_wedge_group`).
    """
    n = dkeys.shape[0]
    if n < PAR_MIN:
        # tuple by tuple on the calling thread (the same terms): a loop over Δ's rows that
        # calls the row's body with the stores' tuples pays their reference counts per row
        # outside a parallel loop (442 against 139 µs for the 2,000 tuples of an R-MAT 18
        # batch, one-off script)
        _wedges_one(dkeys, dvals, eh, el, heavy, symmetric, out)
        return
    if not (symmetric and WEDGE_BY_ROWS):
        _batch_wedges_par(dkeys, dvals, eh, el, heavy, symmetric, out)
        return
    gstarts = first_key_starts(dkeys)
    ids = max(heavy.shape[0], int(dkeys[-1] >> 32) + 1)
    if n * WEDGE_GROUP_DENSITY >= ids:
        # a large batch: Δ's rows found through a dense directory (O(ids) to build)
        rlo, rlen = _delta_rows(dkeys, gstarts, ids)
        gkeys = _NO_ROWS
    else:  # by a binary search of the rows' first keys
        gkeys = dkeys[gstarts[:-1]] >> 32
        rlo = rlen = _NO_ROWS
    _half_wedges_par(dkeys, dvals, eh, el, heavy, multi_rows(dkeys), gstarts, gkeys, rlo, rlen,
                     out, mark_scratch(nb.get_num_threads(), ids))
