"""The cuda backend with its whole state in (simulated) device memory, against the CPU backend.

Run by ``tests/test_cuda_sim.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``. The array
module is :mod:`strict_cupy` (a CuPy stand-in that refuses host/device mixing, implicit
conversions, functions CuPy lacks and per-element iteration, and counts host syncs), so these
tests fail where a real GPU would fail or crawl: a host array reaching a kernel launch, NumPy
used on device state, a Python loop over device data. To run directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_strict_cases.py
"""

from __future__ import annotations

import sys

import numba
import numpy as np
import pytest
from conftest import tiny_storage
from oracle import GraphOracle
from streams import graph_batches, insert_only_relation_batches

if not numba.config.ENABLE_CUDASIM:  # pragma: no cover - guarded by test_cuda_sim.py
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

import strict_cupy as sc  # noqa: E402
from gpu_ivm.kernels import view_kernels as cpu_view  # noqa: E402
from gpu_ivm.kernels.cuda_kernels import kernel_set  # noqa: E402

from gpu_ivm import GraphEngine, RelationEngine, compact  # noqa: E402
from gpu_ivm.backend import Backend  # noqa: E402
from gpu_ivm.store import ZStore  # noqa: E402
from gpu_ivm.views import product_entries  # noqa: E402

sc.install()
sys.setswitchinterval(1e-4)  # the simulator's threads poll at syncthreads: switch often
XP = sc.module()
DEVICE = Backend("cuda", XP, kernel_set(XP), "simulator")
# the cpu engines here are the stores' twins of the device engines (same N, partitions and
# stores): they keep their graphs in the stores, not in the compact form (gpu_ivm/compact.py,
# a cpu engine's way for small graphs; its own tests are tests/test_compact.py)
compact.COMPACT_MAX = 0


def host(a) -> np.ndarray:
    return sc.asnumpy(a)


def assert_on_device(eng) -> None:
    """Every array of the engine's state is a device array."""
    for K in eng.rels:
        assert isinstance(K.heavy, sc.DeviceArray), K.name
        for st in (K.h, K.l, K.ht):
            for name in ("keys", "vals", "dirs", "runmask", "live", "tomb"):
                assert isinstance(getattr(st, name), sc.DeviceArray), (K.name, name)
    for v in eng.views:
        assert isinstance(v.vrow, sc.DeviceArray) and isinstance(v.vmat, sc.DeviceArray)
        assert isinstance(v.sparse.keys, sc.DeviceArray)


def signed_batches(rng, nv: int, rows: int, count: int):
    """``count`` random batches of ``rows`` inserts/deletes over ``nv`` vertices (conflicting
    rows included: the engines skip them with ``on_conflict="ignore"``)."""
    for _ in range(count):
        yield {"src": rng.integers(0, nv, rows), "dst": rng.integers(0, nv, rows),
               "sign": rng.choice([-1, 1], rows)}


def assert_same_state(cpu, dev) -> None:
    """Same count, N, partitions, relations and views (logical content) on both backends."""
    assert (cpu.Q, cpu.N, cpu.size) == (dev.Q, dev.N, dev.size)
    n = len(cpu.encoder)
    for a, b in zip(cpu.rels, dev.rels):
        assert np.array_equal(a.heavy[:n], host(b.heavy)[:n]), a.name
        for part in ("h", "l", "ht"):
            for x, y in zip(getattr(a, part).items(), getattr(b, part).items()):
                assert np.array_equal(x, host(y)), (a.name, part)
    for va, vb in zip(cpu.views, dev.views):
        for x, y in zip(va.items(), vb.items()):
            assert np.array_equal(x, host(y))


@pytest.fixture(autouse=True)
def _fresh_counters():
    sc.reset()
    yield


# ----------------------------------------------------------------------------- the stand-in
def test_stand_in_refuses_what_cupy_refuses() -> None:
    d = XP.arange(4)
    with pytest.raises(sc.DeviceMemoryError):
        _ = d + np.arange(4)  # host and device mixed
    with pytest.raises(sc.DeviceMemoryError):
        np.asarray(d)  # implicit download
    with pytest.raises(sc.DeviceMemoryError):
        XP.repeat(d, d)  # CuPy takes an int or a host sequence
    with pytest.raises(sc.DeviceMemoryError):
        list(d)  # per-element iteration
    with pytest.raises(sc.DeviceMemoryError):
        np.r_[True, d]
    with pytest.raises(sc.DeviceMemoryError):
        XP.searchsorted(d, 2)  # CuPy searches for arrays only
    out = np.empty(4, np.int64)
    with pytest.raises(sc.DeviceMemoryError):
        out[:] = d
    sc.reset()
    assert int(d.sum()) == 6 and bool((d > 2).any())
    assert d[d > 1].shape == (2,)
    assert sc.reset() == {"scalar_reads": 2, "size_syncs": 1, "syncs": 3}


