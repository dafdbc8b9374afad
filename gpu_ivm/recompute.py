"""The adaptive path: recompute from scratch when a batch is large enough that it is cheaper.

The delta path costs about Σ over updates of the expansion lengths the IVM^ε kernels will walk
(read off the degree arrays before the batch runs); recomputing costs about one preprocessing of
the new database (worst-case-optimal static count, strict partition, views). Both rates are
calibrated online from the engine's own previous batches, so the choice adapts to the machine and
the graph; the results are identical on either path (tests force each path).

The recompute path stores the batch's tuples and recounts; partitions, views and N are left
stale and rebuilt only when a later batch takes the delta path (that rebuild is charged to the
delta estimate amortized over ``rebuild_horizon`` batches), so a run of large batches costs
about one static recount each.
"""

from __future__ import annotations

import numpy as np


def grouped_units(kernels, st, dkeys) -> int:
    """Work of a batch whose pairs share one pass per long row (``pair_weights_grouped``):
    the pairs oriented by the kernel's own rule (``kernels.orient_pairs``), each long row
    counted once unless it has a bitmap (its marks are kept: nothing to write), each short row
    once per pair, plus 4 per tuple."""
    sel = kernels.orient_pairs(dkeys, st)
    live = st[7]
    xs = dkeys[sel] >> 32
    first = np.ones(xs.shape[0], np.bool_)
    first[1:] = xs[1:] != xs[:-1]  # dkeys sorted: a long row's pairs are adjacent
    longs = xs[first]
    boff = st[11]
    if boff.shape[0]:
        longs = longs[boff[longs] < 0]
    return int(dkeys.shape[0] * 4 + live[longs].sum()
               + live[dkeys[sel] & ((1 << 32) - 1)].sum())


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
        self.rebuild_sec_per_tuple: float | None = None  # full preprocessing
        self.recompute_sec_per_tuple: float | None = None  # store the batch + static recount
        self.last_units = 0
        self.streak = (None, 0)  # (path, how many batches in a row took it)
        self.explore_every = 8
        self.rebuild_horizon = 8  # batches over which a rebuild of a stale state is charged

    @staticmethod
    def units(engine, phases) -> int:
        """Estimated kernel work of the delta path: ``phases`` is a list of (relation index,
        packed update keys); per update, the lengths of the lists the kernels expand."""
        total = 0
        grouped = getattr(engine, "_grouped_pairs", None)
        for k, dkeys in phases:
            if grouped is not None and grouped(dkeys.shape[0]):
                total += grouped_units(engine.k.delta, engine.rels[k].l.nt(), dkeys)
                continue
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
        if not self.enabled or self.recompute_sec_per_tuple is None:
            return "delta"
        batch = sum(p[1].shape[0] for p in phases)
        size = engine.size + batch
        est_recompute = self.recompute_sec_per_tuple * size
        est_delta = 0.0
        if engine.stale:
            # a stale state must be rebuilt before a delta batch; the rebuild serves every
            # later delta batch too, so charge it amortized over the next few batches (charging
            # it all at once kept graphs with cheap deltas recounting forever)
            est_delta += (self.rebuild_sec_per_tuple or 0.0) * size / self.rebuild_horizon
        self.last_units = self.units(engine, phases)
        est_delta += self.last_units * self.sec_per_unit
        path = "recompute" if est_delta > est_recompute else "delta"
        # Estimates are only as good as their calibration: when the two are within 2x and one
        # path has been taken explore_every times in a row, try the other once to re-measure it.
        last, run = self.streak
        close = max(est_delta, est_recompute) < 2 * min(est_delta, est_recompute)
        if close and last == path and run >= self.explore_every:
            path = "delta" if path == "recompute" else "recompute"
        self.streak = (path, run + 1 if path == last else 1)
        return path

    def observe_delta(self, seconds: float, engine, phases) -> None:
        units = self.last_units or self.units(engine, phases)
        if units > 1000:
            rate = seconds / units
            self.sec_per_unit = 0.7 * self.sec_per_unit + 0.3 * rate
        self.last_units = 0

    def observe_recompute(self, seconds: float, tuples: int) -> None:
        if tuples > 1000:
            rate = seconds / tuples
            if self.recompute_sec_per_tuple is None:
                self.recompute_sec_per_tuple = rate
            else:
                self.recompute_sec_per_tuple = 0.5 * self.recompute_sec_per_tuple + 0.5 * rate

    def observe_rebuild(self, seconds: float, tuples: int) -> None:
        if tuples > 1000:
            rate = seconds / tuples
            if self.rebuild_sec_per_tuple is None:
                self.rebuild_sec_per_tuple = rate
            else:
                self.rebuild_sec_per_tuple = 0.5 * self.rebuild_sec_per_tuple + 0.5 * rate
