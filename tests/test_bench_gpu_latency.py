"""``python -m bench.gpu_latency`` (the host's cost of a launch, a CuPy call, a read, an
upload; docs/gpu.md "Measured on an H200") in Numba's simulator, with the strict CuPy stand-in
as CuPy: every item runs (its numbers mean nothing there) and the fast launch reports why it is
unavailable. (Without a GPU it says so and runs nothing: tests/test_bench_gpu_run.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_item_runs_in_the_simulator(tmp_path) -> None:
    out = tmp_path / "sub" / "lat.json"
    code = ("import sys; sys.path[:0] = ['tests', '.']\n"
            "import strict_cupy\n"
            "strict_cupy.install(); sys.modules['cupy'] = strict_cupy.module()\n"
            "from bench import gpu_latency\n"
            "sys.exit(gpu_latency.main(['--simulator', '--repeat', '2', '--out',"
            f" {str(out)!r}]))\n")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert res.pop("device") == "simulator"
    fast = {k: res.pop(k) for k in ("launch_fast6", "launch_fast_tuple6")}
    assert all(isinstance(v, str) and v.startswith("failed:") for v in fast.values()), fast
    assert set(res) == {"sync", "launch_numba", "launch_cupy6", "launch_tuple6",
                        "launch_views6", "launch_raw_cupy6", "launch_raw_tuple6", "cupy_add",
                        "cupy_cumsum", "cupy_sum", "read", "upload_72kB", "upload_7MB",
                        "sort_200k"}
    assert all(isinstance(v, float) and v > 0 for v in res.values()), res