# ----------------------------------------------------------------------------- engines
@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
def test_graph_engine_on_device(eps: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng({"0": 11, "1/2": 12, "1": 13}[eps])
        oracle = GraphOracle(False)
        cpu = GraphEngine(epsilon=eps, backend="cpu", adaptive=False)
        dev = GraphEngine(epsilon=eps, backend=DEVICE, adaptive=False)
        total = moves = 0
        for batch in graph_batches(oracle, rng, n_batches=8, nv=22, max_batch=36, hub_p=0.5,
                                   shrink_from=5):
            r1, r2 = cpu.apply(batch), dev.apply(batch)
            total += r1.updates
            moves += r2.minor_moves
            assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta)
            assert r2.triangles == oracle.count()
            assert_same_state(cpu, dev)
        assert_on_device(dev)
        dev.check_invariants()
        assert dev.recount() == oracle.count()
        assert total >= 80
        # at eps = 1/2 some phase moved keys: the count read with the phase's counts was
        # dropped and counted again after the moves (the path a steady batch does not take)
        assert moves > 0 or eps != "1/2", moves


def loaded_twins(src, dst, **kw) -> tuple[GraphEngine, GraphEngine]:
    """A cpu and a device GraphEngine with the same options, both loaded with the edges."""
    pair = GraphEngine(backend="cpu", **kw), GraphEngine(backend=DEVICE, **kw)
    for e in pair:
        e.load({"src": src, "dst": dst})
    return pair


def test_graph_engine_load_and_directed_on_device() -> None:
    rng = np.random.default_rng(14)
    src, dst = rng.integers(0, 30, 150), rng.integers(0, 30, 150)
    for directed in (False, True):
        cpu, dev = loaded_twins(src, dst, directed=directed, adaptive=False,
                                on_conflict="ignore")
        assert_same_state(cpu, dev)
        for u in signed_batches(rng, 34, 25, 3):
            assert dev.apply(u).triangles == cpu.apply(u).triangles
            assert_same_state(cpu, dev)
        assert_on_device(dev)
        dev.check_invariants()
        e1, e2 = cpu.edges(), dev.edges()
        assert all(np.array_equal(x, y) for x, y in zip(e1, e2))


def test_select_many_places_masks_of_one_length_in_one_launch() -> None:
    """select_many on device masks: the indices flatnonzero gives, for masks of one length
    (one read, one launch) and of several (the per-mask path); empty results included."""
    from gpu_ivm.selection import select_many

    rng = np.random.default_rng(4)
    for k, n in ((2, 1), (2, 37), (3, 200), (4, 5)):
        masks = [rng.random(n) < p for p in (0.0, 0.3, 0.9, 1.0)[:k]]
        sc.reset()
        got = select_many(XP, [XP.asarray(m) for m in masks])
        sc.reset()
        for m, g in zip(masks, got):
            assert host(g).tolist() == np.flatnonzero(m).tolist(), (k, n)
        sc.reset()
        select_many(XP, [XP.asarray(m) for m in masks])
        work, syncs = sc.work(), sc.reset()
        assert work.get("launches", 0) == 1 and syncs.get("syncs", 0) == 1, (work, syncs)
    odd = [rng.random(9) < 0.5, rng.random(4) < 0.5]
    got = select_many(XP, [XP.asarray(m) for m in odd])
    assert [host(g).tolist() for g in got] == [np.flatnonzero(m).tolist() for m in odd]


def device_columns_of(batch: dict) -> dict:
    """A batch handed over in device memory (uploaded here, before the engine sees it)."""
    return {k: XP.asarray(np.asarray(v)) for k, v in batch.items()}


