"""The CLI of the new modes: ``replay --mode insert-only|auto`` and ``replay --events``.

Oracles: brute-force triangle counts of each step's window recomputed from the raw events,
and networkx on the graph the batch files build.
"""

from __future__ import annotations

import json
from itertools import combinations

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from gpu_ivm.cli import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def lines(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def brute(edges) -> int:
    g = nx.Graph()
    g.add_edges_from(edges)
    return sum(1 for a, b, c in combinations(g.nodes, 3)
               if g.has_edge(a, b) and g.has_edge(a, c) and g.has_edge(b, c))


def window_oracle(src, dst, t, window, step):
    t0 = int(t.min())
    K = (int(t.max()) - t0) // step + 1
    out = []
    for k in range(1, K + 1):
        end = t0 + k * step
        m = (t >= end - window) & (t < end) & (src != dst)
        out.append(brute(zip(src[m].tolist(), dst[m].tolist())))
    return out


@pytest.fixture
def events(tmp_path):
    rng = np.random.default_rng(5)
    n = 300
    src, dst = rng.integers(0, 12, n), rng.integers(0, 12, n)
    t = 1_000 + rng.integers(0, 10 * 3600, n)
    return src, dst, t, tmp_path


@pytest.mark.parametrize("fmt", ["txt", "csv", "parquet"])
@pytest.mark.parametrize("offline", [False, True])
def test_events_every_step(events, capsys, fmt, offline):
    src, dst, t, tmp = events
    if fmt == "txt":
        path = tmp / "ev.txt"
        path.write_text("".join(f"{a} {b} {c}\n" for a, b, c in zip(src, dst, t)))
        extra = []
    elif fmt == "csv":
        path = tmp / "ev.csv"
        pacsv.write_csv(pa.table({"src": src, "dst": dst, "ts": t}), path)
        extra = ["--time-col", "ts"]
    else:
        path = tmp / "ev.parquet"
        pq.write_table(pa.table({"src": src, "dst": dst, "time": t}), path)
        extra = []
    argv = ["replay", "--events", str(path), "--window", "2h", "--step", "1800", "--json",
            "--check"] + extra + (["--offline"] if offline else [])
    code, out, err = run(argv, capsys)
    assert code == 0, err
    got = lines(out)
    assert got[0]["kind"] == "window" and got[0]["method"] == ("offline" if offline
                                                               else "online")
    steps = [d for d in got if d["kind"] == "batch"]
    assert [d["triangles"] for d in steps] == window_oracle(src, dst, t, 7200, 1800)
    assert [d["batch"] for d in steps] == list(range(len(steps)))
    assert all(d["seconds"] >= 0 for d in steps)
    assert "check: ok" in err


def test_events_errors(events, capsys):
    src, dst, t, tmp = events
    path = tmp / "ev.csv"
    pacsv.write_csv(pa.table({"src": src, "dst": dst}), path)
    code, _, err = run(["replay", "--events", str(path), "--window", "1d", "--step", "1h"],
                       capsys)
    assert code == 2 and "no time column" in err
    pacsv.write_csv(pa.table({"src": src, "dst": dst, "time": t}), path)
    code, _, err = run(["replay", "--events", str(path), "--window", "1y", "--step", "1h"],
                       capsys)
    assert code == 2 and "not a span" in err
    code, _, err = run(["replay", "--events", str(path), "--window", "1d", "--step", "1h",
                        "--time-col", "when"], capsys)
    assert code == 2 and "no column 'when'" in err
    for argv, msg in (
            (["--events", str(path), "--window", "1d"], "needs --window SPAN and --step SPAN"),
            (["--events", str(path), "--window", "1d", "--step", "1h", "--base", "x"],
             "does not take --base"),
            (["--base", "x", "--batches", "y", "--offline"], "sliding-window options"),
            (["--base", "x", "--batches", "y", "--mode", "insert-only", "--directed"],
             "not --directed"),
            (["--base", "x", "--batches", "y", "--mode", "auto", "--emit", "triangles",
              "--out", "o"], "not auto")):
        with pytest.raises(SystemExit) as ei:
            main(["replay"] + argv)
        assert ei.value.code == 2
        assert msg in capsys.readouterr().err


def _batches(tmp, batches):
    bdir = tmp / "batches"
    bdir.mkdir()
    for i, (s, d, sign) in enumerate(batches):
        pq.write_table(pa.table({"src": s, "dst": d, "sign": sign}), bdir / f"b{i}.parquet")
    return bdir


def test_replay_mode_insert_only_and_auto(tmp_path, capsys):
    rng = np.random.default_rng(2)
    base = tmp_path / "base.txt"
    base.write_text("1 2\n2 3\n")
    edges = {(1, 2), (2, 3)}
    batches, counts = [], []
    for _ in range(5):
        pairs = {(int(min(a, b)), int(max(a, b))) for a, b in rng.integers(0, 15, (12, 2))
                 if a != b} - edges
        pairs = sorted(pairs)
        edges |= set(pairs)
        batches.append(([a for a, _ in pairs], [b for _, b in pairs], [1] * len(pairs)))
        counts.append(brute(edges))
    bdir = _batches(tmp_path, batches)
    for mode in ("insert-only", "auto", "general"):
        code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json",
                              "--check", "--mode", mode], capsys)
        assert code == 0, err
        got = [d for d in lines(out) if d["kind"] == "batch"]
        assert [d["triangles"] for d in got] == counts
        if mode != "general":
            assert {d["path"] for d in got} <= {"insert_only", "insert_only_recount"}
    # a delete: refused in insert-only mode (exit 2, the file and row named), switched in auto
    a, b = sorted(edges)[3]
    pq.write_table(pa.table({"src": [100, a], "dst": [101, b], "sign": [1, -1]}),
                   bdir / "b9.parquet")
    code, _, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--mode",
                        "insert-only"], capsys)
    assert code == 2 and "b9.parquet" in err and "row 1" in err and "insert_only" in err
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json",
                          "--mode", "auto", "--check"], capsys)
    assert code == 0, err
    last = lines(out)[-1]
    expect = brute((edges | {(100, 101)}) - {(a, b)})
    assert last["path"] == "switched" and last["triangles"] == expect and "switched" in last


