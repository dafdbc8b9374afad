"""Spark glue on a local[2] session: Arrow ingestion, the exactly-once streaming sink,
HyperCube shards and ``spark-replay``. Skipped when pyspark is not installed."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracle import GraphOracle
from streams import graph_batches

pytest.importorskip("pyspark")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from gpu_ivm.spark_glue import (  # noqa: E402
    DriverEngine,
    SparkHyperCube,
    TriangleSink,
    collect_arrow,
    ingest,
    read_results,
)
from gpu_ivm.spark_glue.ingest import create_frame  # noqa: E402

import gpu_ivm  # noqa: E402
from gpu_ivm.io import read_graph_updates  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SCHEMA = "src bigint, dst bigint, sign bigint"


@pytest.fixture(scope="session")
def spark():
    from gpu_ivm.spark_glue import local_session

    s = local_session("local[2]", app_name="gpu_ivm tests")
    yield s
    s.stop()


def _stream(seed: int, n_batches: int, nv: int = 40, max_batch: int = 25):
    rng = np.random.default_rng(seed)
    o = GraphOracle()
    src, dst = rng.integers(0, nv, 3 * nv), rng.integers(0, nv, 3 * nv)
    for u, v in zip(src.tolist(), dst.tolist()):
        if u != v and not o.present(u, v):
            o.apply(u, v, 1)
    batches = list(graph_batches(o, rng, n_batches=n_batches, nv=nv, max_batch=max_batch,
                                 hub_p=0.3))
    return {"src": src, "dst": dst}, batches


# ---------------------------------------------------------------------- ingestion
def test_ingestion_equals_core(spark):
    base, batches = _stream(1, 4)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        g1, g2 = gpu_ivm.GraphEngine(), gpu_ivm.GraphEngine()
        g1.load(base)
        g2.load(base)
        for b in batches:
            df = create_frame(spark, pa.table(b)).repartition(2)
            got = collect_arrow(ingest(df))
            assert got.num_rows == len(b["src"])
            core = read_graph_updates(b)
            key = sorted(zip(core.src.tolist(), core.dst.tolist(), core.sign.tolist()))
            assert sorted(zip(*(got.column(c).to_pylist() for c in ("src", "dst", "sign")))) \
                == key
            assert g1.apply(got).triangles == g2.apply(b).triangles
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_ingestion_bad_rows(spark):
    df = spark.createDataFrame([(1, 2, 1), (2, 3, 1), (3, 4, 5), (4, 5, -1)], SCHEMA)
    with pytest.raises(Exception, match=r"sign must be \+1 or -1.*column 'sign', row 2"):
        collect_arrow(ingest(df.coalesce(1)))
    good, dead = ingest(df.coalesce(1), dead_letter=True)
    assert sorted(collect_arrow(good).column("src").to_pylist()) == [1, 2, 4]
    d = collect_arrow(dead)
    assert d.column_names == ["src", "dst", "sign", "reason"]
    assert d.column("sign").to_pylist() == [5] and "row 2" in d.column("reason")[0].as_py()


# ---------------------------------------------------------------------- streaming sink
def _write_batches(folder: Path, batches, start: int = 0, stop: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - 1000
    for i, b in enumerate(batches[start:stop], start):
        p = folder / f"batch-{i:05d}.parquet"
        pq.write_table(pa.table(b), p)
        os.utime(p, (t0 + i, t0 + i))  # the file source orders files by modification time


def _run_query(spark, indir: Path, chk: Path, sink) -> None:
    q = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(indir))
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(chk))
         .trigger(availableNow=True).start())
    q.awaitTermination()


def _interrupted_equals_uninterrupted(spark, tmp_path: Path, make_engine, n: int = 6,
                                      between=None, maintain=None, engines=None) -> pa.Table:
    base, batches = _stream(2, n)
    # uninterrupted
    _write_batches(tmp_path / "in0", batches)
    _run_query(spark, tmp_path / "in0", tmp_path / "chk0",
               TriangleSink(make_engine(tmp_path / "state0", base), tmp_path / "out0",
                            maintain=maintain))
    # interrupted after 4 batches; Spark had not committed batch 3 (its commit log entry is
    # removed), so the restarted query replays batch 3 before going on
    half = 4
    _write_batches(tmp_path / "in1", batches, 0, half)
    _run_query(spark, tmp_path / "in1", tmp_path / "chk1",
               TriangleSink(make_engine(tmp_path / "state1", base), tmp_path / "out1",
                            maintain=maintain))
    for name in (str(half - 1), f".{half - 1}.crc"):
        (tmp_path / "chk1" / "commits" / name).unlink(missing_ok=True)
    if between is not None:
        between()
    _write_batches(tmp_path / "in1", batches, half)
    replays = []

    def spy(batch_id, tables):
        replays.append((batch_id, sorted(tables)))
        from gpu_ivm.spark_glue import ParquetResults

        ParquetResults(tmp_path / "out1")(batch_id, tables)

    _run_query(spark, tmp_path / "in1", tmp_path / "chk1",
               TriangleSink(make_engine(tmp_path / "state1", base), spy, maintain=maintain))
    assert replays[0][0] == half - 1  # the replayed batch was seen again
    assert replays[0][1] == replays[-1][1]  # with all of its tables
    a = read_results(tmp_path / "out0").drop_columns(["seconds"])
    b = read_results(tmp_path / "out1").drop_columns(["seconds"])
    assert a.num_rows == n and a.equals(b)
    g = gpu_ivm.GraphEngine()
    g.load(base)
    for bt in batches:
        g.apply(bt)
    assert a.column("triangles").to_pylist()[-1] == g.count()
    if maintain is not None:
        _check_change_tables(tmp_path, maintain, base, batches, engines)
    return a


def _check_change_tables(tmp_path: Path, maintain, base, batches, engines) -> None:
    """The change tables of both runs are equal, per batch equal to networkx's before/after
    differences, and the final maintained tables of both engines equal networkx's."""
    from test_spark_local import apply_edges, change_rows, nx_change_rows, nx_results

    names = {"vertex_counts": "vertex_changes", "edge_counts": "edge_changes"}
    edges = apply_edges(set(), {"src": base["src"], "dst": base["dst"],
                                "sign": np.ones(len(base["src"]), np.int64)})
    got = {}
    for m in maintain:
        got[m] = read_results(tmp_path / "out0", names[m])
        assert got[m].num_rows > 0 and got[m].equals(read_results(tmp_path / "out1", names[m]))
        assert len(list((tmp_path / "out1" / names[m]).glob("*.parquet"))) == len(batches)
    for i, bt in enumerate(batches):
        before = nx_results(edges)
        edges = apply_edges(edges, bt)
        after = nx_results(edges)
        for m in maintain:
            assert change_rows(got[m], i) == nx_change_rows(before[names[m]],
                                                            after[names[m]]), (m, i)
    final = nx_results(edges)
    for eng in (engines[0], engines[-1]):  # uninterrupted, restarted
        for m in maintain:
            t = eng.result_table(m)
            keys = t["vertex"].to_pylist() if m == "vertex_counts" else \
                list(zip(t["src"].to_pylist(), t["dst"].to_pylist()))
            assert dict(zip(keys, t["triangles"].to_pylist())) == final[names[m]]