@pytest.mark.parametrize("eps", ["1/2", "1"])
def test_device_batches_prepared_on_device(eps: str) -> None:
    """Batches given as device arrays (valid ones from the oracle, then conflicting, looped
    and new-vertex rows) are prepared on the device: same state as the CPU fed host arrays,
    no upload of a valid batch, and the state stays on the device."""
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng(21)
        oracle = GraphOracle(False)
        kw = dict(epsilon=eps, adaptive=False, on_conflict="ignore")
        cpu = GraphEngine(backend="cpu", **kw)
        dev = GraphEngine(backend=DEVICE, **kw)
        twin = GraphEngine(backend=DEVICE, **kw)  # the same batches from host arrays
        empty = {k: np.zeros(0, np.int64) for k in ("src", "dst", "sign")}
        for e in (cpu, twin):  # an engine's first batch warms the kernels up: not counted
            e.apply(empty)
        dev.apply(device_columns_of(empty))
        for batch in graph_batches(oracle, rng, n_batches=6, nv=22, max_batch=36, hub_p=0.5,
                                   shrink_from=4):
            given = device_columns_of(batch)
            known = len(dev.encoder)
            sc.reset()
            r2 = dev.apply(given)
            ups = sc.reset().get("uploads", 0)
            twin.apply(batch)
            twin_ups = sc.reset().get("uploads", 0)
            # the twin uploads the batch; the device input's key table goes up again only
            # after new vertices (when the host's table grew)
            assert ups < twin_ups or (len(dev.encoder) > known and ups <= twin_ups + 1), \
                (ups, twin_ups)
            r1 = cpu.apply(batch)
            assert (r2.triangles, r2.delta, r2.updates) == (r1.triangles, r1.delta, r1.updates)
            assert r2.triangles == oracle.count()
            assert_same_state(cpu, dev)
        assert dev.device_to_host == 0
        for u in signed_batches(rng, 30, 25, 4):
            u["dst"][:2] = u["src"][:2]  # self-loops
            r2, r1 = dev.apply(device_columns_of(u)), cpu.apply(u)
            assert (r2.triangles, r2.ignored, r2.self_loops) == \
                (r1.triangles, r1.ignored, r1.self_loops)
            assert_same_state(cpu, dev)
        assert_on_device(dev)
        dev.check_invariants()


def test_results_handed_back_on_device(monkeypatch) -> None:
    """``as_="device"`` / ``"cudf"``: device arrays with the Arrow results' rows, decoded on
    the device (no download but sizes), new keys of device batches included."""
    import types

    import pyarrow as pa

    fams = ["vertex_counts", "edge_counts", "triangles"]
    rng = np.random.default_rng(8)
    keys = rng.permutation(500)[:30] * 7 - 100
    src, dst = keys[rng.integers(0, 30, 120)], keys[rng.integers(0, 30, 120)]
    cpu, dev = loaded_twins(src, dst, maintain=fams, on_conflict="ignore")
    b = {"src": np.r_[keys[rng.integers(0, 30, 30)], 9001, 9002],
         "dst": np.r_[keys[rng.integers(0, 30, 30)], keys[0], keys[0]],
         "sign": np.ones(32, np.int64)}
    b["dst"][-2:] = [9002, keys[1]]  # a new triangle through two new vertices
    b["src"][-3], b["dst"][-3] = 9001, keys[1]
    cpu.apply(b)
    dev.apply(device_columns_of(b))
    frames = []
    fake = types.ModuleType("cudf")
    fake.DataFrame = lambda cols: frames.append(cols) or cols
    monkeypatch.setitem(sys.modules, "cudf", fake)
    for fam in fams:
        sc.reset()
        cols = getattr(dev, fam)(as_="cudf")
        moved = sc.reset()
        assert frames[-1] is cols
        assert all(isinstance(v, sc.DeviceArray) for v in cols.values()), fam
        assert moved.get("bytes_down", 0) <= 256, (fam, moved)  # sizes only
        t = pa.Table.from_batches(list(getattr(cpu, fam)()))
        want = {n: t.column(n).to_pylist() for n in t.column_names}
        assert {k: host(v).tolist() for k, v in cols.items()} == want, fam
        assert len(want[t.column_names[0]]) > 0


