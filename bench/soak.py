"""Soak test: a long random insert/delete stream with periodic exact checks and memory sampling.

``python -m bench.soak [--minutes M] [--check-every K] [--scale S] [--batch-size B]``

Runs a :func:`gpu_ivm.workloads.mixed_stream` (R-MAT pool, half inserts / half deletes, so
the graph size stays level) through a :class:`~gpu_ivm.GraphEngine` for ``M`` minutes. Every
``K`` batches it

* runs ``engine.check_invariants()`` (partitions, size invariant, views = definitions);
* recounts the triangles of the current edge set with
  :func:`gpu_ivm.static.count_triangles_arrays`, the edge set being tracked independently of
  the engine (a Python set updated from the batches), and compares it with ``engine.count()``
  and the edge count with ``engine.num_edges``;
* samples the process RSS (``/proc/self/statm``) and the engine's state size (the bytes of
  every NumPy array reachable from its relations, views and encoder);
* every ``--snapshot-every`` checks, saves a snapshot, restores it and compares the count.

Memory growth that the state size does not explain is
``(RSS - RSS₀) - (peak state - state₀)``, with index 0 the first check (after a warm-up
snapshot round trip) and the peak taken over the samples so far (memory freed by a shrinking
state is not always returned to the OS, so the state's high-water mark is what explains RSS).
The run fails (exit 1) on any count, edge or invariant mismatch, or when the unexplained
growth at the end exceeds the tolerance ``max(--tolerance-mb, 10 % of RSS₀)`` (default
64 MiB). A summary table is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process (``/proc/self/statm``; ``resource`` elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def state_bytes(engine) -> int:
    """Bytes of every NumPy array reachable from the engine's relations, views and encoder
    (each array counted once), plus a rough 64 bytes per string key."""
    seen: set[int] = set()
    total = 0
    stack: list = [engine.rels, engine.views, engine.encoder]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if isinstance(base, np.ndarray) and id(base) not in seen and base is not obj:
                seen.add(id(base))
                total += base.nbytes
            elif base is obj:
                total += obj.nbytes
        elif isinstance(obj, (list, tuple)):
            stack.extend(x for x in obj if not isinstance(x, (int, float, str)))
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif type(obj).__module__.startswith("gpu_ivm") and isinstance(
                getattr(obj, "__dict__", None), dict):
            stack.extend(obj.__dict__.values())
    if getattr(engine.encoder, "kind", None) == "str":
        total += 64 * len(engine.encoder)
    return total


def _fmt_row(cols: list, widths: list[int]) -> str:
    return "  ".join(str(c).rjust(w) for c, w in zip(cols, widths))


def main(argv: list[str] | None = None) -> int:
    """Run the soak; returns the process exit code (0 ok, 1 mismatch or unexplained growth).

    Examples
    --------
    >>> main(["--minutes", "0.02", "--scale", "8", "--batch-size", "50", "--check-every",
    ...       "5", "--quiet"])
    0
    """
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    p.add_argument("--check-every", type=int, default=50, metavar="K",
                   help="invariants + recount + memory sample every K batches (default 50)")
    p.add_argument("--scale", type=int, default=15, help="R-MAT scale of the pool (default 15)")
    p.add_argument("--batch-size", type=int, default=1000, help="rows per batch (default 1000)")
    p.add_argument("--epsilon", default="1/2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--snapshot-every", type=int, default=5, metavar="C",
                   help="snapshot round trip every C checks (0: never; default 5)")
    p.add_argument("--tolerance-mb", type=float, default=64.0,
                   help="allowed unexplained RSS growth in MiB (or 10%% of RSS₀ if larger)")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    args = p.parse_args(argv)

    from gpu_ivm import GraphEngine, snapshot
    from gpu_ivm.static import count_triangles_arrays
    from gpu_ivm.workloads import mixed_stream

    say = (lambda *a, **k: None) if args.quiet else print
    tmp = tempfile.mkdtemp(prefix="soak-")
    if args.snapshot_every:  # warm-up: load the snapshot code paths before the memory baseline
        warm = GraphEngine()
        warm.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
        snapshot.save(warm, os.path.join(tmp, "warm"))
        snapshot.load(os.path.join(tmp, "warm"))
        del warm
    stream = mixed_stream(args.scale, batch_size=args.batch_size, n_batches=10**9,
                          seed=args.seed)
    eng = GraphEngine(epsilon=args.epsilon)
    t0 = time.perf_counter()
    eng.load((stream.base_src, stream.base_dst))
    edges = {(min(a, b) << 32) | max(a, b) for a, b in zip(stream.base_src.tolist(),
                                                          stream.base_dst.tolist())}
    say(f"soak: R-MAT scale {args.scale}, {len(edges):,} base edges, {eng.count():,} "
        f"triangles, load {time.perf_counter() - t0:.2f} s; batches of {args.batch_size} "
        f"for {args.minutes} min, checks every {args.check_every} batches")
    widths = [7, 7, 9, 11, 10, 9, 8, 8, 8, 8]
    head = ["batch", "min", "edges", "triangles", "upd/s", "check", "RSS MB", "state MB",
            "unexpl", "max"]
    say(_fmt_row(head, widths))
    samples = []
    failures: list[str] = []
    deadline = t0 + 60 * args.minutes
    n = 0
    upd = 0
    busy = 0.0
    rss0 = st0 = None
    st_peak = 0
    max_unexpl = 0
    try:
        for batch in stream.batches():
            rep = eng.apply(batch, batch_id=n)
            busy += rep.seconds
            upd += rep.updates
            for a, b, s in zip(batch["src"].tolist(), batch["dst"].tolist(),
                               batch["sign"].tolist()):
                k = (min(a, b) << 32) | max(a, b)
                if s > 0:
                    edges.add(k)
                else:
                    edges.discard(k)
            n += 1
            done = time.perf_counter() >= deadline
            if n % args.check_every and not done:
                continue
            verdict = "ok"
            try:
                eng.check_invariants()
            except AssertionError as e:
                verdict = "INVARIANT"
                failures.append(f"batch {n - 1}: {e}")
            ks = np.fromiter(edges, np.int64, len(edges))
            expect = count_triangles_arrays(ks >> 32, ks & 0xFFFFFFFF)
            if expect != eng.count() or len(edges) != eng.num_edges:
                verdict = "MISMATCH"
                failures.append(f"batch {n - 1}: count {eng.count()} vs recount {expect}, "
                                f"edges {eng.num_edges} vs {len(edges)}")
            n_checks = len(samples) + 1
            if args.snapshot_every and n_checks % args.snapshot_every == 0:
                snapshot.save(eng, os.path.join(tmp, "s"))
                back = snapshot.load(os.path.join(tmp, "s"))
                if back.count() != eng.count():
                    verdict = "SNAPSHOT"
                    failures.append(f"batch {n - 1}: restored count {back.count()}")
                del back
                verdict += "+snap"
            rss, stb = rss_bytes(), state_bytes(eng)
            if rss0 is None:
                rss0, st0 = rss, stb
            st_peak = max(st_peak, stb)
            unexpl = (rss - rss0) - (st_peak - st0)
            max_unexpl = max(max_unexpl, unexpl)
            row = [n - 1, f"{(time.perf_counter() - t0) / 60:.1f}", f"{len(edges):,}",
                   f"{eng.count():,}", f"{upd / busy:,.0f}" if busy else "-", verdict,
                   f"{rss / 2**20:.0f}", f"{stb / 2**20:.1f}", f"{unexpl / 2**20:+.1f}",
                   f"{max_unexpl / 2**20:.1f}"]
            samples.append(row)
            say(_fmt_row(row, widths), flush=True)
            if done:
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tol = max(args.tolerance_mb * 2**20, 0.10 * (rss0 or 0))
    st_peak = max(st_peak, state_bytes(eng))
    final_unexpl = (rss_bytes() - rss0) - (st_peak - st0) if rss0 is not None else 0
    if final_unexpl > tol:
        failures.append(f"unexplained RSS growth {final_unexpl / 2**20:.1f} MiB > tolerance "
                        f"{tol / 2**20:.1f} MiB")
    say(f"\nsummary: {n:,} batches, {upd:,} updates in {(time.perf_counter() - t0) / 60:.1f} "
        f"min ({upd / busy:,.0f} updates/s in apply), {len(samples)} checks "
        f"({sum('snap' in r[5] for r in samples)} with a snapshot round trip); RSS "
        f"{(rss0 or 0) / 2**20:.0f} -> {rss_bytes() / 2**20:.0f} MiB, state "
        f"{(st0 or 0) / 2**20:.1f} -> {state_bytes(eng) / 2**20:.1f} MiB (peak "
        f"{st_peak / 2**20:.1f}), unexplained growth "
        f"{final_unexpl / 2**20:+.1f} MiB (max {max_unexpl / 2**20:.1f}, tolerance "
        f"{tol / 2**20:.0f} MiB)")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    say("verdict:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
