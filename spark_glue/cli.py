"""``gpu-ivm spark-replay``: the ``replay`` subcommand run through a local Spark session.

Register it with :func:`add_parser` on the ``gpu-ivm`` subparsers. Each batch file is read
and validated on the driver exactly as ``gpu-ivm replay`` does (same errors, exit code 2),
handed to Spark as a DataFrame, validated again on the executors by the Arrow ingestion
(``mapInArrow``) and applied either to one driver-resident engine (default) or to k³ HyperCube
shard engines on the executors (``--shards K``). JSON lines match ``replay``: a base line and
one line per batch (``batch``, ``rows``, ``updates``, ``triangles``, ``delta``, ``seconds``,
``path``, ``file``, ...). ``seconds`` is the batch's wall time through Spark (job scheduling,
Arrow transfer, validation, engine work); ``engine_seconds`` (single engine) or
``shard_seconds_max`` (HyperCube) is the engine part.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

__all__ = ["add_parser", "cmd_spark_replay"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``spark-replay`` on ``gpu-ivm``'s subparsers (``set_defaults(fn=...)``).

    Examples
    --------
    >>> import argparse
    >>> p = argparse.ArgumentParser(prog="gpu-ivm")
    >>> sub = p.add_subparsers(dest="cmd")
    >>> _ = add_parser(sub)
    >>> a = p.parse_args(["spark-replay", "--base", "g.txt", "--batches", "d", "--shards", "2"])
    >>> a.shards, a.fn.__name__
    (2, 'cmd_spark_replay')
    """
    r = subparsers.add_parser(
        "spark-replay", help="replay a folder of batch files through a local Spark session",
        description="Same as replay, through Spark: one driver-resident engine, or k^3 "
                    "HyperCube shard engines on the executors (--shards K).")
    r.add_argument("--base", required=True, help="the base graph (any edge-list file)")
    r.add_argument("--batches", required=True,
                   help="folder of batch files (Parquet, CSV or Arrow IPC with src, dst, sign)")
    r.add_argument("--shards", type=int, default=0, metavar="K",
                   help="HyperCube with K^3 shards (default 0: one driver-resident engine)")
    r.add_argument("--epsilon", default="1/2", help="IVM^eps exponent, e.g. 1/2 (default)")
    r.add_argument("--directed", action="store_true", help="maintain directed 3-cycles")
    r.add_argument("--json", action="store_true", help="one JSON line per batch")
    r.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    r.add_argument("--state", default=None,
                   help="state folder for snapshots (default: none for one engine, a "
                        "temporary folder for HyperCube shards)")
    r.add_argument("--snapshot-every", type=int, default=1, metavar="M",
                   help="snapshot every M batches, logging the batches between (default 1)")
    r.add_argument("--max-records-per-batch", type=int, default=None, metavar="N",
                   help="spark.sql.execution.arrow.maxRecordsPerBatch (Spark default 10000)")
    r.add_argument("--check", action="store_true",
                   help="also run a plain engine on the driver and fail on any difference")
    from gpu_ivm.cli_input import add_input_options

    add_input_options(r)
    r.set_defaults(fn=cmd_spark_replay)
    return r


