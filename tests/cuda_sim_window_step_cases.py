"""The CUDA twins of the sliding window's step bookkeeping in Numba's CUDA simulator, against the
CPU kernels, step by step, and the device window against the CPU window.

Run by ``tests/test_cuda_sim_window_step.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``;
to run it directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_window_step_cases.py

The CPU window (:class:`gpu_ivm.sliding_window.SlidingWindow`, itself tested against brute
force in ``tests/test_sliding_window.py``) runs real streams; its step kernels are wrapped so
that each call first runs the CUDA twin on copies of the very same state and then the CPU
kernel, and the two results are compared (equal arrays, or equal sets where the twin's order
may differ: table slots, due-list order, row order). Launches at the boundaries: 32 threads
per block, at most 4 blocks.
"""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path

import device_arrays as da
import numba
import numpy as np
import pytest

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from cuda_sim_launch import boundary_launch  # noqa: E402
from gpu_ivm.kernels import cuda_window_step as cws  # noqa: E402
from gpu_ivm.kernels.hashmap import EMPTY  # noqa: E402

from gpu_ivm import sliding_window  # noqa: E402
from gpu_ivm.sliding_window import SlidingWindow  # noqa: E402

_boundary_launch = pytest.fixture(autouse=True)(boundary_launch)


def random_stream(seed: int, n: int = 240, nv: int = 14):
    """A random event log with many repeats (few vertices), sorted by time."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nv, n), rng.integers(0, nv, n)
    t = np.sort(rng.integers(0, 300, n))
    t[:n // 8] = 0  # a burst: rows that outgrow their room twice in one step
    return src, dst, t, int(rng.integers(35, 70)), int(rng.integers(7, 11))


def college_stream(path: Path, n: int = 600):
    """The first ``n`` events of SNAP's CollegeMsg (src dst unix-time) at ``path``."""
    with gzip.open(path, "rt") as f:
        rows = [line.split() for _, line in zip(range(n), f)]
    a = np.array(rows, np.int64)
    return a[:, 0], a[:, 1], a[:, 2]


def table_map(keys: np.ndarray, vals: np.ndarray) -> dict:
    """key -> id over the used slots; a slot with a key has a value and vice versa."""
    keys, vals = da.host(keys), da.host(vals)
    used = vals != EMPTY
    assert ((keys != cws.FREE_KEY) == used).all()
    return dict(zip(keys[used].tolist(), vals[used].tolist()))


def due_sets(head: np.ndarray, nxt: np.ndarray) -> list[set]:
    """The edges of each ring slot's due list (each edge listed once)."""
    head, nxt = da.host(head), da.host(nxt)
    out = []
    for s in range(head.shape[0]):
        seen = []
        e = int(head[s])
        while e >= 0:
            seen.append(e)
            e = int(nxt[e])
        assert len(seen) == len(set(seen))
        out.append(set(seen))
    return out


def row_sets(off, ln, nbr, val) -> dict:
    off, ln, nbr, val = da.host((off, ln, nbr, val))
    return {x: sorted(zip(nbr[off[x]:off[x] + ln[x]].tolist(),
                          val[off[x]:off[x] + ln[x]].tolist()))
            for x in np.flatnonzero(ln).tolist()}


