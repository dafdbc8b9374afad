"""The CUDA twins of the insert-only count kernel and of the offline window evaluator's kernel
in Numba's CUDA simulator, against the CPU.

Run by ``tests/test_cuda_sim_stamp.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``; to run
it directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_stamp_cases.py

Random symmetric stamped graphs in several sorted runs (built by inserting batches, as the
insert-only engine does), batch sizes around the launch boundaries (32 threads per block, 4
blocks); the twin must equal the CPU kernel and a brute-force count of the triangles each
batch edge closes with older edges.
"""

from __future__ import annotations

import os

import numba
import numpy as np
import pytest
from device_arrays import dev, host

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from cuda_sim_launch import boundary_launch  # noqa: E402
from gpu_ivm.kernels import cuda_stamp  # noqa: E402
from gpu_ivm.kernels import stamp_kernels as cpu  # noqa: E402

from gpu_ivm.encoding import pack  # noqa: E402
from gpu_ivm.store import ZStore  # noqa: E402

SIZES = [0, 1, 31, 32, 33, 130]


_boundary_launch = pytest.fixture(autouse=True)(boundary_launch)


def stamped_graph(rng, nv: int, m: int, nbatches: int):
    """(store, stamps by undirected edge, the last batch's edges u < v and stamps)."""
    st = ZStore(nv)
    stamp: dict = {}
    seq = 0
    last = None
    for _ in range(nbatches):
        cand = rng.integers(0, nv, (m, 2))
        new = sorted({(int(min(a, b)), int(max(a, b))) for a, b in cand.tolist()
                      if a != b} - set(stamp))
        if not new:
            continue
        us = np.array([a for a, _ in new], np.int64)
        vs = np.array([b for _, b in new], np.int64)
        ss = seq + 1 + rng.permutation(len(new)).astype(np.int64)
        seq += len(new)
        stamp.update({e: int(x) for e, x in zip(new, ss.tolist())})
        keys = np.concatenate([pack(us, vs), pack(vs, us)])
        vals = np.concatenate([ss, ss])
        o = np.argsort(keys)
        st.add(keys[o], vals[o])
        last = (us, vs, ss)
    return st, stamp, last


def brute(stamp: dict, u: int, v: int, s: int) -> int:
    nu = {b if a == u else a for (a, b) in stamp if u in (a, b)}
    c = 0
    for w in nu:
        e1 = (min(u, w), max(u, w))
        e2 = (min(v, w), max(v, w))
        if e2 in stamp and stamp[e1] < s and stamp[e2] < s:
            c += 1
    return c


@pytest.mark.parametrize("n", SIZES)
def test_closed_by_batch_twin(n: int, monkeypatch) -> None:
    from gpu_ivm import store

    monkeypatch.setattr(store, "GROWTH", 0)  # keep every batch in its own run
    rng = np.random.default_rng(n)
    nv = 12 if n < 40 else 40
    st, stamp, _ = stamped_graph(rng, nv, max(n, 8), 5)
    edges = list(stamp)
    pick = rng.integers(0, len(edges), n) if n else np.zeros(0, np.int64)
    us = np.array([edges[i][0] for i in pick.tolist()], np.int64)
    vs = np.array([edges[i][1] for i in pick.tolist()], np.int64)
    ss = np.array([stamp[edges[i]] for i in pick.tolist()], np.int64)
    out_cpu = np.full(n, -1, np.int64)
    out_gpu = dev(np.full(n, -1, np.int64))  # the twin's arrays: the backend's
    cpu.closed_by_batch_serial(st.nt(), st.live, us, vs, ss, out_cpu,
                               np.zeros(st.id_capacity + 1, np.int64))
    cuda_stamp.closed_by_batch(dev(st.nt()), *dev((st.live, us, vs, ss)), out_gpu)
    expect = [brute(stamp, u, v, s) for u, v, s in zip(us.tolist(), vs.tolist(), ss.tolist())]
    assert host(out_gpu).tolist() == out_cpu.tolist() == expect
    assert st.nruns > 1 or n == 0


