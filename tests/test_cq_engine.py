"""The batched view-tree engine against the brute-force evaluator and the digest's examples.

Random hierarchical queries (2-paths, stars, access patterns, self-joins, repeated variables)
under random insert/delete streams of Z-relations; after every batch count() and every access
request are compared with gpu_ivm.cq.oracle (nested loops, independent code).
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pyarrow as pa
import pytest
from cq_examples import FOUR_CYCLE, O2, O2_AFTER_DELETE, O2_Q1, O3, O4, O5, RST, TRIANGLE

from gpu_ivm.cq import evaluate, parse_query, plan, total
from gpu_ivm.cq.engine import Engine, UnsupportedQueryError
from gpu_ivm.errors import InputError, IntegerOverflowError


def table(rel: dict[tuple, int], arity: int, mult: bool = True) -> dict[str, list[int]]:
    rows = list(rel.items())
    if not mult:  # repeat each tuple m times; the engine sums duplicates
        rows = [(k, 1) for k, m in rows for _ in range(m)]
    t = {f"c{j}": [k[j] for k, _ in rows] for j in range(arity)}
    if mult:
        t["mult"] = [m for _, m in rows]
    return t


def answers(eng: Engine, query, reqs: list[tuple]) -> dict[tuple, dict[tuple, int]]:
    q = parse_query(query)
    cols = {v: [r[j] for r in reqs] for j, v in enumerate(q.inputs)}
    out = eng.request(cols if q.inputs else None).to_pydict()
    got: dict[tuple, dict[tuple, int]] = {}
    for i in range(len(out["request"])):
        req = reqs[out["request"][i]]
        got.setdefault(req, {})[tuple(out[v][i] for v in q.outputs)] = out["mult"][i]
    return got


def check(eng: Engine, query: str, db, domain) -> None:
    q = parse_query(query)
    expect = evaluate(q, db)
    assert eng.count() == total(q, db)
    if len(q.inputs) <= 2:
        reqs = list(itertools.product(domain + [99], repeat=len(q.inputs)))
    else:
        reqs = sorted(expect) + [(99,) * len(q.inputs)]
    got = answers(eng, q, reqs)
    want = {r: expect[r] for r in reqs if r in expect}
    assert got == want
    check_request_options(eng, q, reqs, expect)


def check_request_options(eng: Engine, q, reqs: list[tuple], expect) -> None:
    """count(requests) and exists(requests) against the oracle's answers; the pages of a
    cursor (limit 1 to 3) against the whole answer, in the order of request()."""
    cols = {v: [r[j] for r in reqs] for j, v in enumerate(q.inputs)} if q.inputs else None
    n = len(reqs) if q.inputs else 1
    keys = reqs if q.inputs else [()]
    if q.inputs:
        counts = eng.count(cols).to_pydict()
        assert counts["request"] == list(range(n))
        assert counts["count"] == [sum(expect.get(r, {}).values()) for r in keys]
    ex = eng.exists(cols).to_pydict()
    assert ex["exists"] == [bool(expect.get(r)) for r in keys]
    full = eng.request(cols).to_pylist()
    limit = 1 + len(full) % 3
    pages = [p.to_pylist() for p in eng.cursor(cols, limit=limit)]

    def order(x):
        return x["request"], tuple(x[v] for v in q.outputs)

    assert full == sorted(full, key=order)
    for p in pages:
        assert p == sorted(p, key=order)
    for i in range(n):  # each request's answers, page after page, are its whole answer
        assert [x for p in pages for x in p if x["request"] == i] == \
            [x for x in full if x["request"] == i]
    per = [max((sum(1 for x in p if x["request"] == i) for p in pages), default=0)
           for i in range(n)]
    assert max(per, default=0) <= limit
    longest = max((sum(1 for x in full if x["request"] == i) for i in range(n)), default=0)
    assert len(pages) == -(-longest // limit)
    assert eng.request(cols, limit=limit).to_pylist() == (pages[0] if pages else [])


FIXED = [
    "Q(A,C | ) = R(A,B), S(B,C)",
    "Q(A,B,C | ) = R(A,B), S(B,C)",
    "Q( | ) = R(A,B), S(B,C)",
    "Q(B,C | A) = R(A,B), S(A,C)",
    "Q(B,C,D | A) = R(A,B), S(A,C), T(A,D)",
    "Q(A | ) = R(A,B), S(A,C), T(A,D)",
    "Q(B | A) = S(A,B), T(B)",
    "Q(A | B) = S(A,B), T(B)",
    "Q(C | A) = R(A,B), S(B,C)",
    "Q(B,D | A,C) = R(A,B), S(B,C), T(C,D), U(A,D)",
    f"Q(C,D | E) = {RST}",
    f"Q(B,C,D,E | A) = {RST}",
    f"Q(E,D | A,C) = {RST}",
    f"Q( | A,B,C) = {TRIANGLE}",
    f"Q( | A,B) = {TRIANGLE}",
    "Q(B | A) = E(A,B), E(B,C)",
    "Q(A,B | ) = E(A,B), E(A,C), F(A,A)",
    "Q(A | ) = R(A,B), Z()",
    # non-hierarchical: view trees with the indicator projections GYO* keeps
    f"Q(B,C | A) = {TRIANGLE}",
    f"Q( | ) = {TRIANGLE}",
    f"Q(A,B,C | ) = {TRIANGLE}",
    f"Q(C | A,B) = {TRIANGLE}",
    "Q(A,D | ) = R(A,B), S(B,C), T(C,D)",
    "Q( | ) = R(A,B), S(B,C), T(C,D), U(D,A)",
    "Q(A,C | ) = E(A,B), E(B,C), E(C,A)",
]


def random_query(rng: random.Random, kind: str) -> str:
    """kind: 'cqap0', 'hierarchical' (δ > 0) or 'cyclic' (non-hierarchical fracture)."""
    while True:
        nvars = rng.randint(1, 4)
        vs = [chr(ord("A") + i) for i in range(nvars)]
        atoms = []
        for k in range(rng.randint(1, 4)):
            rel = f"R{rng.randint(0, k)}"        # sometimes a self-join
            arity = rng.randint(1, min(3, nvars))
            atoms.append((rel, tuple(rng.choice(vs) for _ in range(arity))))
        arities: dict[str, int] = {}
        if any(arities.setdefault(r, len(a)) != len(a) for r, a in atoms):
            continue
        used = sorted({v for _, a in atoms for v in a})
        roles = {v: rng.choice("iob") for v in used}
        text = (f"Q({','.join(v for v in used if roles[v] == 'o')} | "
                f"{','.join(v for v in used if roles[v] == 'i')}) = "
                + ", ".join(f"{r}({','.join(a)})" for r, a in atoms))
        p = plan(text)
        got = ("cyclic" if p.w is None else "cqap0" if p.delta == 0 else "hierarchical")
        if got == kind:
            return text


def random_db(rng, schemas, domain, n):
    return {r: {tuple(rng.choice(domain) for _ in range(a)): rng.randint(1, 2)
                for _ in range(n)} for r, a in schemas.items()}


def random_batch(rng, db, schemas, domain):
    batch = {}
    for r in rng.sample(sorted(schemas), rng.randint(1, len(schemas))):
        a = schemas[r]
        delta: dict[tuple, int] = {}
        for _ in range(rng.randint(0, 5)):
            t = tuple(rng.choice(domain) for _ in range(a))
            delta[t] = delta.get(t, 0) + rng.randint(1, 2)
        present = [t for t, m in db[r].items() if m > 0]
        for t in rng.sample(present, min(len(present), rng.randint(0, 4))):
            delta[t] = delta.get(t, 0) - rng.randint(1, db[r][t])
        batch[r] = delta
    return batch


def fold(db, batch) -> None:
    """Apply ``batch`` (relation -> {tuple: multiplicity change}) to the oracle's ``db``."""
    for r, d in batch.items():
        for t, m in d.items():
            db[r][t] = db[r].get(t, 0) + m


