"""The brute-force CQAP evaluator against the digest's worked examples (published figures)."""

from __future__ import annotations

import copy

from cq_examples import FOUR_CYCLE, O1, O2, O2_AFTER_DELETE, O2_Q1, O3, O4, O5, RST, TRIANGLE

from gpu_ivm.cq import access, evaluate, total


def test_o1_two_path():
    assert evaluate("Q(A,C | ) = R(A,B), S(B,C)", O1) == {(): {("a1", "c1"): 6}}
    db = copy.deepcopy(O1)
    db["R"][("a1", "b2")] += 3
    assert evaluate("Q(A,C | ) = R(A,B), S(B,C)", db) == {(): {("a1", "c1"): 12}}


def test_o2_cqap0_and_other_patterns():
    q = f"Q(B,C,D,E | A) = {RST}"
    assert access(q, O2, (1,)) == O2_Q1
    assert sum(O2_Q1.values()) == 18
    assert access(q, O2, (2,)) == {} and access(q, O2, (3,)) == {}
    assert access(f"Q(C,D | E) = {RST}", O2, (7,)) == {(1, 5): 1, (1, 6): 3, (2, 5): 2}
    assert access(f"Q(C,D | E) = {RST}", O2, (8,)) == {(1, 5): 2, (1, 6): 6, (2, 5): 4}
    assert access(f"Q(E,D | A,C) = {RST}", O2, (1, 1)) == {
        (7, 5): 1, (7, 6): 3, (8, 5): 2, (8, 6): 6}
    db = copy.deepcopy(O2)
    db["S"][(1, 1, 5)] -= 1
    assert access(q, db, (1,)) == O2_AFTER_DELETE
    db["T"][(2, 4)] = 1
    assert access(q, db, (2,)) == {(1, 1, 5, 4): 1}


def test_o3_triangle():
    assert evaluate(f"Q(A,B,C | ) = {TRIANGLE}", O3)[()] == {
        (1, 2, 1): 1, (1, 2, 3): 1, (1, 2, 4): 1, (1, 3, 1): 1, (1, 3, 4): 1, (2, 3, 1): 1,
        (4, 2, 4): 2}
    assert total(f"Q( | ) = {TRIANGLE}", O3) == 8
    bc = f"Q(B,C | A) = {TRIANGLE}"
    assert access(bc, O3, (1,)) == {(2, 1): 1, (2, 3): 1, (2, 4): 1, (3, 1): 1, (3, 4): 1}
    assert access(bc, O3, (2,)) == {(3, 1): 1} and access(bc, O3, (4,)) == {(2, 4): 2}
    assert evaluate(f"Q(A | ) = {TRIANGLE}", O3)[()] == {(1,): 5, (2,): 1, (4,): 2}
    look = f"Q( | A,B,C) = {TRIANGLE}"
    assert access(look, O3, (1, 2, 3)) == {(): 1} and access(look, O3, (2, 1, 1)) == {}
    db = copy.deepcopy(O3)
    del db["S"][(2, 3)]
    assert total(f"Q( | ) = {TRIANGLE}", db) == 7
    db["S"][(3, 3)] = 1
    assert total(f"Q( | ) = {TRIANGLE}", db) == 8
    assert access(look, db, (1, 3, 3)) == {(): 1}


def test_o4_and_o5():
    q = "Q(B | A) = R(A,B), S(B)"
    assert [access(q, O4, (a,)) for a in (1, 2, 3)] == [{(10,): 1}, {(10,): 1}, {(12,): 2}]
    assert evaluate("Q(A | ) = R(A,B), S(B)", O4)[()] == {(1,): 1, (2,): 1, (3,): 2}
    assert access(q, {**O4, "S": {**O4["S"], (11,): 1}}, (1,)) == {(10,): 1, (11,): 1}
    assert access(FOUR_CYCLE, O5, (10, 20)) == {(1, 5): 1, (1, 6): 2}
    assert access(FOUR_CYCLE, O5, (10, 21)) == {(2, 5): 1}
    assert access(FOUR_CYCLE, O5, (11, 20)) == {(1, 5): 1}
    assert access(FOUR_CYCLE, O5, (11, 21)) == {}
