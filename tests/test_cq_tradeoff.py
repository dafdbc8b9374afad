"""The heavy/light trade-off engine (gpu_ivm.cq.tradeoff) against the brute-force oracle at
several ε, with thresholds small enough that X values move between the trees (minor
rebalancing) and N crosses the bounds of M (major rebalancing)."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
from test_cq_engine import run_checked

from gpu_ivm.cq.engine import Engine, UnsupportedQueryError
from gpu_ivm.cq.factory import engine
from gpu_ivm.cq.tradeoff import TradeoffEngine, find_fork
from gpu_ivm.errors import InputError, IntegerOverflowError

QUERIES = [
    "Q(C | A) = R(A,B), S(B,C)",          # fork at bound B, an input below
    "Q(A,C | ) = R(A,B), S(B,C)",         # fork at bound B, outputs below
    "Q(B | ) = R(A,B), S(A,C)",           # fork at bound A
    "Q(A | C) = R(A,B), S(B,C), T(B)",    # fork at B, a unary atom under it
    "Q(B,C | ) = R(A,B), S(A,C), U(D)",   # a second component that does not fork
    "Q(A,B | C) = R(A,B), S(A,C)",        # fork at output A with input C below
]


def test_find_fork_follows_omega() -> None:
    assert find_fork("Q(C | A) = R(A,B), S(B,C)")[0] == "B"
    assert find_fork("Q(A,B | C) = R(A,B), S(A,C)")[0] == "A"
    assert find_fork("Q(B,C | A) = R(A,B), S(A,C)") is None   # CQAP_0: never forks
    with pytest.raises(UnsupportedQueryError, match="non-hierarchical"):
        find_fork("Q( | ) = R(A,B), S(B,C), T(C,A)")
    with pytest.raises(UnsupportedQueryError, match="epsilon 1 is optimal"):
        TradeoffEngine("Q(B | A) = R(A,B)", epsilon="1/2")
    assert type(engine("Q(C | A) = R(A,B), S(B,C)", epsilon=1)) is Engine


@pytest.mark.parametrize("eps", ["0", "1/3", "1/2", "1"])
@pytest.mark.parametrize("query", QUERIES)
def test_tradeoff_streams_match_the_oracle(query: str, eps: str) -> None:
    rng = random.Random(zlib.crc32(f"{query} {eps}".encode()))  # the same in every run
    eng = run_checked(rng, query, list(range(5)), 10, 14,
                      make=lambda q: TradeoffEngine(q, epsilon=eps))
    if eps == "0":  # lazy: everything in the heavy strategies
        assert all(s.engine.count() == 0 for s in eng.strategies if s.parts and not s.heavy)
    if eps == "1":
        assert eng.heavy_keys.shape[0] == 0  # eager: everything in the light tree


def test_values_move_between_the_trees() -> None:
    """A value whose degree grows past ⌈3θ/2⌉ moves to the heavy tree, and back below
    ⌈θ/2⌉; answers stay exact through the moves and through major rebalancing."""
    q = "Q(C | A) = R(A,B), S(B,C)"
    eng = TradeoffEngine(q, epsilon="1/2")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 40, 400)
    b = rng.integers(0, 40, 400)
    eng.load(R={"a": a, "b": b}, S={"b": b[::-1], "c": a})
    ref = Engine(q)
    ref.load(R={"a": a, "b": b}, S={"b": b[::-1], "c": a})
    hub = np.full(60, 7)
    for _ in range(3):  # B = 7 grows heavy, then shrinks back
        c = rng.integers(100, 10_000, 60)
        for e in (eng, ref):
            e.apply({"S": {"b": hub, "c": c, "mult": np.ones(60, np.int64)}})
        assert 7 in eng.heavy_keys
        for e in (eng, ref):
            e.apply({"S": {"b": hub, "c": c, "mult": -np.ones(60, np.int64)}})
        reqs = {"A": np.arange(40)}
        assert eng.request(reqs) == ref.request(reqs)
        assert eng.count() == ref.count()
    assert eng.rebalances["minor_moves"] >= 2 and 7 not in eng.heavy_keys
    big = {"a": rng.integers(0, 40, 3000), "b": rng.integers(0, 40, 3000),
           "mult": np.ones(3000, np.int64)}
    before = eng.rebalances["major"]
    for e in (eng, ref):
        e.apply({"R": big})
    assert eng.rebalances["major"] > before
    assert eng.request({"A": np.arange(40)}) == ref.request({"A": np.arange(40)})


def test_refused_batches_leave_both_trees_untouched() -> None:
    q = "Q(C | A) = R(A,B), S(B,C)"
    eng = TradeoffEngine(q, epsilon="1/2")
    eng.load(R={"a": [1, 1], "b": [2, 3]}, S={"b": [2, 3], "c": [5, 2 ** 61]},)
    eng.apply({"S": {"b": [2], "c": [5], "mult": [2 ** 62 - 1]}})
    before = eng.request({"A": [1]}).to_pydict(), eng.count()
    with pytest.raises(InputError):
        eng.apply({"R": {"a": [1], "b": [9], "mult": [-1]}})
    with pytest.raises(IntegerOverflowError):
        eng.apply({"R": {"a": [1], "b": [2], "mult": [1]}})
    assert (eng.request({"A": [1]}).to_pydict(), eng.count()) == before


def _relation_files(tmp_path, rng: random.Random, xmax: int, ymax: int, n: int):
    """``tmp_path/rel`` with R.parquet and S.parquet: up to ``n`` random tuples each."""
    from test_cq_cli import write

    rel = tmp_path / "rel"
    rel.mkdir()
    for r in "RS":
        write(rel / f"{r}.parquet", {(rng.randint(0, xmax), rng.randint(0, ymax)): 1
                                     for _ in range(n)}, ["x", "y"])
    return rel


def test_query_cli_epsilon(tmp_path, capsys) -> None:
    """gpu-ivm query --epsilon 1/2 and 0: the same counts and answers as epsilon 1 after the
    load and every batch; a query the trade-off does not handle is refused (exit 2)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_cq_cli import write

    from gpu_ivm.cli import main

    q = "Q(C | A) = R(A,B), S(B,C)"
    rng = random.Random(4)
    rel = _relation_files(tmp_path, rng, 5, 5, 20)
    batches = tmp_path / "b"
    for k in range(1, 4):
        (batches / f"b{k}").mkdir(parents=True)
        write(batches / f"b{k}" / "S.parquet", {(rng.randint(0, 5), 9 + k): 2}, ["x", "y"])
    pq.write_table(pa.table({"A": list(range(6))}), tmp_path / "req.parquet")
    runs = {}
    for eps in ("1", "1/2", "0"):
        out = tmp_path / f"out{eps.replace('/', '_')}"
        assert main(["query", q, "--relations", str(rel), "--batches", str(batches), "--json",
                     "--epsilon", eps, "--requests", str(tmp_path / "req.parquet"),
                     "--out", str(out)]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        answers = [pq.read_table(out / f"answers-{k:06d}.parquet").to_pydict()
                   for k in range(4)]
        runs[eps] = ([x["count"] for x in lines], answers)
    assert runs["1/2"] == runs["1"] == runs["0"]
    assert main(["query", "Q( | ) = R(A,B), S(B,C), T(C,A)", "--relations", str(rel),
                 "--epsilon", "1/2"]) == 2
    assert "non-hierarchical" in capsys.readouterr().err


def test_snapshot_keeps_the_partition(tmp_path) -> None:
    """A snapshot restores the relations, ε, the heavy values, M and the counters; the
    restored engine answers and rebalances as the original does on the same later batches
    (compared with the ε = 1 engine too); each class refuses the other's snapshots; a
    tampered partition is refused."""
    import json

    from gpu_ivm.snapshot import SnapshotError

    q = "Q(C | A) = R(A,B), S(B,C)"
    rng = np.random.default_rng(11)
    a = rng.integers(0, 300, 400)
    b = np.where(rng.random(400) < 0.25, 1, rng.integers(0, 60, 400))
    eng = TradeoffEngine(q, epsilon="1/2")
    ref = Engine(q)
    for e in (eng, ref):
        e.load(R={"a": a, "b": b}, S={"b": b[::-1], "c": a})

    def batch(k):
        return {"R": {"a": np.arange(1000 + 20 * k, 1020 + 20 * k), "b": np.full(20, 2),
                      "mult": np.ones(20, np.int64)}}

    for k in range(3):  # B = 2 crosses the up threshold: a minor move
        for e in (eng, ref):
            e.apply(batch(k))
    assert 2 in eng.heavy_keys and eng.rebalances["minor_moves"] >= 1
    eng.snapshot(tmp_path / "s")
    back = TradeoffEngine.restore(tmp_path / "s")
    assert back.epsilon == eng.epsilon and back.M == eng.M
    assert back.heavy_keys.tolist() == eng.heavy_keys.tolist()
    assert back.rebalances == eng.rebalances and back.batches_applied == 3
    reqs = {"A": np.arange(300)}
    for k in range(3, 6):
        for e in (eng, back, ref):
            e.apply(batch(k))
        assert back.heavy_keys.tolist() == eng.heavy_keys.tolist()
        assert back.request(reqs) == eng.request(reqs) == ref.request(reqs)
        assert back.count() == ref.count()
    with pytest.raises(SnapshotError, match="TradeoffEngine.restore"):
        Engine.restore(tmp_path / "s")
    ref.snapshot(tmp_path / "r")
    with pytest.raises(SnapshotError, match="Engine.restore"):
        TradeoffEngine.restore(tmp_path / "r")
    man_path = tmp_path / "s" / "manifest.json"
    man = json.loads(man_path.read_text())
    man["M"] = 3  # does not bound the relations
    man_path.write_text(json.dumps(man))
    with pytest.raises(SnapshotError):
        TradeoffEngine.restore(tmp_path / "s")


def test_query_cli_epsilon_snapshots_and_resume(tmp_path, capsys) -> None:
    """gpu-ivm query --epsilon 1/2 --snapshot-dir, then --resume: the lines of an
    uninterrupted run; resuming at another ε is refused (exit 2)."""
    import json
    import shutil

    from test_cq_cli import write

    from gpu_ivm.cli import main

    q = "Q(C | A) = R(A,B), S(B,C)"
    rng = random.Random(8)
    rel = _relation_files(tmp_path, rng, 9, 3, 30)
    batches = tmp_path / "b"
    for k in range(1, 5):
        (batches / f"b{k}").mkdir(parents=True)
        write(batches / f"b{k}" / "R.parquet", {(rng.randint(10, 99), 1): 1 for _ in range(6)},
              ["x", "y"])
    snaps = tmp_path / "snaps"
    argv = ["query", q, "--relations", str(rel), "--batches", str(batches), "--json",
            "--epsilon", "1/2", "--snapshot-dir", str(snaps)]
    assert main(argv) == 0
    full = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    shutil.rmtree(snaps / "snapshot-000004")
    assert main(argv + ["--resume", str(snaps)]) == 0
    got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert got[0]["kind"] == "resume" and got[0]["batch"] == 3
    strip = [{k: v for k, v in x.items() if k != "seconds"} for x in got[1:]]
    assert strip == [{k: v for k, v in x.items() if k != "seconds"} for x in full[4:]]
    other = [x if x != "1/2" else "1/3" for x in argv]
    assert main(other + ["--resume", str(snaps)]) == 2
    assert "at epsilon 1/2, not 1/3" in capsys.readouterr().err
    assert main([x if x != "1/2" else "1" for x in argv] + ["--resume", str(snaps)]) == 2
    assert "TradeoffEngine.restore" in capsys.readouterr().err
