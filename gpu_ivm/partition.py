"""A relation split into heavy and light parts on its first variable.

``h`` and ``l`` hold the heavy and light tuples keyed (first, second); ``ht`` holds the heavy
tuples transposed, keyed (second, first), for enumerating K_h(·, y). ``heavy[x]`` says which part
first key ``x`` lives in, so the domain-partition condition holds by construction.
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .encoding import transpose
from .eps_policy import choose_epsilon, work_bound
from .kernels.phase_kernels import watch_lights
from .overflow import max_abs, sum_squares
from .rational import Thresholds
from .store import ZStore


def _index_min_from_env() -> int | None:
    """``GPU_IVM_ROW_TABLES``: the row length from which the relation stores keep hash tables
    (unset or 0: none)."""
    v = os.environ.get("GPU_IVM_ROW_TABLES", "").strip()
    return int(v) if v and int(v) > 0 else None


def _row_bits_from_env() -> bool:
    """``GPU_IVM_ROW_BITS=0`` turns the stores' row bitmaps off (default on)."""
    return os.environ.get("GPU_IVM_ROW_BITS", "1").strip() not in ("0", "false", "no", "off")


class RepartitionPlan(NamedTuple):
    """A strict repartition's choice (see :meth:`PartRel.repartition_plan`)."""

    eps: Fraction
    th: Thresholds
    same: bool


