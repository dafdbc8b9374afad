"""Command line: ``gpu-ivm`` (also ``python -m gpu_ivm``).

Subcommands
-----------
count GRAPH          triangles of an edge-list file, as one JSON object
replay               load a base graph and apply a folder of batch files in name order;
                     --snapshot-dir/--snapshot-every keep snapshots, --resume continues;
                     --emit/--out write per-vertex/per-edge counts or the triangles as Parquet,
                     --emit-changes also each batch's changes; --relations: R, S, T form
demo                 the embedded default workload (R-MAT graph + mixed batches)
spark-replay         replay through a local Spark session (one engine or K^3 HyperCube shards)

Exit codes: 0 success, 2 bad input (message on stderr), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import sys
import time
from pathlib import Path

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


def _engine_cfg(args, maintain: list[str]) -> dict:
    """The engine options recorded in (and checked against) a snapshot's manifest; graph
    runs without --emit keep the layout of earlier versions."""
    from .rational import parse_epsilon_setting

    e = parse_epsilon_setting(args.epsilon)
    eps = "auto" if e is None else f"{e.numerator}/{e.denominator}"
    if args.relations:
        cfg = {"form": "relations", "epsilon": eps}
    else:
        cfg = {"directed": bool(args.directed), "epsilon": eps,
               "on_conflict": args.on_conflict or "error"}
    if maintain:
        cfg.update(maintain=list(maintain), track_changes=bool(args.emit_changes))
    return cfg


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
    from .relation_engine import RelationEngine

    eng = load(latest, backend=args.backend)
    man_path = latest / MANIFEST
    meta = read_manifest(latest).get("metadata", {}).get("cli")
    if not isinstance(eng, (GraphEngine, RelationEngine)) or not isinstance(meta, dict) \
            or not isinstance(meta.get("files"), list):
        raise SnapshotError("not written by `gpu-ivm replay` (no record of the batch files)",
                            file=man_path)
    eng_meta = meta.get("config", {})
    if eng_meta != cfg:
        raise InputError(f"{latest.name} was taken with {eng_meta}, but this run asks for "
                         f"{cfg}; pass the same --epsilon/--directed/--on-conflict/"
                         "--relations/--emit/--emit-changes",
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


EMIT_CHOICES = {"vertex-counts": "vertex_counts", "edge-counts": "edge_counts",
                "triangles": "triangles"}
RESULT_CHUNK = 1 << 16
_BATCH_FILE = re.compile(r"batch-(\d{6,})\.parquet")
_TEMP_FILE = re.compile(r"\.(batch-\d+|vertex_counts|edge_counts|triangles)\.parquet\..+\.tmp")


def _emitted(args) -> list[str]:
    """The results asked for with --emit, as engine names, in a fixed order."""
    asked = {EMIT_CHOICES[e] for e in args.emit or ()}
    return [n for n in EMIT_CHOICES.values() if n in asked]


def _check_replay_args(parser: argparse.ArgumentParser, args) -> None:
    if args.emit and args.out is None:
        parser.error("--emit needs --out DIR (the folder the Parquet files are written to)")
    if args.out is not None and not args.emit:
        parser.error("--out needs --emit (which of vertex-counts, edge-counts, triangles)")
    if args.emit_changes and not args.emit:
        parser.error("--emit-changes needs --emit and --out")
    if args.relations and (args.directed or args.on_conflict is not None):
        parser.error("--directed and --on-conflict belong to the graph form, not --relations")


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_parquet(path: Path, batches, schema=None) -> int:
    """Stream Arrow record batches into ``path`` through a temporary file in the same folder
    and rename it into place, so ``path`` is either absent, the old file or the complete new
    one. Returns the rows written."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    rows = 0
    try:
        with open(tmp, "xb") as f:
            writer = pq.ParquetWriter(f, schema) if schema is not None else None
            try:
                for b in batches:
                    if writer is None:
                        writer = pq.ParquetWriter(f, b.schema)
                    writer.write_batch(b)
                    rows += b.num_rows
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:
                raise RuntimeError(f"no record batches (and no schema) for {path}")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return rows


