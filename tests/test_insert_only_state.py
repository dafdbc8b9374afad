"""The insert-only engine's state on the sliding window's layout (gpu_ivm.insert_only_state,
kernels/insert_adj.py): an edge table, per-edge arrays and unsorted rows, one compiled call per
batch.

Oracles: the static counter (gpu_ivm.static) and the general engine on the same batches
(counts, conflicts: the error's row, the rows ignored), a dict of the edges inserted so far,
the old sorted-run store's listing kernel (stamp_kernels.closed_by_batch_list) for the
triangles a batch closes, and Numba's record of compiled signatures for the warm-up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_ivm.kernels import hashmap
from gpu_ivm.kernels import insert_adj as ia

from gpu_ivm import ConflictError, GraphEngine, InvariantError
from gpu_ivm.encoding import pack, unpack
from gpu_ivm.insert_only_state import EdgeState
from gpu_ivm.static import count_triangles_arrays

ROOT = Path(__file__).resolve().parents[1]


def _frozen(g) -> tuple:
    """Everything a refused batch must leave as it was (the arrays may have grown: room for
    the batch is made before it is checked)."""
    st = g._edges
    keys, stamps = g.stamped_edges()
    live = st.htv != hashmap.EMPTY
    table = sorted(zip(st.htk[live].tolist(), st.htv[live].tolist()))
    return (g.count(), g.num_edges, g.num_vertices, g.batches_applied, g._seq, st.n,
            keys.tolist(), stamps.tolist(), st.ln[: g.num_vertices].tolist(), st.used,
            table, st.nbr[: st.used].tolist(), st.val[: st.used].tolist())


def _random_batch(rng, n_vertices: int, size: int, keys=None):
    src = rng.integers(0, n_vertices, size)
    dst = rng.integers(0, n_vertices, size)
    if keys is not None:
        src, dst = keys[src], keys[dst]
    return {"src": src, "dst": dst, "sign": np.ones(size, np.int64)}


def _edge_set(batch, edges: set) -> tuple[set, int]:
    """The edges a batch adds under on_conflict="ignore" (a stored edge's rows and every row
    of an edge the batch repeats are skipped), and how many rows are skipped."""
    rows: dict = {}
    for a, b in zip(batch["src"].tolist(), batch["dst"].tolist()):
        if a != b:
            e = (min(a, b), max(a, b))
            rows[e] = rows.get(e, 0) + 1
    new = {e for e, c in rows.items() if c == 1 and e not in edges}
    return new, sum(c for e, c in rows.items() if c > 1 or e in edges)


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_random_streams_with_conflicts(path, monkeypatch):
    """Random batches with repeated edges inside a batch and across batches: with
    on_conflict="error" a batch with a conflict raises the general engine's ConflictError
    (same row) and changes nothing, and its conflict-free rows then go in; with "ignore" the
    same rows are skipped as by the general engine. Counts against the static counter and the
    general engine, invariants after every batch."""
    from gpu_ivm.kernels import stamp_kernels

    monkeypatch.setattr(stamp_kernels, "PAR_MIN", 0 if path == "parallel" else 1 << 62)
    rng = np.random.default_rng(5)
    for mode in ("error", "ignore"):
        g = GraphEngine(mode="insert_only", on_conflict=mode)
        h = GraphEngine(on_conflict=mode)
        edges: set = set()
        raised = 0
        for _ in range(40):
            batch = _random_batch(rng, 30, int(rng.integers(1, 40)))
            new, skipped = _edge_set(batch, edges)
            if mode == "error" and skipped:
                before = _frozen(g)
                with pytest.raises(ConflictError) as e1:
                    g.apply(batch)
                with pytest.raises(ConflictError) as e2:
                    h.apply(batch)
                assert e1.value.row == e2.value.row and str(e1.value) == str(e2.value)
                assert _frozen(g) == before
                g.check_invariants()
                raised += 1
                src, dst = zip(*sorted(new)) if new else ((), ())
                batch = {"src": np.array(src, np.int64), "dst": np.array(dst, np.int64),
                         "sign": np.ones(len(src), np.int64)}
                skipped = 0
            r1, r2 = g.apply(batch), h.apply(batch)
            edges |= new
            assert (r1.ignored, r1.self_loops) == (skipped if mode == "ignore" else 0,
                                                    r2.self_loops)
            assert r1.ignored == r2.ignored and r1.delta == r2.delta
            a, b = map(np.array, zip(*edges)) if edges else (np.zeros(0), np.zeros(0))
            assert g.count() == h.count() == count_triangles_arrays(a, b)
            assert g.num_edges == len(edges)
            g.check_invariants()
        if mode == "error":
            assert raised > 5
        got = set(zip(*[x.tolist() for x in g.edges()]))
        assert {(min(e), max(e)) for e in got} == edges


def test_string_keys_and_stamps_in_arrival_order():
    """String keys; a batch's edges get consecutive stamps in row order, after the earlier
    batches' ones."""
    rng = np.random.default_rng(9)
    names = np.array([f"user-{i}" for i in range(25)], dtype=object)
    g = GraphEngine(mode="insert_only", on_conflict="ignore")
    h = GraphEngine(on_conflict="ignore")
    for _ in range(15):
        batch = _random_batch(rng, 25, 20, names)
        seq = g._seq
        n = g._edges.n
        r1, r2 = g.apply(batch), h.apply(batch)
        assert (r1.delta, r1.ignored) == (r2.delta, r2.ignored)
        assert g._edges.stamp[n:g._edges.n].tolist() == list(range(seq + 1, g._seq + 1))
        g.check_invariants()
    assert g.count() == h.count() == count_triangles_arrays(*unpack(g.stamped_edges()[0]))


