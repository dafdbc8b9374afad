"""The triangle strategy beyond the count (issue 17): every head over the triangle body
(per-value counts Δ1, per-pair counts Δ2, the listing Δ3 and their access patterns) runs on
TriangleQueryEngine over RelationEngine, checked after the load and every batch of random
insert/delete streams against the brute-force oracle (gpu_ivm.cq.oracle, nested loops) and
against the view-tree Engine on the same query and stream (answers, count, exists, limits
and cursor pages, compared table for table)."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cq_engine import check, fold, random_batch, random_db, table
from test_cq_triangle_strategy import _random_stream

from gpu_ivm.cq import Engine, TriangleQueryEngine, engine, evaluate, parse_query, total
from gpu_ivm.cq.triangle_strategy import (
    is_triangle_query,
    prefers_triangle_engine,
    triangle_mapping,
    triangle_roles,
)
from gpu_ivm.errors import InputError

# heads "outputs|inputs" over the variables A, B, C: every pattern, several orders
HEADS = ["A|", "B|", "C|", "|A", "|C",
         "A,B|", "B,A|", "C,A|", "|A,B", "|C,B",
         "B|A", "A|C", "C|B",
         "A,B,C|", "C,A,B|", "B,C|A", "C,B|A", "A,C|B", "C|A,B", "A|C,B",
         "|A,B,C", "|C,A,B"]
# renamings, atom orders, argument orders, self-joins (all over A, B, C)
BODIES = ["R(A,B), S(B,C), T(C,A)",
          "T(C,A), R(A,B), S(C,B)",      # permuted atoms, S transposed
          "S(B,C), T(A,C), R(B,A)",      # two atoms transposed
          "E(A,B), E(B,C), E(C,A)",      # self-join
          "E(B,C), E(A,C), E(B,A)",      # self-join, permuted and transposed
          "E(A,B), E(B,C), F(A,C)"]      # two atoms on one relation


def query(head: str, body: str) -> str:
    out, inp = head.split("|")
    return f"Q({out} | {inp}) = {body}"


def random_requests(rng: random.Random, q, domain: list, k: int = 12):
    """A request table with repeated and unknown values (None without inputs)."""
    if not q.inputs:
        return None
    return {v: [rng.choice(domain + [99]) for _ in range(k)] for v in q.inputs}


def same_as_view_trees(tri, view, q, rng: random.Random, domain: list) -> None:
    """Every answer surface of ``tri`` equals the view-tree engine's, table for table."""
    assert tri.count() == view.count()
    for reqs in (random_requests(rng, q, domain), random_requests(rng, q, domain, 0)):
        if reqs is None and q.inputs:
            continue
        assert tri.request(reqs).equals(view.request(reqs))
        if reqs is not None:
            assert tri.count(reqs).equals(view.count(reqs))
        assert tri.exists(reqs).equals(view.exists(reqs))
        for limit in (1, 2, 5):
            assert tri.request(reqs, limit=limit).equals(view.request(reqs, limit=limit))
            pages = list(tri.cursor(reqs, limit=limit))
            want = list(view.cursor(reqs, limit=limit))
            assert len(pages) == len(want)
            assert all(p.equals(w) for p, w in zip(pages, want))


def run_both(q: str, seed: int, batches: int = 4, size: int = 8,
             domain: list | None = None) -> TriangleQueryEngine:
    """A random stream applied to the factory's engine and the view trees, each state checked
    against the oracle (:func:`test_cq_engine.check`: count, requests over the domain,
    count/exists per request, cursor pages) and against the view trees."""
    rng = random.Random(seed)
    pq_ = parse_query(q)
    domain = domain or [0, 1, 2, 3]
    db = random_db(rng, pq_.schemas, domain, size)
    tri = TriangleQueryEngine(q)
    view = engine(q, strategy="view_trees")
    assert type(tri) is TriangleQueryEngine and type(view) is Engine
    for e in (tri, view):
        e.load(**{r: table(rel, 2) for r, rel in db.items()})
    check(tri, q, db, domain)
    same_as_view_trees(tri, view, pq_, rng, domain)
    for _ in range(batches):
        batch = random_batch(rng, db, pq_.schemas, domain)
        for e in (tri, view):
            e.apply({r: table(d, 2) for r, d in batch.items() if d})
        fold(db, batch)
        check(tri, q, db, domain)
        same_as_view_trees(tri, view, pq_, rng, domain)
    return tri