def _prepare_out(out: Path, names: list[str], changes: bool, start: int,
                 resumed: bool) -> None:
    """Clear leftovers of interrupted writes from ``out``. With --emit-changes: a fresh run
    refuses a folder holding change files (another run's feed); a resumed run removes the
    change files of batches its snapshot does not hold (they are applied and written again)
    and keeps the others, noting on stderr when some of those are missing."""
    dirs = [out] + [out / "changes" / n for n in names]
    for d in dirs:
        if not d.is_dir():
            continue
        for p in d.iterdir():
            if _TEMP_FILE.fullmatch(p.name):
                p.unlink(missing_ok=True)
    if not changes:
        return
    for d in dirs[1:]:
        held = [(int(m.group(1)), p) for p in (d.iterdir() if d.is_dir() else ())
                if (m := _BATCH_FILE.fullmatch(p.name))]
        if held and not resumed:
            raise InputError(f"{d} already holds change files of another run; continue it "
                             "with --resume, or write to an empty --out folder", column="out")
        for i, p in held:
            if i >= start:
                p.unlink()
        missing = start - len({i for i, _ in held if i < start})
        if missing:
            print(f"gpu-ivm: note: {d} lacks the change files of {missing} of the {start} "
                  "batches the snapshot holds", file=sys.stderr)


def _write_changes(eng, out: Path, names: list[str], batch: int, rep) -> None:
    ch = eng.last_changes()
    for n in names:
        t = ch[n]
        if rep.updates == 0:
            # a batch without net updates changes nothing (the graph engine would still
            # report the previous batch's changes here)
            t = t.slice(0, 0)
        _write_parquet(out / "changes" / n / f"batch-{batch:06d}.parquet", t.to_batches(),
                       t.schema)


def _new_engine(args, maintain: list[str]):
    """A fresh engine with the base loaded: (engine, load report)."""
    kw = {"epsilon": args.epsilon, "backend": args.backend, "maintain": maintain or None,
          "track_changes": bool(args.emit_changes)}
    try:
        if args.relations:
            from .io import read_relation_updates
            from .relation_engine import RelationEngine

            eng = RelationEngine(**kw)
            u = read_relation_updates(args.base)
            parts = {nm: {"src": u.src[u.rel == k], "dst": u.dst[u.rel == k],
                          "mult": u.mult[u.rel == k]} for k, nm in enumerate("RST")}
            return eng, eng.load(**parts)
        from .graph_engine import GraphEngine

        eng = GraphEngine(directed=args.directed, on_conflict=args.on_conflict or "error", **kw)
        return eng, eng.load(args.base)
    except InputError as e:
        raise InputError(f"base {'relations' if args.relations else 'graph'} {args.base}: "
                         f"{e}") from e


def _recount(eng, args) -> int:
    """The count recomputed from the engine's current contents by the static algorithms."""
    import numpy as np

    from .static import count_triangles_arrays, relation_triangle_sum

    if not args.relations:
        s, d = eng.edges()
        return count_triangles_arrays(eng.encoder.lookup(s), eng.encoder.lookup(d),
                                      directed=args.directed)
    rels = [eng.relation(nm) for nm in "RST"]
    keys = np.concatenate([x for a, b, _ in rels for x in (a, b)])
    uniq, ids = np.unique(keys, return_inverse=True)
    offs = np.cumsum([0] + [x.shape[0] for a, b, _ in rels for x in (a, b)])
    parts = [(ids[offs[2 * k]:offs[2 * k + 1]], ids[offs[2 * k + 1]:offs[2 * k + 2]], m)
             for k, (_, _, m) in enumerate(rels)]
    return int(relation_triangle_sum(*parts, max(uniq.shape[0], 1)))


