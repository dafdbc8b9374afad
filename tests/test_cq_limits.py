"""Limited requests and cursors of the view-tree engine: a page is the first answers after the
request's position, found by a capped, seeking expand (``LsmRel.expand_first``), not by
materializing every answer. Checked against the brute-force oracle (``gpu_ivm.cq.evaluate``)
on views spread over several runs with cancelled keys, for variable orders where the outputs
can be expanded in the answers' order and where they cannot; and the work of a page counted
(``Engine.request_work``) to show it does not grow with the answers before it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpu_ivm.cq import evaluate, parse_query
from gpu_ivm.cq.engine import Engine
from gpu_ivm.cq.lsm import LsmRel
from gpu_ivm.cq.zrel import consolidate

QUERIES = [
    "Q(B | A) = R(A,B)",
    "Q(B,C | A) = R(A,B), S(B,C)",         # a chain in the answers' order
    "Q(C,B | A) = R(A,B), S(B,C)",         # a chain against it: C sorts first
    "Q(B,C | A) = R(A,B), S(A,C)",         # siblings
    "Q(C,B | A) = R(A,B), S(A,C)",
    "Q(C | A) = R(A,B), S(B,C)",           # a bound variable between input and output
    "Q(A,C | ) = R(A,B), S(B,C)",
    "Q(B,D | A) = R(A,B), S(C,D)",         # two components
    "Q(D,B | A) = R(A,B), S(C,D)",
    "Q(A | B) = S(A,B), T(B)",
    "Q(B,C | A) = R(A,B), S(B,C), T(C,A)",  # cyclic: indicator projections
    "Q(B | A) = S(A,B), T(B)",              # the input below the output in the canonical order
    "Q(B,D | A) = R(A,B), S(B,C), T(C,D)",  # not hierarchical, a bound variable inside
    "Q(D,B | A,C) = R(A,B), S(B,C), T(C,D), U(A,D)",
    "Q(A,B,C | ) = R(A,B), S(B,C), T(C,A)",
]


def _table(rel: dict[tuple, int], arity: int) -> dict[str, list[int]]:
    rows = sorted(rel.items())
    t = {f"c{j}": [k[j] for k, _ in rows] for j in range(arity)}
    t["mult"] = [m for _, m in rows]
    return t


def _expected(q, db, reqs) -> list[dict]:
    """The oracle's answers as request() rows, in its order."""
    full = evaluate(q, db)
    rows = []
    for i, r in enumerate(reqs):
        for out, m in sorted(full.get(r, {}).items()):
            rows.append({"request": i, **dict(zip(q.outputs, out)), "mult": m})
    return rows


def _stream(query: str, seed: int, make=Engine):
    """An engine and the oracle's database after a load and batches of inserts and deletes
    (kept in several runs: no compaction happens between small batches), and a request
    list with hub values, absent values and duplicates."""
    rng = random.Random(seed)
    q = parse_query(query)
    hub = 1
    db = {}
    for r, a in q.schemas.items():
        rel: dict[tuple, int] = {}
        for _ in range(rng.randint(20, 60)):
            t = tuple(hub if rng.random() < 0.4 else rng.randint(0, 12) for _ in range(a))
            rel[t] = rel.get(t, 0) + rng.randint(1, 2)
        db[r] = rel
    eng = make(query)
    eng.load(**{r: _table(rel, q.schemas[r]) for r, rel in db.items()})
    for _ in range(4):
        batch = {}
        for r, a in q.schemas.items():
            d: dict[tuple, int] = {}
            for t in rng.sample(sorted(db[r]), min(len(db[r]), rng.randint(0, 6))):
                if db[r][t] > 0:
                    d[t] = -db[r][t]  # whole deletes: keys cancel across runs
            for _ in range(rng.randint(0, 5)):
                t = tuple(hub if rng.random() < 0.4 else rng.randint(0, 12) for _ in range(a))
                d[t] = d.get(t, 0) + 1
            batch[r] = {t: m for t, m in d.items() if m}
        eng.apply({r: _table(d, q.schemas[r]) for r, d in batch.items() if d})
        for r, d in batch.items():
            for t, m in d.items():
                db[r][t] = db[r].get(t, 0) + m
    db = {r: {t: m for t, m in rel.items() if m} for r, rel in db.items()}
    if q.inputs:
        reqs = [tuple(rng.choice([hub, hub, 0, 5, 99]) for _ in q.inputs) for _ in range(7)]
    else:
        reqs = [()]
    return q, eng, db, reqs


