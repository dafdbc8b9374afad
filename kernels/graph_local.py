"""Per-vertex and per-edge triangle counts of an undirected graph, kept up to date from the
count engine's own stores: the delta of a batch, read after the batch was stored.

With E the symmetric adjacency after the batch (B) and Δ the batch's symmetric net delta
(D), the state before it was B − D, and the per-vertex counts of ordered triangles are the
diagonal of the cube (``Δ1(a) = Σ_{b,c} E(a,b)·E(b,c)·E(c,a)``, twice the number of
triangles through a). Expanding ``B³ − (B − D)³`` and using the symmetry of B and D:

    δ diag = 2·diag(B²D) + diag(BDB) − 2·diag(BD²) − diag(DBD) + diag(D³)

which this module evaluates term by term, per pair {x, y} of the batch and per pair of batch
edges that meet at a vertex:

- *pair terms* (the first two): for each pair with net change d, with w = Σ_c B(x,c)·B(y,c)
  over the common neighbours after the batch, x and y each gain 2·d·w and every common
  neighbour c gains 2·d·B(x,c)·B(y,c). One intersection per pair at the min-degree bound:
  the shorter row walked and each entry tested in the longer row's bitmap
  (:mod:`.row_bits`), its marks (:mod:`.row_marks`) or its runs; two rows that both have
  bitmaps are ANDed word by word when that reads less.
- *wedge terms* (the last three): for each middle m and pair {a, b} of its batch neighbours
  (p = D(m,a)·D(m,b)), a, b and m each lose 2·p·B(a,b), and m gains 2·p·D(a,b); walked from
  the smaller end a, whose row of B is marked once for all its wedges.

The per-edge counts (``Δ2(x, y) = E(x,y)·Σ_c E(y,c)·E(c,x)``, the triangles on an edge) are
``B ∘ B²`` (∘ the entrywise product); expanding ``B ∘ B² − (B − D) ∘ (B − D)²`` the same way,
the same pairs and wedges give every term, each kept for x < y in a table of counts
(:mod:`.count_table`):

- for each pair {x, y} of the batch with net change d: {x, y} gains d·w, and for each common
  neighbour c after the batch, {c, x} and {c, y} each gain d·B(x,c)·B(y,c);
- for each wedge (middle m, batch ends a, b, p = D(m,a)·D(m,b)): {m, a}, {m, b} and {a, b}
  each lose p·B(a,b), and {a, b} gains p·D(a,b).

Either output may be empty (``dense`` of length 0, a table of capacity 0): its terms are then
not computed.

A row lives in the heavy store when its first key is heavy, else in the light one (the
partition of :class:`~gpu_ivm.partition.PartRel`), so the kernel works at every ε.

>>> import numpy as np
>>> from gpu_ivm.store import ZStore
>>> from gpu_ivm.encoding import pack
>>> tri = pack(np.array([0, 0, 1, 1, 2, 2]), np.array([1, 2, 0, 2, 0, 1]))
>>> st = ZStore.from_sorted(tri, np.ones(6, np.int64), 3)
>>> dense = np.zeros(3, np.int64)
>>> vertex_delta(tri, np.ones(6, np.int64), st.nt(), st.nt(), np.zeros(3, np.bool_), dense)
>>> dense.tolist()  # the triangle inserted into an empty graph: 2 ordered triangles each
[2, 2, 2]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .count_table import add_at
from .delta_kernels import _thread_marks, mark_scratch
from .hashmap import home_slot
from .jit import helper
from .lsm import LO_MASK, first_key_end, get, lower_bound, real_end, run_mask, run_range
from .prefetch import prefetch
from .row_bits import bit_at, has_bits
from .row_index import row_live
from .row_marks import clear_row, mark_row, mark_row_scaled

PAR_MIN = 512  # pairs from which the intersections run on all threads
PAR_CHUNK = 16  # pairs per prange chunk (per-pair costs are skewed by hub rows)
EMIT_MAX = 1 << 22  # common-neighbour slots per pass (bounds the emission buffers' memory)
WEDGE_MARK_RATIO = 32  # mark a's rows when its row of B is at most this many times its walk
PREFETCH = 32  # the table slots of the term this many ahead are prefetched (kernels/prefetch.py)


@nb.njit(cache=True, inline="always")
def row_store(hst, lst, heavy, x):
    """The store that holds row x: the heavy part when x is heavy, else the light one."""
    if x < heavy.shape[0] and heavy[x]:
        return hst
    return lst


@nb.njit(cache=True, inline="always")
def member(st_long, x, c, bits, marked, marks):
    """st_long(x, c): a bit test when row x has a bitmap (``bits``), a mark when it is marked
    (``marked``), else a search of the store's runs."""
    if bits:
        return bit_at(st_long[12], st_long[11][x], c)
    if marked:
        return np.int64(marks[min(c, marks.shape[0] - 1)])
    return get(st_long, (x << 32) | c)


