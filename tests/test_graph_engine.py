"""The graph form against a brute-force oracle after every batch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EPSILONS, tiny_storage
from hypothesis import given
from hypothesis import strategies as st
from oracle import GraphOracle
from streams import graph_batches

from gpu_ivm import GraphEngine, compact
from gpu_ivm.errors import ConflictError


def run_stream(eng: GraphEngine, oracle: GraphOracle, rng, **kw) -> None:
    for batch in graph_batches(oracle, rng, **kw):
        rep = eng.apply(batch)
        expect = oracle.count()
        assert eng.count() == expect
        assert rep.triangles == expect
        assert eng.recount() == expect
        assert eng.num_edges == len(oracle.edges)
        eng.check_invariants()


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("eps", EPSILONS)
@given(seed=st.integers(0, 2**32 - 1), nv=st.integers(4, 40), max_batch=st.integers(1, 40),
       hub_p=st.floats(0, 0.9), base=st.integers(0, 60), shrink=st.booleans(),
       tiny=st.booleans(), compact_form=st.booleans())
def test_random_streams(directed, eps, seed, nv, max_batch, hub_p, base, shrink, tiny,
                        compact_form):
    """Random streams against the oracle, with the stores' small thresholds or not, and
    with the compact form of small graphs (gpu_ivm/compact.py) or the stores only."""
    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            tiny_storage(mp)
        if not compact_form:
            mp.setattr(compact, "COMPACT_MAX", 0)
        _random_stream(directed, eps, seed, nv, max_batch, hub_p, base, shrink)


def _random_stream(directed, eps, seed, nv, max_batch, hub_p, base, shrink):
    rng = np.random.default_rng(seed)
    oracle = GraphOracle(directed)
    eng = GraphEngine(directed=directed, epsilon=eps)
    a = rng.integers(0, nv, base)
    b = rng.integers(0, nv, base)
    for u, v in zip(a.tolist(), b.tolist()):
        if u != v:
            oracle.apply(u, v, 1)
    eng.load((a, b))
    assert eng.count() == oracle.count()
    eng.check_invariants()
    run_stream(eng, oracle, rng, n_batches=12, nv=nv, max_batch=max_batch, hub_p=hub_p,
               shrink_from=6 if shrink else None)


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
@pytest.mark.parametrize("eps", ["1/2", "1/3"])
def test_skewed_growth_forces_rebalancing(eps):
    """Hub-heavy growth, then deletion: minor moves both ways and majors both ways happen."""
    rng = np.random.default_rng(7)
    oracle = GraphOracle(False)
    eng = GraphEngine(epsilon=eps)
    run_stream(eng, oracle, rng, n_batches=40, nv=150, max_batch=30, hub_p=0.8, n_hubs=3,
               shrink_from=20)
    assert eng._stats["to_heavy"] >= 1 and eng._stats["to_light"] >= 1
    assert eng._stats["major"] >= 2


@pytest.mark.parametrize("eps", EPSILONS)
def test_single_update_batches_equal_large_batches(eps):
    rng = np.random.default_rng(3)
    oracle = GraphOracle(False)
    batches = list(graph_batches(oracle, rng, n_batches=10, nv=30, max_batch=25, hub_p=0.5))
    one = GraphEngine(epsilon=eps)
    many = GraphEngine(epsilon=eps)
    for b in batches:
        many.apply(b)
        for i in range(len(b["src"])):
            one.apply({k: v[i : i + 1] for k, v in b.items()})
    assert one.count() == many.count() == oracle.count()
    def canon(eng):
        return sorted(tuple(sorted(map(int, p))) for p in zip(*eng.edges()))

    assert canon(one) == canon(many) == sorted(oracle.edges)


@pytest.mark.parametrize("force", ["delta", "recompute", "alternate"])
def test_adaptive_paths_agree(force):
    """Either path, or the two interleaved (a stale state is rebuilt by the next delta batch),
    gives the oracle's count after every batch."""
    rng = np.random.default_rng(11)
    oracle = GraphOracle(False)
    eng = GraphEngine()
    for i, batch in enumerate(graph_batches(oracle, rng, n_batches=9, nv=60, max_batch=200,
                                            hub_p=0.3)):
        want = force if force != "alternate" else ("recompute" if i % 3 else "delta")
        eng.policy.force = want
        rep = eng.apply(batch)
        assert rep.path == want
        assert eng.count() == oracle.count()
        if i % 2:
            stale = eng.stale
            eng.check_invariants()
            assert eng.stale == stale == (want == "recompute")  # the check changes nothing
            assert eng.recount() == oracle.count()


