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
import sys
from collections.abc import Iterator

import numba
import numpy as np
import pytest
from conftest import tiny_storage
from oracle import GraphOracle
from streams import graph_batches

if not numba.config.ENABLE_CUDASIM:  # pragma: no cover - guarded by test_cuda_sim.py
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from gpu_ivm.kernels import cuda_launch  # noqa: E402
from gpu_ivm.kernels import delta_kernels as cpu_delta  # noqa: E402
from gpu_ivm.kernels import store_kernels as cpu_store  # noqa: E402
from gpu_ivm.kernels import view_kernels as cpu_view  # noqa: E402
from gpu_ivm.kernels.lsm import SENTINEL  # noqa: E402

from gpu_ivm import GraphEngine, RelationEngine  # noqa: E402
from gpu_ivm.backend import get_backend  # noqa: E402
from gpu_ivm.store import ZStore  # noqa: E402

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


def pk(a, b) -> np.ndarray:
    return (np.asarray(a, np.int64) << 32) | np.asarray(b, np.int64)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if x.shape[0] else x


def store_state(s: ZStore) -> tuple:
    """The physical state of a store (only the used parts of its arrays)."""
    return (s.keys[: s.used], s.vals[: s.used], np.asarray(s.bounds), np.asarray(s.dirptr),
            np.asarray(s.dirlen), s.dirs[: s.dirs_used], s.runmask, s.live, s.tomb,
            np.asarray([s.size]))


def assert_same_store(a: ZStore, b: ZStore, what: str = "store") -> None:
    for i, (x, y) in enumerate(zip(store_state(a), store_state(b))):
        assert np.array_equal(x, y), f"{what}: field {i} differs"


def random_store(rng, nfirst: int, nkeys: int, kernels=None) -> ZStore:
    """A store with several runs, tombstones and (after compaction) padding."""
    s = ZStore(nfirst, kernels)
    for _ in range(4):
        keys = sorted_unique(pk(rng.integers(0, nfirst, nkeys), rng.integers(0, 3 * nfirst,
                                                                            nkeys)))
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
                             ("view", cpu_view, ck.VIEW_FUNCTIONS)):
        for name in names:
            if not hasattr(cpu, name):
                continue
            g = getattr(getattr(K, part), name)
            c = getattr(cpu, name)
            gp = list(inspect.signature(getattr(g, "py_func", g)).parameters)
            cp = list(inspect.signature(getattr(c, "py_func", c)).parameters)
            assert gp == cp, f"{part}.{name}: {gp} != {cp}"
    assert BACKEND.name == "cuda" and BACKEND.xp is np and BACKEND.device == "simulator"


@pytest.mark.parametrize("n", SIZES + [1024, 2000])
@pytest.mark.parametrize("blocks", [4, 64])
def test_exclusive_scan(n: int, blocks: int) -> None:
    """Multi-block scan: 4 blocks (many tiles per chunk) and up to 32 blocks (= scan_tpb, so
    the one-block scan of chunk sums is full)."""
    for _ in _set_launch(32, blocks, 32):
        rng = np.random.default_rng(n)
        vals = rng.integers(-5, 9, n).astype(np.int64)
        out = cuda_launch.exclusive_scan(vals)
        assert out.shape == (n + 1,)
        assert np.array_equal(out, np.r_[0, np.cumsum(vals)])


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
        assert np.array_equal(want, got), fn
    qs = sorted_unique(q)
    want = np.empty(qs.shape[0], np.int64)
    got = np.empty(qs.shape[0], np.int64)
    cpu_store.probe_sorted(st, qs, want)
    K.store.probe_sorted(st, qs, got)
    assert np.array_equal(want, got)


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
        outs.append((int(r), st[1], live, tomb, o, new))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


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
        assert np.array_equal(a, b)


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
        assert np.array_equal(want, got)
    nkeys = int(keys[e - 1] >> 32) + 1 if n else 0
    want = np.empty(nkeys + 1, np.int64)
    got = np.full(nkeys + 1, -1, np.int64)
    cpu_store.build_directory(keys, s, e, nkeys, want)
    K.store.build_directory(keys, s, e, nkeys, got)
    assert np.array_equal(want, got)
    run = np.ascontiguousarray(keys[s:e])
    assert np.array_equal(cpu_store.sorted_unique_firsts(run), K.store.sorted_unique_firsts(run))
    want = np.zeros(cap, np.int64)
    got = np.zeros(cap, np.int64)
    cpu_store.first_key_counts(run, n, want)
    K.store.first_key_counts(run, n, got)
    assert np.array_equal(want, got)


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
    assert np.array_equal(cw, cg)
    ptr = np.r_[0, np.cumsum(cw)].astype(np.int64)
    fw = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
    fg = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
    cpu_store.fill_rows(st, xs, ptr, *fw)
    K.store.fill_rows(st, xs, ptr, *fg)
    assert np.array_equal(fw[0], fg[0]) and np.array_equal(fw[1], fg[1])
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
        assert np.array_equal(a, b)
    # per-key compaction of n distinct first keys
    xs_u = np.arange(min(n, nfirst), dtype=np.int64)
    outs = []
    for kern in (cpu_store, K.store):
        st2 = _copy_st(st)
        tomb = s.tomb.copy()
        kern.compact_keys(st2, tomb, xs_u)
        outs.append((st2[0], st2[1], tomb))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("tiny", [False, True], ids=["default", "tiny"])
