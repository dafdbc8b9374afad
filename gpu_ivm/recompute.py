"""The adaptive path: recompute from scratch when a batch is large enough that it is cheaper.

The delta path costs about Σ over updates of the expansion lengths the IVM^ε kernels will walk
(read off the degree arrays before the batch runs); recomputing costs about one preprocessing of
the new database (worst-case-optimal static count, strict partition, views). Both rates are
calibrated online from the engine's own previous batches, so the choice adapts to the machine and
the graph; the results are identical on either path (tests force each path).

The recompute path stores the batch's tuples and recounts; partitions, views and N are left
stale and rebuilt only when a later batch takes the delta path, so a run of large batches costs
about one static recount each. That rebuild is the cost of switching paths, and both switches
follow the ski-rental rule: a fresh state is recounted once the delta path's estimated excess
over the recounts, summed over the delta batches since, pays for the rebuild that a return
will cost (at once for a batch whose own excess does), and a stale one returns to deltas only
once their estimated savings, summed over the recounts since, pay for the whole rebuild. So
estimates that are close, or one batch of more work among cheap ones, do not flip the path
(each flip and return costs a rebuild). The delta estimate is a fixed cost per batch plus a
rate per unit of kernel work, each the median of recent delta batches (those that rebuilt
first are not timed: the rebuild leaves the caches cold). The recompute estimate is the
static recount's rate times the tuples, times what a recompute batch was measured to cost
beyond its recount (``recompute_factor``).

Two kinds of batch take deltas without the estimates (a fresh state only): one whose
deltas, at the recent time per tuple, cost under 1/``FAR_CHEAPER`` of the recount's
estimate; and a small batch on an undirected graph without a heavy part (at most
``LIGHT_DELTA_MAX`` tuples, counted by one compiled call), whose estimates cost about a
tenth of the batch on a small sliding window. Such a batch's worst case (256 edges, each an
intersection no longer than the longest row, at most m entries) is within the recount's
worst-case bound O(m·√m) once m ≥ 256² = 65,536; on smaller graphs both paths are cheap.
"""

from __future__ import annotations

from collections import deque
from statistics import median

import numpy as np

from .kernels.phase_kernels import delta_units


def grouped_units(kernels, st, dkeys) -> int:
    """Work of a batch whose pairs share one pass per long row (``pair_weights_grouped``):
    the pairs oriented by the kernel's own rule, each long row counted once unless it has a
    bitmap (its marks are kept: nothing to write), each short row once per pair, plus 4 per
    tuple (``kernels.grouped_work``, one compiled pass)."""
    return int(kernels.grouped_work(dkeys, st))


