"""``windows``: sliding windows over the SNAP temporal streams (``../shared/data``).

``gpu_ivm.workloads.sliding_window_stream(src, dst, t, window=30 days, step=1 day)`` turns the
stream (``gpu_ivm.io.read_edges(path)``: ``.src``, ``.dst``, ``.time``) into one batch per day
of the undirected edges that entered or left the window; the graph starts empty. Days without
a change are dropped. Variant ``fixed``: the same sequence of changes cut into batches of a
fixed number of changes (an edge that changes twice inside one batch is netted out, so a
batch may hold slightly fewer rows). The oracle's counts (static counter on the current edge
set) are checked after a few sampled batches and the last one.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import numpy as np

from bench import drive
from bench.context import RunContext
from bench.edgeset import check_points, oracle_counts, packed
from bench.scenarios.replay import warmup
from gpu_ivm.io import read_edges
from gpu_ivm.workloads import sliding_window_stream

NAME = "windows"
TITLE = "Sliding windows over SNAP temporal streams"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DAY = 86_400


def data_dir() -> Path:
    """``../shared/data`` next to the repository (``/work/shared/data``)."""
    here = Path(__file__).resolve().parents[2]
    for cand in (here.parent / "shared" / "data", DATA):
        if cand.is_dir():
            return cand
    return here.parent / "shared" / "data"


def fixed_batches(day_batches: list[dict], k: int) -> list[dict]:
    """The changes of ``day_batches``, in order, cut into batches of ``k`` (netted)."""
    if not day_batches:
        return []
    keys = np.concatenate([packed(b["src"], b["dst"]) for b in day_batches])
    sign = np.concatenate([np.asarray(b["sign"], np.int64) for b in day_batches])
    out = []
    for i in range(0, keys.shape[0], k):
        kk, ss = keys[i:i + k], sign[i:i + k]
        order = np.argsort(kk, kind="stable")
        kk, ss = kk[order], ss[order]
        starts = np.flatnonzero(np.r_[True, kk[1:] != kk[:-1]])
        counts = np.diff(np.r_[starts, kk.shape[0]])
        keep = starts[counts % 2 == 1]  # changes alternate: an odd run nets to its first
        if keep.shape[0]:
            out.append({"src": kk[keep] >> 32, "dst": kk[keep] & 0xFFFFFFFF, "sign": ss[keep]})
    return out


def _max_edges(batches: list[dict]) -> int:
    run = np.cumsum([int(np.sum(b["sign"])) for b in batches]) if batches else [0]
    return int(np.max(run))


def workloads(name: str, cfg) -> list[drive.Workload]:
    el = read_edges(data_dir() / f"{name}.txt.gz")
    days = [b for b in sliding_window_stream(el.src, el.dst, el.time,
                                             window=cfg.window_days * DAY,
                                             step=cfg.step_days * DAY)
            if len(b["src"])]
    if cfg.max_batches:
        days = days[:cfg.max_batches]
    empty = np.zeros(0, np.int64)
    out = []
    for variant, batches in (("day", days), (f"fixed {cfg.fixed_batch}",
                                              fixed_batches(days, cfg.fixed_batch))):
        at = check_points(len(batches), 5)
        expected = oracle_counts(empty, empty, batches, at)
        sizes = [len(b["src"]) for b in batches]
        out.append(drive.Workload(
            f"{name} / {variant}", empty, empty, batches, expected, _max_edges(batches),
            int(np.median(sizes)) if variant == "day" else cfg.fixed_batch,
            meta={"dataset": name, "variant": variant.split()[0],
                  "window_days": cfg.window_days, "step_days": cfg.step_days,
                  "rows_in_file": int(el.src.shape[0]),
                  "mean_batch": float(np.mean(sizes)) if sizes else 0.0,
                  "max_batch": int(max(sizes)) if sizes else 0}))
    return out


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.windows
    if ctx.profile.replay.warmup and not ctx.shared.get("warm"):
        warmup(ctx, cfg.systems, NAME)
        ctx.shared["warm"] = True
    for name in cfg.datasets:
        path = data_dir() / f"{name}.txt.gz"
        if not path.exists():
            ctx.emit({"kind": "result", "scenario": NAME, "record": "missing",
                      "dataset": name, "detail": f"{path} not found"})
            ctx.log(f"[windows] {path} not found; skipped")
            continue
        t = time.perf_counter()
        wls = workloads(name, cfg)
        for wl in wls:
            t = time.perf_counter() if wl is not wls[0] else t
            ctx.log(f"[windows] {wl.key}: {len(wl.batches):,} batches, {wl.updates:,} updates, "
                    f"at most {wl.size_edges:,} edges in the window "
                    f"({time.perf_counter() - t:.1f} s, untimed)")
            for sysname in cfg.systems:
                rec = drive.run_system(ctx, sysname, wl, n_timed=cfg.recount_timed,
                                       cap_s=cfg.cap_s, desc=f"{wl.key} {sysname}")
                rec.update(scenario=NAME, record="system")
                drive.log_line(ctx, NAME, ctx.emit(rec))
        del wls
        gc.collect()
