"""Timings that feed the adaptive policy wait for the device first.

Kernel launches and CuPy calls are asynchronous: reading the host clock right after them times
the queueing. A stand-in backend records every ``synchronize`` and the engine's clock reads
(``time.perf_counter`` in the engine modules); every clock read must come right after a
synchronize, from load (including the delta-rate calibration) through delta and recompute
batches.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm import engine as engine_mod

# the modules whose clock reads feed the adaptive policy (warm-up's compile-time notice and
# the CLI's wall-clock reports are not policy inputs)
ENGINE_MODULES = {"gpu_ivm.engine", "gpu_ivm.graph_engine", "gpu_ivm.relation_engine"}


@pytest.fixture
def events(monkeypatch) -> list[str]:
    log: list[str] = []
    real = time.perf_counter

    def clock() -> float:
        if sys._getframe(1).f_globals.get("__name__") in ENGINE_MODULES:
            log.append("clock")
        return real()

    # the engines reach the clock only through time.perf_counter of the shared time module
    monkeypatch.setattr(engine_mod.time, "perf_counter", clock)
    return log


def _watch(eng, log: list[str], monkeypatch) -> None:
    monkeypatch.setattr(type(eng.backend), "synchronize", lambda self: log.append("sync"))


def _assert_synced(log: list[str]) -> None:
    clocks = [i for i, e in enumerate(log) if e == "clock"]
    assert clocks, "no timing was taken"
    assert all(i > 0 and log[i - 1] == "sync" for i in clocks), log


@pytest.mark.parametrize("force", [None, "delta", "recompute"])
def test_graph_engine_timings_synchronize_first(events, monkeypatch, force) -> None:
    rng = np.random.default_rng(7)
    eng = GraphEngine(backend="cpu")
    _watch(eng, events, monkeypatch)
    present: set[tuple[int, int]] = set()
    while len(present) < 300:
        u, v = sorted(rng.integers(0, 60, 2).tolist())
        if u != v:
            present.add((u, v))
    base = np.array(sorted(present))
    eng.load({"src": base[:, 0], "dst": base[:, 1]})
    assert "clock" in events  # load timed the rebuild and calibrated the delta path
    eng.policy.force = force
    for _ in range(3):
        dels = [e for e in present if rng.random() < 0.05]
        ins: set[tuple[int, int]] = set()
        while len(ins) < 20:
            u, v = sorted(rng.integers(0, 60, 2).tolist())
            if u != v and (u, v) not in present:
                ins.add((u, v))
        rows = np.array(dels + sorted(ins))
        sign = np.r_[-np.ones(len(dels), int), np.ones(len(ins), int)]
        eng.apply({"src": rows[:, 0], "dst": rows[:, 1], "sign": sign})
        present = (present - set(dels)) | ins
    _assert_synced(events)


def test_relation_engine_timings_synchronize_first(events, monkeypatch) -> None:
    rng = np.random.default_rng(8)
    eng = RelationEngine(backend="cpu")
    _watch(eng, events, monkeypatch)
    eng.load(**{r: {"src": rng.integers(0, 20, 200), "dst": rng.integers(0, 20, 200),
                    "mult": rng.integers(-2, 3, 200)} for r in "RST"})
    eng.apply({"rel": rng.choice(list("RST"), 50).tolist(), "src": rng.integers(0, 20, 50),
               "dst": rng.integers(0, 20, 50), "mult": rng.integers(-2, 3, 50)})
    _assert_synced(events)
