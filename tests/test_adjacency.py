"""Large symmetric batches against the CSR copy of the graph (kernels/adjacency.py): the copy
equals the stored edge set, its pair weights and wedges equal scipy's products and the stores'
kernels, and engines that take the path or never take it count the same after every batch."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels import adjacency
from gpu_ivm.kernels import delta_kernels as dk
from streams import graph_batches
from test_row_index import _oracle_of, _scipy_triangles, _skewed_graph
from test_row_marks import _symmetric_delta

from gpu_ivm import GraphEngine, RelationEngine

# the stores' machinery on small graphs: no compact form (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_compact")

LO = (1 << 32) - 1


def _engine_with_runs(kind: str, seed: int) -> GraphEngine:
    """An ε = 1 engine whose store has several runs, tombstones and new vertices."""
    rng = np.random.default_rng(seed)
    src, dst = _skewed_graph(kind, rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon="1", adaptive=False)
    g.load((src, dst))
    nv = int(max(src.max(), dst.max())) + 20
    for batch in graph_batches(o, rng, n_batches=4, nv=nv, max_batch=60, hub_p=0.4,
                               shrink_from=2):
        g.apply(batch)
    assert g.count() == _scipy_triangles(o.edges)
    return g


def _fresh_engine(kind: str, seed: int, eps: str):
    """(engine, oracle, rng, id bound for the batches): a skewed graph ``kind`` loaded into an
    engine at ``eps`` (not adaptive) and into a graph oracle."""
    rng = np.random.default_rng(seed)
    src, dst = _skewed_graph(kind, rng)
    g = GraphEngine(epsilon=eps, adaptive=False)
    g.load((src, dst))
    return g, _oracle_of(src, dst), rng, int(max(src.max(), dst.max())) + 5


def graph_matrix(E):
    """The stored relation ``E`` as a scipy CSR matrix over its id capacity."""
    cap = E.id_capacity
    keys, vals = E.items()
    return sp.coo_matrix((vals, (keys >> 32, keys & LO)), shape=(cap, cap)).tocsr()


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
def test_snapshot_is_the_edge_set(kind):
    g = _engine_with_runs(kind, 1)
    E = g.rels[0]
    assert E.l.nruns >= 2 and E.l.tombstones() > 0
    indptr, nbr = adjacency.adjacency_snapshot(E.h.nt(), E.l.nt(), E.heavy, E.id_capacity)
    keys, vals = E.items()
    assert (vals == 1).all()
    want = {}
    for k in keys.tolist():
        want.setdefault(k >> 32, set()).add(k & LO)
    for x in range(E.id_capacity):
        row = nbr[indptr[x]:indptr[x + 1]].tolist()
        assert len(row) == len(set(row)) and set(row) == want.get(x, set())


def test_snapshot_refuses_multiplicities_other_than_one():
    r = RelationEngine(epsilon="1", adaptive=False)
    r.load(R={"src": [0, 0, 1], "dst": [1, 2, 2], "mult": [1, 2, 1]})
    R = r.rels[0]
    assert adjacency.adjacency_snapshot(R.h.nt(), R.l.nt(), R.heavy, R.id_capacity) is None


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("path", ["as chosen", "marks", "bits", "store"])
def test_snapshot_pair_terms(kind, path, monkeypatch):
    """Against scipy: w = (6·A² + 3·(A·D + D·A) + 2·D²)[x, y] once per unordered pair (x the
    longer row), and Σ Δ·w over the pairs = tr((A + D)³) − tr(A³) (6 times the count's
    change) = the stores' kernels' 6·Σ Δ·(A²) + Σ of the wedge terms; with Δ's values ±1 and
    ±2, and with the groups forced onto x's row marked, read by its bitmap, or intersected in
    the store."""
    forced = {"marks": (10**9, 0), "bits": (0, 10**9), "store": (0, 0)}
    if path in forced:
        monkeypatch.setattr(adjacency, "MARK_RATIO", forced[path][0])
        monkeypatch.setattr(adjacency, "BITS_MARK_RATIO", forced[path][1])
    g = _engine_with_runs(kind, 2)
    E = g.rels[0]
    cap = E.id_capacity
    A = graph_matrix(E)
    indptr, nbr = adjacency.adjacency_snapshot(E.h.nt(), E.l.nt(), E.heavy, cap)
    rng = np.random.default_rng(len(kind))
    for n_pairs, scale in ((1, 1), (40, 1), (900, 1), (300, 2)):
        dkeys, dvals = _symmetric_delta(rng, g, n_pairs)
        dvals = dvals * scale
        sel, w = adjacency.pair_terms_snapshot(dkeys, dvals, indptr, nbr, E.l.nt(), cap)
        x, y = dkeys[sel] >> 32, dkeys[sel] & LO
        assert sorted(zip(np.minimum(x, y).tolist(), np.maximum(x, y).tolist())) == sorted(
            {(min(k >> 32, k & LO), max(k >> 32, k & LO)) for k in dkeys.tolist()})
        D = sp.coo_matrix((dvals, (dkeys >> 32, dkeys & LO)), shape=(cap, cap)).tocsr()
        W = (6 * (A @ A) + 3 * (A @ D + D @ A) + 2 * (D @ D)).tocsr()
        assert np.array_equal(w, np.asarray(W[x, y]).ravel())
        total = int(dvals[sel] @ w)
        F = A + D
        assert total == int((F @ F @ F).diagonal().sum() - (A @ A @ A).diagonal().sum())
        ws = np.empty(dkeys.shape[0], np.int64)
        dk.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, True, ws)
        assert total == 6 * int(dvals[sel] @ np.asarray((A @ A)[x, y]).ravel()) + int(ws.sum())
    for scratch in dk._MARKS.values():  # every kernel leaves its scratch zeroed
        assert not scratch.any()


def test_snapshot_pair_terms_refuse_values_beyond_the_marks():
    """A Δ value beyond ±DELTA_MARK_MAX (the int8 mark 2·E + Δ) gives None: the engine then
    counts by the stores' kernels."""
    g = _engine_with_runs("clique", 1)
    E = g.rels[0]
    indptr, nbr = adjacency.adjacency_snapshot(E.h.nt(), E.l.nt(), E.heavy, E.id_capacity)
    dkeys = np.array([(0 << 32) | 1, (1 << 32) | 0], np.int64)
    for v, ok in ((adjacency.DELTA_MARK_MAX, True), (adjacency.DELTA_MARK_MAX + 1, False)):
        for sign in (1, -1):
            got = adjacency.pair_terms_snapshot(dkeys, np.full(2, sign * v, np.int64), indptr,
                                                nbr, E.l.nt(), E.id_capacity)
            assert (got is not None) == ok


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
def test_engines_with_and_without_the_snapshot_count_alike(kind, monkeypatch):
    """Every batch through the snapshot (one Δ tuple per ids suffices) and none: both equal
    scipy's count of the oracle's edge set after every batch, at ε = 1 and "auto"."""
    for eps in ("1", "auto"):
        counts = {}
        for ids_per_tuple, label in ((10**9, "always"), (0, "never")):
            monkeypatch.setattr(adjacency, "SNAPSHOT_IDS_PER_TUPLE", ids_per_tuple)
            g, o, rng, nv = _fresh_engine(kind, len(kind) + 5, eps)
            used = []
            orig = g._snapshot_for

            def spy(dkeys, orig=orig, used=used):
                used.append(orig(dkeys))
                return used[-1]

            g._snapshot_for = spy
            seen = []
            for batch in graph_batches(o, rng, n_batches=6, nv=nv, max_batch=2000,
                                       hub_p=0.4, shrink_from=3):
                g.apply(batch)
                assert g.count() == _scipy_triangles(o.edges)
                seen.append(g.count())
            g.check_invariants()
            counts[label] = seen
            if label == "never":
                assert all(u is None for u in used)
            elif eps == "1":
                assert any(u is not None for u in used)
        assert counts["always"] == counts["never"]