def test_streaming_sink_restart(spark, tmp_path):
    _interrupted_equals_uninterrupted(
        spark, tmp_path, lambda state, base: DriverEngine(state, base=base, snapshot_every=2))


@pytest.mark.parametrize("maintain", [["vertex_counts"], ["edge_counts"]])
def test_streaming_sink_restart_changes(spark, tmp_path, maintain):
    """The per-vertex / per-edge change tables and the final maintained counts of a run with
    a stop/restart and a replayed batch equal an uninterrupted run and networkx."""
    engines = []

    def make(state, base):
        engines.append(DriverEngine(state, base=base, snapshot_every=2))
        return engines[-1]

    _interrupted_equals_uninterrupted(spark, tmp_path, make, n=5, maintain=maintain,
                                      engines=engines)


@pytest.mark.parametrize("maintain", [None, ["vertex_counts", "edge_counts"]])
def test_streaming_sink_restart_hypercube(spark, tmp_path, maintain):
    """HyperCube shards behind the sink, with a stop/restart, lost executors and a replayed
    batch: the counts (and, with maintain=, the per-vertex / per-edge change tables and the
    final summed results, checked against networkx) equal an uninterrupted run."""
    engines = []
    res = {"maintain": maintain, "track_changes": True} if maintain else {}

    def make(state, base):
        hc = SparkHyperCube(spark, state, k=2, **res)
        if hc.last_batch_id is None:
            hc.load(base)
        engines.append(hc)
        return hc

    def lose_executors():
        engines[-1].forget_executor_state()

    _interrupted_equals_uninterrupted(spark, tmp_path, make, n=5, between=lose_executors,
                                      maintain=maintain, engines=engines)