def _cols(q, reqs):
    return {v: [r[j] for r in reqs] for j, v in enumerate(q.inputs)} if q.inputs else None


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("seed", range(3))
def test_limit_and_cursor_against_the_oracle(query, seed):
    q, eng, db, reqs = _stream(query, seed)
    want = _expected(q, db, reqs)
    cols = _cols(q, reqs)
    assert eng.request(cols).to_pylist() == want
    for limit in (1, 2, 3, 7):
        first = [r for i in range(len(reqs)) for r in
                 [x for x in want if x["request"] == i][:limit]]
        assert eng.request(cols, limit=limit).to_pylist() == first, limit
        cur = eng.cursor(cols, limit=limit)
        pages = []
        while not cur.done:
            pages.append(cur.next().to_pylist())
        assert cur.next().num_rows == 0
        for p in pages:
            assert p
            per = [sum(1 for x in p if x["request"] == i) for i in range(len(reqs))]
            assert max(per) <= limit
        got = sorted((x for p in pages for x in p), key=lambda x: x["request"])
        assert got == want, limit  # each request's answers in order, each once


TRADEOFF = [
    "Q(C | A) = R(A,B), S(B,C)",
    "Q(C,D | A) = R(A,B), S(B,C), T(B,D)",
    "Q(D,C | A) = R(A,B), S(B,C), T(B,D)",
    "Q(C,E | A) = R(A,B), S(B,C), T(A,D), U(D,E)",
]


@pytest.mark.parametrize("query", TRADEOFF)
@pytest.mark.parametrize("eps", ["0", "1/4", "1/2"])
def test_tradeoff_limit_against_the_oracle(query, eps):
    """The trade-off engine's limited requests: each strategy's engine cuts its rows
    (request and heavy key values) to the limit; the sum of the strategies, cut again, is
    the oracle's first answers."""
    from gpu_ivm.cq.tradeoff import TradeoffEngine

    for seed in range(2):
        q, eng, db, reqs = _stream(query, seed, lambda t: TradeoffEngine(t, epsilon=eps))
        want = _expected(q, db, reqs)
        cols = _cols(q, reqs)
        assert eng.request(cols).to_pylist() == want
        for limit in (1, 2, 5):
            first = [r for i in range(len(reqs)) for r in
                     [x for x in want if x["request"] == i][:limit]]
            assert eng.request(cols, limit=limit).to_pylist() == first, (limit, seed)


def test_tradeoff_limit_expands_little():
    """ε = 0 (every B value heavy): one request over 300 B values with 300 C values each
    (300 distinct answers, each reached 300 times); limit 2 expands at most 2 rows per heavy
    value and output, not the 90,000 (B, C) pairs."""
    from gpu_ivm.cq.tradeoff import TradeoffEngine

    n = 300
    eng = TradeoffEngine("Q(C | A) = R(A,B), S(B,C)", epsilon="0")
    eng.load(R={"a": np.zeros(n, np.int64), "b": np.arange(n)},
             S={"b": np.repeat(np.arange(n), n), "c": np.tile(np.arange(n), n)})
    got = eng.request({"A": [0]}, limit=2).to_pydict()
    assert got == {"request": [0, 0], "C": [0, 1], "mult": [n, n]}
    assert eng.request_work["expanded"] <= 2 * n + n, eng.request_work
    eng.request({"A": [0]})
    assert eng.request_work["expanded"] >= n * n


def test_random_queries_limits_and_cursors():
    """Random queries of every class (the engine suite's generator) on hub streams with
    cancellations: limited requests and cursor pages against the oracle, for the view trees
    and, on hierarchical queries, the trade-off engine at a random ε."""
    from test_cq_engine import random_query

    from gpu_ivm.cq import UnsupportedQueryError
    from gpu_ivm.cq.tradeoff import TradeoffEngine

    rng = random.Random(99)
    for k in range(45):
        query = random_query(rng, ("cqap0", "hierarchical", "cyclic")[k % 3])
        makers = [Engine]
        if k % 3 == 1:
            eps = rng.choice(["0", "1/4", "1/2"])
            makers.append(lambda t, eps=eps: TradeoffEngine(t, epsilon=eps))
        for make in makers:
            try:
                q, eng, db, reqs = _stream(query, k, make)
            except UnsupportedQueryError:
                continue
            want = _expected(q, db, reqs)
            cols = _cols(q, reqs)
            assert eng.request(cols).to_pylist() == want, query
            for limit in (1, 2, 5):
                first = [r for i in range(len(reqs)) for r in
                         [x for x in want if x["request"] == i][:limit]]
                assert eng.request(cols, limit=limit).to_pylist() == first, (query, limit)
                pages = [x for p in eng.cursor(cols, limit=limit) for x in p.to_pylist()]
                assert sorted(pages, key=lambda x: x["request"]) == want, (query, limit)