def sort_pairs(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys sorted with their values (any array module: ``keys.argsort``)."""
    order = keys.argsort()  # unique keys: the default sort (a stable one is 5x slower)
    return keys[order], vals[order]


class PartRel:
    """Heavy/light partition of one relation, with exact integer thresholds.

    With ``index_min`` set (class attribute; default from ``GPU_IVM_ROW_TABLES``, else
    ``None``), the three stores keep hash tables of their rows of ``index_min`` tuples or more,
    so the count kernels' row intersections read O(min(deg)) entries (see
    :mod:`gpu_ivm.kernels.row_index`). Off by default: on the 2-core CPU it halves the entries
    the count kernel reads but the tables' upkeep and memory made whole batches slower
    (docs/benchmarks.md, "Row hash tables").

    With ``row_bits`` (class attribute; default on, ``GPU_IVM_ROW_BITS=0`` turns it off) the
    stores keep bitmaps of their long rows whose tuples all have multiplicity 1, so an
    intersection with such a row walks the other row only (:mod:`gpu_ivm.kernels.row_bits`;
    stores in host memory, see :attr:`bits`).

    ``eps=None`` (``epsilon="auto"``): ε is chosen from the degrees at every strict
    repartition (:func:`gpu_ivm.eps_policy.choose_epsilon`; ``symmetric``: updates are
    evaluated in their cheaper orientation, the undirected graph); until the first one it is 1.
    Between rebuilds a light key may grow past the rule's work bound (possible when ⌈3θ/2⌉
    exceeds it): ``watch`` is then that bound, ``over`` flags the light keys above it and
    ``n_over`` counts them, so the engine can choose ε again before the next major rebalancing.
    """

    index_min: int | None = _index_min_from_env()
    row_bits: bool = _row_bits_from_env()

    def __init__(self, name: str, eps: Fraction | None, n: int, id_capacity: int = 0,
                 kernels=None):
        self.name = name
        self.auto = eps is None
        self.symmetric = False
        self.eps = Fraction(1) if eps is None else eps
        self.th = Thresholds.of(n, self.eps)
        self.kernels = kernels
        self.h = ZStore(id_capacity, kernels, self.index_min, self.bits)
        self.l = ZStore(id_capacity, kernels, self.index_min, self.bits)
        self.ht = ZStore(id_capacity, kernels, self.index_min, self.bits)
        self.xp = self.h.xp
        self.heavy = self.xp.zeros(id_capacity, np.bool_)
        self.max_abs = 0  # upper bound of |multiplicity| over the tuples
        # upper bound of Σ multiplicity² (None: recount from the parts); exact when _sq_exact
        self._sq: int | None = 0
        self._sq_exact = True
        self.watch: int | None = None
        self.over = self.xp.zeros(id_capacity, np.bool_)
        self.n_over = 0

    @property
    def bits(self) -> bool:
        """Whether the parts keep row bitmaps: ``row_bits``, on a backend whose state is in
        host memory (the CPU, and the CUDA simulator, whose arrays are NumPy's). On a device
        their upkeep reads 16 bytes back per store update, more than a batch's transfer budget
        allows for now (``tests/cuda_strict_cases.py``); the CUDA kernels that keep them exist
        and are tested in the simulator."""
        kernels = getattr(self, "kernels", None)
        return self.row_bits and (kernels is None or kernels.xp is np)

    def store_from_sorted(self, keys, vals, id_capacity: int) -> ZStore:
        """A part built from sorted unique keys, with the relation's row tables and bitmaps."""
        return ZStore.from_sorted(keys, vals, id_capacity, getattr(self, "kernels", None),
                                  self.index_min, self.bits)

    # the parts: replacing one (rebuild, restore) forgets the cached sum of squares
    @property
    def h(self) -> ZStore:
        return self._h

    @h.setter
    def h(self, store: ZStore) -> None:
        self._h = store
        self._sq = None  # a replaced part (rebuild, restore): recount the norms when needed

    @property
    def l(self) -> ZStore:  # noqa: E743
        return self._l

    @l.setter
    def l(self, store: ZStore) -> None:  # noqa: E743
        self._l = store
        self._sq = None

    @property
    def sq_bound(self) -> int:
        """An upper bound of ‖K‖₂² = Σ multiplicity² (exact after :meth:`refresh_norms`)."""
        if self._sq is None:
            self.refresh_norms()
        return self._sq

    def set_bounds(self, sq: int, mx: int) -> None:
        """Record upper bounds of Σ multiplicity² and max |multiplicity| after a batch."""
        self._sq = int(sq)
        self._sq_exact = False
        self.max_abs = int(mx)

    def refresh_norms(self) -> bool:
        """Recount Σ multiplicity² and max |multiplicity| exactly from the parts (one pass);
        False when they were exact already."""
        if self._sq is not None and self._sq_exact:
            return False
        vals = [self.h.items(sort=False)[1], self.l.items(sort=False)[1]]
        self._sq = sum(sum_squares(self.xp, v) for v in vals)
        self.max_abs = max(max_abs(self.xp, v) for v in vals)
        self._sq_exact = True
        return True

    def __len__(self) -> int:
        return len(self.h) + len(self.l)

    def grow_ids(self, capacity: int) -> None:
        for st in (self.h, self.l, self.ht):
            st.grow_ids(capacity)
        if capacity > self.heavy.shape[0]:
            new = self.xp.zeros(max(capacity, 2 * self.heavy.shape[0]), np.bool_)
            new[: self.heavy.shape[0]] = self.heavy
            self.heavy = new
            over = self.xp.zeros(new.shape[0], np.bool_)
            over[: self.over.shape[0]] = self.over
            self.over = over

    @property
    def id_capacity(self) -> int:
        return self.heavy.shape[0]

    def degree(self, xs: np.ndarray) -> np.ndarray:
        return self.h.live[xs] + self.l.live[xs]

    def get(self, keys: np.ndarray, assume_sorted: bool = False) -> np.ndarray:
        """Multiplicities of packed keys (0 where absent)."""
        xp = self.xp
        keys = xp.asarray(keys, dtype=np.int64)
        if self.h.size == 0:  # a heavy key without tuples holds 0 in both parts
            return self.l.get(keys, assume_sorted)
        hv = self.heavy[keys >> 32]
        if xp is not np:  # probe both parts for every key: no host reads of the split
            return xp.where(hv, self.h.get(keys, assume_sorted), self.l.get(keys, assume_sorted))
        out = xp.zeros(keys.shape[0], np.int64)
        if hv.any():
            out[hv] = self.h.get(keys[hv], assume_sorted)
        if (~hv).any():
            out[~hv] = self.l.get(keys[~hv], assume_sorted)
        return out

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """All tuples (packed keys sorted, multiplicities)."""
        hk, hv = self.h.items()
        lk, lv = self.l.items()
        return sort_pairs(self.xp.concatenate([hk, lk]), self.xp.concatenate([hv, lv]))

    def repartition_plan(self, n: int) -> RepartitionPlan:
        """What a strict repartition with base ``n`` would choose, from the parts' degrees:
        ε (chosen anew when automatic), the thresholds, and whether the heavy keys stay
        exactly the current ones (``same``)."""
        cap = self.id_capacity
        deg = self.h.live[:cap] + self.l.live[:cap]
        eps = choose_epsilon(n, deg, self.symmetric) if self.auto else self.eps
        th = Thresholds.of(n, eps)
        heavy = (deg >= th.strict) & (deg > 0)
        same = bool((heavy == self.heavy[:cap]).all())
        return RepartitionPlan(eps, th, same)

    def adopt(self, n: int, plan: RepartitionPlan) -> None:
        """Take base ``n``'s ε and thresholds from a plan whose heavy keys are the current
        ones (``plan.same``): the parts need no change."""
        self.eps, self.th = plan.eps, plan.th
        self.watch_lights(n)

    def rebuild(self, n: int, keys: np.ndarray | None = None, vals: np.ndarray | None = None):
        """Strict repartition with threshold N^ε (heavy iff degree >= ⌈N^ε⌉); ε chosen anew
        from the degrees first when it is automatic."""
        if keys is None:
            keys, vals = self.items()
        xp = self.xp
        cap = self.id_capacity
        firsts = keys >> 32
        deg = (xp.bincount(firsts, minlength=cap)[:cap] if keys.shape[0]
               else xp.zeros(cap, np.int64))
        if self.auto:
            self.eps = choose_epsilon(n, deg, self.symmetric)
        self.th = Thresholds.of(n, self.eps)
        heavy = deg >= self.th.strict
        heavy &= deg > 0
        self.heavy = xp.zeros(cap, np.bool_)
        self.heavy[: heavy.shape[0]] = heavy
        hm = self.heavy[firsts]
        self.h = self.store_from_sorted(keys[hm], vals[hm], cap)
        self.l = self.store_from_sorted(keys[~hm], vals[~hm], cap)
        tk, tv = sort_pairs(transpose(keys[hm]), vals[hm])
        self.ht = self.store_from_sorted(tk, tv, cap)
        self.max_abs = max_abs(xp, vals)
        self._sq = sum_squares(xp, vals)
        self._sq_exact = True
        self.watch_lights(n)

    def watch_lights(self, n: int) -> None:
        """Start counting the light keys above the work bound of base ``n`` (auto ε only)."""
        bound = work_bound(n)
        self.watch = bound if self.auto and self.th.up > bound else None
        cap = self.id_capacity
        self.over = self.xp.zeros(cap, np.bool_)
        if self.watch is not None:
            self.over[:] = ~self.heavy[:cap] & (self.degree(self.xp.arange(cap)) > bound)
        self.n_over = int(self.over.sum())

    def track_lights(self, keys: np.ndarray, deg: np.ndarray) -> None:
        """Update ``over`` / ``n_over`` for touched unique ``keys`` of current degree ``deg``."""
        if self.xp is np:  # one compiled pass
            self.n_over += watch_lights(keys, deg, self.heavy, self.over, self.watch)
            return
        new = ~self.heavy[keys] & (deg > self.watch)
        self.n_over += int(new.sum() - self.over[keys].sum())  # one read on a device
        self.over[keys] = new
