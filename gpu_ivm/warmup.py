"""Load every compiled kernel once per process, so that no user batch pays for it.

Numba's compiled kernels are cached on disk (``cache=True``) but each is loaded into the
process at its first call (tens of milliseconds each); without this the first batch after a
load was about ten times slower than the next ones in the benchmark. ``warm_up()`` runs a
small deterministic workload through both engines once, touching the sequential and the
parallel variants of the kernels; engines call it at the end of ``load()``.
"""

from __future__ import annotations

import numpy as np

_done = False


def warm_up() -> None:
    """Run the tiny workload once per process (no-op afterwards)."""
    global _done
    if _done:
        return
    _done = True
    from . import engine
    from .kernels import delta_kernels

    # lower the thresholds above which the parallel variants run, so they are loaded too
    saved = (delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN)
    delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN = 1, 1
    try:
        _workload()
    finally:
        delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN = saved


def _workload() -> None:
    from .graph_engine import GraphEngine
    from .relation_engine import RelationEngine

    rng = np.random.default_rng(12345)
    n = 64
    src = rng.integers(0, n, 900)
    dst = rng.integers(0, n, 900)
    src[:300] = rng.integers(0, 3, 300)  # hubs, so heavy keys and views exist
    for directed in (False, True):
        g = GraphEngine(directed=directed, epsilon="1/3", on_conflict="ignore", adaptive=False)
        g.load((src[:400], dst[:400]))
        g.apply({"src": src[400:], "dst": dst[400:], "sign": np.ones(500, np.int64)})
        g.apply({"src": src[:700], "dst": dst[:700], "sign": -np.ones(700, np.int64)})
        g.apply({"src": src[:3], "dst": dst[:3], "sign": np.ones(3, np.int64)})
    r = RelationEngine(epsilon="1/3", adaptive=False)
    rel = np.array(["R", "S", "T"])[rng.integers(0, 3, 900)]
    r.apply({"rel": rel, "src": src, "dst": dst, "mult": np.ones(900, np.int64)})
    r.apply({"rel": rel[:5], "src": src[:5], "dst": dst[:5], "mult": -np.ones(5, np.int64)})
