"""The CUDA twins of the offline window evaluator's kernel and of the sliding window's
triangle work (births, revisits of extended edges) in Numba's CUDA simulator, against the CPU.

Run by ``tests/test_cuda_sim_stamp.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``; to run
it directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_stamp_cases.py

Random event logs and window states, sizes around the launch boundaries (32 threads per block,
4 blocks); each twin must equal its CPU kernel. (The file's name is historical: it held the
twins of the sorted-run insert-only kernels, ``kernels/cuda_stamp.py``, since removed.)
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
from gpu_ivm.kernels import stamp_kernels as cpu  # noqa: E402

_boundary_launch = pytest.fixture(autouse=True)(boundary_launch)


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
