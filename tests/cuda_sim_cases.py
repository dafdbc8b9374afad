"""The cuda kernel set in Numba's CUDA simulator, against the CPU kernels.

Run by ``tests/test_cuda_sim.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1`` (the variable
must be set before numba is imported, and the main test process imports numba without it);
pytest does not collect this file by itself (its name does not match ``test_*.py``). To run it
directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_cases.py

Every CUDA kernel is compared with its CPU counterpart on random inputs at sizes around the
launch boundaries (0, 1, 31, 32, 33, 1023, 1025 with 32 threads per block and a 4-block grid,
so both block and grid-stride boundaries are crossed); stores built through ``ZStore`` with the
cuda kernel set must stay bit-identical to CPU-built twins; then both engines run random
streams on both backends and must agree after every batch, with ``check_invariants()``.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterator
from fractions import Fraction
from functools import partial

import numba
import numpy as np
import pytest
from conftest import tiny_storage
from device_arrays import ON_DEVICE, InterfaceOnly, array_equal, dev, device_name, host, like
from oracle import GraphOracle
from streams import graph_batches, insert_only_relation_batches

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from gpu_ivm.kernels import cuda_launch  # noqa: E402
from gpu_ivm.kernels import delta_kernels as cpu_delta  # noqa: E402
from gpu_ivm.kernels import hashmap as cpu_hash  # noqa: E402
from gpu_ivm.kernels import phase_kernels as cpu_phase  # noqa: E402
from gpu_ivm.kernels import query_kernels as cpu_query  # noqa: E402
from gpu_ivm.kernels import static_kernels as cpu_static  # noqa: E402
from gpu_ivm.kernels import store_kernels as cpu_store  # noqa: E402
from gpu_ivm.kernels import view_kernels as cpu_view  # noqa: E402
from gpu_ivm.kernels.cuda_static import edge_triangles  # noqa: E402
from gpu_ivm.kernels.lsm import SENTINEL, real_end, run_mask, run_range  # noqa: E402

from gpu_ivm import GraphEngine, RelationEngine, compact  # noqa: E402
from gpu_ivm.backend import get_backend  # noqa: E402
from gpu_ivm.queries import results as rs  # noqa: E402
from gpu_ivm.queries.maintain import FreeQueries  # noqa: E402
from gpu_ivm.static import (  # noqa: E402
    _ids,
    _oriented_csr,
    count_triangles_arrays,
    count_triangles_backend,
    simple_graph,
)
from gpu_ivm.store import ZStore  # noqa: E402

# the cpu engines here are the stores' twins of the device engines (same N, partitions and
# stores): they keep their graphs in the stores, not in the compact form (gpu_ivm/compact.py,
# a cpu engine's way for small graphs; its own tests are tests/test_compact.py)
compact.COMPACT_MAX = 0

SIZES = [0, 1, 31, 32, 33, 1023, 1025]
BACKEND = get_backend("cuda")
K = BACKEND.kernels


@pytest.fixture(autouse=True, scope="session")
def _fast_thread_switches() -> Iterator[None]:
    """The simulator runs one Python thread per GPU thread and busy-polls them at every
    ``syncthreads``; a short GIL switch interval makes that 3-5x faster."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def _set_launch(tpb: int, max_blocks: int, scan_tpb: int) -> Iterator[None]:
    cfg = cuda_launch.CONFIG
    saved = (cfg.tpb, cfg.max_blocks, cfg.scan_tpb)
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = tpb, max_blocks, scan_tpb
    yield
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = saved


@pytest.fixture
def boundary_launch() -> Iterator[None]:
    """32 threads per block, 4 blocks: sizes 31/32/33 cross a block, 1023/1025 a grid stride."""
    yield from _set_launch(32, 4, 32)


@pytest.fixture
def small_launch() -> Iterator[None]:
    """A tiny grid for the engine runs (the simulator's cost grows with threads per launch)."""
    yield from _set_launch(8, 2, 8)


@pytest.fixture
def query_launch() -> Iterator[None]:
    """``small_launch`` with scan blocks of 2 threads, for the free-query engine runs: their
    time goes into the scans' ``syncthreads`` (compact, collect_live: hundreds of scans per
    stream); the scan itself is checked at full block sizes by ``test_exclusive_scan``."""
    yield from _set_launch(8, 2, 2)


@pytest.fixture(params=["unpadded", "padded"])
def store_layout(request, monkeypatch) -> str:
    """Both twins' store layout: a device store's padded runs (``PAD_HOST_RUNS``: host
    stores take it too) or the host's exact runs. On a device only "padded" runs: its stores
    are always padded, so a host twin must be as well to match bit for bit."""
    from gpu_ivm import store as store_mod

    if request.param == "unpadded" and ON_DEVICE:
        pytest.skip("a device store is always padded")
    monkeypatch.setattr(store_mod, "PAD_HOST_RUNS", request.param == "padded")
    return request.param


def pk(a, b) -> np.ndarray:
    return (np.asarray(a, np.int64) << 32) | np.asarray(b, np.int64)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if x.shape[0] else x


def store_state(s: ZStore) -> tuple:
    """The physical state of a store (only the used parts of its arrays)."""
    return tuple(host(x) for x in (
        s.keys[: s.used], s.vals[: s.used], np.asarray(s.bounds), np.asarray(s.dirptr),
        np.asarray(s.dirlen), s.dirs[: s.dirs_used], s.runmask, s.live, s.tomb,
        np.asarray([s.size])))


def assert_same_store(a: ZStore, b: ZStore, what: str = "store") -> None:
    for i, (x, y) in enumerate(zip(store_state(a), store_state(b))):
        assert array_equal(x, y), f"{what}: field {i} differs"


def row_tables(s: ZStore) -> dict:
    """The row hash tables decoded: {x: {c: m}} with the deleted entries (m = 0) left out
    (slot positions differ with the slab's alignment, the contents must not)."""
    out = {}
    ioff, itab, imask = host(s.ioff), host(s.itab), host(s.imask)
    for x in np.flatnonzero(ioff >= 0).tolist():
        t = itab[ioff[x] : ioff[x] + imask[x] + 1]
        t = t[t != -1]
        vals = (t << 32) >> 32
        out[x] = {int(c): int(v) for c, v in zip((t >> 32) & 0xFFFFFFFF, vals) if v}
    return out


def random_store(rng, nfirst: int, nkeys: int, kernels=None, hub_p: float = 0.0) -> ZStore:
    """A store with several runs, tombstones and (after compaction) padding; with ``hub_p``,
    that share of the keys has first key 0, 1 or 2 (long rows)."""
    s = ZStore(nfirst, kernels)
    for _ in range(4):
        firsts = rng.integers(0, nfirst, nkeys)
        if hub_p:
            firsts = np.where(rng.random(nkeys) < hub_p, rng.integers(0, 3, nkeys), firsts)
        keys = sorted_unique(pk(firsts, rng.integers(0, 3 * nfirst, nkeys)))
        old = s.get(keys)
        d = rng.integers(1, 4, keys.shape[0])
        d[(old != 0) & (rng.random(keys.shape[0]) < 0.4)] *= 0
        d = np.where((old != 0) & (d == 0), -old, d)
        s.add(keys, d)
    return s


# ----------------------------------------------------------------------------- the kernel set


def test_kernel_set_matches_cpu_signatures() -> None:
    """Every function of the cuda set exists on the CPU side with the same parameters."""
    from gpu_ivm.kernels import cuda_kernels as ck

    for part, cpu, names in (("store", cpu_store, ck.STORE_FUNCTIONS),
                             ("delta", cpu_delta, ck.DELTA_FUNCTIONS),
                             ("view", cpu_view, ck.VIEW_FUNCTIONS),
                             ("query", cpu_query, ck.QUERY_FUNCTIONS),
                             ("hash", cpu_hash, ck.HASH_FUNCTIONS)):
        for name in names:
            if not hasattr(cpu, name):
                continue
            g = getattr(getattr(K, part), name)
            c = getattr(cpu, name)
            gp = list(inspect.signature(getattr(g, "py_func", g)).parameters)
            cp = list(inspect.signature(getattr(c, "py_func", c)).parameters)
            assert gp == cp, f"{part}.{name}: {gp} != {cp}"
    for name in ck._host_static():  # the host functions of the static part are the CPU's
        assert getattr(K.static, name) is getattr(cpu_static, name), name
    for name in ("count_oriented", "count_oriented_cycles", "in_tails", "n_blocks",
                 "relation_triangle_kernel", "count_oriented_edges", "edge_triangles"):
        assert callable(getattr(K.static, name)), name
    if ON_DEVICE:  # a device's array module is CuPy, the simulator's NumPy
        import cupy as xp
    else:
        xp = np
    assert BACKEND.name == "cuda" and BACKEND.xp is xp and BACKEND.device == device_name()


@pytest.mark.parametrize("n", SIZES + [1024, 2000])
@pytest.mark.parametrize("blocks", [4, 64])
def test_exclusive_scan(n: int, blocks: int) -> None:
    """Multi-block scan: 4 blocks (many tiles per chunk) and up to 32 blocks (= scan_tpb, so
    the one-block scan of chunk sums is full)."""
    for _ in _set_launch(32, blocks, 32):
        rng = np.random.default_rng(n)
        vals = rng.integers(-5, 9, n).astype(np.int64)
        for scan in (cuda_launch.exclusive_scan, cuda_launch.kernel_scan):  # CUB / kernels
            out = scan(dev(vals))
            assert out.shape == (n + 1,)
            assert array_equal(out, np.r_[0, np.cumsum(vals)])
        # flags written after a leading 0: one cumsum of the backend's array, or the kernels
        # on any other device array
        padded = np.r_[0, vals].astype(np.int64)
        for arr in (dev(padded), numba.cuda.to_device(padded)):
            out = cuda_launch.padded_scan(arr)
            assert out.shape == (n + 1,)
            assert array_equal(out, np.r_[0, np.cumsum(vals)])


@pytest.mark.parametrize("n", [0, 1, 33, 700])
def test_launch_through_the_cuda_array_interface(n: int) -> None:
    """Kernels launched with interface-only arrays inside bundles (the hardware path: CuPy or
    cuDF columns), zero-length ones included, read and write the memory in place."""
    rng = np.random.default_rng(n)
    vals = rng.integers(-5, 9, n).astype(np.int64)
    tpb = cuda_launch.CONFIG.scan_tpb
    chunk_sums, scan_sums, chunk_scan = cuda_launch._scan_kernels(tpb)
    sums = np.full(2, -1, np.int64)
    out = np.full(n + 1, -7, np.int64)
    chunk = max(n, 1)
    # one interface per array (on a device each holds its own device copy; host() reads it)
    i_vals, i_sums, i_out = InterfaceOnly(vals), InterfaceOnly(sums), InterfaceOnly(out)
    cuda_launch.launch(chunk_sums, 1, tpb, (i_vals, i_sums), n, chunk)
    assert host(i_sums)[0] == vals.sum()  # written through the interface's pointer
    cuda_launch.launch(scan_sums, 1, tpb, (i_sums,), 1)
    assert host(i_sums).tolist() == [0, vals.sum()]
    cuda_launch.launch(chunk_scan, 1, tpb, (i_vals, i_sums, i_out), n, chunk)
    assert array_equal(host(i_out), np.r_[0, np.cumsum(vals)])
    scanned = cuda_launch.exclusive_scan(InterfaceOnly(vals))
    assert array_equal(scanned, np.r_[0, np.cumsum(vals)])


def test_counter_scope_hands_out_distinct_zeroed_slots() -> None:
    """Inside a scope the atomics' counters are disjoint zeroed slices of one buffer (a new
    zeroed buffer once it runs out); each thread has its own scopes; outside, fresh zeros."""
    import threading

    with cuda_launch.counter_scope(8):
        a, b = cuda_launch.counters(5), cuda_launch.counters(3)
        a[:] = 1  # a kernel's atomics write into its slots only
        assert array_equal(b, np.zeros(3, np.int64))
        c = cuda_launch.counters(4)  # 8 slots used: a fresh buffer
        assert array_equal(c, np.zeros(4, np.int64))
        seen = []
        t = threading.Thread(target=lambda: seen.append(cuda_launch._scopes()))
        t.start()
        t.join()
        assert seen == [[]] and len(cuda_launch._scopes()) == 1  # the other thread's: empty
    assert cuda_launch._scopes() == []
    assert array_equal(cuda_launch.counters(2), np.zeros(2, np.int64))


def test_store_bundle_converted_once() -> None:
    """``ZStore.nt`` hands the kernels its arrays in launch form (``device_bundle``): an
    interface-only array becomes a view of the same memory (a NumPy view here, a numba device
    array on a device) once, and launches then take it as it is; arrays already in that form
    pass through."""
    from gpu_ivm.kernels import cuda_store

    vals = np.arange(5, dtype=np.int64)
    plain = dev(np.zeros(3, np.int64))
    out = K.store.device_bundle((InterfaceOnly(vals), plain))
    if ON_DEVICE:  # a CuPy array becomes a numba device array over the same memory
        assert out[1].__cuda_array_interface__["data"][0] == \
            plain.__cuda_array_interface__["data"][0] and out[1].shape == plain.shape
    else:  # the simulator's device arrays are NumPy arrays: passed through
        assert out[1] is plain
    assert array_equal(out[0], vals)
    again = cuda_launch.launch_args(out)  # a launch converts nothing more
    assert all(a is b for a, b in zip(again, out))
    s = ZStore.from_sorted(dev(np.array([(1 << 32) | 2], np.int64)), dev(np.array([1])), 4,
                           K)
    assert all(a is cuda_launch.device_view(a) for a in s.nt())
    saved = cuda_store.CACHE_VIEWS
    cuda_store.CACHE_VIEWS = False
    try:
        raw = (InterfaceOnly(vals),)
        assert K.store.device_bundle(raw) is raw
    finally:
        cuda_store.CACHE_VIEWS = saved