def _policy(units: int, recompute_rate: float):
    """An AdaptivePolicy with set rates (powers of two: exact sums) whose work estimate is
    ``units``, and a stand-in engine of 2**10 tuples (``choose`` reads size and stale)."""
    from types import SimpleNamespace

    from gpu_ivm.recompute import AdaptivePolicy

    pol = AdaptivePolicy()
    pol.recompute_sec_per_tuple = recompute_rate
    pol.recompute_factor = 1.0  # a recompute batch costs its recount
    pol.rebuild_sec_per_tuple = 2.0 ** -17  # a rebuild of 2**10 tuples: 2**-7 s
    pol.sec_per_unit = 2.0 ** -30
    pol.units = lambda engine, phases: units
    return pol, SimpleNamespace(size=1 << 10, stale=True), [(0, np.zeros(0, np.int64))]


def test_policy_returns_to_deltas_once_their_savings_pay_a_rebuild():
    """From a stale state the delta path (which must rebuild first) is taken once its
    estimated savings, summed over the recounts, reach one rebuild: recount 2**-10 s, delta
    2**-11 s, rebuild 2**-7 s, so the 16th batch; one batch that saves more goes at once."""
    pol, eng, phases = _policy(1 << 19, 2.0 ** -20)
    paths = [pol.choose(eng, phases) for _ in range(16)]
    assert paths == ["recompute"] * 15 + ["delta"]
    pol, eng, phases = _policy(1 << 19, 2.0 ** -12)  # recount 2**-2 s: saves > 2**-7 s
    assert pol.choose(eng, phases) == "delta"


def test_policy_leaves_a_fresh_state_when_recounting_pays_its_later_rebuild():
    """From a fresh state the recount is taken once the delta estimates' excess over the
    recount's (2**-10 s), summed over the batches since, exceeds the rebuild a return will
    cost (2**-7 s): at once for one batch whose own excess does, after 9 batches of 2**-10 s
    excess each; a cheap batch in between takes its savings off the sum."""
    for units, want in (((1 << 20) + (1 << 23), "delta"), ((1 << 20) + (1 << 23) + 1,
                                                           "recompute")):
        pol, eng, phases = _policy(units, 2.0 ** -20)
        eng.stale = False
        assert pol.choose(eng, phases) == want
    pol, eng, phases = _policy(1 << 21, 2.0 ** -20)  # delta 2**-9 s: 2**-10 s over
    eng.stale = False
    assert [pol.choose(eng, phases) for _ in range(9)] == ["delta"] * 8 + ["recompute"]
    pol, eng, phases = _policy(1 << 21, 2.0 ** -20)
    eng.stale = False
    paths = [pol.choose(eng, phases) for _ in range(7)]
    pol.units = lambda engine, phases: 0  # a batch that saves 2**-10 s
    paths.append(pol.choose(eng, phases))
    pol.units = lambda engine, phases: 1 << 21
    paths += [pol.choose(eng, phases) for _ in range(3)]
    assert paths == ["delta"] * 10 + ["recompute"]