def test_spark_driver_moves_each_batch_to_the_device_once() -> None:
    """DriverEngine on a device backend uploads each micro-batch's Arrow table once and the
    engine prepares it there; string keys and other tables stay on the host's path."""
    import pyarrow as pa
    from gpu_ivm.spark_glue import DriverEngine

    rng = np.random.default_rng(9)
    base = {"src": rng.integers(0, 40, 150), "dst": rng.integers(0, 40, 150)}
    drv = DriverEngine(None, factory=lambda: GraphEngine(backend=DEVICE, on_conflict="ignore"),
                       base=base)
    cpu = GraphEngine(on_conflict="ignore")
    cpu.load(base)
    for i, u in enumerate(signed_batches(rng, 44, 30, 4)):
        t = pa.table({k: pa.array(v, pa.int32() if k == "dst" else pa.int64())
                      for k, v in u.items()})
        sc.reset()
        rep = drv.apply(t, batch_id=i)
        assert sc.reset().get("uploads", 0) >= 1
        assert rep.triangles == cpu.apply(u).triangles
    assert drv.engine.device_batches == 4


@pytest.mark.parametrize("eps", ["1/2", "1"])
def test_relation_engine_on_device(eps: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng({"1/2": 15, "1": 16}[eps])
        cpu = RelationEngine(epsilon=eps, backend="cpu", adaptive=False)
        dev = RelationEngine(epsilon=eps, backend=DEVICE, adaptive=False)
        for i in range(7):
            n = int(rng.integers(10, 40))
            a = rng.integers(0, 12, n)
            a[rng.random(n) < 0.4] = 0  # a hub key
            batch = {"rel": rng.choice(list("RST"), n).tolist(), "src": a.tolist(),
                     "dst": rng.integers(0, 12, n).tolist(),
                     "mult": rng.integers(-2, 3, n).tolist()}
            r1, r2 = cpu.apply(batch), dev.apply(batch)
            assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta), i
            assert_same_state(cpu, dev)
        assert_on_device(dev)
        dev.check_invariants()
        assert dev.recount() == cpu.count()
        x1, x2 = cpu.relation("S"), dev.relation("S")
        assert all(np.array_equal(p, q) for p, q in zip(x1, x2))


@pytest.mark.parametrize("mode", ["insert_only", "auto"])
def test_insert_only_relation_engine_on_device(mode: str) -> None:
    """The three-relation insert-only mode with its stores in device memory equals the cpu
    engine batch by batch (an H100/H200 run found the host's phases reaching the device
    stores: CuPy refused them); auto mode switches at the first delete on both."""
    with pytest.MonkeyPatch.context() as mp:
        tiny_storage(mp)
        rng = np.random.default_rng(40 + len(mode))
        cpu = RelationEngine(mode=mode, backend="cpu", adaptive=False)
        dev = RelationEngine(mode=mode, backend=DEVICE, adaptive=False)
        assert type(dev).__name__ == "InsertOnlyRelationEngine"
        for i, batch in enumerate(insert_only_relation_batches(rng, mode)):
            r1, r2 = cpu.apply(batch), dev.apply(batch)
            assert (r2.triangles, r2.delta, r2.path) == (r1.triangles, r1.delta, r1.path), i
            dev.check_invariants()
        assert dev.insert_only_active == cpu.insert_only_active == (mode == "insert_only")
        assert dev.recount() == dev.count() == cpu.count() > 0


def _fresh_edges(rng, nv: int, k: int, seen: set) -> np.ndarray:
    out = []
    while len(out) < k:
        u, v = rng.integers(0, nv, 2).tolist()
        if u != v and frozenset((u, v)) not in seen:
            seen.add(frozenset((u, v)))
            out.append((u, v))
    return np.array(out)