def test_streaming_sink_dead_letter(spark, tmp_path):
    indir = tmp_path / "in"
    indir.mkdir()
    pq.write_table(pa.table({"src": [1, 2, 3, 1], "dst": [2, 3, 1, 2], "sign": [1, 1, 1, 1]}),
                   indir / "a.parquet")
    _run_query(spark, indir, tmp_path / "chk",
               TriangleSink(DriverEngine(tmp_path / "st"), tmp_path / "out", dead_letter=True))
    counts = read_results(tmp_path / "out")
    assert counts.column("triangles").to_pylist() == [1]
    dead = read_results(tmp_path / "out", "dead_letter")
    assert dead.column("src").to_pylist() == [1]
    assert "inserts an edge twice" in dead.column("reason")[0].as_py()


# ---------------------------------------------------------------------- HyperCube
@pytest.mark.parametrize("k", [1, 2, 3])
def test_hypercube_spark_equals_single_engine(spark, tmp_path, k):
    base, batches = _stream(10 + k, 4)
    g = gpu_ivm.GraphEngine()
    g.load(base)
    hc = SparkHyperCube(spark, tmp_path, k=k, method="partitions" if k == 2 else "auto")
    assert hc.load(base).triangles == g.count()
    for i, b in enumerate(batches):
        if i == 2:
            hc.forget_executor_state()  # every shard restored from its snapshot
        r = hc.apply(create_frame(spark, pa.table(b)), batch_id=i)
        r1 = g.apply(b)
        assert (r.triangles, r.delta, r.updates) == (r1.triangles, r1.delta, r1.updates)
        if i == 2:
            assert r.extra["restored"] == r.extra["shards_touched"]
    assert hc.apply(batches[0], batch_id=1).path == "skipped"