@nb.njit(cache=True, inline="always")
def oriented(x, y, hst, lst, heavy):
    """(long store, long row, short store, short row) of the pair {x, y} after the batch."""
    sx = row_store(hst, lst, heavy, x)
    sy = row_store(hst, lst, heavy, y)
    if row_live(sx, x) >= row_live(sy, y):
        return sx, x, sy, y
    return sy, y, sx, x


@nb.njit(cache=True, inline="always")
def pair_cost(x, y, hst, lst, heavy):
    """The live entries of the shorter of rows x and y after the batch: the most entries the
    pair's intersection walks, and the most terms it writes."""
    return min(row_live(row_store(hst, lst, heavy, x), x),
               row_live(row_store(hst, lst, heavy, y), y))


@nb.njit(cache=True, inline="always")
def batch_value(dkeys, dvals, lo, hi, key):
    """D at packed ``key`` by a binary search in dkeys[lo:hi] (0 if absent)."""
    k = lower_bound(dkeys, lo, hi, key)
    if k < hi and dkeys[k] == key:
        return dvals[k]
    return 0


@nb.njit(cache=True, inline="always")
def edge_key(a, b):
    """The packed key of the undirected pair {a, b}: the smaller id first."""
    if a < b:
        return (a << 32) | b
    return (b << 32) | a


@nb.njit(cache=True, inline="always")
def wedge_edge_terms(a, b, c, p, bac, dac):
    """The per-edge terms of the wedge at b with batch ends a < c (p = 2·D(b,a)·D(b,c),
    bac = B(a,c), dac = D(a,c)): (key, change) for {a, b}, {c, b} and {a, c}, shared by the
    CPU kernel and its CUDA twin (a change of 0 adds nothing)."""
    h = p // 2
    return (edge_key(a, b), -h * bac, edge_key(c, b), -h * bac, (a << 32) | c,
            h * (dac - bac))


# the lowest set bit's index: (w & -w) · DEBRUIJN >> 58 is distinct for each single bit
_DEBRUIJN = 0x03F79D71B4CB0A89
_LOW_BIT = np.zeros(64, np.int64)
for _i in range(64):
    _LOW_BIT[((1 << _i) * _DEBRUIJN & ((1 << 64) - 1)) >> 58] = _i
_DB = np.uint64(_DEBRUIJN)
_ONE = np.uint64(1)
_SHIFT = np.uint64(58)


@helper
def _bits_and_emit(st1, x1, st2, x2, out_c, out_t, base):
    """(Σ_c st1(x1,c)·st2(x2,c), terms) for two rows that both have bitmaps (every
    multiplicity 1): the bitmaps ANDed word by word, each common id written with term 1
    (nothing written when the outputs are empty). Over
    the narrower of the two stores' bitmaps: a row's ids all lie inside its own."""
    b1 = st1[12]
    b2 = st2[12]
    s1 = st1[11][x1]
    s2 = st2[11][x2]
    emit = out_c.shape[0] > 0
    k = base
    for wi in range(min(b1.shape[1], b2.shape[1])):
        m = b1[s1, wi] & b2[s2, wi]
        while m != 0:
            low = m & (~m + _ONE)
            if emit:
                out_c[k] = 64 * wi + _LOW_BIT[np.int64((low * _DB) >> _SHIFT)]
                out_t[k] = 1
            k += 1
            m ^= low
    return k - base, k - base