def test_policy_explores_deltas_with_growing_waits():
    """With close estimates that keep recounting, a delta batch re-measures the delta path
    after 16 recounts in a row, then after 32, 64, ... (a try that ends back on recounts
    doubles the wait); a try after which the estimates keep deltas resets the wait to 16."""
    from gpu_ivm import recompute

    # fresh state: recount 2**-10 s, delta 2**-10 + 2**-12 s (within 2x), rebuild 2**-13 s
    # (below one batch's excess): recounting wins every time unless exploring
    pol, eng, phases = _policy((1 << 20) + (1 << 18), 2.0 ** -20)
    pol.rebuild_sec_per_tuple = 2.0 ** -23
    eng.stale = False
    paths = [pol.choose(eng, phases) for _ in range(16 + 1 + 32 + 1 + 64 + 1)]
    tries = [i for i, p in enumerate(paths) if p == "delta"]
    assert tries == [16, 16 + 1 + 32, 16 + 1 + 32 + 1 + 64]
    assert pol.choose(eng, phases) == "recompute" and pol.explore_every == 128
    assert [pol.choose(eng, phases) for _ in range(128)][-1] == "delta"  # the next try
    pol.units = lambda engine, phases: 1  # deltas far cheaper now: the try resets the wait
    assert pol.choose(eng, phases) == "delta" and pol.explore_every == recompute.EXPLORE_FIRST


def test_policy_fixed_cost_is_bounded_by_the_cheapest_recent_batch():
    """Tiny batches measure the delta path's fixed cost, but they come mostly at a stream's
    start, cold: three of 2**-7 s, then only batches of more work at 2**-12 s. No batch costs
    less than the fixed part, so it drops to 2**-12 s, and a recount (2**-10 s, plus the
    amortized rebuild) no longer looks cheaper than the deltas that run 4x faster. Without
    the bound the fixed part stayed at 2**-7 s for good (small SNAP windows recounted for
    hundreds of batches)."""
    pol, eng, phases = _policy(100, 2.0 ** -20)
    for _ in range(3):
        pol.observe_delta(2.0 ** -7, eng, phases)
    assert pol.delta_fixed_sec == 2.0 ** -7
    pol.units = lambda engine, phases: 5000
    for _ in range(9):
        pol.observe_delta(2.0 ** -12, eng, phases)
    assert pol.delta_fixed_sec == 2.0 ** -12
    eng.stale = False
    assert pol.choose(eng, phases) == "delta"


def test_policy_rates_batches_on_the_snapshot_apart():
    """A batch against the compact copy of the graph is estimated at a rate of its own:
    seeded at sec_per_unit / SNAPSHOT_SPEEDUP, then the median of such batches' measured
    rates; the stores' rate is left alone. Delta 2**-6 s at the stores' rate exceeds the
    recount (2**-10 s) by more than the rebuild (2**-7 s): recount; at half that rate (2**-7
    s) by less: deltas."""
    from gpu_ivm import recompute

    for snap, want in ((False, "recompute"), (True, "delta")):
        pol, eng, phases = _policy(1 << 24, 2.0 ** -20)
        eng.stale = False
        eng._snapshot_path = lambda n, snap=snap: snap
        assert recompute.SNAPSHOT_SPEEDUP == 2
        assert pol.choose(eng, phases) == want
    pol.observe_delta(2.0 ** -12, eng, phases)  # measured: 2**-12 s for 2**24 units
    assert pol.sec_per_unit == 2.0 ** -30 and pol._rate(True) == 2.0 ** -36
    assert pol._rate(False) == 2.0 ** -30


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
def test_adaptive_policy_picks_recompute_for_huge_batches():
    rng = np.random.default_rng(5)
    oracle = GraphOracle(False)
    a, b = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    for u, v in zip(a.tolist(), b.tolist()):
        if u != v:
            oracle.apply(u, v, 1)
    eng = GraphEngine()
    eng.load((a, b))
    eng.policy.recompute_sec_per_tuple = 1e-12  # make recomputing look free, and the
    eng.policy.rebuild_sec_per_tuple = 1e-12  # rebuild that a return to deltas costs
    batch = next(graph_batches(oracle, rng, n_batches=1, nv=300, max_batch=2000, hub_p=0.1))
    assert eng.apply(batch).path == "recompute"
    assert eng.stale and eng.count() == oracle.count()
    eng.policy.recompute_sec_per_tuple = 1.0  # now the delta path, which rebuilds first
    batch = next(graph_batches(oracle, rng, n_batches=1, nv=300, max_batch=5, hub_p=0.1))
    assert eng.apply(batch).path == "delta"
    assert not eng.stale and eng.count() == oracle.count()
    eng.check_invariants()


