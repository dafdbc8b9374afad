"""Insert-only mode of the three-relation form: both orientations, no views, no rebalancing.

``RelationEngine(mode="insert_only")`` builds an :class:`InsertOnlyRelationEngine`. Under
inserts only, Q = Σ R(a,b)·S(b,c)·T(c,a) needs no heavy/light partition and no materialized
view (paper 003, Example 5.3; digest ``paper-insert-only-vs-insert-delete.md`` §3.2 and §8a):
every relation is indexed by both of its columns, and an insert of (a, b) into R adds
m·Σ_c S(b,c)·T(c,a), an intersection of S's row b with T's row a (transposed) that walks the
shorter row and looks the other up, O(min degree) per insert and O(N^{1/2}) amortized by the
paper's argument. A batch is applied relation by relation (R, then S, then T), each phase
against the current state of the two others: the ordered delta rule of digest §8a, under
which every product term of the batch is counted exactly once. The inserts of one phase are
grouped by their first column, whose row is marked once per group
(:func:`gpu_ivm.kernels.delta_kernels.first_grouped_weights`).

The state is the general engine's at ε = 0 with nothing light: each relation's tuples in K_h,
their transpose in K_ht, every key with a tuple flagged heavy, and the views K_h·Next_l empty
because every light part is. New keys join K_h directly, so there are no minor moves, and N
only follows |D| (at ε = 0 the threshold N^0 = 1 does not depend on N): no major rebalancing
either. The state is thus a valid IVM^ε state, so :meth:`check_invariants`, snapshots and
``--resume`` work as for the general engine.

Multiplicities are positive (bag semantics: a tuple inserted again adds to its multiplicity).
A row with a negative multiplicity is a delete: refused with an :class:`~gpu_ivm.errors.InputError`
naming the row (nothing changes) in ``insert_only`` mode; ``mode="auto"`` builds the general
IVM^ε structures with the engine's ε from the stored tuples at the first delete (one strict
repartition) and goes on as a general engine; that batch's report says so
(``path == "switched"``).

A batch whose intersections would read more than ``RECOUNT_RATIO`` times the stored tuples is
counted by a static recount instead (``path == "insert_only_recount"``; same result).

Count only (``maintain=`` and ``track_changes=`` are refused up front). On the cuda backend
the phase weights run on the device (:func:`gpu_ivm.kernels.cuda_delta.first_grouped_weights`,
one thread per tuple walking its two rows), the rest as for the general engine there.

Examples
--------
>>> from gpu_ivm import RelationEngine
>>> e = RelationEngine(mode="insert_only")
>>> _ = e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]})
>>> e.apply({"rel": ["T", "T"], "src": [3, 3], "dst": [1, 1], "mult": [1, 2]}).delta
3
>>> type(e).__name__, e.count()
('InsertOnlyRelationEngine', 3)
>>> a = RelationEngine(mode="auto")
>>> _ = a.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]},
...            T={"src": [3], "dst": [1]})
>>> rep = a.apply({"rel": ["S"], "src": [2], "dst": [3], "mult": [-1]})
>>> rep.path, rep.triangles, a.insert_only_active
('switched', 0, False)
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np

from . import io
from .encoding import transpose, unpack
from .engine import BatchReport
from .errors import InputError
from .insert_only import check_mode
from .partition import sort_pairs
from .rational import Thresholds
from .relation_engine import REL_NAMES, RelationEngine, _epsilons

# a batch whose intersections (Σ over its tuples of the shorter row) exceed this many times
# the stored tuples is counted by a static recount instead (same result)
RECOUNT_RATIO = 2


class InsertOnlyRelationEngine(RelationEngine):
    """The three-relation engine in insert-only (or auto) mode; see the module docstring.

    Made by ``RelationEngine(mode="insert_only")`` or ``RelationEngine(mode="auto")``; takes
    the same arguments as :class:`RelationEngine` except that ``maintain`` and
    ``track_changes`` are refused. ``epsilon`` is the ε of the general structures that
    auto mode builds at the first delete (the insert-only state itself has no partition).
    """

    def __init__(self, *, epsilon="auto", backend=None, adaptive: bool = True,
                 maintain=None, track_changes: bool = False, mode: str = "insert_only"):
        mode = check_mode(mode)
        if mode == "general":
            raise InputError("InsertOnlyRelationEngine needs mode 'insert_only' or 'auto'",
                             column="mode")
        if maintain not in (None, [], (), "count", ["count"]) or track_changes:
            raise InputError(f"mode {mode!r} maintains the count only; drop maintain= and "
                             "track_changes= or use the general mode", column="maintain")
        self._general_eps = _epsilons(epsilon)  # checked now, used at the switch
        super().__init__(epsilon=Fraction(0), backend=backend, adaptive=adaptive)
        self.mode = mode
        self.insert_only_active = True

    def __repr__(self) -> str:
        if not self.insert_only_active:
            return super().__repr__()
        sizes = {K.name: len(K) for K in self.rels}
        return (f"RelationEngine(mode={self.mode!r}, tuples={sizes}, count={self.Q}, "
                f"backend={self.backend.name!r})")

    @property
    def general_epsilons(self) -> list:
        """The ε setting of the general structures (``None``: automatic): those auto mode
        builds at the first delete, or, once it has, those in use."""
        if self.insert_only_active:
            return list(self._general_eps)
        return [None if K.auto else K.eps for K in self.rels]

    # ------------------------------------------------------------------ loading
    def _check_load(self, parts: list) -> None:
        """A negative multiplicity at load: refused in insert-only mode (nothing is loaded);
        auto mode starts with the general structures."""
        if not self.insert_only_active:
            return
        for name, (_, _, mult) in zip(REL_NAMES, parts):
            neg = np.flatnonzero(mult < 0)
            if neg.shape[0] == 0:
                continue
            if self.mode == "insert_only":
                raise InputError(f"relation {name}: this row has multiplicity "
                                 f"{int(mult[neg[0]])}, but the engine runs in insert_only "
                                 "mode, which accepts inserts only; nothing was loaded",
                                 column="mult", row=int(neg[0]))
            self._become_general()
            return

    # ------------------------------------------------------------------ batches
    def apply(self, updates: Any, *, batch_id: int | None = None,
              **read_options: Any) -> BatchReport:
        """Apply a batch of inserts (see :meth:`RelationEngine.apply`). In insert-only mode a
        row with a negative multiplicity is refused with :class:`~gpu_ivm.errors.InputError`
        (nothing changes); in auto mode the first one switches the engine to the general
        structures."""
        if not self.insert_only_active:
            return super().apply(updates, batch_id=batch_id, **read_options)
        t0 = time.perf_counter()
        skipped = self._skip_replayed(batch_id, t0)
        if skipped is not None:
            return skipped
        u = io.read_relation_updates(updates, **read_options)
        neg = np.flatnonzero(u.mult < 0)
        if neg.shape[0]:
            return self._on_delete(u, int(neg[0]), updates, batch_id, t0, read_options)
        rows = len(u)
        phases, norms, new = self._prepare(u)
        if self.xp is not np:  # the stores are in device memory: the phases go up once
            phases = [(k, self.xp.asarray(keys), self.xp.asarray(d)) for k, keys, d in phases]
        self.encoder.commit(new)
        self._grow_ids(max(len(self.encoder), 1))
        q_before = self.Q
        if phases and self._work(phases) > RECOUNT_RATIO * max(self.size, 1):
            for k, keys, d in phases:
                self._store_insert(k, keys, d)
            self.Q = self._count_from_stores()
            path = "insert_only_recount"
        else:
            for k, keys, d in phases:
                self.Q += self._insert_delta(k, keys, d)
                self._store_insert(k, keys, d)
            path = "insert_only"
        self._commit_norms(norms)
        self._follow_size()
        rep = self._report(t0, batch=self.batches_applied, rows=rows,
                           updates=sum(p[1].shape[0] for p in phases), triangles=self.Q,
                           delta=self.Q - q_before, path=path)
        return self._done(rep, batch_id)

    def _pairs(self, k: int, keys: np.ndarray):
        """The stores whose rows phase k intersects: (Prev transposed, rows by the keys' first
        column; Next, rows by their second column)."""
        nx, pv = self._wiring(k)
        return pv.ht, nx.h

    def _insert_delta(self, k: int, keys: np.ndarray, deltas: np.ndarray) -> int:
        """Σ_i deltas[i]·Σ_c Next(y_i, c)·Prev(c, x_i) for the phase's keys (x_i, y_i)."""
        stx, sty = self._pairs(k, keys)
        w, _ = self.backend.kernels.delta.first_grouped_weights(
            keys, stx.nt(), sty.nt(), self.rels[0].id_capacity)
        return int(self.xp.dot(deltas, w))

    def _work(self, phases) -> int:
        """Entries the phases' intersections read at most: Σ of the shorter row per tuple."""
        total = 0
        for k, keys, _ in phases:
            stx, sty = self._pairs(k, keys)
            x, y = unpack(keys)
            total += int(self.xp.minimum(stx.live[x], sty.live[y]).sum())
        return total

    def _store_insert(self, k: int, keys: np.ndarray, deltas: np.ndarray) -> None:
        """Add the phase's tuples to K_h and their transpose to K_ht; their first keys are
        heavy (the insert-only layout has no light part)."""
        K = self.rels[k]
        K.h.add(keys, deltas)
        tk, tv = sort_pairs(transpose(keys), deltas)
        K.ht.add(tk, tv)
        K.heavy[keys >> 32] = True

    def _follow_size(self) -> None:
        """N within ⌊N/4⌋ <= |D| < N, moved by doubling or halving as a major rebalancing
        would; at ε = 0 the thresholds do not depend on N, so nothing is rebuilt."""
        d = self.size
        n = self.N
        while not (n // 4 <= d < n):
            n = 2 * n if d >= n else max(n // 2 - 1, 1)
        if n != self.N:
            self.N = n
            for K in self.rels:
                K.th = Thresholds.of(n, K.eps)

    def _on_delete(self, u, r: int, updates, batch_id, t0, read_options) -> BatchReport:
        if self.mode == "insert_only":
            s, d = u.src[r], u.dst[r]
            s = s.item() if hasattr(s, "item") else s
            d = d.item() if hasattr(d, "item") else d
            raise InputError(f"this row gives the tuple {REL_NAMES[int(u.rel[r])]}({s!r}, "
                             f"{d!r}) multiplicity {int(u.mult[r])}, a delete, but the engine "
                             "runs in insert_only mode, which accepts inserts only (use "
                             "mode='auto' or the general mode for streams with deletes); "
                             "nothing was applied", column="mult", row=r)
        ts = time.perf_counter()
        self._become_general()
        switch_s = time.perf_counter() - ts
        try:
            rep = super().apply(updates, batch_id=batch_id, **read_options)
        except BaseException:  # a refused batch leaves the engine insert-only, as it was
            self._become_insert_only()
            raise
        rep.seconds = time.perf_counter() - t0
        rep.path = "switched"
        rep.extra["switched"] = (f"first delete (row {r}): general IVM^eps structures built "
                                 f"from the {self.size} stored tuples in {switch_s:.3f} s")
        return rep

    def _set_epsilons(self, eps: list) -> None:
        for K, e in zip(self.rels, eps):
            K.auto = e is None
            K.eps = Fraction(1) if e is None else e

    def _become_general(self) -> None:
        """Strict repartition with the general ε and the views built, from the stored tuples
        (Q is unchanged); the engine goes on as a general one."""
        if not self.insert_only_active:
            return
        from .warmup import warm_up

        warm_up()  # the general kernels, as a general engine's load() does
        self._set_epsilons(self._general_eps)
        self._rebuild(self.N)
        self.insert_only_active = False

    def mark_general(self) -> None:
        """Mark a fresh engine as switched, before a snapshot of the general state that auto
        mode reached is restored into it (:func:`gpu_ivm.snapshot.load`)."""
        self._set_epsilons(self._general_eps)
        self.insert_only_active = False

    def _become_insert_only(self) -> None:
        self._set_epsilons([Fraction(0)] * 3)
        self._rebuild(self.N)
        self.insert_only_active = True


# RelationEngine(mode=...) builds this class
RelationEngine.register_mode_engine(InsertOnlyRelationEngine, check_mode)
