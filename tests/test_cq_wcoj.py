"""The worst-case optimal join (gpu_ivm.cq.wcoj) that builds the views of cyclic bags: against
a nested-loop join on random relations with a hub value and multiplicities > 1, its work
bounded where a binary plan's intermediate is quadratic, and the engine's views and answers
with it against the binary plan and the brute-force oracle after load and every batch."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from gpu_ivm.kernels.lex_join import extend_level
from test_cq_engine import FIXED, check, fold, random_batch, random_db, random_query, table

from gpu_ivm.cq import parse_query
from gpu_ivm.cq.engine import Engine
from gpu_ivm.cq.wcoj import generic_join, needs_wcoj
from gpu_ivm.cq.zrel import ZRel, consolidate
from gpu_ivm.errors import IntegerOverflowError


def nested_loop(rels: list[ZRel], order: tuple[str, ...]) -> dict[tuple, int]:
    """The join by nested loops over Python dicts (independent of the kernels)."""
    out: dict[tuple, int] = {(): 1}
    have: tuple[str, ...] = ()
    for r in rels:
        new_have = have + tuple(v for v in r.vars if v not in have)
        nxt: dict[tuple, int] = {}
        for t, m in out.items():
            env = dict(zip(have, t))
            for k, m2 in r.to_dict().items():
                if all(env.get(v, x) == x for v, x in zip(r.vars, k)):
                    e2 = {**env, **dict(zip(r.vars, k))}
                    key = tuple(e2[v] for v in new_have)
                    nxt[key] = nxt.get(key, 0) + m * m2
        out, have = nxt, new_have
    return {tuple(dict(zip(have, t))[v] for v in order): m for t, m in out.items() if m}


def skewed(rng: np.random.Generator, vars: tuple[str, ...], n: int, dom: int) -> ZRel:
    """n random tuples over ``vars``, about a third of them through the hub value 0 in one
    column, multiplicities 1 to 3 (summed where tuples repeat)."""
    keys = rng.integers(0, dom, (n, len(vars)))
    if len(vars):
        hub = rng.random(n) < 0.35
        keys[hub, rng.integers(0, len(vars))] = 0
    return consolidate(vars, keys, rng.integers(1, 4, n))


SHAPES = [
    [("A", "B"), ("B", "C"), ("C", "A")],                    # triangle
    [("A", "B"), ("B", "C"), ("C", "D"), ("D", "A")],        # 4-cycle
    [("A", "B", "C"), ("A", "B"), ("B", "C"), ("C", "A")],   # a ternary edge and a triangle
    [("A", "B"), ("B", "C"), ("C", "A"), ("A",), ("C", "D")],
    [("A", "B", "C"), ("C", "D", "A"), ("B", "D")],
    [("A", "B"), ()],                                        # a nullary relation
    [("B",), ("A", "B"), ("B", "A")],
]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_generic_join_against_nested_loops(shape: int) -> None:
    rng = np.random.default_rng(shape)
    for trial in range(6):
        dom = [3, 5, 12][trial % 3]
        rels = [skewed(rng, vs, int(rng.integers(0, 40)), dom) for vs in SHAPES[shape]]
        variables = tuple(dict.fromkeys(v for vs in SHAPES[shape] for v in vs))
        for order in itertools.islice(itertools.permutations(variables), 0, None, 5):
            stats: dict = {}
            got = generic_join(rels, order, stats)
            assert got.vars == order
            want = nested_loop(rels, order)
            assert got.to_dict() == want
            # sorted, unique, non-zero: a ZRel as consolidate makes it
            assert got.to_dict() == consolidate(order, got.keys, got.mult).to_dict()
            if len(got) > 1:
                assert np.all(np.diff(np.lexsort(got.keys.T[::-1])) == 1)
            assert stats["output"] == len(want)


def test_extend_level_skips_empty_ranges_and_counts_candidates() -> None:
    vals = np.array([4, 4, 6, 8, 4, 8, 9])
    lo = np.array([[0, 3, 2], [4, 5, 6]])
    hi = np.array([[4, 3, 4], [6, 7, 7]])   # the second partial tuple has an empty range
    parent, val, nlo, nhi, n, work = extend_level(vals, lo, hi)
    assert parent[:n].tolist() == [0, 0] and val[:n].tolist() == [4, 8]
    assert nlo[:, :n].tolist() == [[0, 3], [4, 5]] and nhi[:, :n].tolist() == [[2, 4], [5, 6]]
    assert work == 2 + 0 + 1  # [4, 8] for p = 0; nothing for p = 1; [9] for p = 2


def test_generic_join_refuses_int64_overflow() -> None:
    big = 2 ** 40
    r = consolidate(("A", "B"), [[1, 2]], [big])
    s = consolidate(("B", "C"), [[2, 3]], [big])
    t = consolidate(("C", "A"), [[3, 1]], [1])
    with pytest.raises(IntegerOverflowError):
        generic_join([r, s, t], ("A", "B", "C"))
    assert generic_join([r, t, consolidate(("B", "C"), [[2, 3]], [2 ** 20])]).mult.tolist() == [
        2 ** 60]


def test_needs_wcoj() -> None:
    tri = [{"A", "B"}, {"B", "C"}, {"C", "A"}]
    assert needs_wcoj(tri) and needs_wcoj(tri + [{"A"}, {"C", "D"}])
    # acyclic, but R ⋈ S (ρ* = 2) may exceed what the ternary edge bounds (ρ* = 1)
    assert needs_wcoj([{"A", "B", "C"}, {"A", "B"}, {"B", "C"}])
    assert not needs_wcoj([{"A", "B"}, {"B", "C"}, {"C", "D"}])   # a path: ρ* 2 either way
    assert not needs_wcoj([{"A", "B"}, {"A"}, {"B"}])
    assert not needs_wcoj([{"A", "B"}, {"B", "C"}])


def test_work_stays_subquadratic_where_the_binary_plan_is_quadratic() -> None:
    """Each relation a double star through the value 0 ((0, i) and (i, 0) for i < h): every
    binary join of two of R, S, T holds about h² tuples, whichever pair a binary plan starts
    with, while the triangles number O(h). The engine's build of the triangle's view by
    Generic Join visits O(N) candidates (N = 2h - 1 tuples per relation) and no level holds
    more than N partial tuples; the binary plan's intermediate is at least h²."""
    h = 700
    i = np.arange(h)
    star = {"x": np.concatenate([np.zeros(h, np.int64), i[1:]]),
            "y": np.concatenate([i, np.zeros(h - 1, np.int64)])}
    n = 2 * h - 1
    tables = {"R": star, "S": star, "T": star}
    for query in ("Q(B,C | A) = R(A,B), S(B,C), T(C,A)", "Q( | ) = R(A,B), S(B,C), T(C,A)"):
        eng = Engine(query)
        eng.load(**tables)
        st = eng.build_stats
        assert st["wcoj_views"] == 1
        assert st["candidates"] <= 4 * n < n ** 1.5
        assert st["largest_level"] <= max(n, st["output"])  # partial tuples, then the view
        assert st.get("binary_intermediate", 0) <= n
        binary = Engine(query)
        binary._wcoj = set()  # the binary plan that built these views before
        binary.load(**tables)
        assert binary.build_stats["binary_intermediate"] >= h * h
        assert binary.count() == eng.count() == 3 * h - 2  # (0,0,c), (0,b,0), (a,0,0)
        assert _same_views(eng, binary)


