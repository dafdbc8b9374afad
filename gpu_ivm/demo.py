"""The embedded default workload of ``gpu-ivm demo`` (and ``make demo``).

A deterministic R-MAT graph (Graph500 parameters a, b, c = 0.57, 0.19, 0.19, edge factor 16)
is loaded, then a stream of mixed insert/delete batches is applied; after each batch the exact
triangle count is printed. At the end the count is checked against a from-scratch recount, and
the update rate is compared with recounting the graph after every batch. The first load of a
process loads (or, with a cold Numba cache, compiles) the kernels once (:mod:`gpu_ivm.warmup`);
that time is part of the load, printed apart, and not in the update rate.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import warmup
from .graph_engine import GraphEngine
from .static import count_triangles_arrays
from .workloads import mixed_stream


def run_demo(scale: int = 18, batch_size: int = 1000, n_batches: int = 30,
             epsilon: str = "auto", seed: int = 1, out=None) -> dict:
    """Run the demo workload and print a report; returns the summary as a dict."""
    out = out or sys.stdout

    def say(msg: str) -> None:
        print(msg, file=out, flush=True)

    t = time.perf_counter()
    stream = mixed_stream(scale, batch_size=batch_size, n_batches=n_batches, seed=seed)
    say(f"R-MAT scale {scale} (Graph500 parameters, edge factor 16): "
        f"{stream.n_base:,} base edges, {n_batches} batches of {batch_size:,} mixed "
        f"inserts/deletes  [generated in {time.perf_counter() - t:.1f} s]")
    eng = GraphEngine(epsilon=epsilon)
    warm0 = sum(warmup.seconds.values())
    rep = eng.load((stream.base_src, stream.base_dst))
    warm_s = sum(warmup.seconds.values()) - warm0
    chosen = f"auto -> {eng.epsilon}" if eng.epsilon_auto else f"{eng.epsilon}"
    say(f"loaded: {eng.num_edges:,} edges, {eng.num_vertices:,} vertices, "
        f"{eng.count():,} triangles, epsilon = {chosen}  [{rep.seconds:.1f} s, of which "
        f"{warm_s:.1f} s loading the compiled kernels, once per process]")
    count_triangles_arrays(stream.base_src[:64], stream.base_dst[:64])  # loads its kernels
    t = time.perf_counter()
    count_triangles_arrays(stream.base_src, stream.base_dst)
    recount_s = time.perf_counter() - t
    say(f"one static recount of the base graph takes {recount_s * 1e3:.0f} ms")
    times = []
    for i, batch in enumerate(stream.batches()):
        r = eng.apply(batch)
        times.append(r.seconds)
        say(f"batch {i:3d}: {r.updates:6,} updates  triangles {r.triangles:>13,}  "
            f"({r.delta:+,})  {r.seconds * 1e3:7.1f} ms")
    total = float(np.sum(times))
    ups = n_batches * batch_size / total if total else float("inf")
    fs, fd = stream.final_edges()
    t = time.perf_counter()
    expect = count_triangles_arrays(fs, fd)
    final_recount_s = time.perf_counter() - t
    ok = expect == eng.count()
    per_batch = total / max(n_batches, 1)
    speedup = ((recount_s + final_recount_s) / 2) / per_batch if per_batch else float("inf")
    say(f"\n{n_batches * batch_size:,} updates in {total:.2f} s: {ups:,.0f} updates/s, "
        f"median batch {np.median(times) * 1e3:.1f} ms (batches only: the load and the "
        "one-time kernel loading are not counted)")
    say(f"speed-up over recounting after each batch: {speedup:,.1f}x")
    say(f"final count {eng.count():,} vs recount {expect:,}: {'ok' if ok else 'MISMATCH'}")
    return {"updates_per_second": ups, "speedup": speedup, "ok": ok, "warmup_seconds": warm_s,
            "epsilon": str(eng.epsilon), "first_batch_seconds": times[0] if times else 0.0,
            "triangles": eng.count(), "median_batch_seconds": float(np.median(times))}