def test_hypercube_spark_on_conflict(spark, tmp_path):
    """on_conflict="ignore" equals GraphEngine(on_conflict="ignore") (count, ignored,
    updates); "error" raises the core's ConflictError and the batch leaves no trace."""
    from gpu_ivm.errors import ConflictError

    base = {"src": [1, 2, 3, 3, 4], "dst": [2, 3, 1, 4, 5]}
    batches = [  # (src, dst, sign) rows
        [(2, 1, 1), (1, 4, 1), (4, 1, 1), (2, 4, 1), (7, 8, -1), (5, 5, 1), (1, 5, 1),
         (5, 1, -1), (3, 5, 1)],  # present, twice, valid, absent, loop, net 0, valid
        [(4, 3, -1), (3, 4, -1), (2, 3, -1), (2, 4, -1), (4, 2, 1), (6, 7, 1), (7, 8, 1),
         (6, 8, 1), (9, 9, -1)],  # deleted twice, valid, net 0, a new triangle
        [(3, 4, 1), (1, 3, -1), (1, 4, 1), (8, 6, 1), (6, 7, -1), (7, 6, 1), (9, 1, -1)],
    ]
    batches = [{c: [r[j] for r in b] for j, c in enumerate(("src", "dst", "sign"))}
               for b in batches]
    g = gpu_ivm.GraphEngine(on_conflict="ignore")
    g.load(base)
    hc = SparkHyperCube(spark, tmp_path / "ignore", k=2, on_conflict="ignore",
                        snapshot_every=2)
    hc.load(base)
    ignored = 0
    for i, b in enumerate(batches):
        r1, r2 = g.apply(b), hc.apply(create_frame(spark, pa.table(b)), batch_id=i)
        assert (r2.triangles, r2.ignored, r2.updates, r2.delta) == \
            (r1.triangles, r1.ignored, r1.updates, r1.delta), f"batch {i}"
        ignored += r1.ignored
    assert ignored == 9  # 4 + 2 + 3
    # error mode: concurrent shard tasks may apply the failed batch; it is never committed
    g = gpu_ivm.GraphEngine()
    g.load(base)
    hc = SparkHyperCube(spark, tmp_path / "error", k=2, snapshot_every=2)
    hc.load(base)
    ok = [{"src": [1], "dst": [4], "sign": [1]}, {"src": [2, 5], "dst": [4, 1], "sign": [1, 1]},
          {"src": [1, 3], "dst": [2, 5], "sign": [-1, 1]}]
    assert hc.apply(ok[0], batch_id=0).triangles == g.apply(ok[0]).triangles
    bad = {"src": [2, 5, 6, 7], "dst": [4, 3, 8, 8], "sign": [1, 1, 1, -1]}  # (7, 8) absent
    with pytest.raises(ConflictError, match="absent"):
        g.apply(bad)
    with pytest.raises(ConflictError, match="absent"):
        hc.apply(create_frame(spark, pa.table(bad)), batch_id=1)
    assert hc.last_batch_id == 0 and hc.count() == g.count()
    assert hc.apply(ok[1], batch_id=2).triangles == g.apply(ok[1]).triangles
    hc.forget_executor_state()  # every shard restored from its folder
    assert hc.apply(ok[2], batch_id=3).triangles == g.apply(ok[2]).triangles


def test_hypercube_spark_free_results(spark, tmp_path):
    """SparkHyperCube(maintain=all three, track_changes=True) with string keys: after every
    batch the per-vertex and per-edge counts (summed by a grouped job and groupBy-sum)
    equal a single GraphEngine(maintain=...) and networkx, and the change tables (shard
    deltas + lookups) equal the engine's; lost executors and a driver restart (with the other
    execution method) mid-stream keep them right."""
    from test_spark_local import RESULTS, check_free_results, table_rows

    base, batches = _stream(21, 2, nv=30)
    strs = lambda a: [f"v{x:02d}" for x in np.asarray(a).tolist()]  # noqa: E731
    base = {"src": strs(base["src"]), "dst": strs(base["dst"])}
    batches = [{"src": strs(b["src"]), "dst": strs(b["dst"]), "sign": b["sign"]}
               for b in batches]
    g = gpu_ivm.GraphEngine(maintain=RESULTS, track_changes=True)
    g.load(base)
    hc = SparkHyperCube(spark, tmp_path, k=2, maintain=RESULTS, track_changes=True)
    hc.load(base)
    for i, b in enumerate(batches):
        if i == 1:  # a driver restart (maintain= comes from the manifest), executors lost
            hc = SparkHyperCube(spark, tmp_path, k=2, method="partitions")
            hc.forget_executor_state()
        r1, r2 = g.apply(b), hc.apply(create_frame(spark, pa.table(b)), batch_id=i)
        assert (r2.triangles, r2.delta) == (r1.triangles, r1.delta)
        assert r2.extra["lookup_shards"] > 0
        assert i == 0 or r2.extra["restored"] == r2.extra["shards_touched"]
        edges = {(min(u, v), max(u, v)) for u, v in zip(*g.edges())}
        check_free_results(hc, g, edges, ["vertex_counts", "edge_counts"])
        ref, got = g.last_changes(), hc.last_changes()
        for name in RESULTS:
            assert table_rows(got[name]) == table_rows(ref[name]), (i, name)
    check_free_results(hc, g, edges, ["triangles"])


