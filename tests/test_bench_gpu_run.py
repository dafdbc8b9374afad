"""``make bench-gpu``'s runner (bench.gpu_run, and bench.gpu_latency before it) where no GPU
exists: each must say so, run nothing and fail with status 2; the runner's summary table puts
each workload's two backends side by side. (On a GPU it checks every count itself;
bench/device_check.sh runs it there.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(numba.config.ENABLE_CUDASIM, reason="the simulator stands in for a device")
@pytest.mark.parametrize("module", ["bench.gpu_run", "bench.gpu_latency"])
def test_without_a_gpu_it_says_so_and_runs_nothing(tmp_path, module: str) -> None:
    """Both steps of ``make bench-gpu``."""
    from gpu_ivm.backend import cuda_usable

    if cuda_usable():  # pragma: no cover - a machine with a GPU
        pytest.skip("a CUDA device is present")
    out = tmp_path / "sub" / "out.json"
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    proc = subprocess.run([sys.executable, "-m", module, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no usable CUDA device, nothing was run" in proc.stdout
    assert not out.exists()


def test_summary_table_pairs_the_backends() -> None:
    from bench.gpu_run import _table

    recs = [{"workload": "rmat18 B=1000", "backend": "cuda", "updates_per_s": 2000.0,
             "launches_per_batch": 11, "paths": ["delta"], "agree": True},
            {"workload": "rmat18 B=1000", "backend": "cpu", "updates_per_s": 500.0}]
    lines = _table(recs).splitlines()
    assert len(lines) == 2
    cols = lines[1].split()
    assert cols[:2] == ["rmat18", "B=1000"]
    assert cols[2:5] == ["2,000", "500", "4.00"]
    assert cols[5:] == ["11", "delta", "True"]



def test_summary_table_shows_device_input() -> None:
    from bench.gpu_run import _table

    recs = [{"workload": "rmat18 B=1000", "backend": "cuda", "updates_per_s": 2000.0,
             "launches_per_batch": 11, "paths": ["delta"], "agree": True},
            {"workload": "rmat18 B=1000", "backend": "cuda-dev", "updates_per_s": 3000.0},
            {"workload": "rmat18 B=1000", "backend": "cpu", "updates_per_s": 500.0}]
    assert _table(recs).splitlines()[1].split()[-1] == "cuda-dev=3,000"


def test_runs_end_to_end_in_the_simulator(tmp_path) -> None:
    """The whole runner on a tiny stream in Numba's simulator: every record agrees with the
    cpu backend, and the launch counts are there (no fast launch under the simulator)."""
    import json

    out = tmp_path / "run.jsonl"
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_run", "--simulator", "--scale", "6",
                           "--sizes", "20", "--batches", "1", "--celebrity-scale", "0",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["backend"] for r in recs} == {"cuda", "cuda-dev", "cpu"}
    assert all(r["agree"] for r in recs)
    cuda = next(r for r in recs if r["backend"] == "cuda")
    assert cuda["launches_per_batch"] > 0 and cuda["fast_launches_per_batch"] is None
