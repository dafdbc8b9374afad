"""The command line: count, replay (JSON lines, exit codes), demo, python -m gpu_ivm."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from oracle import GraphOracle
from streams import graph_batches

from gpu_ivm.cli import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_count_json(data_dir, capsys):
    code, out, _ = run(["count", str(data_dir / "ca-GrQc.txt.gz")], capsys)
    d = json.loads(out)
    assert code == 0
    assert (d["triangles"], d["vertices"], d["edges"]) == (48_260, 5_242, 14_484)
    assert d["seconds"] >= 0


@pytest.fixture
def replay_dir(tmp_path):
    rng = np.random.default_rng(4)
    oracle = GraphOracle(False)
    base_s = rng.integers(0, 50, 200)
    base_d = rng.integers(0, 50, 200)
    base = tmp_path / "base.txt"
    base.write_text("# a base graph\n" + "".join(f"{a}\t{b}\n" for a, b in zip(base_s, base_d)))
    for a, b in zip(base_s.tolist(), base_d.tolist()):
        if a != b:
            oracle.apply(a, b, 1)
    bdir = tmp_path / "batches"
    bdir.mkdir()
    counts = []
    for i, batch in enumerate(graph_batches(oracle, rng, n_batches=6, nv=60, max_batch=40,
                                            hub_p=0.3)):
        t = pa.table(batch)
        if i % 3 == 0:
            pq.write_table(t, bdir / f"b{i:02d}.parquet")
        elif i % 3 == 1:
            pacsv.write_csv(t, bdir / f"b{i:02d}.csv")
        else:
            with pa.OSFile(str(bdir / f"b{i:02d}.arrow"), "wb") as f, \
                    pa.ipc.new_file(f, t.schema) as w:
                w.write_table(t)
        counts.append(oracle.count())
    return base, bdir, counts


def test_replay_json_lines(replay_dir, capsys):
    base, bdir, counts = replay_dir
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json",
                          "--check"], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["batch"] == "base"
    rows = lines[1:]
    assert [r["batch"] for r in rows] == list(range(6))
    assert [r["triangles"] for r in rows] == counts
    for r in rows:
        assert {"updates", "seconds", "file"} <= set(r)


@pytest.mark.parametrize("eps", ["0", "1/3", "1"])
def test_replay_epsilon_and_text_mode(replay_dir, capsys, eps):
    base, bdir, counts = replay_dir
    code, out, _ = run(["replay", "--base", str(base), "--batches", str(bdir), "--epsilon", eps],
                       capsys)
    assert code == 0
    assert f"final count {counts[-1]:,}" in out


def test_replay_bad_batch_exit_2(replay_dir, capsys):
    base, bdir, _ = replay_dir
    pq.write_table(pa.table({"src": [1], "dst": [2]}), bdir / "b99.parquet")
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json"],
                         capsys)
    assert code == 2
    assert "b99.parquet" in err and "sign" in err
    assert len(out.splitlines()) == 1 + 6  # the good batches were applied and reported


def test_replay_missing_inputs_exit_2(tmp_path, capsys):
    code, _, err = run(["replay", "--base", str(tmp_path / "nope.txt"), "--batches",
                        str(tmp_path)], capsys)
    assert code == 2 and "error" in err


def test_python_dash_m_and_demo(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpu_ivm", "demo", "--scale", "10", "--batches",
                        "3", "--batch-size", "100"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout.splitlines()[-1]