def test_twin_rejects_bad_arrays() -> None:
    rng = np.random.default_rng(1)
    st, _, (us, vs, ss) = stamped_graph(rng, 10, 10, 2)
    out = dev(np.zeros(us.shape[0], np.int32))
    with pytest.raises(TypeError, match="out must have dtype int64"):
        cuda_stamp.closed_by_batch(dev(st.nt()), *dev((st.live, us, vs, ss)), out)


@pytest.mark.parametrize("seed", range(4))
def test_offline_twin_matches_cpu_and_offline_counts(seed):
    """The offline evaluator's kernel and its CUDA twin add the same alive steps to the
    difference array, whose prefix sums are offline_counts' per-step triangles (oriented
    union graphs of random event logs, entries around the launch boundaries)."""
    from gpu_ivm.kernels import cuda_offline

    from gpu_ivm.window_offline import _oriented, offline_counts

    rng = np.random.default_rng(seed)
    n_ev = [60, 120, 150, 400][seed]
    src = rng.integers(0, 12, n_ev)
    dst = rng.integers(0, 12, n_ev)
    t = rng.integers(0, 100, n_ev)
    window, step = int(rng.integers(20, 60)), int(rng.integers(3, 12))
    t0 = int(t.min())
    K = (int(t.max()) - t0) // step + 1
    first = (t - t0) // step + 1
    last = np.minimum((t + window - t0) // step, K)
    keep = (src != dst) & (last >= first)
    a, b = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    keys, ptr, ss, se, _ = cpu.lifespan_segments(a, b, first[keep], last[keep], K)
    indptr, indices, edge_of = _oriented(keys, 12)
    want = np.zeros(K + 2, np.int64)
    cpu.lifespan_triangles(indptr, indices, edge_of, ptr, ss, se, want)
    got = dev(np.zeros(K + 2, np.int64))
    cuda_offline.lifespan_triangles(*dev((indptr, indices, edge_of, ptr, ss, se)), got)
    got = host(got)
    assert got.tolist() == want.tolist()
    res = offline_counts(src, dst, t, window=window, step=step)
    assert np.cumsum(got)[1:K + 1].tolist() == res.triangles.tolist()
    assert res.triangles.max() > 0  # the workload has triangles


@pytest.mark.parametrize("n", SIZES)
def test_list_twin_matches_cpu_listing(n, monkeypatch):
    """The listing twin gives, edge by edge, the triangles (third vertex and the two other
    edges' stamps) of the CPU listing kernel, as many as the count twin counted, each stamp
    that of its edge and below the closing edge's."""
    from gpu_ivm import store

    monkeypatch.setattr(store, "GROWTH", 0)  # keep every batch in its own run
    rng = np.random.default_rng(1000 + n)
    st, stamp, _ = stamped_graph(rng, 12 if n < 40 else 40, max(n, 8), 5)
    edges = list(stamp)
    pick = rng.integers(0, len(edges), n) if n else np.zeros(0, np.int64)
    us = np.array([edges[i][0] for i in pick.tolist()], np.int64)
    vs = np.array([edges[i][1] for i in pick.tolist()], np.int64)
    ss = np.array([stamp[edges[i]] for i in pick.tolist()], np.int64)
    counts = dev(np.zeros(n, np.int64))
    args = (dev(st.nt()), *dev((st.live, us, vs, ss)))  # the twins' arrays: the backend's
    cuda_stamp.closed_by_batch(*args, counts)
    e, w, s1, s2 = host(cuda_stamp.closed_by_batch_list(*args, counts))
    counts = host(counts)
    marks = np.zeros(st.id_capacity + 1, np.int64)
    ce, cw, c1, c2 = cpu.closed_by_batch_list(st.nt(), st.live, us, vs, ss, marks)
    got = sorted(zip(e.tolist(), w.tolist(), s1.tolist(), s2.tolist()))
    want = sorted(zip(ce.tolist(), cw.tolist(), c1.tolist(), c2.tolist()))
    assert got == want and len(got) == int(counts.sum())
    for i, x, a, b in want:
        assert a == stamp[(min(us[i], x), max(us[i], x))] < ss[i]
        assert b == stamp[(min(vs[i], x), max(vs[i], x))] < ss[i]
    if n >= 31:
        assert got  # the workload closes triangles


def _window_states(seed: int):
    """Sliding windows over random event logs, paused after each of several pushes (real
    adjacencies with expired edges, hash tables, ends and stamps)."""
    from gpu_ivm.sliding_window import SlidingWindow

    rng = np.random.default_rng(seed)
    n = 400
    src, dst = rng.integers(0, 14, n), rng.integers(0, 14, n)
    t = np.sort(rng.integers(0, 400, n))
    sw = SlidingWindow(window=int(rng.integers(30, 90)), step=int(rng.integers(4, 15)), start=0)
    for part in np.array_split(np.arange(n), 5):
        sw.push({"src": src[part], "dst": dst[part], "time": t[part]})
        yield sw, rng


def _window_arrays(sw):
    n = sw._n_eids
    adj = (sw._aoff, sw._aln, sw._anbr, sw._aval)
    return n, adj, (sw._htk, sw._htv), np.zeros(sw._aln.shape[0] + 1, np.int64)


@pytest.mark.parametrize("seed", range(3))
def test_window_birth_twin_matches_cpu(seed):
    """The window's birth count (CPU: common_pairs through marks, then birth_triangles) and
    its CUDA twin (shorter row walked, the edge table probed) give the same new triangles and
    the same calendar, for born sets of every size around the launch boundaries."""
    from gpu_ivm.kernels import cuda_window
    from gpu_ivm.kernels import window_adj as wa
    from gpu_ivm.kernels import window_step as wk

    found = 0
    for sw, rng in _window_states(seed):
        n, adj, table, marks = _window_arrays(sw)
        for size in (1, 33, n):
            born = rng.choice(n, min(size, n), replace=False).astype(np.int64)
            end, stamp = sw._cend.copy(), sw._stamp.copy()
            want_cal = np.zeros(sw._ring, np.int64)
            o, c, y, z = wa.common_pairs(*adj, sw._eu[born], sw._ev[born], marks)
            want = wk.birth_triangles(o, c, y, z, born, sw.k, end, stamp, want_cal)
            got_cal = dev(np.zeros(sw._ring, np.int64))
            got = cuda_window.birth_triangles(dev(adj), dev(table), *dev((sw._eu, sw._ev, born)),
                                              sw.k, *dev((end, stamp)), got_cal)
            assert (got, host(got_cal).tolist()) == (want, want_cal.tolist())
            found += want
    assert found > 0  # the states have triangles


@pytest.mark.parametrize("seed", range(3))
def test_window_extend_twin_matches_cpu(seed):
    """The same for the revisits of extended edges (extend_triangles): equal calendars."""
    from gpu_ivm.kernels import cuda_window
    from gpu_ivm.kernels import window_adj as wa
    from gpu_ivm.kernels import window_step as wk

    moved = 0
    for sw, rng in _window_states(seed):
        n, adj, table, marks = _window_arrays(sw)
        xs = rng.choice(n, min(40, n), replace=False).astype(np.int64)
        end = sw._cend.copy()
        prev = end.copy()
        end[xs] = prev[xs] + rng.integers(1, 4, xs.shape[0])
        base = 7
        ext = np.zeros(end.shape[0], np.int64)
        ext[xs] = base + 1 + rng.permutation(xs.shape[0])
        want_cal = np.zeros(sw._ring, np.int64)
        o, c, y, z = wa.common_pairs(*adj, sw._eu[xs], sw._ev[xs], marks)
        wk.extend_triangles(o, c, y, z, xs, sw.k, end, prev, ext, base, want_cal)
        got_cal = dev(np.zeros(sw._ring, np.int64))
        cuda_window.extend_triangles(dev(adj), dev(table), *dev((sw._eu, sw._ev, xs)), sw.k,
                                     *dev((end, prev, ext)), base, got_cal)
        assert host(got_cal).tolist() == want_cal.tolist()
        moved += int(np.abs(want_cal).sum())
    assert moved > 0