def test_launch_refuses_strided_interfaces() -> None:
    """A strided view would be read as if contiguous: refused before the launch (the
    simulator's host view). On a device the interface becomes a numba device array, which
    indexes through the strides: it must read the strided elements, not contiguous ones."""
    a = np.arange(8, dtype=np.int64)
    strided = InterfaceOnly(a[::2], strides=(16,))
    if ON_DEVICE:
        assert host(cuda_launch.device_view(strided)).tolist() == a[::2].tolist()
        return
    with pytest.raises(TypeError, match="C-contiguous"):
        cuda_launch.device_view(strided)


# ----------------------------------------------------------------------------- hash map


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_hash_insert_and_lookup(n: int) -> None:
    """Concurrent inserts (slots claimed by compare-and-swap) fill a table in which every key
    is found with its value; a small table forces long collision chains. Checked against a
    dict, and the CPU lookup reads the table the device filled (one layout)."""
    rng = np.random.default_rng(300 + n)
    keys = rng.choice(1 << 40, 2 * n, replace=False).astype(np.int64)
    new, other = keys[:n], keys[n:]
    vals = rng.permutation(n).astype(np.int64)
    cap = 16
    while cap < 2 * n:
        cap *= 2
    tk = np.zeros(cap, np.int64)
    tv = np.full(cap, cpu_hash.EMPTY, np.int64)
    K.hash.insert(tk, tv, new, vals)
    assert int((tv != cpu_hash.EMPTY).sum()) == n
    q = np.concatenate([new, other])[rng.permutation(2 * n)]
    want = np.array([dict(zip(new.tolist(), vals.tolist())).get(k, -1) for k in q.tolist()],
                    np.int64)
    got = np.full(q.shape[0], -7, np.int64)
    K.hash.lookup(tk, tv, q, got)
    assert array_equal(got, want)
    host = np.empty(q.shape[0], np.int64)
    cpu_hash.lookup(tk, tv, q, host)
    assert array_equal(host, want)