@helper
def _common_emit(st_long, x, st_short, y, marks, out_c, out_t, base):
    """Σ_c st_long(x,c)·st_short(y,c), writing each nonzero term's (c, term) at
    out_c/out_t[base:] (nothing when they are empty); returns (sum, terms). The short row is
    walked and each entry tested in the long row's bitmap when it has one (:mod:`.row_bits`),
    else in its marks (written once, cleared after); a row that cannot be marked (a
    multiplicity beyond the marks' range) is looked up entry by entry instead; two rows that
    both have bitmaps with fewer words than the short row has entries are ANDed instead
    (:func:`_bits_and_emit`). At most live(short) terms."""
    bits = has_bits(st_long, x)
    if bits and has_bits(st_short, y) and min(st_long[12].shape[1], st_short[12].shape[1]) < \
            row_live(st_short, y):  # fewer words than the short row's entries
        return _bits_and_emit(st_long, x, st_short, y, out_c, out_t, base)
    ok = False
    if not bits and marks.shape[0] > 1:
        ok, _ = mark_row(st_long, x, marks)
    keys = st_short[0]
    vals = st_short[1]
    emit = out_c.shape[0] > 0  # empty outputs: the sum only
    w = 0
    k = base
    m = run_mask(st_short, y)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st_short, j, y)
            hi = real_end(keys, lo, hi, y)
            for p in range(lo, hi):
                v = vals[p]
                if v == 0:
                    continue
                c = keys[p] & LO_MASK
                u = member(st_long, x, c, bits, ok, marks)
                if u != 0:
                    t = v * u
                    w += t
                    if emit:
                        out_c[k] = c
                        out_t[k] = t
                    k += 1
        m >>= 1
        j += 1
    if ok:
        clear_row(st_long, x, marks)
    return w, k - base


@nb.njit(cache=True, inline="always")
def _pair_emit(i, xs, ys, hst, lst, heavy, marks, ptr, out_c, out_t, w, nterms):
    """Pair i's intersection after the batch, its terms at out[ptr[i]:] (the longer row
    marked or bit-tested, the shorter walked)."""
    sl, xl, ss, xs_ = oriented(xs[i], ys[i], hst, lst, heavy)
    w[i], nterms[i] = _common_emit(sl, xl, ss, xs_, marks, out_c, out_t, ptr[i])


@nb.njit(cache=True)
def _pairs_one(xs, ys, hst, lst, heavy, marks, ptr, out_c, out_t, w, nterms):
    for i in range(xs.shape[0]):
        _pair_emit(i, xs, ys, hst, lst, heavy, marks[0], ptr, out_c, out_t, w, nterms)


@nb.njit(cache=True, parallel=True)
def _pairs_par(xs, ys, hst, lst, heavy, marks, ptr, out_c, out_t, w, nterms):
    for i in nb.prange(xs.shape[0]):
        _pair_emit(i, xs, ys, hst, lst, heavy, _thread_marks(marks), ptr, out_c, out_t, w,
                   nterms)


@nb.njit(cache=True)
def _pair_bounds(dkeys, dvals, hst, lst, heavy):
    """The batch's pairs x < y with a net change (x, y, d) and, per pair, the live entries of
    its shorter row after the batch (the most terms its intersection can write)."""
    n = dkeys.shape[0]
    xs = np.empty(n, np.int64)
    ys = np.empty(n, np.int64)
    ds = np.empty(n, np.int64)
    bound = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        if x >= y or dvals[i] == 0:
            continue
        xs[k] = x
        ys[k] = y
        ds[k] = dvals[i]
        bound[k] = pair_cost(x, y, hst, lst, heavy)
        k += 1
    return xs[:k], ys[:k], ds[:k], bound[:k]


@nb.njit(cache=True, inline="always")
def _next_term(li, lk, n, nterms):
    """The term after term lk of pair li (pairs without terms skipped); li == n at the end."""
    lk += 1
    while li < n and lk >= nterms[li]:
        li += 1
        lk = 0
    return li, lk


