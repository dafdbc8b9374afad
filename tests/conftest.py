from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

EPSILONS = ["0", "1/3", "1/2", "2/3", "1"]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"SNAP data folder {DATA} not present")
    return DATA