def run_stream(query: str, seed: int, batches: int = 6) -> None:
    rng = random.Random(seed)
    q = parse_query(query)
    domain = [0, 1, 2, 3]
    db = random_db(rng, q.schemas, domain, rng.randint(0, 8))
    eng = Engine(query)
    eng.load(**{r: table(rel, q.schemas[r], mult=rng.random() < 0.5 or q.schemas[r] == 0)
                if rel else {f"c{j}": [] for j in range(q.schemas[r])}
                for r, rel in db.items()})
    check(eng, query, db, domain)
    for _ in range(batches):
        batch = random_batch(rng, db, q.schemas, domain)
        eng.apply({r: table(d, q.schemas[r]) if d else
                   {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []}
                   for r, d in batch.items()})
        fold(db, batch)
        check(eng, query, db, domain)


@pytest.mark.parametrize("query", FIXED)
def test_fixed_queries_random_streams(query):
    for seed in range(3):
        run_stream(query, seed)


def test_random_queries_random_streams():
    rng = random.Random(2026)
    for k in range(60):
        run_stream(random_query(rng, ("cqap0", "hierarchical", "cyclic")[k % 3]), seed=k,
                   batches=4)


def test_o2_views_and_answers():
    q = f"Q(B,C,D,E | A) = {RST}"
    eng = Engine(q)
    eng.load(**{r: table(rel, len(next(iter(rel)))) for r, rel in O2.items()})
    assert eng.view("C", 0, marginal=True) == {(1, 1): 3, (1, 2): 1, (2, 1): 1}
    assert eng.view("D", 0, marginal=True) == {(1, 1): 1, (1, 2): 3, (2, 1): 1}
    assert eng.view("B", 0) == {(1, 1): 3, (1, 2): 3, (2, 1): 1}
    assert eng.view("A", 0) == {(1,): 6, (2,): 1}
    assert eng.view("A", 1) == {(1,): 3, (3,): 1}
    assert answers(eng, q, [(1,), (2,), (3,)]) == {(1,): O2_Q1}
    eng.apply({"S": {"c0": [1], "c1": [1], "c2": [5], "mult": [-1]}})
    assert answers(eng, q, [(1,)]) == {(1,): O2_AFTER_DELETE}
    eng.apply({"T": {"c0": [2], "c1": [4], "mult": [1]}})
    assert answers(eng, q, [(2,)]) == {(2,): {(1, 1, 5, 4): 1}}