@pytest.mark.parametrize("head", HEADS)
def test_patterns_against_oracle_and_view_trees(head: str) -> None:
    for k, body in enumerate(BODIES):
        for seed in range(2):
            run_both(query(head, body), seed=100 * k + seed)


@pytest.mark.parametrize("head", ["A|", "|B", "B,C|", "|C,A", "C|A", "B,C,A|", "C,B|A",
                                  "B|C,A", "|B,C,A"])
@pytest.mark.parametrize("body", ["T(Z,X), R(X,Y), S(Z,Y)", "E(A,B), E(B,C), E(C,A)"])
def test_larger_streams_with_multiplicities(head: str, body: str) -> None:
    """Multiplicities above 1, deletes down to zero and below the inserted copies, more
    values: every state after the load and 8 batches against the oracle's answers and the
    view trees."""
    body = body if "E(" in body else body.replace("X", "A").replace("Y", "B").replace("Z", "C")
    q = query(head, body)
    pq_ = parse_query(q)
    first, batches, dbs = _random_stream(q, seed=len(head) + 7 * len(body))
    tri, view = TriangleQueryEngine(q), Engine(q)
    assert type(tri) is TriangleQueryEngine
    rng = random.Random(3)
    counts = set()
    for k, db in enumerate(dbs):
        if k == 0:
            tri.load(**first)
            view.load(**first)
        else:
            tri.apply(batches[k - 1])
            view.apply(batches[k - 1])
        expect = evaluate(q, db)
        assert tri.count() == total(q, db)
        counts.add(tri.count())
        reqs = sorted(expect) + [(99,) * len(pq_.inputs)] if pq_.inputs else [()]
        cols = ({v: [r[j] for r in reqs] for j, v in enumerate(pq_.inputs)}
                if pq_.inputs else None)
        got = tri.request(cols).to_pydict()
        answers: dict = {}
        for i, r in enumerate(got["request"]):
            answers.setdefault(reqs[r], {})[tuple(got[v][i] for v in pq_.outputs)] = \
                got["mult"][i]
        assert answers == {r: expect[r] for r in reqs if r in expect}
        same_as_view_trees(tri, view, pq_, rng, list(range(7)))
    assert len(counts) > 1  # the stream moves the answers


def test_roles_and_mapping() -> None:
    # the free variables play a, b, c (inputs first), every atom on its slot
    assert triangle_roles("Q(A | ) = R(A,B), S(B,C), T(C,A)") == ("A", "B", "C")
    assert triangle_roles("Q(C | ) = R(A,B), S(B,C), T(C,A)") == ("C", "A", "B")
    assert triangle_mapping("Q(C | ) = R(A,B), S(B,C), T(C,A)") == \
        [("T", False), ("R", False), ("S", False)]
    assert triangle_roles("Q(B,A | ) = R(A,B), S(B,C), T(C,A)") == ("B", "A", "C")
    assert triangle_mapping("Q(B,A | ) = R(A,B), S(B,C), T(C,A)") == \
        [("R", True), ("T", True), ("S", True)]
    assert triangle_roles("Q(A,C | B) = R(A,B), S(B,C), T(C,A)") == ("B", "A", "C")
    # the count keeps the first atom's orientation
    assert triangle_roles("Q( | ) = T(Z,X), R(X,Y), S(Z,Y)") == ("Z", "X", "Y")
    # a directed 3-cycle: E is not read as symmetric, per value or per pair
    for head, want in (("A|", {(1,): 1, (2,): 1, (3,): 1}),
                       ("B,A|", {(2, 1): 1, (3, 2): 1, (1, 3): 1})):
        eng = TriangleQueryEngine(query(head, "E(A,B), E(B,C), E(C,A)"))
        eng.load(E={"a": [1, 2, 3], "b": [2, 3, 1]})
        got = eng.request().to_pydict()
        assert dict(zip(zip(*(got[v] for v in head.split("|")[0].split(","))),
                        got["mult"])) == want
        eng = engine(query(head, "E(A,B), E(C,B), E(C,A)"))  # not a cycle in E
        eng.load(E={"a": [1, 2, 3], "b": [2, 3, 1]})
        assert eng.count() == 0 and eng.request().num_rows == 0


