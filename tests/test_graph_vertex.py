"""Per-vertex counts of an undirected graph kept off the count engine's stores
(gpu_ivm/queries/graph_vertex.py, kernels/graph_vertex.py) against independent oracles: the
cube of the adjacency matrix (scipy), a brute-force count per vertex, and the general
free-query state (FreeQueries) of a twin engine."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sps
from gpu_ivm.kernels import graph_vertex as gk
from gpu_ivm.kernels.delta_kernels import mark_scratch
from oracle import GraphOracle
from streams import graph_batches

from gpu_ivm import ConflictError, GraphEngine
from gpu_ivm.encoding import pack
from gpu_ivm.queries.graph_vertex import GraphVertexCounts
from gpu_ivm.queries.maintain import FreeQueries
from gpu_ivm.store import ZStore


def _brute_vertex_counts(edges: set) -> dict:
    """Triangles through each vertex of a simple undirected graph, by brute force."""
    nbr = defaultdict(set)
    for u, v in edges:
        nbr[u].add(v)
        nbr[v].add(u)
    out: dict = defaultdict(int)
    for u in nbr:
        for v in nbr[u]:
            out[u] += len(nbr[u] & nbr[v])  # each triangle through u twice (v, w and w, v)
    return {u: c // 2 for u, c in out.items() if c}


def _engine_counts(g: GraphEngine) -> dict:
    t = g.result_table("vertex_counts").to_pydict()
    return dict(zip(t["vertex"], t["triangles"]))


def _sym(n: int, pairs: list, vals: list) -> sps.csr_matrix:
    r = [p[0] for p in pairs] + [p[1] for p in pairs]
    c = [p[1] for p in pairs] + [p[0] for p in pairs]
    return sps.csr_matrix((vals + vals, (r, c)), shape=(n, n), dtype=np.int64)


@pytest.mark.parametrize("shape", ["random", "star", "clique", "two hubs"])
@pytest.mark.parametrize("split", ["one thread", "threads", "passes", "wedges marked",
                                   "wedges looked up"])
def test_kernel_delta_is_the_change_of_the_cube_diagonal(shape: str, split: str,
                                                         monkeypatch) -> None:
    """vertex_delta against the graph after a batch equals diag(B³) − diag((B − D)³) (scipy),
    with the batch's edges inserted and deleted, meeting at vertices and closing triangles;
    the pairs on one thread, on all threads, and in passes of a few emission slots; the
    wedges with every end's rows marked, or every wedge looked up."""
    if split != "one thread":
        monkeypatch.setattr(gk, "PAR_MIN", 1)
    if split == "passes":
        monkeypatch.setattr(gk, "EMIT_MAX", 7)
    if split == "wedges marked":
        monkeypatch.setattr(gk, "WEDGE_MARK_RATIO", 1 << 40)
    if split == "wedges looked up":
        monkeypatch.setattr(gk, "WEDGE_MARK_RATIO", 0)
    rng = np.random.default_rng(7)
    n = 300 if shape == "two hubs" else 40
    if shape == "two hubs":  # rows of 200 with bitmaps: a pair of them is ANDed word by word
        after = ({(0, v) for v in range(2, 200)} | {(1, v) for v in range(100, n)} | {(0, 1)}
                 | {(u, u + 3) for u in range(2, n - 3, 7)})
    elif shape == "star":
        after = {(0, v) for v in range(1, n)} | {(v, v + 1) for v in range(1, n - 1, 2)}
    elif shape == "clique":
        after = {(u, v) for u in range(12) for v in range(u + 1, 12)} | {(12, 13)}
    else:
        after = {(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.2}
    after_l = sorted(after)
    ins = [after_l[i] for i in rng.choice(len(after_l), 15, replace=False)]
    if shape == "two hubs" and (0, 1) not in ins:
        ins[0] = (0, 1)
    dels = set()
    while len(dels) < 15:
        u, v = sorted(int(x) for x in rng.choice(n, 2, replace=False))
        if (u, v) not in after:
            dels.add((u, v))
    dels = sorted(dels)
    B = _sym(n, after_l, [1] * len(after_l))
    D = _sym(n, ins + dels, [1] * len(ins) + [-1] * len(dels))
    before = B - D
    want = (B @ B @ B).diagonal() - (before @ before @ before).diagonal()

    a = np.array([e[0] for e in after_l] + [e[1] for e in after_l], np.int64)
    b = np.array([e[1] for e in after_l] + [e[0] for e in after_l], np.int64)
    keys = np.sort(pack(a, b))
    bits = shape == "two hubs"
    st = ZStore.from_sorted(keys, np.ones(keys.shape[0], np.int64), n, bits=bits)
    empty = ZStore.from_sorted(np.zeros(0, np.int64), np.zeros(0, np.int64), n, bits=bits)
    # the batch: both orientations, sorted by packed key
    bx = np.array([e[0] for e in ins + dels] + [e[1] for e in ins + dels], np.int64)
    by = np.array([e[1] for e in ins + dels] + [e[0] for e in ins + dels], np.int64)
    bv = np.array([1] * len(ins) + [-1] * len(dels), np.int64)
    bk = pack(bx, by)
    order = np.argsort(bk)
    dense = np.zeros(n, np.int64)
    for heavy_split in (False, True):  # every row in the light store, or some in the heavy one
        heavy = np.zeros(n, np.bool_)
        hst, lst = empty, st
        if heavy_split:
            heavy[::3] = True
            hk = keys[heavy[keys >> 32]]
            lk = keys[~heavy[keys >> 32]]
            hst = ZStore.from_sorted(hk, np.ones(hk.shape[0], np.int64), n, bits=bits)
            lst = ZStore.from_sorted(lk, np.ones(lk.shape[0], np.int64), n, bits=bits)
        dense[:] = 0
        gk.vertex_delta(bk[order], np.concatenate([bv, bv])[order], hst.nt(), lst.nt(), heavy,
                        dense)
        np.testing.assert_array_equal(dense, want)
        if bits:  # the hubs' rows have bitmaps (in whichever part holds them)
            assert all(s.boff.shape[0] and s.boff[h] >= 0 for h in (0, 1)
                       for s in (hst if heavy[h] else lst,))
        assert not mark_scratch(1, n).any()  # the shared scratch is left zeroed


@pytest.mark.parametrize("epsilon", [1, Fraction(1, 2), "auto"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_streams_against_oracles_and_the_general_state(epsilon, seed, monkeypatch,
                                                              no_compact) -> None:
    """Random batches with hubs (minor and major rebalancing at ε = ½), then a shrinking
    phase: after every batch the counts equal a brute-force count and the general free-query
    state's, and the invariants hold."""
    rng = np.random.default_rng(seed)
    oracle = GraphOracle()
    fast = GraphEngine(epsilon=epsilon, maintain="vertex_counts", adaptive=False)
    monkeypatch.setenv("GPU_IVM_GRAPH_VERTEX", "0")
    general = GraphEngine(epsilon=epsilon, maintain="vertex_counts", adaptive=False)
    monkeypatch.delenv("GPU_IVM_GRAPH_VERTEX")
    assert isinstance(fast.fq, GraphVertexCounts) and isinstance(general.fq, FreeQueries)
    base = [(int(u), int(v)) for u, v in rng.integers(0, 30, (60, 2)) if u != v]
    for u, v in base:
        oracle.apply(u, v, 1)
    src = np.array([e[0] for e in oracle.edges])
    dst = np.array([e[1] for e in oracle.edges])
    for g in (fast, general):
        g.load((src, dst))
    heavy_seen = False
    for i, batch in enumerate(graph_batches(oracle, rng, n_batches=30, nv=80, max_batch=40,
                                            hub_p=0.5, shrink_from=20)):
        fast.apply(batch)
        general.apply(batch)
        heavy_seen = heavy_seen or fast.rels[0].h.size > 0
        want = _brute_vertex_counts(oracle.edges)
        assert _engine_counts(fast) == want == _engine_counts(general), i
        ids = np.arange(85)
        np.testing.assert_array_equal(fast.vertex_count(ids), general.vertex_count(ids))
        if i % 10 == 9:
            assert fast.check_invariants() == []
    assert fast.count() == oracle.count()
    assert heavy_seen == (epsilon == Fraction(1, 2))  # rows in the heavy store were read


def test_large_batches_on_the_recount_path(no_compact) -> None:
    """Batches large against the graph (the adaptive policy may recount the count): the
    per-vertex counts follow the batch either way."""
    rng = np.random.default_rng(3)
    oracle = GraphOracle()
    g = GraphEngine(maintain="vertex_counts")
    g.load((np.array([0]), np.array([1])))
    oracle.apply(0, 1, 1)
    for batch in graph_batches(oracle, rng, n_batches=6, nv=60, max_batch=400, hub_p=0.3):
        g.apply(batch)
        assert _engine_counts(g) == _brute_vertex_counts(oracle.edges)
    assert g.check_invariants() == []


def test_conflicts_change_nothing_and_skipped_rows_are_skipped() -> None:
    g = GraphEngine(epsilon=1, maintain="vertex_counts")
    g.load(([0, 1, 2], [1, 2, 0]))
    before = _engine_counts(g)
    with pytest.raises(ConflictError):
        g.apply({"src": [0, 3], "dst": [1, 0], "sign": [1, 1]})  # (0, 1) is present
    assert _engine_counts(g) == before
    h = GraphEngine(epsilon=1, maintain="vertex_counts", on_conflict="ignore")
    h.load(([0, 1, 2], [1, 2, 0]))
    h.apply({"src": [0, 3, 3], "dst": [1, 0, 1], "sign": [1, 1, 1]})  # the first row skipped
    assert _engine_counts(h) == {0: 2, 1: 2, 2: 1, 3: 1}


def test_snapshot_round_trip(tmp_path) -> None:
    g = GraphEngine(maintain="vertex_counts")
    g.load(([0, 1, 2, 2, 3], [1, 2, 0, 3, 0]))
    g.apply({"src": [1], "dst": [3], "sign": [1]})
    g.snapshot(tmp_path / "snap")
    r = GraphEngine.restore(tmp_path / "snap")
    assert isinstance(r.fq, GraphVertexCounts)
    assert _engine_counts(r) == _engine_counts(g) == _brute_vertex_counts(
        {(0, 1), (1, 2), (0, 2), (2, 3), (0, 3), (1, 3)})


@pytest.mark.parametrize("kw", [dict(directed=True), dict(maintain=["vertex_counts",
                                                                    "edge_counts"]),
                                dict(track_changes=True)])
def test_other_forms_keep_the_general_state(kw) -> None:
    opts = {"maintain": "vertex_counts", **kw}
    g = GraphEngine(**opts)
    assert isinstance(g.fq, FreeQueries)


def test_the_environment_variable_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("GPU_IVM_GRAPH_VERTEX", "0")
    assert isinstance(GraphEngine(maintain="vertex_counts").fq, FreeQueries)


@pytest.mark.parametrize("shape", ["random", "two hubs"])
def test_load_counts_every_vertex(shape: str) -> None:
    """The load's counts (one intersection per edge against a host store with bitmaps; two hub
    rows ANDed) equal a brute-force count."""
    rng = np.random.default_rng(5)
    if shape == "two hubs":  # rows of 200 and more: bitmaps on both
        edges = ({(0, v) for v in range(2, 260)} | {(1, v) for v in range(100, 300)}
                 | {(0, 1)} | {(u, u + 1) for u in range(2, 299, 3)})
    else:
        edges = {(int(u), int(v)) for u, v in rng.integers(0, 60, (400, 2)) if u < v}
    g = GraphEngine(maintain="vertex_counts")
    g.load((np.array([e[0] for e in edges]), np.array([e[1] for e in edges])))
    assert _engine_counts(g) == _brute_vertex_counts(edges)
