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


def _conflicting_batch(g, rng, nv: int, max_rows: int = 24) -> dict:
    """A batch against the reference engine ``g`` with deliberate conflicts: re-inserts of
    present edges (either orientation), deletes of absent edges (also of unseen vertices),
    duplicate rows (same or reversed orientation, same or opposite sign: conflicting twice
    over or netting to zero), self-loops, and plain valid rows."""
    es, ed = g.edges()
    present = list(zip(es.tolist(), ed.tolist()))
    rows = []
    for _ in range(int(rng.integers(1, max_rows + 1))):
        r = rng.random()
        if present and r < 0.45:
            u, v = present[int(rng.integers(len(present)))]
            if not g.directed and rng.random() < 0.5:
                u, v = v, u
            rows.append((u, v, int(rng.choice([1, -1]))))  # re-insert (conflict) or delete
        elif r < 0.5:
            u = int(rng.integers(nv))
            rows.append((u, u, 1))  # self-loop: dropped, never "ignored"
        elif r < 0.6:
            rows.append((nv + int(rng.integers(5)), int(rng.integers(nv)), -1))  # unseen
        else:
            u, v = int(rng.integers(nv)), int(rng.integers(nv))
            rows.append((u, v, int(rng.choice([1, -1]))))
    for u, v, sgn in list(rows):  # duplicates inside the batch
        if rng.random() < 0.3:
            if not g.directed and rng.random() < 0.5:
                u, v = v, u
            rows.append((u, v, sgn if rng.random() < 0.5 else -sgn))
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    return {c: np.array([r[j] for r in rows], np.int64) for j, c in enumerate(("src", "dst",
                                                                             "sign"))}


@pytest.mark.parametrize(("k", "directed"), [(1, False), (2, False), (3, False), (2, True)])
def test_hypercube_ignore_equals_single_engine(tmp_path, k, directed):
    """on_conflict="ignore": count, ignored, updates and delta equal a single
    GraphEngine(on_conflict="ignore") after every batch, however an edge's rows are
    replicated over the shards."""
    rng = np.random.default_rng(500 + 10 * k + directed)
    o = GraphOracle(directed=directed)
    base = _base(rng, 25, 60, o)
    g = gpu_ivm.GraphEngine(directed=directed, on_conflict="ignore")
    hc = LocalHyperCube(tmp_path, k=k, directed=directed, on_conflict="ignore",
                        snapshot_every=2)
    assert g.load(base).triangles == hc.load(base).triangles
    total_ignored = total_dup_kept = 0
    for i in range(14):
        b = _conflicting_batch(g, rng, 25)
        r1, r2 = g.apply(b), hc.apply(b, batch_id=i)
        assert (r2.triangles, r2.ignored, r2.updates, r2.delta) == \
            (r1.triangles, r1.ignored, r1.updates, r1.delta), f"batch {i}"
        total_ignored += r1.ignored
        total_dup_kept += r1.rows - r1.self_loops - r1.ignored > r1.updates
        if i % 5 == 4:
            clear_registry()  # restored shards decide the same
    # the stream did exercise conflicts and kept duplicate groups (e.g. +1 -1 nets)
    assert total_ignored > 20 and total_dup_kept > 0
    assert hc.count() == g.recount()
    again = LocalHyperCube(tmp_path, k=k, directed=directed)  # durable; error mode by default
    assert again.count() == g.count() and again.on_conflict == "error"


def test_hypercube_ignore_string_keys(tmp_path):
    hc = LocalHyperCube(tmp_path, k=2, on_conflict="ignore")
    g = gpu_ivm.GraphEngine(on_conflict="ignore")
    base = {"src": ["a", "b", "c"], "dst": ["b", "c", "a"]}
    hc.load(base)
    g.load(base)
    b = {"src": ["b", "a", "d", "d", "e", "c", "a"], "dst": ["a", "d", "b", "c", "f", "c", "d"],
         "sign": [1, 1, 1, 1, -1, 1, 1]}
    r1, r2 = g.apply(b), hc.apply(b)
    assert (r2.triangles, r2.ignored, r2.updates) == (r1.triangles, r1.ignored, r1.updates)
    assert r2.ignored == 4  # (b, a) present, (e, f) absent, (a, d) twice; (c, c) a loop


