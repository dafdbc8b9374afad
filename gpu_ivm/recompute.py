"""The adaptive path: recompute from scratch when a batch is large enough that it is cheaper.

The delta path costs about Σ over updates of the expansion lengths the IVM^ε kernels will walk
(read off the degree arrays before the batch runs); recomputing costs about one preprocessing of
the new database (worst-case-optimal static count, strict partition, views). Both rates are
calibrated online from the engine's own previous batches, so the choice adapts to the machine and
the graph; the results are identical on either path (tests force each path).
"""

from __future__ import annotations

import numpy as np


class AdaptivePolicy:
    """Chooses ``"delta"`` or ``"recompute"`` for a batch.

    Parameters
    ----------
    enabled : bool
        When False, always the delta path.
    force : str, optional
        ``"delta"`` or ``"recompute"`` to force a path (for tests and benchmarks).
    """

    def __init__(self, enabled: bool = True, force: str | None = None):
        self.enabled = enabled
        self.force = force
        self.sec_per_unit = 40e-9  # first guess; replaced by measurements
        self.rebuild_sec_per_tuple: float | None = None
        self.last_units = 0

    @staticmethod
    def units(engine, phases) -> int:
        """Estimated kernel work of the delta path: ``phases`` is a list of (relation index,
        packed update keys); per update, the lengths of the lists the kernels expand."""
        total = 0
        for k, dkeys in phases:
            nx, pv = engine._wiring(k)
            x = dkeys >> 32
            y = dkeys & ((1 << 32) - 1)
            hy = nx.h.live[y]
            htx = pv.ht.live[x]
            total += int(dkeys.shape[0] * 4 + nx.l.live[y].sum() + np.minimum(hy, htx).sum()
                         + htx.sum())
        return total

    def choose(self, engine, phases) -> str:
        if self.force:
            return self.force
        if not self.enabled or self.rebuild_sec_per_tuple is None:
            return "delta"
        self.last_units = self.units(engine, phases)
        est_delta = self.last_units * self.sec_per_unit
        batch = sum(p[1].shape[0] for p in phases)
        est_rebuild = self.rebuild_sec_per_tuple * (engine.size + batch)
        return "recompute" if est_delta > est_rebuild else "delta"

    def observe_delta(self, seconds: float, engine, phases) -> None:
        units = self.last_units or self.units(engine, phases)
        if units > 1000:
            rate = seconds / units
            self.sec_per_unit = 0.7 * self.sec_per_unit + 0.3 * rate
        self.last_units = 0

    def observe_rebuild(self, seconds: float, tuples: int) -> None:
        if tuples > 1000:
            rate = seconds / tuples
            if self.rebuild_sec_per_tuple is None:
                self.rebuild_sec_per_tuple = rate
            else:
                self.rebuild_sec_per_tuple = 0.5 * self.rebuild_sec_per_tuple + 0.5 * rate
