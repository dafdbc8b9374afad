"""The query engine's insert-only and auto modes: the same answers as the general mode and the
oracle on insert streams, deletes refused (naming the row, state untouched) or switching auto
mode over, the mode kept by snapshots and checked by ``gpu-ivm query --resume``."""

from __future__ import annotations

import json
import random

import pytest
from test_cq_cli import write
from test_cq_engine import check, fold, random_db, random_query, table

from gpu_ivm.cli import main
from gpu_ivm.cq import parse_query
from gpu_ivm.cq.engine import Engine
from gpu_ivm.errors import InputError


def insert_batch(rng, schemas, domain) -> dict:
    return {r: {tuple(rng.choice(domain) for _ in range(a)): rng.randint(1, 3)
                for _ in range(rng.randint(0, 5))} for r, a in schemas.items()}


@pytest.mark.parametrize("kind", ["cqap0", "hierarchical", "cyclic"])
def test_insert_only_streams_match_the_oracle(kind: str) -> None:
    rng = random.Random(len(kind))
    for _ in range(3):
        query = random_query(rng, kind)
        q = parse_query(query)
        domain = list(range(5))
        db = random_db(rng, q.schemas, domain, 6)
        engines = [Engine(query, mode=m) for m in ("insert_only", "auto", "general")]
        for e in engines:
            e.load(**{r: table(rel, q.schemas[r]) for r, rel in db.items()})
        for _ in range(12):
            batch = insert_batch(rng, q.schemas, domain)
            for e in engines:
                e.apply({r: table(d, q.schemas[r]) for r, d in batch.items() if d})
            fold(db, batch)
            for e in engines:
                check(e, query, db, domain)
        assert [e.insert_only_active for e in engines] == [True, True, False]


def test_a_delete_is_refused_naming_the_row_and_nothing_changes() -> None:
    q = "Q(C | A) = R(A,B), S(B,C)"
    eng = Engine(q, mode="insert-only")
    assert eng.mode == "insert_only"
    eng.load(R={"a": [1, 1], "b": [2, 3]}, S={"b": [2, 3], "c": [7, 8]})
    before = eng.count(), eng.request({"A": [1]}).to_pydict(), eng.batches_applied
    batch = {"S": {"b": [3], "c": [9], "mult": [1]},
             "R": {"a": [1, 1, 4], "b": [3, 2, 2], "mult": [2, -1, 1]}}
    with pytest.raises(InputError) as err:
        eng.apply(batch)
    msg = str(err.value)
    assert "relation R" in msg and "(1, 2)" in msg and "multiplicity -1" in msg
    assert "insert_only" in msg and "nothing was applied" in msg
    assert err.value.row == 1 and err.value.column == "mult"
    assert (eng.count(), eng.request({"A": [1]}).to_pydict(), eng.batches_applied) == before
    with pytest.raises(InputError, match="nothing was loaded"):
        eng.load(R={"a": [1, 1], "b": [2, 2], "mult": [2, -1]})
    assert eng.count() == before[0]
    with pytest.raises(InputError, match="mode must be one of"):
        Engine(q, mode="append")


def test_auto_switches_at_the_first_delete() -> None:
    q = "Q(C | A) = R(A,B), S(B,C)"
    auto, general = Engine(q, mode="auto"), Engine(q)
    for e in (auto, general):
        e.load(R={"a": [1, 1], "b": [2, 3]}, S={"b": [2, 3], "c": [7, 8]})
        e.apply({"R": {"a": [5], "b": [2], "mult": [1]}})
    assert auto.insert_only_active and auto.switched_at is None
    for e in (auto, general):
        e.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    assert not auto.insert_only_active and auto.switched_at == 2
    with pytest.raises(InputError, match="multiplicities must stay >= 0"):
        auto.apply({"S": {"b": [2], "c": [7], "mult": [-5]}})  # checked as in general mode
    for e in (auto, general):
        e.apply({"S": {"b": [2], "c": [7], "mult": [-1]}})
    assert auto.count() == general.count()
    assert auto.request({"A": [1, 5]}) == general.request({"A": [1, 5]})


def test_snapshots_keep_the_mode(tmp_path) -> None:
    q = "Q(C | A) = R(A,B), S(B,C)"
    auto = Engine(q, mode="auto")
    auto.load(R={"a": [1], "b": [2]}, S={"b": [2], "c": [7]})
    auto.snapshot(tmp_path / "a")
    back = Engine.restore(tmp_path / "a")
    assert (back.mode, back.insert_only_active, back.switched_at) == ("auto", True, None)
    auto.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})
    auto.snapshot(tmp_path / "b")
    back = Engine.restore(tmp_path / "b")
    assert (back.mode, back.insert_only_active, back.switched_at) == ("auto", False, 1)
    assert back.count() == auto.count() == 0
    ins = Engine(q, mode="insert_only")
    ins.load(R={"a": [1], "b": [2]})
    ins.snapshot(tmp_path / "c")
    back = Engine.restore(tmp_path / "c")
    with pytest.raises(InputError, match="insert_only mode"):
        back.apply({"R": {"a": [1], "b": [2], "mult": [-1]}})


def test_query_cli_modes(tmp_path, capsys) -> None:
    q = "Q(C | A) = R(A,B), S(B,C)"
    rel = tmp_path / "rel"
    rel.mkdir()
    write(rel / "R.parquet", {(1, 2): 1}, ["x", "y"])
    write(rel / "S.parquet", {(2, 3): 1}, ["x", "y"])
    batches = tmp_path / "b"
    for k, delta in enumerate([{(1, 3): 1}, {(1, 2): -1}, {(4, 2): 1}], 1):
        (batches / f"b{k}").mkdir(parents=True)
        write(batches / f"b{k}" / "R.parquet", delta, ["x", "y"])
    argv = ["query", q, "--relations", str(rel), "--batches", str(batches), "--json"]
    assert main(argv + ["--mode", "insert-only"]) == 2
    out, err = capsys.readouterr()
    assert [json.loads(x)["batch"] for x in out.splitlines()] == [0, 1]  # b2 refused
    assert "insert_only mode" in err and "row 0" in err
    snaps = tmp_path / "snaps"
    assert main(argv + ["--mode", "auto", "--snapshot-dir", str(snaps)]) == 0
    auto = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert main(argv) == 0
    general = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["count"] for x in auto] == [x["count"] for x in general] == [1, 1, 0, 1]
    assert [("switched" in x) for x in auto] == [False, False, True, False]
    assert main(argv + ["--resume", str(snaps)]) == 2
    assert "mode auto, not general" in capsys.readouterr().err
