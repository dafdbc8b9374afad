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
the heavy or the light part by ``heavy``, so the copy and the wedges work at any ε; the pair
weights read their fallback rows from one store, so the engine takes this path only when the
heavy part is empty. The kernels mark rows in the per-thread int8 scratch of
:mod:`.row_marks` (values up to 4) and fall back to the stores (the pairs to
:func:`~gpu_ivm.kernels.row_marks.dot_rows_mk`, the wedges to :func:`_half_wedges_probed`)
where marking a long row for few probes would break the min-degree bound. CPU only: the CUDA
kernels keep the stores' path (marks do not fit thousands of threads).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .delta_kernels import _pair_costs, _thread_marks, mark_scratch, orient_pairs
from .lsm import LO_MASK, SENTINEL, first_key_end, lower_bound, run_range_a
from .row_bits import has_bits
from .row_index import get_ix
from .row_marks import MARK_RATIO, dot_rows_mk
from .work_split import CHUNKS_PER_THREAD, ITEM_OVERHEAD, equal_cost_cuts

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


@nb.njit(cache=True, parallel=True)
def _pairs_cut(okeys, cuts, indptr, nbr, stx, out, marks):
    """out[i] = |N(x) ∩ N(y)| for the pairs okeys (sorted by x, x the longer row): a chunk
    takes its runs of equal x as groups; x's row is tested by its bitmap in the store, or
    marked once for the group, or (a long row against few probes) each pair is intersected
    in the store (:func:`dot_rows_mk`, at the min-degree bound). A row with a bitmap is
    marked all the same when its group probes it ``BITS_MARK_RATIO`` times its length or
    more: looking up an int8 mark is cheaper than extracting a bit, and the marking is then
    paid back (R-MAT 16, 10⁵ updates: 86 % of the pairs, 97 % of their entries, against rows
    with a bitmap; the marks walk 16.3 ms, the bits walk 23–30 ms, one-off script, one
    thread)."""
    bits = stx[12]
    boff = stx[11]
    for c in nb.prange(cuts.shape[0] - 1):
        own = _thread_marks(marks)
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
            if has_bits(stx, x) and BITS_MARK_RATIO * lx > probes:
                row = bits[boff[x]]
                for t in range(i, g):
                    out[t] = _walk(indptr, nbr, okeys[t] & LO_MASK, _bit, row)
            elif 2 * lx <= MARK_RATIO * probes:
                for p in range(indptr[x], indptr[x + 1]):
                    own[nbr[p]] = 1
                for t in range(i, g):
                    out[t] = _walk(indptr, nbr, okeys[t] & LO_MASK, _mark, own)
                for p in range(indptr[x], indptr[x + 1]):
                    own[nbr[p]] = 0
            else:
                for t in range(i, g):
                    out[t] = dot_rows_mk(stx, x, stx, okeys[t] & LO_MASK, own)[0]
            i = g


def pair_weights_snapshot(dkeys, indptr, nbr, st, ids):
    """``(sel, w)``: :func:`~gpu_ivm.kernels.delta_kernels.pair_weights_grouped` on the
    snapshot: ``sel`` one tuple per pair of ``dkeys`` (sorted unique, both orientations),
    oriented x longer; w[i] = |N(x) ∩ N(y)| for tuple sel[i] = (x, y). ``st``: the store
    whose bitmaps serve the long rows, and whose rows serve the pairs marking cannot (a
    graph at ε = 1 keeps every row in its light part: the engine takes this path only when
    the heavy part is empty)."""
    sel = orient_pairs(dkeys, st)  # the stores' live counts are the copy's row lengths
    okeys = dkeys[sel]
    out = np.empty(sel.shape[0], np.int64)
    if sel.shape[0]:
        threads = nb.get_num_threads()
        cuts = equal_cost_cuts(_pair_costs(okeys, st, st), threads * CHUNKS_PER_THREAD)
        with nb.parallel_chunksize(1):
            _pairs_cut(okeys, cuts, indptr, nbr, st, out, mark_scratch(threads, ids))
    return sel, out


# ---------------------------------------------------------------------------- wedges


@nb.njit(cache=True, inline="always")
def _half_wedges_probed(s0, s1, dkeys, dvals, rlo, rlen, st, a):
    """:func:`_wedges_cut`'s sum for the group [s0, s1) of Δ's row a without marks: each
    E(a, c) probed in the store ``st`` holding row a (bit, table or search), each Δ(a, c) by a
    binary search in Δ's row a."""
    total = 0
    for i in range(s0, s1):
        b = dkeys[i] & LO_MASK
        k = rlen[b]
        if k < 2:
            continue
        lo = rlo[b]
        s = 0
        for q in range(lower_bound(dkeys, lo, lo + k, (b << 32) | (a + 1)), lo + k):
            c = dkeys[q] & LO_MASK
            ac = (a << 32) | c
            p = lower_bound(dkeys, s0, s1, ac)
            d = dvals[p] if p < s1 and dkeys[p] == ac else 0
            s += dvals[q] * (3 * get_ix(st, a, c)[0] + d)
        total += dvals[i] * s
    return total


