"""Batches in device memory, prepared on the device, in Numba's CUDA simulator (a
child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_device_input_cases.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_device_input_in_simulator() -> None:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    env.pop("GPU_IVM_BACKEND", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(TESTS / "cuda_device_input_cases.py")], cwd=TESTS, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-6000:]
    assert " passed" in out.stdout