FIXED_UNITS = 200  # a delta batch of at most this much estimated work measures the fixed cost
#: the first guess of how much faster a unit of work runs against the compact copy of the
#: graph than in the stores (measured: the count delta of R-MAT 16, B = 10⁵, 55–70 against
#: 28–31 ms for the same units; replaced by the copy's own measured rate once a batch ran)
SNAPSHOT_SPEEDUP = 2
#: a recompute batch's cost over its static recount's before one was measured (it stores
#: the batch's tuples and runs the engine's bookkeeping too)
RECOMPUTE_FACTOR_FIRST = 2.0
EXPLORE_FIRST = 16  # recounts in a row (estimates within 2x) before a delta batch re-measures
EXPLORE_MAX = 1024  # the longest wait between two such tries
SAMPLES = 9  # recent delta batches whose median gives the fixed cost and the rate
#: a batch whose deltas, at the recent time per tuple, cost under 1/FAR_CHEAPER of a recount
#: takes them without the work estimate (``choose``; its per-batch pass is skipped)
FAR_CHEAPER = 8
SKIPPED = -1  # last_units of a batch chosen without the work estimate


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
        # a delta batch's cost beyond its kernels' work (host steps, launches): measured on
        # batches of little work, and left out of the rate so that a rate measured on small
        # batches does not overcharge large ones
        self.delta_fixed_sec = 0.0
        self._fixed: deque[float] = deque(maxlen=SAMPLES)
        # the last SAMPLES delta batches' times, of any size: no batch costs less than the
        # fixed part, so their minimum bounds it (see observe_delta)
        self._recent: deque[float] = deque(maxlen=SAMPLES)
        self._rates: deque[float] = deque(maxlen=SAMPLES)
        self._tuple_rates: deque[float] = deque(maxlen=SAMPLES)  # seconds per Δ tuple
        self._snapshot_rates: deque[float] = deque(maxlen=SAMPLES)  # see _rate
        self.rebuild_sec_per_tuple: float | None = None  # full preprocessing
        self.recompute_sec_per_tuple: float | None = None  # the static recount
        self.recompute_factor = RECOMPUTE_FACTOR_FIRST  # a recompute batch / its recount
        self.last_units = 0
        self.last_snapshot = False  # choose() saw a batch for the copy of the graph
        self.streak = (None, 0)  # (path, how many batches in a row took it)
        self.savings = 0.0  # the delta path's estimated savings over the recounts since a switch
        self.excess = 0.0  # the delta path's estimated excess over recounts since a switch
        self.explore_every = EXPLORE_FIRST  # recounts in a row before one delta batch tries
        self._exploring = False  # the last batch was such a try

    @staticmethod
    def on_snapshot(engine, phases) -> bool:
        """Whether the batch's delta path runs against the compact copy of the graph
        (``GraphEngine._snapshot_path``): its work is measured at a rate of its own."""
        snap = getattr(engine, "_snapshot_path", None)
        return snap is not None and len(phases) == 1 and snap(phases[0][1].shape[0])

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
            if isinstance(dkeys, np.ndarray):  # one compiled pass
                total += int(delta_units(dkeys, nx.l.live, nx.h.live, pv.ht.live))
                continue
            # on a device: one kernel and one read (kernels/cuda_phase.py)
            total += engine.k.phase.delta_units(dkeys, nx.l.live, nx.h.live, pv.ht.live)
        return total

    def choose(self, engine, phases) -> str:
        """``"delta"`` or ``"recompute"`` for the batch of ``phases`` (see the class)."""
        if self.force:
            return self.force
        if not self.enabled:
            return "delta"
        batch = sum(p[1].shape[0] for p in phases)
        small = getattr(engine, "_light_small", None)
        if not engine.stale and small is not None and small(batch):
            # a small batch on a graph without a heavy part (one compiled call for its count
            # delta, at most LIGHT_DELTA_MAX tuples): deltas, without the estimates, which
            # cost about a tenth of such a batch on a sliding window of a few thousand edges
            return self._skip_estimate()
        # the recount's rate, measured when this engine has none or has grown 4x since
        # (a recount of the stored tuples: only for a batch whose choice reads it)
        calibrate = getattr(engine, "_calibrate_recompute", None)
        if calibrate is not None:
            calibrate()
        if self.recompute_sec_per_tuple is None:
            return "delta"
        size = engine.size + batch
        est_recompute = self.recompute_factor * self.recompute_sec_per_tuple * size
        if not engine.stale and self._far_cheaper(batch, est_recompute):
            # deltas cost a small fraction of a recount at their recent rate per tuple:
            # no work estimate (a pass over the batch: about 2 % of an R-MAT 18 batch)
            return self._skip_estimate()
        self.last_units = self.units(engine, phases)
        self.last_snapshot = self.on_snapshot(engine, phases)
        est_delta = self.delta_fixed_sec + self.last_units * self._rate(self.last_snapshot)
        # an engine that started empty has not measured a rebuild yet: it costs at least the
        # recount it includes
        rebuild = (est_recompute if self.rebuild_sec_per_tuple is None
                   else self.rebuild_sec_per_tuple * size)
        # A recount leaves the state stale, and the next delta batch pays one rebuild first.
        # Both switches follow the ski-rental rule (never below 0, reset at a switch): from a
        # fresh state, recount once the delta estimates' excess over the recounts', summed
        # over the batches since, exceeds that rebuild (what a later return to deltas will
        # cost; one batch whose own excess does switches at once); from a stale state, return
        # to deltas once their estimated savings, summed over the recounts since, pay for the
        # whole rebuild. Close or alternating estimates, and a single batch of more work
        # among cheap ones, then keep the path, where each flip and return cost a rebuild.
        if engine.stale:
            self.excess = 0.0
            self.savings = max(0.0, self.savings + est_recompute - est_delta)
            path = "delta" if self.savings >= rebuild else "recompute"
        else:
            self.savings = 0.0
            self.excess = max(0.0, self.excess + est_delta - est_recompute)
            path = "recompute" if self.excess > rebuild else "delta"
            if path == "recompute":
                self.excess = 0.0
        # Estimates are only as good as their calibration: after explore_every recounts in a
        # row with estimates within 2x, one delta batch re-measures the delta path (a recount
        # needs no such try: its rate is measured apart, see
        # TriangleEngineBase._calibrate_recompute). Each try pays a rebuild; a try after which
        # the estimates go back to recounting doubles the wait before the next one (up to
        # EXPLORE_MAX), one after which they stay with deltas resets it: where both paths
        # cost about the same (small sliding windows) the tries cost O(log) rebuilds, not one
        # every 17 batches.
        if self._exploring:
            self.explore_every = (min(2 * self.explore_every, EXPLORE_MAX)
                                  if path == "recompute" else EXPLORE_FIRST)
            self._exploring = False
        last, run = self.streak
        close = max(est_delta, est_recompute) < 2 * min(est_delta, est_recompute)
        if close and path == last == "recompute" and run >= self.explore_every:
            path = "delta"
            self._exploring = True
        self.streak = (path, run + 1 if path == last else 1)
        return path

    def _skip_estimate(self) -> str:
        """``"delta"`` for a batch chosen without the work estimate (observed by its time
        per tuple only)."""
        if self._exploring:  # the try stays with deltas
            self.explore_every, self._exploring = EXPLORE_FIRST, False
        self.last_units, self.excess = SKIPPED, 0.0
        self.streak = ("delta", self.streak[1] + 1 if self.streak[0] == "delta" else 1)
        return "delta"

    def observe_delta(self, seconds: float, engine, phases, timed: bool = True) -> None:
        """Refine the delta path's model, seconds = fixed + units · rate, from a delta batch:
        a batch of little work (``FIXED_UNITS`` units or fewer) measures the fixed part, a
        larger one the rate of what is left beyond it. Each is the median of the last
        ``SAMPLES`` measurements: one slow batch (a collection, a cold cache) moves neither;
        and the fixed part is at most the cheapest of the last ``SAMPLES`` delta batches of
        any size (a batch cannot cost less than it).
        ``timed=False``: the batch rebuilt a stale state first (cold caches), and measures
        nothing."""
        if not timed or not self.enabled or self.force:  # a model nothing will read
            self.last_units = 0
            return
        tuples = sum(p[1].shape[0] for p in phases)
        if tuples:
            self._tuple_rates.append(seconds / tuples)
        if self.last_units == SKIPPED:  # no work estimate: the per-tuple rate only
            self._recent.append(seconds)
            self.last_units = 0
            return
        # what choose() saw before the batch changed the state, else read now
        snapshot = self.last_snapshot if self.last_units else self.on_snapshot(engine, phases)
        units = self.last_units or self.units(engine, phases)
        self._recent.append(seconds)
        if units <= FIXED_UNITS:
            self._fixed.append(seconds)
        # Batches of little work come mostly at a stream's start (a graph that starts empty),
        # when the first calls are cold: measured alone they could fix the fixed part at
        # milliseconds for good (later batches have more work and never refresh it), and the
        # delta path then looked 10-20x dearer than it ran (small SNAP windows recounted
        # for hundreds of batches). A batch costs at least the fixed part, so the cheapest
        # of the recent batches, whatever their work, bounds it.
        if self._fixed:  # 9 floats: no array (np.median 40 µs)
            self.delta_fixed_sec = min(median(self._fixed), min(self._recent))
        if units > 1000:
            rate = max(seconds - self.delta_fixed_sec, 0.25 * seconds) / units
            if snapshot:
                self._snapshot_rates.append(rate)
            else:
                self._rates.append(rate)
                self.sec_per_unit = median(self._rates)
        self.last_units = 0

    def _far_cheaper(self, tuples: int, est_recompute: float) -> bool:
        """Whether a delta batch of ``tuples`` costs under 1/FAR_CHEAPER of the recount's
        estimate at the recent delta batches' median time per tuple (at least 3 of them)."""
        if len(self._tuple_rates) < 3:
            return False
        est = self.delta_fixed_sec + median(self._tuple_rates) * tuples
        return FAR_CHEAPER * est < est_recompute

    def _rate(self, snapshot: bool) -> float:
        """Seconds per unit of work of a batch's delta path: batches against the copy of
        the graph (``snapshot``) have rates of their own (the median of the last
        ``SAMPLES``), seeded until one has run at ``sec_per_unit / SNAPSHOT_SPEEDUP``."""
        if not snapshot:
            return self.sec_per_unit
        if self._snapshot_rates:
            return median(self._snapshot_rates)
        return self.sec_per_unit / SNAPSHOT_SPEEDUP

    def observe_recompute(self, seconds: float, tuples: int, whole: bool = False) -> None:
        """A static recount of ``tuples`` took ``seconds`` (the load's, a calibration's), or
        with ``whole`` a recompute batch did (its tuples stored, then the recount): the first
        refine the rate, the second how much a batch costs beyond its recount
        (``recompute_factor``, seeded at RECOMPUTE_FACTOR_FIRST: on CollegeMsg's sliding
        windows the rate alone had the policy recount batches that then cost several times
        its estimate)."""
        if tuples <= 1000:
            return
        if whole:
            if self.recompute_sec_per_tuple is not None:
                f = seconds / (self.recompute_sec_per_tuple * tuples)
                self.recompute_factor = 0.5 * self.recompute_factor + 0.5 * max(1.0, f)
            return
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
