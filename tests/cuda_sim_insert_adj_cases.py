"""The CUDA twin of the insert-only batch count (kernels/cuda_insert_adj.py) in Numba's CUDA
simulator, against the CPU kernels (kernels/insert_adj.py), batch by batch.

Run by ``tests/test_cuda_sim_insert_adj.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``;
to run it directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_insert_adj_cases.py

``GraphEngine(mode="insert_only")`` (cpu backend, itself tested against the static counter in
``tests/test_insert_only*.py``) runs real streams; its batch call ``insert_batch`` is wrapped so
that after each stored batch the twin runs on the very state the CPU count saw (the batch
appended) and its total is compared with the CPU's delta, ``count_serial`` and ``count_par``.
Hand-made states make a lone edge to a hub take each of the CPU's three ways (probe, marks of
the short row, marks of the long row). The twins of ``insert_batch`` and ``list_new`` run on
copies of the state of every CPU ``insert_batch`` call along real runs (``twinned``), and on
batches with a repeated or a stored key (the same conflict row, the state unchanged).
Launches at the boundaries: 32 threads per block, at most 4 blocks.
"""

from __future__ import annotations

import gzip
import os

import numba
import numpy as np
import pytest
from device_arrays import array_equal, dev, host

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from cuda_sim_launch import boundary_launch  # noqa: E402
from gpu_ivm.kernels import cuda_insert_adj as cia  # noqa: E402
from gpu_ivm.kernels import insert_adj as ia  # noqa: E402

from gpu_ivm import GraphEngine, insert_only  # noqa: E402
from gpu_ivm.insert_only_state import EdgeState  # noqa: E402
from gpu_ivm.static import count_triangles_arrays  # noqa: E402

_boundary_launch = pytest.fixture(autouse=True)(boundary_launch)


def _twin_total(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, marks) -> int:
    """The twin's total (on the backend's copies of the state), checked against both CPU
    counts on the same state."""
    got = cia.count_new(*dev((off, ln, nbr, val, htk, htv, stamp, eu, ev)), first, n)
    assert got == ia.count_serial(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, marks)
    assert got == ia.count_par(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, 3)
    assert not marks.any()
    return got


@pytest.fixture
def checked(monkeypatch) -> list:
    """Wrap ``insert_batch``: after each stored batch, the twin on the state it counted.
    Yields the list of (batch size, twin total) per stored batch."""
    real = ia.insert_batch
    seen: list = []

    def wrapped(a, b, htk, htv, n_eids, seq, eu, ev, stamp, off, ln, cap, nbr, val, used,
                marks, par_min, threads, limit, count):
        out = real(a, b, htk, htv, n_eids, seq, eu, ev, stamp, off, ln, cap, nbr, val, used,
                   marks, par_min, threads, limit, count)
        bad, nbr2, val2, _, _, delta = out
        if bad < 0:
            got = _twin_total(off, ln, nbr2, val2, htk, htv, stamp, eu, ev, n_eids,
                              a.shape[0], marks)
            if delta >= 0:
                assert got == delta
            seen.append((int(a.shape[0]), got))
        return out

    monkeypatch.setattr(ia, "insert_batch", wrapped)
    # never recount a batch from scratch: every batch goes through insert_batch's count
    monkeypatch.setattr(insert_only, "RECOUNT_RATIO", 1 << 62)
    return seen


def _run(batches, seen) -> GraphEngine:
    """The batches without self-loops and without edges seen before (a stream the engine
    takes as is), through the engine; checks the twins' sum against the static count."""
    g = GraphEngine(mode="insert_only")
    stored: set = set()
    for src, dst in batches:
        rows = []
        for x, y in zip(src, dst):
            k = (min(x, y), max(x, y))
            if x != y and k not in stored:
                stored.add(k)
                rows.append((x, y))
        if rows:
            g.apply({"src": [x for x, _ in rows], "dst": [y for _, y in rows],
                     "sign": [1] * len(rows)})
    assert g.count() == sum(t for _, t in seen)
    a, b = (np.array(c, np.int64) for c in zip(*sorted(stored)))
    assert g.count() == count_triangles_arrays(a, b)
    return g