class Checked:
    """Wraps the CPU window's step kernels: each call runs the twin on copies first (the
    backend's arrays: NumPy in the simulator, CuPy on a device; read back to compare)."""

    def __init__(self, monkeypatch) -> None:
        from gpu_ivm.kernels import window_adj as wa
        from gpu_ivm.kernels import window_step as wk

        SlidingWindow(window=2, step=1)  # the process's kernel warm-up, before the wrapping
        self.sw: SlidingWindow | None = None
        self.stats: Counter = Counter()
        self.wk, self.wa = wk, wa
        self.cpu = {name: getattr(wk, name) for name in ("classify_arrivals", "expire_due",
                                                          "births")}
        self.cpu["append"] = wa.append
        for name in ("classify_arrivals", "expire_due", "births"):
            monkeypatch.setattr(sliding_window.wk, name, getattr(self, name))
        monkeypatch.setattr(sliding_window.wa, "append", self.append)

    def classify_arrivals(self, a, b, last, k, htk, htv, n_eids, seq, end, cend, stamp, mark,
                          eu, ev, born, fresh):
        dev = [da.dev(x.copy()) for x in (htk, htv, end, cend, stamp, mark, eu, ev)]
        dborn, dfresh = da.dev(np.full_like(born, -7)), da.dev(np.full_like(fresh, -7))
        first, top = cws.arrival_scratch(htk.shape[0], da.backend().xp)
        got = cws.classify_arrivals(*da.dev((a, b, last)), k, dev[0], dev[1], n_eids, seq,
                                    *dev[2:], dborn, dfresh, first, top)
        want = self.cpu["classify_arrivals"](a, b, last, k, htk, htv, n_eids, seq, end, cend,
                                             stamp, mark, eu, ev, born, fresh)
        assert got == tuple(want)
        nb_, nf = int(want[0]), int(want[1])
        assert da.host(dborn)[:nb_].tolist() == born[:nb_].tolist()
        assert da.host(dfresh)[:nf].tolist() == fresh[:nf].tolist()
        for name, x, y in zip(("end", "cend", "stamp", "mark", "eu", "ev"), dev[2:],
                              (end, cend, stamp, mark, eu, ev)):
            assert da.host(x).tolist() == y.tolist(), name
        assert table_map(dev[0], dev[1]) == table_map(htk, htv)
        assert (da.host(first) == cws.NO_ARRIVAL).all() and (da.host(top) == -1).all()
        keys = (a << 32) | b
        self.stats["arrivals"] += a.shape[0]
        self.stats["repeats in a batch"] += a.shape[0] - np.unique(keys).shape[0]
        self.stats["births"] += nb_
        self.stats["rebirths"] += nb_ - nf
        self.stats["extended"] += int(want[2])
        return want

    def expire_due(self, aoff, aln, anbr, aval, head, nxt, slot, k, end, cend, prev, ext,
                   ext_base, eu, ev, cal, scratch, marks, gone):
        sw = self.sw
        dev = [da.dev(x.copy()) for x in (head, nxt, end, cend, prev, ext, cal)]
        dscratch, dgone = da.dev(np.full_like(scratch, -7)), da.dev(np.full_like(gone, -7))
        got = cws.expire_due(da.dev((aoff, aln, anbr, aval)), da.dev((sw._htk, sw._htv)),
                             dev[0], dev[1], slot, k, dev[2], dev[3], dev[4], dev[5], ext_base,
                             *da.dev((eu, ev)), dev[6], dscratch, dgone)
        want = self.cpu["expire_due"](aoff, aln, anbr, aval, head, nxt, slot, k, end, cend,
                                      prev, ext, ext_base, eu, ev, cal, scratch, marks, gone)
        assert got == tuple(want)
        assert da.host(dgone)[:want[0]].tolist() == gone[:want[0]].tolist()
        for name, x, y in zip(("end", "cend", "prev", "ext", "cal"), dev[2:],
                              (end, cend, prev, ext, cal)):
            assert da.host(x).tolist() == y.tolist(), name
        assert due_sets(dev[0], dev[1]) == due_sets(head, nxt)
        self.stats["expired"] += int(want[0])
        self.stats["revisited extended"] += int(want[1])
        self.stats["moved removals"] += int(np.abs(cal).sum())
        return want

    def births(self, aoff, aln, anbr, aval, head, nxt, born, k, cend, stamp, eu, ev, cal,
               marks):
        sw = self.sw
        dhead, dnxt, dcal = da.dev((head.copy(), nxt.copy(), cal.copy()))
        got = cws.births(da.dev((aoff, aln, anbr, aval)), da.dev((sw._htk, sw._htv)), dhead,
                         dnxt, da.dev(born), k, *da.dev((cend, stamp, eu, ev)), dcal)
        want = self.cpu["births"](aoff, aln, anbr, aval, head, nxt, born, k, cend, stamp, eu,
                                  ev, cal, marks)
        assert got == want
        assert da.host(dcal).tolist() == cal.tolist()
        assert due_sets(dhead, dnxt) == due_sets(head, nxt)
        self.stats["closed"] += int(want)
        return want

    def append(self, off, ln, cap, nbr, val, used, us, vs, eids):
        d = [da.dev(x.copy()) for x in (off, ln, cap)]
        old_cap = cap.copy()
        add = da.dev(np.zeros(ln.shape[0], np.int64))
        got_nbr, got_val, got_used, got_garbage = cws.append(
            d[0], d[1], d[2], add, *da.dev((nbr.copy(), val.copy())), used,
            *da.dev((us, vs, eids)))
        d, add = da.host(tuple(d)), da.host(add)  # read back: compared on the host
        want_used, want_garbage = self.cpu["append"](off, ln, cap, nbr, val, used, us, vs,
                                                     eids)
        assert d[1].tolist() == ln.tolist() and d[2].tolist() == cap.tolist()
        assert not add.any()
        assert row_sets(d[0], d[1], got_nbr, got_val) == row_sets(off, ln, nbr, val)
        moved = np.flatnonzero(d[2] != old_cap)  # rows given room (moved, or new)
        # a moved row takes its final room once: at most the CPU's slab entries and garbage
        assert got_used - used == int(cap[moved].sum()) <= want_used - used
        assert got_garbage == int(old_cap[moved].sum()) <= want_garbage
        rows = np.flatnonzero(d[2])  # the rows' places in the slab do not overlap
        lo = d[0][rows]
        hi = lo + d[2][rows]
        o = np.argsort(lo)
        assert (hi[o][:-1] <= lo[o][1:]).all() and (hi <= got_used).all()
        self.stats["rows moved"] += moved.shape[0]
        self.stats["slab saved"] += (want_used - used) - (got_used - used)
        return want_used, want_garbage