def _shard_files(path) -> dict:
    return {p.name: sorted(x.name for x in p.iterdir())
            for p in sorted(path.glob("shard-*"))}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_hypercube_conflict_error_changes_nothing(tmp_path, k):
    """on_conflict="error" (default): a batch raises ConflictError exactly when the single
    engine does, and leaves the manifest, every shard's folder and every in-memory shard
    engine as they were (the next batch restores nothing)."""
    import json

    rng = np.random.default_rng(700 + k)
    o = GraphOracle()
    base = _base(rng, 20, 50, o)
    g = gpu_ivm.GraphEngine()
    hc = LocalHyperCube(tmp_path, k=k, snapshot_every=3)
    g.load(base)
    hc.load(base)
    bid = failed = 0
    committed = -1
    for _ in range(16):
        b = _conflicting_batch(g, rng, 20, max_rows=4)
        try:
            r1 = g.apply(b)
        except ConflictError:
            files, manifest = _shard_files(tmp_path), (tmp_path / "manifest.json").read_text()
            with pytest.raises(ConflictError, match="already present|absent|twice"):
                hc.apply(b, batch_id=bid)
            assert _shard_files(tmp_path) == files
            assert (tmp_path / "manifest.json").read_text() == manifest
            assert hc.count() == g.count() and hc.last_batch_id == committed
            failed += 1
            bid += 1  # the next batch takes another id
            continue
        r2 = hc.apply(b, batch_id=bid)
        committed = bid
        bid += 1
        assert (r2.triangles, r2.updates, r2.ignored) == (r1.triangles, r1.updates, 0)
        assert r2.extra["restored"] == 0  # nothing to roll back
    assert failed > 3 and bid - failed > 3
    assert json.loads((tmp_path / "manifest.json").read_text())["committed"] == hc.last_batch_id


def test_hypercube_failed_attempt_is_forgotten(tmp_path):
    """A Spark job that fails after some shard tasks applied and recorded a batch (as with a
    conflict found by another shard): the next batch, under another id, restores those shards
    at their committed batch and deletes the failed attempt's files, so later restores never
    start from them (snapshot_every > 1: snapshots and log entries mixed)."""
    from gpu_ivm.spark_glue.hypercube import _split_by_shard, shard_task

    rng = np.random.default_rng(11)
    o = GraphOracle()
    base = _base(rng, 20, 50, o)
    g = gpu_ivm.GraphEngine()
    hc = LocalHyperCube(tmp_path, k=2, snapshot_every=3)
    g.load(base)
    hc.load(base)
    bid = 0
    for i, b in enumerate(graph_batches(o, rng, n_batches=10, nv=20, max_batch=8, hub_p=0.3)):
        # the failed attempt: half the shards ran a batch that was never committed
        # (deletes of present edges and a new triangle: it would change the count)
        present = list(zip(*(x.tolist() for x in g.edges())))  # committed, before b
        dels = [present[j] for j in rng.choice(len(present), min(6, len(present)),
                                               replace=False)]
        t = 100 + 3 * i
        rows = [(u, v, -1) for u, v in dels] + [(t, t + 1, 1), (t + 1, t + 2, 1), (t, t + 2, 1)]
        src, dst, sign = (np.array(c, np.int64) for c in zip(*rows))
        routed = route_updates(src, dst, sign, k=2)
        exp, kw = hc._expected(), hc._task_kwargs()
        for s, part in list(_split_by_shard(routed))[::2]:
            shard_task(s, part, mode="apply", batch_id=bid, expected=exp.get(s), **kw)
        bid += 1
        r = hc.apply(b, batch_id=bid)
        bid += 1
        assert r.triangles == g.apply(b).triangles == o.count(), f"batch {i}"
        if i % 2:
            clear_registry()
    for files in _shard_files(tmp_path).values():  # nothing above the committed batches
        ids = [int(n.split("-", 1)[1].split(".")[0]) for n in files if not n.startswith(".")]
        assert max(ids) <= hc.last_batch_id


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


@pytest.mark.parametrize("name", ["_state", "hypercube", "hypercube_routing", "ingest", "sink",
                                  "cli", "__init__"])
