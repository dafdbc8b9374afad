"""``gpu-ivm query``: counts after the load and each batch agree with the brute-force oracle."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_ivm.cli import main
from gpu_ivm.cq import total

QUERY = "Q(C | A) = R(A,B), S(B,C)"


def write(path, rows: dict[tuple, int], names):
    pq.write_table(pa.table({**{n: [k[j] for k in rows] for j, n in enumerate(names)},
                             "mult": list(rows.values())}), path)


def random_relations(rng, tmp_path):
    """A random database of R and S over values 0..3 and its folder of Parquet files."""
    db = {r: {(rng.randint(0, 3), rng.randint(0, 3)): rng.randint(1, 2) for _ in range(8)}
          for r in "RS"}
    rel = tmp_path / "rel"
    rel.mkdir()
    for r in "RS":
        write(rel / f"{r}.parquet", db[r], ["x", "y"])
    return db, rel


def test_query_cli_matches_oracle(tmp_path, capsys):
    rng = random.Random(5)
    db, rel = random_relations(rng, tmp_path)
    expect = [total(QUERY, db)]
    batches = tmp_path / "batches"
    for k in (1, 2, 10):                 # natural order: b2 before b10
        d = batches / f"b{k}"
        d.mkdir(parents=True)
        r = rng.choice("RS")
        present = [t for t, m in db[r].items() if m > 0]
        delta = {(rng.randint(0, 3), rng.randint(0, 3)): 1}
        victim = rng.choice(present)
        delta[victim] = delta.get(victim, 0) - 1
        write(d / f"{r}.parquet", delta, ["x", "y"])
        for t, m in delta.items():
            db[r][t] = db[r].get(t, 0) + m
        expect.append(total(QUERY, db))
    assert main(["query", QUERY, "--relations", str(rel), "--batches", str(batches),
                 "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["count"] for x in lines] == expect
    assert [x["name"] for x in lines[1:]] == ["b1", "b2", "b10"]
    assert [x["batch"] for x in lines] == [0, 1, 2, 3]
    assert all(x["seconds"] >= 0 for x in lines)


@pytest.mark.parametrize("case", ["syntax", "missing", "no-mult", "unknown", "negative"])
def test_query_cli_refusals(tmp_path, capsys, case):
    rel = tmp_path / "rel"
    rel.mkdir()
    write(rel / "R.parquet", {(1, 2): 1}, ["x", "y"])
    if case != "missing":
        write(rel / "S.parquet", {(2, 3): 1}, ["x", "y"])
    b = tmp_path / "b" / "b1"
    b.mkdir(parents=True)
    if case == "no-mult":
        pq.write_table(pa.table({"x": [1], "y": [2]}), b / "R.parquet")
    elif case == "unknown":
        write(b / "T.parquet", {(1, 2): 1}, ["x", "y"])
    else:
        write(b / "R.parquet", {(1, 2): -2}, ["x", "y"])
    query = "Q(C | A) = R(A,B), S(B,C" if case == "syntax" else QUERY
    assert main(["query", query, "--relations", str(rel), "--batches",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu-ivm: error:")
    if case == "syntax":
        assert "^" in err


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_query_cli_answers_requests_after_every_batch(tmp_path, capsys, fmt):
    """--requests/--out: answers-<NNNNNN>.parquet after the load and each batch, equal to the
    oracle's answers of each request; --epsilon 1 accepted."""
    from gpu_ivm.cq import access

    rng = random.Random(9)
    db, rel = random_relations(rng, tmp_path)
    reqs = [0, 1, 2, 3, 7]
    req_file = tmp_path / f"req.{fmt}"
    if fmt == "csv":
        req_file.write_text("A\n" + "".join(f"{a}\n" for a in reqs))
    else:
        pq.write_table(pa.table({"A": reqs}), req_file)
    states = [{r: dict(d) for r, d in db.items()}]
    batches = tmp_path / "batches"
    for k in (1, 2):
        d = batches / f"b{k}"
        d.mkdir(parents=True)
        present = [t for t, m in db["S"].items() if m > 0]
        delta = {(rng.randint(0, 3), rng.randint(0, 3)): 2, rng.choice(present): -1}
        write(d / "S.parquet", delta, ["x", "y"])
        for t, m in delta.items():
            db["S"][t] = db["S"].get(t, 0) + m
        states.append({r: dict(x) for r, x in db.items()})
    out = tmp_path / "out"
    assert main(["query", QUERY, "--relations", str(rel), "--batches", str(batches),
                 "--requests", str(req_file), "--out", str(out), "--epsilon", "1",
                 "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    for k, state in enumerate(states):
        got = pq.read_table(out / f"answers-{k:06d}.parquet").to_pydict()
        assert lines[k]["answers"] == len(got["request"])
        want = {(i, c): m for i, a in enumerate(reqs)
                for (c,), m in access(QUERY, state, (a,)).items()}
        assert dict(zip(zip(got["request"], got["C"]), got["mult"])) == want


def test_query_cli_request_option_refusals(tmp_path, capsys):
    rel = tmp_path / "rel"
    rel.mkdir()
    write(rel / "R.parquet", {(1, 2): 1}, ["x", "y"])
    write(rel / "S.parquet", {(2, 3): 1}, ["x", "y"])
    req = tmp_path / "req.parquet"
    pq.write_table(pa.table({"B": [1]}), req)
    base = ["query", QUERY, "--relations", str(rel)]
    for extra, msg in ((["--requests", str(req)], "go together"),
                       (["--requests", str(req), "--out", str(tmp_path / "o")],
                        "missing input column 'A'"),
                       (["--epsilon", "1/2", "--mode", "auto"], "runs at epsilon 1"),
                       (["--epsilon", "x"], "--epsilon")):
        assert main(base + extra) == 2
        assert msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_query_cli_snapshots_and_resume(tmp_path, capsys):
    """--snapshot-dir after the load and each batch; --resume continues after the newest
    snapshot with the lines an uninterrupted run prints; another query or other relations
    are refused."""
    import shutil

    rng = random.Random(21)
    db, rel = random_relations(rng, tmp_path)
    batches = tmp_path / "batches"
    for k in range(1, 5):
        d = batches / f"b{k}"
        d.mkdir(parents=True)
        write(d / "R.parquet", {(rng.randint(0, 3), rng.randint(0, 3)): 1}, ["x", "y"])
    snaps = tmp_path / "snaps"
    argv = ["query", QUERY, "--relations", str(rel), "--batches", str(batches), "--json",
            "--snapshot-dir", str(snaps)]
    assert main(argv) == 0
    full = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(p.name for p in snaps.iterdir()) == ["snapshot-000003", "snapshot-000004"]
    shutil.rmtree(snaps / "snapshot-000004")
    assert main(argv + ["--resume", str(snaps)]) == 0
    got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert got[0]["kind"] == "resume" and got[0]["batch"] == 3
    assert got[0]["count"] == full[3]["count"]
    strip = [{k: v for k, v in x.items() if k != "seconds"} for x in got[1:]]
    assert strip == [{k: v for k, v in x.items() if k != "seconds"} for x in full[4:]]
    other = ["query", "Q(A | C) = R(A,B), S(B,C)"] + argv[2:] + ["--resume", str(snaps)]
    assert main(other) == 2
    assert "snapshot of the query" in capsys.readouterr().err
    write(rel / "R.parquet", {(9, 9): 1}, ["x", "y"])
    assert main(argv + ["--resume", str(snaps)]) == 2
    assert "other relations" in capsys.readouterr().err


def test_query_cli_backend_option(tmp_path, capsys, monkeypatch):
    """``--backend cpu`` is the default's run (same counts); ``--backend cuda`` without a
    device or the simulator stops before any work with exit 1 and says why; a name that is
    not a backend is refused by argparse; a snapshot restores on either backend and a bad
    name is the caller's error, not a damaged snapshot."""
    from gpu_ivm.cq.engine import Engine
    from gpu_ivm.cq.tradeoff import TradeoffEngine
    from gpu_ivm.errors import InputError

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    rel = tmp_path / "rel"
    rel.mkdir()
    write(rel / "R.parquet", {(1, 2): 1, (1, 3): 2}, ["x", "y"])
    write(rel / "S.parquet", {(2, 3): 1, (3, 4): 1}, ["x", "y"])
    base = ["query", QUERY, "--relations", str(rel), "--json"]
    assert main(base) == 0
    default = capsys.readouterr().out
    assert main(base + ["--backend", "cpu"]) == 0
    assert capsys.readouterr().out.split('"seconds"')[0] == default.split('"seconds"')[0]
    from gpu_ivm.backend import get_backend

    try:
        get_backend("cuda")
        has_cuda = True
    except Exception:
        has_cuda = False
    if not has_cuda:
        assert main(base + ["--backend", "cuda"]) == 1
        assert "cuda" in capsys.readouterr().err.lower()
    with pytest.raises(SystemExit):
        main(base + ["--backend", "tpu"])
    for make in (lambda: TradeoffEngine(QUERY, epsilon="1/2", backend="tpu"),
                 lambda: Engine(QUERY, backend="tpu")):
        with pytest.raises(InputError, match="'cpu' or 'cuda'"):
            make()
    eng = Engine(QUERY)
    eng.load(R={"a": [1, 1], "b": [2, 3]}, S={"b": [2, 3], "c": [3, 4]})
    eng.snapshot(tmp_path / "snap")
    assert Engine.restore(tmp_path / "snap", backend="cpu").count() == eng.count()
    with pytest.raises(InputError, match="'cpu' or 'cuda'"):
        Engine.restore(tmp_path / "snap", backend="tpu")
