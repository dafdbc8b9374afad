"""Command line: ``gpu-ivm`` (also ``python -m gpu_ivm``).

Subcommands
-----------
count GRAPH          triangles of an edge-list file, as one JSON object
replay               load a base graph and apply a folder of batch files in name order
demo                 the embedded default workload (R-MAT graph + mixed batches)

Exit codes: 0 success, 2 bad input (message on stderr), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
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


def cmd_replay(args) -> int:
    from .graph_engine import GraphEngine
    from .io import list_batch_files

    files = list_batch_files(args.batches)
    eng = GraphEngine(directed=args.directed, epsilon=args.epsilon, backend=args.backend,
                      on_conflict=args.on_conflict)
    rep = eng.load(args.base)
    if args.json:
        d = rep.to_dict()
        d.update(batch="base", file=str(args.base))
        print(json.dumps(d), flush=True)
    else:
        print(f"base: {eng.num_edges:,} edges, {eng.count():,} "
              f"{'directed 3-cycles' if args.directed else 'triangles'} "
              f"[{rep.seconds:.2f} s]", flush=True)
    total_updates = 0
    total_s = 0.0
    for i, path in enumerate(_progress(files, len(files), "replay", not args.json)):
        try:
            r = eng.apply(path)
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
        print(f"{len(files)} batches, {total_updates:,} updates in {total_s:.2f} s "
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
    r.set_defaults(fn=cmd_replay)
    d = sub.add_parser("demo", help="run the embedded default workload")
    d.add_argument("--scale", type=int, default=18, help="R-MAT scale (default 18)")
    d.add_argument("--batch-size", type=int, default=1000)
    d.add_argument("--batches", type=int, default=30)
    d.add_argument("--epsilon", default="1/2")
    d.set_defaults(fn=cmd_demo)
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