def _drive(checked: Checked, src, dst, t, window: int, step: int, parts: int = 4):
    sw = SlidingWindow(window=window, step=step, start=int(t[0]))
    checked.sw = sw
    reps = []
    for part in np.array_split(np.arange(t.shape[0]), parts):
        reps += sw.push({"src": src[part], "dst": dst[part], "time": t[part]})
    reps += sw.close()
    return sw, reps


@pytest.mark.parametrize("seed", range(2))
def test_step_twins_match_cpu_kernels(seed, monkeypatch):
    """Every step kernel of a random window stream (few vertices: repeats inside a batch,
    extensions, expiries, rebirths, row moves) against its CUDA twin on the same state."""
    checked = Checked(monkeypatch)
    _, reps = _drive(checked, *random_stream(seed))
    st = checked.stats
    for what in ("repeats in a batch", "rebirths", "extended", "expired",
                 "revisited extended", "closed", "rows moved", "slab saved"):
        assert st[what] > 0, (what, dict(st))
    assert sum(r.triangles for r in reps) > 0


def test_step_twins_on_collegemsg(monkeypatch, college_msg):
    """The same on the first 600 events of CollegeMsg (two-day window, six-hour steps)."""
    checked = Checked(monkeypatch)
    src, dst, t = college_stream(college_msg, 600)
    _, reps = _drive(checked, src, dst, t, 2 * 86400, 6 * 3600)
    st = checked.stats
    for what in ("repeats in a batch", "extended", "expired", "revisited extended", "closed"):
        assert st[what] > 0, (what, dict(st))


FIELDS = ("step", "triangles", "edges", "arrivals", "births", "extensions", "expired")


def _rows(reps) -> list[list[int]]:
    return [[getattr(r, f) for f in FIELDS] for r in reps]