def test_spark_glue_docstring_examples(name):
    """The docstring examples of gpu_ivm.spark_glue (none of them needs Spark)."""
    import doctest
    import importlib

    mod = importlib.import_module("gpu_ivm.spark_glue" + ("" if name == "__init__" else
                                                          f".{name}"))
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


# ---------------------------------------------------------------------- change tables
def nx_results(edges) -> dict[str, dict]:
    """Per-vertex counts, per-edge counts and triangles of an undirected simple graph
    (networkx), keyed by the sink's change table names; zero counts left out."""
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from(edges)
    vert = {v: c for v, c in nx.triangles(g).items() if c}
    edge, tri = {}, {}
    for u, v in g.edges():
        u, v = min(u, v), max(u, v)
        common = set(g[u]) & set(g[v])
        if common:
            edge[(u, v)] = len(common)
        for w in common:
            if w > v:
                tri[(u, v, w)] = 1
    return {"vertex_changes": vert, "edge_changes": edge, "triangle_changes": tri}


def nx_change_rows(before: dict, after: dict) -> list[tuple]:
    """Sorted ``(key..., old, new)`` rows of the keys whose value differs."""
    rows = []
    for k in set(before) | set(after):
        old, new = before.get(k, 0), after.get(k, 0)
        if old != new:
            rows.append((k if isinstance(k, tuple) else (k,)) + (old, new))
    return sorted(rows)


def change_rows(table: pa.Table, batch_id: int) -> list[tuple]:
    """Sorted rows (without ``batch_id``) of one batch in a change table."""
    t = table.filter(pa.compute.equal(table["batch_id"], batch_id)).drop_columns(["batch_id"])
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def apply_edges(edges: set, batch) -> set:
    edges = set(edges)
    for u, v, s in zip(*(np.asarray(batch[c]).tolist() for c in ("src", "dst", "sign"))):
        if u == v:
            continue
        e = (min(u, v), max(u, v))
        if s > 0:
            edges.add(e)
        else:
            edges.discard(e)
    return edges


def test_sink_change_tables_restart_equals_oracle(tmp_path, monkeypatch):
    """DriverEngine(maintain=all three): per-batch change tables equal networkx before/after
    differences, also for batches with no net change; a run with a crash between recording
    the results and the state, and a restart with a replayed batch, writes the same tables
    as an uninterrupted run; the final maintained tables equal networkx's."""
    from gpu_ivm.spark_glue import ParquetResults

    rng = np.random.default_rng(11)
    o = GraphOracle()
    base = _base(rng, 25, 70, o)
    batches = [pa.table(b) for b in graph_batches(o, rng, n_batches=7, nv=25, max_batch=14,
                                                  hub_p=0.3, shrink_from=5)]
    u, v = 0, 24  # an insert and a delete of one edge (net zero), and only self-loops
    batches.insert(3, pa.table({"src": [u, v], "dst": [v, u], "sign": [1, -1]}))
    batches.insert(5, pa.table({"src": [3, 4], "dst": [3, 4], "sign": [1, 1]}))
    n = len(batches)
    maintain = ["vertex_counts", "edge_counts", "triangles"]
    names = ("vertex_changes", "edge_changes", "triangle_changes")

    ref = TriangleSink(DriverEngine(tmp_path / "s0", base=base), tmp_path / "r0",
                       maintain=maintain)
    for i, t in enumerate(batches):
        ref.process(t, i)
    # interrupted: a crash after batch 4's results were recorded but before its state
    # was, then a restart that re-runs batch 4 (applied again) and later replays batch 6
    sink = TriangleSink(DriverEngine(tmp_path / "s1", base=base, snapshot_every=2),
                        tmp_path / "r1", maintain=maintain)
    for i in range(4):
        sink.process(batches[i], i)
    real_record = EngineLog.record

    def crash(self, engine, batch_id, applied=None):
        raise OSError("disk gone")

    monkeypatch.setattr(EngineLog, "record", crash)
    with pytest.raises(OSError, match="disk gone"):
        sink.process(batches[4], 4)
    monkeypatch.setattr(EngineLog, "record", real_record)
    eng = DriverEngine(tmp_path / "s1", base=base, snapshot_every=2)  # no maintain=: kept
    sink = TriangleSink(eng, ParquetResults(tmp_path / "r1"))
    assert eng.last_batch_id == 3 and eng.maintained == tuple(maintain)
    for i in range(4, 7):
        sink.process(batches[i], i)
    emitted = []
    eng = DriverEngine(tmp_path / "s1", base=base, snapshot_every=2, maintain="vertex_counts")
    sink = TriangleSink(eng, lambda b, t: (emitted.append((b, sorted(t))),
                                           ParquetResults(tmp_path / "r1")(b, t)))
    for i in range(6, n):
        sink.process(batches[i], i)
    assert emitted[0] == (6, ["counts", *sorted(names)])  # the replay re-emits every table

    a = read_results(tmp_path / "r0").drop_columns(["seconds"])
    b = read_results(tmp_path / "r1").drop_columns(["seconds"])
    assert a.equals(b) and a.num_rows == n
    edges = apply_edges(set(), {"src": base["src"], "dst": base["dst"],
                                "sign": np.ones(len(base["src"]), np.int64)})
    got = {name: read_results(tmp_path / "r0", name) for name in names}
    for name in names:
        assert got[name].equals(read_results(tmp_path / "r1", name)), name
        assert got[name].column_names[0] == "batch_id"
    for i, t in enumerate(batches):
        before = nx_results(edges)
        edges = apply_edges(edges, t.to_pydict())
        after = nx_results(edges)
        for name in names:
            assert change_rows(got[name], i) == nx_change_rows(before[name], after[name]), \
                (name, i)
    assert all(change_rows(got[name], 3) == [] and change_rows(got[name], 5) == []
               for name in names)
    final = nx_results(edges)
    vc = eng.result_table("vertex_counts")
    assert dict(zip(vc["vertex"].to_pylist(), vc["triangles"].to_pylist())) == \
        final["vertex_changes"]
    ec = eng.result_table("edge_counts")
    assert dict(zip(zip(ec["src"].to_pylist(), ec["dst"].to_pylist()),
                    ec["triangles"].to_pylist())) == final["edge_changes"]
    assert eng.count() == o.count() == len(final["triangle_changes"])