def test_slides_example_graph():
    """Digest §9.1: the slides' graph has exactly two triangles {b,d,f} and {d,e,f}."""
    g = GraphEngine()
    for src, dst in [("b", "d"), ("b", "f"), ("d", "f"), ("d", "e"), ("e", "f")]:
        g.apply({"src": [src], "dst": [dst], "sign": [1]})
    assert g.count() == 2
    assert g.Q == 12  # trace(E³) of the symmetric edge relation (digest: Δ0 = 12)
    g.apply({"src": ["a", "c"], "dst": ["b", "e"], "sign": [1, 1]})
    assert g.count() == 2
    g.check_invariants()


def test_self_join_batch_cross_terms():
    """Digest §9.5: a batch {+(a,b), +(b,c)} against old {(c,a)} closes one triangle."""
    g = GraphEngine(directed=True)
    g.load({"src": [3], "dst": [1]})
    rep = g.apply({"src": [1, 2], "dst": [2, 3], "sign": [1, 1]})
    assert rep.delta == 1 and g.Q == 3
    g2 = GraphEngine()
    rep = g2.apply({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]})
    assert rep.delta == 1  # a triangle lying entirely inside one batch (tr(Δ³))


def test_conflicts_error_and_ignore():
    g = GraphEngine()
    g.load({"src": [1, 2], "dst": [2, 3]})
    with pytest.raises(ConflictError, match="already present") as ei:
        g.apply({"src": [3, 2], "dst": [1, 1], "sign": [1, 1]})
    assert ei.value.row == 1 and ei.value.column == "sign"
    assert g.num_edges == 2 and g.count() == 0
    with pytest.raises(ConflictError, match="absent"):
        g.apply({"src": [5], "dst": [6], "sign": [-1]})
    assert g.num_vertices == 3  # unseen keys of a rejected batch are not kept
    ig = GraphEngine(on_conflict="ignore")
    ig.load({"src": [1, 2], "dst": [2, 3]})
    rep = ig.apply({"src": [2, 3, 5], "dst": [1, 1, 6], "sign": [1, 1, -1]})
    assert rep.ignored == 2 and rep.updates == 1 and ig.count() == 1
    ig.check_invariants()


def test_self_loops_are_dropped_and_counted():
    g = GraphEngine()
    rep = g.load({"src": [1, 1, 2, 3], "dst": [1, 2, 3, 1]})
    assert rep.self_loops == 1 and g.count() == 1 and g.num_edges == 3
    rep = g.apply({"src": [4, 4], "dst": [4, 1], "sign": [1, 1]})
    assert rep.self_loops == 1 and rep.updates == 1


def test_duplicate_rows_in_one_batch_net_out():
    g = GraphEngine()
    g.load({"src": [1, 2], "dst": [2, 3]})
    rep = g.apply({"src": [3, 1, 1], "dst": [1, 3, 3], "sign": [1, -1, 1]})
    assert rep.updates == 1 and g.count() == 1
    with pytest.raises(ConflictError, match="twice"):
        g.apply({"src": [5, 6], "dst": [6, 5], "sign": [1, 1]})


def test_batch_ids_skip_replays():
    g = GraphEngine()
    g.apply({"src": [1, 2], "dst": [2, 3], "sign": [1, 1]}, batch_id=0)
    rep = g.apply({"src": [3], "dst": [1], "sign": [1]}, batch_id=1)
    assert rep.triangles == 1 and g.last_batch_id == 1
    again = g.apply({"src": [3], "dst": [1], "sign": [1]}, batch_id=1)  # a replay: skipped
    assert again.path == "skipped" and g.count() == 1 and g.batches_applied == 2
    g.apply({"src": [3], "dst": [1], "sign": [-1]}, batch_id=5)
    assert g.count() == 0 and g.last_batch_id == 5


