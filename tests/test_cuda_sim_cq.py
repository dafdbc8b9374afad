"""The query engine's CUDA twins and ``cq.Engine(backend="cuda")`` in Numba's CUDA simulator,
and its device operators under CuPy's rules (child processes, since ``NUMBA_ENABLE_CUDASIM``
must be set before numba is imported; see tests/cuda_sim_cq_cases.py and
tests/cuda_strict_cq_cases.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FILES = ("cuda_sim_cq_cases.py", "cuda_strict_cq_cases.py")


def test_cq_twins_in_simulator() -> None:
    """Both files at once, each in a child pytest with a Numba cache of its own (see
    tests/test_cuda_sim.py for why the caches are separate)."""
    from gpu_ivm.kernel_cache import base_dir

    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    env.pop("GPU_IVM_BACKEND", None)
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for f in FILES:
        log = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TESTS / f)],
            cwd=TESTS, stdout=log, stderr=subprocess.STDOUT, text=True,
            env={**env, "GPU_IVM_CACHE_DIR": str(base_dir() / f"simulator-cq-{f[:-3]}")})
        runs.append((proc, log))
    try:
        for proc, log in runs:
            proc.wait(timeout=900)
            log.seek(0)
            out = log.read()
            assert proc.returncode == 0, out[-6000:]
            assert " passed" in out
    finally:
        for proc, log in runs:
            if proc.poll() is None:
                proc.kill()
            log.close()
