"""``replay``: a mixed insert/delete stream over an R-MAT graph, replayed by every system.

For each batch size B the stream (``workloads.mixed_stream(scale, batch_size=B, ...)``, same
seed, so the same base graph for every B) is generated once, up front and untimed, and the
expected final count is computed with the static counter on ``stream.final_edges()``. Then each
system loads the base graph from scratch and applies every batch in order; each system's final
count is checked against the expected one. Sampled systems (recount) time only some batches but
apply all of them.
"""

from __future__ import annotations

import gc
import time
from collections import Counter

import numpy as np

from bench import machine, systems
from bench.context import RunContext
from bench.stats import evenly_spaced, summarize
from gpu_ivm.static import count_triangles_arrays
from gpu_ivm.workloads import mixed_stream

NAME = "replay"
TITLE = "Replay of a mixed insert/delete stream (R-MAT)"


def _warmup(ctx: RunContext, names) -> None:
    """Compile the Numba kernels of every system on a small stream (results discarded)."""
    t = time.perf_counter()
    for bs in (100, 3000):
        st = mixed_stream(12, batch_size=bs, n_batches=2, seed=3)
        batches = list(st.batches())
        for name in names:
            s = systems.make(name)
            s.load(st.base_src, st.base_dst)
            for b in batches:
                s.apply(b)
            s.count()
            s.close()
    ctx.log(f"[replay] warm-up (Numba compilation) {time.perf_counter() - t:.1f} s")


def _run_system(ctx: RunContext, name: str, stream, batches: list[dict], expected: int,
                n_timed: int | None, batch_size: int) -> dict:
    sys_ = systems.make(name)
    la0 = machine.loadavg()
    timed = (evenly_spaced(len(batches), n_timed) if sys_.sampled
             else set(range(len(batches))))
    secs, upd, paths, idx = [], [], [], []
    t_wall = time.perf_counter()
    with machine.PeakRSS() as mem:
        load_s = sys_.load(stream.base_src, stream.base_dst)
        it = ctx.bar(enumerate(batches), desc=f"replay B={batch_size:,} {name}",
                     total=len(batches))
        for i, b in it:
            if i in timed:
                secs.append(sys_.apply(b))
                upd.append(int(len(b["src"])))
                paths.append(sys_.info().get("path"))
                idx.append(i)
            else:
                sys_.skip(b)
        final = sys_.count()
    wall = time.perf_counter() - t_wall
    la1 = machine.loadavg()
    rec = {
        "kind": "result", "scenario": NAME, "record": "system",
        "system": name, "label": sys_.label, "family": sys_.family, **sys_.describe(),
        "batch_size": batch_size, "n_batches": len(batches), "timed_batches": len(secs),
        "load_s": load_s, **summarize(secs, upd),
        "batch_seconds": [float(f"{s:.6g}") for s in secs], "timed_index": idx,
        "paths": dict(Counter(p for p in paths if p is not None)),
        "path_per_batch": paths if any(p is not None for p in paths) else None,
        "final_count": final, "expected_count": expected, "ok": final == expected,
        "peak_rss_bytes": mem.peak_bytes, "peak_rss_scoped": mem.scoped,
        "process_maxrss_bytes": machine.process_maxrss_bytes(),
        "loadavg_start": la0, "loadavg_end": la1, "wall_s": wall,
    }
    sys_.close()
    del sys_
    gc.collect()
    return rec


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.replay
    if cfg.warmup:
        _warmup(ctx, cfg.systems)
    graph_done = False
    for batch_size, n_batches in cfg.batches.items():
        t = time.perf_counter()
        stream = mixed_stream(cfg.scale, batch_size=batch_size, n_batches=n_batches,
                              seed=cfg.seed)
        batches = list(stream.batches())
        fs, fd = stream.final_edges()
        expected = count_triangles_arrays(fs, fd)
        ctx.log(f"[replay] B={batch_size:,}: {n_batches} batches generated, expected final "
                f"count {expected:,} ({time.perf_counter() - t:.1f} s, untimed)")
        if not graph_done:
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                base_tri = count_triangles_arrays(stream.base_src, stream.base_dst)
                times.append(time.perf_counter() - t0)
            verts = np.unique(np.concatenate([stream.base_src, stream.base_dst])).shape[0]
            ctx.emit({"kind": "result", "scenario": NAME, "record": "graph",
                      "scale": cfg.scale, "seed": cfg.seed, "pool_edges": len(stream.pool_src),
                      "base_edges": int(stream.n_base), "base_vertices": int(verts),
                      "base_triangles": int(base_tri), "static_count_best_s": min(times),
                      "static_count_s": times, "warmup": cfg.warmup,
                      "loadavg": machine.loadavg()})
            ctx.log(f"[replay] base graph: {stream.n_base:,} edges, {base_tri:,} triangles, "
                    f"static count {min(times):.2f} s (best of 3)")
            graph_done = True
        for name in cfg.systems:
            rec = _run_system(ctx, name, stream, batches, expected,
                              cfg.recount_timed.get(batch_size), batch_size)
            rec.update(scale=cfg.scale, seed=cfg.seed)
            ctx.emit(rec)
            ctx.log(f"[replay] B={batch_size:,} {name:24s} load {rec['load_s']:6.1f} s  "
                    f"{rec['updates_per_s']:12,.0f} upd/s  median {rec['median_s'] * 1e3:8.1f} ms"
                    f"  p99 {rec['p99_s'] * 1e3:8.1f} ms  paths {rec['paths']}  "
                    f"{'ok' if rec['ok'] else 'WRONG COUNT'}")
        del stream, batches, fs, fd
        gc.collect()