def cmd_spark_replay(args: argparse.Namespace) -> int:
    """Run ``spark-replay``; returns the exit code."""
    from gpu_ivm.cli_input import in_file, input_options
    from gpu_ivm.errors import InputError
    from gpu_ivm.graph_engine import GraphEngine
    from gpu_ivm.io import list_batch_files, read_edges, read_graph_updates

    from .ingest import collect_arrow, create_frame, ingest, updates_table
    from .session import local_session

    files = list_batch_files(args.batches)
    el = read_edges(args.base, **input_options(args))
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("gpu-ivm: error: spark-replay needs pyspark: pip install 'gpu_ivm[spark]'",
              file=sys.stderr)
        return 1

    owned = SparkSession.getActiveSession() is None  # never stop a caller's session
    spark = local_session(args.master, max_records_per_batch=args.max_records_per_batch,
                          app_name="gpu-ivm spark-replay")
    tmp = None
    try:
        check = None
        if args.check:
            check = GraphEngine(directed=args.directed, epsilon=args.epsilon)
            check.load((el.src, el.dst))
        if args.shards:
            from .hypercube import SparkHyperCube

            state = args.state
            if state is None:
                tmp = tempfile.TemporaryDirectory(prefix="gpu-ivm-hypercube-")
                state = tmp.name
            eng: Any = SparkHyperCube(spark, state, k=args.shards, directed=args.directed,
                                      epsilon=args.epsilon, snapshot_every=args.snapshot_every)
            import pyarrow as pa

            rep = eng.load(create_frame(spark, pa.table({"src": el.src, "dst": el.dst})))
            mode = f"hypercube k={args.shards}"
        else:
            from .sink import DriverEngine

            eng = DriverEngine(args.state, base=(el.src, el.dst),
                               snapshot_every=args.snapshot_every,
                               factory=lambda: GraphEngine(directed=args.directed,
                                                           epsilon=args.epsilon))
            t0 = time.perf_counter()
            _ = eng.engine
            rep = eng.engine.last_report or _base_report(eng.engine, time.perf_counter() - t0)
            mode = "driver engine"
        base = rep.to_dict()
        base.update(batch="base", file=str(args.base), mode=mode)
        if args.json:
            print(json.dumps(base), flush=True)
        else:
            print(f"base ({mode}): {eng.count():,} "
                  f"{'directed 3-cycles' if args.directed else 'triangles'} "
                  f"[{base['seconds']:.2f} s]", flush=True)
        if check is not None and check.count() != eng.count():
            print(f"check failed at the base: {eng.count()} but expected {check.count()}",
                  file=sys.stderr)
            return 1
        total_updates, total_s = 0, 0.0
        for i, path in enumerate(files):
            try:
                u = read_graph_updates(path, **input_options(args, sign=True))
            except InputError as e:
                raise InputError(in_file(path.name, e)) from e
            t0 = time.perf_counter()
            df = create_frame(spark, updates_table(u))
            try:
                if args.shards:
                    r = eng.apply(df, batch_id=i)
                    extra = {}
                else:
                    r = eng.apply(collect_arrow(ingest(df)), batch_id=i)
                    extra = {"engine_seconds": r.seconds}
            except InputError as e:
                raise InputError(in_file(path.name, e)) from e
            seconds = time.perf_counter() - t0
            d = r.to_dict()
            d.update(batch=i, file=path.name, seconds=seconds, **extra)
            total_updates += r.updates
            total_s += seconds
            if args.json:
                print(json.dumps(d), flush=True)
            else:
                print(f"{path.name}: {r.updates:,} updates, triangles {r.triangles:,} "
                      f"({r.delta:+,}) [{seconds * 1e3:.1f} ms]", flush=True)
            if check is not None:
                try:
                    check.apply(updates_table(u))
                except InputError:  # pragma: no cover - the Spark path raised first
                    pass
                if check.count() != eng.count():
                    print(f"check failed after {path.name}: {eng.count()} but expected "
                          f"{check.count()}", file=sys.stderr)
                    return 1
        if not args.json:
            rate = total_updates / total_s if total_s else 0.0
            print(f"{len(files)} batches, {total_updates:,} updates in {total_s:.2f} s "
                  f"({rate:,.0f} updates/s); final count {eng.count():,}")
        return 0
    finally:
        if owned:
            spark.stop()
        if tmp is not None:
            tmp.cleanup()


def _base_report(engine: Any, seconds: float) -> Any:
    from gpu_ivm.engine import BatchReport

    return BatchReport(batch=-1, rows=0, updates=engine.num_edges, triangles=engine.count(),
                       delta=engine.count(), seconds=seconds, path="restored")