def test_views_over_memory_budget(monkeypatch):
    """A load whose views cannot fit is refused up front; a later rebuild that cannot fit
    degrades to recounting per batch, with the right counts."""
    from gpu_ivm import ResourceLimitError

    rng = np.random.default_rng(9)
    oracle = GraphOracle(False)
    a, b = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    a[:150] = 0
    for u, v in zip(a.tolist(), b.tolist()):
        if u != v:
            oracle.apply(u, v, 1)
    monkeypatch.setenv("GPU_IVM_MEMORY_LIMIT", "64")
    with pytest.raises(ResourceLimitError, match="GPU_IVM_MEMORY_LIMIT"):
        GraphEngine(epsilon="1/3").load((a, b))
    monkeypatch.delenv("GPU_IVM_MEMORY_LIMIT")
    eng = GraphEngine(epsilon="1/3")
    eng.load((a, b))
    batches = graph_batches(oracle, rng, n_batches=4, nv=40, max_batch=60, hub_p=0.6)
    eng.policy.force = "recompute"  # leaves the views stale
    eng.apply(next(batches))
    assert eng.stale and eng.count() == oracle.count()
    monkeypatch.setenv("GPU_IVM_MEMORY_LIMIT", "64")
    eng.policy.force = "delta"  # needs a rebuild that does not fit: degrade, recount
    with pytest.warns(RuntimeWarning, match="recounting per batch"):
        rep = eng.apply(next(batches))
    assert rep.path == "recompute" and eng.count() == oracle.count()
    monkeypatch.delenv("GPU_IVM_MEMORY_LIMIT")
    eng.policy.force = None
    for batch in batches:  # the budget is back: the next delta batch rebuilds the views
        eng.apply(batch)
        assert eng.count() == oracle.count()
    eng.check_invariants()
    assert eng.recount() == oracle.count()


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
def test_empty_start_engine_calibrates_recompute_rate():
    """An engine that never ran load() measures the recompute rate itself once |D| is large
    enough (the adaptive policy could otherwise never pick the recompute path), and the
    calibration recount agrees with the maintained count."""
    rng = np.random.default_rng(4)
    g = GraphEngine()
    assert g.policy.recompute_sec_per_tuple is None
    present = set()
    for _ in range(6):
        rows = set()
        while len(rows) < 600:
            a, b = (int(v) for v in rng.integers(0, 400, 2))
            e = (min(a, b), max(a, b))
            if a != b and e not in present:
                rows.add(e)
        present |= rows
        g.apply({"src": [e[0] for e in rows], "dst": [e[1] for e in rows],
                 "sign": [1] * len(rows)})
    assert g.size >= 4096
    assert g.policy.recompute_sec_per_tuple is not None
    from gpu_ivm.static import count_triangles_arrays

    src, dst = zip(*present)
    assert g.count() == count_triangles_arrays(np.array(src), np.array(dst))


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
def test_small_light_batches_do_not_pay_the_calibration_recount():
    """The recount that measures the recompute rate runs for a batch whose choice reads it:
    small batches on a graph without a heavy part take deltas without the estimates, so an
    engine that started empty and only saw those has not recounted (even past 4,096
    tuples); the first larger batch calibrates. Counts checked against the static counter."""
    from gpu_ivm.kernels.light_delta import LIGHT_DELTA_MAX

    from gpu_ivm.static import count_triangles_arrays

    rng = np.random.default_rng(11)
    g = GraphEngine(epsilon="1")
    recounts = []
    orig = g._count_from_stores
    g._count_from_stores = lambda: recounts.append(1) or orig()
    present: set = set()

    def batch(n):
        rows = set()
        while len(rows) < n:
            a, b = (int(v) for v in rng.integers(0, 3000, 2))
            e = (min(a, b), max(a, b))
            if a != b and e not in present:
                rows.add(e)
        present.update(rows)
        return {"src": [e[0] for e in rows], "dst": [e[1] for e in rows],
                "sign": [1] * len(rows)}

    while g.size < 6000:  # 200 edges: 400 tuples a batch, within LIGHT_DELTA_MAX
        assert 400 <= LIGHT_DELTA_MAX
        g.apply(batch(200))
    assert g.rels[0].h.size == 0 and not recounts
    assert g.policy.recompute_sec_per_tuple is None
    g.apply(batch(2000))  # 4,000 tuples: estimated, so calibrated first
    assert recounts and g.policy.recompute_sec_per_tuple is not None
    src, dst = zip(*present)
    assert g.count() == count_triangles_arrays(np.array(src), np.array(dst))