def test_static_counts_stay_on_device() -> None:
    """Load and the recompute path count on the device for every engine: undirected
    triangles, directed 3-cycles and the three-relation sum; a recompute batch downloads only
    sizes (no edge or tuple data), and the counts equal the cpu engines'."""
    rng = np.random.default_rng(23)
    base = rng.integers(0, 40, (240, 2))
    for directed in (False, True):
        seen = {frozenset(p) for p in base.tolist()}
        pair = loaded_twins(base[:, 0], base[:, 1], directed=directed, on_conflict="ignore")
        for e in pair:
            e.policy.force = "recompute"
        assert pair[1].count() == pair[0].count() > 0
        new = _fresh_edges(rng, 40, 30, seen)
        batch = {"src": new[:, 0], "dst": new[:, 1], "sign": np.ones(30, int)}
        sc.reset()
        assert pair[1].apply(batch).path == "recompute"
        stats = sc.reset()
        assert pair[0].apply(batch).triangles == pair[1].count()
        assert stats.get("bytes_down", 0) <= 64, (directed, stats)
    rel = [RelationEngine(backend=b) for b in ("cpu", DEVICE)]
    tuples = {r: {"src": rng.integers(0, 15, 60), "dst": rng.integers(0, 15, 60),
                  "mult": rng.integers(-2, 3, 60)} for r in "RST"}
    for e in rel:
        e.load(**tuples)
        e.policy.force = "recompute"
    assert rel[1].count() == rel[0].count() != 0
    batch = {"rel": rng.choice(list("RST"), 40).tolist(), "src": rng.integers(0, 15, 40),
             "dst": rng.integers(0, 15, 40), "mult": rng.integers(-2, 3, 40)}
    sc.reset()
    assert rel[1].apply(batch).path == "recompute"
    stats = sc.reset()
    assert rel[0].apply(batch).triangles == rel[1].count()
    assert stats.get("bytes_down", 0) <= 64, stats


def test_snapshot_round_trip_on_device(tmp_path) -> None:
    rng = np.random.default_rng(17)
    oracle = GraphOracle(False)
    batches = list(graph_batches(oracle, rng, n_batches=5, nv=22, max_batch=30, hub_p=0.5))
    dev = GraphEngine(backend=DEVICE, adaptive=False)
    for b in batches[:3]:
        dev.apply(b)
    dev.snapshot(tmp_path / "s")
    back = GraphEngine.restore(tmp_path / "s", backend=DEVICE)
    on_cpu = GraphEngine.restore(tmp_path / "s", backend="cpu")
    assert_on_device(back)
    for b in batches[3:]:
        assert back.apply(b).triangles == on_cpu.apply(b).triangles
    assert back.count() == oracle.count()
    assert_same_state(on_cpu, back)


# ----------------------------------------------------------------------------- free queries
FAMILIES = ["vertex_counts", "edge_counts", "triangles"]


def assert_same_results(cpu, dev) -> None:
    for f in FAMILIES:
        assert dev.result_table(f).equals(cpu.result_table(f)), f


@pytest.mark.parametrize("source", ["views", "stores"])
def test_graph_free_queries_on_device(source: str) -> None:
    """The results and the change feed of the general state (paper 001's views) and of the
    state off the count's stores (gpu_ivm/queries/graph_local.py) on the device, against the
    cpu engine's, host copies refused."""
    rng = np.random.default_rng(21)
    src, dst = rng.integers(0, 24, 80), rng.integers(0, 24, 80)
    cpu, dev = loaded_twins(src, dst, adaptive=False, on_conflict="ignore", maintain=FAMILIES,
                            track_changes=True, results_from=source)
    assert getattr(dev.fq, "graph_local", False) == (source == "stores")
    assert_same_results(cpu, dev)
    for u in signed_batches(rng, 28, 14, 4):
        assert dev.apply(u).triangles == cpu.apply(u).triangles
        assert_same_results(cpu, dev)
        c1, c2 = cpu.last_changes(), dev.last_changes()
        assert c1.keys() == c2.keys() and all(c1[k].equals(c2[k]) for k in c1)
    v = int(src[0])
    assert dev.vertex_count(v) == cpu.vertex_count(v)
    assert dev.triangles_of(v).equals(cpu.triangles_of(v))
    assert dev.check_invariants() == []
    if source == "views":
        assert dev.fq.check_invariants() == []


def test_relation_free_queries_on_device() -> None:
    rng = np.random.default_rng(22)

    def rel(n):
        return {"src": rng.integers(0, 10, n), "dst": rng.integers(0, 10, n),
                "mult": rng.integers(1, 3, n)}

    base = {"R": rel(40), "S": rel(40), "T": rel(40)}
    kw = dict(adaptive=False, maintain=FAMILIES)
    cpu = RelationEngine(backend="cpu", **kw)
    dev = RelationEngine(backend=DEVICE, **kw)
    cpu.load(**base)
    dev.load(**base)
    assert_same_results(cpu, dev)
    for _ in range(3):
        n = 12
        u = {"rel": rng.choice(list("RST"), n).tolist(), "src": rng.integers(0, 12, n),
             "dst": rng.integers(0, 12, n), "mult": rng.integers(1, 3, n)}
        assert dev.apply(u).triangles == cpu.apply(u).triangles
        assert_same_results(cpu, dev)
    assert dev.fq.check_invariants() == []