@pytest.mark.parametrize("seed", [1, 2])
def test_zstore_twins(tiny: bool, seed: int, small_launch) -> None:
    """A ZStore driven by the cuda kernels stays bit-identical to a CPU-driven twin through
    inserts, deletes, revivals, merges, directories and per-key compaction."""
    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            tiny_storage(mp)
        rng = np.random.default_rng(seed)
        cpu, gpu = ZStore(30), ZStore(30, K)
        ref: dict[int, int] = {}
        for step in range(10):
            nk = int(rng.integers(0, 60))
            keys = sorted_unique(pk(rng.integers(0, 30 + step, nk), rng.integers(0, 40, nk)))
            old = np.array([ref.get(k, 0) for k in keys.tolist()], np.int64)
            d = rng.integers(-2, 3, keys.shape[0])
            d = np.where((old != 0) & (rng.random(keys.shape[0]) < 0.5), -old, d)
            assert np.array_equal(cpu.add(keys, d), gpu.add(keys, d))
            for k, v in zip(keys.tolist(), d.tolist()):
                ref[k] = ref.get(k, 0) + v
            assert_same_store(cpu, gpu, f"step {step}")
            for a, b in zip(cpu.items(), gpu.items()):
                assert np.array_equal(a, b)
            xs = np.arange(0, 34, 3, dtype=np.int64)
            for a, b in zip(cpu.rows(xs), gpu.rows(xs)):
                assert np.array_equal(a, b)
            probe = np.array(sorted(ref), np.int64)
            assert np.array_equal(gpu.get(probe), [ref[k] for k in probe.tolist()])
            assert np.array_equal(gpu.get(probe, assume_sorted=True), cpu.get(probe))


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
            assert np.array_equal(w_cpu, w_gpu), (eps, sym)
        st = E.l.nt()
        c_cpu = np.empty(n, np.int64)
        c_gpu = np.empty(n, np.int64)
        cpu_delta.expand_counts(xs, st, c_cpu)
        K.delta.expand_counts(xs, st, c_gpu)
        assert np.array_equal(c_cpu, c_gpu)
        ms = rng.integers(-2, 3, n)
        for left in (True, False):
            counts = np.empty(n, np.int64)
            cpu_delta.expand_counts(ys if left else xs, st, counts)
            ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
            o1 = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
            o2 = (np.empty(ptr[-1], np.int64), np.empty(ptr[-1], np.int64))
            cpu_delta.expand_emit(xs, ys, ms, st, left, ptr, *o1)
            K.delta.expand_emit(xs, ys, ms, st, left, ptr, *o2)
            assert np.array_equal(o1[0], o2[0]) and np.array_equal(o1[1], o2[1])


@pytest.mark.usefixtures("boundary_launch")
@pytest.mark.parametrize("n", SIZES)
def test_batch_wedges_and_segment_sums(n: int) -> None:
    g, rng = _engine_state(11 + n, "1/2", True)
    E = g.rels[0]
    cap = E.id_capacity
    dkeys = sorted_unique(pk(rng.integers(0, cap, 3 * n), rng.integers(0, cap, 3 * n)))[:n]
    dkeys = np.sort(dkeys[rng.permutation(dkeys.shape[0])][:n])
    dvals = rng.choice(np.array([-1, 1, 2], np.int64), dkeys.shape[0])
    for sym in (True, False):
        o1 = np.empty(dkeys.shape[0], np.int64)
        o2 = np.empty(dkeys.shape[0], np.int64)
        cpu_delta.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, sym, o1)
        K.delta.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, sym, o2)
        assert np.array_equal(o1, o2)
    keys = np.sort(rng.integers(0, max(n // 3, 1), n)).astype(np.int64)
    vals = rng.integers(-2, 3, n).astype(np.int64)
    for a, b in zip(cpu_delta.segment_sum_sorted(keys, vals),
                    K.delta.segment_sum_sorted(keys, vals)):
        assert np.array_equal(a, b)


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
            assert np.array_equal(a, b), left
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
            for a, b in zip(*outs):
                assert np.array_equal(a, b), left
    keys = pk(xs, ys)
    vals = rng.integers(-3, 4, n).astype(np.int64)
    outs = []
    for kern in (cpu_view, K.view):
        vmat = view.vmat.copy()
        outs.append((kern.scatter_dense(keys, vals, view.vrow, vmat), vmat))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- engines


def assert_same_engine(a, b) -> None:
    """Same count, N and physical state (stores, heavy flags, views) on both backends."""
    assert a.Q == b.Q and a.N == b.N
    for ra, rb in zip(a.rels, b.rels):
        assert np.array_equal(ra.heavy, rb.heavy)
        for part in ("h", "l", "ht"):
            assert_same_store(getattr(ra, part), getattr(rb, part), f"{ra.name}_{part}")
    for va, vb in zip(a.views, b.views):
        assert np.array_equal(va.vrow, vb.vrow)
        assert np.array_equal(va.vmat[: va.n_dense], vb.vmat[: vb.n_dense])
        for x, y in zip(va.items(), vb.items()):
            assert np.array_equal(x, y)


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
        assert np.array_equal(ka.heavy[: len(back.encoder)], kb.heavy[: len(back.encoder)])
        for part in ("h", "l", "ht"):
            for x, y in zip(getattr(ka, part).items(), getattr(kb, part).items()):
                assert np.array_equal(x, y)
    for va, vb in zip(back.views, on_gpu.views):
        for x, y in zip(va.items(), vb.items()):
            assert np.array_equal(x, y)
