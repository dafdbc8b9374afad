"""The compact form of small undirected graphs (gpu_ivm/compact.py,
kernels/compact_graph.py): its one-call batch step equals scipy's matrix products, and engines
that take it count as a brute-force oracle and as engines that never take it do, batch after
batch, with the same reports, errors, skipped rows and ids; the stores rebuilt from it are
the graph; it is left when the graph outgrows it and taken again when it shrinks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels.compact_graph import WALK_RATIO, compact_step
from oracle import GraphOracle
from streams import graph_batches
from test_light_delta import _scipy_delta
from test_row_index import _scipy_triangles, _skewed_graph

from gpu_ivm import GraphEngine, compact, graph_engine
from gpu_ivm.compact import CompactGraph
from gpu_ivm.errors import ConflictError

LO = (1 << 32) - 1


def _sym(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted packed keys of both orientations of the pairs (a, b)."""
    return np.sort(np.concatenate([(a << 32) | b, (b << 32) | a]))


def _random_delta(rng, edges: set, nv: int, n_pairs: int, hubs: int = 0):
    """A valid symmetric batch against ``edges``: (sorted keys, net signs)."""
    chosen = {}
    present = sorted(edges)
    while len(chosen) < n_pairs:
        if present and rng.random() < 0.4:
            u, v = present[int(rng.integers(len(present)))]
        else:
            u = int(rng.integers(hubs)) if hubs and rng.random() < 0.5 else int(rng.integers(nv))
            v = int(rng.integers(nv))
            if u == v:
                continue
            u, v = min(u, v), max(u, v)
        chosen[(u, v)] = -1 if (u, v) in edges else 1
    pairs = np.array(list(chosen), np.int64)
    signs = np.array(list(chosen.values()), np.int64)
    a, b = pairs[:, 0], pairs[:, 1]
    keys = np.concatenate([(a << 32) | b, (b << 32) | a])
    vals = np.concatenate([signs, signs])
    o = np.argsort(keys)
    return keys[o], vals[o]


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("walk_ratio", [0, WALK_RATIO, 1 << 40])
def test_compact_step_equals_scipy(kind, walk_ratio):
    """The count delta of one step equals scipy's 6·tr(Δ·A²) + 3·tr(Δ²·A) + tr(Δ³) on
    skewed graphs, with the wedge term's either way forced (0: always the lookups, 2⁴⁰:
    always the walk) and the default; the new array is the edge set after the batch."""
    rng = np.random.default_rng(len(kind) + walk_ratio % 97)
    src, dst = _skewed_graph(kind, rng)
    keep = src != dst
    lo, hi = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    edges = set(zip(lo.tolist(), hi.tolist()))
    nv = int(max(src.max(), dst.max())) + 8
    for n_pairs in (1, 5, 40, 300):
        a = np.array([e[0] for e in edges], np.int64)
        b = np.array([e[1] for e in edges], np.int64)
        keys = _sym(a, b)
        A = sp.coo_matrix((np.ones(keys.shape[0], np.int64), (keys >> 32, keys & LO)),
                          shape=(nv, nv)).tocsr()
        dk, dv = _random_delta(rng, edges, nv, n_pairs, hubs=3)
        slot, marks = np.full(nv, -1, np.int64), np.zeros(nv, np.int8)
        delta, bad, new = compact_step(keys, dk, dv, slot, marks, walk_ratio)
        assert bad == 0
        assert delta == _scipy_delta(A, dk, dv, nv)
        assert (slot == -1).all() and (marks == 0).all()  # the scratch is given back zeroed
        for k, s in zip(dk[(dk >> 32) < (dk & LO)].tolist(),
                        dv[(dk >> 32) < (dk & LO)].tolist()):
            (edges.add if s > 0 else edges.discard)((k >> 32, k & LO))
        want = _sym(np.array([e[0] for e in edges], np.int64),
                    np.array([e[1] for e in edges], np.int64))
        assert np.array_equal(new, want)


