"""Large batches of the undirected graph form against a compact copy of the adjacency.

A batch of B updates on a graph of m edges reads the rows of its pairs' endpoints: for the
path weights Σ over pairs of the shorter row, for the wedges each of Δ's rows' E row once. In
the sorted-run stores a row entry takes 16 bytes (packed key and multiplicity) spread over the
runs; when a batch reads far more entries than the graph has (B = 10⁵ on R-MAT 16: 18M entries
read against 1.6M stored), those reads come from memory again and again. Copying the graph
once into a CSR of 4-byte neighbour ids (:func:`adjacency_snapshot`, one pass over the
stores, 6.5 MB for R-MAT 16: it stays in the last-level cache) and running the batch against
it cut the pair weights from 35–41 to 10 ms and the wedges from 24–27 to 12–13 ms on that
batch (one-off script, kernels alone).

The copy holds the graph's edge set: both orientations of every edge, multiplicity 1, rows in
no particular order (each row is its runs' live entries, run after run). Rows are taken from
the heavy or the light part by ``heavy``, so the copy works at any ε; the pair terms read
their fallback rows from one store, so the engine takes this path only when the heavy part
is empty. The kernel marks rows in the per-thread int8 scratch of
:mod:`.row_marks` (E(x,c) + 4·Δ(x,c)) and falls back to the stores
(:func:`_terms_probed`) where marking a long
row for few probes would break the min-degree bound. One walk per pair carries the batch's
own wedges too (:func:`pair_terms_snapshot`, thirtieth session). CPU only: the CUDA kernels
keep the stores' path (marks do not fit thousands of threads).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .delta_kernels import PAIR_PREFETCH, _pair_costs, mark_scratch, orient_pairs
from .lsm import LO_MASK, SENTINEL, dot_ranges, first_key_end, run_range_a
from .prefetch import prefetch
from .row_bits import has_bits
from .row_index import dot_rows_ix, get_ix
from .row_marks import MARK_RATIO
from .work_split import CHUNKS_PER_THREAD, equal_cost_cuts

#: a symmetric batch takes this path from one Δ tuple per ``SNAPSHOT_IDS_PER_TUPLE`` ids (the
#: copy costs one pass over the graph; a batch that sparse reads fewer entries than that)
SNAPSHOT_IDS_PER_TUPLE = 2

#: a row with a bitmap is marked for a group that reads at least this many entries per entry
#: of the row (writing and clearing a mark costs about what a bit saves on one read)
BITS_MARK_RATIO = 4

_ONE = np.uint64(1)
_LOW = np.uint64(63)
_SHIFT = np.uint64(6)


@nb.njit(cache=True, inline="always")
def _row_into(st, x, nbr, w, end):
    """Write the second ids of row x's live tuples of store ``st`` into ``nbr[w:end]``;
    returns (the position after the last one, False if a live multiplicity is not 1). Writes
    stop at ``end`` (a row with more live tuples than its count says is reported by the
    returned position, never written past its room)."""
    keys = st[0]
    vals = st[1]
    rm = st[6]
    ok = True
    m = rm[x] if x < rm.shape[0] else 0
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range_a(keys, st[2], st[3], st[4], st[5], j, x)
            for p in range(lo, hi):
                c = keys[p] & LO_MASK
                v = vals[p]
                if v != 0 and c != SENTINEL:
                    if w < end:
                        nbr[w] = c
                    w += 1
                    ok &= v == 1
        m >>= 1
        j += 1
    return w, ok


@nb.njit(cache=True, parallel=True)
def _fill(sth, stl, heavy, indptr, cuts, nbr, bad):
    for c in nb.prange(cuts.shape[0] - 1):
        for x in range(cuts[c], cuts[c + 1]):
            end = indptr[x + 1]
            if heavy[x]:
                w, ok = _row_into(sth, x, nbr, indptr[x], end)
            else:
                w, ok = _row_into(stl, x, nbr, indptr[x], end)
            if not ok or w != end:
                bad[c] = 1


@nb.njit(cache=True)
def _indptr(lh, ll, ids):
    indptr = np.zeros(ids + 1, np.int64)
    for x in range(ids):
        d = 0
        if x < lh.shape[0]:
            d += lh[x]
        if x < ll.shape[0]:
            d += ll[x]
        indptr[x + 1] = indptr[x] + d
    return indptr


def adjacency_snapshot(sth, stl, heavy, ids):
    """``(indptr, nbr)``: the CSR of the graph whose rows are split between the heavy part
    ``sth`` and the light part ``stl`` (row x in the part ``heavy[x]`` names), over the first
    ``ids`` ids, neighbour ids as uint32 (an unsigned index needs no wrap-around test in the
    kernels that look marks up by it); ``None`` when a stored multiplicity is not 1 (not a
    graph's edge set) or a row's live count disagrees with its tuples."""
    indptr = _indptr(sth[7], stl[7], ids)
    nbr = np.empty(indptr[ids], np.uint32)
    parts = max(nb.get_num_threads() * CHUNKS_PER_THREAD, 1)
    cuts = _row_cuts(indptr, parts)
    bad = np.zeros(parts, np.int8)
    with nb.parallel_chunksize(1):
        _fill(sth, stl, heavy, indptr, cuts, nbr, bad)
    return None if bad.any() else (indptr, nbr)


@nb.njit(cache=True)
def _row_cuts(indptr, parts):
    """Row bounds of ``parts`` chunks of about equal entries (plus a little per row)."""
    n = indptr.shape[0] - 1
    cost = np.empty(n, np.int64)
    for x in range(n):
        cost[x] = indptr[x + 1] - indptr[x] + 1
    return equal_cost_cuts(cost, parts)


# ---------------------------------------------------------------------------- path weights


@nb.njit(cache=True, inline="always")
def _walk(indptr, nbr, y, look, table):
    """Σ look(table, c) over row y of the snapshot: ``look`` is :func:`_mark` (an int8 mark)
    or :func:`_bit` (a bit of one row of a store's bitmaps), compiled into the loop. Four
    sums in step let the loads overlap, and ``nbr`` is unsigned, so indexing by it needs no
    test for a negative index: together 1.5× faster on the pairs of an R-MAT 16 batch of 10⁵
    updates (one-off script, one thread, 24.6 → 16.3 ms)."""
    p = indptr[y]
    hi = indptr[y + 1]
    s0 = 0
    s1 = 0
    s2 = 0
    s3 = 0
    while p + 4 <= hi:
        s0 += look(table, nbr[p])
        s1 += look(table, nbr[p + 1])
        s2 += look(table, nbr[p + 2])
        s3 += look(table, nbr[p + 3])
        p += 4
    while p < hi:
        s0 += look(table, nbr[p])
        p += 1
    return s0 + s1 + s2 + s3


@nb.njit(cache=True, inline="always")
def _mark(marks, c):
    """The int8 mark of id c."""
    return np.int64(marks[c])


@nb.njit(cache=True, inline="always")
def _bit(row, c):
    """Bit c of the bitmap ``row`` (uint64 words), 0 beyond it; ``c`` unsigned (no test for
    a negative index), no branch on the data."""
    i = np.uint64(c) >> _SHIFT
    last = np.uint64(row.shape[0] - 1)
    word = row[min(i, last)]
    return np.int64((word >> (np.uint64(c) & _LOW)) & _ONE) * np.int64(i <= last)


@nb.njit(cache=True, inline="always")
def _bit_mark(t, c):
    """2·E(x,c) + Δ(x,c) with E(x,c) a bit of x's bitmap ``t[0]`` and Δ(x,c) marked in
    ``t[1]``."""
    return 2 * _bit(t[0], c) + np.int64(t[1][c])


@nb.njit(cache=True, inline="always")
def _walk_delta(dn, dv, lo, hi, look, table, marks):
    """Σ dv[p]·(3·look(table, c) + marks[c]) over Δ's row dn[lo:hi] (second ids c as
    uint32, values as int8: 5 bytes a tuple where the packed keys and values read 16), two
    sums in step; with look = 2·E(x,c) + Δ(x,c) and marks[c] = Δ(x,c) that is twice
    Σ Δ(y,c)·(3·E(x,c) + 2·Δ(x,c))."""
    s0 = 0
    s1 = 0
    while lo + 2 <= hi:
        c0 = dn[lo]
        c1 = dn[lo + 1]
        s0 += np.int64(dv[lo]) * (3 * look(table, c0) + np.int64(marks[c0]))
        s1 += np.int64(dv[lo + 1]) * (3 * look(table, c1) + np.int64(marks[c1]))
        lo += 2
    if lo < hi:
        c0 = dn[lo]
        s0 += np.int64(dv[lo]) * (3 * look(table, c0) + np.int64(marks[c0]))
    return s0 + s1


@nb.njit(cache=True, inline="always")
def _terms_probed(x, y, stx, dkeys, dvals, dptr):
    """:func:`_pairs_cut`'s term of the pair (x, y) without marks: 6·|N(x) ∩ N(y)| in the
    store (:func:`~gpu_ivm.kernels.row_index.dot_rows_ix`, at the min-degree bound), the Δ
    rows' shares by probes of the store rows (bit, table or search) and a merge of the two
    Δ rows."""
    t = 6 * dot_rows_ix(stx, x, stx, y)[0]
    xlo = dptr[x]
    xhi = dptr[x + 1]
    ylo = dptr[y]
    yhi = dptr[y + 1]
    for p in range(xlo, xhi):
        t += 3 * dvals[p] * get_ix(stx, y, dkeys[p] & LO_MASK)[0]
    for p in range(ylo, yhi):
        t += 3 * dvals[p] * get_ix(stx, x, dkeys[p] & LO_MASK)[0]
    return t + 2 * dot_ranges(dkeys, dvals, xlo, xhi, dkeys, dvals, ylo, yhi)


@nb.njit(cache=True, inline="always")
def _prefetch_rows(okeys, q, e, indptr, nbr, dptr, dn, dv, stage):
    """Stage 1 (the offsets) or 2 (the rows' first entries, by those offsets) of the prefetch
    of pair q's y rows, in the copy and in Δ, when q < e (see :mod:`.row_prefetch`)."""
    if q < e:
        y = okeys[q] & LO_MASK
        if stage == 1:
            prefetch(indptr, y)
            prefetch(dptr, y)
        else:
            if indptr[y] < nbr.shape[0]:
                prefetch(nbr, indptr[y])
            if dptr[y] < dn.shape[0]:
                prefetch(dn, dptr[y])
                prefetch(dv, dptr[y])


@nb.njit(cache=True, inline="always")
def _two_marks(marks):
    """The calling thread's two rows of the mark scratch (rows t and t + half), or two fresh
    ones should the scratch have fewer."""
    tid = nb.get_thread_id()
    half = marks.shape[0] // 2
    if tid < half:
        return marks[tid], marks[half + tid]
    return np.zeros(marks.shape[1], np.int8), np.zeros(marks.shape[1], np.int8)


@nb.njit(cache=True, parallel=True)
def _pairs_cut(okeys, cuts, indptr, nbr, stx, dkeys, dvals, dn, dv, dptr, out, marks,
               mark_ratio, bits_ratio, gap):
    """out[i] = Σ_c 6·E(x,c)·E(y,c) + 3·(E(x,c)·Δ(y,c) + Δ(x,c)·E(y,c)) + 2·Δ(x,c)·Δ(y,c)
    for the pairs okeys (sorted by x, x the longer row): the pair's whole share of the
    batch's count delta (see :func:`pair_terms_snapshot`). A chunk takes its runs of equal x
    as groups. Two marks per id: m1 = 2·E(x,c) + Δ(x,c) and m2 = Δ(x,c), so that y's E row
    adds 3·Σ m1 and y's Δ row Σ Δ(y,c)·(3·m1 + m2) / 2, with no decoding in the walk. x's E
    row is marked into m1 once for the group when 2·|row| <= ``mark_ratio``·the group's
    probes, or read by its bitmap in the store (m1 then holds Δ(x,c) alone and the bit adds
    2·E), or (a long row against few probes) each pair is intersected in the store
    (:func:`_terms_probed`, at the min-degree bound). A row with a bitmap is marked all the
    same when its group probes it ``bits_ratio`` times its length or more: looking up an
    int8 mark is cheaper than extracting a bit, and the marking is then paid back (R-MAT 16,
    10⁵ updates: 86 % of the pairs, 97 % of their entries, against rows with a bitmap; the
    marks walk 16.3 ms, the bits walk 23–30 ms, one-off script, one thread)."""
    bits = stx[12]
    boff = stx[11]
    for c in nb.prange(cuts.shape[0] - 1):
        m1, m2 = _two_marks(marks)
        i = cuts[c]
        e = cuts[c + 1]
        while i < e:
            x = okeys[i] >> 32
            g = first_key_end(okeys, i, e)
            probes = 0
            for t in range(i, g):
                y = okeys[t] & LO_MASK
                probes += indptr[y + 1] - indptr[y]
            lx = indptr[x + 1] - indptr[x]
            xlo = dptr[x]
            xhi = dptr[x + 1]
            bitrow = has_bits(stx, x) and bits_ratio * lx > probes
            if m1.shape[0] > 1 and (bitrow or 2 * lx <= mark_ratio * probes):
                if not bitrow:
                    for p in range(indptr[x], indptr[x + 1]):
                        m1[nbr[p]] = 2
                for p in range(xlo, xhi):
                    m1[dn[p]] += dv[p]
                    m2[dn[p]] = dv[p]
                for t in range(i, g):
                    _prefetch_rows(okeys, t + 2 * gap, e, indptr, nbr, dptr, dn, dv, 1)
                    _prefetch_rows(okeys, t + gap, e, indptr, nbr, dptr, dn, dv, 2)
                    y = okeys[t] & LO_MASK
                    if bitrow:
                        tb = (bits[boff[x]], m1)
                        w = 3 * _walk(indptr, nbr, y, _bit_mark, tb) + _walk_delta(
                            dn, dv, dptr[y], dptr[y + 1], _bit_mark, tb, m2) // 2
                    else:
                        w = 3 * _walk(indptr, nbr, y, _mark, m1) + _walk_delta(
                            dn, dv, dptr[y], dptr[y + 1], _mark, m1, m2) // 2
                    out[t] = w
                if not bitrow:
                    for p in range(indptr[x], indptr[x + 1]):
                        m1[nbr[p]] = 0
                for p in range(xlo, xhi):
                    m1[dn[p]] = 0
                    m2[dn[p]] = 0
            else:
                for t in range(i, g):
                    out[t] = _terms_probed(x, okeys[t] & LO_MASK, stx, dkeys, dvals, dptr)
            i = g


@nb.njit(cache=True)
def _delta_ptr(dkeys, ids):
    """CSR offsets of Δ's rows over ``ids`` first keys: row x is dkeys[ptr[x]:ptr[x + 1]]."""
    ptr = np.empty(ids + 1, np.int64)
    p = 0
    n = dkeys.shape[0]
    for x in range(ids + 1):
        while p < n and (dkeys[p] >> 32) < x:
            p += 1
        ptr[x] = p
    return ptr


#: Δ's values the snapshot's pair terms take: the int8 marks hold 2·E(x,c) + Δ(x,c); a
#: graph's batch holds ±1 only
DELTA_MARK_MAX = 125


def pair_terms_snapshot(dkeys, dvals, indptr, nbr, st, ids):
    """``(sel, w)`` with Σ_i dvals[sel[i]]·w[i] = 6·tr(Δ·E²) + 3·tr(Δ²·E) + tr(Δ³) (the
    batch's count delta, each triangle 6 times) for a symmetric Δ (sorted unique ``dkeys``,
    both orientations, no self-loops) against the snapshot of E, or None when a value of Δ
    leaves ±``DELTA_MARK_MAX`` (then the stores' kernels serve the batch).

    ``sel`` picks one tuple per pair, oriented (x, y) with x's row the longer (ties: x < y);
    w[i] = Σ_c 6·E(x,c)·E(y,c) + 3·(E(x,c)·Δ(y,c) + Δ(x,c)·E(y,c)) + 2·Δ(x,c)·Δ(y,c),
    symmetric in x and y. With F = E + Δ, tr(F³) − tr(E³) = 3·tr(ΔE²) + 3·tr(Δ²E) + tr(Δ³)
    (traces are cyclic); summed over the ordered tuples, Σ Δ(a,b)·((ΔE + EΔ)(a,b)) =
    2·tr(Δ²E) and Σ Δ(a,b)·(Δ²)(a,b) = tr(Δ³), so halving over the pairs gives the
    coefficients 6, 3 and 2. The pair's one walk of y's E and Δ rows against x's marks thus
    carries the batch's own wedges, which needed a walk of their own (Δ's row b for each
    tuple (a, b)). ``st``: the store whose bitmaps serve the long rows and whose rows serve
    the pairs marking cannot (a graph at ε = 1 keeps every row in its light part: the engine
    takes this path only when the heavy part is empty).
    """
    n = dkeys.shape[0]
    if n and (dvals.min() < -DELTA_MARK_MAX or dvals.max() > DELTA_MARK_MAX):
        return None
    sel = orient_pairs(dkeys, st)  # the stores' live counts are the copy's row lengths
    okeys = dkeys[sel]
    out = np.empty(sel.shape[0], np.int64)
    if sel.shape[0]:
        threads = nb.get_num_threads()
        cuts = equal_cost_cuts(_pair_costs(okeys, st, st), threads * CHUNKS_PER_THREAD)
        with nb.parallel_chunksize(1):
            _pairs_cut(okeys, cuts, indptr, nbr, st, dkeys, dvals,
                       (dkeys & LO_MASK).astype(np.uint32), dvals.astype(np.int8),
                       _delta_ptr(dkeys, ids), out, mark_scratch(2 * threads, ids), MARK_RATIO,
                       BITS_MARK_RATIO, PAIR_PREFETCH)
    return sel, out