def _views(eng: Engine) -> dict:
    return {k: v.zrel().to_dict() for k, v in eng.views.items()}


def _same_views(a: Engine, b: Engine) -> bool:
    """The engines (same query) hold the same views: the nodes are matched by position."""
    def nodes(e):
        return [n for c in e.components for r in c.roots for n in r.walk()]

    ids = dict(zip((id(n) for n in nodes(a)), (id(n) for n in nodes(b))))
    va, vb = _views(a), _views(b)
    return {(k[0], ids.get(k[1], k[1])): v for k, v in va.items()} == vb


def run_compared(query: str, seed: int, batches: int, every_node: bool) -> None:
    """Load and random insert/delete batches: the engine (Generic Join where needs_wcoj
    says, or at ``every_node``) against an engine building by binary joins and against the
    oracle, after the load and after every batch; views rebuilt from the base by each
    engine's own plan are compared too."""
    rng = random.Random(seed)
    q = parse_query(query)
    domain = [0, 1, 2, 3]
    db = random_db(rng, q.schemas, domain, rng.randint(0, 10))
    eng, ref = Engine(query), Engine(query)
    ref._wcoj = set()
    if every_node:
        eng._wcoj = {id(n) for c in eng.components for r in c.roots for n in r.walk()}
    tables = {r: table(rel, q.schemas[r]) if rel else
              {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []} for r, rel in db.items()}
    eng.load(**tables)
    ref.load(**tables)
    assert _same_views(eng, ref)
    check(eng, query, db, domain)
    for _ in range(batches):
        batch = random_batch(rng, db, q.schemas, domain)
        b = {r: table(d, q.schemas[r]) if d else
             {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []} for r, d in batch.items()}
        eng.apply(b)
        ref.apply(b)
        fold(db, batch)
        assert _same_views(eng, ref)
        check(eng, query, db, domain)
        # the views the current base gives when built afresh (Generic Join at the load)
        fresh = Engine(query)
        if every_node:
            fresh._wcoj = {id(n) for c in fresh.components for r in c.roots for n in r.walk()}
        fresh.load(**{r: table({t: m for t, m in rel.items() if m}, q.schemas[r]) if any(
            rel.values()) else {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []}
            for r, rel in db.items()})
        assert _same_views(fresh, ref)


CYCLIC = [q for q in FIXED if Engine(q)._wcoj] + [
    "Q(A,C | B,D) = R(A,B), S(B,C), T(C,D), U(A,D)",
    "Q(A,B,C | ) = R(A,B,C), S(A,B), T(B,C), U(C,A)",
]


@pytest.mark.parametrize("query", CYCLIC)
def test_cyclic_queries_views_and_answers(query: str) -> None:
    for seed in range(2):
        run_compared(query, seed, batches=4, every_node=False)


def test_random_queries_with_generic_join_at_every_node() -> None:
    """Generic Join at every node of random queries of every kind (self-joins, repeated
    variables, indicator projections): the same views as the binary plan's, the oracle's
    answers."""
    rng = random.Random(17)
    for k in range(24):
        query = random_query(rng, ("cqap0", "hierarchical", "cyclic")[k % 3])
        run_compared(query, seed=k, batches=3, every_node=True)