def cmd_replay(args) -> int:
    from .io import list_batch_files

    files = list_batch_files(args.batches)
    sizes = [p.stat().st_size for p in files] if args.snapshot_dir or args.resume else []
    if args.snapshot_every < 1:
        raise InputError("--snapshot-every must be at least 1", column="snapshot-every")
    emit = _emitted(args)
    out = Path(args.out) if emit else None
    cfg = _engine_cfg(args, emit)
    what = "Q" if args.relations else "directed 3-cycles" if args.directed else "triangles"
    size_key = "tuples" if args.relations else "edges"
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
    if out is not None:
        _prepare_out(out, emit, args.emit_changes, start, resumed_from is not None)

    def snap(n: int) -> None:
        if snap_dir is not None:
            from .snapshot import save_numbered

            save_numbered(eng, snap_dir, n, metadata=_replay_meta(args, files, sizes, n, cfg))

    def size(e) -> int:
        return e.size if args.relations else e.num_edges

    if eng is None:
        eng, rep = _new_engine(args, emit)
        if args.json:
            d = rep.to_dict()
            d.update(batch="base", file=str(args.base))
            print(json.dumps(d), flush=True)
        else:
            print(f"base: {size(eng):,} {size_key}, {eng.count():,} {what} "
                  f"[{rep.seconds:.2f} s]", flush=True)
        snap(0)
    else:
        if args.json:
            print(json.dumps({"batch": "resume", "rows": 0, "updates": 0,
                              "triangles": eng.count(), "delta": 0,
                              "seconds": round(time.perf_counter() - t_resume, 6),
                              "path": "resume", "applied": start, size_key: size(eng),
                              "file": str(resumed_from)}), flush=True)
        else:
            print(f"resumed: {start} of {len(files)} batch files already applied, "
                  f"{size(eng):,} {size_key}, {eng.count():,} {what}", flush=True)
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
        if args.emit_changes and r.path != "skipped":
            _write_changes(eng, out, emit, i, r)
        if args.json:
            d = r.to_dict()
            d.update(batch=i, file=path.name)
            print(json.dumps(d), flush=True)
        else:
            print(f"{path.name}: {r.updates:,} updates, "
                  f"{'Q' if args.relations else 'triangles'} {r.triangles:,} "
                  f"({r.delta:+,}) [{r.seconds * 1e3:.1f} ms, {r.path}]", flush=True)
        if (i + 1) % args.snapshot_every == 0 or i + 1 == len(files):
            snap(i + 1)

    if args.check:
        expect = _recount(eng, args)
        if expect != eng.count():
            print(f"check failed: maintained {eng.count()} but recount {expect}",
                  file=sys.stderr)
            return 1
    for name in emit:
        target = out / f"{name}.parquet"
        rows = _write_parquet(target, getattr(eng, name)(RESULT_CHUNK))
        if not args.json:
            print(f"{name}: {rows:,} rows -> {target}", flush=True)
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
    r.add_argument("--base", required=True,
                   help="the base graph (any edge-list file); with --relations a table with "
                        "rel, src, dst, mult holding R, S and T")
    r.add_argument("--batches", required=True,
                   help="folder of batch files (Parquet, CSV or Arrow IPC with src, dst, sign; "
                        "with --relations rel, src, dst, mult)")
    r.add_argument("--relations", action="store_true",
                   help="the three-relation form: maintain Q = sum R(a,b)*S(b,c)*T(c,a) over "
                        "bag relations instead of the triangles of one graph")
    r.add_argument("--epsilon", default="auto",
                   help="IVM^eps exponent, e.g. 1/2, or auto (default: chosen from the degree "
                        "distribution at load and at every major rebalancing)")
    r.add_argument("--directed", action="store_true", help="maintain directed 3-cycles")
    r.add_argument("--json", action="store_true", help="one JSON line per batch")
    r.add_argument("--on-conflict", choices=["error", "ignore"], default=None,
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
    r.add_argument("--emit", nargs="+", action="extend", choices=list(EMIT_CHOICES),
                   metavar="RESULT",
                   help="maintain and, after the last batch, write these results to --out as "
                        "Parquet: vertex-counts (vertex, triangles), edge-counts (src, dst, "
                        "triangles), triangles (a, b, c; + mult with --relations); user keys, "
                        "undirected graphs count each edge (src < dst) and triangle (a < b < c) "
                        "once. Names separated by spaces; the flag may repeat")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="folder for --emit: DIR/vertex_counts.parquet, DIR/edge_counts.parquet, "
                        "DIR/triangles.parquet (each written atomically)")
    r.add_argument("--emit-changes", action="store_true",
                   help="also write each applied batch's changed rows of every --emit result, "
                        "with old and new values, to DIR/changes/<result>/batch-<NNNNNN>."
                        "parquet (NNNNNN = batch number); a fresh run needs a folder without "
                        "change files, --resume keeps those of the batches already applied")
    r.set_defaults(fn=cmd_replay, check_args=lambda a: _check_replay_args(r, a))
    d = sub.add_parser("demo", help="run the embedded default workload")
    d.add_argument("--scale", type=int, default=18, help="R-MAT scale (default 18)")
    d.add_argument("--batch-size", type=int, default=1000)
    d.add_argument("--batches", type=int, default=30)
    d.add_argument("--epsilon", default="auto", help="IVM^eps exponent or auto (default)")
    d.set_defaults(fn=cmd_demo)
    from .spark_glue.cli import add_parser as add_spark_replay

    add_spark_replay(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check = getattr(args, "check_args", None)
    if check is not None:
        check(args)
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