@pytest.mark.parametrize("q", [
    "Q(A | ) = R(A,B), S(B,C), T(C,D), U(D,A)",   # 4-cycle
    "Q(A | B) = R(A,B), S(B,C), T(C,A), U(A)",    # a fourth atom
    "Q(A | ) = R(A,B,C), S(B,C), T(C,A)",         # a ternary atom
    "Q(A,B | ) = R(A,B), S(B,C), T(A,B)",         # not a triangle
    "Q(C | A) = R(A,A), S(A,C), T(C,A)",          # a repeated variable
    "Q(B | A) = R(A,B), S(B,C)",                  # a path
])
def test_other_queries_are_unaffected(q: str) -> None:
    assert not is_triangle_query(q) and triangle_mapping(q) is None
    assert type(engine(q)) is Engine
    with pytest.raises(InputError, match="not a triangle query"):
        TriangleQueryEngine(q)


@pytest.mark.parametrize("head", HEADS)
def test_factory_choice(head: str) -> None:
    q = query(head, "E(B,C), E(A,C), E(B,A)")
    assert is_triangle_query(q)
    outputs, inputs = head.split("|")
    # no outputs and two or three inputs: the view trees are cheaper (measured;
    # prefers_triangle_engine)
    lookup_only = not outputs.strip() and len(inputs.split(",")) >= 2
    want = Engine if lookup_only else TriangleQueryEngine
    assert prefers_triangle_engine(q) is (want is TriangleQueryEngine)
    assert type(engine(q)) is want
    assert type(engine(q, strategy="view_trees")) is Engine
    assert type(engine(q, strategy="view-trees")) is Engine
    assert type(Engine(q)) is Engine


@pytest.mark.parametrize("head", ["B|", "|A", "C,A|", "|A,C", "C|B", "A,B,C|", "C,B|A",
                                  "B|C,A", "|A,B,C"])
def test_snapshot_round_trips_with_the_view_trees(tmp_path, head: str) -> None:
    q = query(head, "T(C,A), R(A,B), S(C,B)")
    pq_ = parse_query(q)
    first, batches, dbs = _random_stream(q, 11, 4)
    tri, view = TriangleQueryEngine(q), Engine(q)
    for e in (tri, view):
        e.load(**first)
        for b in batches[:2]:
            e.apply(b)
    rng = random.Random(1)
    tri.snapshot(tmp_path / "tri")
    view.snapshot(tmp_path / "view")
    from_tri = Engine.restore(tmp_path / "tri")        # the view trees read the triangle's
    from_view = TriangleQueryEngine.restore(tmp_path / "view")   # and the other way round
    assert type(from_tri) is Engine and type(from_view) is TriangleQueryEngine
    assert from_tri.batches_applied == from_view.batches_applied == 2
    same_as_view_trees(from_view, from_tri, pq_, rng, list(range(7)))
    same_as_view_trees(tri, from_tri, pq_, rng, list(range(7)))
    for b, db in zip(batches[2:], dbs[3:]):  # both go on identically
        from_tri.apply(b)
        from_view.apply(b)
        assert from_view.count() == from_tri.count() == total(q, db)
        same_as_view_trees(from_view, from_tri, pq_, rng, list(range(7)))
    back = TriangleQueryEngine.restore(tmp_path / "tri")  # its own
    same_as_view_trees(back, view, pq_, rng, list(range(7)))