def _hub_engine(n: int) -> Engine:
    """Q(B,C | A) over a hub A = 0 with n B values, each with 3 C values; split over several
    runs with some keys inserted and deleted again."""
    eng = Engine("Q(B,C | A) = R(A,B), S(B,C)")
    b = np.arange(n)
    eng.load(R={"a": np.zeros(n, np.int64), "b": b},
             S={"b": np.repeat(b, 3), "c": np.tile([7, 8, 9], n)})
    gone = np.arange(0, n, 5)
    eng.apply({"R": {"a": np.zeros(gone.shape[0], np.int64), "b": gone,
                     "mult": -np.ones(gone.shape[0], np.int64)}})
    return eng


def test_a_page_costs_its_own_rows():
    n = 20000
    eng = _hub_engine(n)
    live = np.setdiff1d(np.arange(n), np.arange(0, n, 5))
    got = eng.request({"A": [0]}, limit=4).to_pydict()
    assert got["B"] == [1, 1, 1, 2] and got["C"] == [7, 8, 9, 7]
    small = eng.request_work
    assert small <= 40, small   # expanded rows: not the 48,000 answers
    cur = eng.cursor({"A": [0]}, limit=5)
    seen = []
    work = []
    for _ in range(30):
        p = cur.next().to_pydict()
        seen += list(zip(p["B"], p["C"]))
        work.append(eng.request_work)
    assert seen == [(int(b), c) for b in live[:50] for c in (7, 8, 9)][:150]
    assert max(work) <= 40, work  # the 30th page as cheap as the first
    eng.request({"A": [0]})
    assert eng.request_work >= 3 * live.shape[0]


def test_out_of_order_outputs_stay_exact_and_uncut():
    """Q(C,B | A): C (under B in the tree) sorts first, so the expand cannot cut at B; the
    first answers are still the oracle's."""
    eng = Engine("Q(C,B | A) = R(A,B), S(B,C)")
    eng.load(R={"a": [0, 0, 0], "b": [1, 2, 3]}, S={"b": [1, 2, 3, 3], "c": [9, 8, 1, 9]})
    assert eng.request({"A": [0]}, limit=2).to_pydict() == \
        {"request": [0, 0], "C": [1, 8], "B": [3, 2], "mult": [1, 1]}


def _brute_first(runs, probe, cap, seek, strict):
    total: dict[tuple, int] = {}
    for keys, mult in runs:
        for k, m in zip(keys.tolist(), mult.tolist()):
            total[tuple(k)] = total.get(tuple(k), 0) + m
    rows = sorted(k for k, m in total.items() if m and k[0] == probe)
    if seek is not None:
        rows = [k for k in rows if (k[1] > seek if strict else k[1] >= seek)]
    return rows[:cap]


@pytest.mark.parametrize("seed", range(20))
def test_expand_first_against_brute_force(seed):
    """Runs with keys inserted in one and deleted in a newer one (the capped ranges must
    look past them), random caps and seeks."""
    rng = np.random.default_rng(seed)
    base = consolidate(("A", "B"), np.c_[rng.integers(0, 4, 200), rng.integers(0, 40, 200)],
                       np.ones(200, np.int64))
    v = LsmRel(base)
    runs = [(base.keys, base.mult)]
    total = dict(zip(map(tuple, base.keys.tolist()), base.mult.tolist()))
    for _ in range(3):  # each batch deletes some present keys, inserts new ones
        present = sorted(k for k, m in total.items() if m)  # (v.zrel() would compact)
        pick = [k for k in present if rng.random() < 0.1]
        ins = np.c_[rng.integers(0, 4, 5), rng.integers(40, 80, 5)]
        d = consolidate(("A", "B"), np.r_[np.array(pick).reshape(-1, 2), ins],
                        np.r_[[-total[k] for k in pick], np.ones(5, np.int64)])
        v.merge(d)
        runs.append((d.keys, d.mult))
        for k, m in zip(map(tuple, d.keys.tolist()), d.mult.tolist()):
            total[k] = total.get(k, 0) + m
    left = consolidate(("A",), [[0], [1], [2], [3], [9]], np.ones(5, np.int64))
    cap = rng.integers(1, 40, 5)
    seek = rng.random(5) < 0.5
    seek_value = rng.integers(0, 80, 5)
    for strict in (False, True):
        got = v.expand_first(left, cap, seek, seek_value, strict)
        assert got.vars == ("A", "B")
        want = [k for q in range(5) for k in
                _brute_first(runs, [0, 1, 2, 3, 9][q], cap[q],
                             seek_value[q] if seek[q] else None, strict)]
        assert [tuple(k) for k in got.keys.tolist()] == want
        assert (got.mult == 1).all()
    assert len(v._indexes[("A", "B")].runs) >= 2  # the cancellations sit in separate runs
