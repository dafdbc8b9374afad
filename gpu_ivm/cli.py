"""Command line: ``gpu-ivm`` (also ``python -m gpu_ivm``).

Subcommands
-----------
count GRAPH          triangles of an edge-list file, as one JSON object
replay               load a base graph and apply a folder of batch files in natural name
                     order (batch-2 before batch-10); --snapshot-dir/--snapshot-every keep
                     snapshots, --resume continues;
                     --emit/--out write per-vertex/per-edge counts or the triangles as Parquet,
                     --emit-changes also each batch's changes; --relations: R, S, T form;
                     --mode insert-only|auto: the insert-only engine (gpu_ivm.insert_only,
                     gpu_ivm.insert_only_relations with --relations);
                     --events FILE --window SPAN --step SPAN: a sliding window over
                     timestamped edges (gpu_ivm.window_cli)
demo                 the embedded default workload (R-MAT graph + mixed batches)
spark-replay         replay through a local Spark session (one engine or K^3 HyperCube shards)

``gpu-ivm`` without arguments prints the help on stderr and exits 2 (argparse's convention for
a missing subcommand); ``gpu-ivm --version`` prints the version.

Exit codes: 0 success, 2 bad input or usage (message on stderr), 1 anything else (also a
failed ``--check``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from .cli_input import add_input_options, in_file, input_options, show_input_notes
from .cli_snapshots import (
    config_differences,
    drop_newer,
    folder_option,
    locate_snapshot,
    restore_located,
    snapshot_series_check,
)
from .errors import GpuIvmError, InputError
from .parquet_out import write_parquet as _write_parquet
from .progress import announce_if_slow

DESCRIPTION = ("Exact incremental triangle counts (IVM^eps): count an edge list, or replay "
               "batches of inserts and deletes on a base graph.")
EPILOG = ("Run 'gpu-ivm SUBCOMMAND --help' for a subcommand's options. Exit codes: 0 success, "
          "2 bad input or usage, 1 other errors or a failed --check.")


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
    with announce_if_slow(f"reading {args.graph}") as step:
        el = read_edges(args.graph, **input_options(args))
        step.done = f"read {el.src.shape[0]:,} edge rows"
    stats = graph_stats((el.src, el.dst)) if not args.directed else None
    if args.directed:
        from .static import count_triangles_arrays, simple_graph

        s, d, n = simple_graph(el.src, el.dst, directed=True)
        cycles = count_triangles_arrays(s, d, directed=True)
        stats = {"vertices": n, "edges": int(s.shape[0]),
                 "self_loops": int((el.src == el.dst).sum()),
                 "triangles": cycles, "directed_3_cycles": cycles}
    stats["seconds"] = round(time.perf_counter() - t0, 6)
    stats["file"] = str(args.graph)
    print(json.dumps({"kind": "count", "directed": bool(args.directed), **stats}))
    return 0


def _replay_meta(args, files, sizes: list[int], n_applied: int, engine_cfg: dict,
                 base_fp: dict) -> dict:
    """What the CLI records in a snapshot's manifest: the run's inputs (with a content
    fingerprint of the base) and the batch files applied so far (index = position in the
    sorted file list)."""
    return {"cli": {
        "base": str(args.base),
        "base_fingerprint": base_fp,
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
        if args.mode != "general":
            cfg["mode"] = args.mode
    else:
        cfg = {"directed": bool(args.directed), "epsilon": eps,
               "on_conflict": args.on_conflict or "error"}
        if args.results_from != "auto":
            cfg["results_from"] = args.results_from
        if args.mode != "general":
            cfg["mode"] = args.mode
    if maintain and args.mode != "general":  # insert-only: a triangle log, no views
        cfg.update(track_changes=True)
    elif maintain:
        cfg.update(maintain=list(maintain), track_changes=bool(args.emit_changes))
    return cfg


def _resume(args, files, sizes: list[int], cfg: dict, base_fp: dict):
    """(engine, number of batch files it holds, snapshot folder) from the newest snapshot in
    ``args.resume`` (or the snapshot folder it names), or (None, 0, None) when there is none.
    The snapshot must come from a replay of the same base (content fingerprint) and batch list
    with the same engine options (else an error, exit 2); the options and the base are checked
    on the manifest before the state is read."""
    from .fingerprint import differences, short
    from .snapshot import MANIFEST, SnapshotError, load

    loc = locate_snapshot(args)
    if loc is None:
        return None, 0, None
    latest, man = loc.latest, loc.manifest
    man_path = latest / MANIFEST
    meta = man.get("metadata", {}).get("cli")
    if man.get("form") not in ("graph", "relations") or not isinstance(meta, dict) \
            or not isinstance(meta.get("files"), list):
        raise SnapshotError("not written by `gpu-ivm replay` (no record of the batch files)",
                            file=man_path)
    eng_meta = meta.get("config", {})
    if eng_meta != cfg:
        raise InputError(f"{latest} was taken with other engine options ("
                         f"{config_differences(eng_meta, cfg)}); pass the same --epsilon/"
                         "--directed/--on-conflict/--relations/--emit/--emit-changes",
                         option="--resume")
    rec_fp = meta.get("base_fingerprint")
    if not isinstance(rec_fp, dict):
        print(f"gpu-ivm: note: {latest} records no fingerprint of its base (written by an "
              "older gpu-ivm); the base is not checked", file=sys.stderr)
    elif differences(rec_fp, base_fp):
        raise InputError(f"{latest} is a snapshot of another base: it was taken with --base "
                         f"{meta.get('base')} ({short(rec_fp)}), this run's --base "
                         f"{args.base} differs ({', '.join(differences(rec_fp, base_fp))}); "
                         "resume with the same base, or use another snapshot folder",
                         option="--resume")
    with announce_if_slow(f"restoring {latest}") as step:
        eng = restore_located(loc, args, lambda p: load(p, backend=args.backend))
        step.done = f"restored {latest}"
    n = int(meta.get("applied", -1))
    if n != len(meta["files"]) or n > len(files):
        raise SnapshotError(f"the snapshot holds {n} batch files but {args.batches} has "
                            f"only {len(files)}", file=man_path)
    for rec, p, b in zip(meta["files"], files[:n], sizes):
        if rec.get("file") != p.name or rec.get("bytes") != b:
            raise InputError(f"batch file {rec.get('index')} was {rec.get('file')!r} "
                             f"({rec.get('bytes')} bytes) when {latest.name} was taken, now "
                             f"{p.name!r} ({b} bytes): not the same batch list",
                             option="--resume")
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


def _check_backend(choice: str | None) -> None:
    """Resolve --backend (or $GPU_IVM_BACKEND) before any work, so a bad name or a missing
    device fails at once."""
    from .backend import ENV_VAR, get_backend

    try:
        get_backend(choice)
    except InputError:
        raise InputError(f"${ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a backend; use cpu, "
                         "cuda or auto") from None


def _check_replay_args(parser: argparse.ArgumentParser, args) -> None:
    window_opts = [o for o, v in (("--window", args.window), ("--step", args.step),
                                  ("--time-col", args.time_col), ("--offline", args.offline))
                   if v]
    if args.events is not None:
        other = [o for o, v in (("--base", args.base), ("--batches", args.batches),
                                ("--relations", args.relations), ("--directed", args.directed),
                                ("--emit", args.emit), ("--emit-changes", args.emit_changes),
                                ("--on-conflict", args.on_conflict),
                                ("--mode", args.mode != "general")) if v]
        if other:
            parser.error(f"--events replays a sliding window; it does not take "
                         f"{', '.join(other)}")
        if args.window is None or args.step is None:
            parser.error("--events needs --window SPAN and --step SPAN")
        if args.offline and (args.snapshot_dir or args.resume):
            parser.error("--offline evaluates the whole log at once; it does not take "
                         "--snapshot-dir or --resume")
        return
    if window_opts:
        parser.error(f"{', '.join(window_opts)}: sliding-window options, used with --events FILE")
    missing = [o for o, v in (("--base", args.base), ("--batches", args.batches)) if v is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)} (or "
                     "--events FILE --window SPAN --step SPAN for a sliding window)")
    if args.mode != "general" and args.directed:
        parser.error(f"--mode {args.mode} supports undirected graphs and --relations (not "
                     "--directed)")
    if args.mode != "general" and args.relations and args.emit:
        parser.error(f"--mode {args.mode} with --relations maintains the count only (no --emit)")
    if args.results_from != "auto" and args.relations:
        parser.error("--results-from is for graphs (the relation form keeps paper 001's views)")
    if args.mode == "auto" and args.emit:
        parser.error("--emit works with --mode general or insert-only, not auto (its results "
                     "would change form at the first delete)")
    if args.emit and args.out is None:
        parser.error("--emit needs --out DIR (the folder the Parquet files are written to)")
    if args.out is not None and not args.emit:
        parser.error("--out needs --emit (which of vertex-counts, edge-counts, triangles)")
    if args.emit_changes and not args.emit:
        parser.error("--emit-changes needs --emit and --out")
    if args.relations and (args.directed or args.on_conflict is not None):
        parser.error("--directed and --on-conflict belong to the graph form, not --relations")


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
                             "with --resume, or write to an empty --out folder", option="--out")
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
    """A fresh engine with the base loaded: (engine, load report). A load that takes longer
    than a few seconds is announced on stderr (gpu_ivm.progress)."""
    kw = {"epsilon": args.epsilon, "backend": args.backend, "maintain": maintain or None,
          "track_changes": bool(args.emit_changes)}
    if not args.relations and args.mode != "general":
        # insert-only results come from its triangle log (gpu_ivm.triangle_log)
        kw.update(maintain=None, track_changes=bool(maintain))
    what = "relations" if args.relations else "graph"
    try:
        with announce_if_slow(f"loading base {what} {args.base}") as step:
            if args.relations:
                from .io import read_relation_updates
                from .relation_engine import RelationEngine

                eng = RelationEngine(mode=args.mode.replace("-", "_"), **kw)
                u = read_relation_updates(args.base, **input_options(args))
                parts = {nm: {"src": u.src[u.rel == k], "dst": u.dst[u.rel == k],
                              "mult": u.mult[u.rel == k]} for k, nm in enumerate("RST")}
                rep = eng.load(**parts)
                step.done = f"loaded {eng.size:,} tuples"
            else:
                from .graph_engine import GraphEngine

                eng = GraphEngine(directed=args.directed,
                                  on_conflict=args.on_conflict or "error",
                                  mode=args.mode.replace("-", "_"),
                                  results_from=args.results_from, **kw)
                rep = eng.load(args.base, **input_options(args))
                step.done = f"loaded {eng.num_edges:,} edges"
        return eng, rep
    except InputError as e:
        raise InputError(f"base {what} {args.base}: {e}") from e


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


def _json_line(kind: str, **fields) -> None:
    print(json.dumps({"kind": kind, **fields}), flush=True)


def cmd_replay(args) -> int:
    from .io import list_batch_files

    if args.events is not None:
        from .window_cli import replay_events

        return replay_events(args)

    if args.snapshot_every < 1:
        raise InputError(f"must be at least 1, got {args.snapshot_every}",
                         option="--snapshot-every")
    for value, option in ((args.snapshot_dir, "--snapshot-dir"), (args.resume, "--resume"),
                          (args.out, "--out")):
        folder_option(value, option)
    _check_backend(args.backend)
    files = list_batch_files(args.batches)
    keep_snaps = args.snapshot_dir is not None or args.resume is not None
    sizes = [p.stat().st_size for p in files] if keep_snaps else []
    emit = _emitted(args)
    out = Path(args.out) if emit else None
    cfg = _engine_cfg(args, emit)
    what = "Q" if args.relations else "directed 3-cycles" if args.directed else "triangles"
    size_key = "tuples" if args.relations else "edges"
    base_fp = None
    if keep_snaps:
        from .fingerprint import fingerprint

        try:
            with announce_if_slow(f"fingerprinting base {args.base}") as step:
                base_fp = fingerprint(args.base)
                step.done = f"fingerprinted {base_fp['bytes']:,} bytes"
        except InputError as e:
            raise InputError(f"base {args.base}: {e}") from e
    snap_dir = args.snapshot_dir
    newer = snapshot_series_check(args) if snap_dir is not None else []
    eng, start, resumed_from = None, 0, None
    t_resume = time.perf_counter()
    if args.resume is not None:
        eng, start, resumed_from = _resume(args, files, sizes, cfg, base_fp)
    if resumed_from is not None:
        drop_newer(newer, resumed_from)
    if out is not None:
        _prepare_out(out, emit, args.emit_changes, start, resumed_from is not None)

    def snap(n: int) -> None:
        if snap_dir is not None:
            from .snapshot import save_numbered

            save_numbered(eng, snap_dir, n,
                          metadata=_replay_meta(args, files, sizes, n, cfg, base_fp))

    def size(e) -> int:
        return e.size if args.relations else e.num_edges

    if eng is None:
        eng, rep = _new_engine(args, emit)
        if args.json:
            d = rep.to_dict()
            d.pop("batch", None)
            d.update(file=str(args.base), **{size_key: size(eng)})
            _json_line("base", **d)
        else:
            print(f"base: {size(eng):,} {size_key}, {eng.count():,} {what} "
                  f"[{rep.seconds:.2f} s]", flush=True)
        snap(0)
    else:
        if args.json:
            _json_line("resume", rows=0, updates=0, triangles=eng.count(), delta=0,
                       seconds=round(time.perf_counter() - t_resume, 6), path="resume",
                       applied=start, **{size_key: size(eng)}, file=str(resumed_from))
        else:
            print(f"resumed from {resumed_from}: {start} of {len(files)} batch files already "
                  f"applied, {size(eng):,} {size_key}, {eng.count():,} {what}", flush=True)
    total_updates = 0
    total_s = 0.0
    todo = list(enumerate(files))[start:]
    for i, path in _progress(todo, len(todo), "replay", not args.json):
        try:
            r = eng.apply(path, batch_id=i, **input_options(args, sign=not args.relations))
        except InputError as e:
            msg = in_file(path.name, e).replace("pass on_conflict='ignore'",
                                                "pass --on-conflict ignore")
            raise InputError(msg) from e
        total_updates += r.updates
        total_s += r.seconds
        if args.emit_changes and r.path != "skipped":
            _write_changes(eng, out, emit, i, r)
        if args.json:
            d = r.to_dict()
            d.update(batch=i, file=str(path))
            _json_line("batch", **d)
        else:
            print(f"{path.name}: {r.updates:,} updates, {what} {r.triangles:,} "
                  f"({r.delta:+,}) [{r.seconds * 1e3:.1f} ms, {r.path}]", flush=True)
        if (i + 1) % args.snapshot_every == 0 or i + 1 == len(files):
            snap(i + 1)

    if args.check:
        expect = _recount(eng, args)
        if expect != eng.count():
            print(f"check failed: maintained {eng.count()} but a static recount of the final "
                  f"{'relations' if args.relations else 'graph'} gives {expect}",
                  file=sys.stderr)
            return 1
        print(f"check: ok, 1 count compared (the final {what} count {eng.count():,} equals a "
              f"static recount of the final {'relations' if args.relations else 'graph'})",
              file=sys.stderr, flush=True)
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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    try:
        return version("gpu_ivm")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return __version__


def build_parser() -> argparse.ArgumentParser:
    from .cli_types import BACKENDS, epsilon_arg, positive_int

    p = argparse.ArgumentParser(prog="gpu-ivm", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="SUBCOMMAND")
    c = sub.add_parser("count", help="count the triangles of an edge-list file",
                       description="Count the triangles of an edge-list file; prints one JSON "
                                   "object (kind, vertices, edges, self_loops, triangles, "
                                   "seconds, file).")
    c.add_argument("graph", help="edge list: SNAP text (.txt/.gz), CSV, Parquet or Arrow IPC")
    c.add_argument("--directed", action="store_true",
                   help="count directed 3-cycles instead (reported as triangles and, as "
                        "before, directed_3_cycles)")
    add_input_options(c)
    c.set_defaults(fn=cmd_count)
    r = sub.add_parser("replay", help="apply a folder of batch files to a base graph",
                       description="Load a base graph and apply a folder of batch files, one "
                                   "batch per file, printing the count after each.")
    r.add_argument("--base", metavar="GRAPH",
                   help="the base graph (any edge-list file); with --relations a table with "
                        "rel, src, dst, mult holding R, S and T")
    r.add_argument("--batches", metavar="DIR",
                   help="folder of batch files (Parquet, CSV or Arrow IPC with src, dst, sign; "
                        "with --relations rel, src, dst, mult), applied in natural file-name "
                        "order: digit runs compare as numbers, so batch-2 comes before "
                        "batch-10")
    r.add_argument("--relations", action="store_true",
                   help="the three-relation form: maintain Q = sum R(a,b)*S(b,c)*T(c,a) over "
                        "bag relations instead of the triangles of one graph")
    r.add_argument("--epsilon", default="auto", type=epsilon_arg,
                   help="IVM^eps exponent in [0, 1] (e.g. 1/2, 1/3, 0.5), or auto (default: "
                        "chosen from the degree distribution at load and at every major "
                        "rebalancing)")
    r.add_argument("--directed", action="store_true", help="maintain directed 3-cycles")
    r.add_argument("--json", action="store_true",
                   help="JSON lines on stdout: one for the base (kind base) or the resumed "
                        "snapshot (kind resume), then one per batch (kind batch)")
    r.add_argument("--on-conflict", choices=["error", "ignore"], default=None,
                   help="inserting a present / deleting an absent edge: fail (default) or skip")
    r.add_argument("--backend", default=None, choices=BACKENDS, type=str.lower,
                   help="cpu, cuda or auto (default: $GPU_IVM_BACKEND or cpu)")
    r.add_argument("--check", action="store_true",
                   help="recount the final graph from scratch and fail (exit 1) on a "
                        "mismatch; prints the result on stderr")
    r.add_argument("--snapshot-dir", default=None, metavar="DIR",
                   help="keep snapshots in DIR (DIR/snapshot-<n>, n = batch files applied, "
                        "or steps closed with --events; "
                        "the newest two are kept); each records a fingerprint of the base and "
                        "the engine options")
    r.add_argument("--snapshot-every", type=positive_int, default=1, metavar="K",
                   help="snapshot after every K batch files (steps with --events; default "
                        "1) and after the last")
    r.add_argument("--resume", default=None, metavar="DIR",
                   help="continue from the newest snapshot in DIR (or from the snapshot folder "
                        "DIR/snapshot-<n> itself), skipping the batch files it holds; the base, "
                        "batch list and options must match the snapshot's. No snapshot in DIR: "
                        "start from the beginning (noted on stderr)")
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
    r.add_argument("--results-from", choices=["auto", "stores", "views"], default="auto",
                   help="where the --emit results come from: the count's own stores "
                        "(undirected graphs; the triangles are listed "
                        "when written), paper 001's views, or auto (the stores where they "
                        "serve); see docs/queries.md")
    r.add_argument("--emit-changes", action="store_true",
                   help="also write each applied batch's changed rows of every --emit result, "
                        "with old and new values, to DIR/changes/<result>/batch-<NNNNNN>."
                        "parquet (NNNNNN = batch number); a fresh run needs a folder without "
                        "change files, --resume keeps those of the batches already applied")
    add_input_options(r)
    r.add_argument("--mode", choices=["general", "insert-only", "auto"], default="general",
                   help="general (default); insert-only: a stream without deletes (graphs, or "
                        "--relations with positive mult), kept without partitions or views "
                        "(a delete fails); auto: insert-only until "
                        "the first delete, then general (see docs/modes.md)")
    w = r.add_argument_group("sliding window (instead of --base/--batches)")
    w.add_argument("--events", default=None, metavar="FILE",
                   help="timestamped edges (SNAP temporal text src dst time, CSV or Parquet "
                        "with src, dst, time): replay them as a sliding window, one line per "
                        "step; needs --window and --step")
    w.add_argument("--window", default=None, metavar="SPAN",
                   help="window length: an edge is kept SPAN after its last arrival (30d, 12h, "
                        "3600; plain integers are time units)")
    w.add_argument("--step", default=None, metavar="SPAN",
                   help="step length: step k ends at t_min + k*SPAN")
    w.add_argument("--time-col", default=None, metavar="NAME",
                   help="name of the time column in CSV/Parquet events (default time)")
    w.add_argument("--offline", action="store_true",
                   help="evaluate the whole log at once (lifespans + one static pass) instead "
                        "of step by step; same counts")
    r.set_defaults(fn=cmd_replay, check_args=lambda a: _check_replay_args(r, a))
    d = sub.add_parser("demo", help="run the embedded default workload",
                       description="Generate an R-MAT graph, apply mixed insert/delete batches "
                                   "and compare the final count with a recount.")
    d.add_argument("--scale", type=positive_int, default=18, metavar="S",
                   help="R-MAT scale: 2^scale vertices, 16 edges per vertex (default 18)")
    d.add_argument("--batch-size", type=positive_int, default=1000, metavar="N",
                   help="updates per batch (default 1000)")
    d.add_argument("--batches", type=positive_int, default=30, metavar="N",
                   help="number of batches (default 30)")
    d.add_argument("--epsilon", default="auto", type=epsilon_arg,
                   help="IVM^eps exponent in [0, 1], or auto (default)")
    d.set_defaults(fn=cmd_demo)
    from .spark_glue.cli import add_parser as add_spark_replay

    add_spark_replay(sub)
    from .cq.cli import add_parser as add_query
    add_query(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    check = getattr(args, "check_args", None)
    if check is not None:
        check(args)
    try:
        with show_input_notes():
            return args.fn(args)
    except InputError as e:
        print(f"gpu-ivm: error: {e}", file=sys.stderr)
        return 2
    except GpuIvmError as e:
        print(f"gpu-ivm: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except OSError as e:  # a file system failure (disk full, permissions): one line
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"gpu-ivm: error: {e.strerror or e}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpu-ivm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
