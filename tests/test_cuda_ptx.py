"""Every CUDA kernel compiles to PTX for sm_90 (Hopper) and assembles with ptxas.

Needs an interpreter with NVIDIA's numba-cuda, given by ``GPU_IVM_PTX_PYTHON`` (a scratch venv:
numba-cuda changes what ``numba.cuda`` is, so it does not belong in the project venv); skipped
otherwise. ``ptxas`` (CUDA toolkit) is used when on PATH. No GPU or driver is needed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import sim_lanes

TESTS = Path(__file__).resolve().parent
PY = os.environ.get("GPU_IVM_PTX_PYTHON", "")


@pytest.mark.sim_job("cuda_ptx_compile.py")
@pytest.mark.skipif(not PY, reason="set GPU_IVM_PTX_PYTHON to a python with numba-cuda[cu12]")
def test_kernels_compile_for_sm90(tmp_path: Path) -> None:
    """The compile runs in a child process started at collection (tests/sim_lanes.py)."""
    job = sim_lanes.finished(sim_lanes.PTX)
    assert job.returncode == 0, job.output[-8000:]
    # every kernel of the package: one per @cuda.jit / @cuda.jit(cache=True) in
    # kernels/cuda_*.py (a new kernel missing from cuda_ptx_compile.cases fails here)
    n = sum(len(re.findall(r"^\s*@cuda\.jit(\(cache=True\))?$", f.read_text(), re.M))
            for f in (TESTS.parent / "kernels").glob("cuda_*.py"))
    assert f"compiled {n} kernels for sm_90" in job.output
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return
    for ptx in sorted(job.workdir.glob("*.ptx")):
        asm = subprocess.run([ptxas, "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(ptx)],
                             capture_output=True, text=True)
        assert asm.returncode == 0, f"{ptx.name}: {asm.stderr[-2000:]}"


def test_every_kernel_is_cached() -> None:
    """Every ``@cuda.jit`` kernel asks numba-cuda for its on-disk cache (``cache=True``); only
    device functions (inlined into their cached callers) may go without."""
    for f in sorted((TESTS.parent / "kernels").glob("cuda_*.py")):
        for line in f.read_text().splitlines():
            s = line.strip()
            if s.startswith("@cuda.jit") and "device=True" not in s:
                assert s == "@cuda.jit(cache=True)", f"{f.name}: {s}"
