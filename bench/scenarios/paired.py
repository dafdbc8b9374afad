"""``paired``: the engines compared with each other on the same batches, interleaved.

The other scenarios run one system after another, each over its whole stream. On a shared
2-core machine, whose speed drifts by tens of percent over minutes, that order alone moved the
ratio of two engines by up to 1.4× between runs (docs/benchmarks.md, twentieth session: the
default against ε = ½ on celebrity churn 1.42× in a run, within 3 % interleaved). Here the
engines of ``PairedConfig.systems`` load the same base graph and every batch goes to each of
them before the next batch (:func:`bench.drive.run_interleaved`), so a drift hits every
engine alike, in orders that give each engine each other one as its predecessor equally
often (:func:`bench.drive.balanced_orders`; an engine runs in the caches the one before it
left, and rotating the order by one a batch put the default after ε = 1 twice as often as
ε = ½ on celebrity churn, where ε = 1 walks the hubs' rows). Ratios between
engines (the default against the best fixed ε) are read from this scenario; absolute rates
and the comparison with other systems from the others.

Workloads: R-MAT streams at the scales and batch sizes of ``PairedConfig.rmat`` (the streams of
``replay``, same seed), celebrity churn as ``celebrity`` runs it, the SNAP windows as
``windows`` cuts them; counts checked against the oracle at each workload's check points.
"""

from __future__ import annotations

import gc
import time

from bench import drive
from bench.context import RunContext
from bench.scenarios import celebrity, windows
from bench.scenarios.replay import rmat_workload, warmup

NAME = "paired"
TITLE = "Engines interleaved batch by batch: the default against fixed ε"


def _workloads(ctx: RunContext):
    """The scenario's workloads, one at a time (each built untimed, then dropped)."""
    cfg = ctx.profile.paired
    for scale, sizes in cfg.rmat.items():
        for B, n in sizes.items():
            yield lambda s=scale, b=B, k=n: rmat_workload(s, b, k, ctx.profile.replay.seed)
    if cfg.celebrity:
        yield lambda: celebrity.churn_workload(ctx.profile.celebrity)
    if cfg.windows:
        for name in ctx.profile.windows.datasets:
            if (windows.data_dir() / f"{name}.txt.gz").exists():
                wls = windows.workloads(name, ctx.profile.windows)
                for wl in wls:
                    yield lambda w=wl: w
                del wls
            else:
                ctx.log(f"[{NAME}] {name}: data not found; skipped")


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.paired
    if ctx.profile.replay.warmup and not ctx.shared.get("warm"):
        warmup(ctx, cfg.systems, NAME)
        ctx.shared["warm"] = True
    for make in _workloads(ctx):
        t = time.perf_counter()
        wl = make()
        ctx.log(f"[{NAME}] {wl.key}: {len(wl.batches):,} batches of {wl.batch_size:,} "
                f"({time.perf_counter() - t:.1f} s, untimed)")
        for rec in drive.run_interleaved(ctx, list(cfg.systems), wl, cap_s=cfg.cap_s):
            rec.update(scenario=NAME, record="system")
            drive.log_line(ctx, NAME, ctx.emit(rec))
        del wl
        gc.collect()
