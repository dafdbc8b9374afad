"""``queries``: the free-variable triangle queries (Δ1 per-vertex, Δ2 per-edge, Δ3 listing).

One R-MAT mixed insert/delete stream (``workloads.mixed_stream``, as in ``replay``). For each ε
and each ``maintain`` choice a fresh ``GraphEngine(adaptive=False)`` loads the base graph and
applies every batch; the record has the load time and the per-batch times (updates/s from the
median). Then each maintained result is read in full — ``vertex_counts()``, ``edge_counts()``,
``triangles()`` as Arrow record batches of 2^16 rows — and timed (result rows per second).
``count`` is the count alone (the Δ0 engine): the baseline the others are compared with. The
other baseline is recomputing the result after every batch: ``vertex_triangle_counts``,
``edge_triangle_counts`` or ``list_triangles`` (degree-ordered static listing) timed on the
final edge set, as updates per second at this batch size.
"""

from __future__ import annotations

import gc
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import gpu_ivm
from bench.context import RunContext
from gpu_ivm import GraphEngine
from gpu_ivm.workloads import mixed_stream

NAME = "queries"
TITLE = "Per-vertex counts, per-edge counts, triangle listing (Δ1, Δ2, Δ3)"

_RECOMPUTE = {"vertex_counts": gpu_ivm.vertex_triangle_counts,
              "edge_counts": gpu_ivm.edge_triangle_counts,
              "triangles": gpu_ivm.list_triangles}
_READERS = {"vertex_counts": "vertex_counts", "edge_counts": "edge_counts",
            "triangles": "triangles"}


def _one(ctx: RunContext, st, eps: str, maintain: str, cap_s: float) -> dict:
    rec = {"kind": "result", "scenario": NAME, "record": "queries", "epsilon": eps,
           "maintain": maintain, "batch_size": st.batch_size, "scale": ctx.profile.queries.scale}
    g = GraphEngine(epsilon=eps, adaptive=False,
                    maintain=None if maintain == "count" else [maintain])
    gc.collect()
    t = time.perf_counter()
    g.load({"src": st.base_src, "dst": st.base_dst})
    rec["load_s"] = time.perf_counter() - t
    rec["size_edges"] = g.num_edges
    secs, updates = [], []
    start = time.perf_counter()
    for b in ctx.bar(st.batches(), f"queries ε={eps} {maintain}", total=st.n_batches):
        t = time.perf_counter()
        rep = g.apply(b)
        secs.append(time.perf_counter() - t)
        updates.append(rep.updates)
        if time.perf_counter() - start > cap_s:
            rec["capped"] = True
            break
    rec["seconds"] = secs
    rec["n"] = len(secs)
    med = float(np.median(secs)) if secs else None
    rec["batch_median_s"] = med
    rec["updates_per_s"] = (float(np.median(updates)) / med) if med else None
    rec["count"] = g.count()
    rec["status"] = "ok"
    rec["ok"] = True
    if g.fq is not None:
        rec["moves"] = int(g.fq.stats["moves"])
        rec["major"] = int(g.fq.stats["major"])
    if maintain != "count":
        # the alternative: recompute the result from scratch after every batch, with our
        # static per-vertex / per-edge / listing functions on the final edge set (median of 3)
        src, dst = g.edges()
        fn = _RECOMPUTE[maintain]
        times = []
        for _ in range(3):
            t = time.perf_counter()
            ref = fn((src, dst))
            times.append(time.perf_counter() - t)
        rec["recompute_s"] = float(np.median(times))
        rec["recompute_updates_per_s"] = st.batch_size / rec["recompute_s"]
        t = time.perf_counter()
        rows = 0
        got = []
        for rb in getattr(g, _READERS[maintain])(chunk_size=1 << 16):
            rows += rb.num_rows
            if maintain != "triangles":
                got.append(rb)
        dt = time.perf_counter() - t
        # oracle: the static recomputation on the same edge set (triangles: the row count)
        if maintain == "triangles":
            rec["ok"] = rows == ref.num_rows == g.count()
        else:
            cols = ref.column_names
            mine = pa.Table.from_batches(got).sort_by([(c, "ascending") for c in cols[:-1]])
            # the static per-vertex table lists every vertex (0 included), the engine's only
            # vertices in a triangle
            ref = ref.filter(pc.greater(ref["triangles"], 0))
            want = ref.sort_by([(c, "ascending") for c in cols[:-1]])
            rec["ok"] = mine.select(cols).equals(want.select(cols))
        rec["enum_rows"] = rows
        rec["enum_s"] = dt
        rec["enum_rows_per_s"] = rows / dt if dt > 0 else None
    del g
    gc.collect()
    return rec


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.queries
    st = mixed_stream(cfg.scale, batch_size=cfg.batch_size, n_batches=cfg.n_batches,
                      seed=cfg.seed)
    ctx.log(f"[queries] R-MAT 2^{cfg.scale}, {cfg.n_batches} batches of {cfg.batch_size:,}")
    warm = mixed_stream(6, batch_size=20, n_batches=2, seed=cfg.seed)
    for m in cfg.maintain:  # Numba compilation outside the timed runs
        _one(ctx, warm, "1/2", m, cap_s=60.0)
    for eps in cfg.epsilons:
        for m in cfg.maintain:
            rec = ctx.emit(_one(ctx, st, eps, m, cfg.cap_s))
            ups = rec.get("updates_per_s")
            enum = rec.get("enum_rows_per_s")
            ctx.log(f"[queries] ε={eps} {m}: {'ok' if rec['ok'] else 'RESULT MISMATCH'}, "
                    f"load {rec['load_s']:.1f} s, "
                    f"{ups or 0:,.0f} updates/s"
                    + (f", enumeration {enum:,.0f} rows/s" if enum else ""))