def test_sink_maintain_errors(tmp_path):
    DriverEngine(tmp_path / "plain").count()  # a state folder without maintain=
    with pytest.raises(InputError, match="does not maintain vertex_counts"):
        DriverEngine(tmp_path / "plain", maintain="vertex_counts").count()
    with pytest.raises(InputError, match="track_changes"):
        DriverEngine(factory=lambda: gpu_ivm.GraphEngine(maintain="edge_counts"),
                     maintain="edge-counts").count()
    with pytest.raises(InputError, match="unknown result"):
        DriverEngine(maintain="squares")
    # HyperCube shards: results cannot be added to a loaded state folder, and change
    # tables need track_changes
    hc = LocalHyperCube(tmp_path / "hc", k=1)
    hc.load({"src": [1], "dst": [2]})
    with pytest.raises(InputError, match="does not maintain vertex_counts"):
        TriangleSink(hc, tmp_path / "out", maintain="vertex_counts")
    with pytest.raises(InputError, match="does not maintain vertex_counts"):
        hc.result_table("vertex_counts")
    hc = LocalHyperCube(tmp_path / "hc2", k=1, maintain="edge_counts")
    hc.load({"src": [1], "dst": [2]})
    with pytest.raises(InputError, match="track_changes"):
        TriangleSink(hc, tmp_path / "out", maintain="edge_counts")
    with pytest.raises(InputError, match="does not maintain triangles"):
        LocalHyperCube(tmp_path / "hc2", k=1, maintain="triangles")
    with pytest.raises(InputError, match="not a result table"):
        hc.result_table("count")
    # a factory engine that tracks changes emits them without maintain=
    seen = {}
    sink = TriangleSink(DriverEngine(factory=lambda: gpu_ivm.GraphEngine(
        maintain=["triangles"], track_changes=True)), lambda b, t: seen.update(t))
    sink.process(pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]}), 0)
    assert seen["triangle_changes"].to_pylist() == [
        {"batch_id": 0, "a": 1, "b": 2, "c": 3, "old": 0, "new": 1}]