@nb.njit(cache=True)
def _pairs_scatter(xs, ys, ds, ptr, out_c, out_t, w, nterms, dense, tab):
    """The pair terms: into dense 2·d·w to both ends and 2·d·term to each common neighbour c;
    into the table d·w to {x, y} and d·term to {c, x} and {c, y} (each output skipped when
    empty). The table slots of the term ``PREFETCH`` terms ahead are prefetched (a cursor
    walks the terms that far ahead of the adds)."""
    verts = dense.shape[0] > 0
    edges = tab.shape[0] > 0
    mask = (tab.shape[0] >> 1) - 1
    n = xs.shape[0]
    li, lk = _next_term(0, -1, n, nterms)
    for _ in range(PREFETCH):
        if li < n:
            li, lk = _next_term(li, lk, n, nterms)
    for i in range(n):
        x = xs[i]
        y = ys[i]
        d = ds[i]
        if verts:
            dense[x] += 2 * d * w[i]
            dense[y] += 2 * d * w[i]
        if edges:
            add_at(tab, (x << 32) | y, d * w[i])
        b = ptr[i]
        for k in range(b, b + nterms[i]):
            c = out_c[k]
            t = d * out_t[k]
            if verts:
                dense[c] += 2 * t
            if edges:
                if li < n:
                    c2 = out_c[ptr[li] + lk]
                    prefetch(tab, 2 * home_slot(edge_key(c2, xs[li]), mask))
                    prefetch(tab, 2 * home_slot(edge_key(c2, ys[li]), mask))
                    li, lk = _next_term(li, lk, n, nterms)
                add_at(tab, edge_key(c, x), t)
                add_at(tab, edge_key(c, y), t)


@nb.njit(cache=True)
def wedge_delta(dkeys, dvals, hst, lst, heavy, marks, dense, mark_ratio, tab):
    """The wedge terms −2·diag(BD²) − diag(DBD) + diag(D³) into dense: for each pair of batch
    edges (b, a), (b, c) with a < c that meet at b (p = 2·D(b,a)·D(b,c)), a, c and b lose
    p·B(a,c) and b gains p·D(a,c); and into the table with p/2 in place of p, {b, a}, {b, c}
    and {a, c} for a, c and b, {a, c} for the gain (each output skipped when empty).

    Walked from the smaller end a, as the count's wedge kernel does: for each first key a of
    the batch, each tuple (a, b) walks the part of the batch's row b above a; B(a, c) and
    D(a, c) are read from a's marks (3·B(a,c) + D(a,c) in ``marks``, a zeroed int8 row, left
    zeroed: a's row of B and its batch row written once for the group) unless a's row is
    more than ``mark_ratio`` times the walk, or a batch value is not in {-1, 0, 1}; then each
    c is looked up in B and in the batch (binary searches)."""
    n = dkeys.shape[0]
    cap = marks.shape[0] - 1
    verts = dense.shape[0] > 0
    edges = tab.shape[0] > 0
    unit = True  # every D in {-1, 0, 1}: 3·B + D decodes
    for i in range(n):
        if dvals[i] > 1 or dvals[i] < -1:
            unit = False
    i = 0
    while i < n:
        a = dkeys[i] >> 32
        e = first_key_end(dkeys, i, n)
        probes = 0
        for p in range(i, e):
            b = dkeys[p] & LO_MASK
            probes += row_above(dkeys, b, a)[1]
        if probes:
            sa = row_store(hst, lst, heavy, a)
            ok = False
            if unit and row_live(sa, a) <= mark_ratio * probes and a < cap:
                ok, _ = mark_row_scaled(sa, a, marks, 3)
            if ok:
                for p in range(i, e):
                    marks[min(dkeys[p] & LO_MASK, cap)] += dvals[p]
                marks[cap] = 0
            for p in range(i, e):
                b = dkeys[p] & LO_MASK
                dba = dvals[p]  # D(b, a) = D(a, b)
                if dba == 0:
                    continue
                lo, hi = row_above(dkeys, b, a)
                for q in range(lo, lo + hi):
                    c = dkeys[q] & LO_MASK
                    pr = 2 * dba * dvals[q]
                    if pr == 0:
                        continue
                    if ok:
                        mk = marks[min(c, cap)]
                        bac = (mk + 1) // 3
                        dac = mk - 3 * bac
                    else:
                        bac = get(sa, (a << 32) | c)
                        dac = batch_value(dkeys, dvals, i, e, (a << 32) | c)
                    if verts:
                        if bac != 0:
                            dense[a] -= pr * bac
                            dense[c] -= pr * bac
                            dense[b] -= pr * bac
                        dense[b] += pr * dac
                    if edges:
                        k1, v1, k2, v2, k3, v3 = wedge_edge_terms(a, b, c, pr, bac, dac)
                        add_at(tab, k1, v1)
                        add_at(tab, k2, v2)
                        add_at(tab, k3, v3)
            if ok:
                clear_row(sa, a, marks)
                for p in range(i, e):
                    marks[min(dkeys[p] & LO_MASK, cap)] = 0
        i = e