def test_o3_triangle_lookup_and_o4_o5():
    look = f"Q( | A,B,C) = {TRIANGLE}"
    eng = Engine(look)
    eng.load(**{r: table(rel, 2) for r, rel in O3.items()})
    assert eng.count() == 8
    assert answers(eng, look, [(1, 2, 3), (1, 2, 1), (2, 1, 1)]) == {
        (1, 2, 3): {(): 1}, (1, 2, 1): {(): 1}}
    eng.apply({"S": {"c0": [2], "c1": [3], "mult": [-1]}})
    assert eng.count() == 7
    eng.apply({"S": {"c0": [3], "c1": [3], "mult": [1]}})
    assert eng.count() == 8 and answers(eng, look, [(1, 3, 3)]) == {(1, 3, 3): {(): 1}}
    q4 = "Q(B | A) = R(A,B), S(B)"
    e4 = Engine(q4)
    e4.load(**{r: table(rel, len(next(iter(rel)))) for r, rel in O4.items()})
    assert answers(e4, q4, [(1,), (2,), (3,)]) == {(1,): {(10,): 1}, (2,): {(10,): 1},
                                                   (3,): {(12,): 2}}
    e4.apply({"S": {"c0": [11], "mult": [1]}})
    assert answers(e4, q4, [(1,)]) == {(1,): {(10,): 1, (11,): 1}}
    e5 = Engine(FOUR_CYCLE)
    e5.load(**{r: table(rel, 2) for r, rel in O5.items()})
    assert answers(e5, FOUR_CYCLE, [(10, 20), (10, 21), (11, 20), (11, 21)]) == {
        (10, 20): {(1, 5): 1, (1, 6): 2}, (10, 21): {(2, 5): 1}, (11, 20): {(1, 5): 1}}


def test_refusals_leave_state_untouched():
    q = "Q(C | A) = R(A,B), S(B,C)"
    eng = Engine(q, relations={"R": ["src", "dst"], "S": ["src", "dst"]})
    eng.load(R=pa.table({"src": [1, 1], "dst": [2, 3]}), S={"src": [2], "dst": [7]})
    before = (eng.count(), answers(eng, q, [(1,)]))
    bad = [
        {"R": {"src": [1], "dst": [2], "mult": [-2]}},                 # below zero
        {"R": {"src": [1], "dst": [2]}},                               # no mult
        {"R": {"src": [1.5], "dst": [2], "mult": [1]}},                # float
        {"R": {"src": [1], "mult": [1]}},                              # missing column
        {"X": {"src": [1], "dst": [2], "mult": [1]}},                  # unknown relation
        {"S": {"src": [2], "dst": [8], "mult": [1]},
         "R": pa.table({"src": [1, None], "dst": [2, 2], "mult": [1, 1]})},  # null, 2nd rel
    ]
    for b in bad:
        with pytest.raises(InputError):
            eng.apply(b)
        assert (eng.count(), answers(eng, q, [(1,)])) == before
    with pytest.raises(InputError):
        eng.load(R={"src": [1], "dst": [2], "mult": [-1]})
    assert (eng.count(), answers(eng, q, [(1,)])) == before
    with pytest.raises(InputError):
        eng.request({"B": [1]})
    with pytest.raises(InputError):
        Engine(q, relations={"R": ["a"]})
    with pytest.raises(UnsupportedQueryError):    # a 7-cycle: no VO search above 6 variables
        Engine("Q( | ) = R(A,B), S(B,C), T(C,D), U(D,E), V(E,F), W(F,G), X(G,A)")


