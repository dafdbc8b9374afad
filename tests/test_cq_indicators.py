"""Indicator projections (thesis §4.1.3, digest §2.3): where GYO* puts them, and the views
that hold them, against brute-force definitions after insert/delete batches that take
support counts to 0 and back."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from gpu_ivm.cq import Engine, plan
from gpu_ivm.cq.indicators import gyo_star, indicators
from gpu_ivm.cq.variable_order import VONode

TRIANGLE = "R(A,B), S(B,C), T(C,A)"


def _named(p, ind):
    return {x: [(p.comp.query.atoms[j].relation, z) for j, z in v] for x, v in ind.items()}


def test_gyo_star() -> None:
    # the triangle's cycle is closed by the indicator; a path, a star or a contained edge not
    assert gyo_star([{"B", "C"}, {"C", "A"}], [{"A", "B"}]) == [0]
    assert gyo_star([{"B", "C"}], [{"A", "B"}]) == []
    assert gyo_star([{"A", "B"}, {"A", "C"}], [{"A"}]) == []
    # an indicator equal to an atom goes, the atom stays (nothing is left to close)
    assert gyo_star([{"A", "B"}, {"B", "C"}, {"C", "A"}], [{"A", "B"}]) == []
    # of two indicators closing the same cycle, the equal copies reduce to one
    assert gyo_star([{"B", "C"}, {"C", "A"}], [{"A", "B"}, {"A", "B"}]) == [1]


def test_example_4_6_triangle_order_a_b_c() -> None:
    """Digest Ex. 4.6: over the order A–B–C, I_{A,B}R hangs under C and nowhere else."""
    p = plan(f"Q(B,C | A) = {TRIANGLE}").parts[0]
    order = [VONode("A", [VONode("B", [VONode("C", atoms=[1, 2])], atoms=[0])])]
    assert _named(p, indicators(order, p.comp)) == {"C": [("R", ("A", "B"))]}


def test_planner_records_and_explains_them() -> None:
    p = plan(f"Q(B,C | A) = {TRIANGLE}")
    part = p.parts[0]
    assert _named(part, part.indicators) == {"B": [("T", ("C", "A"))]}
    text = p.explain()
    assert "1 indicator projection(s)" in text and "I_{C,A} T(C,A)" in text
    # hierarchical queries and acyclic cycles-free parts get none
    assert all(not q.indicators for q in plan("Q(A,C | ) = R(A,B), S(B,C)").parts)


def _brute_v_b(db) -> dict:
    """V_B(A,C,B) = R(A,B)·S(B,C)·[some T(C,A)] for the order A–C–B of Q(B,C | A)."""
    out = {}
    for (a, b), r in db["R"].items():
        for (b2, c), s in db["S"].items():
            if b2 == b and r and s and db["T"].get((c, a), 0) > 0:
                out[(a, c, b)] = r * s
    return out


@pytest.mark.parametrize("seed", range(4))
def test_indicator_view_under_batches(seed: int) -> None:
    """The view the indicator hangs under equals its definition after every batch (only the
    (a, b, c) that close a triangle, not every 2-path), and the answers equal the
    nested-loop evaluation; batches delete the last T tuple of some (c, a) and bring it
    back."""
    rng = random.Random(seed)
    dom = range(5)
    db = {r: {(rng.choice(dom), rng.choice(dom)): rng.randint(1, 2) for _ in range(12)}
          for r in "RST"}
    eng = Engine(f"Q(B,C | A) = {TRIANGLE}")

    def tables(rels):
        return {r: {"x": [k[0] for k in d], "y": [k[1] for k in d],
                    "mult": [m for m in d.values()]} for r, d in rels.items()}

    eng.load(**tables(db))
    for _step in range(8):
        want = _brute_v_b(db)
        assert eng.view("B") == want
        triangles = {(a, b, c): db["R"][(a, b)] * db["S"][(b, c)] * db["T"][(c, a)]
                     for a, b, c in itertools.product(dom, repeat=3)
                     if db["R"].get((a, b)) and db["S"].get((b, c)) and db["T"].get((c, a))}
        got = eng.request({"A": list(dom)}).to_pydict()
        assert {(a, b, c): m for a, b, c, m in zip(
            [list(dom)[i] for i in got["request"]], got["B"], got["C"], got["mult"])} == triangles
        # the next batch: remove every T tuple of one (c, a) pair, add others
        live = [k for k, m in db["T"].items() if m > 0]
        batch = {"T": {}, "R": {}}
        if live:
            k = rng.choice(live)
            batch["T"][k] = -db["T"][k]
        for r in ("T", "R"):
            for _ in range(3):
                t = (rng.choice(dom), rng.choice(dom))
                batch[r][t] = batch[r].get(t, 0) + 1
        eng.apply(tables({r: {k: m for k, m in d.items() if m} for r, d in batch.items()}))
        for r, d in batch.items():
            for t, m in d.items():
                db[r][t] = db[r].get(t, 0) + m
        db = {r: {k: m for k, m in d.items() if m} for r, d in db.items()}


def test_indicator_keeps_views_small() -> None:
    """Many 2-paths R(A,B), S(B,C), few triangles: the view under the indicator holds the
    triangles only."""
    n = 60
    a = np.arange(n)
    eng = Engine(f"Q(B,C | A) = {TRIANGLE}")
    # R: every a to hub 0; S: hub 0 to every c; T closes only (c, a) with c == a
    eng.load(R={"x": a, "y": np.zeros(n, np.int64)}, S={"x": np.zeros(n, np.int64), "y": a},
             T={"x": a, "y": a})
    assert len(eng.view("B")) == n  # without the indicator: n·n 2-paths
    assert eng.count() == n
