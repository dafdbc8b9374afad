"""``modes``: the insert-only and known-lifespan modes on the SNAP temporal streams.

Side by side on each stream of ``../shared/data`` (see :mod:`bench.modes`, which also runs
alone as ``python -m bench.modes``):

- **growing graph**: the first arrival of every undirected edge, one batch per day, into
  ``GraphEngine(mode="insert_only")`` and into the general ``GraphEngine()``;
- **sliding window** (30 days, 1-day step by default): ``SlidingWindow`` fed each step's
  arrivals, the general engine fed each step's births and expiries as one batch, a static
  recount of each step's window, and the offline evaluator of the whole log;
- **three relations**: every arrival a tuple of R, S or T in turn, one batch per day, into
  ``RelationEngine(mode="insert_only")`` and into the general ``RelationEngine()``.

The systems alternate within each repeat; the records hold the medians and every repeat.
Counts: every run's per-batch (per-step) counts equal the others', and the growing graph's
count after a few batches equals a static count of that prefix, as does the three-relation
Q (else the record says why).
"""

from __future__ import annotations

import os

import bench.modes as bm
from bench.context import RunContext
from bench.scenarios.windows import data_dir

NAME = "modes"
TITLE = "Insert-only and sliding-window modes on SNAP temporal streams"
DAY = 86_400


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.modes
    bm.warm_up()
    for name in cfg.datasets:
        path = data_dir() / bm.STREAMS[name]
        if not path.exists():
            ctx.emit({"kind": "result", "scenario": NAME, "record": "missing",
                      "dataset": name, "detail": f"{path} not found"})
            ctx.log(f"[modes] {path} not found; skipped")
            continue
        s, d, t = bm.load(name, data_dir())
        for what in ("growing", "relations", "window"):
            la0 = os.getloadavg()
            try:
                if what == "growing":
                    rec = bm.measure_growing(s, d, t, cfg.repeats)
                elif what == "relations":
                    rec = bm.measure_relations(s, d, t, cfg.repeats)
                else:
                    rec = bm.measure_window(s, d, t, cfg.window_days * DAY,
                                               cfg.step_days * DAY, cfg.repeats)
                rec.update(ok=True, status="ok")
            except AssertionError as e:
                rec = {"ok": False, "status": "failed", "detail": f"counts differ: {e}"}
            rec.update(kind="result", scenario=NAME, record=what, dataset=name,
                       repeats=cfg.repeats, loadavg_start=la0, loadavg_end=os.getloadavg())
            ctx.emit(rec)
            ctx.log(f"[modes] {name} {what}: " + _line(rec))


def _line(r: dict) -> str:
    if not r.get("ok"):
        return r.get("detail", "failed")
    if r["record"] in ("growing", "relations"):
        return (f"{r['batches']} batches, insert-only {r['insert_only_s']:.3f} s, general "
                f"{r['general_s']:.3f} s ({r['general_s'] / r['insert_only_s']:.1f}x)")
    k = r["steps"]
    return (f"{k} steps, ms per step: online {r['online_s'] / k * 1e3:.2f}, general "
            f"{r['general_s'] / k * 1e3:.2f}, recount {r['recount_s'] / k * 1e3:.2f}, offline "
            f"{r['offline_s'] / k * 1e3:.2f}")