def test_hypercube_spark_snap(spark, tmp_path):
    path = DATA / "ca-GrQc.txt.gz"
    if not path.exists():
        pytest.skip(f"{path} not present")
    g = gpu_ivm.GraphEngine()
    g.load(str(path))
    assert g.count() == 48260
    hc = SparkHyperCube(spark, tmp_path, k=2, snapshot_every=3)
    assert hc.load(str(path)).triangles == 48260
    rng = np.random.default_rng(0)
    s, d = g.edges()
    for i in range(3):
        pick = rng.choice(s.shape[0], 200, replace=False)
        b = {"src": s[pick], "dst": d[pick], "sign": np.full(200, -1)}
        assert hc.apply(b, batch_id=i).triangles == g.apply(b).triangles
        s, d = g.edges()


# ---------------------------------------------------------------------- CLI
def test_spark_replay_cli(spark, tmp_path, capsys):
    import argparse

    from gpu_ivm.spark_glue.cli import add_parser

    base, batches = _stream(3, 3)
    (tmp_path / "b").mkdir()
    for i, b in enumerate(batches):
        pq.write_table(pa.table(b), tmp_path / "b" / f"{i:03d}.parquet")
    with open(tmp_path / "base.txt", "w") as f:
        f.writelines(f"{u} {v}\n" for u, v in zip(base["src"], base["dst"]))
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="cmd"))
    outs = []
    for extra in ([], ["--shards", "2"]):
        args = p.parse_args(["spark-replay", "--base", str(tmp_path / "base.txt"),
                             "--batches", str(tmp_path / "b"), "--json", "--check", *extra])
        assert args.fn(args) == 0
        out, err = capsys.readouterr()
        lines = [json.loads(x) for x in out.splitlines()]
        # --check compared the base and the three batches with a plain engine: on stderr,
        # with one progress line per micro-batch giving the count the JSON line gives
        assert "check: ok, 4 counts compared" in err
        progress = [x for x in err.splitlines() if x.startswith("gpu-ivm: micro-batch ")]
        assert [x.split(": ")[2].split()[0].replace(",", "") for x in progress] == \
            [str(x["triangles"]) for x in lines[1:]]
        assert lines[0]["kind"] == "base" and "batch" not in lines[0]
        assert [x["kind"] for x in lines[1:]] == ["batch"] * 3
        assert [x["batch"] for x in lines[1:]] == [0, 1, 2]
        assert all(x["seconds"] > 0 for x in lines[1:])
        for x in lines:  # integers stay integers: only the timings are floats
            assert all(isinstance(v, int) for k, v in x.items()
                       if isinstance(v, (int, float)) and "seconds" not in k), x
        outs.append([(x["triangles"], x["updates"]) for x in lines])
    assert outs[0] == outs[1]
    # a --state folder records its base: re-opening it with another base is refused
    from gpu_ivm.spark_glue.cli import RUN_RECORD

    from gpu_ivm.cli import main

    state = tmp_path / "state"
    argv = ["spark-replay", "--base", str(tmp_path / "base.txt"), "--batches",
            str(tmp_path / "b"), "--json", "--state", str(state)]
    assert main(argv) == 0
    assert (state / RUN_RECORD).is_file()
    assert [json.loads(x)["triangles"] for x in capsys.readouterr().out.splitlines()] == \
        [t for t, _ in outs[0]]
    other = tmp_path / "other.txt"
    other.write_text((tmp_path / "base.txt").read_text() + "0 999\n")
    assert main(argv[:2] + [str(other)] + argv[3:]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "(option --state)" in err and str(other) in err
    assert main(argv + ["--directed"]) == 2
    assert "directed: False recorded, True now" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "b")


