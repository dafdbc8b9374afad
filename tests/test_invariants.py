"""check_invariants() is read-only and checks what it promises: the count against a recount,
and with maintain= the free-query views and results against their definitions (oracle: a
brute-force recount from the stored tuples, written here in plain Python)."""

from __future__ import annotations

from collections import defaultdict
from itertools import permutations

import numpy as np
import pytest

from gpu_ivm import GraphEngine, InvariantError, RelationEngine

ALL = ["vertex_counts", "edge_counts", "triangles"]


def _store(st) -> tuple:
    k, v = st.items()
    return tuple(np.asarray(k).tolist()), tuple(np.asarray(v).tolist()), \
        tuple(np.asarray(st.live).tolist()), tuple(np.asarray(st.tomb).tolist()), st.used


def fingerprint(e) -> tuple:
    """Everything check_invariants could change: stores, views, partitions, counters, flags."""
    out = [e.Q, e.N, e.stale, e.batches_applied, e.last_batch_id, tuple(sorted(e._stats.items())),
           len(e.encoder)]
    for K in e.rels:
        out += [_store(K.h), _store(K.l), _store(K.ht), tuple(np.asarray(K.heavy).tolist()),
                K.th, K.max_abs]
    out += [_store(v.sparse) if hasattr(v, "sparse") else None for v in e.views]
    out += [(tuple(np.asarray(v.vmat).ravel().tolist()), tuple(np.asarray(v.vrow).tolist()))
            for v in e.views]
    fq = e.fq
    if getattr(fq, "graph_local", False):  # counts off the stores, triangles listed when read
        out += [fq.count, fq.cap, fq.version, fq.bound, tuple(sorted(fq.stats.items())),
                tuple(np.asarray(fq.dense).tolist()), tuple(np.asarray(fq.tab).tolist())]
    elif fq is not None:
        out += [fq.count, fq.N, fq.cap, tuple(fq.th), tuple(sorted(fq.stats.items()))]
        for r in fq.rels:
            out += [_store(r.fwd), _store(r.bwd)]
            out += [tuple(np.asarray(f).tolist()) for f in r.flags]
            out += [tuple(np.asarray(h).tolist()) for h in r.heavy]
        for sig in sorted(fq.views, key=repr):
            v = fq.views[sig]
            cols, vals = v.items()
            out.append((tuple(tuple(np.asarray(c).tolist()) for c in cols),
                        tuple(np.asarray(vals).tolist()), len(v.pairs) if v.pairs else None))
    return tuple(out)


def _random_engine(seed: int, force: str | None):
    rng = np.random.default_rng(seed)
    e = RelationEngine(maintain=ALL, epsilon={"R": "1/3", "S": "1/2", "T": "2/3"})
    rel = {"src": rng.integers(0, 12, 80), "dst": rng.integers(0, 12, 80),
           "mult": rng.integers(1, 4, 80)}
    e.load(R=rel, S=rel, T=rel)
    e.policy.force = force
    for _ in range(3):
        n = 40
        e.apply({"rel": rng.choice(list("RST"), n), "src": rng.integers(0, 15, n),
                 "dst": rng.integers(0, 15, n), "mult": rng.integers(1, 3, n)})
    return e


@pytest.mark.parametrize("force", [None, "delta", "recompute"])
@pytest.mark.parametrize("local", ["1", "0"])
def test_check_invariants_changes_nothing(force, local, monkeypatch):
    """``local``: GPU_IVM_GRAPH_LOCAL for the graph engine (its results off its stores, or
    the general state's views)."""
    e = _random_engine(3, force)
    assert e.stale == (force == "recompute")
    before = fingerprint(e)
    notes = e.check_invariants()
    assert fingerprint(e) == before
    assert (notes != []) == e.stale  # a stale state says what it did not check
    monkeypatch.setenv("GPU_IVM_GRAPH_LOCAL", local)
    g = GraphEngine(maintain=ALL)
    assert getattr(g.fq, "graph_local", False) == (local == "1")
    g.load({"src": [1, 2, 3, 3, 5], "dst": [2, 3, 1, 4, 4]})
    g.policy.force = force
    g.apply({"src": [1, 5], "dst": [4, 1], "sign": [1, 1]})
    before = fingerprint(g)
    g.check_invariants()
    assert fingerprint(g) == before


def test_stale_state_still_checks_the_count():
    e = _random_engine(4, "recompute")
    assert e.stale
    e.check_invariants()
    e.Q += 1
    with pytest.raises(InvariantError, match="count"):
        e.check_invariants()