@pytest.mark.parametrize("mode", ["general", "insert_only"])
def test_ignore_judges_each_edge_on_its_net_change(mode):
    """The documented on_conflict rule: an edge's rows in a batch are summed; an edge whose
    sum takes it out of {0, 1} is skipped whole under "ignore" (every row counted); a delete
    then an insert of an absent edge nets to nothing (insert-only mode refuses deletes, so
    it gets the insert-only part of the rule). The same batches as an independent fold over
    the net changes."""
    rows = [(2, 3, 1), (2, 3, 1), (1, 3, 1), (1, 2, 1), (3, 4, 1)]
    if mode == "general":
        rows += [(4, 5, -1), (4, 5, 1), (1, 4, 1), (1, 4, -1), (1, 4, 1)]
    g = GraphEngine(mode=mode, on_conflict="ignore")
    g.load({"src": np.array([1]), "dst": np.array([2])})
    s, d, w = (np.array(c) for c in zip(*rows))
    rep = g.apply({"src": s, "dst": d, "sign": w})
    present = {(1, 2)}
    net: dict = {}
    for a, b, x in rows:
        net[(min(a, b), max(a, b))] = net.get((min(a, b), max(a, b)), 0) + x
    ignored = 0
    for e, x in net.items():
        after = (e in present) + x
        if after in (0, 1):
            present.discard(e) if after == 0 else present.add(e)
        else:
            ignored += sum(1 for a, b, _ in rows if (min(a, b), max(a, b)) == e)
    assert sorted(zip(*[x.tolist() for x in g.edges()])) == sorted(present)
    assert rep.ignored == ignored and (2, 3) not in present


def test_policy_learns_what_a_recompute_batch_costs_beyond_its_recount():
    """Calibrations and loads time the static recount alone; a recompute batch also stores
    its tuples: its measured cost over the recount's estimate sets recompute_factor (an
    average, never below 1), which the estimate then carries."""
    from gpu_ivm.recompute import RECOMPUTE_FACTOR_FIRST, AdaptivePolicy

    pol = AdaptivePolicy()
    pol.observe_recompute(2.0 ** -10, 1 << 12)  # the recount: 2**-22 s per tuple
    assert pol.recompute_sec_per_tuple == 2.0 ** -22
    assert pol.recompute_factor == RECOMPUTE_FACTOR_FIRST == 2.0
    pol.observe_recompute(2.0 ** -8, 1 << 12, whole=True)  # a batch: 4x its recount
    assert pol.recompute_factor == 3.0 and pol.recompute_sec_per_tuple == 2.0 ** -22
    pol.observe_recompute(2.0 ** -12, 1 << 12, whole=True)  # faster than the recount: 1
    assert pol.recompute_factor == 2.0


def test_policy_skips_the_work_estimate_where_deltas_are_far_cheaper():
    """Once 3 delta batches ran, a batch whose deltas at their median time per tuple cost
    under 1/8 of the recount's estimate takes them without the work estimate (units() is
    not called, before or after the batch); a batch near the recount's cost still gets it."""
    from gpu_ivm.recompute import FAR_CHEAPER

    pol, eng, phases = _policy(1 << 10, 2.0 ** -20)  # recount of 2**10 tuples: 2**-10 s
    eng.stale = False
    phases = [(0, np.zeros(64, np.int64))]
    calls = []
    pol.units = lambda engine, ph: calls.append(1) or (1 << 10)
    for _ in range(3):  # 2**-16 s per batch of 64 tuples: 2**-22 s per tuple
        assert pol.choose(eng, phases) == "delta"
        pol.observe_delta(2.0 ** -16, eng, phases)
    assert len(calls) == 3
    assert FAR_CHEAPER * 2.0 ** -16 < 2.0 ** -10
    assert pol.choose(eng, phases) == "delta"
    pol.observe_delta(2.0 ** -16, eng, phases)
    assert len(calls) == 3  # skipped, and observe_delta did not ask either
    big = [(0, np.zeros(1 << 11, np.int64))]  # 2**11 tuples at 2**-22 s: 2**-11 s, near
    pol.choose(eng, big)
    assert len(calls) == 4
