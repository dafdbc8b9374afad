"""``scaling``: throughput vs graph size, R-MAT at several scales, one batch size (B = 10³).

Same stream shape as ``replay`` (``mixed_stream(scale, batch_size=B, seed)``). A (system,
scale) that ``replay`` measured in the same run at the same B is copied from it (record
``from_replay``) instead of being run twice. A scale is skipped, with the reason in the
record, when gpu_ivm ε=½'s peak memory at the previous scale, times the growth of the edge
count, would not fit in the available memory.
"""

from __future__ import annotations

import gc
import time

from bench import drive, machine
from bench.context import RunContext
from bench.scenarios.replay import rmat_workload, warmup

NAME = "scaling"
TITLE = "Throughput vs graph size (R-MAT, fixed batch size)"


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.scaling
    B = cfg.batch_size
    from_replay = {(r.get("scale"), r["system"]): r for r in ctx.shared.get("rmat", [])
                   if r.get("batch_size") == B}
    if ctx.profile.replay.warmup and not from_replay:
        warmup(ctx, cfg.systems, NAME)
    prev_peak: tuple[int, int] | None = None  # (edges, peak bytes) of gpu_ivm ε=½
    for scale in cfg.scales:
        reuse = {s: from_replay[(scale, s)] for s in cfg.systems if (scale, s) in from_replay}
        est_edges = 16 * (1 << scale) * 0.9
        if prev_peak and len(reuse) < len(cfg.systems):
            est = prev_peak[1] * est_edges / prev_peak[0]
            avail = machine.meminfo_bytes("MemAvailable") or 0
            if est > cfg.mem_share * avail:
                ctx.emit({"kind": "result", "scenario": NAME, "record": "skipped_scale",
                          "scale": scale, "batch_size": B,
                          "detail": f"not run: gpu_ivm ε=½ would need about {est / 2**30:.0f} "
                                    f"GiB (peak {prev_peak[1] / 2**30:.1f} GiB at "
                                    f"{prev_peak[0]:,} edges, scaled by the edge count); "
                                    f"{avail / 2**30:.0f} GiB available"})
                ctx.log(f"[scaling] scale {scale} skipped (memory estimate {est / 2**30:.0f} GiB)")
                continue
        t = time.perf_counter()
        wl = None
        if len(reuse) < len(cfg.systems):
            wl = rmat_workload(scale, B, cfg.n_batches, cfg.seed)
            ctx.log(f"[scaling] scale {scale}: {wl.size_edges:,} edges, {cfg.n_batches} batches "
                    f"of {B:,} ({time.perf_counter() - t:.1f} s, untimed)")
        for name in cfg.systems:
            if name in reuse:
                rec = {k: v for k, v in reuse[name].items() if k not in ("run_id",)}
                rec.update(scenario=NAME, record="system", from_replay=True)
            else:
                rec = drive.run_system(ctx, name, wl, n_timed=cfg.recount_timed, cap_s=cfg.cap_s,
                                       desc=f"scaling 2^{scale} {name}")
                rec.update(scenario=NAME, record="system")
            rec = ctx.emit(rec)
            drive.log_line(ctx, NAME, rec)
            if name == "gpu_ivm_eps_half" and rec.get("peak_rss_bytes"):
                prev_peak = (rec["size_edges"], rec["peak_rss_bytes"])
        del wl
        gc.collect()
