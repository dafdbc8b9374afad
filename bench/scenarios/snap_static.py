"""``snap_static``: the static SNAP graphs (``../shared/data``): load the undirected simple
graph, delete a random half of its edges in batches of B, then re-insert them in the same
batches. The final count must equal the published one (and the oracle's); the oracle's counts
(static counter on the current edge set) are also checked after sampled batches.
"""

from __future__ import annotations

import gc
import time

import numpy as np

from bench import drive
from bench.context import RunContext
from bench.edgeset import EdgeSet, check_points, oracle_counts
from bench.scenarios.replay import warmup
from bench.scenarios.windows import data_dir
from gpu_ivm.io import read_edges

NAME = "snap_static"
TITLE = "Static SNAP graphs: delete a random half, re-insert it"

PUBLISHED = {"facebook_combined": 1_612_010, "ca-GrQc": 48_260, "ca-AstroPh": 1_351_441,
             "email-Eu-core": 105_461}


def workload(name: str, B: int, seed: int) -> drive.Workload:
    el = read_edges(data_dir() / f"{name}.txt.gz")
    es = EdgeSet(el.src, el.dst)
    a, b = es.arrays()
    rng = np.random.default_rng([seed, len(a)])
    half = rng.permutation(a.shape[0])[: a.shape[0] // 2]
    dels, ins = [], []
    for i in range(0, half.shape[0], B):
        idx = half[i:i + B]
        dels.append({"src": a[idx], "dst": b[idx], "sign": np.full(idx.shape[0], -1, np.int64)})
        ins.append({"src": a[idx], "dst": b[idx], "sign": np.ones(idx.shape[0], np.int64)})
    batches = dels + ins
    at = sorted(set(check_points(len(batches), 4)) | {-1, len(dels) - 1})
    expected = oracle_counts(a, b, batches, at)
    return drive.Workload(f"{name}", a, b, batches, expected, int(a.shape[0]), B,
                          meta={"dataset": name, "published": PUBLISHED.get(name),
                                "deleted": int(half.shape[0])})


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.static
    if ctx.profile.replay.warmup and not ctx.shared.get("warm"):
        warmup(ctx, cfg.systems, NAME)
        ctx.shared["warm"] = True
    for name in cfg.datasets:
        path = data_dir() / f"{name}.txt.gz"
        if not path.exists():
            ctx.emit({"kind": "result", "scenario": NAME, "record": "missing",
                      "dataset": name, "detail": f"{path} not found"})
            continue
        t = time.perf_counter()
        wl = workload(name, cfg.batch_size, cfg.seed)
        pub = wl.meta["published"]
        last = len(wl.batches) - 1
        if pub is not None and wl.expected.get(last) != pub:
            raise AssertionError(f"{name}: oracle {wl.expected.get(last)} != published {pub}")
        ctx.log(f"[snap_static] {name}: {wl.size_edges:,} edges, {len(wl.batches)} batches of "
                f"{cfg.batch_size:,} ({time.perf_counter() - t:.1f} s, untimed)")
        for sysname in cfg.systems:
            rec = drive.run_system(ctx, sysname, wl, n_timed=cfg.recount_timed,
                                   cap_s=cfg.cap_s, desc=f"{name} {sysname}")
            rec.update(scenario=NAME, record="system")
            drive.log_line(ctx, NAME, ctx.emit(rec))
        del wl
        gc.collect()
