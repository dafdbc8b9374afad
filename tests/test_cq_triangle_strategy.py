"""The planner's triangle strategy (issue 17): the triangle count query runs on the triangle
engine (TriangleQueryEngine over RelationEngine), checked against the brute-force oracle and
the view-tree Engine on the same streams (the other heads over the triangle:
tests/test_cq_triangle_patterns.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_ivm.cq import Engine, TradeoffEngine, TriangleQueryEngine, engine, total
from gpu_ivm.cq.triangle_strategy import triangle_mapping
from gpu_ivm.errors import InputError
from gpu_ivm.snapshot import SnapshotError

QUERIES = [
    "Q( | ) = R(A,B), S(B,C), T(C,A)",
    "Q( | ) = T(Z,X), R(X,Y), S(Z,Y)",         # permuted atoms, S transposed
    "Q( | ) = E(A,B), E(B,C), E(C,A)",          # self-join
    "Q( | ) = E(B,C), E(A,C), E(B,A)",          # self-join, permuted and transposed
    "Q( | ) = E(A,B), E(B,C), F(A,C)",          # two atoms on one relation
]


def _random_stream(query: str, seed: int, n_batches: int = 8):
    """(load tables, batches, database after load and after each batch) with multiplicities
    > 1, inserts and deletes."""
    rng = np.random.default_rng(seed)
    names = sorted({a.relation for a in Engine(query).query.atoms})
    held = {r: {} for r in names}

    def rows(k: int, deletes: bool) -> dict:
        out = {}
        for r in names:
            a, b, m = [], [], []
            for _ in range(k):
                if deletes and held[r] and rng.random() < 0.4:
                    t = list(held[r])[int(rng.integers(len(held[r])))]
                    d = -int(rng.integers(1, held[r][t] + 1))
                else:
                    t = tuple(int(x) for x in rng.integers(0, 7, 2))
                    d = int(rng.integers(1, 4))
                held[r][t] = held[r].get(t, 0) + d
                if held[r][t] == 0:
                    del held[r][t]
                a.append(t[0])
                b.append(t[1])
                m.append(d)
            out[r] = {"x": a, "y": b, "mult": m}
        return out

    first = rows(40, False)
    dbs = [{r: dict(h) for r, h in held.items()}]
    batches = []
    for _ in range(n_batches):
        batches.append(rows(8, True))
        dbs.append({r: dict(h) for r, h in held.items()})
    return first, batches, dbs


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("seed", range(2))
def test_against_oracle_and_view_trees(query: str, seed: int) -> None:
    first, batches, dbs = _random_stream(query, seed)
    tri = engine(query)
    assert isinstance(tri, TriangleQueryEngine)
    view = engine(query, strategy="view_trees")
    assert type(view) is Engine
    tri.load(**first)
    view.load(**first)
    counts = [tri.count()]
    assert tri.count() == view.count() == total(query, dbs[0])
    for b, db in zip(batches, dbs[1:]):
        tri.apply(b)
        view.apply(b)
        assert tri.count() == view.count() == total(query, db)
        counts.append(tri.count())
    assert len(set(counts)) > 1  # the stream moves the count
    assert tri.batches_applied == view.batches_applied == len(batches)


def test_mapping_orientation() -> None:
    assert triangle_mapping("Q( | ) = R(A,B), S(B,C), T(C,A)") == \
        [("R", False), ("S", False), ("T", False)]
    assert triangle_mapping("Q( | ) = T(Z,X), R(X,Y), S(Z,Y)") == \
        [("T", False), ("R", False), ("S", True)]
    # one directed 3-cycle that a symmetric reading would count (E is not symmetric)
    eng = engine("Q( | ) = E(A,B), E(B,C), E(C,A)")
    eng.load(E={"a": [1, 2, 3], "b": [2, 3, 1]})
    assert eng.count() == 3
    eng = engine("Q( | ) = E(A,B), E(C,B), E(C,A)")  # E(B,C) transposed: not a cycle in E
    eng.load(E={"a": [1, 2, 3], "b": [2, 3, 1]})
    assert eng.count() == 0 == Engine("Q( | ) = E(A,B), E(C,B), E(C,A)").count()


@pytest.mark.parametrize("query", [
    "Q( | ) = R(A,B), S(B,C), T(C,D), U(D,A)",   # 4-cycle
    "Q( | ) = R(A,B,C), S(B,C), T(C,A)",         # a ternary atom
    "Q( | ) = R(A,B), S(B,C), T(A,B)",           # not a triangle
    "Q( | ) = R(A,A), S(A,C), T(C,A)",           # a repeated variable
])
def test_recognition_negatives(query: str) -> None:
    assert triangle_mapping(query) is None
    assert type(engine(query)) is Engine
    with pytest.raises(InputError, match="not a triangle query"):
        TriangleQueryEngine(query)


def test_explain_says_why() -> None:
    text = engine("Q( | ) = R(A,B), S(B,C), T(C,A)").explain()
    assert "triangle engine (IVM^eps" in text and "triangle count" in text
    assert "S <- S" in text
    assert "transposed" in engine("Q( | ) = T(Z,X), R(X,Y), S(Z,Y)").explain()
    assert "triangle engine" not in Engine("Q( | ) = R(A,B), S(B,C), T(C,A)").explain()


def test_refused_batches_change_nothing() -> None:
    q = "Q( | ) = E(A,B), E(B,C), E(C,A)"
    tri, view = engine(q), Engine(q)
    tables = {"E": {"a": [1, 2, 3, 1], "b": [2, 3, 1, 3], "mult": [2, 1, 3, 1]}}
    tri.load(**tables)
    view.load(**tables)
    before = tri.count()
    assert before == view.count() == 6 * 3
    bad = [{"E": {"a": [1, 2], "b": [2, 3], "mult": [1, -2]}},    # (2,3) below zero
           {"E": {"a": [1], "b": [2]}},                           # no mult column
           {"F": {"a": [1], "b": [2], "mult": [1]}},              # unknown relation
           {"E": {"a": [1], "b": ["x"], "mult": [1]}},            # not integers
           [("E", 1)]]                                            # not a mapping
    for b in bad:
        with pytest.raises(InputError) as got:
            tri.apply(b)
        with pytest.raises(InputError) as want:
            view.apply(b)
        assert str(got.value) == str(want.value)
        assert tri.count() == view.count() == before
    with pytest.raises(InputError):
        tri.load(E={"a": [1], "b": [2], "mult": [-1]})
    assert tri.count() == before
    tri.apply({"E": {"a": [2], "b": [3], "mult": [-1]}})  # the last copy: allowed
    view.apply({"E": {"a": [2], "b": [3], "mult": [-1]}})
    assert tri.count() == view.count() == 0
    assert tri.batches_applied == view.batches_applied == 1


def test_return_shapes_match_engine() -> None:
    q = "Q( | ) = R(A,B), S(B,C), T(C,A)"
    tri, view = engine(q), Engine(q)
    for loaded in (False, True):
        if loaded:
            tables = dict(R={"a": [1, 1], "b": [2, 4]}, S={"b": [2, 4], "c": [3, 3]},
                          T={"c": [3], "a": [1], "mult": [2]})
            tri.load(**tables)
            view.load(**tables)
        assert tri.count() == view.count()
        assert type(tri.count()) is type(view.count())
        for inputs in (None, {"X": [5, 6, 7]}, pa.table({"X": [1]})):
            if inputs is not None:
                assert tri.count(inputs).equals(view.count(inputs))
            assert tri.request(inputs).equals(view.request(inputs))
            assert tri.exists(inputs).equals(view.exists(inputs))
            assert tri.request(inputs, limit=1).equals(view.request(inputs, limit=1))
        c1, c2 = tri.cursor(limit=1), view.cursor(limit=1)
        assert c1.next().equals(c2.next()) and c1.done == c2.done
    assert tri.request().to_pydict() == {"request": [0], "mult": [4]}
    cur = tri.cursor(limit=1)
    tri.apply({"R": {"a": [9], "b": [9], "mult": [1]}})
    with pytest.raises(InputError):
        cur.next()


def test_snapshot_round_trip(tmp_path) -> None:
    q = "Q( | ) = T(Z,X), R(X,Y), S(Z,Y)"
    first, batches, dbs = _random_stream(q, 5, 3)
    tri = engine(q)
    tri.load(**first)
    for b in batches:
        tri.apply(b)
    tri.snapshot(tmp_path / "s")
    back = TriangleQueryEngine.restore(tmp_path / "s")
    assert back.count() == tri.count() == total(q, dbs[-1])
    assert back.batches_applied == 3
    via_engine = Engine.restore(tmp_path / "s")  # the same format as the view trees'
    assert type(via_engine) is Engine and via_engine.count() == tri.count()
    via_engine.snapshot(tmp_path / "v")
    assert TriangleQueryEngine.restore(tmp_path / "v").count() == tri.count()
    more = {"R": {"x": [1, 2], "y": [2, 3], "mult": [1, 1]}}
    back.apply(more)
    via_engine.apply(more)
    assert back.count() == via_engine.count()
    # a trade-off engine's snapshot is refused with the entry that reads it
    tr = TradeoffEngine("Q(C | A) = R(A,B), S(B,C)", epsilon="1/2")
    tr.snapshot(tmp_path / "t")
    with pytest.raises(SnapshotError, match="TradeoffEngine.restore"):
        TriangleQueryEngine.restore(tmp_path / "t")


def test_modes_and_backend() -> None:
    q = "Q( | ) = R(A,B), S(B,C), T(C,A)"
    io = engine(q, mode="insert_only")
    io.load(R={"a": [1], "b": [2]}, S={"b": [2], "c": [3]}, T={"c": [3], "a": [1]})
    with pytest.raises(InputError, match="insert_only"):
        io.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    assert io.count() == 1
    auto = engine(q, mode="auto")
    auto.load(R={"a": [1], "b": [2]}, S={"b": [2], "c": [3]}, T={"c": [3], "a": [1]})
    auto.apply({"R": {"a": [1], "b": [2], "mult": [1]}})
    assert auto.insert_only_active
    auto.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    assert not auto.insert_only_active and auto.switched_at == 2 and auto.count() == 1
    with pytest.raises(InputError, match="unknown backend"):
        engine(q, backend="tpu")
    with pytest.raises(InputError, match="strategy"):
        engine(q, strategy="fast")


def test_cli_end_to_end(tmp_path, capsys) -> None:
    from gpu_ivm.cli import main

    q = "Q( | ) = E(A,B), E(B,C), E(C,A)"
    first, batches, dbs = _random_stream(q, 3, 3)
    rel = tmp_path / "rel"
    rel.mkdir()
    pq.write_table(pa.table({k: pa.array(v, pa.int64()) for k, v in first["E"].items()}),
                   rel / "E.parquet")
    bdir = tmp_path / "batches"
    for k, b in enumerate(batches, 1):
        (bdir / f"b{k}").mkdir(parents=True)
        pq.write_table(pa.table({c: pa.array(v, pa.int64()) for c, v in b["E"].items()}),
                       bdir / f"b{k}" / "E.parquet")
    want = [total(q, db) for db in dbs]
    for strategy in ("auto", "view-trees"):
        rc = main(["query", q, "--relations", str(rel), "--batches", str(bdir), "--json",
                   "--strategy", strategy, "--snapshot-dir", str(tmp_path / strategy)])
        assert rc == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [x["count"] for x in lines] == want
    snap = sorted((tmp_path / "view-trees").glob("snapshot-*"))[-1]
    assert TriangleQueryEngine.restore(snap).count() == want[-1]