# ---------------------------------------------------------------------- HyperCube results
RESULTS = ["vertex_counts", "edge_counts", "triangles"]
_KEYS = {"vertex_counts": ["vertex"], "edge_counts": ["src", "dst"], "triangles": ["a", "b", "c"]}
_NX = {"vertex_counts": "vertex_changes", "edge_counts": "edge_changes",
       "triangles": "triangle_changes"}


def table_rows(t: pa.Table) -> list[tuple]:
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def result_dict(t: pa.Table, name: str) -> dict:
    """A result table as {key: count} (triangles: {(a, b, c): 1})."""
    keys = list(zip(*(t.column(c).to_pylist() for c in _KEYS[name])))
    if name == "vertex_counts":
        keys = [k[0] for k in keys]
    vals = t.column("triangles").to_pylist() if name != "triangles" else [1] * len(keys)
    assert len(set(keys)) == len(keys)  # each key once
    return dict(zip(keys, vals))


def check_free_results(hc, g, edges=None, names=RESULTS) -> None:
    """hc's summed results equal the single engine's (same schema) and, for an undirected
    edge set ``edges``, networkx's."""
    want = nx_results(edges) if edges is not None else None
    for name in names:
        got, ref = hc.result_table(name), g.result_table(name)
        assert got.schema == ref.schema, name
        assert result_dict(got, name) == result_dict(ref, name), name
        if want is not None:
            assert result_dict(got, name) == want[_NX[name]], name


@pytest.mark.parametrize(("k", "directed"), [(1, False), (2, False), (3, False), (2, True)])
def test_hypercube_free_results_equal_single_engine(tmp_path, k, directed):
    """LocalHyperCube(maintain=all three, track_changes=True): after every batch the per-vertex
    and per-edge counts and the triangle list summed over the shards equal a single
    GraphEngine(maintain=...) and networkx (undirected), and the change tables equal the
    engine's; lost executors and a driver restart mid-stream keep them right. Triangles with
    repeated hash buckets (two or three vertices in one bucket) occur for every k."""
    rng = np.random.default_rng(40 + 10 * k + directed)
    o = GraphOracle(directed=directed)
    nv = 22
    base = _base(rng, nv, 60, o)
    g = gpu_ivm.GraphEngine(directed=directed, maintain=RESULTS, track_changes=True)
    g.load(base)
    hc = LocalHyperCube(tmp_path, k=k, directed=directed, seed=k, maintain=RESULTS,
                        track_changes=True, snapshot_every=2)
    hc.load(base)
    edges = None if directed else set(o.edges)  # the oracle's edges after each batch
    check_free_results(hc, g, edges)
    repeated = 0
    for i, b in enumerate(graph_batches(o, rng, n_batches=9, nv=nv, max_batch=14, hub_p=0.3,
                                        shrink_from=6)):
        if i == 3:
            clear_registry()  # lost executors: shards restored from their folders
        if i == 5:  # a driver restart: maintain= and track_changes come from the manifest
            hc = LocalHyperCube(tmp_path, k=k, directed=directed, seed=k)
            assert hc.maintained == tuple(RESULTS) and hc.last_batch_id == 4
            check_free_results(hc, g, edges)
        r1, r2 = g.apply(b), hc.apply(b, batch_id=i)
        assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta)
        edges = None if directed else set(o.edges)
        check_free_results(hc, g, edges)
        ref, got = g.last_changes(), hc.last_changes()
        for name in RESULTS:
            want = table_rows(ref[name]) if r1.updates else []
            assert table_rows(got[name]) == want, (i, name)
            assert got[name].schema == ref[name].schema
        tri = hc.result_table("triangles")
        for row in zip(*(tri.column(c).to_numpy() for c in "abc")):
            repeated += len(set(vertex_hash(np.array(row), k, seed=k).tolist())) < 3
    assert repeated > 0


def test_hypercube_free_results_string_keys(tmp_path):
    g = gpu_ivm.GraphEngine(maintain=RESULTS)
    hc = LocalHyperCube(tmp_path, k=3, maintain=RESULTS)
    base = {"src": ["a", "b", "c", "c", "d"], "dst": ["b", "c", "a", "d", "a"]}
    g.load(base)
    hc.load(base)
    check_free_results(hc, g)
    b = {"src": ["b", "e", "e", "a"], "dst": ["d", "a", "b", "c"], "sign": [1, 1, 1, -1]}
    g.apply(b)
    hc.apply(b)
    check_free_results(hc, g)
    assert [x.num_rows for x in hc.vertex_counts(chunk_size=2)] == [2, 2, 1]  # a..e
    with pytest.raises(InputError, match="track_changes"):
        hc.last_changes()


