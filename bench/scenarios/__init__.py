"""Scenarios: each module has ``NAME``, ``TITLE`` and ``run(ctx)``, which measures and passes
one dict per measurement to ``ctx.emit`` (see :mod:`bench.context`). Register new ones here
(in the order they run and appear in the report)."""

from __future__ import annotations

from bench.scenarios import (
    celebrity,
    cq,
    modes,
    paired,
    queries,
    replay,
    scaling,
    snap_static,
    spark,
    storage,
    windows,
)

SCENARIOS = {m.NAME: m for m in (replay, celebrity, scaling, windows, paired, modes,
                                 snap_static, queries, cq, spark, storage)}

__all__ = ["SCENARIOS"]
