"""Where the time of a batch goes: cProfile of the delta path on the R-MAT mixed stream.

    python -m bench.profile_batch [--scale 18] [--batch-size 1000] [--batches 20] [--epsilon 1/2]
                                  [--row-tables 64] [--stream celebrity]

``--stream celebrity`` profiles celebrity churn over the same R-MAT graph instead
(``gpu_ivm.workloads.celebrity_churn`` with its default celebrities).

Loads the base graph, applies one batch untimed, then profiles the next ``--batches`` batches
and prints the functions by own time, in milliseconds per batch and as a share of the batch.
Then applies ``--batches`` more in the engine's profile mode (``gpu_ivm.engine.PROFILE_WORK``)
and prints the count kernel's work: adjacency entries and hash-table slots read per update,
and their ratio to Σ min(deg u, deg v) (the min-degree bound of an intersection).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_batch", description=__doc__)
    p.add_argument("--scale", type=int, default=18)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--epsilon", default="1/2")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--row-tables", type=int, default=None, metavar="N",
                   help="keep hash tables of store rows of N tuples or more "
                        "(gpu_ivm.partition.PartRel.index_min; default: the engine's)")
    p.add_argument("--stream", choices=["rmat", "celebrity"], default="rmat",
                   help="the R-MAT mixed stream (default) or celebrity churn over R-MAT")
    args = p.parse_args(argv)

    from gpu_ivm import GraphEngine
    from gpu_ivm import engine as engine_mod
    from gpu_ivm.partition import PartRel

    if args.row_tables is not None:
        PartRel.index_min = args.row_tables or None
    from gpu_ivm.workloads import celebrity_churn, mixed_stream

    n_batches = 2 * args.batches + 1
    if args.stream == "celebrity":  # the default celebrities, their degree within the graph
        stream = celebrity_churn(args.scale, batch_size=args.batch_size, n_batches=n_batches,
                                 celebrity_degree=min(40_000, 1 << args.scale), seed=1)
    else:
        stream = mixed_stream(args.scale, batch_size=args.batch_size, n_batches=n_batches,
                              seed=1)
    eng = GraphEngine(epsilon=args.epsilon, adaptive=False)
    eng.load((stream.base_src, stream.base_dst))
    batches = list(stream.batches())
    eng.apply(batches[0])
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for b in batches[1 : args.batches + 1]:
        eng.apply(b)
    prof.disable()
    total = (time.perf_counter() - t0) / args.batches
    stats = pstats.Stats(prof).stats
    rows = []
    for (file, _line, name), (_, ncalls, tottime, _, _) in stats.items():
        short = file.rsplit("/", 2)[-2:]
        rows.append((tottime / args.batches, ncalls / args.batches, f"{'/'.join(short)}:{name}"))
    rows.sort(reverse=True)
    name = "celebrity churn on R-MAT" if args.stream == "celebrity" else "R-MAT"
    print(f"{name} scale {args.scale}, B = {args.batch_size}, epsilon = {args.epsilon}: "
          f"{total * 1e3:.2f} ms per batch (profiled)")
    print(f"{'ms/batch':>9} {'share':>6} {'calls':>6}  function")
    for ms, calls, name in rows[: args.top]:
        print(f"{ms * 1e3:9.2f} {ms / total:6.1%} {calls:6.1f}  {name}")
    engine_mod.PROFILE_WORK = True
    try:
        eng.work = dict.fromkeys(eng.work, 0)
        for b in batches[args.batches + 1 :]:
            eng.apply(b)
    finally:
        engine_mod.PROFILE_WORK = False
    w = eng.work
    if w["updates"]:
        per = w["entries"] / w["updates"]
        bound = w["min_degree_sum"] / w["updates"]
        ratio = w["entries"] / max(w["min_degree_sum"], 1)
        print(f"count kernel work over {w['updates']} updates: {per:.1f} entries read per "
              f"update, mean min(deg u, deg v) = {bound:.1f}, ratio {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
