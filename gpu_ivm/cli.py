"""Command line: ``gpu-ivm`` (also ``python -m gpu_ivm``).

Subcommands
-----------
count GRAPH          triangles of an edge-list file, as one JSON object
replay               load a base graph and apply a folder of batch files in name order;
                     --snapshot-dir/--snapshot-every keep snapshots, --resume continues
demo                 the embedded default workload (R-MAT graph + mixed batches)
spark-replay         replay through a local Spark session (one engine or K^3 HyperCube shards)

Exit codes: 0 success, 2 bad input (message on stderr), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .errors import GpuIvmError, InputError


def _progress(iterable, total: int, desc: str, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit="batch", disable=not enabled or None,
                file=sys.stderr, leave=False)


def cmd_count(args) -> int:
    from .io import read_edges
    from .static import graph_stats

    t0 = time.perf_counter()
    el = read_edges(args.graph)
    stats = graph_stats((el.src, el.dst)) if not args.directed else None
    if args.directed:
        from .static import count_triangles_arrays, simple_graph

        s, d, n = simple_graph(el.src, el.dst, directed=True)
        stats = {"vertices": n, "edges": int(s.shape[0]),
                 "self_loops": int((el.src == el.dst).sum()),
                 "directed_3_cycles": count_triangles_arrays(s, d, directed=True)}
    stats["seconds"] = round(time.perf_counter() - t0, 6)
    stats["file"] = str(args.graph)
    print(json.dumps(stats))
    return 0


def _replay_meta(args, files, sizes: list[int], n_applied: int, engine_cfg: dict) -> dict:
    """What the CLI records in a snapshot's manifest: the run's inputs and the batch files
    applied so far (index = position in the sorted file list)."""
    return {"cli": {
        "base": str(args.base),
        "batches": str(args.batches),
        "config": engine_cfg,
        "applied": n_applied,
        "files": [{"index": i, "file": p.name, "bytes": b}
                  for i, (p, b) in enumerate(zip(files[:n_applied], sizes))],
    }}


def _engine_cfg(directed: bool, epsilon, on_conflict: str) -> dict:
    from .rational import parse_epsilon

    e = parse_epsilon(epsilon)
    return {"directed": bool(directed), "epsilon": f"{e.numerator}/{e.denominator}",
            "on_conflict": on_conflict}


def _resume(args, files, sizes: list[int], cfg: dict):
    """(engine, number of batch files it holds, snapshot folder) from the newest snapshot in
    ``args.resume``, or (None, 0, None) when there is none; the snapshot must come from a
    replay of the same batch list with the same engine options (else an error, exit 2)."""
    from .snapshot import MANIFEST, SnapshotError, find_latest, load, read_manifest

    latest = find_latest(args.resume)
    if latest is None:
        print(f"gpu-ivm: note: no complete snapshot in {args.resume}; starting from the "
              "beginning", file=sys.stderr)
        return None, 0, None
    from .graph_engine import GraphEngine

    eng = load(latest, backend=args.backend)
    man_path = latest / MANIFEST
    meta = read_manifest(latest).get("metadata", {}).get("cli")
    if not isinstance(eng, GraphEngine) or not isinstance(meta, dict) \
            or not isinstance(meta.get("files"), list):
        raise SnapshotError("not written by `gpu-ivm replay` (no record of the batch files)",
                            file=man_path)
    eng_meta = meta.get("config", {})
    if eng_meta != cfg:
        raise InputError(f"{latest.name} was taken with {eng_meta}, but this run asks for "
                         f"{cfg}; pass the same --epsilon/--directed/--on-conflict",
                         column="resume")
    n = int(meta.get("applied", -1))
    if n != len(meta["files"]) or n > len(files):
        raise SnapshotError(f"the snapshot holds {n} batch files but {args.batches} has "
                            f"only {len(files)}", file=man_path)
    for rec, p, b in zip(meta["files"], files[:n], sizes):
        if rec.get("file") != p.name or rec.get("bytes") != b:
            raise InputError(f"batch file {rec.get('index')} was {rec.get('file')!r} "
                             f"({rec.get('bytes')} bytes) when {latest.name} was taken, now "
                             f"{p.name!r} ({b} bytes): not the same batch list",
                             column="resume")
    expect_last = n - 1 if n else None
    if eng.last_batch_id != expect_last:
        raise SnapshotError(f"last batch id {eng.last_batch_id} does not match the "
                            f"{n} batch files recorded", file=man_path)
    return eng, n, latest


def cmd_replay(args) -> int:
    from .graph_engine import GraphEngine
    from .io import list_batch_files

    files = list_batch_files(args.batches)
    sizes = [p.stat().st_size for p in files] if args.snapshot_dir or args.resume else []
    if args.snapshot_every < 1:
        raise InputError("--snapshot-every must be at least 1", column="snapshot-every")
    cfg = _engine_cfg(args.directed, args.epsilon, args.on_conflict)
    snap_dir = args.snapshot_dir
    if snap_dir is not None:
        from .snapshot import list_snapshots

        same = args.resume is not None and \
            os.path.realpath(args.resume) == os.path.realpath(snap_dir)
        if list_snapshots(snap_dir) and not same:
            raise InputError(f"{snap_dir} already holds snapshots of another run; resume "
                             "from it with --resume, or use an empty folder",
                             column="snapshot-dir")
    eng, start, resumed_from = None, 0, None
    t_resume = time.perf_counter()
    if args.resume is not None:
        eng, start, resumed_from = _resume(args, files, sizes, cfg)

    def snap(n: int) -> None:
        if snap_dir is not None:
            from .snapshot import save_numbered

            save_numbered(eng, snap_dir, n, metadata=_replay_meta(args, files, sizes, n, cfg))

    if eng is None:
        eng = GraphEngine(directed=args.directed, epsilon=args.epsilon, backend=args.backend,
                          on_conflict=args.on_conflict)
        try:
            rep = eng.load(args.base)
        except InputError as e:
            raise InputError(f"base graph {args.base}: {e}") from e
        if args.json:
            d = rep.to_dict()
            d.update(batch="base", file=str(args.base))
            print(json.dumps(d), flush=True)
        else:
            print(f"base: {eng.num_edges:,} edges, {eng.count():,} "
                  f"{'directed 3-cycles' if args.directed else 'triangles'} "
                  f"[{rep.seconds:.2f} s]", flush=True)
        snap(0)
    else:
        if args.json:
            print(json.dumps({"batch": "resume", "rows": 0, "updates": 0,
                              "triangles": eng.count(), "delta": 0,
                              "seconds": round(time.perf_counter() - t_resume, 6),
                              "path": "resume", "applied": start, "edges": eng.num_edges,
                              "file": str(resumed_from)}), flush=True)
        else:
            print(f"resumed: {start} of {len(files)} batch files already applied, "
                  f"{eng.num_edges:,} edges, {eng.count():,} "
                  f"{'directed 3-cycles' if args.directed else 'triangles'}", flush=True)
    total_updates = 0
    total_s = 0.0
    todo = list(enumerate(files))[start:]
    for i, path in _progress(todo, len(todo), "replay", not args.json):
        try:
            r = eng.apply(path, batch_id=i)
        except InputError as e:
            raise InputError(f"{path.name}: {e}") from e
        total_updates += r.updates
        total_s += r.seconds
        if args.json:
            d = r.to_dict()
            d.update(batch=i, file=path.name)
            print(json.dumps(d), flush=True)
        else:
            print(f"{path.name}: {r.updates:,} updates, triangles {r.triangles:,} "
                  f"({r.delta:+,}) [{r.seconds * 1e3:.1f} ms, {r.path}]", flush=True)
        if (i + 1) % args.snapshot_every == 0 or i + 1 == len(files):
            snap(i + 1)

    if args.check:
        from .static import count_triangles_arrays

        s, d = eng.edges()
        expect = count_triangles_arrays(eng.encoder.lookup(s), eng.encoder.lookup(d),
                                        directed=args.directed)
        if expect != eng.count():
            print(f"check failed: maintained {eng.count()} but recount {expect}",
                  file=sys.stderr)
            return 1
    if not args.json:
        rate = total_updates / total_s if total_s else 0.0
        print(f"{len(todo)} batches, {total_updates:,} updates in {total_s:.2f} s "
              f"({rate:,.0f} updates/s); final count {eng.count():,}")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    res = run_demo(scale=args.scale, batch_size=args.batch_size, n_batches=args.batches,
                   epsilon=args.epsilon)
    return 0 if res["ok"] else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-ivm", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("count", help="count the triangles of an edge-list file")
    c.add_argument("graph", help="edge list: SNAP text (.txt/.gz), CSV, Parquet or Arrow IPC")
    c.add_argument("--directed", action="store_true", help="count directed 3-cycles instead")
    c.set_defaults(fn=cmd_count)
    r = sub.add_parser("replay", help="apply a folder of batch files to a base graph")
    r.add_argument("--base", required=True, help="the base graph (any edge-list file)")
    r.add_argument("--batches", required=True,
                   help="folder of batch files (Parquet, CSV or Arrow IPC with src, dst, sign)")
    r.add_argument("--epsilon", default="1/2", help="IVM^eps exponent, e.g. 1/2 (default)")
    r.add_argument("--directed", action="store_true", help="maintain directed 3-cycles")
    r.add_argument("--json", action="store_true", help="one JSON line per batch")
    r.add_argument("--on-conflict", choices=["error", "ignore"], default="error",
                   help="inserting a present / deleting an absent edge: fail (default) or skip")
    r.add_argument("--backend", default=None, help="cpu, cuda or auto (default: $GPU_IVM_BACKEND"
                                                   " or cpu)")
    r.add_argument("--check", action="store_true",
                   help="recount from scratch at the end and fail on a mismatch")
    r.add_argument("--snapshot-dir", default=None, metavar="DIR",
                   help="keep snapshots in DIR (DIR/snapshot-<n>, n = batch files applied; "
                        "the newest two are kept)")
    r.add_argument("--snapshot-every", type=int, default=1, metavar="K",
                   help="snapshot after every K batch files (default 1) and after the last")
    r.add_argument("--resume", default=None, metavar="DIR",
                   help="continue from the newest snapshot in DIR, skipping the batch files it "
                        "holds (no snapshot there: start from the beginning)")
    r.set_defaults(fn=cmd_replay)
    d = sub.add_parser("demo", help="run the embedded default workload")
    d.add_argument("--scale", type=int, default=18, help="R-MAT scale (default 18)")
    d.add_argument("--batch-size", type=int, default=1000)
    d.add_argument("--batches", type=int, default=30)
    d.add_argument("--epsilon", default="1/2")
    d.set_defaults(fn=cmd_demo)
    from .spark_glue.cli import add_parser as add_spark_replay

    add_spark_replay(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except InputError as e:
        print(f"gpu-ivm: error: {e}", file=sys.stderr)
        return 2
    except GpuIvmError as e:
        print(f"gpu-ivm: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except KeyboardInterrupt:
        print("gpu-ivm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
