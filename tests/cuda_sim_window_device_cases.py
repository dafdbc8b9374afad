"""The device window as a complete backend, in Numba's CUDA simulator: compaction, track_changes,
snapshots and restores across backends, ``SlidingWindow(backend=...)`` and the CLI's
``--backend cuda``.

Run by ``tests/test_cuda_sim_window_device.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``;
to run it directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_window_device_cases.py

The oracle is the CPU window (:class:`gpu_ivm.sliding_window.SlidingWindow`, itself tested
against brute force in ``tests/test_sliding_window.py``), run beside the device window on the
same arrivals: every step's report, the stored edge ids, the live edges and (with tracking)
every step's changes must agree. ``COMPACT_MIN`` is lowered so that short streams compact
several times. Launches at the boundaries: 32 threads per block, at most 4 blocks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numba
import numpy as np
import pyarrow as pa
import pytest
from device_arrays import ON_DEVICE, host

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from gpu_ivm.kernels import cuda_launch  # noqa: E402

from gpu_ivm import sliding_window  # noqa: E402
from gpu_ivm.errors import InputError  # noqa: E402
from gpu_ivm.sliding_window import SlidingWindow  # noqa: E402
from gpu_ivm.window_device import DeviceSlidingWindow  # noqa: E402

FIELDS = ("step", "end", "triangles", "delta", "edges", "arrivals", "births", "extensions",
          "expired")


@pytest.fixture(autouse=True)
def _boundary_launch(monkeypatch) -> Iterator[None]:
    cfg = cuda_launch.CONFIG
    saved = (cfg.tpb, cfg.max_blocks)
    cfg.tpb, cfg.max_blocks = 32, 4
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    monkeypatch.setattr(sliding_window, "COMPACT_MIN", 24)  # both windows read it
    monkeypatch.delenv("GPU_IVM_BACKEND", raising=False)
    yield
    sys.setswitchinterval(old)
    cfg.tpb, cfg.max_blocks = saved


def stream(seed: int, n: int = 200, nv: int = 18, span: int = 240):
    """A log of many distinct edges over a long time (a short window: expired edges soon
    outnumber the live ones), with a hot set of repeated edges (extensions) and a burst."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nv, n), rng.integers(0, nv, n)
    hot = rng.random(n) < 0.3  # repeats of a few edges
    src[hot], dst[hot] = rng.integers(0, 4, hot.sum()), rng.integers(4, 7, hot.sum())
    t = np.sort(rng.integers(0, span, n))
    t[:n // 10] = 0
    return src, dst, t


def per_step(t: np.ndarray, step: int) -> list[np.ndarray]:
    """The arrivals' indices cut at the step ends, so that each push closes about one step."""
    cuts = np.searchsorted(t, np.arange(step, int(t[-1]) + step, step), side="left")
    return [p for p in np.split(np.arange(t.shape[0]), cuts) if p.shape[0]]


def rows(reps) -> list[list[int]]:
    return [[getattr(r, f) for f in FIELDS] for r in reps]


def sorted_edges(sw) -> list[list[int]]:
    return [host(x).tolist() for x in sw.edges()]


def changes(sw) -> dict:
    """The last steps' changes, rows sorted (their order follows the edge ids, which a
    restore renumbers)."""
    return {name: sorted(tuple(r.values()) for r in table.to_pylist())
            for name, table in sw.last_changes().items()}


def device_keys(dev: DeviceSlidingWindow) -> int:
    """Keys held by the device's edge table."""
    return int(np.count_nonzero(dev.backend.to_host(dev._d["htk"])))


def run_beside(windows: list, src, dst, t, parts: list[np.ndarray], track: bool,
               pairs: tuple = ((0, 1),)) -> list:
    """Push each part to every window; every window's steps (and changes) must equal the
    first's (the CPU window), and the windows of each pair (same history: the same edge ids)
    must store as many edges. Returns the first's reports."""
    out = []
    for part in parts:
        ev = {"src": src[part], "dst": dst[part], "time": t[part]}
        want = windows[0].push(ev)
        out += want
        for w in windows[1:]:
            got = w.push(ev)
            assert rows(got) == rows(want), (type(w).__name__, w.k)
            if track:
                assert changes(w) == changes(windows[0])
        for i, j in pairs:  # the CPU's ids, compactions included
            assert windows[i]._n_eids == windows[j]._n_eids, (i, j, windows[i].k)
    return out


def test_compaction_on_the_device():
    """A stream that compacts several times: step by step the device window equals the CPU
    window, its stored edges drop when the CPU's do, and its edge table holds the kept edges
    only."""
    src, dst, t = stream(1)
    cpu = SlidingWindow(window=24, step=4, start=0, backend="cpu")
    dev = SlidingWindow(window=24, step=4, start=0, backend="cuda")
    assert type(dev) is DeviceSlidingWindow and dev.backend.name == "cuda"
    stored, compactions, reps = 0, 0, []
    for part in per_step(t, 4):
        reps += run_beside([cpu, dev], src, dst, t, [part], track=False)
        if dev._n_eids < stored:
            compactions += 1
            assert device_keys(dev) == dev._n_eids
            assert sorted_edges(dev) == sorted_edges(cpu)
        stored = dev._n_eids
    want = cpu.close()
    assert rows(dev.close()) == rows(want)
    reps += want
    assert compactions >= 3, compactions
    assert sorted_edges(dev) == sorted_edges(cpu) and dev.count() == cpu.count()
    totals = [sum(getattr(r, f) for r in reps) for f in ("triangles", "expired", "extensions")]
    assert min(totals) > 0, totals


def test_track_changes_on_the_device():
    """``track_changes=True``: every step's triangles, vertex and edge count changes equal the
    CPU window's, across compactions (the per-edge counts are renumbered)."""
    src, dst, t = stream(2, n=180)
    cpu = SlidingWindow(window=24, step=4, start=0, track_changes=True, backend="cpu")
    dev = DeviceSlidingWindow(window=24, step=4, start=0, track_changes=True)
    stored, compactions, listed = 0, 0, 0
    for part in per_step(t, 4):
        run_beside([cpu, dev], src, dst, t, [part], track=True)
        listed += dev.last_changes()["triangles"].num_rows
        compactions += dev._n_eids < stored
        stored = dev._n_eids
    dev.close(), cpu.close()
    assert changes(dev) == changes(cpu)
    assert compactions >= 2 and listed > 0, (compactions, listed)


def read_snapshot(folder: Path) -> dict:
    """The snapshot's tables and manifest fields (checksums and times aside)."""
    out = {}
    for f in sorted(folder.glob("*.arrow")):
        with pa.memory_map(str(f)) as src:
            out[f.name] = pa.ipc.open_file(src).read_all().to_pydict()
    man = json.loads((folder / "manifest.json").read_text())
    out["fields"] = {k: v for k, v in man.items() if not isinstance(v, (dict, list))
                     and k not in ("created_unix", "manifest_sha256")}
    return out


def test_snapshots_restore_across_backends(tmp_path):
    """A device window's snapshot equals the CPU window's at the same point (pending arrivals
    included) and restores on the cpu backend; the CPU window's restores on the device; both
    then continue (compacting) exactly as an uninterrupted CPU window, changes included."""
    src, dst, t = stream(3)
    parts = per_step(t, 4)

    def calendar_at(n: int) -> bool:  # removals scheduled after the first n parts?
        probe = SlidingWindow(window=24, step=4, start=0, backend="cpu")
        for p in parts[:n]:
            probe.push({"src": src[p], "dst": dst[p], "time": t[p]})
        return bool(probe._cal.any())

    half = len(parts) // 2  # a point with triangles due to leave: a calendar to restore
    while not calendar_at(half):
        half += 1
    cpu = SlidingWindow(window=24, step=4, start=0, track_changes=True, backend="cpu")
    dev = SlidingWindow(window=24, step=4, start=0, track_changes=True, backend="cuda")
    run_beside([cpu, dev], src, dst, t, parts[:half], track=True)
    # the last part's arrivals are pending (no arrival has closed their step yet)
    assert len(dev._pending) == 1 and dev._pending[0][2].shape[0] == parts[half - 1].shape[0]
    dev.snapshot(tmp_path / "dev")
    cpu.snapshot(tmp_path / "cpu")
    stored = read_snapshot(tmp_path / "dev")
    assert stored == read_snapshot(tmp_path / "cpu") and any(stored["calendar.arrow"]["change"])
    on_cpu = SlidingWindow.restore(tmp_path / "dev", backend="cpu")
    on_dev = SlidingWindow.restore(tmp_path / "cpu", backend="cuda")
    assert type(on_cpu) is SlidingWindow and type(on_dev) is DeviceSlidingWindow
    assert on_dev.track_changes and on_dev.k == cpu.k and on_dev.count() == cpu.count()
    rest = parts[half:]
    # restores renumber the ids (live edges only): the restored windows are a pair
    reps = run_beside([cpu, dev, on_cpu, on_dev], src, dst, t, rest, track=True,
                      pairs=((0, 1), (2, 3)))
    assert rows(on_dev.close()) == rows(cpu.close()) == rows(on_cpu.close())
    assert sorted_edges(on_dev) == sorted_edges(cpu) == sorted_edges(on_cpu)
    assert sum(r.expired for r in reps) > 0 and on_dev._n_eids < on_dev._dcap
    with pytest.raises(InputError, match="cuda backend"):
        DeviceSlidingWindow.restore(tmp_path / "cpu", backend="cpu")


def test_backend_selection(monkeypatch):
    """``backend=`` picks the class; ``GPU_IVM_BACKEND`` is the default, as for the
    engines; the device window refuses the cpu backend."""
    assert type(SlidingWindow(window=4, step=2)) is SlidingWindow
    monkeypatch.setenv("GPU_IVM_BACKEND", "cuda")
    assert type(SlidingWindow(window=4, step=2)) is DeviceSlidingWindow
    assert type(SlidingWindow(window=4, step=2, backend="cpu")) is SlidingWindow
    # "auto" takes a real device, never the simulator
    assert type(SlidingWindow(window=4, step=2, backend="auto")) is \
        (DeviceSlidingWindow if ON_DEVICE else SlidingWindow)
    with pytest.raises(InputError, match="cuda backend"):
        DeviceSlidingWindow(window=4, step=2, backend="cpu")


def test_cli_backend_cuda(tmp_path, capsys, monkeypatch):
    """``replay --events --backend cuda`` runs its steps on the device window and prints the
    cpu run's lines (seconds aside); its snapshots resume on the cpu backend and the cpu
    run's on cuda, each printing the uninterrupted run's remaining lines."""
    from gpu_ivm.cli import main

    on_device = []  # the steps the device window ran
    step = DeviceSlidingWindow._step
    monkeypatch.setattr(DeviceSlidingWindow, "_step",
                        lambda self, k, *a: on_device.append(k) or step(self, k, *a))

    src, dst, t = stream(4, n=120)
    path = tmp_path / "ev.txt"
    path.write_text("".join(f"{a} {b} {c}\n" for a, b, c in zip(src, dst, t)))
    base = ["replay", "--events", str(path), "--window", "24", "--step", "6", "--json",
            "--check", "--snapshot-every", "10"]

    def run(*extra) -> list[dict]:
        code = main(base + list(extra))
        out, err = capsys.readouterr()
        assert code == 0, err
        got = [json.loads(x) for x in out.splitlines()]
        for x in got:
            x.pop("seconds", None)
        return got

    cpu = run("--backend", "cpu", "--snapshot-dir", str(tmp_path / "c"))
    assert on_device == []
    dev = run("--backend", "cuda", "--snapshot-dir", str(tmp_path / "d"))
    assert on_device == list(range(1, cpu[0]["steps"] + 1))
    assert cpu[0]["backend"] == "cpu" and dev[0]["backend"] == "cuda"
    cpu[0].pop("backend"), dev[0].pop("backend")
    assert dev == cpu and len(cpu) > 30
    for snaps, backend in (("d", "cpu"), ("c", "cuda")):
        named = sorted((tmp_path / snaps).glob("snapshot-*"))[0]  # the older of two kept
        k = int(named.name.split("-")[1])
        assert 0 < k < cpu[0]["steps"]
        on_device.clear()
        got = run("--backend", backend, "--resume", str(named))
        assert got[1]["kind"] == "resume" and got[1]["step"] == k
        assert got[2:] == cpu[k + 1:]
        assert on_device == ([] if backend == "cpu" else list(range(k + 1, len(cpu))))