@nb.njit(cache=True, inline="always")
def row_above(dkeys, b, a):
    """(start, length) of the batch's tuples (b, c) with c > a."""
    n = dkeys.shape[0]
    lo = lower_bound(dkeys, 0, n, (b << 32) | (a + 1))
    hi = lower_bound(dkeys, lo, n, (b + 1) << 32)
    return lo, hi - lo


def pair_weights(xs, ys, hst, lst, heavy):
    """w[i] = Σ_c E(xs[i], c)·E(ys[i], c), the common neighbours of each pair (the
    intersections of :func:`vertex_delta`, nothing written but the sums; on all threads from
    ``PAR_MIN`` pairs on).

    >>> import numpy as np
    >>> from gpu_ivm.store import ZStore
    >>> from gpu_ivm.encoding import pack
    >>> tri = pack(np.array([0, 0, 1, 1, 2, 2]), np.array([1, 2, 0, 2, 0, 1]))
    >>> st = ZStore.from_sorted(tri, np.ones(6, np.int64), 3).nt()
    >>> pair_weights(np.array([0, 0]), np.array([1, 2]), st, st, np.zeros(3, np.bool_)).tolist()
    [1, 1]
    """
    n = xs.shape[0]
    w = np.empty(n, np.int64)
    none = np.empty(0, np.int64)
    args = (xs, ys, hst, lst, heavy, mark_scratch(nb.get_num_threads(), heavy.shape[0]),
            np.zeros(n, np.int64), none, none, w, np.empty(n, np.int64))
    _run_pairs(args, n)
    return w


def _run_pairs(args: tuple, n: int) -> None:
    """The pair kernel on ``args`` for ``n`` pairs: on the calling thread below ``PAR_MIN``
    pairs (or with one row of marks), else on all threads ``PAR_CHUNK`` pairs at a time."""
    if n < PAR_MIN or args[5].shape[0] < 2:
        _pairs_one(*args)
    else:
        with nb.parallel_chunksize(PAR_CHUNK):
            _pairs_par(*args)


def vertex_delta(dkeys, dvals, hst, lst, heavy, dense):
    """:func:`local_delta` for the per-vertex counts alone."""
    local_delta(dkeys, dvals, hst, lst, heavy, dense, np.empty(0, np.int64))


def local_delta(dkeys, dvals, hst, lst, heavy, dense, tab):
    """dense[v] += the change of Δ1(v), and the table's count of each pair {x, y} (x < y) +=
    the change of Δ2(x, y), caused by the batch ``(dkeys, dvals)`` (sorted unique packed keys
    with both orientations of each pair, their net changes), read against the graph after
    the batch (heavy store ``hst``, light store ``lst``, per-id ``heavy`` flags, one per id of
    the stores). An empty ``dense`` or table is left out. The table needs a free slot for
    every pair that is an edge before or after the batch (:mod:`.count_table`). The marks are
    the count kernels' per-thread scratch
    (:func:`~gpu_ivm.kernels.delta_kernels.mark_scratch`), left zeroed.

    The pairs' intersections run on all threads from ``PAR_MIN`` pairs on, each writing its
    common neighbours into its own slots (at most its shorter row's length, ``EMIT_MAX`` slots
    a pass); one thread then adds them, and the wedge terms, into ``dense``."""
    marks = mark_scratch(nb.get_num_threads(), heavy.shape[0])
    xs, ys, ds, bound = _pair_bounds(dkeys, dvals, hst, lst, heavy)
    n = xs.shape[0]
    s = 0
    while s < n:
        ends = np.cumsum(bound[s:])
        e = s + max(1, int(np.searchsorted(ends, EMIT_MAX, side="right")))
        ptr = np.zeros(e - s, np.int64)
        ptr[1:] = ends[: e - s - 1]
        size = int(ends[e - s - 1])
        out_c = np.empty(size, np.int64)
        out_t = np.empty(size, np.int64)
        w = np.empty(e - s, np.int64)
        nterms = np.empty(e - s, np.int64)
        args = (xs[s:e], ys[s:e], hst, lst, heavy, marks, ptr, out_c, out_t, w, nterms)
        _run_pairs(args, e - s)
        _pairs_scatter(xs[s:e], ys[s:e], ds[s:e], ptr, out_c, out_t, w, nterms, dense, tab)
        s = e
    wedge_delta(dkeys, dvals, hst, lst, heavy, marks[0], dense, WEDGE_MARK_RATIO, tab)
