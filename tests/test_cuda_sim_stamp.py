"""The offline evaluator's and the sliding window's triangle twins in Numba's CUDA simulator (a
child process, since ``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported; see
tests/cuda_sim_stamp_cases.py).
"""

from __future__ import annotations

from sim_subprocess import run_cases


def test_offline_and_window_twins_in_simulator() -> None:
    run_cases("cuda_sim_stamp_cases.py", skips_allowed=True)
