"""Spark glue parts that run without Spark: HyperCube partitioning (in-process runner), the
durable engine state, the exactly-once sink logic and dead-letter splitting."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from gpu_ivm.spark_glue import (
    DriverEngine,
    EngineLog,
    LocalHyperCube,
    TriangleSink,
    clear_registry,
    read_results,
    route_updates,
    split_bad_rows,
    validate_batch,
    vertex_hash,
)
from oracle import GraphOracle
from streams import graph_batches

import gpu_ivm
from gpu_ivm.errors import ConflictError, InputError


def _base(rng, nv, m, oracle):
    src, dst = rng.integers(0, nv, m), rng.integers(0, nv, m)
    for u, v in zip(src.tolist(), dst.tolist()):
        if u != v and not oracle.present(u, v):
            oracle.apply(u, v, 1)
    return {"src": src, "dst": dst}


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("directed", [False, True])
def test_hypercube_equals_single_engine(tmp_path, k, directed):
    rng = np.random.default_rng(100 * k + directed)
    o = GraphOracle(directed=directed)
    base = _base(rng, 40, 120, o)
    g = gpu_ivm.GraphEngine(directed=directed)
    hc = LocalHyperCube(tmp_path, k=k, directed=directed, snapshot_every=1 + k % 2)
    assert g.load(base).triangles == hc.load(base).triangles
    for i, b in enumerate(graph_batches(o, rng, n_batches=12, nv=40, max_batch=25, hub_p=0.3,
                                        shrink_from=8)):
        r1, r2 = g.apply(b), hc.apply(b, batch_id=i)
        assert (r2.triangles, r2.delta, r2.updates) == (r1.triangles, r1.delta, r1.updates)
        assert r2.triangles == o.count()
        if i % 3 == 2:
            clear_registry()  # a lost executor: shards come back from their snapshots
    # a re-opened state folder (driver restart) continues where it was
    again = LocalHyperCube(tmp_path, k=k, directed=directed)
    assert again.count() == g.count() and again.last_batch_id == 11


def test_hypercube_colliding_buckets(tmp_path):
    """k larger than the number of vertices: most buckets empty, many vertices share one."""
    rng = np.random.default_rng(7)
    o = GraphOracle()
    hc = LocalHyperCube(tmp_path, k=4, seed=3)
    assert len(set(vertex_hash(np.arange(6), 4, seed=3).tolist())) < 6  # collisions occur
    g = gpu_ivm.GraphEngine()
    for i, b in enumerate(graph_batches(o, rng, n_batches=15, nv=6, max_batch=8, hub_p=0.2)):
        assert hc.apply(b, batch_id=i).triangles == g.apply(b).triangles == o.count()


def test_hypercube_string_keys(tmp_path):
    hc = LocalHyperCube(tmp_path, k=2)
    hc.load({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]})
    assert hc.count() == 1
    assert hc.apply({"src": ["a"], "dst": ["d"], "sign": [1]}).triangles == 1
    assert hc.apply({"src": ["b", "c"], "dst": ["d", "d"], "sign": [1, 1]}).triangles == 4


def test_hypercube_routing_roles():
    k = 3
    t = route_updates(np.array([5]), np.array([9]), np.array([1]), k=k, directed=True)
    h5, h9 = vertex_hash(np.array([5, 9]), k).tolist()
    shards = {r: sorted(t.filter(pa.compute.equal(t["rel"], r))["shard"].to_pylist())
              for r in range(3)}
    assert shards[0] == sorted((h5 * k + h9) * k + x for x in range(k))   # R (h(a), h(b), *)
    assert shards[1] == sorted((x * k + h5) * k + h9 for x in range(k))   # S (*, h(b), h(c))
    assert shards[2] == sorted((h9 * k + x) * k + h5 for x in range(k))   # T (h(a), *, h(c))


def test_hypercube_conflict_rolls_back(tmp_path):
    hc = LocalHyperCube(tmp_path, k=2)
    hc.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    with pytest.raises(ConflictError, match="already present"):
        hc.apply({"src": [4, 2], "dst": [5, 1], "sign": [1, 1]}, batch_id=0)
    with pytest.raises(ConflictError, match="absent"):
        hc.apply({"src": [7], "dst": [8], "sign": [-1]}, batch_id=0)
    # shards that applied the failed attempts come back from the committed state
    assert hc.apply({"src": [1, 2], "dst": [4, 4], "sign": [1, 1]}, batch_id=0).triangles == 2


def test_engine_log_snapshots_and_log(tmp_path):
    log = EngineLog(tmp_path, snapshot_every=3)
    g = gpu_ivm.GraphEngine()
    g.last_batch_id = -1
    log.record(g, -1)
    rng = np.random.default_rng(1)
    o = GraphOracle()
    counts = {}
    for i, b in enumerate(graph_batches(o, rng, n_batches=8, nv=20, max_batch=15, hub_p=0.3)):
        g.apply(b, batch_id=i)
        log.record(g, i, pa.table(b))
        counts[i] = g.count()
        log.gc()
    assert len(log.snapshots()) == 1 and len(log.log_ids()) <= 2
    assert log.restore().count() == counts[7]
    assert log.restore().last_batch_id == 7


def test_driver_engine_restart_and_sink_replay(tmp_path):
    rng = np.random.default_rng(5)
    o = GraphOracle()
    base = _base(rng, 30, 80, o)
    batches = [pa.table(b) for b in graph_batches(o, rng, n_batches=6, nv=30, max_batch=12,
                                                  hub_p=0.3)]
    ref = TriangleSink(DriverEngine(tmp_path / "s0", base=base), tmp_path / "r0")
    for i, t in enumerate(batches):
        ref.process(t, i)
    state = tmp_path / "s1"
    sink = TriangleSink(DriverEngine(state, base=base, snapshot_every=2), tmp_path / "r1")
    for i, t in enumerate(batches[:4]):
        sink.process(t, i)
    # restart: a new driver process re-runs batch 3 (not committed by Spark), then goes on
    sink = TriangleSink(DriverEngine(state, base=base, snapshot_every=2), tmp_path / "r1")
    for i in range(3, 6):
        sink.process(batches[i], i)
    a = read_results(tmp_path / "r0").drop_columns(["seconds"])
    b = read_results(tmp_path / "r1").drop_columns(["seconds"])
    assert a.equals(b) and a.num_rows == 6
    assert a.column("triangles").to_pylist()[-1] == o.count()


def test_validate_and_dead_letter():
    rb = pa.record_batch({"src": [1, 2, None, 4], "dst": [2, 3, 4, 5], "sign": [1, 1, 1, 3]})
    with pytest.raises(InputError) as ei:
        validate_batch(rb)
    assert ei.value.column == "src" and ei.value.row == 2
    good, dead = split_bad_rows(rb)
    assert good.to_pydict() == {"src": [1, 2], "dst": [2, 3], "sign": [1, 1]}
    assert dead.column("src").to_pylist() == [None, 4]
    reasons = dead.column("reason").to_pylist()
    assert "row 2" in reasons[0] and "row 3" in reasons[1] and "'sign'" in reasons[1]
    with pytest.raises(InputError):  # no row to blame: raised
        split_bad_rows(pa.record_batch({"src": [1], "dst": [2]}))


def test_driver_engine_dead_letter_conflicts(tmp_path):
    eng = DriverEngine(tmp_path, base={"src": [1, 2, 3], "dst": [2, 3, 1]})
    t = pa.table({"src": [1, 1, 5, 6], "dst": [2, 4, 5, 7], "sign": [1, 1, 1, 2]})
    rep = eng.apply(t, batch_id=0, dead_letter=True)
    dead = rep.extra["dead_letter"]
    assert dead.column("src").to_pylist() == [1, 6]
    assert "already present" in dead.column("reason")[0].as_py()
    assert rep.updates == 1 and eng.engine.num_edges == 4
    assert DriverEngine(tmp_path).engine.num_edges == 4  # durable


@pytest.mark.parametrize("name", ["_state", "hypercube", "ingest", "sink", "cli", "__init__"])
def test_spark_glue_docstring_examples(name):
    """The docstring examples of gpu_ivm.spark_glue (none of them needs Spark)."""
    import doctest
    import importlib

    mod = importlib.import_module("gpu_ivm.spark_glue" + ("" if name == "__init__" else
                                                          f".{name}"))
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0
