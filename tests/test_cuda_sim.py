"""The cuda backend: resolution without a device, and the simulator cases in child processes.

``tests/cuda_sim_cases.py`` needs ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported, which this
process (it imported numba already) cannot provide; it runs in a child pytest process instead,
started at collection beside this one (tests/sim_lanes.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numba
import pytest
import sim_lanes

from gpu_ivm.backend import get_backend
from gpu_ivm.errors import BackendUnavailableError


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


@pytest.mark.sim_job("cuda_sim_cases.py")
def test_simulator_cases() -> None:
    """Every CUDA kernel against its CPU counterpart, and both engines end to end, in Numba's
    CUDA simulator (see tests/cuda_sim_cases.py)."""
    sim_lanes.check("cuda_sim_cases.py")


@pytest.mark.sim_job("cuda_strict_cases.py")
def test_device_resident_state() -> None:
    """Both engines with their whole state in (simulated) device memory under CuPy's rules,
    equal to the CPU backend after every batch, with a bounded number of host syncs per batch
    (see tests/cuda_strict_cases.py and tests/strict_cupy.py)."""
    sim_lanes.check("cuda_strict_cases.py")


@pytest.mark.sim_job("cuda_budget_cases.py")
def test_launch_and_sync_budget() -> None:
    """A steady-state delta batch of the count engine stays within its launches, CuPy calls,
    host syncs and uploads, and they do not grow with the batch size (see
    tests/cuda_budget_cases.py): issue 15's budget (16 launches and calls, 2 syncs, the batch
    the only upload) at ε = 1, what ``epsilon="auto"`` picks on R-MAT, from B = 25 to 10^5;
    higher ceilings at ε = 1/2, for batches with new vertices and for the free-query
    families."""
    sim_lanes.check("cuda_budget_cases.py")


@pytest.mark.skipif(numba.config.ENABLE_CUDASIM, reason="imports the launch module bare")
def test_stream_sync_only_for_arrays_of_other_streams(monkeypatch) -> None:
    """Arrays produced on numba's default stream (legacy, or per-thread when numba uses it)
    are launched without a stream synchronization; any other producer stream is waited on,
    and GPU_IVM_CAI_SYNC=always waits on every one."""
    from gpu_ivm.kernels import cuda_launch

    f = cuda_launch.needs_stream_sync
    monkeypatch.setattr(cuda_launch, "_DEFAULT_STREAM", 1)
    assert (f({"stream": None}), f({"stream": 1}), f({"stream": 2}), f({"stream": 12345})) == \
        (False, False, True, True)
    monkeypatch.setattr(cuda_launch, "_DEFAULT_STREAM", 2)  # per-thread default stream
    assert (f({"stream": 1}), f({"stream": 2})) == (True, False)
    monkeypatch.setattr(cuda_launch, "_ALWAYS_SYNC", True)
    assert f({"stream": None}) and f({"stream": 1})
