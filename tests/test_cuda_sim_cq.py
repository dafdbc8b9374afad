"""The query engine's CUDA twins and ``cq.Engine(backend="cuda")`` in Numba's CUDA simulator,
and its device operators under CuPy's rules (child processes, since ``NUMBA_ENABLE_CUDASIM``
must be set before numba is imported; started at collection beside this process, see
tests/sim_lanes.py, tests/cuda_sim_cq_cases.py and tests/cuda_strict_cq_cases.py)."""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_sim_cq_cases.py")
def test_cq_twins_in_simulator() -> None:
    sim_lanes.check("cuda_sim_cq_cases.py")


@pytest.mark.sim_job("cuda_strict_cq_cases.py")
def test_cq_device_operators_under_cupy_rules() -> None:
    sim_lanes.check("cuda_strict_cq_cases.py")