def test_errors_match_engine() -> None:
    q = "Q(B | A) = R(A,B), S(B,C), T(C,A)"
    tri, view = TriangleQueryEngine(q), Engine(q)
    tables = dict(R={"a": [1, 1], "b": [2, 4]}, S={"b": [2, 4], "c": [3, 3]},
                  T={"c": [3], "a": [1], "mult": [2]})
    tri.load(**tables)
    view.load(**tables)
    bad_calls = [lambda e: e.request(),                         # inputs needed
                 lambda e: e.request({"B": [1]}),                # missing input column
                 lambda e: e.request({"A": ["x"]}),              # not integers
                 lambda e: e.request({"A": [1]}, limit=0),       # bad limit
                 lambda e: e.count({"C": [1]}),
                 lambda e: e.exists(None),
                 lambda e: e.apply({"R": {"a": [1], "b": [2], "mult": [-2]}}),  # below zero
                 lambda e: e.apply({"U": {"a": [1], "b": [2], "mult": [1]}})]
    for call in bad_calls:
        with pytest.raises(InputError) as got:
            call(tri)
        with pytest.raises(InputError) as want:
            call(view)
        assert str(got.value) == str(want.value)
    assert tri.request({"A": [1]}).equals(view.request({"A": [1]}))
    assert tri.request({"A": [1]}).to_pydict() == \
        {"request": [0, 0], "B": [2, 4], "mult": [2, 2]}
    cur = tri.cursor({"A": [1]}, limit=1)
    tri.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})  # the last copy: allowed
    with pytest.raises(InputError, match="open a new cursor"):
        cur.next()
    assert tri.request({"A": [1]}).to_pydict() == {"request": [0], "B": [4], "mult": [2]}


@pytest.mark.parametrize("head", ["A|", "|A,B", "B,C|A"])
def test_modes(head: str) -> None:
    q = query(head, "R(A,B), S(B,C), T(C,A)")
    tables = dict(R={"a": [1], "b": [2]}, S={"b": [2], "c": [3]}, T={"c": [3], "a": [1]})
    io, view = TriangleQueryEngine(q, mode="insert_only"), Engine(q, mode="insert_only")
    io.load(**tables)
    view.load(**tables)
    with pytest.raises(InputError, match="insert_only") as got:
        io.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    with pytest.raises(InputError) as want:
        view.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    assert str(got.value) == str(want.value) and io.count() == 1
    auto, view = TriangleQueryEngine(q, mode="auto"), Engine(q, mode="auto")
    for e in (auto, view):
        e.load(**tables)
        e.apply({"R": {"a": [1], "b": [2], "mult": [1]}})
        assert e.insert_only_active
        e.apply({"R": {"a": [1], "b": [2], "mult": [-1]}, "S": {"b": [2], "c": [3],
                                                             "mult": [2]}})
        assert not e.insert_only_active and e.switched_at == 2
    reqs = {v: [1, 2] for v in parse_query(q).inputs} or None
    assert auto.request(reqs).equals(view.request(reqs)) and auto.count() == 3


def test_explain_names_the_pattern() -> None:
    text = engine("Q(C,B | A) = R(A,B), S(B,C), T(C,A)").explain()
    assert "triangle engine (IVM^eps" in text and "inputs (A) and outputs (C, B)" in text
    assert "maintain: triangles" in text and "triangles_of" in text
    assert "roles: a <- A, b <- C, c <- B" in text
    text = TriangleQueryEngine("Q(C | A,B) = R(A,B), S(B,C), T(C,A)").explain()
    assert "maintain: the count only" in text and "smaller of S(b,.) and T(.,a)" in text
    assert "maintain: vertex_counts" in engine("Q( | B) = E(A,B), E(B,C), E(C,A)").explain()
    assert "maintain: edge_counts" in engine("Q(A,B | ) = R(A,B), S(B,C), T(C,A)").explain()


def _write(path, rel: dict[tuple, int]) -> None:
    pq.write_table(pa.table({"x": pa.array([k[0] for k in rel], pa.int64()),
                             "y": pa.array([k[1] for k in rel], pa.int64()),
                             "mult": pa.array(list(rel.values()), pa.int64())}), path)


@pytest.mark.parametrize("q", ["Q(B,C | A) = E(A,B), E(B,C), E(C,A)",
                               "Q(A | ) = E(A,B), E(B,C), E(C,A)"])
