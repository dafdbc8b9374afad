"""Crash safety: ``gpu-ivm replay`` killed with SIGKILL at random points (during batches, in
the middle of snapshot writes) and resumed ends with exactly the results of an uninterrupted
run, every time.

Each scenario runs the CLI as a subprocess on a generated base graph and 12 batch files of
300 updates, kills it several times, resumes from the snapshot folder, and compares every
reported count with the uninterrupted run, the final count with a static recount of the
generator's own final edge set, and the final edge set (read back from the last snapshot)
with that edge set. ``GPU_IVM_SNAPSHOT_SLEEP`` stretches snapshot writes so that kills land
inside them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_ivm import snapshot
from gpu_ivm.static import count_triangles_arrays
from gpu_ivm.workloads import mixed_stream

N_BATCHES = 12


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    d = tmp_path_factory.mktemp("crash")
    st = mixed_stream(10, batch_size=300, n_batches=N_BATCHES, seed=3)
    base = d / "base.txt"
    base.write_text("".join(f"{a}\t{b}\n" for a, b in zip(st.base_src.tolist(),
                                                          st.base_dst.tolist())))
    bdir = d / "batches"
    bdir.mkdir()
    for i, bt in enumerate(st.batches()):
        pq.write_table(pa.table(bt), bdir / f"batch-{i:03d}.parquet")
    fs, fd = st.final_edges()
    final_edges = {(min(a, b), max(a, b)) for a, b in zip(fs.tolist(), fd.tolist())}
    final_count = count_triangles_arrays(fs, fd)
    # the uninterrupted run: one count per batch index
    r = subprocess.run(cli(base, bdir), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    ref = {x["batch"]: x["triangles"] for x in lines[1:]}
    assert sorted(ref) == list(range(N_BATCHES))
    assert ref[N_BATCHES - 1] == final_count
    return base, bdir, ref, final_edges


def cli(base: Path, bdir: Path, *extra) -> list[str]:
    return [sys.executable, "-m", "gpu_ivm", "replay", "--base", str(base), "--batches",
            str(bdir), "--json", "--check", *map(str, extra)]


def temporaries(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if ".tmp-" in p.name] if d.is_dir() else []


def run_until_killed(argv, env, snaps: Path, kill_after: int, mode: str, delay: float):
    """Start the CLI; after it reports batch ``kill_after`` (or the base), SIGKILL it:
    ``mode`` "now" at once, "mid-write" as soon as a snapshot's temporary folder appears,
    "delay" after ``delay`` seconds. Returns (reported lines, killed, the temporary folders
    this run left behind, stderr)."""
    before = set(temporaries(snaps))
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = []
    killed = False
    left = []
    try:
        for raw in p.stdout:
            d = json.loads(raw)
            lines.append(d)
            kind = d["kind"]
            b = -1 if kind == "base" else d["applied"] - 1 if kind == "resume" else d["batch"]
            if b >= kill_after:
                if mode == "mid-write":
                    t_end = time.monotonic() + 5
                    while not set(temporaries(snaps)) - before and time.monotonic() < t_end \
                            and p.poll() is None:
                        time.sleep(0.002)
                elif mode == "delay":
                    time.sleep(delay)
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    killed = True
                    left = sorted(set(temporaries(snaps)) - before)
                break
    finally:
        out, err = p.communicate(timeout=120)
    if not killed:
        assert p.returncode == 0, err
    else:
        assert p.returncode == -signal.SIGKILL
    lines += [json.loads(x) for x in out.splitlines()]
    return lines, killed, left, err


@pytest.mark.parametrize("every,seed", [(1, 0), (3, 1)])
def test_sigkill_and_resume_matches_uninterrupted(workload, tmp_path, every, seed):
    base, bdir, ref, final_edges = workload
    snaps = tmp_path / "snaps"
    env = dict(os.environ, **{snapshot.SLEEP_ENV: "0.03"})
    argv = cli(base, bdir, "--snapshot-dir", snaps, "--snapshot-every", every,
               "--resume", snaps)
    rng = np.random.default_rng(seed)
    plan = [(-1, "mid-write", 0.0)]  # killed while writing the base snapshot
    plan += [(int(k), m, float(rng.uniform(0, 0.25))) for k, m in
             zip(sorted(rng.choice(np.arange(0, N_BATCHES - 1), 4, replace=False)),
                 ["mid-write", "now", "delay", "mid-write"])]
    kills = mid_write = 0
    for kill_after, mode, delay in plan + [(N_BATCHES, "none", 0.0)]:
        lines, killed, left, err = run_until_killed(argv, env, snaps, kill_after, mode, delay)
        assert "Traceback" not in err
        for d in lines:  # every count any run reports is the uninterrupted run's
            if d["kind"] == "batch":
                assert d["triangles"] == ref[d["batch"]], d
            elif d["kind"] == "resume" and d["applied"]:
                assert d["triangles"] == ref[d["applied"] - 1]
        kills += killed
        mid_write += bool(left)
    assert not killed  # the last run finished (exit 0, --check recount passed)
    assert lines[-1]["batch"] == N_BATCHES - 1 or lines[-1]["applied"] == N_BATCHES
    assert lines[-1]["triangles"] == ref[N_BATCHES - 1]
    assert kills >= 4 and mid_write >= 1
    # the final state, read back from the last snapshot, holds exactly the generator's edges
    latest = snapshot.find_latest(snaps)
    assert latest.name == f"snapshot-{N_BATCHES:06d}"
    eng = snapshot.load(latest)
    s, d = eng.edges()
    assert {(min(a, b), max(a, b)) for a, b in zip(s.tolist(), d.tolist())} == final_edges
    assert eng.last_batch_id == N_BATCHES - 1 and not temporaries(snaps)