# ----------------------------------------------------------------------------- store kernels


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_probes(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    s = random_store(rng, 40, 300)
    st = s.nt()
    ks, _ = s.items()
    q = np.concatenate([ks, pk(rng.integers(0, 45, 2 * n), rng.integers(0, 130, 2 * n))])
    q = q[rng.integers(0, q.shape[0], n)] if q.shape[0] else q[:0]
    for fn in ("probe_many", "probe_many_par"):
        want = np.empty(n, np.int64)
        got = np.full(n, -7, np.int64)
        getattr(cpu_store, fn)(st, q, want)
        getattr(K.store, fn)(st, q, got)
        assert array_equal(want, got), fn
    qs = sorted_unique(q)
    want = np.empty(qs.shape[0], np.int64)
    got = np.empty(qs.shape[0], np.int64)
    cpu_store.probe_sorted(st, qs, want)
    K.store.probe_sorted(st, qs, got)
    assert array_equal(want, got)


def _copy_st(st: tuple) -> tuple:
    return tuple(a.copy() for a in st)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_apply_updates(n: int) -> None:
    rng = np.random.default_rng(200 + n)
    s = random_store(rng, 40, 400)
    ks, vs = s.items()
    pick = rng.random(ks.shape[0]) < 0.5
    cand = np.concatenate([ks[pick], pk(rng.integers(0, 40, 3 * n), rng.integers(0, 200,
                                                                                3 * n))])
    keys = sorted_unique(cand)[:n]
    old = s.get(keys)
    d = rng.integers(-3, 4, keys.shape[0])
    d[rng.random(keys.shape[0]) < 0.3] = 0
    d = np.where((old != 0) & (rng.random(keys.shape[0]) < 0.3), -old, d)  # deletes
    outs = []
    for kern in (cpu_store, K.store):
        st = _copy_st(s.nt())
        live, tomb = s.live.copy(), s.tomb.copy()
        o = np.full(keys.shape[0], -9, np.int64)
        new = np.zeros(keys.shape[0], np.bool_)
        r = kern.apply_updates(st, live, tomb, keys, d, o, new)
        outs.append((tuple(int(v) for v in r), st[1], live, tomb, o, new))
    for a, b in zip(*outs):
        assert array_equal(a, b)
    # (new keys, change of the number of nonzero keys) against the values before and after
    n_new, size_change = outs[0][0]
    assert n_new == int(((old == 0) & (d != 0) & ~np.isin(keys, ks_all(s))).sum())
    assert size_change == int(np.count_nonzero(old + d) - np.count_nonzero(old))


def ks_all(s: ZStore) -> np.ndarray:
    """Every stored key of ``s``, tombstones included."""
    return np.concatenate([s.keys[s.bounds[j]:s.bounds[j + 1]] for j in range(s.nruns)])


def _two_runs(rng, n: int):
    """Runs [0, na) and [na, n) with unique keys across runs, tombstones and padding."""
    nfirst = 12
    keys = sorted_unique(pk(rng.integers(0, nfirst, 3 * n + 3), rng.integers(0, 4 * n + 8,
                                                                             3 * n + 3)))
    keys = keys[rng.permutation(keys.shape[0])[:n]]
    in_a = rng.random(keys.shape[0]) < 0.6
    a, b = np.sort(keys[in_a]), np.sort(keys[~in_a])
    if a.shape[0] > 2:  # padding at the end of the first key of A's last entry
        x = a[-1] >> 32
        a = np.r_[a[:-2], pk([x, x], [SENTINEL, SENTINEL])]
    allk = np.r_[a, b].astype(np.int64)
    vals = rng.integers(1, 5, allk.shape[0]).astype(np.int64)
    vals[rng.random(allk.shape[0]) < 0.25] = 0
    vals[(allk & 0xFFFFFFFF) == SENTINEL] = 0
    return allk, vals, a.shape[0], nfirst


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_merge_runs(n: int) -> None:
    rng = np.random.default_rng(300 + n)
    keys, vals, na, nfirst = _two_runs(rng, n)
    j = 3
    outs = []
    for kern in (cpu_store, K.store):
        k2 = np.r_[np.full(5, -1, np.int64), keys, np.full(4, -2, np.int64)]
        v2 = np.r_[np.zeros(5, np.int64), vals, np.zeros(4, np.int64)]
        tomb = np.full(nfirst, 1000, np.int64)
        runmask = np.full(nfirst, 0b10111, np.int64)
        w = kern.merge_runs(k2, v2, 5, 5 + na, 5 + n, tomb, runmask, j)
        outs.append((int(w), k2[: int(w)], v2[: int(w)], tomb, runmask))
    for a, b in zip(*outs):
        assert array_equal(a, b)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_run_bits_directory_firsts(n: int) -> None:
    rng = np.random.default_rng(400 + n)
    keys = np.r_[np.zeros(3, np.int64),
                 sorted_unique(pk(rng.integers(0, 50, n), rng.integers(0, 9 * n + 9, n)))]
    while keys.shape[0] < n + 3:
        keys = np.r_[keys, keys[-1] + 1]
    s, e = 3, n + 3
    cap = int(keys[-1] >> 32) + 2
    for j in (0, 5):
        want = np.full(cap, 0b1000000, np.int64)
        got = want.copy()
        cpu_store.set_run_bits(keys, s, e, want, j)
        K.store.set_run_bits(keys, s, e, got, j)
        assert array_equal(want, got)
    nkeys = int(keys[e - 1] >> 32) + 1 if n else 0
    want = np.empty(nkeys + 1, np.int64)
    got = np.full(nkeys + 1, -1, np.int64)
    cpu_store.build_directory(keys, s, e, nkeys, want)
    K.store.build_directory(keys, s, e, nkeys, got)
    assert array_equal(want, got)
    run = np.ascontiguousarray(keys[s:e])
    assert array_equal(cpu_store.sorted_unique_firsts(run), K.store.sorted_unique_firsts(run))
    want = np.zeros(cap, np.int64)
    got = np.zeros(cap, np.int64)
    cpu_store.first_key_counts(run, n, want)
    K.store.first_key_counts(run, n, got)
    assert array_equal(want, got)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_rows_collect_compact(n: int) -> None:
    rng = np.random.default_rng(500 + n)
    nfirst = max(n, 1) + 3
    firsts = np.repeat(np.arange(nfirst), rng.integers(1, 4, nfirst))
    keys = sorted_unique(pk(firsts, rng.integers(0, 50, firsts.shape[0])))
    vals = rng.integers(1, 4, keys.shape[0]).astype(np.int64)
    s = ZStore.from_sorted(keys, vals, nfirst)
    dele = keys[rng.random(keys.shape[0]) < 0.4]
    s.add(dele, -s.get(dele))  # tombstones in place
    st = s.nt()
    xs = rng.integers(0, nfirst + 2, n)
    cw, cg = np.empty(n, np.int64), np.empty(n, np.int64)
    cpu_store.count_rows(st, xs, cw)
    K.store.count_rows(st, xs, cg)
    assert array_equal(cw, cg)
    ptr = np.r_[0, np.cumsum(cw)].astype(np.int64)
    fw = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
    fg = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
    cpu_store.fill_rows(st, xs, ptr, *fw)
    K.store.fill_rows(st, xs, ptr, *fg)
    assert array_equal(fw[0], fg[0]) and array_equal(fw[1], fg[1])
    # collect_live over a window of exactly n physical entries
    lo = 1 if s.used > n else 0
    hi = min(lo + n, s.used)
    outs = []
    for kern in (cpu_store, K.store):
        ok = np.full(n + 1, -3, np.int64)
        ov = np.full(n + 1, -3, np.int64)
        w = kern.collect_live(s.keys, s.vals, lo, hi, ok, ov)
        outs.append((int(w), ok[: int(w)], ov[: int(w)]))
    for a, b in zip(*outs):
        assert array_equal(a, b)
    # per-key compaction of n distinct first keys
    xs_u = np.arange(min(n, nfirst), dtype=np.int64)
    outs = []
    for kern in (cpu_store, K.store):
        st2 = _copy_st(st)
        tomb = s.tomb.copy()
        kern.compact_keys(st2, tomb, xs_u)
        outs.append((st2[0], st2[1], tomb))
    for a, b in zip(*outs):
        assert array_equal(a, b)
    # the rows of a batch's first keys whose tombstones pass their live tuples (+ slack)
    batch = keys[rng.random(keys.shape[0]) < 0.5][:n]
    for slack in (0, 1):
        outs = []
        for kern in (cpu_store, K.store):
            st2 = _copy_st(st)
            tomb = s.tomb.copy()
            kern.compact_rows_of(st2, tomb, s.live.copy(), batch, slack)
            outs.append((st2[0], st2[1], tomb))
        for a, b in zip(*outs):
            assert array_equal(a, b)
        if slack == 0 and n >= 1023:  # the case is not vacuous: some row was compacted
            assert not array_equal(outs[0][2], s.tomb)
    # the flagged entries copied in order behind an offset (a new run's append)
    flags = rng.random(n) < 0.5
    src_k, src_v = rng.integers(0, 1 << 40, n), rng.integers(-5, 5, n)
    outs = []
    for kern in (cpu_store, K.store):
        dk, dv = np.full(n + 9, -1, np.int64), np.full(n + 9, -1, np.int64)
        kern.copy_flagged(src_k, src_v, flags, dk, dv, 7)
        outs.append((dk, dv))
    for a, b in zip(*outs):
        assert array_equal(a, b)
    assert array_equal(outs[0][0][7:7 + int(flags.sum())], src_k[flags])
    # with the new run's bit set in the same launch: as set_run_bits over the copied run
    # (sorted keys with repeated first keys, some above the mask as padding rows are)
    src_k = np.sort(rng.integers(0, 40, n) << 32 | rng.integers(0, 9, n))
    ids = 32
    base = rng.integers(0, 4, ids)  # bits of older runs, kept
    want = base.copy()
    copied = src_k[flags]
    cpu_store.set_run_bits(copied, 0, copied.shape[0], want, 3)
    for kern in (cpu_store, K.store):
        dk, dv = np.full(n + 9, -1, np.int64), np.full(n + 9, -1, np.int64)
        got = base.copy()
        kern.copy_flagged(src_k, src_v, flags, dk, dv, 7, pad_to=n, runmask=got, bit=1 << 3)
        assert array_equal(got, want)
        assert array_equal(dk[7:7 + copied.shape[0]], copied)
    if copied.shape[0]:  # not vacuous: some first key got the bit
        assert (want != base).any()


@pytest.mark.parametrize("n_writes", [0, 4, 9])
def test_store_metadata_rides_on_the_run_kernels(n_writes: int) -> None:
    """A store's metadata writes made by the kernel that writes its new run, its merge or its
    directory (``meta=``; ``ZStore._carried``), on the device and the host: the kernel's own
    output is what it is without them, and the metadata holds the writes (six in the launch,
    the rest by a ``patch_meta`` launch before it)."""
    rng = np.random.default_rng(77 + n_writes)
    idx = rng.choice(192, n_writes, replace=False)
    writes = [(int(i), int(v)) for i, v in zip(idx, rng.integers(-9, 1 << 40, n_writes))]
    want_meta = np.arange(192, dtype=np.int64)
    want_meta[idx] = [v for _, v in writes]
    n = 40
    keys = np.sort(rng.choice(1 << 12, n, replace=False)).astype(np.int64)
    flags = rng.random(n) < 0.5
    vals = rng.integers(1, 5, n)

    def run(kern, name, meta):
        if name == "copy":
            dk, dv = np.full(n + 9, -1, np.int64), np.full(n + 9, -1, np.int64)
            kern.copy_flagged(keys, vals, flags, dk, dv, 7, meta=meta)
            return dk, dv
        if name == "directory":
            out = np.full(9, -1, np.int64)
            kern.build_directory(keys << 32 >> 32 << 29, 0, n, 8, out, meta=meta)
            return (out,)
        k2 = np.r_[keys[::2], keys[1::2]]  # two sorted runs of unique keys
        v2, tomb, runmask = np.r_[vals[::2], vals[1::2]], np.zeros(1 << 12, np.int64), \
            np.full(1 << 12, 3, np.int64)
        end = kern.merge_runs(k2, v2, 0, (n + 1) // 2, n, tomb, runmask, 0, padded=True,
                              meta=meta)
        return k2, v2, runmask, np.array([end])

    for name in ("copy", "directory", "merge"):
        plain = run(cpu_store, name, None)
        for kern in (cpu_store, K.store):
            meta = np.arange(192, dtype=np.int64)
            got = run(kern, name, (meta, writes))
            for a, b in zip(plain, got):
                assert array_equal(a, b), (name, kern)
            assert array_equal(meta, want_meta), (name, kern)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_phase_scan(n: int) -> None:
    """The phase kernel (one launch) against the CPU's ``phase_degrees`` and the auto-ε watch
    of ``PartRel.track_lights`` after the moves; the selections come out sorted."""
    rng = np.random.default_rng(700 + n)
    nid = max(n // 3, 1) + 3
    keys = sorted_unique(pk(rng.integers(0, nid, n), rng.integers(0, 40, n)))
    m = keys.shape[0]
    old = rng.integers(0, 2, m).astype(np.int64)
    deltas = (np.where(old == 1, -1, 1) * (rng.random(m) < 0.8)).astype(np.int64)
    heavy = rng.random(nid) < 0.4
    live_h = np.where(heavy, rng.integers(0, 6, nid), 0).astype(np.int64)
    live_l = np.where(heavy, 0, rng.integers(0, 6, nid)).astype(np.int64)
    up, down = 4, 2
    seen = np.zeros(3, np.int64)
    for watch in (-1, 3):
        over0 = rng.random(nid) < 0.3
        ux, deg, th, tl, cl = cpu_phase.phase_degrees(keys, old, deltas, live_h, live_l, heavy,
                                                      up, down)
        want_over, d_over = over0.copy(), 0
        if watch >= 0:  # track_lights runs after the moves and the clearing
            after = heavy.copy()
            after[th], after[tl], after[cl] = True, False, False
            now = ~after[ux] & (deg > watch)
            d_over = int(now.sum() - want_over[ux].sum())
            want_over[ux] = now
        over = dev(over0.copy())
        # a count launched into the sixth slot comes back with the counts (batch_total_into)
        ms, ws, vs = (rng.integers(-3, 4, m).astype(np.int64) for _ in range(3))
        total = int(5 * (ms * ws).sum() + vs.sum())
        terms = (dev(ms), dev(ws), 5, dev(vs))
        counts, gh, gl, gc, hflags = K.phase.phase_scan(
            dev(keys), dev(old), dev(deltas), dev(live_h), dev(live_l), dev(heavy), over, up,
            down, watch, then=partial(K.phase.batch_total_into, *terms))
        ph = K.phase
        hot = heavy[keys >> 32]
        assert counts[:3] == [th.shape[0], tl.shape[0], cl.shape[0]]
        assert [counts[ph.N_HEAVY_KEYS], counts[ph.D_OVER], counts[ph.N_HEAVY_INS],
                counts[ph.N_BAD], counts[ph.N_THEN]] == \
            [int(hot.sum()), d_over, int((hot & (deltas > 0)).sum()), 0, total]
        assert K.phase.batch_total(*terms) == total
        assert array_equal(hflags, heavy[keys >> 32].astype(np.int64))
        # the keys and deltas split by part in order, as the CPU's split_heavy selects them
        ih, il = cpu_phase.split_heavy(keys, heavy)
        got = K.phase.split_parts(dev(keys), dev(deltas), hflags, counts[3])
        for want, g in zip((keys[ih], deltas[ih], keys[il], deltas[il]), got):
            assert array_equal(want, g)
        for want, got in ((th, gh), (tl, gl), (cl, gc)):
            assert array_equal(want, got)
        assert array_equal(want_over, over)
        seen += [th.shape[0], tl.shape[0], cl.shape[0]]
    if n >= 1023:  # every selection was exercised
        assert (seen > 0).all(), seen
    # with the set check in front: the stored keys are those with old = 1, in the part their
    # first key's flag names; a consistent batch has no violation, and one that inserts a
    # stored key (or deletes an absent one) has them, and then the phase writes nothing
    parts = [ZStore(nid, K), ZStore(nid, K)]
    for part, want in zip(parts, (True, False)):
        sel = (old == 1) & (heavy[keys >> 32] == want)
        part.add(dev(keys[sel]), dev(old[sel]))
    for flip in (0, 1, 3):
        d2 = deltas.copy()
        d2[:flip] = np.where(old[:flip] == 1, 1, -1)
        bad = int(((old + d2 < 0) | (old + d2 > 1)).sum())
        over0 = rng.random(nid) < 0.3
        over = dev(over0.copy())
        counts, gh, gl, gc, _ = K.phase.phase_scan(
            dev(keys), dev(old), dev(d2), dev(live_h), dev(live_l), dev(heavy), over, up,
            down, 3, check=(parts[0].nt(), parts[1].nt()))
        assert counts[K.phase.N_BAD] == bad
        if bad:
            assert counts[:K.phase.N_BAD] == [0] * K.phase.N_BAD, counts
            assert gh.shape[0] == gl.shape[0] == gc.shape[0] == 0
            assert array_equal(over0, over)
        else:
            assert counts[K.phase.N_HEAVY_KEYS] == int(heavy[keys >> 32].sum())


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_rows_to_promote(n: int) -> None:
    """The view's promotion check on the device against the CPU kernel (sorted output)."""
    rng = np.random.default_rng(900 + n)
    nid = max(n // 4, 1) + 3
    fx = np.sort(rng.integers(0, nid, n)).astype(np.int64)
    live = rng.integers(0, 40, nid).astype(np.int64)
    want = cpu_view.rows_to_promote(fx, live, 60, 4, 12)
    assert array_equal(want, K.view.rows_to_promote(dev(fx), dev(live), 60, 4, 12))
    if n >= 1023:
        assert 1 < want.shape[0] < nid
    # the form a view's add launches: its sorted packed keys, unpacked by the kernel
    from types import SimpleNamespace

    from gpu_ivm.kernels.cuda_phase import PromoteThen

    keys = pk(fx, rng.integers(0, 2**31 - 1, n))
    then = PromoteThen(dev(keys), SimpleNamespace(live=dev(live), id_capacity=60), 4, 12)
    counter = dev(np.zeros(1, np.int64))
    then.launch(counter)
    then.got(host(counter).tolist())
    assert then.done and array_equal(want, then.rows)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_transpose_and_sort_by_key(n: int) -> None:
    """The heavy part's transpose of a batch (``transposed_sorted``) against the host's
    ``sort_pairs(transpose(keys), vals)``, and ``sorted_by_key`` (repeats allowed; values are
    the rows' positions): the keys sorted, and every value once, beside its own key."""
    from gpu_ivm.encoding import transpose
    from gpu_ivm.partition import sort_pairs

    rng = np.random.default_rng(950 + n)
    keys = sorted_unique(pk(rng.integers(0, 2**31 - 1, n), rng.integers(0, 2**31 - 1, n)))
    vals = rng.integers(-3, 4, keys.shape[0]).astype(np.int64)
    want = sort_pairs(transpose(keys), vals)
    got = K.store.transposed_sorted(dev(keys), dev(vals))
    assert all(array_equal(a, b) for a, b in zip(want, got))
    rep = rng.integers(0, max(n // 3, 1), n).astype(np.int64)
    rv = np.arange(n, dtype=np.int64)
    gk, gv = (host(a) for a in K.store.sorted_by_key(dev(rep), dev(rv)))
    assert array_equal(gk, np.sort(rep))
    assert sorted(gv.tolist()) == list(range(n)) and array_equal(rep[gv], gk)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_delta_units(n: int) -> None:
    """The adaptive policy's work estimate on the device (one launch, one read) against the
    CPU's compiled pass and the NumPy formula it replaced."""
    rng = np.random.default_rng(900 + n)
    nid = max(n // 3, 1) + 3
    keys = sorted_unique(pk(rng.integers(0, nid, n), rng.integers(0, nid, n)))
    l_live, h_live, ht_live = (rng.integers(0, 50, nid).astype(np.int64) for _ in range(3))
    x, y = keys >> 32, keys & 0xFFFFFFFF
    want = int(4 * keys.shape[0] + l_live[y].sum() + np.minimum(h_live[y], ht_live[x]).sum()
               + ht_live[x].sum())
    assert cpu_phase.delta_units(keys, l_live, h_live, ht_live) == want
    assert K.phase.delta_units(dev(keys), dev(l_live), dev(h_live), dev(ht_live)) == want


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_check_sets(n: int) -> None:
    """The batch's set-semantics check: multiplicities read from the part the first key's
    flag names (as ``PartRel.get``) and the number of keys that would leave {0, 1}."""
    rng = np.random.default_rng(800 + n)
    nid = max(n // 3, 1) + 3
    heavy = rng.random(nid) < 0.4
    stored = sorted_unique(pk(rng.integers(0, nid, 2 * n + 4), rng.integers(0, 30, 2 * n + 4)))
    vals = rng.integers(1, 3, stored.shape[0]).astype(np.int64)  # some 2s: violations
    part_h = heavy[stored >> 32]
    sth = ZStore.from_sorted(stored[part_h], vals[part_h], nid)
    stl = ZStore.from_sorted(stored[~part_h], vals[~part_h], nid)
    keys = sorted_unique(np.r_[rng.choice(stored, min(n, stored.shape[0]), replace=False),
                               pk(rng.integers(0, nid, n), rng.integers(0, 30, n))])
    net = rng.integers(-1, 2, keys.shape[0]).astype(np.int64)
    want = np.where(heavy[keys >> 32], sth.get(keys), stl.get(keys))
    bad = int(((want + net < 0) | (want + net > 1)).sum())
    got = dev(np.full(keys.shape[0], -7, np.int64))
    assert K.phase.check_sets(dev(sth.nt()), dev(stl.nt()), dev(heavy), dev(keys), dev(net),
                              got) == bad
    assert array_equal(want, got)
    if n >= 1023:
        assert 0 < bad < keys.shape[0]


@pytest.mark.parametrize("tiny", [False, True], ids=["default", "tiny"])
@pytest.mark.parametrize("seed", [1, 2])
def test_zstore_twins(tiny: bool, seed: int, small_launch, store_layout) -> None:
    """A ZStore driven by the cuda kernels stays bit-identical to a CPU-driven twin through
    inserts, deletes, revivals, merges, directories, per-key compaction and (tiny) the row
    hash tables of rows of 3 tuples or more."""
    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            tiny_storage(mp)
        rng = np.random.default_rng(seed)
        ix = 3 if tiny else None
        cpu, gpu = ZStore(30, index_min=ix), ZStore(30, K, index_min=ix)
        ref: dict[int, int] = {}
        for step in range(10):
            nk = int(rng.integers(0, 60))
            keys = sorted_unique(pk(rng.integers(0, 30 + step, nk), rng.integers(0, 40, nk)))
            old = np.array([ref.get(k, 0) for k in keys.tolist()], np.int64)
            d = rng.integers(-2, 3, keys.shape[0])
            d = np.where((old != 0) & (rng.random(keys.shape[0]) < 0.5), -old, d)
            assert array_equal(cpu.add(keys, d), gpu.add(dev(keys), dev(d)))
            for k, v in zip(keys.tolist(), d.tolist()):
                ref[k] = ref.get(k, 0) + v
            assert_same_store(cpu, gpu, f"step {step}")
            assert row_tables(cpu) == row_tables(gpu), f"step {step}: row tables differ"
            if tiny:  # every row of 3 tuples or more has a table, holding the row's tuples
                want: dict[int, dict[int, int]] = {}
                for k, v in ref.items():
                    if v:
                        want.setdefault(k >> 32, {})[k & 0xFFFFFFFF] = v
                got = row_tables(gpu)
                for x, row in want.items():
                    if len(row) >= 3:
                        assert got[x] == row, f"step {step}: row {x}"
            for a, b in zip(cpu.items(), gpu.items()):
                assert array_equal(a, b)
            xs = np.arange(0, 34, 3, dtype=np.int64)
            for a, b in zip(cpu.rows(xs), gpu.rows(dev(xs))):
                assert array_equal(a, b)
            probe = np.array(sorted(ref), np.int64)
            assert array_equal(gpu.get(dev(probe)), [ref[k] for k in probe.tolist()])
            assert array_equal(gpu.get(dev(probe), assume_sorted=True), cpu.get(probe))


def row_bitmaps(s: ZStore) -> dict:
    """The row bitmaps decoded: {x: sorted second ids} (slot numbers may differ between
    twins: the GPU gives slots back in the order its threads finish)."""
    out = {}
    boff = host(s.boff)
    bits = host(s.bits)
    for x in np.flatnonzero(boff >= 0).tolist():
        words = bits[boff[x]]
        out[x] = [64 * w + b for w in range(words.shape[0]) for b in range(64)
                  if (int(words[w]) >> b) & 1]
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_row_bitmap_twins(seed: int, small_launch) -> None:
    """A ZStore keeping row bitmaps with the cuda kernels (bits_apply, bits_fill) holds the same
    bitmaps as a CPU twin through inserts, deletes, multiplicities other than 1 (rows barred),
    rows shrinking below half the threshold, slab growth and ids beyond the bitmaps; every
    bitmap equals its row (``invariants.check_row_bits``). (The count kernels' intersections
    through the bitmaps are checked by the engine cases: ``tiny_storage`` gives rows of 4
    tuples or more a bitmap.)"""
    from gpu_ivm import store as store_mod
    from gpu_ivm.errors import InvariantError
    from gpu_ivm.invariants import check_row_bits

    def fail(msg: str) -> None:
        raise InvariantError(msg)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store_mod, "BITS_FLOOR", 4)
        rng = np.random.default_rng(seed)
        cpu, gpu = ZStore(30, bits=True), ZStore(30, K, bits=True)
        assert gpu.bits_on
        ref: dict[int, int] = {}
        seen = barred = 0
        for step in range(12):
            nk = int(rng.integers(1, 90))
            hub = rng.random(nk) < 0.6
            firsts = np.where(hub, rng.integers(0, 4, nk), rng.integers(0, 30, nk))
            top = 40 if step < 8 else 300  # ids beyond the first bitmaps late on
            keys = sorted_unique(pk(firsts, rng.integers(0, top, nk)))
            old = np.array([ref.get(k, 0) for k in keys.tolist()], np.int64)
            d = np.where(old != 0, -old, 1)  # set semantics: toggle
            d = np.where(rng.random(keys.shape[0]) < 0.03, 2, d)  # now and then a 2 (barred)
            assert array_equal(cpu.add(keys, d), gpu.add(dev(keys), dev(d)))
            for k, v in zip(keys.tolist(), d.tolist()):
                ref[k] = ref.get(k, 0) + v
            assert row_bitmaps(cpu) == row_bitmaps(gpu), f"step {step}: bitmaps differ"
            assert array_equal(host(cpu.boff) >= 0, host(gpu.boff) >= 0)
            ks, vs = gpu.items()  # check_row_bits takes the live tuples as host arrays
            check_row_bits(gpu, host, host(ks), host(vs), fail, f"step {step}")
            seen = max(seen, gpu.bits_rows())
            barred += int((host(gpu.boff) == -2).sum())
        assert seen > 0 and barred > 0


# ----------------------------------------------------------------------------- delta, view


def _engine_state(seed: int, eps: str, tiny: bool):
    """A CPU graph engine with hubs (heavy keys, dense view rows when ``tiny``)."""
    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            tiny_storage(mp)
        g = GraphEngine(epsilon=eps, adaptive=False)
        n = 400
        a = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), rng.integers(0, 60, n))
        b = rng.integers(0, 60, n)
        g.load((a, b))
    return g, rng


@pytest.mark.usefixtures("small_launch")
@pytest.mark.parametrize("coop_min", [1, 3, 10**9])
def test_path_weights_binned_by_cost(coop_min: int, monkeypatch) -> None:
    """The symmetric count's weights with long updates walked by a whole block (its threads
    the lanes of the shorter row, their shares added in shared memory): equal to the CPU's
    for every ε, with the cut low enough that hub rows (and at 1 every row) take the block
    path, and high enough that none does."""
    from gpu_ivm.kernels import cuda_delta

    monkeypatch.setattr(cuda_delta, "COOP_MIN", coop_min)
    for eps, tiny in (("1/2", True), ("0", False), ("1", False)):
        g, rng = _engine_state(11, eps, tiny)
        cap = g.rels[0].id_capacity
        n = 40
        xs = np.r_[rng.integers(0, 3, n // 2), rng.integers(0, cap, n - n // 2)]
        ys = rng.integers(0, cap, n)
        E = g.rels[0]
        view = g.views[0]
        args = (E.h.nt(), E.l.nt(), E.h.nt(), E.l.nt(), E.ht.nt(), view.sparse.nt(),
                view.vrow, view.vmat, E.heavy, E.heavy, True)
        w_cpu = np.empty(n, np.int64)
        w_gpu = np.full(n, -5, np.int64)
        cpu_delta.path_weights(xs, ys, *args, w_cpu)
        K.delta.path_weights(xs, ys, *args, w_gpu)
        assert array_equal(w_cpu, w_gpu), (eps, coop_min)
        assert w_cpu.any()


@pytest.mark.usefixtures("small_launch")
@pytest.mark.parametrize("coop_min", [1, 3, 10**9])
def test_local_pairs_binned_by_cost(coop_min: int, monkeypatch) -> None:
    """The per-vertex and per-edge counts' batch terms (kernels/cuda_graph_local.py) with
    long pairs walked by a whole block (its threads the lanes of the shorter row, their
    shares of w added in shared memory): equal to the CPU's local_delta at ε = ½ and 1, with
    the cut low enough that every pair (1) or the hub pairs (3) take the block path, and high
    enough that none does."""
    from gpu_ivm.kernels import count_table as ct
    from gpu_ivm.kernels import cuda_delta
    from gpu_ivm.kernels import graph_local as gk

    monkeypatch.setattr(cuda_delta, "COOP_MIN", coop_min)
    for eps in ("1/2", "1"):
        g, rng = _engine_state(11, eps, False)
        E = g.rels[0]
        cap = E.id_capacity
        x = np.r_[rng.integers(0, 3, 20), rng.integers(0, cap, 20)]
        y = rng.integers(0, cap, 40)
        pk = np.unique((np.minimum(x, y) << 32) | np.maximum(x, y))
        pk = pk[(pk >> 32) != (pk & 0xFFFFFFFF)]  # pairs u < v, one sign each, both ways
        sign = rng.choice([-1, 1], pk.shape[0])
        keys = np.r_[pk, ((pk & 0xFFFFFFFF) << 32) | (pk >> 32)]
        order = np.argsort(keys)
        keys, vals = keys[order], np.r_[sign, sign][order]
        got, want = [], []
        for kernels, out in ((gk, want), (K.local, got)):
            dense = np.zeros(cap, np.int64)
            tab = ct.new_table(np, ct.slots_for(len(E) + keys.shape[0]))
            kernels.local_delta(keys, vals, E.h.nt(), E.l.nt(), E.heavy, dense, tab)
            out.extend([dense, *ct.live_entries(np, tab)])
        for a, b in zip(got, want):
            assert array_equal(a, b), (eps, coop_min)
        assert want[0].any() and want[1].shape[0]


@pytest.mark.usefixtures("small_launch")
@pytest.mark.parametrize("coop_min", [1, 3, 10**9])
def test_listing_binned_by_cost(coop_min: int, monkeypatch) -> None:
    """The listing kernels (kernels/cuda_graph_listing.py) with hub pairs walked by a whole
    block (its threads the lanes of the shorter row, their counts added and their output
    slots claimed in shared memory): ``common_above`` and ``batch_pair_triangles`` give the
    CPU's rows (in another order within a pair) at ε = ½ and 1, with the cut low enough
    that every pair (1) or the hub pairs (3) take the block path, and high enough that none
    does."""
    from gpu_ivm.kernels import batch_triangles as bt
    from gpu_ivm.kernels import cuda_delta
    from gpu_ivm.kernels import graph_listing as gl

    monkeypatch.setattr(cuda_delta, "COOP_MIN", coop_min)
    for eps in ("1/2", "1"):
        g, rng = _engine_state(11, eps, False)
        E = g.rels[0]
        cap = E.id_capacity
        st = (E.h.nt(), E.l.nt(), E.heavy)
        x = np.r_[rng.integers(0, 3, 20), rng.integers(0, cap, 30)]
        y = rng.integers(0, cap, 50)
        keep = x != y
        x, y = x[keep], y[keep]
        deg = np.asarray(E.degree(x)), np.asarray(E.degree(y))
        swap = (deg[1] > deg[0]) | ((deg[1] == deg[0]) & (y < x))
        ls, ss = np.where(swap, y, x), np.where(swap, x, y)
        order = np.argsort(ls, kind="stable")
        ls, ss = ls[order], ss[order]
        floors = rng.integers(-1, cap, ls.shape[0])
        got, want = (sorted(zip(*(a.tolist() for a in m.common_above(ls, ss, floors, *st)[:2])))
                     for m in (K.local, gl))
        assert got == want and len(want) > 20, (eps, coop_min)
        # the batch's pairs (edges and non-edges, both signs) and their triangles
        pk = np.unique((np.minimum(x, y) << 32) | np.maximum(x, y))
        sign = rng.choice([-1, 1], pk.shape[0])
        keys = np.r_[pk, ((pk & 0xFFFFFFFF) << 32) | (pk >> 32)]
        order = np.argsort(keys)
        keys, vals = keys[order], np.r_[sign, sign][order]
        for s in (-1, 1):
            got = bt.live_rows(*K.local.batch_pair_triangles(keys, vals, s, *st))
            want = bt.batch_pair_triangles(keys, vals, s, *st)
            rows = [sorted(zip(*(a.tolist() for a in r))) for r in (got, want)]
            assert rows[0] == rows[1] and len(rows[1]) > 5, (eps, coop_min, s)


def test_block_cut_from_the_environment(monkeypatch) -> None:
    """GPU_IVM_COOP_MIN sets the count kernel's block cut for a sweep on hardware: a positive
    integer, 0 for none, anything else refused."""
    from gpu_ivm.kernels import cuda_delta

    for raw, want in (("", 256), ("64", 64), ("0", 2**62)):
        monkeypatch.setenv("GPU_IVM_COOP_MIN", raw)
        assert cuda_delta._coop_min() == want
    for bad in ("-1", "x", "1.5"):
        monkeypatch.setenv("GPU_IVM_COOP_MIN", bad)
        with pytest.raises(ValueError, match="GPU_IVM_COOP_MIN"):
            cuda_delta._coop_min()


@pytest.mark.usefixtures("small_launch")
def test_engine_with_block_updates(monkeypatch) -> None:
    """A cuda engine whose every update goes down the block path keeps the CPU engine's
    counts, batch after batch (hubs: a star beside a random graph)."""
    from gpu_ivm.kernels import cuda_delta

    monkeypatch.setattr(cuda_delta, "COOP_MIN", 2)
    rng = np.random.default_rng(5)
    a = np.r_[np.zeros(30, np.int64), rng.integers(1, 40, 120)]
    b = np.r_[np.arange(1, 31), rng.integers(1, 40, 120)]
    cpu = GraphEngine(epsilon="1", adaptive=False, on_conflict="ignore")
    dev = GraphEngine(epsilon="1", adaptive=False, on_conflict="ignore", backend=BACKEND)
    for e in (cpu, dev):
        e.policy.force = "delta"
        e.load((a, b))
    for _ in range(3):
        u = rng.integers(0, 40, (25, 2))
        batch = {"src": u[:, 0], "dst": u[:, 1], "sign": rng.choice([-1, 1], 25)}
        r1, r2 = cpu.apply(batch), dev.apply(batch)
        assert r1.triangles == r2.triangles and r1.path == r2.path == "delta"
    assert r1.triangles > 0


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_path_weights_and_expansion(n: int) -> None:
    for eps, tiny in (("1/2", True), ("0", False), ("1", True)):
        g, rng = _engine_state(7 + n, eps, tiny)
        cap = g.rels[0].id_capacity
        xs = rng.integers(0, cap, n)
        ys = rng.integers(0, cap, n)
        E = g.rels[0]
        view = g.views[0]
        for sym in (True, False):
            w_cpu = np.empty(n, np.int64)
            w_gpu = np.full(n, -5, np.int64)
            args = (E.h.nt(), E.l.nt(), E.h.nt(), E.l.nt(), E.ht.nt(), view.sparse.nt(),
                    view.vrow, view.vmat, E.heavy, E.heavy, sym)
            cpu_delta.path_weights(xs, ys, *args, w_cpu)
            K.delta.path_weights(xs, ys, *args, w_gpu)
            assert array_equal(w_cpu, w_gpu), (eps, sym)
            # the profile mode's work counters (row tables on every row when tiny)
            c_cpu = np.zeros(n, np.int64)
            c_gpu = np.full(n, -5, np.int64)
            # the CUDA kernel does not mark rows (row_marks): compare with the CPU's walk
            # without marks, which reads the same entries
            cpu_delta.USE_MARKS = False
            try:
                cpu_delta.path_weights(xs, ys, *args, np.empty(n, np.int64), c_cpu)
            finally:
                cpu_delta.USE_MARKS = True
            K.delta.path_weights(xs, ys, *args, np.empty(n, np.int64), c_gpu)
            assert array_equal(c_cpu, c_gpu), (eps, sym)
        st = E.l.nt()
        c_cpu = np.empty(n, np.int64)
        c_gpu = np.empty(n, np.int64)
        cpu_delta.expand_counts(xs, st, c_cpu)
        K.delta.expand_counts(xs, st, c_gpu)
        assert array_equal(c_cpu, c_gpu)
        # the same counts, the sparse ones (0 where a left update's view row is dense) and
        # both totals, against the CPU's counts and a NumPy reading of the row map
        vrow = np.full(int(xs.max(initial=0)) // 2 + 1, -1, np.int64)
        vrow[::3] = np.arange(vrow[::3].shape[0])  # every third row dense; rows past the map
        # (updates given as packed keys, unpacked by the kernel; the sizes behind a 0)
        for left in (True, False):
            exp = ys if left else xs
            counts = np.empty(n, np.int64)
            cpu_delta.expand_counts(exp, st, counts)
            ptr = np.full(n + 1, -7, np.int64)
            totals = K.delta.expand_counts_split(pk(xs, ys), st, vrow, left, ptr)
            inside = xs < vrow.shape[0]
            dense = left & inside & (vrow[np.where(inside, xs, 0)] >= 0)
            want = np.where(dense, 0, counts)
            assert ptr[0] == 0 and array_equal(ptr[1:], want), left
            assert host(totals).tolist() == [int(counts.sum()), int(want.sum())], left
        ms = rng.integers(-2, 3, n)
        for left in (True, False):
            counts = np.empty(n, np.int64)
            cpu_delta.expand_counts(ys if left else xs, st, counts)
            ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
            o1 = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
            o2 = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
            cpu_delta.expand_emit(xs, ys, ms, st, left, ptr, *o1)
            K.delta.expand_emit(xs, ys, ms, st, left, ptr, *o2)
            assert array_equal(o1[0], o2[0]) and array_equal(o1[1], o2[1])


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_batch_wedges_and_segment_sums(n: int) -> None:
    g, rng = _engine_state(11 + n, "1/2", True)
    E = g.rels[0]
    cap = E.id_capacity
    dkeys = sorted_unique(pk(rng.integers(0, cap, 3 * n), rng.integers(0, cap, 3 * n)))[:n]
    dkeys = np.sort(dkeys[rng.permutation(dkeys.shape[0])][:n])
    dvals = rng.choice(np.array([-1, 1, 2], np.int64), dkeys.shape[0])
    # the symmetric form's Δ: both orientations of each pair, no loops, one value per pair
    a, b = dkeys >> 32, dkeys & 0xFFFFFFFF
    half = np.unique(pk(np.minimum(a, b)[a != b], np.maximum(a, b)[a != b]))
    sign = rng.choice(np.array([-1, 1, 2], np.int64), half.shape[0])
    both = np.r_[half, pk(half & 0xFFFFFFFF, half >> 32)]
    order = np.argsort(both)
    forms = {True: (both[order], np.r_[sign, sign][order]), False: (dkeys, dvals)}
    for sym, (keys, vals) in forms.items():
        o1 = np.empty(keys.shape[0], np.int64)
        o2 = np.empty(keys.shape[0], np.int64)
        cpu_delta.batch_wedges(keys, vals, E.h.nt(), E.l.nt(), E.heavy, sym, o1)
        K.delta.batch_wedges(keys, vals, E.h.nt(), E.l.nt(), E.heavy, sym, o2)
        assert array_equal(o1, o2), sym
    keys = np.sort(rng.integers(0, max(n // 3, 1), n)).astype(np.int64)
    vals = rng.integers(-2, 3, n).astype(np.int64)
    for a, b in zip(cpu_delta.segment_sum_sorted(keys, vals),
                    K.delta.segment_sum_sorted(keys, vals)):
        assert array_equal(a, b)


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", [1, 33, 400])
def test_wedges_total_reads_the_batch_within_its_count(n: int) -> None:
    """``batch_wedges_total`` on a padded batch (a preparation's arrays, launched before their
    sizes reach the host: ``GraphEngine._run_early``) takes the Δ tuples up to the device
    count ``lims[0]`` and the pairs up to ``lims[1]``, whatever the padding holds: here tuples
    of the batch's last row and of its first, which a search over the whole array would take
    in. Equal to the CPU's ``batch_wedges`` and sums on the batch alone, both forms."""
    g, rng = _engine_state(17, "1/2", True)
    E = g.rels[0]
    cap = E.id_capacity
    a, b = rng.integers(0, cap, n), rng.integers(0, cap, n)
    lo, hi = np.minimum(a, b)[a != b], np.maximum(a, b)[a != b]
    half = np.unique(pk(lo, hi))
    sign = rng.choice(np.array([-1, 1], np.int64), half.shape[0])
    both = np.r_[half, pk(half & 0xFFFFFFFF, half >> 32)]
    order = np.argsort(both)
    keys, vals = both[order], np.r_[sign, sign][order]
    k = keys.shape[0]
    last, low = int(keys[-1] >> 32), int(keys[0] >> 32)
    cs = rng.integers(0, cap, 2 * k + 3)
    pad_k = np.r_[pk(np.full(k + 2, last), cs[: k + 2]), pk(np.full(k + 1, low), cs[k + 2:])]
    pad_v = rng.choice(np.array([-1, 1, 5], np.int64), pad_k.shape[0])
    m = max(k // 2, 1)
    ms = rng.integers(-2, 3, m).astype(np.int64)
    ws = rng.integers(0, 4, m).astype(np.int64)
    for sym in (True, False):
        want = np.empty(k, np.int64)
        cpu_delta.batch_wedges(keys, vals, E.h.nt(), E.l.nt(), E.heavy, sym, want)
        out = dev(np.full(pad_k.shape[0] + k, -9, np.int64))
        acc = dev(np.zeros(1, np.int64))
        K.delta.batch_wedges_total(
            dev(np.r_[keys, pad_k]), dev(np.r_[vals, pad_v]), E.h.nt(), E.l.nt(), E.heavy,
            sym, out, dev(np.r_[ms, ms + 7]), dev(np.r_[ws, ws + 3]), 6, acc,
            lims=(dev(np.array([k], np.int64)), dev(np.array([m], np.int64))))
        assert array_equal(host(out)[:k], want), sym
        assert int(host(acc)[0]) == 6 * int(ms @ ws) + int(want.sum()), sym


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_view_kernels(n: int) -> None:
    g, _ = _engine_state(13, "1/2", True)
    rng = np.random.default_rng(n)
    E = g.rels[0]
    view = g.views[0]
    assert view.n_dense > 0, "the fixture should have dense view rows"
    cap = E.id_capacity
    dense = np.asarray(view.row_keys, np.int64)
    xs = np.where(rng.random(n) < 0.4, rng.choice(dense, n), rng.integers(0, cap, n))
    ys = rng.integers(0, cap, n)
    ms = rng.choice(np.array([-1, 1, 3], np.int64), n)
    for left, st in ((True, E.l.nt()), (False, E.ht.nt())):
        counts = np.empty(n, np.int64)
        cpu_delta.expand_counts(ys if left else xs, st, counts)
        total = int(counts.sum())
        outs = []
        for kern in (cpu_view, K.view):
            vmat = view.vmat.copy()
            ok = np.full(total, -1, np.int64)
            ov = np.full(total, -1, np.int64)
            w = kern.emit_view_deltas(xs, ys, ms, st, left, view.vrow, vmat, ok, ov)
            outs.append((int(w), ok[: int(w)], ov[: int(w)], vmat))
        for a, b in zip(*outs):
            assert array_equal(a, b), left
        if hasattr(cpu_view, "emit_view_deltas_par"):  # the segment form
            ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
            outs = []
            for kern in (cpu_view, K.view):
                vmat = view.vmat.copy()
                ok = np.full(total, -1, np.int64)
                ov = np.full(total, -1, np.int64)
                kern.emit_view_deltas_par(xs, ys, ms, st, left, view.vrow, vmat, ptr, ok, ov,
                                          2)
                outs.append((ok, ov, vmat))
            # the engine's form on a device: the updates as packed keys
            vmat = view.vmat.copy()
            ok = np.full(total, -1, np.int64)
            ov = np.full(total, -1, np.int64)
            K.view.emit_view_keys(pk(xs, ys), ms, st, left, view.vrow, vmat, ptr, ok, ov)
            outs.append((ok, ov, vmat))
            for got in outs[1:]:
                for a, b in zip(outs[0], got):
                    assert array_equal(a, b), left
            # with deltas held for the same view: copied in front by the same launch
            pre = (rng.integers(0, 1 << 40, 7).astype(np.int64),
                   rng.integers(-5, 6, 7).astype(np.int64))
            vmat = view.vmat.copy()
            ok = np.full(total + 7, -1, np.int64)
            ov = np.full(total + 7, -1, np.int64)
            K.view.emit_view_keys(pk(xs, ys), ms, st, left, view.vrow, vmat, ptr, ok, ov,
                                  pre=pre)
            for a, b in zip((*pre, None), (ok[:7], ov[:7], None)):
                assert a is None or array_equal(a, b), left
            for a, b in zip(outs[0], (ok[7:], ov[7:], vmat)):
                assert array_equal(a, b), left
    keys = pk(xs, ys)
    vals = rng.integers(-3, 4, n).astype(np.int64)
    outs = []
    for kern in (cpu_view, K.view):
        vmat = view.vmat.copy()
        outs.append((kern.scatter_dense(keys, vals, view.vrow, vmat), vmat))
    for a, b in zip(*outs):
        assert array_equal(a, b)


# ----------------------------------------------------------------------------- query kernels

# (pattern [K.first, K.second, N.first, N.second, P.first, P.second], use_n, use_p); -1 any,
# 0 light, 1 heavy (the layout of kernels/query_kernels.py).
QUERY_CASES = [
    ((-1, -1, -1, -1, -1, -1), True, True),  # Δ3 over everything: merge/gallop of two rows
    ((-1, -1, -1, 1, -1, -1), True, True),  # z heavy in N: N's short heavy list often wins
    ((0, -1, -1, -1, 1, 0), True, True),  # z heavy in P, x light: P's heavy list
    ((-1, 0, 0, 0, 0, -1), True, True),  # all light: intersection with flag filters
    ((-1, 1, 1, 1, -1, -1), True, False),  # N only: N's heavy list or N's row
    ((1, -1, -1, -1, 1, 1), False, True),  # P only: P's heavy list or P's row
]


def _query_state(rng, nfirst: int = 48):
    """N (rows by y), P transposed (rows by x), S, flags shorter than the id range (so
    ``_flag``'s out-of-range branch runs) and short heavy lists; hubs 0-2 have long rows."""
    nst = random_store(rng, nfirst, 150, hub_p=0.4).nt()
    pst = random_store(rng, nfirst, 150, hub_p=0.4).nt()
    sst = random_store(rng, 3 * nfirst, 300).nt()
    nid = 3 * nfirst - 5
    n_fx, p_fy = ((rng.random(nid) < 0.5).astype(np.uint8) for _ in range(2))
    n_fy, p_fx = ((rng.random(nid) < 0.08).astype(np.uint8) for _ in range(2))
    n_hl = np.flatnonzero(n_fy).astype(np.int64)
    p_hl = np.flatnonzero(p_fx).astype(np.int64)
    return nst, pst, sst, (n_fx, n_fy, n_hl), (p_fx, p_fy, p_hl)


def _gallops(nst, pst, xs, ys, choice) -> bool:
    """True if an intersection of the batch meets two run segments of lengths more than 8x
    apart (``_merge``'s gallop branch)."""
    for x, y, c in zip(xs.tolist(), ys.tolist(), choice.tolist()):
        if c not in (0, 1):
            continue
        segs = []
        for st, r in ((nst, y), (pst, x)):
            lens = []
            m, j = int(run_mask(st, r)), 0
            while m:
                if m & 1:
                    lo, hi = run_range(st, j, r)
                    lens.append(int(real_end(st[0], lo, hi, r)) - int(lo))
                m >>= 1
                j += 1
            segs.append([v for v in lens if v > 0])
        if any(a * 8 < b or b * 8 < a for a in segs[0] for b in segs[1]):
            return True
    return False


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES[:5] + [129])
def test_query_kernels(n: int) -> None:
    """plan / emit / compact / sums / pair_sums against the CPU kernels, every choice of list
    (none, N's row, P's row, N's heavy list, P's heavy list) and both intersection branches."""
    rng = np.random.default_rng(600 + n)
    nst, pst, sst, (n_fx, n_fy, n_hl), (p_fx, p_fy, p_hl) = _query_state(rng)
    hub = rng.random(n) < 0.3
    xs = np.where(hub, rng.integers(0, 3, n), rng.integers(0, 51, n)).astype(np.int64)
    ys = np.where(~hub & (rng.random(n) < 0.3), rng.integers(0, 3, n),
                  rng.integers(0, 51, n)).astype(np.int64)
    ms = rng.choice(np.array([-2, -1, 1, 3], np.int64), n)
    fxs = rng.integers(0, 2, n).astype(np.uint8)
    fys = rng.integers(0, 2, n).astype(np.uint8)
    seen: set[int] = set()
    gallop = False
    for case, use_n, use_p in QUERY_CASES:
        pat = np.array(case, np.int64)
        outs = []
        for kern in (cpu_query, K.query):
            choice = np.full(n, -9, np.int64)
            length = np.full(n, -9, np.int64)
            kern.plan(xs, ys, fxs, fys, pat, use_n, use_p, nst, n_fx, n_hl, pst, p_fy, p_hl,
                      choice, length)
            ptr = np.r_[0, np.cumsum(length)].astype(np.int64)
            out_z = np.full(ptr[-1], -7, np.int64)
            out_w = np.full(ptr[-1], -7, np.int64)
            count = np.full(n, -9, np.int64)
            kern.emit(xs, ys, ms, choice, ptr, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx,
                      p_hl, out_z, out_w, count)
            total = int(count.sum())
            keep = [np.full(total, -7, np.int64) for _ in range(3)]
            w = kern.compact(ptr, count, out_z, out_w, *keep)
            sums = np.full(n, -9, np.int64)
            kern.sums(xs, ys, choice, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl,
                      sums)
            outs.append((choice, length, out_z, out_w, count, np.array([w]), *keep, sums))
        for j, (a, b) in enumerate(zip(*outs)):
            assert array_equal(a, b), (case, j)
        choice, _, _, _, count, _, idx, _, vals, sums = outs[0]
        assert array_equal(np.bincount(idx, vals, n), ms * sums)  # emit and sums agree
        seen.update(choice.tolist())
        gallop = gallop or (use_n and use_p and _gallops(nst, pst, xs, ys, choice))
    if n >= 32:
        assert seen == {-1, 0, 1, 2, 3} and gallop, (seen, gallop)
    for want_y, want_x in ((1, 1), (0, 1), (1, 0)):
        o1 = np.full(n, -9, np.int64)
        o2 = np.full(n, -9, np.int64)
        cpu_query.pair_sums(xs, nst, n_fx, want_y, pst, p_fy, want_x, sst, o1)
        K.query.pair_sums(xs, nst, n_fx, want_y, pst, p_fy, want_x, sst, o2)
        assert array_equal(o1, o2), (want_y, want_x)
        if n >= 32:
            assert o1.any()


@pytest.mark.parametrize("n", [0, 1, 33, 257])
def test_label_masks_and_new_flags(n: int) -> None:
    """The free queries' fused passes (``label_masks``, ``new_flags``) on the device equal the
    CPU kernels (which tests/test_query_flag_kernels.py checks against the array formulas):
    every group's mask, and the flags written, flipped and vanished."""
    rng = np.random.default_rng(900 + n)
    ids = 30
    tx, ty, z = (rng.integers(0, ids + 2, n).astype(np.int64) for _ in range(3))
    ofx, ofy = (rng.integers(0, 2, n).astype(np.uint8) for _ in range(2))
    fl = [rng.integers(0, 2, ids).astype(np.uint8) for _ in range(4)]
    care, want = int(rng.integers(0, 1 << 60)), int(rng.integers(0, 1 << 60))
    groups = cpu_query.LABEL_GROUPS_MAX
    want_masks = np.zeros((groups, n), bool)
    cpu_query.label_masks(tx, ty, z, ofx, ofy, *fl, care, want, want_masks)
    got = dev(np.ones((groups, n), bool))
    K.query.label_masks(*dev((tx, ty, z, ofx, ofy)), *dev(tuple(fl)), care, want, got)
    assert array_equal(got, want_masks)
    vals = rng.integers(0, ids, n).astype(np.int64)
    ins = rng.integers(0, 2, n).astype(np.int64)
    rem = np.where(ins == 1, 0, rng.integers(0, 2, n)).astype(np.int64)
    u = np.unique(vals)
    live = rng.integers(0, 6, ids).astype(np.int64)
    live[u[::3]] = 0
    for default, up, down in ((0, 3, 2), (1, 4, 1)):
        flags = rng.integers(0, 2, ids).astype(np.uint8)
        outs = []
        for kern, conv in ((cpu_query, lambda a: a), (K.query, dev)):
            f = conv(flags.copy())
            flip, gone = conv(np.ones(u.shape[0], bool)), conv(np.ones(u.shape[0], bool))
            kern.new_flags(*(conv(a) for a in (u, vals, ins, rem, live)), f, default, up, down,
                           flip, gone)
            outs.append((host(f), host(flip), host(gone)))
        for a, b in zip(*outs):
            assert np.array_equal(a, b), (default, up, down)


# ----------------------------------------------------------------------------- static count


def _static_graph(rng, m: int, n: int, hub_p: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Endpoint keys of a graph with exactly ``m`` simple undirected edges on ``n`` ids; with
    ``hub_p`` that share of the edges touches id 0, 1 or 2. Noise the count must ignore:
    reversed duplicates and self-loops. Keys are spread ints (negative, > 2**32)."""
    assert m <= n * (n - 1) // 2
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < m:
        a = int(rng.integers(0, 3)) if rng.random() < hub_p else int(rng.integers(0, n))
        b = int(rng.integers(0, n))
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    p = np.array(sorted(pairs), np.int64).reshape(-1, 2)
    flip = rng.random(m) < 0.5
    s, d = np.where(flip, p[:, 1], p[:, 0]), np.where(flip, p[:, 0], p[:, 1])
    dup = rng.random(m) < 0.2
    loops = rng.integers(0, n, m // 10)
    s = np.concatenate([s, d[dup], loops])
    d = np.concatenate([d, s[:m][dup], loops])
    return s * 7919 - 2**40, d * 7919 - 2**40


def _static_csr(s: np.ndarray, d: np.ndarray, by_id: bool = False):
    """The oriented CSR of the graph: by degree rank (as the static count builds it), or with
    ``by_id`` from lower to higher dense id (any acyclic orientation with sorted rows is
    counted right; id order leaves the hubs 0, 1, 2 with long out-lists)."""
    if by_id:
        lo, hi, n = simple_graph(s, d)
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(lo, minlength=n), out=indptr[1:])
        return indptr, hi
    ids_s, ids_d, n = _ids(s, d)
    indptr, hi, _ = _oriented_csr(ids_s, ids_d, n)
    return indptr, hi


def _edge_lists(indptr: np.ndarray, hi: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray]:
    """out(u) after v, and out(v), of the oriented edge e = u -> v (the lists intersected)."""
    u = int(np.searchsorted(indptr, e, side="right")) - 1
    v = int(hi[e])
    return hi[e + 1: indptr[u + 1]], hi[indptr[v]: indptr[v + 1]]


def _static_reference(s: np.ndarray, d: np.ndarray, indptr, hi) -> int:
    """The CPU counts of the same graph, which must agree, and the per-edge body checked
    against a set intersection edge by edge (in a plain Python loop on the CPU)."""
    want = count_triangles_arrays(s, d)
    per = [edge_triangles(indptr, hi, e) for e in range(hi.shape[0])]
    for e, c in enumerate(per):
        a, b = _edge_lists(indptr, hi, e)
        assert c == len(set(a.tolist()) & set(b.tolist())), e
    assert sum(per) == want
    if hi.shape[0] >= 3:
        tails = cpu_static.in_tails(indptr, hi)
        assert cpu_static.count_oriented(indptr, hi, *tails, 2) == want
    return want


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("hubs", [False, True])
@pytest.mark.parametrize("m", SIZES)
def test_static_count(m: int, hubs: bool) -> None:
    """``count_oriented_edges`` (and ``count_triangles_backend`` on cuda) equals the CPU count,
    the per-edge body on the CPU and networkx, at 0..1025 oriented edges."""
    import networkx as nx

    rng = np.random.default_rng(700 + m + 10_000 * hubs)
    n = max(2, min(3 * int(m ** 0.5) + 3, 120))
    while n * (n - 1) // 2 < m:
        n += 1
    s, d = _static_graph(rng, m, n, 0.5 if hubs else 0.0)
    indptr, hi = _static_csr(s, d)
    assert hi.shape[0] == m
    want = _static_reference(s, d, indptr, hi)
    assert K.static.count_oriented_edges(indptr, hi) == want
    assert count_triangles_backend(s, d, BACKEND) == want
    assert count_triangles_backend(s, d, "cpu") == want
    g = nx.Graph()
    g.add_edges_from(zip(s.tolist(), d.tolist()))
    g.remove_edges_from(nx.selfloop_edges(g))
    assert sum(nx.triangles(g).values()) // 3 == want
    if m >= 1023:
        assert want > 0


@pytest.mark.parametrize("shape", [(32, 4), (96, 2), (8, 1), (32, 64), (256, 1)])
def test_static_count_launch_shapes(shape: tuple[int, int]) -> None:
    """Any block size (non-powers of two: the block tree) and grid (grid stride) gives the
    count; the graph has hubs, and its two orientations take all three intersection branches
    (merge, walk out(u)'s tail and gallop in out(v), and the reverse)."""
    rng = np.random.default_rng(777)
    s, d = _static_graph(rng, 1100, 90, 0.3)
    kinds = set()
    for by_id in (False, True):
        indptr, hi = _static_csr(s, d, by_id)
        assert hi.shape[0] == 1100
        want = _static_reference(s, d, indptr, hi)
        for e in range(hi.shape[0]):
            la, lb = (x.shape[0] for x in _edge_lists(indptr, hi, e))
            if la and lb:
                kinds.add("merge" if la * 8 >= lb and lb * 8 >= la else "walk a" if la < lb
                          else "walk b")
        for _ in _set_launch(shape[0], shape[1], 32):
            assert K.static.count_oriented_edges(indptr, hi) == want
    assert kinds == {"merge", "walk a", "walk b"}, kinds


@pytest.mark.usefixtures("boundary_launch")
def test_static_count_empty_and_triangle_free() -> None:
    z = np.zeros(0, np.int64)
    assert K.static.count_oriented_edges(np.zeros(1, np.int64), z) == 0
    assert K.static.count_oriented_edges(np.zeros(5, np.int64), z) == 0
    assert count_triangles_backend(z, z, BACKEND) == 0
    assert count_triangles_backend(z, z, BACKEND, n=0) == 0
    assert count_triangles_backend(z, z, BACKEND, n=4) == 0
    assert count_triangles_backend(np.array([3, 3]), np.array([3, 3]), BACKEND) == 0  # loops
    a, b = np.meshgrid(np.arange(17), np.arange(17, 47))  # K_{17,30}: 510 edges, bipartite
    grid_s = np.r_[np.arange(99), np.arange(90)]  # a 10 x 10 grid graph
    grid_d = np.r_[np.arange(1, 100), np.arange(10, 100)]
    keep = (grid_s < grid_d) & ((grid_s % 10 != 9) | (grid_d - grid_s == 10))
    star = (np.zeros(40, np.int64), np.arange(1, 41))
    for s, d in ((a.ravel(), b.ravel()), (grid_s[keep], grid_d[keep]), star):
        s = s.astype(np.int64)
        d = d.astype(np.int64)
        indptr, hi = _static_csr(s, d)
        assert hi.shape[0] >= 40
        assert count_triangles_arrays(s, d) == 0
        assert K.static.count_oriented_edges(indptr, hi) == 0
        assert count_triangles_backend(s, d, BACKEND) == 0
    k = np.array([(i, j) for i in range(12) for j in range(i + 1, 12)], np.int64)
    assert count_triangles_backend(k[:, 0], k[:, 1], BACKEND) == 220  # K_12
    assert count_triangles_backend(k[:, 0], k[:, 1], BACKEND, n=12) == 220
    with pytest.raises(TypeError, match="dtype int64"):
        K.static.count_oriented_edges(np.zeros(2, np.int64), np.zeros(1, np.int32))
    with pytest.raises(TypeError, match="1-D"):
        K.static.count_oriented_edges(np.zeros((2, 1), np.int64), np.zeros(1, np.int64))


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("hubs", [False, True])
@pytest.mark.parametrize("m", SIZES)
def test_triangle_listing(m: int, hubs: bool) -> None:
    """The device listing (count pass, scan, emit pass of the per-edge walk) gives every
    triangle once, as the brute-force listing of the adjacency sets does."""
    from gpu_ivm.static import list_triangles_xp

    rng = np.random.default_rng(800 + m + 10_000 * hubs)
    n = max(2, min(3 * int(m ** 0.5) + 3, 120))
    while n * (n - 1) // 2 < m:
        n += 1
    s, d = _static_graph(rng, m, n, 0.5 if hubs else 0.0)
    _, inv = np.unique(np.r_[s, d], return_inverse=True)
    s, d = inv[: s.shape[0]], inv[s.shape[0]:]
    nv = int(inv.max()) + 1 if inv.shape[0] else 0
    adj = [set() for _ in range(nv)]
    for a, b in zip(s.tolist(), d.tolist()):
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    want = sorted((a, b, c) for a in range(nv) for b in adj[a] if b > a
                  for c in adj[a] & adj[b] if c > b)
    got = list_triangles_xp(s, d, nv, K)
    # the ids stay where the backend's arrays live: NumPy in the simulator, CuPy on a device
    assert all(isinstance(x, BACKEND.xp.ndarray) for x in got)
    assert sorted(zip(*(host(x).tolist() for x in got))) == want
    if m >= 1023:
        assert want


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("m", SIZES)
def test_directed_cycle_count(m: int) -> None:
    """Directed 3-cycles on the device (arc flags, one thread per oriented edge) equal the
    CPU count and trace(A³)/3 of the adjacency matrix, with 2-cycles, repeated arcs and
    loops in the input."""
    rng = np.random.default_rng(900 + m)
    n = max(2, min(2 * int(m ** 0.5) + 3, 90))
    s, d = rng.integers(0, n, m), rng.integers(0, n, m)
    back = rng.random(m) < 0.3  # some arcs both ways
    s, d = np.r_[s, d[back], s[:5]], np.r_[d, s[back], d[:5]]
    A = np.zeros((n, n), np.int64)
    A[s, d] = 1
    np.fill_diagonal(A, 0)
    want = int(np.trace(A @ A @ A)) // 3
    assert count_triangles_backend(s, d, BACKEND, n=n, directed=True) == want
    assert count_triangles_backend(s, d, "cpu", n=n, directed=True) == want
    assert count_triangles_arrays(s, d, directed=True) == want
    if m >= 1023:
        assert want > 0


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("m", SIZES)
def test_relation_sum(m: int) -> None:
    """Σ R·S·T on the device equals trace(R S T) of dense matrices and the CPU kernel's sum;
    a hub row makes the intersections gallop as well as merge."""
    from gpu_ivm.static import relation_triangle_sum_backend

    rng = np.random.default_rng(950 + m)
    n = max(2, min(int(m ** 0.5) + 3, 60))
    mats, rels = [], []
    for _ in range(3):
        k = int(rng.integers(max(m // 2, 1), m + 2)) if m else 0
        a = np.where(rng.random(k) < 0.3, 0, rng.integers(0, n, k))
        b = rng.integers(0, n, k)
        dense = np.zeros((n, n), np.int64)
        dense[a, b] = rng.integers(-4, 5, k)
        mats.append(dense)
        x, y = np.nonzero(dense)
        rels.append(((x.astype(np.int64) << 32) | y, dense[x, y]))
    want = int(np.trace(mats[0] @ mats[1] @ mats[2]))
    # on cuda the relations are the backend's arrays (they stay on the device)
    assert relation_triangle_sum_backend(dev(tuple(rels)), n, BACKEND) == want
    assert relation_triangle_sum_backend(rels, n, "cpu") == want
    if m >= 1023:
        assert want != 0


def test_relation_sum_overflow_guard() -> None:
    """Terms beyond the int64 range raise on the device as on the CPU (no wrapped result)."""
    from gpu_ivm.errors import IntegerOverflowError
    from gpu_ivm.static import relation_triangle_sum_backend

    big = np.array([1 << 40], np.int64)
    rels = [(np.array([1], np.int64), big), (np.array([1 << 32], np.int64), big),
            (np.array([0], np.int64), big)]  # R(0,1) S(1,0) T(0,0): 2**120
    for be, arrays in ((BACKEND, dev(tuple(rels))), ("cpu", rels)):
        with pytest.raises(IntegerOverflowError):
            relation_triangle_sum_backend(arrays, 2, be)


# ----------------------------------------------------------------------------- engines


def assert_same_engine(a, b) -> None:
    """Same count, N and physical state (stores, heavy flags, views) on both backends."""
    assert a.Q == b.Q and a.N == b.N
    for ra, rb in zip(a.rels, b.rels):
        assert array_equal(ra.heavy, rb.heavy)
        for part in ("h", "l", "ht"):
            assert_same_store(getattr(ra, part), getattr(rb, part), f"{ra.name}_{part}")
    for va, vb in zip(a.views, b.views):
        assert array_equal(va.vrow, vb.vrow)
        assert array_equal(va.vmat[: va.n_dense], vb.vmat[: vb.n_dense])
        for x, y in zip(va.items(), vb.items()):
            assert array_equal(x, y)


@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
def test_graph_engine_streams(eps: str, small_launch) -> None:
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng({"0": 1, "1/2": 2, "1": 3}[eps])
        oracle = GraphOracle(False)
        cpu = GraphEngine(epsilon=eps, backend="cpu", adaptive=False)
        gpu = GraphEngine(epsilon=eps, backend="cuda", adaptive=False)
        total = 0
        for batch in graph_batches(oracle, rng, n_batches=9, nv=24, max_batch=40, hub_p=0.5,
                                   shrink_from=6):
            r1, r2 = cpu.apply(batch), gpu.apply(batch)
            total += r1.updates
            assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta) == (oracle.count(),
                                                                           r1.delta)
            assert_same_engine(cpu, gpu)
            gpu.check_invariants()
        assert gpu.recount() == oracle.count()
        assert total >= 100


@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
def test_relation_engine_streams(eps: str, small_launch) -> None:
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng({"0": 4, "1/2": 5, "1": 6}[eps])
        cpu = RelationEngine(epsilon=eps, backend="cpu", adaptive=False)
        gpu = RelationEngine(epsilon=eps, backend="cuda", adaptive=False)
        total = 0
        for i in range(8):
            n = int(rng.integers(10, 40))
            a = rng.integers(0, 12, n)
            a[rng.random(n) < 0.4] = 0  # a hub key
            b = rng.integers(0, 12, n)
            m = rng.integers(-2, 3, n)
            batch = {"rel": rng.choice(list("RST"), n).tolist(), "src": a.tolist(),
                     "dst": b.tolist(), "mult": m.tolist()}
            r1, r2 = cpu.apply(batch), gpu.apply(batch)
            total += n
            assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta), i
            assert_same_engine(cpu, gpu)
            gpu.check_invariants()
        assert gpu.recount() == gpu.count() == cpu.count()
        assert total >= 100


def test_snapshot_restores_across_backends(tmp_path, small_launch) -> None:
    """A snapshot written on one backend restores on the other, and both continue alike."""
    rng = np.random.default_rng(7)
    oracle = GraphOracle(False)
    batches = list(graph_batches(oracle, rng, n_batches=6, nv=24, max_batch=30, hub_p=0.5))
    cpu = GraphEngine(epsilon="1/2", backend="cpu", adaptive=False)
    for b in batches[:3]:
        cpu.apply(b)
    cpu.snapshot(tmp_path / "from_cpu")
    on_gpu = GraphEngine.restore(tmp_path / "from_cpu", backend="cuda")
    assert on_gpu.backend.name == "cuda" and on_gpu.count() == cpu.count()
    for b in batches[3:]:
        assert on_gpu.apply(b).triangles == cpu.apply(b).triangles
    assert on_gpu.count() == oracle.count()
    on_gpu.snapshot(tmp_path / "from_cuda")
    back = GraphEngine.restore(tmp_path / "from_cuda", backend="cpu")
    assert back.backend.name == "cpu"
    # the same logical state (the physical run layout of a restored store differs)
    assert (back.Q, back.N, back.size) == (on_gpu.Q, on_gpu.N, on_gpu.size)
    for ka, kb in zip(back.rels, on_gpu.rels):
        assert array_equal(ka.heavy[: len(back.encoder)], kb.heavy[: len(back.encoder)])
        for part in ("h", "l", "ht"):
            for x, y in zip(getattr(ka, part).items(), getattr(kb, part).items()):
                assert array_equal(x, y)
    for va, vb in zip(back.views, on_gpu.views):
        for x, y in zip(va.items(), vb.items()):
            assert array_equal(x, y)


# ----------------------------------------------------------------------------- free queries

FAMILIES = ("vertex_counts", "edge_counts", "triangles")


def _fq_state(fq: FreeQueries) -> list:
    """The physical state of a FreeQueries (read without kernels): every store bit for bit,
    dense views, pair ids, flags, heavy lists; and its count, N, δΔ3 and stats."""
    out: list = [np.array([fq.count, fq.N, *fq.stats.values()]), *fq.changed_triangles()]
    for sig in sorted(fq.views, key=repr):
        v = fq.views[sig]
        out += [v.dense, *store_state(v.store)]
        if v.pairs is not None:
            out.append(v.pairs.decode(like(np.arange(len(v.pairs)), v.pairs.keys)))
    for rel in fq.rels:
        out += [*rel.flags, *rel.heavy, *store_state(rel.fwd), *store_state(rel.bwd)]
    return out


def _fq_results(fq: FreeQueries, n: int) -> list:
    """The families' results and lookups for ids 0..n-1 (through the kernel set)."""
    ids = np.arange(n, dtype=np.int64)
    out: list = []
    if "vertex_counts" in fq.families:
        out += [*rs.vertex_counts(fq), rs.vertex_lookup(fq, ids)]  # lookup: pair_sums
    if "edge_counts" in fq.families:
        a, b = np.repeat(ids, n), np.tile(ids, n)
        out += [*rs.edge_counts(fq), rs.edge_lookup(fq, a, b)]  # lookup: sums
    if "triangles" in fq.families:
        out += [np.concatenate([host(x) for x in c])
                for c in zip(*rs.triangle_parts(fq, chunk=4))]
        out += rs.triangles_with(fq, ids)  # emit + compact over every row
    return out


def _hub_deletes(rels: list[dict], out: bool, upto: int) -> list:
    """Phases deleting hub 0's tuples (0, b) (``out``) or (b, 0) with 1 <= b <= upto."""
    phases = []
    for k, d in enumerate(rels):
        gone = sorted(t for t in d if (t[0] == 0 if out else t[1] == 0) and 1 <= max(t) <= upto)
        keys = pk([t[0] for t in gone], [t[1] for t in gone])
        phases.append((k, keys, -np.array([d.pop(t) for t in gone], np.int64)))
    return phases


@pytest.mark.parametrize("family", [*FAMILIES, "all"])
@pytest.mark.parametrize("eps", ["1/2", "1"])
def test_free_queries_streams(eps: str, family: str, query_launch, store_layout) -> None:
    """FreeQueries of one family (or all three) on the cuda kernel set equals the CPU one
    (stores bit for bit, flags, heavy lists, δΔ3, results, lookups) after every batch, and the
    count equals the oracle's. Hub 0 starts heavy on both sides (at ε = ½); random batches,
    then deletes of its out-tuples (heavy → light: minor rebalancing moves) and of its
    in-tuples (|D| below N/4: major rebalancing)."""
    from test_free_queries import arrays, random_batch

    rng = np.random.default_rng({"1/2": 20, "1": 21}[eps])
    n = 16
    rels: list[dict] = [{(0, b): 1 for b in range(1, n)} | {(b, 0): 1 for b in range(1, n)}
                        for _ in range(3)]
    random_batch(rng, rels, n, 6, 0.0)
    fams = FAMILIES if family == "all" else (family,)
    fqs = [FreeQueries(fams, [Fraction(eps)] * 3, kernels=kern, track_changes=True)
           for kern in (None, K)]
    assert fqs[0].qk is cpu_query and fqs[1].qk is K.query
    for fq in fqs:
        fq.bulk_fraction = 0  # always the delta path
        fq.build([arrays(d) for d in rels], n)
    heavy = 0
    for step in range(6):
        if step:
            phases = (_hub_deletes(rels, True, 10) if step == 3 else
                      _hub_deletes(rels, False, 13) if step == 5 else
                      random_batch(rng, rels, n, 6, 0.5))
            for fq in fqs:
                fq.apply(phases, n)
        want = np.einsum("ab,bc,ca->abc", *(_dense(d, n) for d in rels))
        assert fqs[0].count == fqs[1].count == int(want.sum()), step
        for j, (a, b) in enumerate(zip(*(_fq_state(fq) for fq in fqs))):
            assert array_equal(a, b), (step, j)
        for j, (a, b) in enumerate(zip(*(_fq_results(fq, n) for fq in fqs))):
            assert array_equal(a, b), (step, "result", j)
        heavy += sum(h.shape[0] for r in fqs[1].rels for h in r.heavy)
    assert fqs[1].check_invariants() == []
    assert fqs[1].stats["major"] > 0
    if eps == "1/2":
        assert heavy > 0 and fqs[1].stats["moves"] > 0, fqs[1].stats


def _dense(rel: dict, n: int) -> np.ndarray:
    m = np.zeros((n, n), np.int64)
    for (a, b), v in rel.items():
        m[a, b] = v
    return m


def _load_star(rng, oracle: GraphOracle, engines: list) -> None:
    """Load ``engines`` (and ``oracle``) with a star of 24 edges at vertex 0 plus 8 random
    edges among vertices 1 to 9."""
    src = np.r_[np.zeros(24, np.int64), rng.integers(1, 10, 8)]
    dst = np.r_[np.arange(1, 25), rng.integers(1, 10, 8)]
    for u, v in zip(src.tolist(), dst.tolist()):
        if u != v:
            oracle.apply(u, v, 1)
    for e in engines:
        e.load((src, dst))


def test_graph_engine_maintains_queries(query_launch) -> None:
    """GraphEngine(backend="cuda", maintain=...) end to end: load (preprocessing, hub 0
    heavy), then batches; the same result tables, lookups and change feed as on the cpu
    backend."""
    rng = np.random.default_rng(9)
    oracle = GraphOracle(False)
    maintain = ["vertex_counts", "edge_counts", "triangles"]
    engines = [GraphEngine(epsilon="1/2", backend=b, adaptive=False, maintain=maintain,
                           track_changes=True, results_from="views") for b in ("cpu", "cuda")]
    _load_star(rng, oracle, engines)  # hub 0 is heavy
    assert engines[1].count() == engines[0].count() == oracle.count() > 0
    assert engines[1].result_table("triangles").equals(engines[0].result_table("triangles"))
    assert engines[1].fq.rels[0].heavy[0].tolist() == [0]
    vs = np.arange(25)
    for batch in graph_batches(oracle, rng, n_batches=3, nv=10, max_batch=20, hub_p=0.4,
                               shrink_from=2):
        r = [e.apply(batch) for e in engines]
        assert r[0].triangles == r[1].triangles == oracle.count()
        for name in maintain:
            assert engines[0].result_table(name).equals(engines[1].result_table(name)), name
        assert array_equal(*(e.vertex_count(vs) for e in engines))
        assert array_equal(*(e.edge_count(vs, np.roll(vs, 1)) for e in engines))
        assert engines[0].triangles_of(0).equals(engines[1].triangles_of(0))
        for name, t in engines[0].last_changes().items():
            assert t.equals(engines[1].last_changes()[name]), name


@pytest.mark.parametrize(("eps", "fams"), [("1/2", ["vertex_counts", "edge_counts"]),
                                           ("1", ["vertex_counts", "edge_counts"]),
                                           ("1", ["edge_counts"]),
                                           ("1/2", ["edge_counts", "triangles"])])
def test_graph_engine_local_counts_off_the_stores(eps: str, fams: list) -> None:
    """GraphEngine(backend="cuda", maintain=fams) keeps Δ1 and Δ2 off its own stores
    (gpu_ivm/queries/graph_local.py, the two launches of kernels/cuda_graph_local.py, the
    table of per-edge counts filled by compare-and-swap) and lists Δ3 off them when read
    (kernels/cuda_graph_listing.py): after every batch the result tables and the lookups
    equal the cpu engine's and a brute-force count (a star with hub 0, a triangle inserted
    and deleted whole, random batches, then deletes), and so do the triangles through a few
    vertices; the device table is rebuilt on the way."""
    from gpu_ivm.queries.graph_local import GraphLocalCounts

    rng = np.random.default_rng(12)
    oracle = GraphOracle(False)
    engines = [GraphEngine(epsilon=eps, backend=b, adaptive=False, maintain=fams)
               for b in ("cpu", "cuda")]
    assert all(isinstance(e.fq, GraphLocalCounts) for e in engines)
    _load_star(rng, oracle, engines)
    vs = np.arange(30)
    heavy = 0
    # a triangle inserted whole (every edge in the batch), later deleted whole
    whole = {"src": np.array([25, 26, 25, 0]), "dst": np.array([26, 27, 27, 25]),
             "sign": np.ones(4, np.int64)}
    gone = {k: v[:3] for k, v in whole.items()} | {"sign": -np.ones(3, np.int64)}

    def batches():  # the oracle follows each batch as it is made (the generator's when drawn)
        made = graph_batches(oracle, rng, n_batches=6, nv=12, max_batch=25, hub_p=0.4,
                             shrink_from=4)
        for i in range(6):
            if i in (0, 3):
                extra = whole if i == 0 else gone
                for u, v, sg in zip(*(extra[k].tolist() for k in ("src", "dst", "sign"))):
                    oracle.apply(u, v, sg)
                yield extra
            yield next(made)

    for batch in batches():
        r = [e.apply(batch) for e in engines]
        assert r[0].triangles == r[1].triangles == oracle.count()
        for name in fams:
            if name != "triangles":
                assert engines[0].result_table(name).equals(engines[1].result_table(name))
        want = np.zeros(vs.shape[0], np.int64)
        on_edge = np.zeros((vs.shape[0], vs.shape[0]), np.int64)
        for a, b in oracle.edges:
            for c in range(vs.shape[0]):
                if a < b < c and oracle.present(a, c) and oracle.present(b, c):
                    want[[a, b, c]] += 1
                    on_edge[[a, a, b, b, c, c], [b, c, a, c, a, b]] += 1
        for e in engines:
            if "vertex_counts" in fams:
                assert array_equal(e.vertex_count(vs), want)
            if "edge_counts" in fams:
                us, ws = np.repeat(vs, vs.shape[0]), np.tile(vs, vs.shape[0])
                assert array_equal(e.edge_count(us, ws), on_edge.ravel())
            if "triangles" in fams:
                listed = e.result_table("triangles").to_pydict()
                tri = sorted(zip(listed["a"], listed["b"], listed["c"]))
                assert tri == sorted(
                    (a, b, c) for a, b in oracle.edges for c in range(vs.shape[0])
                    if a < b < c and oracle.present(a, c) and oracle.present(b, c))
                through = e.triangles_of([0, 25, 3]).to_pydict()
                assert sorted(zip(through["a"], through["b"], through["c"])) == [
                    t for t in tri if {0, 25, 3} & set(t)]
        heavy += int(engines[1].rels[0].h.size)
    assert (heavy > 0) == (eps == "1/2")
    if "edge_counts" in fams:
        assert engines[1].fq.stats["table_rebuilds"] > 0


def test_graph_engine_change_feed_off_the_stores() -> None:
    """``track_changes=True`` with the results off the stores on the cuda backend
    (gpu_ivm/queries/graph_local.py: the triangles a batch removes listed off the device's
    stores before it, those it adds after it, kernels/cuda_graph_listing.py): after every
    batch ``last_changes()`` equals the cpu engine's, table for table, and the triangle
    changes equal a brute-force difference of the triangle sets."""
    from gpu_ivm.queries.graph_local import GraphLocalCounts

    fams = ["vertex_counts", "edge_counts", "triangles"]
    rng = np.random.default_rng(13)
    oracle = GraphOracle(False)
    engines = [GraphEngine(epsilon="1/2", backend=b, adaptive=False, maintain=fams,
                           track_changes=True) for b in ("cpu", "cuda")]
    assert all(isinstance(e.fq, GraphLocalCounts) for e in engines)
    _load_star(rng, oracle, engines)

    def triangles() -> set:
        return {(a, b, c) for a, b in oracle.edges for c in range(40)
                if a < b < c and oracle.present(a, c) and oracle.present(b, c)}

    changed = 0
    made = graph_batches(oracle, rng, n_batches=5, nv=12, max_batch=25, hub_p=0.4,
                         shrink_from=3)
    for _ in range(5):
        before = triangles()
        batch = next(made)  # the oracle takes the batch as it is drawn
        for e in engines:
            e.apply(batch)
        got, want = (e.last_changes() for e in engines)
        for name in fams:
            assert got[name].equals(want[name]), name
        t = got["triangles"].to_pydict()
        rows = list(zip(zip(t["a"], t["b"], t["c"]), t["new"]))
        after = triangles()
        assert {r for r, n in rows if n == 0} == before - after
        assert {r for r, n in rows if n == 1} == after - before
        changed += len(rows)
    assert changed > 0


def test_graph_engine_cuda_static_count_path(monkeypatch):
    """GraphEngine on the cuda backend counts at load and on the recompute path with the GPU
    static kernel; the counts equal the CPU engine's."""
    import gpu_ivm.static as static_mod

    calls = []
    real = static_mod.count_triangles_backend

    def spy(*args, **kw):
        calls.append((getattr(args[2], "name", args[2]), kw.get("directed", False)))
        return real(*args, **kw)

    monkeypatch.setattr(static_mod, "count_triangles_backend", spy)
    rng = np.random.default_rng(31)
    src, dst = rng.integers(0, 60, 400), rng.integers(0, 60, 400)
    cpu = GraphEngine(backend="cpu")
    gpu = GraphEngine(backend="cuda")
    cpu.load({"src": src, "dst": dst})
    gpu.load({"src": src, "dst": dst})
    assert gpu.count() == cpu.count() > 0
    present = set(zip(*gpu.edges()))
    absent = [(int(a), int(b)) for a, b in rng.integers(0, 60, (300, 2))
              if a != b and (a, b) not in present and (b, a) not in present]
    absent = list({(min(e), max(e)) for e in absent})[:100]
    batch = {"src": [e[0] for e in absent], "dst": [e[1] for e in absent],
             "sign": [1] * len(absent)}
    gpu.policy.force = "recompute"
    cpu.policy.force = "recompute"
    assert gpu.apply(batch).path == "recompute"
    cpu.apply(batch)
    assert gpu.count() == cpu.count()
    # load and the recompute batch; never for the cpu engine (the warm-up's directed engine
    # on the cpu counts its 3-cycles through it: left out)
    assert [c for c in calls if c != ("cpu", True)] == [("cuda", False)] * 2
    calls.clear()
    dcpu = GraphEngine(backend="cpu", directed=True)  # directed: the 3-cycles on the device
    dgpu = GraphEngine(backend="cuda", directed=True)
    dcpu.load({"src": src, "dst": dst})
    dgpu.load({"src": src, "dst": dst})
    assert dgpu.count() == dcpu.count() > 0
    dgpu.policy.force = "recompute"
    assert dgpu.apply(batch).path == "recompute"
    dcpu.apply(batch)
    assert dgpu.count() == dcpu.count()
    assert [c for c in calls if c[0] == "cuda"] == [("cuda", True)] * 2


@pytest.mark.parametrize("n", [0, 1, 31, 33, 200])
def test_prefix_ranges_twin(n: int, small_launch) -> None:
    """The query engine's run lookup on the device equals the CPU's and a brute-force scan,
    for every prefix width, probes present and absent, passed as CUDA array interfaces."""
    from gpu_ivm.kernels import cuda_lex
    from gpu_ivm.kernels import lex_search as cpu_lex

    rng = np.random.default_rng(n)
    keys = rng.integers(-3, 4, (n, 3))
    keys = keys[np.lexsort(keys.T[::-1])]
    for p in range(4):
        probes = np.ascontiguousarray(rng.integers(-4, 5, (n + 7, p)))
        lo, hi = cuda_lex.prefix_ranges(InterfaceOnly(keys), InterfaceOnly(probes))
        lo, hi = host(lo), host(hi)
        clo, chi = cpu_lex.prefix_ranges(keys, probes)
        assert lo.tolist() == clo.tolist() and hi.tolist() == chi.tolist()
        for q in range(probes.shape[0]):
            match = np.flatnonzero((keys[:, :p] == probes[q]).all(axis=1))
            assert hi[q] - lo[q] == match.shape[0]
            if match.shape[0]:
                assert (lo[q], hi[q] - 1) == (match[0], match[-1])


@pytest.mark.filterwarnings("ignore:overflow encountered")  # the simulator's int64 wrap
@pytest.mark.parametrize("seed", range(4))
def test_merge_sorted_twin(seed: int, small_launch) -> None:
    """The runs' merge on the device equals the CPU's one-pass merge: keys in one run only, in
    both, sums to zero, empty runs, 1 to 3 columns, interface-only arrays; an overflowing sum
    is refused."""
    from gpu_ivm.kernels import cuda_lex
    from gpu_ivm.kernels import lex_search as cpu_lex

    from gpu_ivm.errors import IntegerOverflowError

    rng = np.random.default_rng(seed)

    def run(n, cols):
        keys = rng.integers(0, 5, (n, cols))
        keys = np.unique(keys, axis=0) if n else keys
        mult = rng.integers(1, 3, keys.shape[0]) * rng.choice([-1, 1], keys.shape[0])
        return np.ascontiguousarray(keys, dtype=np.int64), mult.astype(np.int64)

    for cols in (1, 2, 3):
        for n1, n2 in ((0, 0), (0, 7), (9, 0), (40, 33), (1, 60)):
            k1, m1 = run(n1, cols)
            k2, m2 = run(n2, cols)
            keys, mult = cuda_lex.merge_sorted(InterfaceOnly(k1), InterfaceOnly(m1),
                                               InterfaceOnly(k2), InterfaceOnly(m2))
            want = cpu_lex.merge_sorted(k1, m1, k2, m2)
            assert host(keys).tolist() == want[0].tolist()
            assert host(mult).tolist() == want[1].tolist()
    big = np.array([2 ** 62], np.int64)
    with pytest.raises(IntegerOverflowError):
        cuda_lex.merge_sorted(np.array([[1]]), big, np.array([[1]]), big)


@pytest.mark.filterwarnings("ignore:overflow encountered")  # the simulator's int64 wrap
@pytest.mark.parametrize("seed", range(3))
def test_reduce_sorted_twin(seed: int, small_launch) -> None:
    """Consolidate and marginalize on the device equal the CPU's pass and a dictionary sum:
    every prefix width, groups summing to zero, one group, empty input, interface-only
    arrays; a sum outside int64 is refused, one whose partial sums wrap but total fits is
    exact."""
    from gpu_ivm.kernels import cuda_lex
    from gpu_ivm.kernels import lex_reduce as cpu

    from gpu_ivm.errors import IntegerOverflowError

    rng = np.random.default_rng(seed)
    for n in (0, 1, 37, 150):
        keys = rng.integers(0, 3, (n, 3))
        keys = np.ascontiguousarray(keys[np.lexsort(keys.T[::-1])], dtype=np.int64)
        mult = rng.integers(-2, 3, n).astype(np.int64)
        for p in range(4):
            k, m = cuda_lex.reduce_sorted(InterfaceOnly(keys), InterfaceOnly(mult), p)
            ck, cm = cpu.reduce_sorted(keys, mult, p)
            assert host(k).tolist() == ck.tolist() and host(m).tolist() == cm.tolist()
            sums: dict = {}
            for row, v in zip(keys[:, :p].tolist(), mult.tolist()):
                sums[tuple(row)] = sums.get(tuple(row), 0) + v
            want = sorted((key, v) for key, v in sums.items() if v)
            assert [(tuple(r), v) for r, v in zip(ck.tolist(), cm.tolist())] == want
    big = np.iinfo(np.int64).max
    one = np.zeros((3, 1), np.int64)
    k, m = cuda_lex.reduce_sorted(one, np.array([big, 5, -10], np.int64), 1)
    assert host(m).tolist() == [big - 5]
    with pytest.raises(IntegerOverflowError):
        cuda_lex.reduce_sorted(one[:2], np.array([big, 5], np.int64), 1)


@pytest.mark.parametrize("mode", ["insert_only", "auto"])
def test_insert_only_relation_engine_on_the_device(mode: str, small_launch) -> None:
    """The three-relation insert-only mode on the cuda backend (phase weights by the device
    twin) equals the cpu engine batch by batch; auto mode switches at the first delete on
    both, and the recount agrees."""
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng(len(mode))
        cpu = RelationEngine(mode=mode, backend="cpu", adaptive=False)
        gpu = RelationEngine(mode=mode, backend="cuda", adaptive=False)
        assert type(gpu).__name__ == "InsertOnlyRelationEngine"
        for i, batch in enumerate(insert_only_relation_batches(rng, mode)):
            r1, r2 = cpu.apply(batch), gpu.apply(batch)
            assert (r2.triangles, r2.delta, r2.path) == (r1.triangles, r1.delta, r1.path), i
            gpu.check_invariants()
        assert gpu.insert_only_active == cpu.insert_only_active == (mode == "insert_only")
        assert gpu.recount() == gpu.count() == cpu.count() > 0


def test_view_promotion_rides_on_the_add(monkeypatch) -> None:
    """A view update on the device reads the rows to promote with its store's add
    (``PromoteThen``; the separate ``rows_to_promote`` is never called) and ends with the same
    dense rows and values as the CPU's view."""
    from gpu_ivm import views

    monkeypatch.setattr(views, "DENSE_MIN", 2)
    monkeypatch.setattr(K.view, "rows_to_promote", None)  # calling it would fail
    rng = np.random.default_rng(17)
    cap = 16
    cpu_v, dev_v = views.ViewStore(cap), views.ViewStore(cap, K)
    grid_keys = (np.repeat(np.arange(cap), cap) << 32) | np.tile(np.arange(cap), cap)
    for _ in range(6):
        firsts = np.where(rng.random(24) < 0.7, rng.integers(0, 3, 24), rng.integers(0, cap, 24))
        keys = np.unique((firsts << 32) | rng.integers(0, cap, 24)).astype(np.int64)
        vals = rng.choice(np.array([-1, 1, 2], np.int64), keys.shape[0])
        cpu_v.add(keys, vals)
        dev_v.add(dev(keys), dev(vals))
        assert cpu_v.n_dense == dev_v.n_dense
        assert cpu_v.row_keys == dev_v.row_keys
        assert array_equal(cpu_v.get(grid_keys), dev_v.get(dev(grid_keys)))
    assert cpu_v.n_dense > 0
