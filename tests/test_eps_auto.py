"""``epsilon="auto"``: exact on every stream shape, and the heavy/light regime it picks.

Oracles: the triangle count of the current edge set by SciPy sparse algebra (tr(A³)/6), the
edge set replayed in a Python set; the expected ε recomputed from the degree sequence with
Python integers only (no gpu_ivm code).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm.workloads import celebrity_churn, mixed_stream
from tests.conftest import EPSILONS
from tests.oracle import RelationsOracle


def scipy_triangles(edges: set) -> int:
    if not edges:
        return 0
    a = np.array(sorted(edges), dtype=np.int64)
    n = int(a.max()) + 1
    m = sp.coo_matrix((np.ones(len(a)), (a[:, 0], a[:, 1])), shape=(n, n)).tocsr()
    m = m + m.T
    return int(round((m @ m).multiply(m).sum())) // 6


def replay(edges: set, batch: dict) -> None:
    for u, v, s in zip(batch["src"].tolist(), batch["dst"].tolist(), batch["sign"].tolist(),
                       strict=True):
        e = (min(u, v), max(u, v))
        (edges.add if s > 0 else edges.remove)(e)


def ceil_power(n: int, eps: Fraction) -> int:
    """Smallest integer t with t >= n**eps (bisection on t**q >= n**p)."""
    lo, hi = 0, n + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if mid**eps.denominator >= n**eps.numerator:
            hi = mid
        else:
            lo = mid + 1
    return lo


def expected_epsilon(n: int, degrees: list[int]) -> Fraction:
    """The documented rule (docs/design.md, "Choosing ε"), from scratch: the largest k/24 whose
    heavy count and second-largest light degree are both <= 4·⌈√N⌉."""
    bound = 4 * ceil_power(n, Fraction(1, 2))
    degs = sorted((d for d in degrees if d > 0), reverse=True)
    for k in range(24, 11, -1):
        theta = ceil_power(n, Fraction(k, 24))
        heavy = [d for d in degs if d >= theta]
        light = [d for d in degs if d < theta]
        if max(len(heavy), light[1] if len(light) > 1 else 0) <= bound:
            return Fraction(k, 24)
    return Fraction(1, 2)


def degrees_of(src, dst) -> dict[int, int]:
    ids, counts = np.unique(np.concatenate([src, dst]), return_counts=True)
    return dict(zip(ids.tolist(), counts.tolist(), strict=True))


def small_churn(seed: int = 1, n_batches: int = 5):
    # few R-MAT edges, celebrities of degree ~1000 > 4·√N: the heavy regime
    return celebrity_churn(10, edge_factor=2, n_celebrities=12, celebrity_degree=1000,
                           batch_size=30, n_batches=n_batches, seed=seed)


def small_uniform():
    return mixed_stream(9, batch_size=300, n_batches=5, seed=3)


@pytest.mark.parametrize("shape", ["uniform", "celebrity"])
def test_auto_is_exact_like_every_fixed_epsilon(shape):
    st = small_uniform() if shape == "uniform" else small_churn()
    batches = list(st.batches())
    edges = set(zip(np.minimum(st.base_src, st.base_dst).tolist(),
                    np.maximum(st.base_src, st.base_dst).tolist(), strict=True))
    expect = [scipy_triangles(edges)]
    for b in batches:
        replay(edges, b)
        expect.append(scipy_triangles(edges))
    chosen = None
    for eps in ["auto", *EPSILONS]:
        g = GraphEngine(epsilon=eps)
        got = [g.load((st.base_src, st.base_dst)).triangles]
        chosen = g.epsilon if eps == "auto" else chosen
        got += [g.apply(b).triangles for b in batches]
        assert got == expect, f"epsilon={eps}"
        g.check_invariants()
    assert chosen == (1 if shape == "uniform" else chosen)  # uniform R-MAT: all light


def test_auto_picks_heavy_celebrities_on_churn():
    st = small_churn()
    deg = degrees_of(st.base_src, st.base_dst)
    n = 2 * 2 * st.n_base + 1  # N = 2|D| + 1, |D| = both directions of every edge
    eps = expected_epsilon(n, list(deg.values()))
    assert eps < 1
    theta = ceil_power(n, eps)
    expected_heavy = {v for v, d in deg.items() if d >= theta}
    assert expected_heavy == set(st.celebrities.tolist())  # exactly the celebrities
    g = GraphEngine()
    g.load((st.base_src, st.base_dst))
    assert g.N == n and g.epsilon_auto and g.epsilon == eps
    heavy_ids = np.flatnonzero(g.rels[0].heavy)
    assert set(g.encoder.decode(heavy_ids).tolist()) == expected_heavy


def test_auto_picks_all_light_on_uniform_rmat():
    st = mixed_stream(11, batch_size=10, n_batches=1, seed=1)
    deg = sorted(degrees_of(st.base_src, st.base_dst).values(), reverse=True)
    n = 2 * 2 * st.n_base + 1
    assert deg[1] <= 4 * ceil_power(n, Fraction(1, 2))  # R-MAT's hubs are not far above √N
    g = GraphEngine()
    g.load((st.base_src, st.base_dst))
    assert g.epsilon == expected_epsilon(n, deg) == 1
    assert not g.rels[0].heavy.any()


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
def test_auto_revises_epsilon_at_major_rebalancing():
    """Load the R-MAT part only (all light), then insert the celebrities' edges in batches:
    the major rebalancings the growth causes choose ε again and make the celebrities heavy."""
    st = small_churn(n_batches=0)
    cel = st.celebrities
    is_fan = np.isin(st.base_dst, cel) | np.isin(st.base_src, cel)
    g = GraphEngine(adaptive=False)  # the delta path every batch, so rebuilds are major ones
    g.load((st.base_src[~is_fan], st.base_dst[~is_fan]))
    assert g.epsilon == 1
    edges = set(zip(st.base_src[~is_fan].tolist(), st.base_dst[~is_fan].tolist(), strict=True))
    order = np.random.default_rng(0).permutation(int(is_fan.sum()))  # celebrities grow alike
    fs, fd = st.base_src[is_fan][order], st.base_dst[is_fan][order]
    for lo in range(0, fs.shape[0], 1500):
        b = {"src": fs[lo:lo + 1500], "dst": fd[lo:lo + 1500],
             "sign": np.ones(fs[lo:lo + 1500].shape[0], np.int64)}
        assert g.apply(b).triangles == (replay(edges, b) or scipy_triangles(edges))
    assert g._stats["major"] > 0 and g.epsilon < 1
    # a vertex of degree >= ⌈3/2·N^ε⌉ is heavy; the celebrities are far above that
    eps = g.epsilon
    up = min(t for t in range(1, g.N + 1)
             if (2 * t) ** eps.denominator >= 3 ** eps.denominator * g.N ** eps.numerator)
    deg = degrees_of(st.base_src, st.base_dst)
    assert all(deg[c] >= up for c in cel.tolist())
    heavy = set(g.encoder.decode(np.flatnonzero(g.rels[0].heavy)).tolist())
    assert set(cel.tolist()) <= heavy
    g.check_invariants()


def test_snapshot_keeps_the_chosen_epsilon_and_auto(tmp_path):
    st = small_churn()
    batches = list(st.batches())
    g = GraphEngine()
    g.load((st.base_src, st.base_dst))
    g.apply(batches[0])
    g.snapshot(tmp_path / "s")
    h = GraphEngine.restore(tmp_path / "s")
    assert h.epsilon == g.epsilon < 1 and h.epsilon_auto
    n = len(g.encoder)  # flags of the ids in use; capacity beyond them is headroom
    assert len(h.encoder) == n
    assert np.array_equal(h.rels[0].heavy[:n], g.rels[0].heavy[:n])
    assert not h.rels[0].heavy[n:].any() and not g.rels[0].heavy[n:].any()
    for b in batches[1:]:
        assert h.apply(b).triangles == g.apply(b).triangles
    f = GraphEngine(epsilon="1/3")
    f.load((st.base_src, st.base_dst))
    f.snapshot(tmp_path / "f")
    r = GraphEngine.restore(tmp_path / "f")
    assert r.epsilon == Fraction(1, 3) and not r.epsilon_auto


def test_relation_engine_auto_is_exact():
    rng = np.random.default_rng(7)
    oracle = RelationsOracle()
    e = RelationEngine()  # auto on every relation
    fixed = RelationEngine(epsilon="1/2")
    for _ in range(4):
        m = 400
        rel = np.array(["R", "S", "T"])[rng.integers(0, 3, m)]
        src = np.where(rng.random(m) < 0.3, 0, rng.integers(0, 40, m))  # one hub key
        dst = rng.integers(0, 40, m)
        mult = rng.integers(-2, 3, m)
        batch = {"rel": rel, "src": src, "dst": dst, "mult": mult}
        for r_, a, b, k in zip(rel.tolist(), src.tolist(), dst.tolist(), mult.tolist(),
                               strict=True):
            oracle.add(r_, a, b, k)
        assert e.apply(batch).triangles == fixed.apply(batch).triangles == oracle.count()
    e.check_invariants()
    assert e.epsilon_auto and all(isinstance(x, Fraction) for x in e.epsilons)


def test_choice_reads_only_the_deciding_degrees():
    """``choose_epsilon`` reads the degrees at or above ε = 1/2's cut-off and the two largest
    below it, not a sort of every key: on random, skewed, tied and tiny degree arrays it
    picks what the rule picks from all the degrees sorted (each candidate's modelled work by
    ``worst_case_work``, the largest within ``work_bound``), and each candidate's modelled
    work comes out the same from the deciding degrees as from all of them."""
    from gpu_ivm.eps_policy import (
        CANDIDATES,
        _deciding_degrees,
        _work,
        choose_epsilon,
        work_bound,
        worst_case_work,
    )
    from gpu_ivm.rational import Thresholds

    def by_the_rule(n, deg, symmetric):
        for eps in CANDIDATES:
            if worst_case_work(n, eps, deg, symmetric) <= work_bound(n):
                return eps
        return Fraction(1, 2)

    rng = np.random.default_rng(23)
    cases = [np.zeros(5, np.int64), np.array([3]), np.array([0, 7, 0]), np.array([9, 9]),
             np.array([4, 4, 4])]
    for _ in range(300):
        size = int(rng.integers(1, 400))
        n = int(rng.integers(3, 200_000))
        half = Thresholds.of(n, Fraction(1, 2)).strict
        deg = rng.integers(0, max(half, 2), size)  # mostly below √N
        k = int(rng.integers(0, 6))  # and a few hubs, some exactly at a candidate's cut-off
        hubs = rng.integers(half, 40 * half + 2, k)
        if k and rng.random() < 0.5:
            hubs[0] = Thresholds.of(n, CANDIDATES[int(rng.integers(0, 13))]).strict
        deg[rng.integers(0, size, k)] = hubs
        cases.append((n, deg))
    for case in cases:
        n, deg = case if isinstance(case, tuple) else (101, case)
        deciding = _deciding_degrees(n, deg)
        for symmetric in (True, False):
            assert choose_epsilon(n, deg, symmetric) == by_the_rule(n, deg, symmetric), \
                (n, symmetric, np.sort(deg)[-6:])
            for eps in CANDIDATES:  # and every candidate's modelled work is the same number
                assert _work(n, eps, deciding, symmetric) == \
                    worst_case_work(n, eps, deg, symmetric), (n, eps, symmetric)
