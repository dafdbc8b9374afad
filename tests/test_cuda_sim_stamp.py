"""The offline evaluator's and the sliding window's triangle twins in Numba's CUDA simulator (a
child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_sim_stamp_cases.py).
"""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_sim_stamp_cases.py")
def test_offline_and_window_twins_in_simulator() -> None:
    sim_lanes.check("cuda_sim_stamp_cases.py", skips_allowed=True)