def test_big_batch_takes_the_parallel_path():
    """A load of 30,000 edges, then a batch of 20,000 whose work (sum of the smaller degrees)
    is above the parallel threshold and below the recount one: the count on all threads
    equals the static count, and a second engine forced onto one thread agrees."""
    from gpu_ivm.kernels import stamp_kernels

    from gpu_ivm import insert_only

    rng = np.random.default_rng(2)
    n = 3000
    src = (rng.pareto(1.5, 150_000) * 10).astype(np.int64) % n  # skewed degrees: hubs
    dst = rng.integers(0, n, 150_000)
    keys = np.unique(pack(np.minimum(src, dst), np.maximum(src, dst))[src != dst])
    assert keys.shape[0] >= 50_000
    keys = keys[rng.permutation(keys.shape[0])]
    a, b = unpack(keys)
    g = GraphEngine(mode="insert_only")
    g.load({"src": a[:30_000], "dst": b[:30_000]})
    batch = {"src": a[30_000:50_000], "dst": b[30_000:50_000], "sign": np.ones(20_000, np.int64)}
    rep = g.apply(batch)
    ln = g._edges.ln
    work = int(np.minimum(ln[g._edges.eu[30_000:50_000]], ln[g._edges.ev[30_000:50_000]]).sum())
    assert work >= max(stamp_kernels.PAR_MIN, ln.shape[0] // 8)  # the parallel path's threshold
    assert work <= insert_only.RECOUNT_RATIO * g.size and rep.path == "insert_only"
    assert g.count() == count_triangles_arrays(a[:50_000], b[:50_000])
    g.check_invariants()
    one = GraphEngine(mode="insert_only")
    one.load({"src": a[:30_000], "dst": b[:30_000]})
    saved = stamp_kernels.PAR_MIN
    stamp_kernels.PAR_MIN = 1 << 62
    try:
        assert one.apply(batch).delta == rep.delta
    finally:
        stamp_kernels.PAR_MIN = saved


def _old_listing(keys, stamps, new_keys, new_stamps):
    """The triangles the new edges close, by the sorted-run store's listing kernel: a set of
    (edge key, w, stamp of (u, w), stamp of (v, w))."""
    from gpu_ivm.kernels import batch_prep
    from gpu_ivm.kernels import stamp_kernels as sk

    from gpu_ivm.store import ZStore

    st = ZStore(0)
    allk = np.concatenate([keys, new_keys])
    order = np.argsort(allk)
    both, vals = batch_prep.symmetric_delta(allk[order], np.concatenate([stamps,
                                                                          new_stamps])[order])
    ids = int(unpack(allk)[1].max()) + 1 if allk.shape[0] else 1
    st.grow_ids(ids)
    st.add(both, vals)
    ga, gb = unpack(new_keys)
    e, w, s1, s2 = sk.closed_by_batch_list(st.nt(), st.live, ga, gb, new_stamps,
                                           np.zeros(st.id_capacity + 1, np.int64))
    return {(int(new_keys[i]), int(x), int(p), int(q)) for i, x, p, q in zip(e, w, s1, s2)}


@pytest.mark.parametrize("seed", [0, 1])
def test_listing_equals_the_old_kernel(seed):
    """track_changes lists, per batch, the triangles that the sorted-run store's kernel lists
    for the same stamped edges (closing edge, third vertex, the two other stamps), and the
    triangle log holds every triangle of the graph once."""
    rng = np.random.default_rng(seed)
    g = GraphEngine(mode="insert_only", track_changes=True, on_conflict="ignore")
    g.load({"src": rng.integers(0, 40, 150), "dst": rng.integers(0, 40, 150)})
    listed = 0
    for _ in range(12):
        keys, stamps = g.stamped_edges()
        first = g._edges.n
        g.apply(_random_batch(rng, 45, int(rng.integers(1, 60))))
        st = g._edges
        nk, ns = pack(st.eu[first:st.n], st.ev[first:st.n]), st.stamp[first:st.n]
        e, w, s1, s2 = st.list_new(first)
        new = {(int(nk[i]), int(x), int(p), int(q)) for i, x, p, q in zip(e, w, s1, s2)}
        assert len(new) == e.shape[0]
        assert new == _old_listing(keys, stamps, nk, ns)
        assert len(g.last_changes()["triangles"]) == len(new)
        listed += len(new)
        g.check_invariants()
    assert listed > 20
    assert sum(b.num_rows for b in g.triangles()) == g.count()


def test_check_invariants_finds_corruption():
    """Each part of the state that check_invariants compares, changed by hand, is found."""
    def fresh():
        g = GraphEngine(mode="insert_only")
        g.load({"src": [0, 1, 2, 2], "dst": [1, 2, 0, 3]})
        g.apply({"src": [3, 4], "dst": [0, 0], "sign": [1, 1]})
        g.check_invariants()
        return g

    breaks = [
        lambda st: st.val.__setitem__(st.off[0], 99),  # a row's stamp
        lambda st: st.nbr.__setitem__(st.off[3], 1),  # a row's neighbour
        lambda st: st.htv.__setitem__(np.flatnonzero(st.htv >= 0)[0], -1),  # a table entry
        lambda st: st.stamp.__setitem__(0, 7),  # a stamp out of range
        lambda st: st.ln.__setitem__(4, 0),  # a degree
        lambda st: st.ev.__setitem__(1, st.eu[1]),  # an endpoint
        lambda st: st.cap.__setitem__(0, 1),  # a row's room
    ]
    for brk in breaks:
        g = fresh()
        brk(g._edges)
        with pytest.raises(InvariantError):
            g.check_invariants()
    g = fresh()
    g.Q += 6
    with pytest.raises(InvariantError):
        g.check_invariants()


def test_a_conflict_gives_the_table_back():
    """A batch whose row 4 repeats a stored key, on a table of 16 slots holding collisions:
    the keys the call added before it are taken out again, the table is as it was."""
    htk = np.zeros(16, np.int64)
    htv = np.full(16, hashmap.EMPTY, np.int64)
    z = lambda n: np.zeros(n, np.int64)  # noqa: E731
    eu, ev, stamp, off, ln, cap = z(16), z(16), z(16), z(10), z(10), z(10)
    a, b = np.array([0, 1, 2]), np.array([1, 2, 3])
    out = ia.insert_batch(a, b, htk, htv, 0, 0, eu, ev, stamp, off, ln, cap, z(0), z(0), 0,
                          z(10), 0, 1, 1 << 62, True)
    assert out[0] == -1
    before = htv.copy(), htk[htv >= 0].copy(), ln.copy()
    a, b = np.array([4, 5, 6, 7, 2, 8]), np.array([5, 6, 7, 8, 1, 9])  # (2, 1) is stored
    bad = ia.insert_batch(a, b, htk, htv, 3, 3, eu, ev, stamp, off, ln, cap, out[1], out[2],
                          out[3], z(10), 0, 1, 1 << 62, True)[0]
    assert bad == 4
    assert htv.tolist() == before[0].tolist() and htk[htv >= 0].tolist() == before[1].tolist()
    assert ln.tolist() == before[2].tolist()
    st = EdgeState()
    st.htk, st.htv, st.eu, st.ev, st.stamp, st.n = htk, htv, eu, ev, stamp, 3
    assert st.lookup(pack(np.array([0, 1, 2, 4]), np.array([1, 2, 3, 5]))).tolist() \
        == [1, 2, 3, -1]


def test_snapshot_keeps_the_format_and_the_stamps(tmp_path):
    """A snapshot still holds edges.arrow (key u < v, stamp); the restored state lists the
    same stamped edges and goes on like the original."""
    import pyarrow.ipc as ipc

    rng = np.random.default_rng(4)
    g = GraphEngine(mode="insert_only", on_conflict="ignore")
    for _ in range(5):
        g.apply(_random_batch(rng, 20, 25))
    g.snapshot(tmp_path / "s")
    with ipc.open_file(tmp_path / "s" / "edges.arrow") as f:
        t = f.read_all()
    keys, stamps = g.stamped_edges()
    assert t.column_names == ["key", "stamp"]
    assert t.column("key").to_pylist() == keys.tolist()
    assert t.column("stamp").to_pylist() == stamps.tolist()
    r = GraphEngine.restore(tmp_path / "s")
    r.check_invariants()
    assert r.stamped_edges()[1].tolist() == stamps.tolist()
    more = _random_batch(rng, 24, 30)
    assert r.apply(more).delta == g.apply(more).delta
    assert r.stamped_edges()[1].tolist() == g.stamped_edges()[1].tolist()


AUDIT = r"""
import importlib, json, pkgutil
import numpy as np
from numba.core.registry import CPUDispatcher
import gpu_ivm, gpu_ivm.kernels
from gpu_ivm import GraphEngine
from gpu_ivm.kernels import stamp_kernels

kernels = {}
for pkg in (gpu_ivm, gpu_ivm.kernels):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if any(s in m.name for s in ("cuda", "spark", "__main__", "cli", "demo")):
            continue
        for v in vars(importlib.import_module(m.name)).values():
            if isinstance(v, CPUDispatcher):
                kernels[v.py_func.__module__ + "." + v.py_func.__name__] = v

def signatures():
    return {k: len(v.signatures) for k, v in kernels.items()}

rng = np.random.default_rng(0)
pool = np.unique(rng.integers(0, 4000, 40000) * 10000 + rng.integers(4000, 9000, 40000))
pool = pool[rng.permutation(pool.shape[0])]
engines = {}
for name, kw in (("plain", {}), ("track", {"track_changes": True}),
                 ("ignore", {"on_conflict": "ignore"})):
    g = GraphEngine(mode="insert_only", **kw)
    g.load({"src": rng.integers(0, 3000, 20000), "dst": rng.integers(0, 3000, 20000)})
    engines[name] = g
before = signatures()
for name, g in engines.items():
    lo = 0
    for size in (50, 3000, 20000):  # one thread; all threads; table and slab growth
        stamp_kernels.PAR_MIN = 1 << 62 if size == 50 else 0
        k = pool[lo:lo + size]
        lo += size
        g.apply({"src": k // 10000, "dst": k % 10000, "sign": np.ones(size, np.int64)})
    if name == "ignore":  # a stored edge and a repeated one
        s, d = g.edges()
        g.apply({"src": [s[0], 9001, 9001], "dst": [d[0], 9002, 9002], "sign": [1, 1, 1]})
after = signatures()
print(json.dumps(sorted(k for k in after if after[k] != before[k])))
"""


def test_insert_only_batches_after_load_compile_nothing():
    """After load() (which warms the stamp kernels up), a fresh process's insert-only batches
    (one thread, all threads, track_changes, conflicts skipped, table and slab growth) add no
    type signature to any CPU kernel."""
    def run():
        res = subprocess.run([sys.executable, "-c", AUDIT], cwd=ROOT, capture_output=True,
                             text=True, timeout=900)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    run()  # fills Numba's on-disk cache if it is cold
    assert run() == []
