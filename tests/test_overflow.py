"""The int64 overflow guard: refuses every batch that could overflow, before any change, and
accepts the batches its documented bound (gpu_ivm.overflow) allows. Oracles: Python big-int
recounts of the three-relation query and of the norms, written independently of the engine."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpu_ivm import GraphEngine, IntegerOverflowError, RelationEngine

INT64_MAX = (1 << 63) - 1


def big_count(rels: dict) -> int:
    """Σ R(a,b)·S(b,c)·T(c,a) with Python ints."""
    by_first = defaultdict(list)
    for (b, c), m in rels["S"].items():
        by_first[b].append((c, m))
    total = 0
    for (a, b), r in rels["R"].items():
        for c, s in by_first[b]:
            total += r * s * rels["T"].get((c, a), 0)
    return total


def big_views(rels: dict) -> list[int]:
    """Every entry of Σ_b |K(a,b)|·|Next(b,c)| for the three relation pairs (no partitioning:
    it bounds the entries of every partitioned view)."""
    out = []
    for k, n in (("R", "S"), ("S", "T"), ("T", "R")):
        acc = defaultdict(int)
        for (a, b), x in rels[k].items():
            for (b2, c), y in rels[n].items():
                if b2 == b:
                    acc[a, c] += abs(x) * abs(y)
        out.extend(acc.values())
    return out


def state_of(e: RelationEngine) -> tuple:
    out = []
    for nm in "RST":
        a, b, m = e.relation(nm)
        out.append(sorted(zip(a.tolist(), b.tolist(), m.tolist())))
    return e.count(), tuple(map(tuple, out)), e.batches_applied


def as_dict(e: RelationEngine) -> dict:
    return {nm: {(a, b): m for a, b, m in zip(*(x.tolist() for x in e.relation(nm)))}
            for nm in "RST"}


def _ceil_sqrt(n: int) -> int:
    r = math.isqrt(n)
    return r + (r * r != n)


def guard_bound(rels: dict, batch: dict) -> int:
    """Π_k max(1, ⌈‖K_k‖₂⌉ + ⌈‖δ_k‖₂⌉), the documented acceptance criterion, in big ints."""
    p = 1
    for nm in "RST":
        sq = sum(m * m for m in rels[nm].values())
        dq = sum(m * m for m in batch[nm].values())
        p *= max(1, _ceil_sqrt(sq) + _ceil_sqrt(dq))
    return p


def test_heavy_triangle_does_not_block_unrelated_batches():
    """Multiplicities 40,000 on one triangle (Q = 6.4e13) and a 300-row batch elsewhere: no
    value comes near int64, the batch must be applied (the old guard refused it)."""
    m = 40_000
    e = RelationEngine()
    e.load(R={"src": [1], "dst": [2], "mult": [m]}, S={"src": [2], "dst": [3], "mult": [m]},
           T={"src": [3], "dst": [1], "mult": [m]})
    assert e.count() == m**3
    rows = 300
    batch = {"rel": ["R"] * rows, "src": list(range(100, 100 + rows)),
             "dst": list(range(1000, 1000 + rows)), "mult": [1] * rows}
    rep = e.apply(batch)
    assert rep.triangles == m**3 == e.count()
    assert len(e.relation("R")[0]) == rows + 1
    e.check_invariants()
    # deletes shrink the bound again: repeated insert/delete cycles never start refusing
    for _ in range(50):
        e.apply(batch)
        e.apply({**batch, "mult": [-1] * rows})
    assert e.count() == m**3


def test_recompute_path_does_not_inflate_the_bound():
    """The recompute path used to add each batch's largest delta onto the bound, so
    alternating +m/-m updates of one tuple eventually refused everything."""
    m = 1 << 17
    e = RelationEngine()
    e.policy.force = "recompute"
    e.load(R={"src": [1], "dst": [2], "mult": [m]}, S={"src": [2], "dst": [3], "mult": [m]},
           T={"src": [3], "dst": [1], "mult": [m]})
    for _ in range(200):
        e.apply({"rel": ["R"], "src": [1], "dst": [2], "mult": [m]})
        e.apply({"rel": ["R"], "src": [1], "dst": [2], "mult": [-m]})
    assert e.count() == m**3


def test_real_overflow_is_refused_on_both_paths():
    for force in (None, "recompute", "delta"):
        e = RelationEngine()
        e.policy.force = force
        big = 1 << 21
        e.load(R={"src": [1], "dst": [2], "mult": [big]}, S={"src": [2], "dst": [3],
                                                             "mult": [big]})
        before = state_of(e)
        with pytest.raises(IntegerOverflowError, match="nothing was changed"):
            e.apply({"rel": ["T"], "src": [3], "dst": [1], "mult": [big * 2]})  # Q = 2**64
        assert state_of(e) == before
        # rows of one tuple whose sum wraps around int64 are refused too
        with pytest.raises(IntegerOverflowError):
            e.apply({"rel": ["T", "T", "T"], "src": [7, 7, 7], "dst": [8, 8, 8],
                     "mult": [2**62, 2**62, -5]})
        assert state_of(e) == before


def test_graph_guard_counts_consolidated_updates():
    """A graph batch's bound uses its consolidated updates: a batch that repeats an edge's
    insert and delete many times is no bigger than its net change."""
    g = GraphEngine()
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    rows = 10_000
    g.apply({"src": [5, 5] * rows, "dst": [6, 6] * rows, "sign": [1, -1] * rows})
    assert g.count() == 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), dom=st.sampled_from([1, 3]), mag=st.sampled_from([20, 22, 23]),
       eps=st.sampled_from(["0", "1/2", "1"]),
       force=st.sampled_from([None, "delta", "recompute"]))
def test_guard_is_sound_and_accepts_what_it_documents(data, dom, mag, eps, force):
    """Random multiplicities up to 2**mag on two or four keys (triangle products around
    2**63): every applied batch gives the big-int count, every refused one changes nothing and
    exceeds the documented bound, every real overflow is refused."""
    def rows(m: int, rel=None):
        which = st.sampled_from("RST") if rel is None else rel
        return st.tuples(which, st.integers(0, dom), st.integers(0, dom),
                         st.integers(-(1 << m), 1 << m))

    base = [r for nm in "RST"
            for r in data.draw(st.lists(rows(mag - 1, st.just(nm)), min_size=1, max_size=2))]
    row = rows(mag)
    batches = data.draw(st.lists(st.lists(row, min_size=1, max_size=6), min_size=1,
                                 max_size=4))
    e = RelationEngine(epsilon=eps)
    e.policy.force = force
    cols = {nm: {"src": [], "dst": [], "mult": []} for nm in "RST"}
    for nm, a, b, m in base:
        cols[nm]["src"].append(a)
        cols[nm]["dst"].append(b)
        cols[nm]["mult"].append(m)
    start = {nm: defaultdict(int) for nm in "RST"}
    for nm, a, b, m in base:
        start[nm][a, b] += m
    start_bound = guard_bound({nm: {} for nm in "RST"},
                              {nm: {k: v for k, v in start[nm].items() if v} for nm in "RST"})
    try:
        e.load(**{nm: c if c["src"] else None for nm, c in cols.items()})
    except IntegerOverflowError:
        assert start_bound >= 1 << 59
        event("load refused")
        return
    rels = as_dict(e)
    assert e.count() == big_count(rels)
    for rows in batches:
        delta = {nm: defaultdict(int) for nm in "RST"}
        for nm, a, b, m in rows:
            delta[nm][a, b] += m
        delta = {nm: {k: v for k, v in d.items() if v} for nm, d in delta.items()}
        after = {nm: dict(rels[nm]) for nm in "RST"}
        for nm in "RST":
            for k, v in delta[nm].items():
                after[nm][k] = after[nm].get(k, 0) + v
                if after[nm][k] == 0:
                    del after[nm][k]
        exact_q = big_count(after)
        overflows = (abs(exact_q) > INT64_MAX
                     or any(v > INT64_MAX for v in big_views(after) + big_views(rels)))
        bound = guard_bound(rels, delta)
        before = state_of(e)
        batch = {"rel": [r[0] for r in rows], "src": [r[1] for r in rows],
                 "dst": [r[2] for r in rows], "mult": [r[3] for r in rows]}
        try:
            e.apply(batch)
        except IntegerOverflowError:
            assert state_of(e) == before  # refused before any change
            assert bound >= 1 << 59  # ... and only beyond the documented bound
            event("refused" + (" (real overflow)" if overflows else ""))
            continue
        event("applied")
        assert not overflows  # a real overflow never gets through
        assert bound < 1 << 59
        assert e.count() == exact_q
        rels = as_dict(e)
        assert rels == after
    e.check_invariants()
