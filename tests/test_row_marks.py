"""Row intersections by marks (kernels/row_marks.py) against independent oracles.

The marked inner product is compared with a dict model (brute force) and with the sorted-run
merge it replaces, on stores with several runs, tombstones, compaction padding, multiplicities
outside the int8 range (the fallback) and ids beyond the scratch; the count kernel with marks
is compared with the kernel without them and with scipy's (A·A)[x, y] on skewed graphs (stars,
cliques, R-MAT) at every ε, on one thread and on all.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels import delta_kernels as dk
from gpu_ivm.kernels import row_marks
from gpu_ivm.kernels.lsm import dot_rows_n
from gpu_ivm.kernels.row_marks import dot_rows_mk
from streams import graph_batches
from test_row_index import (
    _dict_dot,
    _oracle_of,
    _random_batch,
    _ref_add,
    _row_dicts,
    _scipy_triangles,
    _skewed_graph,
)

from gpu_ivm import GraphEngine, store
from gpu_ivm.store import ZStore

LO = (1 << 32) - 1


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("big", [3, 400])
def test_marked_products_equal_dicts_and_merge(seed, big, monkeypatch):
    """Σ_c st(x1,c)·st(x2,c) by marks equals the dict model and the merge, batch after batch,
    with every row pair of a store of many runs (small directories, per-key compaction
    padding); multiplicities up to ``big`` (400 leaves the int8 marks: the fallback), and a
    scratch too short for every id; the scratch is all zero after every product."""
    monkeypatch.setattr(store, "DIR_MIN", 4)
    monkeypatch.setattr(store, "COMPACT_SLACK", 0)
    rng = np.random.default_rng(seed)
    nv = 30
    ref: dict[int, int] = {}
    s = ZStore(nv)
    full = np.zeros(nv + 1, np.int8)
    short = np.zeros(nv // 2 + 1, np.int8)  # ids from nv/2 on do not fit: those rows fall back
    for _ in range(12):
        keys, deltas = _random_batch(rng, ref, 60, nv, hub_p=0.5, big=big)
        if keys.shape[0] == 0:
            continue
        s.add(keys, deltas)
        _ref_add(ref, keys, deltas)
        rows = _row_dicts(ref)
        st = s.nt()
        for x1 in range(nv):
            for x2 in range(nv):
                want = _dict_dot(rows, x1, x2)
                for marks in (full, short):
                    assert dot_rows_mk(st, x1, st, x2, marks)[0] == want
                    assert not marks.any()
                assert dot_rows_mk(st, x1, st, x2, np.zeros(0, np.int8))[0] == want
                assert dot_rows_n(st, x1, st, x2)[0] == want


def test_marks_used_and_bypassed():
    """Rows whose lengths are at most MARK_RATIO apart are intersected by marks (entries read
    = both rows), rows further apart are galloped (fewer entries than the long row)."""
    r = row_marks.MARK_RATIO
    lens = {0: 100 * r, 1: 100, 2: 101, 3: 100 * r + 1}
    keys = np.sort(np.concatenate([(x << 32) | np.arange(1, k + 1, dtype=np.int64)
                                   for x, k in lens.items()]))
    n = lens[3] + 2
    s = ZStore.from_sorted(keys, np.ones(keys.shape[0], np.int64), n)
    st = s.nt()
    marks = np.zeros(n + 1, np.int8)
    assert dot_rows_mk(st, 1, st, 2, marks) == (100, 201)  # marked: 101 + 100 entries
    assert dot_rows_mk(st, 1, st, 0, marks) == (100, 100 * r + 100)  # r times: marked
    w, t = dot_rows_mk(st, 1, st, 3, marks)
    assert w == 100 and t < lens[3]  # more than r times longer: galloped
    assert not marks.any()


def _path_weights_check(g: GraphEngine, rng, monkeypatch) -> None:
    E = g.rels[0]
    keys, _ = E.items()
    n = E.id_capacity
    a, b = keys >> 32, keys & LO
    adj = sp.coo_matrix((np.ones(a.shape[0], np.int64), (a, b)), shape=(n, n)).tocsr()
    xs = np.concatenate([rng.integers(0, n, 300), a[:600]])
    ys = np.concatenate([rng.integers(0, n, 300), b[:600]])
    want = np.asarray((adj @ adj)[xs, ys]).ravel()
    assert np.array_equal(g._path_weights(0, xs, ys, True), want)
    with monkeypatch.context() as m:
        m.setattr(dk, "USE_MARKS", False)  # marks off: merge / gallop only
        assert np.array_equal(g._path_weights(0, xs, ys, True), want)


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
@pytest.mark.parametrize("par_min", [1, 10**9])
def test_graph_counts_with_marks(kind, eps, par_min, monkeypatch):
    """Triangle counts with marks equal scipy's count of the oracle's edge set after every
    batch; path weights with marks equal those without and scipy's (A·A)[x, y]; on all
    threads (par_min 1) and on one."""
    monkeypatch.setattr(dk, "PAR_MIN", par_min)
    rng = np.random.default_rng(len(kind) * 11 + par_min % 7)
    src, dst = _skewed_graph(kind, rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon=eps, adaptive=False)
    g.load((src, dst))
    assert g.count() == _scipy_triangles(o.edges)
    nv = int(max(src.max(), dst.max())) + 5
    for batch in graph_batches(o, rng, n_batches=4, nv=nv, max_batch=3000, hub_p=0.4,
                               shrink_from=2):
        assert g.apply(batch).path == "delta"
        assert g.count() == _scipy_triangles(o.edges)
    _path_weights_check(g, rng, monkeypatch)
    for scratch in dk._MARKS.values():  # every kernel leaves its scratch zeroed
        assert not scratch.any()
    g.check_invariants()


def _symmetric_delta(rng, g: GraphEngine, n_pairs: int):
    """A symmetric Δ over g's ids (both orientations, no loops): deletes of present edges
    (-1) and inserts of absent pairs (+1), hub rows included."""
    E = g.rels[0]
    keys, _ = E.items()
    cap = E.id_capacity
    present = keys[rng.integers(0, keys.shape[0], n_pairs // 2)]
    a = rng.integers(0, cap, n_pairs)
    b = np.where(rng.random(n_pairs) < 0.3, 0, rng.integers(0, cap, n_pairs))
    new = (a << 32) | b
    have = set(keys.tolist())
    pairs = {}
    for k in present.tolist():
        x, y = k >> 32, k & LO
        pairs[(min(x, y), max(x, y))] = -1
    for k in new.tolist():
        x, y = k >> 32, k & LO
        if x != y and k not in have:
            pairs.setdefault((min(x, y), max(x, y)), 1)
    d = {}
    for (x, y), v in pairs.items():
        d[(x << 32) | y] = v
        d[(y << 32) | x] = v
    dkeys = np.array(sorted(d), np.int64)
    return dkeys, np.array([d[k] for k in dkeys.tolist()], np.int64)


def _adjacency(keys, vals, n):
    return sp.coo_matrix((vals, (keys >> 32, keys & LO)), shape=(n, n)).tocsr()


def half_wedge_terms(dkeys, dvals, A):
    """The symmetric form's wedge term of each Δ tuple i = (a, b) (``batch_wedges``):
    2·Δ(a,b)·Σ_{c > a} Δ(b,c)·(3·A(a,c) + Δ(a,c)), by scipy: (D·tril(3A + D, -1))[b, a]."""
    cap = A.shape[0]
    a, b = dkeys >> 32, dkeys & LO
    D = sp.coo_matrix((dvals, (a, b)), shape=(cap, cap)).tocsr()
    M = (D @ sp.tril(3 * A + D, -1)).tocsr()
    return 2 * dvals * np.asarray(M[b, a]).ravel()


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
def test_grouped_pair_weights_and_wedges(kind, monkeypatch):
    """The large-batch forms (pairs sharing one marking of their long row; wedges sharing one
    marking of Δ's row, and of E's where it pays, per Δ row) equal scipy's products and the
    pair-by-pair / tuple-by-tuple kernels, and pick each unordered pair exactly once."""
    rng = np.random.default_rng(len(kind))
    src, dst = _skewed_graph(kind, rng)
    g = GraphEngine(epsilon="1", adaptive=False)
    g.load((src, dst))
    E = g.rels[0]
    cap = E.id_capacity
    keys, vals = E.items()
    adj = _adjacency(keys, vals, cap)
    for n_pairs in (1, 40, 900):
        dkeys, dvals = _symmetric_delta(rng, g, n_pairs)
        sel, w, _ = dk.pair_weights_grouped(dkeys, E.l.nt(), cap)
        x, y = dkeys[sel] >> 32, dkeys[sel] & LO
        pairs = sorted(zip(np.minimum(x, y).tolist(), np.maximum(x, y).tolist()))
        assert pairs == sorted({(min(k >> 32, k & LO), max(k >> 32, k & LO))
                                for k in dkeys.tolist()})
        assert np.array_equal(w, np.asarray((adj @ adj)[x, y]).ravel())
        # wedges: out[i] = 2·Δ(a,b)·(Δ·tril(3E + Δ))(b, a) for tuple i = (a, b), summing to
        # Σ Δ(a,b)·(Δ·(3E + Δ))(b, a)
        D = _adjacency(dkeys, dvals, cap)
        a, b = dkeys >> 32, dkeys & LO
        total = int((dvals * np.asarray((D @ (3 * adj + D)).tocsr()[b, a]).ravel()).sum())
        want = half_wedge_terms(dkeys, dvals, adj)
        assert int(want.sum()) == total
        # by Δ's rows in a dense directory / searched; tuple by tuple
        for flag, density in ((True, 10**9), (True, 0), (False, 0)):
            monkeypatch.setattr(dk, "WEDGE_BY_ROWS", flag)
            monkeypatch.setattr(dk, "WEDGE_GROUP_DENSITY", density)
            monkeypatch.setattr(dk, "PAR_MIN", 1)
            out = np.empty(dkeys.shape[0], np.int64)
            dk.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, True, out)
            assert np.array_equal(out, want), (flag, density)
    for scratch in dk._MARKS.values():
        assert not scratch.any()


@pytest.mark.parametrize("grouped_min", [2, 10**9])
def test_eps_one_counts_grouped_or_not(grouped_min, monkeypatch):
    """ε = 1 counts through the grouped pair weights (every batch) and through the pair-by-pair
    kernel (none) equal scipy's count of the oracle's edge set after every batch."""
    from gpu_ivm import graph_engine

    monkeypatch.setattr(graph_engine, "GROUPED_MIN", grouped_min)
    rng = np.random.default_rng(5)
    src, dst = _skewed_graph("rmat", rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon="1", adaptive=False)
    g.load((src, dst))
    nv = int(max(src.max(), dst.max())) + 5
    for batch in graph_batches(o, rng, n_batches=6, nv=nv, max_batch=2000, hub_p=0.4,
                               shrink_from=3):
        assert g.apply(batch).path == "delta"
        assert g.count() == _scipy_triangles(o.edges)
    g.check_invariants()


def test_grouped_units_count_the_grouped_kernel():
    """The adaptive policy's work estimate of a grouped batch (recompute.grouped_units) is the
    entries the grouped kernel reads when every group marks: each long row once (none for rows
    with a bitmap), each short row once per pair, plus 4 per tuple (counted from dicts)."""
    from gpu_ivm.recompute import grouped_units

    rng = np.random.default_rng(2)
    src, dst = _skewed_graph("star", rng)
    g = GraphEngine(epsilon="1", adaptive=False)
    g.load((src, dst))
    E = g.rels[0]
    dkeys, _ = _symmetric_delta(rng, g, 300)
    deg = {}
    for k in E.items()[0].tolist():
        deg[k >> 32] = deg.get(k >> 32, 0) + 1
    longs, shorts = set(), 0
    for k in dkeys.tolist():
        x, y = k >> 32, k & LO
        dx, dy = deg.get(x, 0), deg.get(y, 0)
        if dx > dy or (dx == dy and x < y):
            longs.add(x)
            shorts += dy
    marked = [x for x in longs if E.l.boff[x] < 0]  # rows with a bitmap are not marked
    assert len(marked) < len(longs)  # the star's hubs have bitmaps
    want = 4 * dkeys.shape[0] + sum(deg.get(x, 0) for x in marked) + shorts
    assert grouped_units(dk, E.l.nt(), dkeys) == want
    assert g._grouped_pairs(dkeys.shape[0]) == (dkeys.shape[0] >= 256)
