"""The three-relation form against a brute-force oracle, and the digests' worked examples."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EPSILONS, tiny_storage
from hypothesis import given
from hypothesis import strategies as st
from oracle import RelationsOracle

from gpu_ivm import RelationEngine

FACTORIZED = [{"R": 0, "S": 0, "T": 1}, {"R": 1, "S": 0, "T": 1}, {"R": "1/3", "S": "1/2",
                                                                   "T": "2/3"}]


def rows(rel, a, b, m):
    return {"rel": list(rel), "src": list(a), "dst": list(b), "mult": list(m)}


@pytest.mark.parametrize("eps", EPSILONS + FACTORIZED, ids=str)
@given(seed=st.integers(0, 2**32 - 1), nv=st.integers(2, 30), max_batch=st.integers(1, 60),
       hub_p=st.floats(0, 0.95), base=st.integers(0, 40), max_m=st.integers(1, 4),
       shrink=st.booleans(), tiny=st.booleans())
def test_random_z_streams(eps, seed, nv, max_batch, hub_p, base, max_m, shrink, tiny):
    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            tiny_storage(mp)
        _random_z_stream(eps, seed, nv, max_batch, hub_p, base, max_m, shrink)


def _random_z_stream(eps, seed, nv, max_batch, hub_p, base, max_m, shrink):
    rng = np.random.default_rng(seed)
    o = RelationsOracle()
    e = RelationEngine(epsilon=eps)
    init = {}
    for r in "RST":
        a, b = rng.integers(0, nv, base), rng.integers(0, nv, base)
        m = rng.integers(-max_m, max_m + 1, base)
        init[r] = {"src": a, "dst": b, "mult": m}
        for x, y, z in zip(a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
    e.load(**init)
    assert e.count() == o.count()
    e.check_invariants()
    for i in range(12):
        n = int(rng.integers(1, max_batch + 1))
        rel = rng.choice(list("RST"), n)
        if shrink and i >= 6:  # delete existing tuples to shrink |D| and force halving
            items = [(r, k, v) for r in "RST" for k, v in o.rels[r].items()]
            pick = rng.integers(0, max(len(items), 1), n) if items else []
            batch = rows([items[j][0] for j in pick], [items[j][1][0] for j in pick],
                         [items[j][1][1] for j in pick], [-items[j][2] for j in pick])
            seen = set()
            keep = [j for j in range(len(batch["rel"]))
                    if (batch["rel"][j], batch["src"][j], batch["dst"][j]) not in seen
                    and not seen.add((batch["rel"][j], batch["src"][j], batch["dst"][j]))]
            batch = {k: [v[j] for j in keep] for k, v in batch.items()}
        else:
            a = rng.integers(0, nv + 3, n)
            a[rng.random(n) < hub_p] = 0  # one hub key (self-loops happen too)
            b = rng.integers(0, nv + 3, n)
            m = rng.integers(-max_m, max_m + 1, n)
            batch = rows(rel, a.tolist(), b.tolist(), m.tolist())
        if not batch["rel"]:
            continue
        rep = e.apply(batch)
        for r, x, y, z in zip(batch["rel"], batch["src"], batch["dst"], batch["mult"]):
            o.add(r, x, y, z)
        assert e.count() == o.count() == rep.triangles
        assert e.recount() == e.count()
        assert e.size == sum(len(d) for d in o.rels.values())
        e.check_invariants()


def test_skew_forces_minor_moves_both_ways():
    rng = np.random.default_rng(5)
    o = RelationsOracle()
    e = RelationEngine(epsilon="1/2")
    for i in range(60):
        n = 40
        rel = rng.choice(list("RST"), n)
        a = rng.integers(0, 200, n)
        a[: n // 2] = rng.integers(0, 2)  # two hub keys per relation
        b = rng.integers(0, 200, n)
        sign = 1 if i < 35 else -1
        if sign < 0:
            items = [(r, k) for r in "RST" for k in o.rels[r]]
            idx = rng.choice(len(items), min(n, len(items)), replace=False)
            batch = rows([items[j][0] for j in idx], [items[j][1][0] for j in idx],
                         [items[j][1][1] for j in idx], [-o.rels[items[j][0]][items[j][1]]
                                                         for j in idx])
        else:
            batch = rows(rel, a.tolist(), b.tolist(), [1] * n)
        e.apply(batch)
        for r, x, y, z in zip(batch["rel"], batch["src"], batch["dst"], batch["mult"]):
            o.add(r, x, y, z)
        assert e.count() == o.count()
        e.check_invariants()
    assert e._stats["to_heavy"] >= 1 and e._stats["to_light"] >= 1
    assert e._stats["major"] >= 2


@pytest.mark.parametrize("force", ["delta", "recompute", "alternate"])
def test_adaptive_paths_agree(force):
    rng = np.random.default_rng(2)
    o = RelationsOracle()
    e = RelationEngine()
    for i in range(6):
        want = force if force != "alternate" else ("recompute" if i % 2 else "delta")
        e.policy.force = want
        n = 300
        rel, a, b = rng.choice(list("RST"), n), rng.integers(0, 25, n), rng.integers(0, 25, n)
        m = rng.integers(-2, 3, n)
        e.apply(rows(rel, a.tolist(), b.tolist(), m.tolist()))
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert e.count() == o.count()
        assert e.last_report.path == want
        if i % 3 == 2:
            e.check_invariants()


def test_digest_9_3_single_updates():
    """Digest §9.3 (ε = ½): initial DB of 16 tuples, N = 33, then five updates."""
    S = [("b1", f"c{i}") for i in range(1, 7)] + [("b2", "c1"), ("b2", "c2")]
    T = [("c1", f"a{i}") for i in range(1, 7)] + [("c2", "a1")]
    R = [("a2", "b1")]

    def cols(pairs):
        return {"src": [p[0] for p in pairs], "dst": [p[1] for p in pairs]}

    e = RelationEngine(epsilon="1/2")
    e.load(R=cols(R), S=cols(S), T=cols(T))
    assert e.N == 33 and e.count() == 1
    enc = e.encoder

    def heavy(k):
        ids = np.flatnonzero(e.rels[k].heavy[: len(enc)])
        return sorted(enc.decode(ids).tolist())

    assert heavy(0) == [] and heavy(1) == ["b1"] and heavy(2) == ["c1"]

    def view(k):
        keys, vals = e.views[k].items()
        return {(enc.decode(np.array([kk >> 32]))[0], enc.decode(np.array([kk & 0xFFFFFFFF]))[0]):
                int(v) for kk, v in zip(keys.tolist(), vals.tolist())}

    assert view(0) == {} and view(1) == {("b1", "a1"): 1} and view(2) == {("c1", "b1"): 1}
    steps = [("R", "a1", "b1", 3), ("R", "a1", "b2", 5), ("R", "a3", "b3", 5),
             ("S", "b3", "c1", 6), ("T", "c2", "a2", 7)]
    for i, (r, x, y, q) in enumerate(steps):
        e.apply(rows([r], [x], [y], [1]))
        assert e.count() == q
        assert e.size == 17 + i and e.N == 33
    assert view(2)[("c1", "b1")] == 2 and view(2)[("c1", "b2")] == 1
    assert view(2)[("c1", "b3")] == 1 and view(1)[("b1", "a2")] == 1
    e.check_invariants()


def test_digest_9_4_trace():
    """Digest §9.4: the OnUpdate trace from an empty DB (ε = ½), one update per batch."""
    trace = [  # update, N after, Q after, heavy keys after
        ("R", "a1", "b1", 1, 2, 0, []), ("S", "b1", "c1", 1, 4, 0, []),
        ("T", "c1", "a1", 1, 4, 1, []), ("R", "a1", "b2", 1, 8, 1, []),
        ("S", "b2", "c1", 1, 8, 2, []), ("R", "a1", "b3", 2, 8, 2, []),
        ("S", "b3", "c1", 1, 8, 4, []), ("R", "a1", "b4", 1, 16, 4, ["a1"]),
        ("T", "c1", "a1", 1, 16, 8, ["a1"]), ("T", "c1", "a2", 1, 16, 8, ["a1"]),
        ("R", "a1", "b4", -1, 16, 8, ["a1"]), ("R", "a1", "b3", -2, 16, 4, ["a1"]),
        ("R", "a1", "b2", -1, 16, 2, []), ("T", "c1", "a3", 1, 16, 2, []),
        ("T", "c1", "a4", 1, 16, 2, []), ("T", "c1", "a5", 1, 16, 2, []),
        ("T", "c1", "a6", 1, 16, 2, ["c1"]), ("T", "c1", "a6", -1, 16, 2, ["c1"]),
        ("T", "c1", "a5", -1, 16, 2, ["c1"]), ("T", "c1", "a4", -1, 16, 2, ["c1"]),
        ("T", "c1", "a3", -1, 16, 2, ["c1"]), ("T", "c1", "a2", -1, 16, 2, []),
        ("S", "b2", "c1", -1, 16, 2, []), ("S", "b3", "c1", -1, 7, 2, []),
    ]
    e = RelationEngine(epsilon="1/2")
    for i, (r, x, y, m, n_after, q_after, heavy_after) in enumerate(trace, 1):
        e.apply(rows([r], [x], [y], [m]))
        assert (e.N, e.count()) == (n_after, q_after), f"row {i}"
        heavy = sorted(e.encoder.decode(np.flatnonzero(np.any(
            [K.heavy[: len(e.encoder)] for K in e.rels], axis=0))).tolist())
        assert heavy == heavy_after, f"row {i}"
        e.check_invariants()
        if i == 8:
            keys, vals = e.views[0].items()
            assert vals.tolist() == [4]  # V_RS(a1, c1) = 4
        if i == 17:
            keys, vals = e.views[2].items()
            assert vals.tolist() == [2]  # V_TR(c1, b1) = 2
    assert [len(K) for K in e.rels] == [1, 1, 1]
    assert e.relation("T")[2].tolist() == [2]


def test_self_loops_and_repeats():
    """Digest §9.2 with three copies: R = S = T = {(x,x)}: Q = 1, then 8 after a repeat."""
    e = RelationEngine()
    e.apply(rows("RST", ["x"] * 3, ["x"] * 3, [1, 1, 1]))
    assert e.count() == 1
    e.apply(rows("RST", ["x"] * 3, ["x"] * 3, [1, 1, 1]))
    assert e.count() == 8


def test_batch_cross_terms_non_self_join():
    """Digest §9.5: old T(c,a) = 1 and a batch {+R(a,b), +S(b,c)} gives δQ = 1."""
    e = RelationEngine()
    e.load(T={"src": ["c"], "dst": ["a"]})
    rep = e.apply(rows("RS", ["a", "b"], ["b", "c"], [1, 1]))
    assert rep.delta == 1 and e.count() == 1


def test_view_budget_error_names_the_view_and_the_epsilons(monkeypatch):
    """The README's per-relation ε (R, S: 0, T: 1) makes V_ST = S_h·T_l the whole product
    S·T; past the memory budget the error says so and which ε to change. Oracle: the number
    of paths b→c→a of S·T counted with NumPy."""
    from gpu_ivm import ResourceLimitError
    from gpu_ivm.workloads import rmat_edges

    s, d = rmat_edges(10, 8, seed=3)
    rel = {"src": s, "dst": d}
    deg_in = np.bincount(d, minlength=1 << 10)
    deg_out = np.bincount(s, minlength=1 << 10)
    paths = int(deg_in @ deg_out)  # Σ_c S(·, c) in-degree × T(c, ·) out-degree
    monkeypatch.setenv("GPU_IVM_MEMORY_LIMIT", str(16 * paths - 1))
    e = RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})
    with pytest.raises(ResourceLimitError) as ei:
        e.load(R=rel, S=rel, T=rel)
    msg = str(ei.value)
    assert "V_ST = S_h·T_l" in msg and f"{paths:,} paths" in msg
    assert "raise ε_S" in msg and "lower ε_T" in msg
    assert "ε_S = 0 makes every key of S heavy" in msg and "ε_T = 1 every key of T light" in msg
    monkeypatch.setenv("GPU_IVM_MEMORY_LIMIT", str(16 * paths))
    e = RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})
    e.load(R=rel, S=rel, T=rel)  # exactly enough: it loads
    import scipy.sparse as sps

    a = sps.csr_matrix((np.ones(s.shape[0], np.int64), (s, d)), shape=(1 << 10, 1 << 10))
    assert len(e.views[1]) == (a @ a).nnz  # V_ST is the whole product S·T
