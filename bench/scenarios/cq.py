"""``cq``: the query engine (``gpu_ivm.cq``) under insert/delete batches (see
:mod:`bench.cq_bench`, which also runs alone as ``python -m bench.cq_bench``).

- ``flat`` records: the CQAP_0 query ``Q(B,C | A) = R(A,B), S(A,C)`` at each N of the
  profile: mean seconds per batch and request seconds per answer (flat in N is the goal);
- ``peer`` records: the 2-path, a star and the 4-cycle against DuckDB's delta SQL keeping the
  same count, compared after every batch;
- ``eps`` records: ``Q(C | A) = R(A,B), S(B,C)`` over relations with hub B values at each ε of
  the profile (the heavy/light trade-off below 1): batch and request times.
"""

from __future__ import annotations

import importlib.util
import os

import bench.cq_bench as cb
from bench.context import RunContext

NAME = "cq"
TITLE = "Conjunctive queries with access patterns (gpu_ivm.cq) vs DuckDB delta SQL"


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.cq
    la0 = os.getloadavg()
    for rec in cb.measure_flat(cfg.sizes, cfg.batch_size, cfg.n_batches):
        rec.update(kind="result", scenario=NAME, record="flat", ok=rec["count_ok"],
                   loadavg_start=la0, loadavg_end=os.getloadavg())
        ctx.emit(rec)
        ctx.log(f"[cq] flat N = {rec['n']:,}: {rec['mean_s'] * 1e3:.2f} ms per batch")
    duckdb = importlib.util.find_spec("duckdb") is not None
    if not duckdb:  # the peer and its check need DuckDB
        ctx.emit({"kind": "result", "scenario": NAME, "record": "unavailable", "ok": None,
                  "status": "unavailable",
                  "detail": "DuckDB comparison not run: duckdb is not installed "
                            "(pip install -r bench/requirements.txt)"})
        ctx.log("[cq] duckdb is not installed; the DuckDB comparison is skipped")
    for name in cfg.peer_queries if duckdb else ():
        la0 = os.getloadavg()
        rec = cb.measure_peer(name, cfg.peer_size, cfg.batch_size, cfg.n_batches)
        rec.update(kind="result", scenario=NAME, record="peer", ok=rec["count_ok"],
                   loadavg_start=la0, loadavg_end=os.getloadavg())
        ctx.emit(rec)
        ctx.log(f"[cq] {name}: gpu_ivm {rec['gpu_ivm_mean_s'] * 1e3:.2f} ms, DuckDB "
                f"{rec['duckdb_mean_s'] * 1e3:.2f} ms per batch")
    for rec in cb.measure_eps(cfg.peer_size, cfg.batch_size, cfg.eps_batches, cfg.epsilons):
        rec.update(kind="result", scenario=NAME, record="eps", ok=rec["count_ok"],
                   loadavg_start=la0, loadavg_end=os.getloadavg())
        ctx.emit(rec)
        ctx.log(f"[cq] eps = {rec['epsilon']}: {rec['mean_s'] * 1e3:.2f} ms per batch, "
                f"{rec['request_s'] * 1e3:.1f} ms per request batch")
