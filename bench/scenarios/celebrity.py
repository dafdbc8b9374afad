"""``celebrity``: celebrity churn, the adversarial stream of first-order IVM, replayed by every
system.

The workload (``workloads.celebrity_churn``): an R-MAT graph plus a few celebrity vertices,
each joined to many R-MAT vertices (degree far above √N), and batches that toggle edges among
the celebrities (a present edge is deleted, an absent one inserted), so every update joins two
vertices of very high degree. Generated once, up front and untimed, with the oracle's counts
(the static counter on the edge set maintained by the runner) after a few sampled batches and
the last one; then each system loads the base graph and applies every batch, as in ``replay``.
"""

from __future__ import annotations

import time

from bench import drive
from bench.context import RunContext
from bench.edgeset import check_points, oracle_counts
from bench.scenarios.replay import warmup
from gpu_ivm.static import count_triangles_arrays
from gpu_ivm.workloads import celebrity_churn

NAME = "celebrity"
TITLE = "Celebrity churn: toggling edges among vertices of degree far above √N"


def churn_workload(cfg) -> drive.Workload:
    st = celebrity_churn(cfg.scale, n_celebrities=cfg.n_celebrities,
                         celebrity_degree=cfg.celebrity_degree, batch_size=cfg.batch_size,
                         n_batches=cfg.n_batches, seed=cfg.seed)
    batches = list(st.batches())
    expected = oracle_counts(st.base_src, st.base_dst, batches, check_points(len(batches)))
    fs, fd = st.final_edges()
    if batches and expected[len(batches) - 1] != count_triangles_arrays(fs, fd):
        raise AssertionError("oracle disagrees with the stream's final_edges()")
    return drive.Workload(f"rmat-{cfg.scale}+{cfg.n_celebrities}x{cfg.celebrity_degree}",
                          st.base_src, st.base_dst, batches, expected, st.n_base,
                          cfg.batch_size,
                          meta={"scale": cfg.scale, "seed": cfg.seed,
                                "n_celebrities": cfg.n_celebrities,
                                "celebrity_degree": cfg.celebrity_degree})


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.celebrity
    if ctx.profile.replay.warmup and not ctx.shared.get("warm"):
        warmup(ctx, cfg.systems, NAME)
    t = time.perf_counter()
    wl = churn_workload(cfg)
    ctx.log(f"[{NAME}] {wl.key}: {wl.size_edges:,} base edges, {len(wl.batches)} batches of "
            f"{cfg.batch_size:,} toggles ({time.perf_counter() - t:.1f} s, untimed)")
    for name in cfg.systems:
        rec = drive.run_system(ctx, name, wl, n_timed=cfg.recount_timed, cap_s=cfg.cap_s,
                               desc=f"{NAME} {name}")
        rec.update(scenario=NAME, record="system")
        drive.log_line(ctx, NAME, ctx.emit(rec))
