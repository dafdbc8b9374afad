"""The CUDA twins of the sliding window's step bookkeeping and the device window in Numba's CUDA
simulator (a child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported;
see tests/cuda_sim_window_step_cases.py).
"""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_sim_window_step_cases.py")
def test_window_step_twins_in_simulator() -> None:
    sim_lanes.check("cuda_sim_window_step_cases.py")