def test_cli_picks_the_triangle_strategy(tmp_path, capsys, monkeypatch, q: str) -> None:
    """``gpu-ivm query`` runs a triangle pattern on TriangleQueryEngine (and the view trees
    with --strategy view-trees); the answers files of both equal the oracle's, and
    --resume reads the other strategy's snapshots."""
    from gpu_ivm.cli import main

    made = []
    real_load = TriangleQueryEngine.load

    def load(self, **tables):
        made.append(type(self))
        return real_load(self, **tables)

    monkeypatch.setattr(TriangleQueryEngine, "load", load)
    rng = random.Random(4)
    pq_ = parse_query(q)
    domain = [0, 1, 2, 3]
    db = random_db(rng, pq_.schemas, domain, 10)
    rel = tmp_path / "rel"
    rel.mkdir()
    _write(rel / "E.parquet", db["E"])
    bdir = tmp_path / "batches"
    dbs = [{r: dict(v) for r, v in db.items()}]
    for k in range(1, 4):
        batch = random_batch(rng, db, pq_.schemas, domain)
        (bdir / f"b{k}").mkdir(parents=True)
        _write(bdir / f"b{k}" / "E.parquet", batch.get("E", {}))
        for t, m in batch.get("E", {}).items():
            db["E"][t] = db["E"].get(t, 0) + m
        dbs.append({r: dict(v) for r, v in db.items()})
    reqs = [(0,), (1,), (2,), (3,), (1,), (99,)] if pq_.inputs else []
    req_file = tmp_path / "req.parquet"
    pq.write_table(pa.table({"A": pa.array([r[0] for r in reqs], pa.int64())}) if reqs
                   else pa.table({"x": pa.array([0], pa.int64())}), req_file)
    answers = {}
    for strategy in ("auto", "view-trees"):
        made.clear()
        out = tmp_path / f"out-{strategy}"
        rc = main(["query", q, "--relations", str(rel), "--batches", str(bdir), "--json",
                   "--strategy", strategy, "--requests", str(req_file), "--out", str(out),
                   "--snapshot-dir", str(tmp_path / f"snap-{strategy}")])
        assert rc == 0
        assert made == ([TriangleQueryEngine] if strategy == "auto" else [])
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [x["count"] for x in lines] == [total(q, d) for d in dbs]
        answers[strategy] = [pq.read_table(out / f"answers-{k:06d}.parquet")
                             for k in range(len(dbs))]
        for t, d in zip(answers[strategy], dbs):
            expect = evaluate(q, d)
            got = {}
            for row in t.to_pylist():
                key = reqs[row["request"]] if reqs else ()
                got.setdefault(key, {})[tuple(row[v] for v in pq_.outputs)] = row["mult"]
            keys = reqs if reqs else [()]
            assert got == {r: expect[r] for r in keys if r in expect}
    assert all(a.equals(b) for a, b in zip(answers["auto"], answers["view-trees"]))
    # --resume across strategies: the triangle strategy resumes from the view trees' snapshots
    made.clear()
    rc = main(["query", q, "--relations", str(rel), "--batches", str(bdir), "--json",
               "--resume", str(tmp_path / "snap-view-trees")])
    assert rc == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["kind"] == "resume" and lines[0]["count"] == total(q, dbs[-1])


def test_empty_and_unknown_values() -> None:
    for head in HEADS:
        q = query(head, "R(A,B), S(B,C), T(C,A)")
        pq_ = parse_query(q)
        tri, view = TriangleQueryEngine(q), Engine(q)
        reqs = {v: np.array([5, -7], np.int64) for v in pq_.inputs} or None
        for _ in range(2):
            assert tri.request(reqs).equals(view.request(reqs))
            assert tri.exists(reqs).equals(view.exists(reqs))
            assert tri.count() == view.count()
            tables = dict(R={"a": [-7, 2**40], "b": [5, 5]}, S={"b": [5], "c": [1]},
                          T={"c": [1], "a": [-7]})
            tri.load(**tables)
            view.load(**tables)
        assert tri.count() == 1


def test_heads_benchmark_compares_the_engines(capsys) -> None:
    """``python -m bench.cq_heads`` (what the factory's choice was measured with) runs every
    head on both engines and fails when their answers differ."""
    from bench.cq_heads import HEADS, main

    assert main(["--tuples", "300", "--values", "25", "--batch", "60", "--batches", "2",
                 "--requests", "7"]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH" not in out
    assert sum(line.startswith("Q(") for line in out.splitlines()) == len(HEADS)