# ----------------------------------------------------------------------------- host syncs
def _syncs_per_batch(batch_size: int, seed: int) -> list[tuple[int, int]]:
    """(host syncs, bytes read back) of each batch of ``batch_size`` new edges (major
    rebalancing excluded)."""
    rng = np.random.default_rng(seed)
    nv = 150
    base = rng.integers(0, nv, (300, 2))
    eng = GraphEngine(backend=DEVICE, adaptive=False)
    eng.load({"src": base[:, 0], "dst": base[:, 1]})
    seen = {frozenset(p) for p in base.tolist()}
    out = []
    for _ in range(3):
        fresh = []  # absent edges only: a valid batch (a conflict downloads its details)
        while len(fresh) < batch_size:
            u, v = rng.integers(0, nv, 2).tolist()
            if u != v and frozenset((u, v)) not in seen:
                seen.add(frozenset((u, v)))
                fresh.append((u, v))
        e = np.array(fresh)
        sc.reset()
        rep = eng.apply({"src": e[:, 0], "dst": e[:, 1], "sign": np.ones(batch_size, int)})
        stats = sc.reset()
        if not rep.major_rebalances:
            # only counts come back (a few int64), never per-update data such as edge presence
            assert stats.get("bytes_down", 0) <= 16 * 8, stats
            out.append((stats.get("syncs", 0), stats.get("bytes_down", 0)))
    return out


def test_host_syncs_do_not_grow_with_the_batch() -> None:
    """No per-update host round trips: a batch of 64 updates makes about as many host syncs
    as a batch of 4 (a per-update sync would multiply them by 16)."""
    small = _syncs_per_batch(4, 18)
    large = _syncs_per_batch(64, 19)
    print("host syncs and bytes read per batch: 4 updates", small, "64 updates", large)
    assert small and large
    assert max(s for s, _ in large) <= 2 * max(s for s, _ in small) + 10, (small, large)
    # what comes back does not grow with the batch (a per-update read would multiply it)
    assert max(b for _, b in large) <= max(b for _, b in small), (small, large)


