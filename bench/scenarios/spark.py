"""``spark``: gpu_ivm behind the Spark glue (the ``gpu-ivm spark-replay`` driver path) versus
the plain engine, on the same R-MAT workload.

Per batch the Spark path builds a DataFrame from the batch (``create_frame``), validates it on
the executors (``ingest``: ``mapInArrow``), collects it to the driver as Arrow
(``collect_arrow``) and applies it with a ``DriverEngine`` (in memory). Its time per batch is
split into the engine's part and the hand-off (everything before the engine); the plain engine
(``GraphEngine(epsilon="1/2")``) runs the same batches. The Spark session is started once
(start-up time reported apart) and its Python workers are started before timing.
"""

from __future__ import annotations

import gc

from bench import drive, peers
from bench.context import RunContext
from bench.scenarios.replay import rmat_workload, warmup

NAME = "spark"
TITLE = "Spark glue (spark-replay path) vs the plain engine"
SYSTEMS = ("gpu_ivm_eps_half", "spark_driver")


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.spark
    if not cfg.enabled:
        ctx.emit({"kind": "result", "scenario": NAME, "record": "disabled",
                  "detail": f"not run in the {ctx.profile.name} profile (starting Spark takes "
                            "10-20 s)"})
        return
    why = peers.SparkDriverSystem.unavailable()
    if ctx.profile.replay.warmup and not ctx.shared.get("warm"):
        warmup(ctx, ("gpu_ivm_eps_half",), NAME)
    try:
        for B, n in sorted(cfg.batches.items()):
            wl = rmat_workload(cfg.scale, B, n, cfg.seed)
            for name in SYSTEMS:
                if name == "spark_driver" and why:
                    rec = drive.not_run(name, wl, "unavailable", why)
                else:
                    rec = drive.run_system(ctx, name, wl, cap_s=cfg.cap_s,
                                           desc=f"spark B={B:,} {name}")
                rec.update(scenario=NAME, record="system",
                           spark_startup_s=peers._SPARK["startup_s"])
                drive.log_line(ctx, NAME, ctx.emit(rec))
            del wl
            gc.collect()
    finally:
        peers.stop_spark()