def test_random_stream_with_hub(checked) -> None:
    rng = np.random.default_rng(7)
    batches = []
    for k in range(16):
        m = int(rng.integers(1, 25))
        src = rng.integers(0, 30, m)
        dst = rng.integers(0, 30, m)
        hub = rng.random(m) < 0.4  # about 40% of the edges touch the hub 0
        src[hub] = 0
        if k % 3 == 2:  # a lone edge to the hub
            src, dst = src[:1] * 0, dst[:1] % 29 + 1
        batches.append((src.tolist(), dst.tolist()))
    _run(batches, checked)
    assert len(checked) >= 12 and sum(t for _, t in checked) > 20


def _daily_batches(path, n: int) -> list[tuple[list, list]]:
    """The first ``n`` rows of SNAP's CollegeMsg log, one (src, dst) batch per day."""
    with gzip.open(path, "rt") as f:
        rows = np.array([line.split() for _, line in zip(range(n), f)], np.int64)
    cuts = np.flatnonzero(np.diff(rows[:, 2] // 86400)) + 1
    return [(r[:, 0].tolist(), r[:, 1].tolist()) for r in np.split(rows, cuts)]


def test_college_msg_daily(checked, college_msg) -> None:
    _run(_daily_batches(college_msg, 2000), checked)
    assert len(checked) > 10 and sum(t for _, t in checked) > 0


def _path(st: EdgeState, first: int, n: int) -> str:
    """The way the CPU count takes for the batch of one group (insert_adj._older_range)."""
    us, vs, ln = st.eu[first:first + n], st.ev[first:first + n], st.ln
    big = us[0] if ln[us[0]] >= ln[vs[0]] else vs[0]
    assert ((us == big) | (vs == big)).all()
    short = int(sum(ln[v if u == big else u] for u, v in zip(us, vs)))
    lone = n == 1
    if ia.PROBE_COST * short <= (2 * short + ln[big] if lone else 2 * ln[big] + short):
        return "probe"
    return "mark short" if lone else "mark long"


@pytest.mark.parametrize("hub_deg, small_deg, lone, way", [
    (100, 2, True, "probe"),
    (20, 5, True, "mark short"),
    (20, 5, False, "mark long"),
    (200, 1, False, "probe"),
])
def test_hub_batch_ways(hub_deg: int, small_deg: int, lone: bool, way: str) -> None:
    """Edges to a hub 0 (neighbours 1 .. hub_deg); the small vertices (from 1000) share
    small_deg of them; the batch is one edge to the hub (``lone``) or three."""
    us, vs = [], []
    for w in range(1, hub_deg + 1):
        us.append(0)
        vs.append(w)
    small = [1000] if lone else [1000, 1001, 1002]
    for x in small:
        for w in range(1, small_deg + 1):
            us.append(w)
            vs.append(x)
    st = EdgeState.from_edges(np.array(us), np.array(vs), np.arange(1, len(us) + 1), 1010)
    st.reserve(1010, len(small))
    a = np.array(small, np.int64)
    b = np.zeros(len(small), np.int64)
    first = st.n
    bad, delta = st.insert(a, b, len(us), par_min=1 << 62)
    assert bad == -1 and delta == len(small) * small_deg
    assert _path(st, first, len(small)) == way
    got = _twin_total(st.off, st.ln, st.nbr, st.val, st.htk, st.htv, st.stamp, st.eu, st.ev,
                      first, len(small), st.marks)
    assert got == delta
    # the same edges, older than the hub's: the stamp tests count nothing
    st2 = EdgeState.from_edges(np.array(us), np.array(vs), np.arange(1, len(us) + 1) + 10,
                               1010)
    st2.reserve(1010, len(small))
    assert st2.insert(a, b, 0, par_min=1 << 62) == (-1, 0)
    assert _twin_total(st2.off, st2.ln, st2.nbr, st2.val, st2.htk, st2.htv, st2.stamp, st2.eu,
                       st2.ev, st2.n - len(small), len(small), st2.marks) == 0


def test_empty_batch() -> None:
    z = np.zeros(4, np.int64)
    assert cia.count_new(z, z, z, z, z, z, z, z, z, 0, 0) == 0


# ----------------------------------------------------------------------------- insert_batch
_CPU_INSERT = ia.insert_batch  # the CPU kernel itself (the fixtures below wrap the module's)
_STATE = ("htk", "htv", "eu", "ev", "stamp", "off", "ln", "cap", "nbr", "val", "marks")


def _table_map(htk, htv) -> dict:
    htk, htv = host(htk), host(htv)
    live = htv != -1
    return dict(zip(htk[live].tolist(), htv[live].tolist()))


def _row_entries(off, ln, nbr, val) -> list:
    """(vertex, neighbour, stamp) of every row entry, sorted."""
    off, ln, nbr, val = host((off, ln, nbr, val))
    xs = np.flatnonzero(ln)
    own = np.repeat(xs, ln[xs])
    pos = np.concatenate([np.arange(off[x], off[x] + ln[x]) for x in xs]) if len(xs) else xs
    return sorted(zip(own.tolist(), nbr[pos].tolist(), val[pos].tolist()))


def _twin_batch(a, b, n_eids, seq, st: dict, used, count=True, limit=1 << 62) -> tuple:
    """The CPU's insert_batch and the twin's on copies of the state ``st`` (name -> array;
    the twin's copies are the backend's arrays); asserts they agree (see cia.insert_batch)
    and returns the CPU's result."""
    cpu = {k: v.copy() for k, v in st.items()}
    gpu = {k: dev(v.copy()) for k, v in st.items()}
    args = ("htk", "htv"), ("eu", "ev", "stamp", "off", "ln", "cap", "nbr", "val")
    out_c = _CPU_INSERT(a, b, *(cpu[k] for k in args[0]), n_eids, seq,
                            *(cpu[k] for k in args[1]), used, cpu["marks"], 0, 2, limit, count)
    out_g = cia.insert_batch(dev(a), dev(b), *(gpu[k] for k in args[0]), n_eids, seq,
                             *(gpu[k] for k in args[1]), used, gpu["marks"], 0, 2, limit,
                             count)
    bad = int(out_c[0])
    assert int(out_g[0]) == bad
    assert int(out_g[5]) == int(out_c[5])
    assert _table_map(gpu["htk"], gpu["htv"]) == _table_map(cpu["htk"], cpu["htv"])
    assert not host(gpu["marks"]).any()
    top = n_eids + (a.shape[0] if bad < 0 else 0)
    for k in ("eu", "ev", "stamp"):
        assert array_equal(gpu[k][:top], cpu[k][:top]), k
    if bad >= 0:  # nothing changed
        assert _table_map(gpu["htk"], gpu["htv"]) == _table_map(st["htk"], st["htv"])
        for k in ("off", "ln", "cap"):
            assert array_equal(gpu[k], st[k]), k
        assert out_g[3] == used
        return out_c, cpu
    nbr_c, val_c, nbr_g, val_g = out_c[1], out_c[2], out_g[1], out_g[2]
    for k in ("ln", "cap"):
        assert array_equal(gpu[k], cpu[k]), k
    assert out_g[3] - out_g[4] == out_c[3] - out_c[4]  # slab entries in rows' rooms
    assert (_row_entries(gpu["off"], gpu["ln"], nbr_g, val_g)
            == _row_entries(cpu["off"], cpu["ln"], nbr_c, val_c))
    if count:  # the listing twin on the same state
        lc = ia.list_new(cpu["off"], cpu["ln"], nbr_c, val_c, cpu["htk"], cpu["htv"],
                         cpu["stamp"], cpu["eu"], cpu["ev"], n_eids, a.shape[0], cpu["marks"])
        lg = cia.list_new(gpu["off"], gpu["ln"], nbr_g, val_g, gpu["htk"], gpu["htv"],
                          gpu["stamp"], gpu["eu"], gpu["ev"], n_eids, a.shape[0])
        assert len(lg[0]) == len(lc[0]) == max(int(out_c[5]), 0) or int(out_c[5]) < 0
        assert (sorted(zip(*(host(x).tolist() for x in lg)))
                == sorted(zip(*(x.tolist() for x in lc))))
    cpu["nbr"], cpu["val"] = nbr_c, val_c
    return out_c, cpu


@pytest.fixture
def twinned(monkeypatch) -> list:
    """Wrap ``insert_batch``: each call also runs the twin on copies of its state and the two
    are compared (:func:`_twin_batch`). Yields the list of (bad, delta) per call."""
    real = _CPU_INSERT
    seen: list = []

    def wrapped(a, b, htk, htv, n_eids, seq, eu, ev, stamp, off, ln, cap, nbr, val, used,
                marks, par_min, threads, limit, count):
        st = dict(zip(_STATE, (htk, htv, eu, ev, stamp, off, ln, cap, nbr, val, marks)))
        (bad, _, _, _, _, delta), _ = _twin_batch(a, b, n_eids, seq, st, used, count, limit)
        out = real(a, b, htk, htv, n_eids, seq, eu, ev, stamp, off, ln, cap, nbr, val, used,
                   marks, par_min, threads, limit, count)
        assert (int(out[0]), int(out[5])) == (bad, delta)
        seen.append((int(bad), int(delta)))
        return out

    monkeypatch.setattr(ia, "insert_batch", wrapped)
    monkeypatch.setattr(insert_only, "RECOUNT_RATIO", 1 << 62)
    return seen


def test_insert_batch_random_stream(twinned) -> None:
    rng = np.random.default_rng(11)
    batches = []
    for _ in range(10):
        m = int(rng.integers(1, 40))
        src = rng.integers(0, 30, m)
        dst = rng.integers(0, 30, m)
        src[rng.random(m) < 0.4] = 0  # a hub
        batches.append((src.tolist(), dst.tolist()))
    _run(batches, twinned)
    assert len(twinned) >= 8 and sum(t for _, t in twinned) > 20


def test_insert_batch_college_msg(twinned, college_msg) -> None:
    _run(_daily_batches(college_msg, 1500), twinned)
    assert len(twinned) >= 8 and sum(t for _, t in twinned) > 0


def _small_state() -> tuple[dict, int]:
    us = np.array([0, 0, 1, 2, 5], np.int64)
    vs = np.array([1, 2, 2, 3, 6], np.int64)
    s = EdgeState.from_edges(us, vs, np.arange(1, 6), 64)
    s.reserve(64, 64)
    return {k: getattr(s, k) for k in _STATE}, s.used


@pytest.mark.parametrize("a, b, bad", [
    ([7, 8, 9, 8, 10], [8, 9, 10, 7, 11], 3),       # row 3 repeats row 0 (reversed)
    ([7, 2, 9, 7], [8, 1, 10, 8], 1),                # row 1 is stored, row 3 repeats row 0
    ([7, 9, 3, 9], [8, 10, 2, 10], 2),               # row 2 stored, row 3 repeats row 1
    ([20] * 40, [21] * 40, 1),                       # one key 40 times
    ([4, 3, 5], [1, 4, 4], -1),                      # no conflict: a triangle closes
])
def test_insert_batch_conflicts(a: list, b: list, bad: int) -> None:
    st, used = _small_state()
    out, _ = _twin_batch(np.array(a, np.int64), np.array(b, np.int64), 5, 5, st, used)
    assert int(out[0]) == bad