# ----------------------------------------------------------------------------- sized on the host
def test_store_sized_on_the_host_reads_nothing(monkeypatch) -> None:
    """A device store fed set-semantics batches with their hints reads nothing back: new runs
    and merges keep lengths the host fixed (padded on the device), the run metadata is
    patched in place, and the runs are rebuilt when dead entries pile up. Its content, size
    and degrees equal a dict's after every batch, and the hint is checked on the host."""
    import gpu_ivm.store as store_mod

    monkeypatch.setattr(store_mod, "DEAD_SLACK", 16)
    monkeypatch.setattr(store_mod, "DIR_MIN", 32)  # directories on merged runs too
    squeezes = []
    squeeze = ZStore._squeeze
    monkeypatch.setattr(ZStore, "_squeeze", lambda self: (squeezes.append(1), squeeze(self)))
    rng = np.random.default_rng(8)
    nfirst = 12
    dev = ZStore(nfirst, DEVICE.kernels)
    cpu = ZStore(nfirst)
    stored: set[int] = set()
    merged = quiet = 0
    for step in range(60):
        # inserts of absent keys (some deleted before: tombstones revive) and deletes
        pool = rng.integers(0, nfirst * 16, 40)
        keys = np.unique((pool // 16 << 32) | (pool % 16))
        deltas = np.array([-1 if int(k) in stored else 1 for k in keys], np.int64)
        if step % 3 == 2:  # a delete-heavy batch: dead entries accumulate
            deltas = np.where(deltas < 0, -1, 0)
            keys, deltas = keys[deltas != 0], deltas[deltas != 0]
        ins = int((deltas > 0).sum())
        hint = (ins, ins - int((deltas < 0).sum()))
        runs, rebuilt = dev.nruns, len(squeezes)
        sc.reset()
        dev.add(XP.asarray(keys), XP.asarray(deltas), below=nfirst, hint=hint)
        stats = sc.reset()
        merged += dev.nruns <= runs
        cpu.add(keys, deltas, hint=hint)  # the host checks the hint against its counts
        for k, d in zip(keys.tolist(), deltas.tolist()):
            (stored.add if d > 0 else stored.discard)(k)
        if stats.get("syncs", 0):  # only the rebuild reads (a count per run)
            assert len(squeezes) > rebuilt, (step, stats)
        else:
            quiet += 1
        want = np.array(sorted(stored), np.int64)
        got_k, got_v = dev.items()
        assert np.array_equal(host(got_k), want) and (host(got_v) == 1).all(), step
        assert len(dev) == len(stored) == len(cpu)
        assert np.array_equal(host(dev.live), cpu.live)
        probe = np.unique(rng.integers(0, nfirst * 16, 30))
        probe = (probe // 16 << 32) | (probe % 16)
        assert np.array_equal(host(dev.get(XP.asarray(probe))), cpu.get(probe)), step
    assert squeezes and merged > 5, (len(squeezes), merged)
    assert quiet >= 40, quiet  # most batches read nothing at all
    assert (host(dev.tomb) >= 0).all()
    with pytest.raises(RuntimeError, match="hint"):  # a wrong hint is refused on the host
        cpu.add(np.array([(1 << 32) | 99], np.int64), np.array([1]), hint=(0, 1))


def test_device_conflict_checked_with_the_phase() -> None:
    """On a device the set check of a batch between known vertices comes back with the
    phase's counts; a conflict stops the batch before it changes anything: with
    ``on_conflict="error"`` the error names the row and the state is as before (no new
    vertex kept), with ``"ignore"`` the rest of the batch applies as on the CPU."""
    from gpu_ivm.errors import ConflictError

    rng = np.random.default_rng(21)
    base = rng.integers(0, 40, (120, 2))
    for mode in ("error", "ignore"):
        cpu, dev = loaded_twins(base[:, 0], base[:, 1], adaptive=False, on_conflict=mode)
        present = tuple(int(v) for v in base[base[:, 0] != base[:, 1]][0])
        batch = {"src": np.array([500, 3, present[0], 7]),
                 "dst": np.array([501, 500, present[1], 9]), "sign": np.array([1, 1, 1, 1])}
        before = (dev.count(), len(dev.encoder), dev.size)
        if mode == "error":
            for e in (cpu, dev):
                with pytest.raises(ConflictError, match="already present") as info:
                    e.apply(batch)
                assert info.value.row == 2
            assert (dev.count(), len(dev.encoder), dev.size) == before
        else:
            r1, r2 = cpu.apply(batch), dev.apply(batch)
            assert (r2.triangles, r2.ignored, r2.updates) == (r1.triangles, r1.ignored,
                                                               r1.updates)
            assert r2.ignored == 1
        assert_same_state(cpu, dev)
        ok = {"src": np.array([3, 4]), "dst": np.array([600, 600]), "sign": np.array([1, 1])}
        assert dev.apply(ok).triangles == cpu.apply(ok).triangles
        assert_same_state(cpu, dev)
        dev.check_invariants()


# ----------------------------------------------------------------------------- kernels
def test_a_phase_run_with_its_preparation_leaves_nothing_behind() -> None:
    """The phase of a device batch is launched with its preparation, before the batch's sizes
    are read back (``GraphEngine._apply_device``), and changes the auto-ε flags as it runs.
    A batch that then goes another way (a conflict judged by the host's rules, new vertices
    prepared again, the recompute path) undoes it: after every batch the flagged vertices
    and their count equal the CPU engine's, as do the counts. ``epsilon="auto"`` watches the
    light rows; a hub's degree is moved across the watched bound and back (its spokes new
    vertices at first), while conflicts, new vertices and forced recomputes are mixed in."""
    rng = np.random.default_rng(23)
    nv = 30
    base = {"src": rng.integers(0, nv, 120), "dst": rng.integers(0, nv, 120)}
    kw = dict(epsilon="auto", on_conflict="ignore")
    dev = GraphEngine(backend=DEVICE, **kw)
    cpu = GraphEngine(backend="cpu", **kw)
    dev.load({k: XP.asarray(v) for k, v in base.items()})
    cpu.load(base)
    watch = cpu.rels[0].watch
    assert watch is not None
    spokes = 5000 + np.arange(watch + 8)  # the hub 0's extra neighbours
    ahead = []
    run = dev._run_early
    dev._run_early = lambda done, counts: ahead.append(1) or run(done, counts)
    flips = 0
    for i, b in enumerate(signed_batches(rng, nv, 20, 8)):
        sign = 1 if i % 2 == 0 else -1
        b = {"src": np.r_[b["src"], np.zeros(spokes.shape[0], np.int64)],
             "dst": np.r_[b["dst"], spokes],
             "sign": np.r_[b["sign"], np.full(spokes.shape[0], sign, np.int64)]}
        if i % 3 == 2:  # a batch whose every row is between known vertices, conflict-free
            b = {k: v[-spokes.shape[0]:] for k, v in b.items()}
        dev.policy.force = cpu.policy.force = "recompute" if i % 4 == 3 else None
        before = over_keys(dev)
        rd = dev.apply({k: XP.asarray(v) for k, v in b.items()})
        rc = cpu.apply(b)
        assert (rd.triangles, rd.delta, rd.updates, rd.ignored, rd.path) == \
            (rc.triangles, rc.delta, rc.updates, rc.ignored, rc.path), i
        D, C = dev.rels[0], cpu.rels[0]
        assert (D.watch, D.n_over) == (C.watch, C.n_over), i
        assert over_keys(dev) == over_keys(cpu), i
        flips += len(before ^ over_keys(dev))
    # the phase ran ahead, the flags moved, some batches went to the host's rules
    assert len(ahead) > 4 and flips and dev.device_to_host > 0, (ahead, flips, dev.device_to_host)


def over_keys(engine) -> set:
    """The user keys of the vertices whose auto-ε flag is set (the device's load numbers a
    batch's vertices as the host does, but not a load's: compared by key)."""
    n = len(engine.encoder)
    ids = np.flatnonzero(host(engine.rels[0].over)[:n])
    return set(engine.encoder.decode(ids).tolist())


def test_product_entries_in_chunks_matches_gustavson() -> None:
    """The expand-sort-reduce product (cut into chunks of a few paths) equals the CPU's
    row-wise Gustavson product."""
    rng = np.random.default_rng(20)

    def store(kernels, keys, vals):
        return ZStore.from_sorted(keys, vals, 12, kernels)

    lk = np.unique((rng.integers(0, 12, 30) << 32) | rng.integers(0, 12, 30))
    rk = np.unique((rng.integers(0, 12, 40) << 32) | rng.integers(0, 12, 40))
    lv = rng.integers(-3, 4, lk.shape[0])
    lv[lv == 0] = 1
    rv = rng.integers(1, 3, rk.shape[0])
    rows = np.unique(lk >> 32)
    _, _, ek, ev = cpu_view.build_view_rows(rows, store(None, lk, lv).nt(),
                                            store(None, rk, rv).nt(), 12, 1 << 62, 1)
    assert ek.shape[0] > 20
    left = store(DEVICE.kernels, XP.asarray(lk), XP.asarray(lv))
    right = store(DEVICE.kernels, XP.asarray(rk), XP.asarray(rv))
    for chunk in (6, 1 << 20):  # several chunks (a tuple alone where it has more), one
        gk, gv = product_entries(left, right, XP.asarray(rows), DEVICE.kernels, chunk=chunk)
        assert np.array_equal(host(gk), ek) and np.array_equal(host(gv), ev), chunk


def test_static_count_oriented_on_device() -> None:
    """The orientation runs on the device (the same CSR as the host's) and the count equals
    the CPU's; the edges are not downloaded."""
    from gpu_ivm.static import _oriented_csr, count_triangles_backend, oriented_csr_xp

    rng = np.random.default_rng(23)
    for m, n in ((0, 0), (5, 4), (120, 30), (300, 60)):
        s, d = rng.integers(0, max(n, 1), m), rng.integers(0, max(n, 1), m)
        if m:
            s[: m // 3] = 0  # a hub, self-loops and duplicates included
        want_ptr, want_hi, _ = _oriented_csr(s, d, n)
        ptr, hi = oriented_csr_xp(XP.asarray(s), XP.asarray(d), n, XP)
        assert np.array_equal(host(ptr), want_ptr) and np.array_equal(host(hi), want_hi)
        want = count_triangles_backend(s, d, "cpu", n=n)
        sc.reset()
        assert count_triangles_backend(XP.asarray(s), XP.asarray(d), DEVICE, n=n) == want
        assert sc.reset().get("downloads", 0) == 0