def test_hypercube_vertex_counts_snap(tmp_path, data_dir):
    """ca-GrQc (14,484 edges, 48,260 triangles) on 8 shards: the summed per-vertex counts
    equal networkx.triangles, also after a batch of deletes."""
    import networkx as nx

    from gpu_ivm.io import read_edges

    el = read_edges(data_dir / "ca-GrQc.txt.gz")
    hc = LocalHyperCube(tmp_path, k=2, maintain="vertex_counts")
    assert hc.load((el.src, el.dst)).triangles == 48260
    g = nx.Graph()
    g.add_edges_from(zip(el.src.tolist(), el.dst.tolist()))
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    vc = hc.result_table("vertex_counts")
    assert dict(zip(vc["vertex"].to_pylist(), vc["triangles"].to_pylist())) == \
        {v: c for v, c in nx.triangles(g).items() if c}
    rng = np.random.default_rng(1)
    edges = list(g.edges())
    gone = [edges[i] for i in rng.choice(len(edges), 300, replace=False)]
    hc.apply({"src": [u for u, _ in gone], "dst": [v for _, v in gone], "sign": [-1] * 300})
    g.remove_edges_from(gone)
    vc = hc.result_table("vertex_counts")
    assert dict(zip(vc["vertex"].to_pylist(), vc["triangles"].to_pylist())) == \
        {v: c for v, c in nx.triangles(g).items() if c}


def test_sink_hypercube_change_tables_equal_driver_engine(tmp_path):
    """TriangleSink(LocalHyperCube, maintain=...) writes the same change tables per batch as
    TriangleSink(DriverEngine, maintain=...) (also for batches without net change and with
    self-loops only), and a driver restart with a replayed batch re-emits them identically."""
    rng = np.random.default_rng(12)
    o = GraphOracle()
    base = _base(rng, 20, 60, o)
    batches = [pa.table(b) for b in graph_batches(o, rng, n_batches=5, nv=20, max_batch=12,
                                                  hub_p=0.3, shrink_from=3)]
    batches.insert(2, pa.table({"src": [0, 19], "dst": [19, 0], "sign": [1, -1]}))
    batches.insert(4, pa.table({"src": [3, 4], "dst": [3, 4], "sign": [1, 1]}))
    ref, got = {}, {}
    dsink = TriangleSink(DriverEngine(tmp_path / "d", base=base), lambda b, t: ref.update({b: t}),
                         maintain=RESULTS)
    hc = LocalHyperCube(tmp_path / "hc", k=2, snapshot_every=2)
    hsink = TriangleSink(hc, lambda b, t: got.setdefault(b, []).append(t), maintain=RESULTS)
    hc.load(base)  # require() on an empty folder: the shards are created with maintain=
    for i, t in enumerate(batches):
        dsink.process(t, i)
        hsink.process(t, i)
        if i == 3:  # a driver restart; Spark replays batch 3
            clear_registry()
            hsink = TriangleSink(LocalHyperCube(tmp_path / "hc", k=2, snapshot_every=2),
                                 lambda b, t: got.setdefault(b, []).append(t))
            hsink.process(t, i)
    assert len(got[3]) == 2 and all(got[3][0][n].equals(got[3][1][n]) for n in got[3][0]
                                    if n != "counts")
    for i in range(len(batches)):
        mine = got[i][-1]
        assert sorted(mine) == sorted(ref[i]) == ["counts", *sorted(_NX.values())]
        for name in _NX.values():
            assert table_rows(mine[name]) == table_rows(ref[i][name]), (i, name)
            assert mine[name].schema == ref[i][name].schema
        for c in ("batch_id", "triangles", "delta", "updates"):
            assert mine["counts"][c].equals(ref[i]["counts"][c])
    assert all(got[i][-1][n].num_rows == 0 for i in (2, 4) for n in _NX.values())