def test_compact_step_refuses_a_conflict_and_changes_nothing():
    keys = _sym(np.array([0, 1]), np.array([1, 2]))
    slot, marks = np.full(5, -1, np.int64), np.zeros(5, np.int8)
    before = keys.copy()
    # an insert of the present edge 0 - 1 and a delete of the absent 2 - 3, with a valid
    # insert of 0 - 2: keys of both orientations, each with its edge's sign
    sign = {(0, 1): 1, (2, 3): -1, (0, 2): 1}
    dk = _sym(np.array([0, 2, 0]), np.array([1, 3, 2]))
    dv = np.array([sign[(min(k >> 32, k & LO), max(k >> 32, k & LO))] for k in dk.tolist()])
    delta, bad, got = compact_step(keys, dk, dv, slot, marks)
    assert bad == 4 and delta == 0 and got is keys
    assert np.array_equal(keys, before) and (slot == -1).all() and (marks == 0).all()


def _twins(**kw):
    """Two engines with the same options: the first to take the compact form, the second
    never (``_apply_both`` sets ``compact.COMPACT_MAX`` around each one's batch)."""
    return GraphEngine(**kw), GraphEngine(**kw)


def _apply_both(on, off, batch, monkeypatch, cap: int):
    monkeypatch.setattr(compact, "COMPACT_MAX", cap)
    r1 = on.apply(batch)
    monkeypatch.setattr(compact, "COMPACT_MAX", 0)
    r2 = off.apply(batch)
    monkeypatch.setattr(compact, "COMPACT_MAX", cap)
    return r1, r2


FIELDS = ("rows", "updates", "triangles", "delta", "ignored", "self_loops", "batch")


@pytest.mark.parametrize("eps", ["auto", "1", "1/2"])
@pytest.mark.parametrize("seed", [1, 2])
def test_engines_with_and_without_the_compact_form_agree(eps, seed, monkeypatch):
    """Random streams with hubs, new vertices and a shrinking phase: the engine that takes the
    compact form counts as the oracle after every batch, and its reports and its edges and ids
    at the end are those of the engine that never takes it."""
    rng = np.random.default_rng(seed)
    o = GraphOracle()
    on, off = _twins(epsilon=eps, adaptive=False)
    nv = 60
    seen_compact = False
    for batch in graph_batches(o, rng, n_batches=25, nv=nv, max_batch=40, hub_p=0.3,
                               shrink_from=15):
        r1, r2 = _apply_both(on, off, batch, monkeypatch, 1 << 16)
        seen_compact |= on.compact_form
        assert not off.compact_form
        assert r1.triangles == o.count() == r2.triangles
        for f in FIELDS:
            assert getattr(r1, f) == getattr(r2, f), f
    assert seen_compact
    assert on.num_edges == off.num_edges == len(o.edges)
    assert on.num_vertices == off.num_vertices
    e1, e2 = on.edges(), off.edges()  # the stores rebuilt from the array
    assert not on.compact_form
    assert np.array_equal(e1[0], e2[0]) and np.array_equal(e1[1], e2[1])
    assert on.check_invariants() == [] and on.recount() == on.count()


def test_a_conflict_is_judged_by_the_general_path(monkeypatch):
    """on_conflict="error": the same error as without the compact form, nothing changed, and
    the next batches go on; "ignore": the same rows skipped."""
    monkeypatch.setattr(compact, "COMPACT_MAX", 1 << 16)
    g = GraphEngine()
    g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    g.apply({"src": [3], "dst": [4], "sign": [1]})
    assert g.compact_form
    bad = {"src": [1, 7, 5], "dst": [4, 8, 6], "sign": [1, 1, -1]}  # 5 - 6 is absent
    with pytest.raises(ConflictError) as e1:
        g.apply(bad)
    monkeypatch.setattr(compact, "COMPACT_MAX", 0)
    h = GraphEngine()
    h.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    h.apply({"src": [3], "dst": [4], "sign": [1]})
    with pytest.raises(ConflictError) as e2:
        h.apply(bad)
    assert str(e1.value) == str(e2.value) and e1.value.row == e2.value.row == 2
    monkeypatch.setattr(compact, "COMPACT_MAX", 1 << 16)
    assert g.count() == 1 and g.num_edges == 4 and g.num_vertices == 4  # 7, 8 not committed
    rep = g.apply({"src": [1], "dst": [4], "sign": [1]})
    assert rep.triangles == 2 and g.compact_form
    ig = GraphEngine(on_conflict="ignore")
    ig.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    ig.apply({"src": [3], "dst": [4], "sign": [1]})
    rep = ig.apply({"src": [1, 1, 9], "dst": [4, 2, 10], "sign": [1, 1, -1]})
    assert (rep.ignored, rep.updates, rep.triangles) == (2, 1, 2)
    assert ig.num_vertices == 4