def test_spark_query_frames_streams_and_restart(spark, tmp_path):
    """SparkQuery: relations, batches and a foreachBatch stream from DataFrames, answers as
    DataFrames, against the oracle after every batch; a replayed micro-batch is skipped and
    a new SparkQuery on the same state_dir resumes."""
    import random

    from gpu_ivm.spark_glue import SparkQuery

    from gpu_ivm.cq import access, total

    query = "Q(C | A) = R(A,B), S(B,C)"
    rng = random.Random(4)
    db = {r: {(rng.randint(0, 4), rng.randint(0, 4)): rng.randint(1, 2) for _ in range(10)}
          for r in "RS"}

    def frame(rows: dict):
        return create_frame(spark, pa.table({"x": [k[0] for k in rows], "y": [k[1] for k in rows],
                                             "mult": list(rows.values())}))

    state = tmp_path / "state"
    sq = SparkQuery(spark, query, state_dir=state)
    assert sq.load(R=frame(db["R"]), S=frame(db["S"])) == total(query, db)
    stream = sq.foreach_batch("S")
    for i in range(4):
        r = "R" if i % 2 else "S"
        present = [t for t, m in db[r].items() if m > 0]
        delta = {(rng.randint(0, 4), rng.randint(0, 4)): 1, rng.choice(present): -1}
        delta = {k: v for k, v in delta.items() if v}
        if r == "S":
            stream(frame(delta), i)
            stream(frame(delta), i)  # Spark re-running the micro-batch: skipped
        else:
            sq.apply({"R": frame(delta)}, batch_id=i)
        for t, m in delta.items():
            db[r][t] = db[r].get(t, 0) + m
        assert sq.count() == total(query, db)
    reqs = create_frame(spark, pa.table({"A": [0, 1, 2, 3, 4, 9]}))
    got = collect_arrow(sq.request(reqs)).to_pydict()
    want = {(i, c): m for i, a in enumerate([0, 1, 2, 3, 4, 9])
            for (c,), m in access(query, db, (a,)).items()}
    assert dict(zip(zip(got["request"], got["C"]), got["mult"])) == want
    counts = collect_arrow(sq.count(reqs)).to_pydict()["count"]
    assert counts == [sum(access(query, db, (a,)).values()) for a in [0, 1, 2, 3, 4, 9]]
    again = SparkQuery(spark, query, state_dir=state)  # a restarted driver
    assert again.count() == total(query, db) and again.last_batch_ids == sq.last_batch_ids
    again.foreach_batch("S")(frame({(0, 0): 5}), 2)  # at or below the last id: skipped
    assert again.count() == total(query, db)
    with pytest.raises(gpu_ivm.InputError, match="holds the state of the query"):
        SparkQuery(spark, "Q(A | C) = R(A,B), S(B,C)", state_dir=state)


def test_spark_query_string_values(spark, tmp_path):
    """SparkQuery with string columns: loaded, updated and asked from DataFrames, answered
    with strings (and a limit), checked against a dict join; a restarted driver resumes the
    dictionary from its snapshot."""
    from gpu_ivm.spark_glue import SparkQuery

    query = "Q(C | A) = R(A,B), S(B,C)"
    r = {("ann", "x"): 1, ("bob", "x"): 1, ("bob", "y"): 2}
    s = {("x", "p"): 1, ("y", "q"): 1, ("y", "p"): 3}

    def frame(rows: dict):
        return create_frame(spark, pa.table({"u": [k[0] for k in rows], "v": [k[1] for k in rows],
                                             "mult": list(rows.values())}))

    def want(a: str) -> dict:
        out: dict = {}
        for (ra, rb), m in r.items():
            for (sb, sc), n in s.items():
                if ra == a and rb == sb and m * n:
                    out[sc] = out.get(sc, 0) + m * n
        return {k: v for k, v in out.items() if v}

    state = tmp_path / "state"
    sq = SparkQuery(spark, query, state_dir=state)
    sq.load(R=frame(r), S=frame(s))
    delta = {("ann", "y"): 1, ("bob", "x"): -1}
    sq.apply({"R": frame(delta)}, batch_id=0)
    for k, m in delta.items():
        r[k] = r.get(k, 0) + m
    reqs = create_frame(spark, pa.table({"A": ["ann", "bob", "nobody"]}))
    got = collect_arrow(sq.request(reqs)).to_pydict()
    names = ["ann", "bob", "nobody"]
    assert {(names[i], c): m for i, c, m in zip(got["request"], got["C"], got["mult"])} == {
        (a, c): m for a in names for c, m in want(a).items()}
    first = collect_arrow(sq.request(reqs, limit=1)).to_pydict()
    assert sorted(first["request"]) == [0, 1]
    again = SparkQuery(spark, query, state_dir=state)  # a restarted driver
    assert collect_arrow(again.request(reqs)).to_pydict() == got
