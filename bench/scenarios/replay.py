"""``replay``: a mixed insert/delete stream over an R-MAT graph, replayed by every system.

For each batch size B the stream (``workloads.mixed_stream(scale, batch_size=B, ...)``, same
seed, so the same base graph for every B) is generated once, up front and untimed, and the
oracle's counts (the static counter on the current edge set, maintained independently) are
computed after a few sampled batches and the last one. Then each system loads the base graph
from scratch and applies every batch in order, under a time cap; its counts after the sampled
batches and the last one are checked against the oracle's. Sampled systems (the recounts) time
only some batches but apply all of them.
"""

from __future__ import annotations

import gc
import time

import numpy as np

from bench import drive, machine, systems
from bench.context import RunContext
from bench.edgeset import check_points, oracle_counts
from gpu_ivm.static import count_triangles_arrays
from gpu_ivm.workloads import mixed_stream

NAME = "replay"
TITLE = "Replay of a mixed insert/delete stream (R-MAT)"


def warmup(ctx: RunContext, names, tag: str = "replay") -> None:
    """Compile the Numba kernels of every in-process system on a small stream (discarded)."""
    t = time.perf_counter()
    for bs in (100, 3000):
        st = mixed_stream(12, batch_size=bs, n_batches=2, seed=3)
        batches = list(st.batches())
        for name in names:
            cls = systems.system_class(name)
            if getattr(cls, "external", False) or cls.unavailable():
                continue
            if name == "spark_driver":
                continue
            s = systems.make(name)
            try:
                s.load(st.base_src, st.base_dst)
                for b in batches:
                    s.apply(b)
                s.count()
            except Exception as e:  # noqa: BLE001 - the measured run reports it properly
                ctx.log(f"[{tag}] warm-up of {name} failed: {type(e).__name__}: {e}")
            s.close()
    ctx.log(f"[{tag}] warm-up (Numba compilation) {time.perf_counter() - t:.1f} s")


def rmat_workload(scale: int, batch_size: int, n_batches: int, seed: int,
                  key: str | None = None) -> drive.Workload:
    stream = mixed_stream(scale, batch_size=batch_size, n_batches=n_batches, seed=seed)
    batches = list(stream.batches())
    at = check_points(len(batches))
    expected = oracle_counts(stream.base_src, stream.base_dst, batches, at)
    fs, fd = stream.final_edges()
    final = count_triangles_arrays(fs, fd)  # a second, independent route to the final count
    if batches and expected[len(batches) - 1] != final:
        raise AssertionError("oracle disagrees with stream.final_edges()")
    return drive.Workload(key or f"rmat-{scale}", stream.base_src, stream.base_dst, batches,
                          expected, int(stream.n_base), batch_size,
                          meta={"scale": scale, "seed": seed})


def graph_record(scale: int, seed: int, wl: drive.Workload, warm: bool) -> dict:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        base_tri = count_triangles_arrays(wl.base_src, wl.base_dst)
        times.append(time.perf_counter() - t0)
    verts = np.unique(np.concatenate([wl.base_src, wl.base_dst])).shape[0]
    return {"kind": "result", "scenario": NAME, "record": "graph", "scale": scale,
            "seed": seed, "base_edges": int(wl.size_edges), "base_vertices": int(verts),
            "base_triangles": int(base_tri), "static_count_best_s": min(times),
            "static_count_s": times, "warmup": warm, "loadavg": machine.loadavg()}


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.replay
    if cfg.warmup:
        warmup(ctx, cfg.systems)
        ctx.shared["warm"] = True
    graph_done = False
    plan = [(cfg.scale, B, n) for B, n in sorted(cfg.batches.items())]
    plan += [(s, B, n) for s, bs in sorted(cfg.also.items()) for B, n in sorted(bs.items())]
    for scale, batch_size, n_batches in plan:
        t = time.perf_counter()
        wl = rmat_workload(scale, batch_size, n_batches, cfg.seed)
        ctx.log(f"[replay] scale {scale}, B={batch_size:,}: {n_batches} batches generated, "
                f"oracle counts at {sorted(wl.expected)} "
                f"({time.perf_counter() - t:.1f} s, untimed)")
        if not graph_done:
            g = ctx.emit(graph_record(cfg.scale, cfg.seed, wl, cfg.warmup))
            ctx.log(f"[replay] base graph: {g['base_edges']:,} edges, {g['base_triangles']:,} "
                    f"triangles, static count {g['static_count_best_s']:.2f} s (best of 3)")
            graph_done = True
        for name in cfg.systems:
            rec = drive.run_system(ctx, name, wl, n_timed=cfg.recount_timed.get(batch_size),
                                   cap_s=cfg.cap_s, desc=f"replay B={batch_size:,} {name}")
            rec.update(scenario=NAME, record="system")
            rec = ctx.emit(rec)
            ctx.shared.setdefault("rmat", []).append(rec)
            drive.log_line(ctx, NAME, rec)
        del wl
        gc.collect()
