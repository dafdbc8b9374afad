from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=100, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough", max_examples=300, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The CLI announces slow steps ("loading base graph ...") on stderr after 2 s; on a loaded CI
# machine that would add lines to the stderr of subprocesses whose error output the tests
# check line by line. Tests of the progress lines set the threshold themselves.
os.environ.setdefault("GPU_IVM_PROGRESS_AFTER", "1e9")
# likewise the warm-up's "compiling kernels" notice (a cold cache); tests/test_warmup.py sets
# the threshold itself
os.environ.setdefault("GPU_IVM_NOTICE_AFTER", "1e9")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

EPSILONS = ["0", "1/3", "1/2", "2/3", "1"]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"SNAP data folder {DATA} not present")
    return DATA


@pytest.fixture
def college_msg(data_dir: Path) -> Path:
    """SNAP's CollegeMsg log (src dst unix-time) from the data folder; the test is skipped
    where it is absent (a device machine without ../shared)."""
    path = data_dir / "CollegeMsg.txt.gz"
    if not path.is_file():
        pytest.skip(f"SNAP data file {path} not present")
    return path


@pytest.fixture
def no_compact(monkeypatch):
    """Engines keep their graph in the IVM^ε stores whatever its size (no compact form,
    gpu_ivm/compact.py): for tests of the stores, the partitions, rebalancing and the adaptive
    policy, which small graphs would otherwise not reach."""
    from gpu_ivm import compact

    monkeypatch.setattr(compact, "COMPACT_MAX", 0)


def tiny_storage(mp) -> None:
    """Shrink the storage thresholds so small tests hit every structural path: directories on
    small runs, per-key compaction at the first excess tombstone, dense view rows, row hash
    tables on every row of two tuples or more, row bitmaps on every row of four tuples or more
    (where its tuples all have multiplicity 1), and the parallel variants of the batch
    kernels."""
    from gpu_ivm.kernels import delta_kernels

    from gpu_ivm import engine, partition, store, views

    mp.setattr(store, "DIR_MIN", 4)
    mp.setattr(store, "DIR_RATIO", 64)
    mp.setattr(store, "COMPACT_SLACK", 0)
    mp.setattr(store, "BITS_FLOOR", 4)
    mp.setattr(views, "DENSE_MIN", 2)
    mp.setattr(engine, "PAR_EMIT_MIN", 1)
    mp.setattr(partition.PartRel, "index_min", 2)  # row hash tables on nearly every row
    mp.setattr(delta_kernels, "PAR_MIN", 1)


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected what will not run
def pytest_collection_modifyitems(session, config, items) -> None:
    """Start the child-process jobs of the selected wrapper tests (``sim_job`` marker) now, on
    lanes beside this process, and run those tests last: they only wait for their job
    (see tests/sim_lanes.py)."""
    import sim_lanes

    names = [name for item in items for m in item.iter_markers("sim_job") for name in m.args]
    if names and not config.option.collectonly:
        if sim_lanes.PTX in names and not sim_lanes.ptx_python():
            names.remove(sim_lanes.PTX)  # its test skips itself
        sim_lanes.start(names)
        items.sort(key=lambda item: item.get_closest_marker("sim_job") is not None)


def pytest_sessionfinish(session, exitstatus) -> None:
    import sim_lanes

    sim_lanes.stop()