def test_replay_mode_snapshot_resume(tmp_path, capsys):
    base = tmp_path / "base.txt"
    base.write_text("1 2\n2 3\n")
    bdir = _batches(tmp_path, [([3], [1], [1]), ([4, 4], [1, 2], [1, 1]), ([4], [3], [1])])
    snaps = tmp_path / "snaps"
    argv = ["replay", "--base", str(base), "--batches", str(bdir), "--json", "--mode",
            "insert-only", "--snapshot-dir", str(snaps)]
    code, out, _ = run(argv, capsys)
    assert code == 0
    full = [d["triangles"] for d in lines(out) if d["kind"] == "batch"]
    assert full == [1, 2, 4]
    import shutil

    shutil.rmtree(snaps / "snapshot-000003")
    code, out, err = run(argv + ["--resume", str(snaps)], capsys)
    assert code == 0, err
    got = lines(out)
    assert got[0]["kind"] == "resume" and got[0]["triangles"] == 2
    assert [d["triangles"] for d in got if d["kind"] == "batch"] == [4]
    code, _, err = run(argv[:-4] + ["--resume", str(snaps), "--snapshot-dir", str(snaps)],
                       capsys)  # general mode against an insert-only snapshot: refused
    assert code == 2 and "mode" in err


# ---------------------------------------------------------------- --snapshot-dir / --resume
def _no_seconds(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in d.items() if k != "seconds"} for d in rows if d["kind"] == "batch"]


@pytest.fixture
def long_events(tmp_path):
    rng = np.random.default_rng(11)
    n = 2_500
    src, dst = rng.integers(0, 18, n), rng.integers(0, 18, n)
    t = 500 + rng.integers(0, 600 * 1800, n)
    path = tmp_path / "ev.txt"
    path.write_text("".join(f"{a} {b} {c}\n" for a, b, c in zip(src, dst, t)))
    return src, dst, t, path


