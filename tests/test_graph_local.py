"""Per-vertex and per-edge counts of an undirected graph kept off the count engine's stores
(gpu_ivm/queries/graph_local.py, kernels/graph_local.py, kernels/count_table.py) against
independent oracles: the cube of the adjacency matrix and B ∘ B² (scipy), a brute-force count
per vertex and per edge, a dict for the table of counts, and the general free-query state
(FreeQueries) of a twin engine."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sps
from gpu_ivm.kernels import count_table as ct
from gpu_ivm.kernels import graph_local as gk
from gpu_ivm.kernels.delta_kernels import mark_scratch
from oracle import GraphOracle
from streams import graph_batches

from gpu_ivm import ConflictError, GraphEngine
from gpu_ivm.encoding import pack
from gpu_ivm.queries.graph_local import GraphLocalCounts
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


def _brute_edge_counts(edges: set) -> dict:
    """Triangles on each edge {u, v} (u < v) of a simple undirected graph, by brute force."""
    nbr = defaultdict(set)
    for u, v in edges:
        nbr[u].add(v)
        nbr[v].add(u)
    out = {}
    for u, v in edges:
        c = len(nbr[u] & nbr[v])
        if c:
            out[(min(u, v), max(u, v))] = c
    return out


def _engine_counts(g: GraphEngine) -> dict:
    t = g.result_table("vertex_counts").to_pydict()
    return dict(zip(t["vertex"], t["triangles"]))


def _engine_edges(g: GraphEngine) -> dict:
    t = g.result_table("edge_counts").to_pydict()
    return {(a, b): c for a, b, c in zip(t["src"], t["dst"], t["triangles"])}


def _brute_triangles(edges: set) -> list:
    """The triangles (a, b, c), a < b < c, of a simple undirected graph, sorted."""
    nbr = defaultdict(set)
    for u, v in edges:
        nbr[u].add(v)
        nbr[v].add(u)
    return sorted((a, b, c) for a in nbr for b in nbr[a] if a < b
                  for c in nbr[a] & nbr[b] if c > b)


def _engine_triangles(g: GraphEngine, chunk_size: int = 1 << 20) -> list:
    t = pa.Table.from_batches(list(g.triangles(chunk_size))).to_pydict()
    return sorted(zip(t["a"], t["b"], t["c"]))


def _through(g: GraphEngine, vs) -> list:
    t = g.triangles_of(vs).to_pydict()
    return sorted(zip(t["a"], t["b"], t["c"]))


def _table(tab: np.ndarray) -> dict:
    """{(x, y): count} of a table's nonzero counts, read slot by slot."""
    out = {}
    for s in range(tab.shape[0] // 2):
        k, v = int(tab[2 * s]), int(tab[2 * s + 1])
        if k != ct.FREE and v:
            out[(k >> 32, k & 0xFFFFFFFF)] = v
    return out


def _upper(m) -> dict:
    """{(x, y): value} of a sparse matrix's nonzero entries with x < y."""
    m = sps.coo_matrix(m)
    return {(int(r), int(c)): int(v) for r, c, v in zip(m.row, m.col, m.data) if r < c and v}


def _sym(n: int, pairs: list, vals: list) -> sps.csr_matrix:
    r = [p[0] for p in pairs] + [p[1] for p in pairs]
    c = [p[1] for p in pairs] + [p[0] for p in pairs]
    return sps.csr_matrix((vals + vals, (r, c)), shape=(n, n), dtype=np.int64)


@pytest.mark.parametrize("shape", ["random", "star", "clique", "two hubs"])
@pytest.mark.parametrize("split", ["one thread", "threads", "passes", "wedges marked",
                                   "wedges looked up"])
def test_kernel_delta_is_the_change_of_the_cube_diagonal(shape: str, split: str,
                                                         monkeypatch) -> None:
    """local_delta against the graph after a batch adds diag(B³) − diag((B − D)³) to the
    per-vertex counts and B ∘ B² − (B − D) ∘ (B − D)² to the table of per-edge counts (scipy),
    with the batch's edges inserted and deleted, meeting at vertices and closing triangles;
    the pairs on one thread, on all threads, and in passes of a few emission slots; the
    wedges with every end's rows marked, or every wedge looked up. vertex_delta alone gives
    the same per-vertex counts."""
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
    want_edges = _upper(B.multiply(B @ B) - before.multiply(before @ before))
    assert want_edges  # the batch changes some edge's count

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
        tab = ct.new_table(np, ct.slots_for(len(after) + len(dels)))
        gk.local_delta(bk[order], np.concatenate([bv, bv])[order], hst.nt(), lst.nt(), heavy,
                       dense, tab)
        np.testing.assert_array_equal(dense, want)
        assert _table(tab) == want_edges
        dense[:] = 0
        gk.vertex_delta(bk[order], np.concatenate([bv, bv])[order], hst.nt(), lst.nt(), heavy,
                        dense)
        np.testing.assert_array_equal(dense, want)
        if bits:  # the hubs' rows have bitmaps (in whichever part holds them)
            assert all(s.boff.shape[0] and s.boff[h] >= 0 for h in (0, 1)
                       for s in (hst if heavy[h] else lst,))
        assert not mark_scratch(1, n).any()  # the shared scratch is left zeroed


FAMILIES = [["vertex_counts"], ["edge_counts"], ["vertex_counts", "edge_counts"], ["triangles"],
            ["vertex_counts", "edge_counts", "triangles"]]


@pytest.mark.parametrize("epsilon", [1, Fraction(1, 2), "auto"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("fams", FAMILIES, ids="+".join)
def test_random_streams_against_oracles_and_the_general_state(epsilon, seed, fams,
                                                              no_compact) -> None:
    """Random batches with hubs (minor and major rebalancing at ε = ½), then a shrinking
    phase: after every batch the counts equal a brute-force count and the general free-query
    state's, and the invariants hold; the table of per-edge counts is rebuilt on the way."""
    rng = np.random.default_rng(seed)
    oracle = GraphOracle()
    fast = GraphEngine(epsilon=epsilon, maintain=fams, adaptive=False)
    general = GraphEngine(epsilon=epsilon, maintain=fams, adaptive=False, results_from="views")
    assert isinstance(fast.fq, GraphLocalCounts) and isinstance(general.fq, FreeQueries)
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
        ids = np.arange(85)
        if "vertex_counts" in fams:
            want = _brute_vertex_counts(oracle.edges)
            assert _engine_counts(fast) == want == _engine_counts(general), i
            np.testing.assert_array_equal(fast.vertex_count(ids), general.vertex_count(ids))
        if "edge_counts" in fams:
            want = _brute_edge_counts(oracle.edges)
            assert _engine_edges(fast) == want == _engine_edges(general), i
            us, vs = ids, rng.permutation(ids)  # mostly pairs that are no edge
            np.testing.assert_array_equal(fast.edge_count(us, vs), general.edge_count(us, vs))
            eu = np.array([e[1] for e in oracle.edges] + [0])  # every edge, reversed, and (0, 0)
            ev = np.array([e[0] for e in oracle.edges] + [0])
            np.testing.assert_array_equal(fast.edge_count(eu, ev), general.edge_count(eu, ev))
        if "triangles" in fams:
            want = _brute_triangles(oracle.edges)
            assert _engine_triangles(fast, 7) == want == _engine_triangles(general), i
            for vs in ([int(rng.integers(0, 80))], rng.integers(0, 85, 5), [84]):
                assert _through(fast, vs) == _through(general, vs), (i, vs)
        if i % 10 == 9:
            assert fast.check_invariants() == []
    assert fast.count() == oracle.count()
    assert heavy_seen == (epsilon == Fraction(1, 2))  # rows in the heavy store were read
    if "edge_counts" in fams:
        assert fast.fq.stats["table_rebuilds"] > 0


def test_large_batches_on_the_recount_path(no_compact) -> None:
    """Batches large against the graph (the adaptive policy may recount the count): the
    per-vertex and per-edge counts follow the batch either way."""
    rng = np.random.default_rng(3)
    oracle = GraphOracle()
    g = GraphEngine(maintain=["vertex_counts", "edge_counts"])
    g.load((np.array([0]), np.array([1])))
    oracle.apply(0, 1, 1)
    for batch in graph_batches(oracle, rng, n_batches=6, nv=60, max_batch=400, hub_p=0.3):
        g.apply(batch)
        assert _engine_counts(g) == _brute_vertex_counts(oracle.edges)
        assert _engine_edges(g) == _brute_edge_counts(oracle.edges)
    assert g.check_invariants() == []


@pytest.mark.parametrize("fams", FAMILIES, ids="+".join)
def test_conflicts_change_nothing_and_skipped_rows_are_skipped(fams) -> None:
    g = GraphEngine(epsilon=1, maintain=fams)
    g.load(([0, 1, 2], [1, 2, 0]))
    before = g.result_table(fams[-1])
    with pytest.raises(ConflictError):
        g.apply({"src": [0, 3], "dst": [1, 0], "sign": [1, 1]})  # (0, 1) is present
    assert g.result_table(fams[-1]).equals(before)
    h = GraphEngine(epsilon=1, maintain=fams, on_conflict="ignore")
    h.load(([0, 1, 2], [1, 2, 0]))
    h.apply({"src": [0, 3, 3], "dst": [1, 0, 1], "sign": [1, 1, 1]})  # the first row skipped
    edges = {(0, 1), (1, 2), (0, 2), (0, 3), (1, 3)}
    if "vertex_counts" in fams:
        assert _engine_counts(h) == _brute_vertex_counts(edges) == {0: 2, 1: 2, 2: 1, 3: 1}
    if "edge_counts" in fams:
        assert _engine_edges(h) == _brute_edge_counts(edges)
    if "triangles" in fams:
        assert _engine_triangles(h) == _brute_triangles(edges) == [(0, 1, 2), (0, 1, 3)]


@pytest.mark.parametrize("fams", FAMILIES, ids="+".join)
def test_snapshot_round_trip(fams, tmp_path) -> None:
    g = GraphEngine(maintain=fams)
    g.load(([0, 1, 2, 2, 3], [1, 2, 0, 3, 0]))
    g.apply({"src": [1], "dst": [3], "sign": [1]})
    g.snapshot(tmp_path / "snap")
    r = GraphEngine.restore(tmp_path / "snap")
    assert isinstance(r.fq, GraphLocalCounts) and r.fq.families == g.fq.families
    edges = {(0, 1), (1, 2), (0, 2), (2, 3), (0, 3), (1, 3)}
    if "vertex_counts" in fams:
        assert _engine_counts(r) == _engine_counts(g) == _brute_vertex_counts(edges)
    if "edge_counts" in fams:
        assert _engine_edges(r) == _engine_edges(g) == _brute_edge_counts(edges)
    if "triangles" in fams:
        assert _engine_triangles(r) == _engine_triangles(g) == _brute_triangles(edges)


@pytest.mark.parametrize("kw", [dict(directed=True),
                                dict(maintain=["triangles"], directed=True, track_changes=True),
                                dict(results_from="views")])
def test_other_forms_keep_the_general_state(kw) -> None:
    opts = {"maintain": "vertex_counts", **kw}
    g = GraphEngine(**opts)
    assert isinstance(g.fq, FreeQueries)


@pytest.mark.parametrize("name", ["GPU_IVM_GRAPH_LOCAL", "GPU_IVM_GRAPH_VERTEX"])
def test_the_environment_variable_turns_it_off(name: str, monkeypatch) -> None:
    """The variable makes ``results_from="auto"`` (the default) take the views; an explicit
    ``"stores"`` still takes the stores."""
    monkeypatch.setenv(name, "0")
    assert isinstance(GraphEngine(maintain=["vertex_counts", "edge_counts"]).fq, FreeQueries)
    assert isinstance(GraphEngine(maintain="triangles", results_from="stores").fq,
                      GraphLocalCounts)


@pytest.mark.parametrize("source", ["auto", "stores", "views"])
def test_results_from_is_an_option_kept_by_snapshots(source: str, tmp_path) -> None:
    """``results_from`` picks the state (the stores' for "auto" and "stores" on an undirected
    graph, paper 001's views for "views"); a snapshot restores the same choice and results."""
    want = FreeQueries if source == "views" else GraphLocalCounts
    g = GraphEngine(maintain=["vertex_counts", "triangles"], results_from=source)
    assert isinstance(g.fq, want) and g.results_from == source
    g.load(([0, 1, 2, 2, 3], [1, 2, 0, 3, 0]))
    g.apply({"src": [1], "dst": [3], "sign": [1]})
    g.snapshot(tmp_path / "snap")
    r = GraphEngine.restore(tmp_path / "snap")
    assert isinstance(r.fq, want) and r.results_from == source
    edges = {(0, 1), (1, 2), (0, 2), (2, 3), (0, 3), (1, 3)}
    assert _engine_triangles(r) == _engine_triangles(g) == _brute_triangles(edges)
    assert _engine_counts(r) == _brute_vertex_counts(edges)


@pytest.mark.parametrize("kw, message", [
    (dict(directed=True), "undirected"), (dict(directed=True, track_changes=True), "undirected")])
def test_results_from_stores_is_refused_where_it_cannot_serve(kw, message) -> None:
    from gpu_ivm import InputError

    with pytest.raises(InputError, match=message):
        GraphEngine(maintain="triangles", results_from="stores", **kw)
    with pytest.raises(InputError, match="results_from must be one of"):
        GraphEngine(maintain="triangles", results_from="store")
    # the count alone has no results to take from anywhere: any choice is accepted
    assert GraphEngine(results_from="stores", **kw).fq is None


@pytest.mark.parametrize("shape", ["random", "two hubs"])
def test_load_counts_every_vertex_and_edge(shape: str) -> None:
    """The load's counts (one intersection per edge against a host store with bitmaps; two hub
    rows ANDed) equal a brute-force count."""
    rng = np.random.default_rng(5)
    if shape == "two hubs":  # rows of 200 and more: bitmaps on both
        edges = ({(0, v) for v in range(2, 260)} | {(1, v) for v in range(100, 300)}
                 | {(0, 1)} | {(u, u + 1) for u in range(2, 299, 3)})
    else:
        edges = {(int(u), int(v)) for u, v in rng.integers(0, 60, (400, 2)) if u < v}
    g = GraphEngine(maintain=["vertex_counts", "edge_counts"])
    g.load((np.array([e[0] for e in edges]), np.array([e[1] for e in edges])))
    assert _engine_counts(g) == _brute_vertex_counts(edges)
    assert _engine_edges(g) == _brute_edge_counts(edges)


def test_count_table_against_a_dict() -> None:
    """Adds with repeated keys, counts that return to 0 and negative ones, lookups of present
    and absent keys, the live entries, and a table filled to one free slot (probes wrap)."""
    rng = np.random.default_rng(9)
    tab = ct.new_table(np, 64)
    want: dict = defaultdict(int)
    universe = pack(rng.integers(0, 1000, 63), rng.integers(0, 1000, 63))
    universe = np.unique(universe)
    for _ in range(20):
        keys = rng.choice(universe, 40)
        vals = rng.integers(-3, 4, 40)
        ct.add_counts(tab, keys, vals)
        for k, v in zip(keys.tolist(), vals.tolist()):
            want[k] += v
        probe = np.concatenate([universe, universe + 1])
        out = np.empty(probe.shape[0], np.int64)
        ct.get_counts(tab, probe, out)
        assert out.tolist() == [want.get(k, 0) for k in probe.tolist()]
    keys, vals = ct.live_entries(np, tab)
    assert dict(zip(keys.tolist(), vals.tolist())) == {k: v for k, v in want.items() if v}
    assert keys.tolist() == sorted(keys.tolist())
    assert _table(tab) == {(k >> 32, k & 0xFFFFFFFF): v for k, v in want.items() if v}
    assert (tab[0::2] != ct.FREE).sum() <= universe.shape[0] < 64


def _split_stores(rng, n: int, edges: set, n_heavy: int, hub: int, bits: bool):
    """(heavy flags, heavy store, light store) of the undirected graph ``edges`` on ``n``
    ids: ``n_heavy`` random rows and row ``hub`` heavy; ``bits``: the stores keep bitmaps."""
    heavy = np.zeros(n, np.bool_)
    heavy[rng.choice(n, n_heavy, replace=False)] = True
    heavy[hub] = True
    both = sorted(pack(np.array([u]), np.array([v]))[0] for a, b in edges
                  for u, v in ((a, b), (b, a)))
    keys = np.array(both, np.int64)
    in_h = heavy[keys >> 32]
    hst = ZStore.from_sorted(keys[in_h], np.ones(int(in_h.sum()), np.int64), n, bits=bits)
    lst = ZStore.from_sorted(keys[~in_h], np.ones(int((~in_h).sum()), np.int64), n, bits=bits)
    return heavy, hst, lst


@pytest.mark.parametrize("split", ["one thread", "threads", "passes", "no bitmaps"])
@pytest.mark.parametrize("oriented", [True, False])
def test_common_above_against_brute_force(split: str, oriented: bool, monkeypatch) -> None:
    """The listing kernel's common neighbours above each pair's floor equal a brute-force
    intersection: rows split between a heavy and a light store, two hub rows with bitmaps
    (or none), pairs that are edges and pairs that are not, floors from -1 up; on one
    thread, on all threads, in passes of a few output slots. ``oriented``: each pair's
    longer row first (as the engine passes them) or not (the result is the same)."""
    from gpu_ivm.kernels import graph_listing as gl

    rng = np.random.default_rng(11)
    n = 300
    edges = ({(0, v) for v in range(2, 260)} | {(1, v) for v in range(100, 300)} | {(0, 1)}
             | {(int(u), int(v)) for u, v in rng.integers(2, n, (900, 2)) if u < v})
    nbr = defaultdict(set)
    for u, v in edges:
        nbr[u].add(v)
        nbr[v].add(u)
    heavy, hst, lst = _split_stores(rng, n, edges, 40, 1, split != "no bitmaps")
    assert split == "no bitmaps" or (gk.has_bits(hst.nt(), 1) and gk.has_bits(lst.nt(), 0))
    xs = np.concatenate([rng.integers(0, n, 700), [0, 1, 0, 5]])
    ys = np.concatenate([rng.integers(0, n, 700), [1, 0, 7, 5]])
    ok = xs != ys
    xs, ys = xs[ok], ys[ok]
    deg = np.array([len(nbr[v]) for v in range(n)])
    if oriented:
        swap = (deg[ys] > deg[xs]) | ((deg[ys] == deg[xs]) & (ys < xs))
        xs, ys = np.where(swap, ys, xs), np.where(swap, xs, ys)
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    floors = rng.integers(-1, n, xs.shape[0])
    if split == "threads":
        monkeypatch.setattr(gl, "PAR_MIN", 1)
    if split == "passes":
        monkeypatch.setattr(gl, "EMIT_MAX", 7)
    got = defaultdict(list)
    s, passes = 0, 0
    while s < xs.shape[0]:
        idx, c, s = gl.common_above(xs, ys, floors, hst.nt(), lst.nt(), heavy, s)
        passes += 1
        for i, ci in zip(idx.tolist(), c.tolist()):
            got[i].append(ci)
    assert (passes > 10) == (split == "passes")
    for i in range(xs.shape[0]):
        want = sorted(c for c in nbr[xs[i]] & nbr[ys[i]] if c > floors[i])
        assert sorted(got.get(i, [])) == want, (i, xs[i], ys[i], floors[i])


@pytest.mark.parametrize("split", ["one pass", "passes", "no bitmaps"])
@pytest.mark.parametrize("sign", [-1, 1])
def test_batch_pair_triangles_against_brute_force(split: str, sign: int, monkeypatch) -> None:
    """The change feed's kernel: the triangles through the batch's pairs of one sign, in the
    graph as stored, equal a brute-force listing, each once (triangles with two and three
    such pairs, a hub with bitmaps or none, rows split between a heavy and a light store,
    pairs of the other sign ignored, listing passes of a few slots); ``live_rows`` leaves
    the CPU's rows as they are."""
    from gpu_ivm.kernels import graph_listing as gl
    from gpu_ivm.kernels.batch_triangles import batch_pair_triangles, live_rows

    rng = np.random.default_rng(5 + sign)
    n = 200
    edges = ({(0, v) for v in range(1, 150)} | {(1, v) for v in range(2, 40)}
             | {(int(u), int(v)) for u, v in rng.integers(2, n, (700, 2)) if u < v})
    heavy, hst, lst = _split_stores(rng, n, edges, 30, 0, split != "no bitmaps")
    assert split == "no bitmaps" or gk.has_bits(hst.nt(), 0)
    # pairs of the batch with net change `sign` are edges of the graph (deletes read before
    # the batch, inserts after it); the other sign's pairs are not (and must be ignored):
    # whole triangles {0, 1, v} and two-pair triangles among them
    listed = sorted(edges)
    mine = {listed[i] for i in rng.choice(len(listed), 120, replace=False)}
    mine |= {(0, 1), (0, 2), (1, 2), (0, 3), (1, 3)}
    mine = {e for e in mine if e in edges}
    other = {(int(u), int(v)) for u, v in rng.integers(0, n, (80, 2)) if u < v} - edges
    pairs = {**dict.fromkeys(mine, sign), **dict.fromkeys(other, -sign)}
    dk = sorted((pack(np.array([u]), np.array([v]))[0], d) for (a, b), d in pairs.items()
                for u, v in ((a, b), (b, a)))
    dkeys = np.array([k for k, _ in dk], np.int64)
    dvals = np.array([d for _, d in dk], np.int64)
    if split == "passes":
        monkeypatch.setattr(gl, "EMIT_MAX", 5)
    got = live_rows(*batch_pair_triangles(dkeys, dvals, sign, hst.nt(), lst.nt(), heavy))
    rows = list(zip(*(r.tolist() for r in got)))
    nbr = defaultdict(set)
    for u, v in edges:
        nbr[u].add(v)
        nbr[v].add(u)
    want = sorted({tuple(sorted((u, v, c))) for u, v in mine for c in nbr[u] & nbr[v]})
    assert len(rows) == len(set(rows))  # each once
    assert sorted(rows) == want
    assert all(a < b < c for a, b, c in rows)
    assert sum(1 for t in want if {(t[0], t[1]), (t[0], t[2]), (t[1], t[2])} <= mine) > 0


def test_listing_during_a_batch_raises_and_large_batches_follow() -> None:
    """A batch applied while ``triangles()`` is read stops the reading; batches large against
    the graph (the adaptive policy may recount) leave the listing equal to brute force."""
    rng = np.random.default_rng(4)
    oracle = GraphOracle()
    g = GraphEngine(maintain="triangles")
    k = 9  # K9: 84 triangles
    edges = [(a, b) for a in range(k) for b in range(a + 1, k)]
    for u, v in edges:
        oracle.apply(u, v, 1)
    g.load((np.array([e[0] for e in edges]), np.array([e[1] for e in edges])))
    batches = list(g.triangles(chunk_size=10))
    assert [b.num_rows for b in batches] == [10] * 8 + [4]
    it = g.triangles(chunk_size=5)
    next(it)
    g.apply({"src": [0], "dst": [1], "sign": [-1]})
    oracle.apply(0, 1, -1)
    with pytest.raises(RuntimeError, match="during"):
        list(it)
    for batch in graph_batches(oracle, rng, n_batches=6, nv=60, max_batch=400, hub_p=0.3):
        g.apply(batch)
        assert _engine_triangles(g) == _brute_triangles(oracle.edges)
    assert g.count() == oracle.count() and g.check_invariants() == []


def _triangle_set(edges: set) -> set:
    return set(_brute_triangles(edges))


@pytest.mark.parametrize("epsilon", [1, Fraction(1, 2)])
@pytest.mark.parametrize("fams", [["triangles"], ["vertex_counts", "edge_counts", "triangles"],
                                  ["edge_counts"]], ids="+".join)
def test_change_feed_off_the_stores(epsilon, fams, no_compact) -> None:
    """``track_changes=True`` off the stores: the triangles a batch removes are read off the
    graph before it (its deleted pairs' common neighbours), those it adds after it; after
    every batch ``last_changes()`` equals the views' twin's, table for table, and the triangle
    changes equal a brute-force difference of the triangle sets. Batches with hubs, one that
    inserts and one that deletes a whole triangle, one without net change (empty changes),
    one refused by a conflict (changes of the batch before kept), large ones (recount
    path)."""
    from gpu_ivm import ConflictError

    rng = np.random.default_rng(21)
    oracle = GraphOracle()
    kw = dict(epsilon=epsilon, maintain=fams, track_changes=True, adaptive=True)
    fast, views = GraphEngine(**kw), GraphEngine(results_from="views", **kw)
    assert isinstance(fast.fq, GraphLocalCounts) and isinstance(views.fq, FreeQueries)
    base = [(int(u), int(v)) for u, v in rng.integers(0, 30, (80, 2)) if u != v]
    for u, v in base:
        oracle.apply(u, v, 1)
    for g in (fast, views):
        g.load((np.array([e[0] for e in oracle.edges]), np.array([e[1] for e in oracle.edges])))
    whole = {"src": np.array([90, 91, 90]), "dst": np.array([91, 92, 92])}
    extra = [("whole in", {**whole, "sign": np.ones(3, np.int64)}),
             ("whole out", {**whole, "sign": -np.ones(3, np.int64)}),
             ("no net change", {"src": np.array([95, 95]), "dst": np.array([96, 96]),
                                "sign": np.array([1, -1])})]
    made = graph_batches(oracle, rng, n_batches=12, nv=60, max_batch=300, hub_p=0.5,
                         shrink_from=8)
    seen = 0
    for i in range(15):
        tri_before = _triangle_set(oracle.edges)
        if i in (2, 3, 4):
            batch = extra[i - 2][1]
            for u, v, s in zip(batch["src"].tolist(), batch["dst"].tolist(),
                               batch["sign"].tolist()):
                oracle.apply(u, v, s)
        else:
            batch = next(made)  # the oracle takes the batch as it is drawn
        for g in (fast, views):
            g.apply(batch)
        got, want = fast.last_changes(), views.last_changes()
        for name in fams:
            assert got[name].equals(want[name]), (i, name)
        seen += sum(t.num_rows for t in got.values())
        if "triangles" in fams:
            t = got["triangles"].to_pydict()
            gone = {r for r, n in zip(zip(t["a"], t["b"], t["c"]), t["new"]) if n == 0}
            new = {r for r, n in zip(zip(t["a"], t["b"], t["c"]), t["new"]) if n == 1}
            after = _triangle_set(oracle.edges)
            assert gone == tri_before - after and new == after - tri_before, i
            if i == 4:
                assert not gone and not new
        if i == 5:  # a conflict changes nothing, the last batch's changes included
            kept = fast.last_changes()
            with pytest.raises(ConflictError):
                fast.apply({"src": np.array([list(oracle.edges)[0][0]]),
                            "dst": np.array([list(oracle.edges)[0][1]]), "sign": np.array([1])})
            assert all(fast.last_changes()[n].equals(kept[n]) for n in fams)
    assert seen > 100 and fast.count() == views.count() == oracle.count()
    assert fast.check_invariants() == []


@pytest.mark.parametrize("spread", ["dense", "sparse", "buckets of hundreds", "empty"])
def test_triple_order_against_lexsort(spread: str) -> None:
    """The change feed's row sort (kernels/triple_sort.py: counting sort on the first id,
    then each bucket by the packed other two, by insertion or argsort) sorts as NumPy's
    three-key lexsort does, duplicates included; sparse first ids take lexsort itself."""
    from gpu_ivm.kernels.triple_sort import triple_order

    rng = np.random.default_rng(8)
    n = {"empty": 0}.get(spread, 5000)
    hi = {"dense": 900, "sparse": 1 << 30, "buckets of hundreds": 12}.get(spread, 1)
    a = rng.integers(0, hi, n)
    b, c = rng.integers(0, 1 << 31, n), rng.integers(0, 40, n)
    b[: n // 2] = rng.integers(0, 3, n // 2)  # many equal (a, b) prefixes and whole rows
    o = triple_order(a, b, c)
    want = np.lexsort((c, b, a))
    assert sorted(o.tolist()) == list(range(n))
    for x in (a, b, c):
        np.testing.assert_array_equal(x[o], x[want])
