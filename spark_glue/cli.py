"""``gpu-ivm spark-replay``: the ``replay`` subcommand run through a local Spark session.

Register it with :func:`add_parser` on the ``gpu-ivm`` subparsers. Each batch file is read
and validated on the driver exactly as ``gpu-ivm replay`` does (same errors, exit code 2),
handed to Spark as a DataFrame, validated again on the executors by the Arrow ingestion
(``mapInArrow``) and applied either to one driver-resident engine (default) or to k³ HyperCube
shard engines on the executors (``--shards K``). JSON lines match ``replay``: a base line
(``kind`` "base") and one line per batch (``kind`` "batch", ``batch``, ``rows``, ``updates``,
``triangles``, ``delta``, ``seconds``, ``path``, ``file``, ...). ``seconds`` is the batch's
wall time through Spark (job scheduling, Arrow transfer, validation, engine work);
``engine_seconds`` (single engine) or ``shard_seconds_max`` (HyperCube) is the engine part.
With ``--json`` a progress line per micro-batch goes to stderr; ``--check`` reports on stderr.

A ``--state`` folder records the run's base (content fingerprint) and engine options in
``STATE/spark-replay-run.json``; re-opening it with another base or other options is refused
(exit 2).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from typing import Any

__all__ = ["RUN_RECORD", "add_parser", "check_state_record", "cmd_spark_replay"]

RUN_RECORD = "spark-replay-run.json"


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
    from gpu_ivm.cli_types import epsilon_arg, nonnegative_int, positive_int

    r = subparsers.add_parser(
        "spark-replay", help="replay a folder of batch files through a local Spark session",
        description="Same as replay, through Spark: one driver-resident engine, or k^3 "
                    "HyperCube shard engines on the executors (--shards K).")
    r.add_argument("--base", required=True, metavar="GRAPH",
                   help="the base graph (any edge-list file)")
    r.add_argument("--batches", required=True, metavar="DIR",
                   help="folder of batch files (Parquet, CSV or Arrow IPC with src, dst, sign), "
                        "applied in natural file-name order: digit runs compare as numbers, so "
                        "batch-2 comes before batch-10")
    r.add_argument("--shards", type=nonnegative_int, default=0, metavar="K",
                   help="HyperCube with K^3 shards (default 0: one driver-resident engine)")
    r.add_argument("--epsilon", default="1/2", type=epsilon_arg,
                   help="IVM^eps exponent in [0, 1], e.g. 1/2 (default)")
    r.add_argument("--directed", action="store_true", help="maintain directed 3-cycles")
    r.add_argument("--json", action="store_true",
                   help="JSON lines on stdout: one for the base (kind base), one per batch "
                        "(kind batch); progress goes to stderr")
    r.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    r.add_argument("--state", default=None, metavar="DIR",
                   help="state folder for snapshots (default: none for one engine, a "
                        "temporary folder for HyperCube shards); re-opening it continues the "
                        "run, and needs the same base and options")
    r.add_argument("--snapshot-every", type=positive_int, default=1, metavar="M",
                   help="snapshot every M batches, logging the batches between (default 1)")
    r.add_argument("--max-records-per-batch", type=positive_int, default=None, metavar="N",
                   help="spark.sql.execution.arrow.maxRecordsPerBatch (Spark default 10000)")
    r.add_argument("--check", action="store_true",
                   help="also run a plain engine on the driver, compare its count with the "
                        "Spark run's after the base and every batch, and fail (exit 1) on any "
                        "difference; prints the result on stderr")
    from gpu_ivm.cli_input import add_input_options

    add_input_options(r)
    r.set_defaults(fn=cmd_spark_replay)
    return r


def check_state_record(state: str | pathlib.Path, base: str, config: dict) -> None:
    """Refuse a ``--state`` folder recorded for another base or other options; record this
    run's in a new folder (``STATE/spark-replay-run.json``).

    Raises
    ------
    gpu_ivm.errors.InputError
        Naming what differs (exit 2 from the command line).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "g.txt").write_text("1 2\\n")
    >>> check_state_record(d / "state", str(d / "g.txt"), {"epsilon": "1/2"})
    >>> try:
    ...     check_state_record(d / "state", str(d / "g.txt"), {"epsilon": "1/3"})
    ... except ValueError as e:
    ...     print(str(e).split("(")[1].split(")")[0])
    epsilon: '1/2' recorded, '1/3' now
    """
    from gpu_ivm.errors import InputError
    from gpu_ivm.fingerprint import differences, fingerprint, short

    folder = pathlib.Path(state)
    rec_path = folder / RUN_RECORD
    fp = fingerprint(base)
    now = {"base": str(base), "base_fingerprint": fp, "config": config}
    if rec_path.exists():
        try:
            rec = json.loads(rec_path.read_text())
        except (OSError, ValueError) as e:
            raise InputError(f"{rec_path} is unreadable ({e}); it records which base the "
                             "state folder belongs to", option="--state") from None
        then = rec.get("config", {})
        cfg_diff = [f"{k}: {then.get(k)!r} recorded, {config.get(k)!r} now"
                    for k in sorted(set(then) | set(config)) if then.get(k) != config.get(k)]
        if cfg_diff:
            raise InputError(f"{folder} holds the state of a run with other options ("
                             f"{'; '.join(cfg_diff)}); pass the same options or use another "
                             "--state folder", option="--state")
        base_diff = differences(rec.get("base_fingerprint", {}), fp)
        if base_diff:
            raise InputError(f"{folder} holds the state of a run with --base {rec.get('base')} "
                             f"({short(rec.get('base_fingerprint', {}))}); this run's --base "
                             f"{base} differs ({', '.join(base_diff)}); use another --state "
                             "folder", option="--state")
        return
    if folder.is_dir() and any(folder.iterdir()):
        print(f"gpu-ivm: note: {folder} holds state without a record of its base (written "
              "by an older gpu-ivm); the base is not checked", file=sys.stderr)
        return
    folder.mkdir(parents=True, exist_ok=True)
    from ._state import write_bytes_atomic

    write_bytes_atomic(rec_path, json.dumps(now, indent=1).encode())


def cmd_spark_replay(args: argparse.Namespace) -> int:
    """Run ``spark-replay``; returns the exit code."""
    from gpu_ivm.cli_input import in_file, input_options
    from gpu_ivm.errors import InputError
    from gpu_ivm.graph_engine import GraphEngine
    from gpu_ivm.io import list_batch_files, read_edges, read_graph_updates
    from gpu_ivm.progress import announce_if_slow

    from .ingest import collect_arrow, create_frame, ingest, updates_table
    from .session import local_session

    files = list_batch_files(args.batches)
    try:
        el = read_edges(args.base, **input_options(args))
    except InputError as e:
        raise InputError(in_file(f"base graph {args.base}", e)) from e
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("gpu-ivm: error: spark-replay needs pyspark: pip install 'gpu_ivm[spark]'",
              file=sys.stderr)
        return 1
    if args.state is not None:
        from gpu_ivm.rational import parse_epsilon

        e = parse_epsilon(args.epsilon)
        check_state_record(args.state, args.base, {
            "directed": bool(args.directed), "epsilon": f"{e.numerator}/{e.denominator}",
            "shards": args.shards})
    what = "directed 3-cycles" if args.directed else "triangles"

    owned = SparkSession.getActiveSession() is None  # never stop a caller's session
    with announce_if_slow(f"starting Spark ({args.master})") as step:
        spark = local_session(args.master, max_records_per_batch=args.max_records_per_batch,
                              app_name="gpu-ivm spark-replay")
        step.done = "Spark session started"
    tmp = None
    try:
        check = None
        compared = 0
        if args.check:
            check = GraphEngine(directed=args.directed, epsilon=args.epsilon)
            check.load((el.src, el.dst))
        with announce_if_slow(f"loading base graph {args.base} into Spark") as step:
            if args.shards:
                from .hypercube import SparkHyperCube

                state = args.state
                if state is None:
                    tmp = tempfile.TemporaryDirectory(prefix="gpu-ivm-hypercube-")
                    state = tmp.name
                eng: Any = SparkHyperCube(spark, state, k=args.shards, directed=args.directed,
                                          epsilon=args.epsilon,
                                          snapshot_every=args.snapshot_every)
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
                rep = eng.engine.last_report or _base_report(eng.engine,
                                                             time.perf_counter() - t0)
                mode = "driver engine"
            step.done = f"loaded the base ({eng.count():,} {what})"
        base = rep.to_dict()
        base.pop("batch", None)
        base.update(file=str(args.base), mode=mode)
        if args.json:
            print(json.dumps({"kind": "base", **base}), flush=True)
        else:
            print(f"base ({mode}): {eng.count():,} {what} [{base['seconds']:.2f} s]",
                  flush=True)
        if check is not None:
            compared += 1
            if check.count() != eng.count():
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
            d.update(batch=i, file=str(path), seconds=seconds, **extra)
            total_updates += r.updates
            total_s += seconds
            if args.json:
                print(json.dumps({"kind": "batch", **d}), flush=True)
                print(f"gpu-ivm: micro-batch {i + 1} of {len(files)} ({path.name}): "
                      f"{r.triangles:,} {what} [{seconds:.2f} s]", file=sys.stderr, flush=True)
            else:
                print(f"{path.name}: {r.updates:,} updates, triangles {r.triangles:,} "
                      f"({r.delta:+,}) [{seconds * 1e3:.1f} ms]", flush=True)
            if check is not None:
                try:
                    check.apply(updates_table(u))
                except InputError:  # pragma: no cover - the Spark path raised first
                    pass
                compared += 1
                if check.count() != eng.count():
                    print(f"check failed after {path.name}: {eng.count()} but expected "
                          f"{check.count()}", file=sys.stderr)
                    return 1
        if check is not None:
            print(f"check: ok, {compared} counts compared (the base and each of the "
                  f"{len(files)} batches, against a plain engine on the driver)",
                  file=sys.stderr, flush=True)
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
