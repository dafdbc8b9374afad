"""The device window as a backend (compaction, track_changes, snapshots across backends,
``SlidingWindow(backend=...)``, ``replay --events --backend cuda``) in Numba's CUDA simulator
(a child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_sim_window_device_cases.py).
"""

from __future__ import annotations

import pytest
import sim_lanes


@pytest.mark.sim_job("cuda_sim_window_device_cases.py")
def test_device_window_backend_in_simulator() -> None:
    sim_lanes.check("cuda_sim_window_device_cases.py")
