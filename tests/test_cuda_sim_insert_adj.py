"""The CUDA twin of the insert-only batch count in Numba's CUDA simulator (a child process,
since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_sim_insert_adj_cases.py).
"""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_sim_insert_adj_cases.py")
def test_insert_adj_twin_in_simulator() -> None:
    sim_lanes.check("cuda_sim_insert_adj_cases.py")