def _brute(e) -> dict:
    """Per-vertex, per-edge counts and triangles of the relation form by brute force."""
    rels = {nm: {(a, b): m for a, b, m in zip(*(x.tolist() for x in e.relation(nm)))}
            for nm in "RST"}
    vert, edge, tri = defaultdict(int), defaultdict(int), {}
    for (a, b), r in rels["R"].items():
        for (b2, c), s in rels["S"].items():
            if b2 == b and (c, a) in rels["T"]:
                m = r * s * rels["T"][c, a]
                vert[a] += m
                edge[a, b] += m
                tri[a, b, c] = m
    return {"vertex": dict(vert), "edge": dict(edge), "tri": tri}


def test_results_checked_against_brute_force():
    e = _random_engine(5, None)
    e.check_invariants()
    want = _brute(e)
    t = e.result_table("vertex_counts").to_pydict()
    assert dict(zip(t["vertex"], t["triangles"])) == want["vertex"]
    t = e.result_table("edge_counts").to_pydict()
    assert dict(zip(zip(t["src"], t["dst"]), t["triangles"])) == want["edge"]
    t = e.result_table("triangles").to_pydict()
    assert dict(zip(zip(t["a"], t["b"], t["c"]), t["mult"])) == want["tri"]


@pytest.mark.parametrize("name", ["D1_HHH", "V1_RS", "V2_TR^", "V3_ST", "D3_LLL", "V3^HL*"])
def test_corrupted_free_query_view_is_detected(name):
    e = _random_engine(6, None)
    e.check_invariants()
    fq = e.fq
    spec, view = fq.by_name[name]
    cols, vals = view.items()
    if vals.shape[0]:  # change an existing entry
        view.add([c[:1] for c in cols], np.array([1], np.int64))
    else:  # or add one where there is none
        view.add([np.array([0], np.int64)] * len(spec.key), np.array([1], np.int64))
    with pytest.raises(InvariantError, match="free-query"):
        e.check_invariants()


def test_corrupted_triangle_listing_is_detected(monkeypatch):
    """A triangle listed twice (in two disjoint views) is caught by the listing check even
    though each view alone may look plausible."""
    monkeypatch.setenv("GPU_IVM_GRAPH_LOCAL", "0")  # the general state's views
    g = GraphEngine(maintain=["triangles"])
    g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    g.check_invariants()
    rows = g.result_table("triangles").to_pylist()
    assert rows == [{"a": 1, "b": 2, "c": 3}]
    fq = g.fq
    spec, view = fq.by_name["D3_LLL"]
    ids = g.encoder.lookup(np.array([1, 2, 3]), "key")
    for p in permutations(ids.tolist()):
        cols = [np.array([p[v]], np.int64) for v in spec.key]
        view.add(cols, np.array([1], np.int64))
    with pytest.raises(InvariantError):
        g.check_invariants()


@pytest.mark.parametrize("fault", ["a triangle twice", "a triangle dropped",
                                   "a corner's triangles dropped"])
def test_wrong_listing_off_the_stores_is_detected(fault, monkeypatch):
    """The triangles listed off an undirected graph's stores (gpu_ivm/queries/graph_local.py)
    are checked against a recount: a listing that repeats or drops a triangle, or the
    triangles through one vertex that miss one, fail the check."""
    from gpu_ivm.queries.graph_local import GraphLocalCounts

    g = GraphEngine(maintain=["triangles"])
    g.load({"src": [1, 2, 3, 3, 1], "dst": [2, 3, 1, 4, 4]})
    assert isinstance(g.fq, GraphLocalCounts)
    g.check_invariants()
    parts, through = GraphLocalCounts.triangle_parts, GraphLocalCounts.triangles_with
    if fault == "a triangle twice":
        monkeypatch.setattr(GraphLocalCounts, "triangle_parts",
                            lambda self, chunk=1 << 20: [p for p in parts(self, chunk)] * 2)
    elif fault == "a triangle dropped":
        monkeypatch.setattr(GraphLocalCounts, "triangle_parts",
                            lambda self, chunk=1 << 20: [tuple(x[1:] for x in p)
                                                         for p in parts(self, chunk)])
    else:
        monkeypatch.setattr(GraphLocalCounts, "triangles_with",
                            lambda self, ids: tuple(x[:-1] for x in through(self, ids)))
    with pytest.raises(InvariantError, match="triangle"):
        g.check_invariants()