def _compare_windows(src, dst, t, window: int, step: int, parts: int = 3):
    from gpu_ivm.window_device import DeviceSlidingWindow

    start = int(t[0])
    cpu = SlidingWindow(window=window, step=step, start=start)
    dev = DeviceSlidingWindow(window=window, step=step, start=start)
    reps = []
    for part in np.array_split(np.arange(t.shape[0]), parts):
        ev = {"src": src[part], "dst": dst[part], "time": t[part]}
        want, got = cpu.push(ev), dev.push(ev)
        reps += want
        assert _rows(got) == _rows(want)
        assert [np.sort(x).tolist() for x in dev.edges()] == [np.sort(x).tolist()
                                                              for x in cpu.edges()]
    want, got = cpu.close(), dev.close()
    reps += want
    assert _rows(got) == _rows(want)
    assert dev.count() == cpu.count()
    assert dev.triangles().to_pydict() == cpu.triangles().to_pydict()
    totals = [sum(getattr(r, f) for r in reps) for f in ("triangles", "expired", "extensions")]
    assert min(totals) > 0, totals  # the stream has triangles, expiries and extensions
    return dev


def test_device_window_matches_cpu_window():
    """The device window (state on the device, every step part a twin) reports the CPU
    window's triangles, edges, births, extensions and expiries at every step."""
    src, dst, t, window, step = random_stream(10)
    _compare_windows(src, dst, t, window, step)  # compaction, snapshots, track_changes:
    # tests/cuda_sim_window_device_cases.py


def test_device_window_on_collegemsg(college_msg):
    src, dst, t = college_stream(college_msg, 500)
    _compare_windows(src, dst, t, 2 * 86400, 6 * 3600)


def test_classify_twin_duplicates_in_one_batch():
    """One batch holding a new edge five times, a dead edge twice and a live edge three times
    (out of order): one birth per edge, the largest last, the CPU's ids and stamps."""
    from gpu_ivm.kernels import hashmap
    from gpu_ivm.kernels import window_step as wk

    htk, htv = wk.empty_table(16)
    hashmap.insert(htk, htv, np.array([(1 << 32) | 2, (2 << 32) | 3]), np.array([0, 1]))
    n = 8
    end = np.full(n, -1, np.int64)
    end[:2] = [3, 9]  # edge 0 (1, 2) is dead at k = 5, edge 1 (2, 3) alive
    arrays = [end, end.copy(), np.array([1, 2] + [0] * 6), np.zeros(n, np.int64),
              np.array([1, 2] + [0] * 6), np.array([2, 3] + [0] * 6)]
    arrays[1][:2] = [3, 9]
    a = np.array([4, 2, 1, 4, 2, 4, 1, 4, 4, 2], np.int64)
    b = np.array([7, 3, 2, 7, 3, 7, 2, 7, 7, 3], np.int64)
    last = np.array([6, 8, 7, 9, 12, 5, 6, 7, 8, 11], np.int64)
    born_c, fresh_c = np.zeros(10, np.int64), np.zeros(10, np.int64)
    cpu = [x.copy() for x in arrays]
    want = wk.classify_arrivals(a, b, last, 5, htk.copy(), htv.copy(), 2, 4, *cpu, born_c,
                                fresh_c)
    arrays = [da.dev(x) for x in arrays]  # the twin's state: the backend's arrays
    born_d, fresh_d = da.dev((np.zeros(10, np.int64), np.zeros(10, np.int64)))
    first, top = cws.arrival_scratch(htk.shape[0], da.backend().xp)
    got = cws.classify_arrivals(*da.dev((a, b, last)), 5, *da.dev((htk, htv)), 2, 4, *arrays,
                                born_d, fresh_d, first, top)
    assert got == tuple(want) == (2, 1, 1, 3)
    # (4, 7) first, then (1, 2)
    assert da.host(born_d)[:2].tolist() == born_c[:2].tolist() == [2, 0]
    assert [da.host(x).tolist() for x in arrays] == [x.tolist() for x in cpu]
    assert da.host(arrays[0])[:3].tolist() == [7, 12, 9]  # the largest lasts