@nb.njit(cache=True, inline="always")
def _walk_delta(dn, dv, q, hi, marks):
    """Σ dv[p]·marks[dn[p]] over Δ's tuples q..hi (``dn`` their second ids as uint32, ``dv``
    their values as int8: 5 bytes a tuple where the packed keys and values read 16), four
    sums in step (see :func:`_walk`)."""
    s0 = 0
    s1 = 0
    s2 = 0
    s3 = 0
    while q + 4 <= hi:
        s0 += dv[q] * marks[dn[q]]
        s1 += dv[q + 1] * marks[dn[q + 1]]
        s2 += dv[q + 2] * marks[dn[q + 2]]
        s3 += dv[q + 3] * marks[dn[q + 3]]
        q += 4
    while q < hi:
        s0 += dv[q] * marks[dn[q]]
        q += 1
    return s0 + s1 + s2 + s3


@nb.njit(cache=True, inline="always")
def _above(dn, lo, hi, a):
    """The first position in dn[lo:hi] (sorted) whose id is above ``a``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if dn[mid] > a:
            hi = mid
        else:
            lo = mid + 1
    return lo


@nb.njit(cache=True, parallel=True)
def _wedges_cut(dkeys, dvals, dn, dv, gstarts, cuts, rlo, rlen, indptr, nbr, eh, el, heavy,
                out, marks):
    """out[g] = Σ over the tuples (a, b) of Δ's row a (group g) of
    Δ(a,b)·Σ_{c > a} Δ(b,c)·(3·E(c,a) + Δ(c,a)): E's row a (from the snapshot) and Δ's row a
    are marked once per group and each tuple (a, b) walks the part of Δ's row b above a.
    The terms with c < a are the same terms with a and c swapped (Δ and E symmetric) and c = a
    adds nothing (no self-loops), so twice the sum is the batch's wedge total. A long row
    against few probes is probed in the stores instead (:func:`_half_wedges_probed`, the
    same sum over c > a)."""
    for c in nb.prange(cuts.shape[0] - 1):
        own = _thread_marks(marks)
        for g in range(cuts[c], cuts[c + 1]):
            s0 = gstarts[g]
            s1 = gstarts[g + 1]
            a = dkeys[s0] >> 32
            probes = 0
            for i in range(s0, s1):
                k = rlen[dkeys[i] & LO_MASK]
                if k >= 2:  # Δ's row b = {a} alone closes nothing (no self-loops)
                    probes += k
            out[g] = 0
            if probes == 0:
                continue
            if 2 * (indptr[a + 1] - indptr[a]) > MARK_RATIO * probes:
                if heavy[a]:  # one call per part: a tuple chosen by a conditional is new
                    out[g] = _half_wedges_probed(s0, s1, dkeys, dvals, rlo, rlen, eh, a)
                else:
                    out[g] = _half_wedges_probed(s0, s1, dkeys, dvals, rlo, rlen, el, a)
                continue
            for p in range(indptr[a], indptr[a + 1]):
                own[nbr[p]] = 3
            for i in range(s0, s1):
                own[dkeys[i] & LO_MASK] += dvals[i]
            total = 0
            for i in range(s0, s1):
                b = dkeys[i] & LO_MASK
                k = rlen[b]
                if k >= 2:
                    lo = rlo[b]
                    q = _above(dn, lo, lo + k, a)
                    total += dvals[i] * _walk_delta(dn, dv, q, lo + k, own)
            out[g] = total
            for p in range(indptr[a], indptr[a + 1]):
                own[nbr[p]] = 0
            for i in range(s0, s1):
                own[dkeys[i] & LO_MASK] = 0


@nb.njit(cache=True)
def _wedge_costs(dkeys, gstarts, rlen, indptr):
    ng = gstarts.shape[0] - 1
    cost = np.empty(ng, np.int64)
    for g in range(ng):
        a = dkeys[gstarts[g]] >> 32
        t = 2 * (indptr[a + 1] - indptr[a]) + ITEM_OVERHEAD
        for i in range(gstarts[g], gstarts[g + 1]):
            t += rlen[dkeys[i] & LO_MASK] + 2
        cost[g] = t
    return cost


def _narrow(dvals: np.ndarray) -> np.ndarray:
    """``dvals`` as int8 where every value fits (a graph's batch: ±1), else as they are."""
    if dvals.shape[0] and (dvals.min() < -127 or dvals.max() > 127):
        return dvals
    return dvals.astype(np.int8)


def batch_wedges_snapshot(dkeys, dvals, indptr, nbr, eh, el, heavy) -> int:
    """Σ_i out[i] of :func:`~gpu_ivm.kernels.delta_kernels.batch_wedges` for a symmetric Δ
    (values ±1) against the snapshot: Σ over Δ tuples (a, b) of
    Σ_c Δ(a,b)·Δ(b,c)·(3·E(c,a) + Δ(c,a)) = 3·tr(Δ²E) + tr(Δ³), as twice the sum over c > a
    (see :func:`_wedges_cut`). Δ's rows are found through a dense directory over the
    snapshot's ids."""
    from .delta_kernels import _delta_rows
    from .lsm import first_key_starts

    ids = indptr.shape[0] - 1
    gstarts = first_key_starts(dkeys)
    rlo, rlen = _delta_rows(dkeys, gstarts, ids)
    threads = nb.get_num_threads()
    cuts = equal_cost_cuts(_wedge_costs(dkeys, gstarts, rlen, indptr),
                           threads * CHUNKS_PER_THREAD)
    out = np.empty(gstarts.shape[0] - 1, np.int64)
    with nb.parallel_chunksize(1):
        _wedges_cut(dkeys, dvals, dkeys.astype(np.uint32), _narrow(dvals), gstarts, cuts, rlo,
                    rlen, indptr, nbr, eh, el, heavy, out, mark_scratch(threads, ids))
    return 2 * int(out.sum())