def test_int64_overflow_is_refused():
    q = "Q( | ) = R(A), S(A)"
    eng = Engine(q)
    big = 2 ** 62
    eng.load(R={"a": [1], "mult": [big]}, S={"a": [1], "mult": [1]})
    assert eng.count() == big
    with pytest.raises(IntegerOverflowError):
        eng.apply({"S": {"a": [1], "mult": [3]}})
    assert eng.count() == big


def test_request_table_types():
    q = "Q(B | A) = R(A,B)"
    eng = Engine(q)
    eng.load(R={"a": np.array([5, 5, 6], dtype=np.int32), "b": [1, 2, 3]})
    out = eng.request(pa.table({"A": pa.array([6, 5, 6], pa.int16())}))
    assert out.column_names == ["request", "B", "mult"]
    assert out.to_pydict() == {"request": [0, 1, 1, 2], "B": [3, 1, 2, 3], "mult": [1] * 4}


@pytest.mark.parametrize("query", ["Q(B,C | A) = R(A,B), S(A,C)", "Q(C | A) = R(A,B), S(B,C)",
                                   "Q(A | ) = R(A,B), S(B)"])
def test_larger_relations_small_batches(query):
    """Batches much smaller than the views: small runs next to a large one, lookups in both."""
    run_checked(random.Random(11), query, list(range(25)), 300, 5)


def run_checked(rng, query: str, domain: list, size: int, batches: int, make=Engine):
    """Load ``size`` random tuples per relation, then apply random insert/delete batches,
    comparing with the oracle after the load and after every batch; returns the engine
    (``make(query)``)."""
    q = parse_query(query)
    db = random_db(rng, q.schemas, domain, size)
    eng = make(query)
    eng.load(**{r: table(rel, q.schemas[r]) for r, rel in db.items()})
    check(eng, query, db, domain)
    for _ in range(batches):
        batch = random_batch(rng, db, q.schemas, domain)
        eng.apply({r: table(d, q.schemas[r]) for r, d in batch.items() if d})
        fold(db, batch)
        check(eng, query, db, domain)
    return eng


def test_cursor_refuses_a_changed_state_and_bad_limits():
    eng = Engine("Q(B | A) = R(A,B)")
    eng.load(R={"a": [1, 1, 1], "b": [4, 5, 6]})
    cur = eng.cursor({"A": [1]}, limit=2)
    assert cur.next().to_pydict()["B"] == [4, 5]
    eng.apply({"R": {"a": [1], "b": [3], "mult": [1]}})
    with pytest.raises(InputError, match="open a new cursor"):
        cur.next()
    assert [p.to_pydict()["B"] for p in eng.cursor({"A": [1]}, limit=2)] == [[3, 4], [5, 6]]
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InputError, match="limit must be a positive integer"):
            eng.request({"A": [1]}, limit=bad)
    assert eng.count({"A": [1, 2]}).to_pydict() == {"request": [0, 1], "count": [4, 0]}


@pytest.mark.parametrize("query", ["Q(C | A) = R(A,B), S(B,C)", f"Q(B,C | A) = {TRIANGLE}",
                                   "Q(A,B | ) = E(A,B), E(A,C), F(A,A)"])
def test_snapshot_restore_continues_exactly(tmp_path, query):
    """A restored engine answers as the one saved and goes on identically (oracle after every
    batch); a damaged relation file or manifest is refused naming the file."""
    from gpu_ivm.snapshot import SnapshotError

    rng = random.Random(3)
    q = parse_query(query)
    domain = [0, 1, 2, 3]
    db = random_db(rng, q.schemas, domain, 6)
    eng = Engine(query)
    eng.load(**{r: table(rel, q.schemas[r]) if rel else
                {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []}
                for r, rel in db.items()})
    eng.snapshot(tmp_path / "s", metadata={"note": 1})
    back = Engine.restore(tmp_path / "s")
    assert back.batches_applied == 0 and str(back.query) == str(eng.query)
    check(back, query, db, domain)
    for _ in range(4):
        batch = random_batch(rng, db, q.schemas, domain)
        for e in (eng, back):
            e.apply({r: table(d, q.schemas[r]) if d else
                     {**{f"c{j}": [] for j in range(q.schemas[r])}, "mult": []}
                     for r, d in batch.items()})
        fold(db, batch)
        check(back, query, db, domain)
    back.snapshot(tmp_path / "s2")
    again = Engine.restore(tmp_path / "s2")
    assert again.batches_applied == 4 and again.count() == eng.count()
    name = next(p for p in sorted((tmp_path / "s2").iterdir()) if p.name.startswith("rel-"))
    data = bytearray(name.read_bytes())
    data[-20] ^= 0xFF
    name.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match=name.name):
        Engine.restore(tmp_path / "s2")
