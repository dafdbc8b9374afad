"""Batches in device memory, prepared on the device, in Numba's CUDA simulator (a
child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_device_input_cases.py).
"""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_device_input_cases.py")
def test_device_input_in_simulator() -> None:
    sim_lanes.check("cuda_device_input_cases.py")
