"""Timings that feed the adaptive policy wait for the device first.

Kernel launches and CuPy calls are asynchronous: reading the host clock right after them times
the queueing. A stand-in backend records every ``synchronize`` and the engine's clock reads
(``time.perf_counter`` in the engine modules, with the function that read it), from load
(including the delta-rate calibration) through delta and recompute batches. The rules:

- a read through ``_clock`` (every timing the policy reads, and each report's end) comes right
  after a synchronize;
- a batch's start (``_start_clock``) does not wait, and needs none: the event before it is a
  synchronized read (the previous batch's or the load's end), so the device is idle;
- the phases' clocks read the time without a wait (in ``_run_phases``) only when the
  engine's policy reads none of it (a forced path, or an engine without the adaptive policy,
  such as the warm-up's);
- any other read comes right after a synchronize.
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
        caller = sys._getframe(1)
        if caller.f_globals.get("__name__") in ENGINE_MODULES:
            where = caller.f_code.co_name
            if where == "_run_phases":  # does this engine's policy read the time?
                pol = caller.f_locals.get("pol")
                reads = pol is not None and pol.enabled and not pol.force
                where += ":policy" if reads else ":unread"
            log.append(f"clock:{where}")
        return real()

    # the engines reach the clock only through time.perf_counter of the shared time module
    monkeypatch.setattr(engine_mod.time, "perf_counter", clock)
    return log


def _watch(eng, log: list[str], monkeypatch) -> None:
    monkeypatch.setattr(type(eng.backend), "synchronize", lambda self: log.append("sync"))


def _assert_synced(log: list[str]) -> None:
    clocks = [i for i, e in enumerate(log) if e.startswith("clock")]
    assert clocks, "no timing was taken"
    assert any(log[i] == "clock:_start_clock" for i in clocks), log  # the rules below ran
    for i in clocks:
        where = log[i].split(":", 1)[1]
        if where == "_start_clock":  # right after a synchronized read: the device is idle
            assert i > 1 and log[i - 1].startswith("clock") and log[i - 2] == "sync", (i, log)
        elif where == "_run_phases:unread":  # a time no policy reads
            continue
        else:  # every time a policy reads (through _clock), and any other
            assert i > 0 and log[i - 1] == "sync", (i, log[max(i - 4, 0):i + 2])


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
    assert "clock:_clock" in events  # load timed the rebuild and calibrated the delta path
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
    if force is None:  # the main engine's phases were timed for its policy, after a wait
        assert "clock:_clock" in events[events.index("clock:_start_clock"):]


def test_relation_engine_timings_synchronize_first(events, monkeypatch) -> None:
    rng = np.random.default_rng(8)
    eng = RelationEngine(backend="cpu")
    _watch(eng, events, monkeypatch)
    eng.load(**{r: {"src": rng.integers(0, 20, 200), "dst": rng.integers(0, 20, 200),
                    "mult": rng.integers(-2, 3, 200)} for r in "RST"})
    eng.apply({"rel": rng.choice(list("RST"), 50).tolist(), "src": rng.integers(0, 20, 50),
               "dst": rng.integers(0, 20, 50), "mult": rng.integers(-2, 3, 50)})
    _assert_synced(events)