def test_events_resume_after_kill(long_events, tmp_path, capsys):
    """A run killed mid-way (SIGKILL) and resumed from its snapshots prints exactly the step
    lines of an uninterrupted run (seconds aside), whose counts equal brute-force recounts of
    every step's window from the raw events."""
    import os
    import signal
    import subprocess
    import sys

    src, dst, t, path = long_events
    opts = ["--window", "4h", "--step", "1800", "--json"]
    code, out, err = run(["replay", "--events", str(path), *opts], capsys)
    assert code == 0, err
    full = _no_seconds(lines(out))
    assert [d["triangles"] for d in full] == window_oracle(src, dst, t, 4 * 3600, 1800)
    K = len(full)
    assert K > 500  # more step lines than the pipe buffer holds: the child cannot finish

    snaps = tmp_path / "snaps"
    argv = ["replay", "--events", str(path), *opts, "--snapshot-dir", str(snaps),
            "--snapshot-every", "3"]
    env = {**os.environ, "GPU_IVM_NOTICE_AFTER": "1e9"}
    child = subprocess.Popen([sys.executable, "-m", "gpu_ivm", *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    seen = 0
    for raw in child.stdout:
        seen += json.loads(raw)["kind"] == "batch"
        if seen == 40:
            break
    child.send_signal(signal.SIGKILL)
    rest = child.stdout.read()
    child.wait()
    child.stdout.close()
    first = _no_seconds([json.loads(x) for x in rest.decode().splitlines() if x.strip()])
    assert len(first) < K  # killed before the end
    code, out, err = run(argv + ["--resume", str(snaps)], capsys)
    assert code == 0, err
    got = lines(out)
    assert got[0]["kind"] == "window" and got[1]["kind"] == "resume"
    k = got[1]["step"]
    assert k % 3 == 0 and 40 - 3 < k <= 40 + len(first)  # a snapshot follows its lines
    assert got[1]["triangles"] == full[k - 1]["triangles"]
    assert _no_seconds(got) == full[k:]
    # a finished series resumes to nothing more, and the last snapshot is step K
    code, out, err = run(argv + ["--resume", str(snaps)], capsys)
    assert code == 0, err
    got = lines(out)
    assert got[1]["kind"] == "resume" and got[1]["step"] == K and _no_seconds(got) == []


def test_events_resume_refusals(long_events, tmp_path, capsys):
    import shutil

    src, dst, t, path = long_events
    snaps = tmp_path / "snaps"
    base = ["replay", "--events", str(path), "--window", "4h", "--step", "1800", "--json"]
    code, out, err = run(base + ["--resume", str(snaps), "--snapshot-dir", str(snaps),
                                 "--snapshot-every", "100"], capsys)
    assert code == 0 and "no complete snapshot" in err
    full = _no_seconds(lines(out))
    prev = (len(full) - 1) // 100 * 100  # the snapshot before the last step's
    held = sorted(p.name for p in snaps.iterdir())
    assert held == [f"snapshot-{prev:06d}", f"snapshot-{len(full):06d}"]
    # a fresh run into a folder holding snapshots
    code, _, err = run(base + ["--snapshot-dir", str(snaps)], capsys)
    assert code == 2 and "already holds snapshots" in err
    # other options, named
    code, _, err = run(base[:4] + ["5h"] + base[5:] + ["--resume", str(snaps)], capsys)
    assert code == 2 and "other options" in err and "window: 14400" in err
    # another events file (same name, one event changed)
    other = tmp_path / "other" / "ev.txt"
    other.parent.mkdir()
    text = path.read_text().splitlines()
    text[0] = text[0].split()[0] + " 99 " + text[0].split()[2]
    other.write_text("\n".join(text) + "\n")
    code, _, err = run(["replay", "--events", str(other)] + base[3:] + ["--resume", str(snaps)],
                       capsys)
    assert code == 2 and "another events file" in err
    # a damaged newest snapshot names the older one; resuming from it gives the same lines
    newest = snaps / f"snapshot-{len(full):06d}"
    edges = newest / "edges.arrow"
    edges.write_bytes(edges.read_bytes()[:-8])
    code, _, err = run(base + ["--resume", str(snaps)], capsys)
    older = snaps / f"snapshot-{prev:06d}"
    assert code == 2 and f"--resume {older}" in err
    code, out, err = run(base + ["--resume", str(older), "--snapshot-dir", str(snaps)], capsys)
    assert code == 0, err
    assert _no_seconds(lines(out)) == full[prev:]
    assert "removed 1 snapshot(s) newer" in err
    shutil.rmtree(snaps)
    with pytest.raises(SystemExit) as ei:
        main(base + ["--offline", "--resume", str(snaps)])
    assert ei.value.code == 2 and "does not take --snapshot-dir or --resume" in \
        capsys.readouterr().err