def test_the_form_is_left_past_the_bound_and_taken_again_below_half(monkeypatch):
    monkeypatch.setattr(compact, "COMPACT_MAX", 40)  # 20 edges
    rng = np.random.default_rng(5)
    o = GraphOracle()
    g = GraphEngine(epsilon="1", adaptive=False)
    forms = []
    for batch in graph_batches(o, rng, n_batches=30, nv=14, max_batch=6, hub_p=0.2,
                               shrink_from=18):
        rep = g.apply(batch)
        assert rep.triangles == o.count()
        forms.append((g.compact_form, len(o.edges)))
    assert any(f for f, _ in forms) and any(not f for f, _ in forms)
    for f, m in forms:
        assert not f or 2 * m <= 40  # never held past the bound
    assert g.check_invariants() == []


def test_a_batch_the_overflow_guard_might_refuse_goes_the_general_way(monkeypatch):
    """The guard's bound is checked before the step (no batch within the form's size reaches
    it; forced here): the general path then applies the batch, with the same result."""
    g = GraphEngine()
    g.load({"src": [1, 2], "dst": [2, 3]})
    g.apply({"src": [3], "dst": [4], "sign": [1]})
    assert g.compact_form
    monkeypatch.setattr(graph_engine, "refuses", lambda xs: True)
    rep = g.apply({"src": [1], "dst": [3], "sign": [1]})
    assert rep.triangles == 1 and not g.compact_form


def test_large_undirected_engines_and_other_forms_do_not_take_it(monkeypatch):
    monkeypatch.setattr(compact, "COMPACT_MAX", 8)
    ring = np.arange(10)
    g = GraphEngine()
    g.load((ring, (ring + 1) % 10))  # 20 tuples: more than half of 8
    g.apply({"src": [0], "dst": [2], "sign": [1]})
    assert not g.compact_form and g.count() == 1
    monkeypatch.setattr(compact, "COMPACT_MAX", 1 << 16)
    for kw in ({"directed": True}, {"maintain": "vertex_counts"}):
        h = GraphEngine(**kw)
        h.load((ring, (ring + 1) % 10))
        h.apply({"src": [0], "dst": [2], "sign": [1]})
        assert not h.compact_form
    h = GraphEngine()
    h.load((ring, (ring + 1) % 10))
    h.policy.force = "recompute"
    rep = h.apply({"src": [0], "dst": [2], "sign": [1]})
    assert not h.compact_form and rep.path == "recompute"


def test_snapshot_and_restore_from_the_compact_form(tmp_path, monkeypatch):
    monkeypatch.setattr(compact, "COMPACT_MAX", 1 << 16)
    rng = np.random.default_rng(9)
    o = GraphOracle()
    g = GraphEngine()
    for batch in graph_batches(o, rng, n_batches=6, nv=30, max_batch=20, hub_p=0.2):
        g.apply(batch)
    assert g.compact_form
    g.snapshot(tmp_path / "s")
    back = GraphEngine.restore(tmp_path / "s")
    assert back.count() == g.count() == o.count()
    assert back.num_edges == g.num_edges == len(o.edges)


def test_compact_max_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPU_IVM_COMPACT_MAX", "0")
    assert compact._compact_max_from_env() == 0
    monkeypatch.setenv("GPU_IVM_COMPACT_MAX", "")
    assert compact._compact_max_from_env() == 1 << 16
    for bad in ("-1", "many"):
        monkeypatch.setenv("GPU_IVM_COMPACT_MAX", bad)
        with pytest.raises(ValueError, match="GPU_IVM_COMPACT_MAX"):
            compact._compact_max_from_env()


def test_compact_graph_on_a_clique_counts_its_triangles():
    """A clique built edge batch by edge batch from empty: C(n, 3) triangles."""
    n = 12
    a, b = np.triu_indices(n, 1)
    c = CompactGraph(np.zeros(0, np.int64))
    total = 0
    for i in range(0, a.shape[0], 7):
        dk = _sym(a[i:i + 7].astype(np.int64), b[i:i + 7].astype(np.int64))
        d, bad = c.step(dk, np.ones(dk.shape[0], np.int64), n)
        assert bad == 0
        total += d
    assert total == 6 * n * (n - 1) * (n - 2) // 6 and len(c) == n * (n - 1)
    assert _scipy_triangles({(int(x), int(y)) for x, y in zip(a, b)}) == total // 6
