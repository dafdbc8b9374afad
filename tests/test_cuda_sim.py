"""The cuda backend: resolution without a device, and the simulator cases in a subprocess.

``tests/cuda_sim_cases.py`` needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, which this
process (it imported numba already) cannot provide; it runs in a child pytest process instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest

from gpu_ivm.backend import get_backend
from gpu_ivm.errors import BackendUnavailableError

TESTS = Path(__file__).resolve().parent


@pytest.mark.skipif(numba.config.ENABLE_CUDASIM, reason="the simulator stands in for a device")
def test_cuda_without_device_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("GPU_IVM_BACKEND", raising=False)
    with pytest.raises(BackendUnavailableError, match="CUDA device") as exc:
        get_backend("cuda")
    assert "backend='cpu'" in str(exc.value)
    assert "NUMBA_ENABLE_CUDASIM" in str(exc.value)
    assert get_backend("auto").name == "cpu"
    monkeypatch.setenv("GPU_IVM_BACKEND", "cuda")
    with pytest.raises(BackendUnavailableError):
        get_backend()


def test_import_is_lazy() -> None:
    """``import gpu_ivm`` (and resolving the cpu backend) imports neither CuPy nor numba.cuda."""
    code = ("import sys, gpu_ivm; gpu_ivm.get_backend('cpu'); "
            "print(sorted(m for m in sys.modules if m.startswith(('cupy', 'numba.cuda'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"})
    assert out.stdout.strip() == "[]"


def test_auto_never_picks_the_simulator() -> None:
    code = "import gpu_ivm; print(gpu_ivm.get_backend('auto').name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert out.stdout.strip() == "cpu"


def test_simulator_cases() -> None:
    """Every CUDA kernel against its CPU counterpart, and both engines end to end, in Numba's
    CUDA simulator (see tests/cuda_sim_cases.py)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    env.pop("GPU_IVM_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5",
         str(TESTS / "cuda_sim_cases.py")],
        cwd=TESTS, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
