"""IVM^ε machinery shared by the graph and the three-relation engines.

An engine holds ``r`` partitioned relations K_0..K_{r-1} in a cycle (r = 3: R, S, T; r = 1: the
edge relation E, playing all three roles) and one bilinear view per relation,
``views[k] = K_k,h · K_{k+1},l`` (V_RS, V_ST, V_TR; or V = E_h·E_l). The maintained query is
Q = Σ K_0(a,b)·K_1(b,c)·K_2(c,a) (Q = tr(E³) in the graph form).

A batch is applied relation by relation (exact: each phase's deltas are linear in the phase's
relation and use the current state of the others, see docs/design.md), each phase as:

1. post-phase degrees of the touched keys → minor rebalancing first (keys leaving
   [⌈θ/2⌉, ⌈3θ/2⌉) move between parts, views adjusted, Q unchanged);
2. the count delta by expand + probe against the other relations and the views;
3. the tuples routed to the heavy or light part, view deltas by expansion, then stored;

and after the last phase, major rebalancing when |D| leaves [⌊N/4⌋, N).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import numba
import numpy as np

from .backend import Backend, get_backend
from .device_batch import DeviceKeyTable
from .encoding import IdEncoder, transpose, unpack
from .errors import IntegerOverflowError, InvariantError, ResourceLimitError, SetViolation
from .kernels.phase_kernels import clip_threshold, phase_degrees, split_heavy
from .overflow import LIMIT, VALUE_LIMIT, isqrt_ceil, max_abs, refuses, sum_squares
from .partition import PartRel, sort_pairs
from .selection import run_starts, select_many
from .views import ViewStore

CALIBRATE_MIN = 4096  # stored tuples from which the adaptive policy measures a recount
PAR_EMIT_MIN = 1 << 15  # view deltas per batch from which all threads emit them
# Profile mode (off by default): the count kernel also counts the adjacency entries and hash
# table slots each update reads, summed into ``engine.work`` (see bench/profile_batch.py).
PROFILE_WORK = False


@dataclass
class BatchReport:
    """What one batch did. ``to_dict()`` gives the JSON form printed by the CLI."""

    batch: int
    rows: int
    updates: int
    triangles: int
    delta: int
    seconds: float
    path: str = "delta"
    ignored: int = 0
    self_loops: int = 0
    major_rebalances: int = 0
    minor_moves: int = 0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d.update(self.extra)
        return d


def memory_budget() -> int:
    """Bytes the engine may allocate for a rebuild: ``GPU_IVM_MEMORY_LIMIT`` if set, else 80 %
    of the memory available now (MemAvailable), else unlimited."""
    env = os.environ.get("GPU_IVM_MEMORY_LIMIT")
    if env:
        return int(float(env))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 * 8 // 10
    except OSError:
        pass
    return 1 << 62


def group_starts(sorted_firsts: np.ndarray, xp=np) -> np.ndarray:
    """Start index of each run of equal values in a sorted array (of array module ``xp``)."""
    return xp.flatnonzero(run_starts(xp, sorted_firsts))


class TriangleEngineBase:
    """Common state and batch phases; see :class:`GraphEngine` and :class:`RelationEngine`."""

    names: tuple[str, ...] = ()
    symmetric = False
    unit_multiplicities = False  # the graph form: every stored multiplicity is 1
    mode = "general"

    def __new__(cls, *args: Any, mode: str = "general", **kwargs: Any):
        # GraphEngine(mode="insert_only" / "auto") and RelationEngine(mode=...) make the
        # subclass their insert-only module registered on them (register_mode_engine), so
        # the form's own module never imports its subclass
        modes = cls.__dict__.get("_mode_engine")
        if modes and str(mode).replace("-", "_") != "general":
            modes["check"](mode)
            return super().__new__(modes["class"])
        return super().__new__(cls)

    @classmethod
    def register_mode_engine(cls, engine_cls: type, check_mode: Callable[[str], str]) -> None:
        """Record on this form (GraphEngine, RelationEngine) the engine class of its
        non-general modes and the function that checks a mode name (the insert-only modules
        call this when imported)."""
        cls._mode_engine = {"class": engine_cls, "check": check_mode}

    def __init__(self, epsilons: list[Fraction | None], backend: str | Backend | None = None):
        self.backend = get_backend(backend)
        self.k = self.backend.kernels
        self.xp = self.backend.xp  # NumPy, or CuPy: every array of the state lives there
        self.encoder = IdEncoder()
        self.N = 1
        self.rels = [PartRel(nm, e, self.N, kernels=self.k)
                     for nm, e in zip(self.names, epsilons)]
        self.views = [ViewStore(kernels=self.k) for _ in self.rels]
        self.Q = 0
        self.batches_applied = 0
        self.last_batch_id: int | None = None  # the caller's id of the last applied batch
        self.last_report: BatchReport | None = None
        self._stats = {"major": 0, "moves": 0, "to_heavy": 0, "to_light": 0,
                       "eps_revisions": 0}
        # True after a batch took the recompute path: the stores hold the right tuples and Q is
        # right, but partitions, views and N are brought up to date only when a batch next
        # takes the delta path (so a run of large batches costs one recount each).
        self.stale = False
        self.policy = None  # set by the concrete engines
        # profile mode's counters (PROFILE_WORK): updates evaluated by the count kernel, entries
        # they read, and Σ min(deg x, deg y) over them (the min-degree bound of the graph form)
        self.work = {"updates": 0, "entries": 0, "min_degree_sum": 0}

    @property
    def epsilon_auto(self) -> bool:
        """True when the engine picks ε itself (``epsilon="auto"``) at every rebuild."""
        return any(r.auto for r in self.rels)

    # ------------------------------------------------------------------ sizes
    @property
    def size(self) -> int:
        """|D|: the number of stored tuples over all relations."""
        return sum(len(r) for r in self.rels)

    #: every first id stored or about to be stored is below this (what ``_grow_ids`` made
    #: room for; None until then), so a device store need not read a batch's last key back
    _id_bound: int | None = None
    #: a batch run ahead of its set-semantics check (on a device the check comes back with
    #: the phase's counts, on the host with the light store's location pass or just before
    #: the first change): called once the check passed; :class:`SetViolation` otherwise
    _unverified: Callable[[], None] | None = None
    #: on a device, (keys, launched phase, its counts read back): the phase of a batch whose
    #: sizes were read with it (``GraphEngine._apply_device``), taken by :meth:`_phase`
    _ahead: tuple | None = None
    #: on a device, while that phase is launched: device slots with the counts of its keys
    #: and of its pairs, the arrays padded behind them (what the count's kernels walk)
    _limits: tuple | None = None
    #: (inserts, deletes) of the phase's keys under set semantics, or None: the stores then
    #: know their new keys' bound and size change without reading them back
    _set_counts: tuple[int, int] | None = None

    # the device's copy of the encoder's table and keys: batches held in device memory are
    # encoded with it, results handed back on the device decoded with it
    _device_keys: DeviceKeyTable | None = None

    def _key_table(self) -> DeviceKeyTable:
        """The device's copy of the encoder's table (made on first use)."""
        if self._device_keys is None:
            self._device_keys = DeviceKeyTable(self.backend)
        return self._device_keys

    def _grow_ids(self, capacity: int) -> None:
        """Make room for ids below ``capacity`` in every id-indexed array. A growth at least
        doubles the room (the arrays double anyway), so that ``_id_bound`` is the room they
        all have: a batch whose new ids fit below it grows nothing (and may take the set
        check that rides on the batch's own work, ``GraphEngine._check_rides``)."""
        bound = self._id_bound or 0
        if capacity > bound:
            capacity = max(capacity, 2 * bound)
        self._id_bound = max(bound, capacity)
        for r in self.rels:
            r.grow_ids(capacity)
        for v in self.views:
            v.grow_ids(capacity)

    def _wiring(self, k: int):
        r = len(self.rels)
        return self.rels[(k + 1) % r], self.rels[(k - 1) % r]

    # ------------------------------------------------------------------ kernels
    def _path_weights(self, k: int, xs: np.ndarray, ys: np.ndarray, symmetric: bool) -> np.ndarray:
        """w_i = Σ_c Next(y_i, c)·Prev(c, x_i) for updates (x_i, y_i) of relation k."""
        nx, pv = self._wiring(k)
        view = self.views[(k + 1) % len(self.rels)]
        xp = self.xp
        out = xp.empty(xs.shape[0], np.int64)
        if xs.shape[0]:
            work = xp.zeros(xs.shape[0], np.int64) if PROFILE_WORK else None
            lim = {} if self._limits is None else {"lim": self._limits[1]}
            self.k.delta.path_weights(xp.ascontiguousarray(xs), xp.ascontiguousarray(ys), nx.h.nt(),
                            nx.l.nt(), pv.h.nt(), pv.l.nt(), pv.ht.nt(), view.sparse.nt(),
                            view.vrow, view.vmat, nx.heavy, pv.heavy, symmetric, out, work,
                            **lim)
            if work is not None:
                self.work["updates"] += int(xs.shape[0])
                self.work["entries"] += int(work.sum())
                self.work["min_degree_sum"] += int(xp.minimum(nx.degree(ys), pv.degree(xs)).sum())
        return out

    def _view_deltas(self, view: ViewStore, keys: np.ndarray, vals: np.ndarray, st,
                     left: bool, held=None):
        """The change of a bilinear view under updates of one factor (see
        ``emit_view_deltas``): the deltas that land in its dense rows are added there in place,
        the others returned as ``(keys, vals)`` for :meth:`ViewStore.add` (any order, repeats
        and zeros allowed), behind the deltas ``held`` for the same view where given (on a
        device written by the emission's launch), or None where there are none."""
        got = self._new_view_deltas(view, keys, vals, st, left, held)
        if got is None:  # nothing new
            return held
        joined, ok, ov = got
        if held is None or joined:
            return ok, ov
        xp = self.xp  # the host's emission: the two joined here
        return xp.concatenate((held[0], ok)), xp.concatenate((held[1], ov))

    def _new_view_deltas(self, view: ViewStore, keys, vals, st, left: bool, held):
        """:meth:`_view_deltas` less the host's join: None (no new delta) or ``(joined, ok,
        ov)``, ``joined`` True where ``held`` is already in front (the device's emission)."""
        if st.size == 0:  # the other factor is empty (ε = 1 has no heavy part): no deltas
            return None
        xp = self.xp
        nt = st.nt()
        split = getattr(self.k.delta, "expand_counts_split", None)
        if split is not None:  # on a device: the packed keys unpacked by the kernels, the
            # segments' sizes and both totals in one launch, one read, one scan
            keys = xp.ascontiguousarray(keys)
            ptr = xp.empty(keys.shape[0] + 1, np.int64)
            totals = split(keys, nt, view.vrow, left, ptr)
            expanded, total = (int(v) for v in totals.tolist())
            if expanded == 0:
                return None
            n_pre = 0 if held is None else held[0].shape[0]
            ok = xp.empty(n_pre + total, np.int64)
            ov = xp.empty(n_pre + total, np.int64)
            self.k.view.emit_view_keys(keys, xp.ascontiguousarray(vals, dtype=np.int64), nt,
                                       left, view.vrow, view.vmat, xp.cumsum(ptr), ok, ov,
                                       pre=held)
            # the view's consolidation drops the zero slots (summed away as key 0)
            return (True, ok, ov) if total else None
        xs, ys = unpack(keys)
        counts = xp.empty(keys.shape[0], np.int64)
        if left and view.vrow.shape[0]:
            self.k.delta.expand_counts(ys, nt, counts)
            # an update of the left factor whose row x of V is dense adds into that row in
            # place and emits no sparse delta: no output slots (and no zeros to drop) for it
            inside = xs < view.vrow.shape[0]
            dense = inside & (view.vrow[xp.where(inside, xs, 0)] >= 0)
            sparse_counts = xp.where(dense, 0, counts)
            both = xp.stack([counts.sum(), sparse_counts.sum()])  # one read on a device
            expanded, total = (int(v) for v in both.tolist())
            counts = sparse_counts
        else:
            self.k.delta.expand_counts(ys if left else xs, nt, counts)
            expanded = total = int(counts.sum())
        if expanded == 0:
            return None
        ok = xp.empty(total, np.int64)
        ov = xp.empty(total, np.int64)
        ms = xp.ascontiguousarray(vals, dtype=np.int64)
        par = getattr(self.k.view, "emit_view_deltas_par", None)
        if par is not None and expanded >= PAR_EMIT_MIN:  # the dense adds are work too
            ptr = xp.zeros(keys.shape[0] + 1, np.int64)
            xp.cumsum(counts, out=ptr[1:])
            par(xs, ys, ms, nt, left, view.vrow, view.vmat, ptr, ok, ov,
                numba.get_num_threads())
            nz = ov != 0
            ok, ov = ok[nz], ov[nz]
        else:
            n = self.k.view.emit_view_deltas(xs, ys, ms, nt, left, view.vrow, view.vmat, ok, ov)
            ok, ov = ok[:n], ov[:n]
        return (False, ok, ov) if ok.shape[0] else None

    def _apply_part_deltas(self, k: int, hk, hv, lk, lv, hints=(None, None),
                           sets_check: bool = False) -> None:
        """Add ΔK_h and ΔK_l to relation k, maintaining views[k] = K_h·Next_l and
        views[k-1] = Prev_h·K_l. Heavy first, then light (exact for the self-join too).
        ``hints``: the parts' ``ZStore.add`` hints, where known; ``sets_check``: the light
        part's add checks set semantics (``ZStore.add``; only where it is the first change)."""
        K = self.rels[k]
        nx, pv = self._wiring(k)
        r = len(self.rels)
        below = self._id_bound
        v_heavy, v_light = self.views[k], self.views[(k - 1) % r]
        held = None  # the heavy part's view deltas, added with the light part's (one view)
        if hk.shape[0]:
            d = self._view_deltas(v_heavy, hk, hv, nx.l, left=True)
            if d is not None and v_heavy is v_light and lk.shape[0]:
                held = d
            elif d is not None:
                v_heavy.add(*d, below=below)
            K.h.add(hk, hv, below, hint=hints[0])
            on_device = getattr(self.k.store, "transposed_sorted", None)  # 3 calls, not 7
            tk, tv = on_device(hk, hv) if on_device else sort_pairs(transpose(hk), hv)
            K.ht.add(tk, tv, below, hint=hints[0])
        if lk.shape[0]:
            # the light part's deltas read K.ht (just updated) and the view's dense rows, never
            # its sparse part, so the heavy part's sparse deltas can wait for these: where both
            # parts maintain the same view (the graph's one relation), one consolidation and
            # one add of the view's store instead of two
            d = self._view_deltas(v_light, lk, lv, pv.ht, left=False, held=held)
            if d is not None:
                v_light.add(*d, below=below)
            K.l.add(lk, lv, below, hint=hints[1], sets_check=sets_check)

    # ------------------------------------------------------------------ phases
    def _phase(self, k: int, keys: np.ndarray, deltas: np.ndarray, q_delta, old=None) -> int:
        """Apply consolidated updates (sorted unique packed keys) to relation k; ``old``: the
        current multiplicities of ``keys`` when the caller knows them (set semantics)."""
        K = self.rels[k]
        xp = self.xp
        if old is None:
            old = K.get(keys, assume_sorted=True)
        th = K.th
        up = 1 if th.all_heavy else th.up
        n_heavy_keys = None  # on a device: keys with a heavy first key, when no key moved
        into = None  # on a device: the count delta's launcher read with the phase's counts
        if xp is np:  # two compiled passes (kernels/phase_kernels.py)
            if self._ahead is not None:
                self._drop_ahead()
            ux, deg_new, to_heavy, to_light, clear = phase_degrees(
                keys, old, deltas, K.h.live, K.l.live, K.heavy, clip_threshold(up),
                clip_threshold(th.down))
        else:  # one kernel and one host read (kernels/cuda_phase.py); it also keeps K.over
            # the count delta is launched before that read and comes back with it; the rare
            # phase that moves keys recounts after the moves
            into = self._q_delta_into(q_delta)
            ph = self.k.phase
            ahead, self._ahead = self._ahead, None
            if ahead is not None and ahead[0] is keys:  # launched with the batch's preparation
                run, got = ahead[1], ahead[2]
            else:
                if ahead is not None:
                    ahead[1].undo()
                run, got = self._phase_launch(
                    k, keys, old, deltas, None if into is None else
                    lambda acc: into(keys, deltas, acc), self._unverified is not None), None
            counts, to_heavy, to_light, clear, hflags = run.result(got)
            self._verified(counts[ph.N_BAD])
            K.n_over += counts[ph.D_OVER]
            n_heavy_keys = counts[ph.N_HEAVY_KEYS]
        moved = bool(to_heavy.shape[0] or to_light.shape[0])
        if moved:
            self._check_ahead([(k, keys, deltas)])  # a batch not checked yet: before the moves
            self._move(k, to_heavy, to_light)
        if q_delta is None:
            dq = 0
        elif into is not None and not moved:  # read with the phase's counts
            dq = counts[self.k.phase.N_THEN]
        else:
            dq = q_delta(keys, deltas)
        sets = None if moved else self._set_counts  # the stores' hints (set semantics)
        hints = (None, None)
        if xp is np:
            ih, il = split_heavy(keys, K.heavy)
            parts = (keys[ih], deltas[ih], keys[il], deltas[il]) if ih.shape[0] else None
            if parts is not None and sets is not None:
                h_ins = int(np.count_nonzero(parts[1] > 0))
                hints = _part_hints(sets, h_ins, ih.shape[0])
        elif moved:  # the flags changed since the kernel read them
            hm = K.heavy[keys >> 32]
            ih, il = select_many(xp, [hm, ~hm])
            parts = (keys[ih], deltas[ih], keys[il], deltas[il]) if ih.shape[0] else None
        elif n_heavy_keys:  # sizes and flags known: one scan and one scatter
            parts = self.k.phase.split_parts(keys, deltas, hflags, n_heavy_keys)
            if sets is not None:
                hints = _part_hints(sets, counts[self.k.phase.N_HEAVY_INS], n_heavy_keys)
        else:
            parts = None
        # a batch not checked yet (host): its light store's add checks it as it locates the
        # keys when that add is the phase's first change (no heavy key, no view to update);
        # otherwise it is checked here
        in_add = (parts is None and self._unverified is not None
                  and self._wiring(k)[1].ht.size == 0
                  and hasattr(K.l.sk, "apply_updates_sets"))  # the host's store kernels
        if not in_add:
            self._check_ahead([(k, keys, deltas)])
        if parts is None:  # every key light (ε = 1, or no hub touched): no copies
            if sets is not None:
                hints = _part_hints(sets, 0, 0)
            self._apply_part_deltas(k, keys[:0], deltas[:0], keys, deltas, hints,
                                    sets_check=in_add)
            self._verified(0)  # the add passed the check (or none was pending)
        else:
            self._apply_part_deltas(k, *parts, hints)
        if clear.shape[0]:
            K.heavy[clear] = False
        if xp is np and K.watch is not None:  # auto ε: light keys past the rule's work bound
            K.track_lights(ux, deg_new)
        return dq

    def _phase_launch(self, k: int, keys, old, deltas, then, check: bool, counts=None,
                      lim=None):
        """On a device: the phase kernel of relation k launched (``cuda_phase.phase_launch``;
        ``check``: with the set check of ``(keys, deltas)``; ``counts``, ``lim``: see there)
        and not read yet."""
        K = self.rels[k]
        th = K.th
        up = 1 if th.all_heavy else th.up
        return self.k.phase.phase_launch(
            keys, old, deltas, K.h.live, K.l.live, K.heavy, K.over, clip_threshold(up),
            clip_threshold(th.down), -1 if K.watch is None else clip_threshold(K.watch),
            then=then, check=(K.h.nt(), K.l.nt()) if check else None, counts=counts, lim=lim)

    def _drop_ahead(self) -> None:
        """Undo a phase launched ahead of its batch (:attr:`_ahead`) that the batch will not
        take: before the state changes any other way (the recompute path, the host's
        rules, an error)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead[1].undo()

    def _verified(self, bad: int) -> None:
        """The set check of a batch run ahead of it (:attr:`_unverified`) came back with
        ``bad`` violations: raise :class:`SetViolation` (nothing changed yet), or let the
        batch go on."""
        done, self._unverified = self._unverified, None
        if done is None:
            return
        if bad:
            raise SetViolation(bad)
        done()

    def _check_ahead(self, phases) -> None:
        """:meth:`_verified` for a batch not checked yet that is about to change the state
        (the recompute path, a phase that moves keys first, or views to update first): the
        check runs and is read here."""
        if self._unverified is None:
            return
        self._verified(sum(self._conflicts(keys, deltas, k) for k, keys, deltas in phases))

    def _conflicts(self, keys, deltas, k: int = 0) -> int:
        """How many of relation k's sorted unique ``keys`` would leave {0, 1} with ``deltas``
        (set semantics; the id arrays must cover the keys)."""
        K = self.rels[k]
        if self.xp is np:
            after = K.get(keys, assume_sorted=True) + deltas
            return int(np.count_nonzero((after < 0) | (after > 1)))
        return self.k.phase.check_sets(K.h.nt(), K.l.nt(), K.heavy, keys, deltas,
                                       self.xp.empty(keys.shape[0], np.int64))

    def _q_delta_into(self, q_delta):
        """On a device: a launcher ``(keys, deltas, acc)`` that adds the count delta of
        ``q_delta`` into a device slot without reading it back, or None (each engine says
        which of its count deltas can)."""
        return None

    def _move(self, k: int, to_heavy: np.ndarray, to_light: np.ndarray) -> None:
        """Minor rebalancing of the given keys of relation k (Q unchanged)."""
        K = self.rels[k]
        _, ak, av = K.l.rows(to_heavy)
        _, bk, bv = K.h.rows(to_light)
        xp = self.xp
        keys = xp.concatenate([ak, bk])
        if keys.shape[0]:
            order = xp.argsort(keys)  # unique keys
            keys = keys[order]
            dh = xp.concatenate([av, -bv])[order]
            self._apply_part_deltas(k, keys, dh, keys, -dh)
        K.heavy[to_heavy] = True
        K.heavy[to_light] = False
        self._stats["moves"] += int(to_heavy.shape[0] + to_light.shape[0])
        self._stats["to_heavy"] += int(to_heavy.shape[0])
        self._stats["to_light"] += int(to_light.shape[0])

    def _skip_replayed(self, batch_id: int | None, t0: float) -> BatchReport | None:
        """Exactly-once support: a batch whose ``batch_id`` is not above the last applied one
        is a replay (e.g. after a restart) and is skipped."""
        if batch_id is None:
            return None
        batch_id = int(batch_id)
        if self.last_batch_id is not None and batch_id <= self.last_batch_id:
            return self._report(t0, batch=batch_id, rows=0, updates=0, triangles=self.count(),
                                delta=0, path="skipped")
        return None

    def _done(self, rep: BatchReport, batch_id: int | None) -> BatchReport:
        self.batches_applied += 1
        if batch_id is not None:
            self.last_batch_id = int(batch_id)
        return rep

    # ------------------------------------------------------------------ batch dispatch
    def _clock(self) -> float:
        """The host clock after the device has drained its queue (:meth:`Backend.synchronize`):
        what the adaptive policy's timings read, so an asynchronous launch is not timed as
        free."""
        self.backend.synchronize()
        return time.perf_counter()

    @staticmethod
    def _start_clock() -> float:
        """A batch's start: the host clock without waiting for the device, which is idle
        (the last batch, load or query of this engine ended with a host read or a wait)."""
        return time.perf_counter()

    def _run_phases(self, phases, q_delta_for, old=None, force: str | None = None) -> str:
        """Apply consolidated phases [(relation, sorted keys, deltas)] by the cheaper path.
        ``old``: per phase, the current multiplicities of its keys, if known."""
        plist = [(k, keys) for k, keys, _ in phases]
        path = force or (self.policy.choose(self, plist) if phases else "delta")
        if not phases:
            return path
        # the policy's timings wait for the device; a policy that reads none costs no wait
        pol = self.policy
        clock = self._clock if pol is not None and pol.enabled and not pol.force \
            else time.perf_counter
        t1 = clock()
        if path == "recompute":
            self._drop_ahead()
            self._check_ahead(phases)
            for k, keys, deltas in phases:
                self._store_raw(k, keys, deltas)
            self.Q = self._count_from_stores()
            self.stale = True
            self.policy.observe_recompute(clock() - t1, self.size, whole=True)
        else:
            rebuilt = self.stale  # the rebuild leaves caches cold: this batch is not timed
            try:
                self._freshen()
            except ResourceLimitError as e:
                self._degrade(e)
                return self._run_phases(phases, q_delta_for, old, force="recompute")
            t1 = clock()
            for i, (k, keys, deltas) in enumerate(phases):
                self.Q += self._phase(k, keys, deltas, q_delta_for(k),
                                      None if old is None else old[i])
            self._major_check()
            self._epsilon_check()
            self.policy.observe_delta(clock() - t1, self, plist, timed=not rebuilt)
        return path

    def _store_raw(self, k: int, keys: np.ndarray, deltas: np.ndarray) -> None:
        """Recompute path: store the tuples in K_h / K_l only. Views, the transposed copy K_ht,
        partitions and N go stale; ``_freshen`` rebuilds them all from K_h ∪ K_l."""
        K = self.rels[k]
        hm = K.heavy[keys >> 32]
        if hm.any():
            K.h.add(keys[hm], deltas[hm])
        if (~hm).any():
            K.l.add(keys[~hm], deltas[~hm])

    def _freshen(self) -> None:
        """Bring a state left stale by the recompute path up to date: N = 2|D| + 1, strict
        partitions, views recomputed (preprocessing on the stored tuples; Q is already right)."""
        if not self.stale:
            return
        t0 = self._clock()
        self.N = 2 * self.size + 1
        self._rebuild(self.N)
        self.stale = False
        self.policy.observe_rebuild(self._clock() - t0, self.size)

    def _count_from_stores(self) -> int:
        raise NotImplementedError

    def _calibrate_recompute(self) -> None:
        """Measure the recompute rate with one static recount of the stored tuples (the state
        stays as it is) when the policy has none — an engine that started empty never ran
        preprocessing — or when |D| has grown 4× since the last measurement (the recount is
        superlinear). Costs one recount per 4× growth; the count doubles as a check of Q.
        Called by :meth:`AdaptivePolicy.choose` for a batch whose choice reads the rate (a
        batch that takes deltas without the estimates needs none)."""
        pol = self.policy
        if pol is None or not pol.enabled or pol.force:
            return
        size = self.size
        last = getattr(self, "_recompute_calibrated_at", 0)
        if size < CALIBRATE_MIN or (pol.recompute_sec_per_tuple is not None and size < 4 * last):
            return
        t = self._clock()
        q = self._count_from_stores()
        seconds = self._clock() - t
        if q != self.Q:
            raise InvariantError(f"recount gives {q}, the maintained count is {self.Q}")
        pol.observe_recompute(seconds, size)
        self._recompute_calibrated_at = size

    def _calibrate_delta(self, sample: int = 2048) -> None:
        """Seed the adaptive policy's delta-path rate with the count kernel's time per work unit
        on a sample of stored tuples (run twice: the first call may load compiled code). On
        R-MAT streams a whole delta batch cost about the same per unit (the unit estimate
        counts the view-maintenance lists too); delta batches then refine the rate."""
        K = self.rels[0]
        keys, _ = K.l.items(sort=False)
        if keys.shape[0] < 64:
            keys, _ = K.h.items(sort=False)
        if keys.shape[0] < 64:
            return
        step = max(keys.shape[0] // sample, 1)
        keys = self.xp.sort(keys[::step][:sample])
        xs, ys = unpack(keys)
        units = self.policy.units(self, [(0, keys)])
        self._path_weights(0, xs, ys, self.symmetric)
        t = self._clock()
        self._path_weights(0, xs, ys, self.symmetric)
        seconds = self._clock() - t
        if units > 0:
            self.policy.sec_per_unit = seconds / units

    # ------------------------------------------------------------------ major rebalancing
    def _major_check(self) -> None:
        d = self.size
        n0 = n = self.N
        while not (n // 4 <= d < n):
            n = 2 * n if d >= n else max(n // 2 - 1, 1)
        if n != n0:
            self.N = n
            self._stats["major"] += 1
            if self._repartition_unchanged(n):
                return
            try:
                self._rebuild(n)
            except ResourceLimitError as e:
                self._degrade(e)

    def _repartition_unchanged(self, n: int) -> bool:
        """Major rebalancing to base ``n`` when the strict repartition keeps every relation's
        ε and heavy keys: only the thresholds change (the parts, the transposed copies and the
        views, which depend on the partition alone, stay as they are). Returns False, changing
        nothing, when some relation's partition would change: the caller rebuilds.

        Degrees come from the parts' live counts; ε is chosen again from them when automatic,
        as a rebuild would (:meth:`PartRel.repartition_plan`). On streams whose keys all stay
        light (ε = 1: a sliding window growing and shrinking) this keeps the amortized
        rebalancing of the paper without copying the stores at every doubling or halving."""
        plans = [r.repartition_plan(n) for r in self.rels]
        if not all(p.same for p in plans):
            return False
        for r, p in zip(self.rels, plans):
            r.adopt(n, p)
        return True

    def _epsilon_check(self) -> None:
        """Auto ε: when more light keys grew past the rule's work bound than it allows (one in
        the undirected graph, whose updates take their cheaper orientation; else none),
        rebuild now, choosing ε again, instead of waiting for the next major rebalancing."""
        allowed = 1 if self.symmetric else 0
        if any(r.watch is not None and r.n_over > allowed for r in self.rels):
            self._stats["major"] += 1
            self._stats["eps_revisions"] += 1
            try:
                self._rebuild(self.N)
            except ResourceLimitError as e:
                self._degrade(e)

    def _degrade(self, err: Exception) -> None:
        """A rebuild did not fit in memory: keep the (correct) tuples and count, leave views
        stale; batches take the recompute path until a rebuild fits again."""
        self.stale = True
        warnings.warn(f"gpu_ivm: {err}; recounting per batch until the views fit",
                      RuntimeWarning, stacklevel=3)

    def _rebuild(self, n: int) -> None:
        """Strict repartition of every relation with threshold n^ε and view recomputation."""
        cap = max(len(self.encoder), 1)
        self._grow_ids(cap)
        for r in self.rels:
            r.rebuild(n)
        self._rebuild_views()

    def _rebuild_views(self) -> None:
        """views[k] = K_h·Next_l from the parts, row by row (see ``ViewStore.product``).

        The views' size is bounded first (entries <= min(paths a→b→c, rows × ids)); a build
        that would not fit in the memory budget raises ResourceLimitError instead of exhausting
        the machine (factorized IVM's views are quadratic in the worst case)."""
        xp = self.xp
        cap = self.rels[0].id_capacity
        bound = 0
        plan = []
        sizes = []
        for k, K in enumerate(self.rels):
            nx, _ = self._wiring(k)
            rows = xp.flatnonzero(K.h.live[:cap] > 0) if len(nx.l) else xp.zeros(0, np.int64)
            paths = int(xp.dot(K.ht.live[:cap], nx.l.live[:cap])) if rows.shape[0] else 0
            bound += min(paths, rows.shape[0] * cap)
            sizes.append((min(paths, rows.shape[0] * cap), k, int(rows.shape[0]), paths))
            plan.append((K, nx, rows))
        need = 16 * bound
        budget = memory_budget()
        if need > budget:
            raise ResourceLimitError(self._view_budget_message(need, budget, max(sizes)))
        for k, (K, nx, rows) in enumerate(plan):
            self.views[k] = ViewStore.product(K.h, nx.l, rows, cap, self.k)

    def _view_budget_message(self, need: int, budget: int, largest: tuple) -> str:
        """Why the views do not fit: the largest view, what makes it big, which ε to change."""
        entries, k, rows, paths = largest
        K = self.rels[k]
        nx, _ = self._wiring(k)
        name = f"V_{K.name}{nx.name}" if len(self.rels) > 1 else "V"
        single = len(self.rels) == 1

        def eps(R) -> str:
            return f"ε = {R.eps}" if single else f"ε_{R.name} = {R.eps}"

        why = (f"{name} = {K.name}_h·{nx.name}_l, with up to {entries:,} entries: "
               f"{len(K.h):,} heavy tuples of {K.name} ({rows:,} heavy keys, {eps(K)}: "
               f"degree >= {K.th.strict:,}) meet {len(nx.l):,} light tuples of {nx.name} "
               f"({eps(nx)}: degree < {nx.th.up:,}) along {paths:,} paths")
        if single:
            fix = ("ε = 1/2 bounds every light degree by ⌈3/2·N^(1/2)⌉, so the view has at "
                   "most that many entries per heavy tuple")
        else:
            fix = (f"the view shrinks when {K.name} has fewer heavy keys (raise "
                   f"ε_{K.name}) or {nx.name} fewer light tuples (lower ε_{nx.name}); "
                   f"ε_{K.name} = ε_{nx.name} = 1/2 bounds each light degree of {nx.name} by "
                   "⌈3/2·N^(1/2)⌉, so the view has at most that many entries per heavy tuple "
                   f"of {K.name}")
        if K.eps == 0 and nx.eps == 1:
            why += (f" (ε_{K.name} = 0 makes every key of {K.name} heavy and ε_{nx.name} = 1 "
                    f"every key of {nx.name} light: the view is the whole product "
                    f"{K.name}·{nx.name}, quadratic in the worst case)")
        return (f"the materialized views may need up to {need / 2**30:.1f} GiB, more than the "
                f"memory budget of {budget / 2**30:.1f} GiB (GPU_IVM_MEMORY_LIMIT, in bytes, "
                f"sets it; default 80% of the available memory). The largest is {why}. To fix: "
                f"{fix}.")

    # ------------------------------------------------------------------ overflow guard
    def _check_overflow(self, updates: dict[int, np.ndarray]) -> dict:
        """Refuse, before any change, a batch whose values could leave int64.

        ``updates``: relation index -> the batch's consolidated nonzero deltas (host int64).
        Bound (see :mod:`gpu_ivm.overflow`): every value of the batch is at most
        ``Π_k max(1, ‖K_k‖₂ + ‖δ_k‖₂)`` times the number of product terms it sums; a batch is
        refused when that product reaches 2**59 (int64 with a factor 16 to spare) or a
        multiplicity could reach 2**62.

        ‖K_k‖₂² is known as an upper bound carried from batch to batch (‖K + δ‖₂ <= ‖K‖₂ +
        ‖δ‖₂: no read of the stored values per batch); when a batch would be refused on those
        bounds, they are first recounted exactly from the stores (one pass) and the batch is
        judged on the exact norms, so drift never refuses a batch. The graph form's
        multiplicities are 1: there ‖E‖₂² = |E| is always exact. Returns what
        :meth:`_commit_norms` records once the batch is applied.
        """
        if self.unit_multiplicities and len(self.rels) == 1 and list(updates) == [0]:
            # the graph form's common case in a few integer operations (same bound, same
            # result; a batch it would refuse goes the general way, which words the error)
            K = self.rels[0]
            x = isqrt_ceil(len(K)) + isqrt_ceil(updates[0].shape[0])
            if max(1, x) ** 3 < LIMIT and K.max_abs + 1 < VALUE_LIMIT:
                return {0: (x * x, K.max_abs + 1)}

        def bounds():
            xs, pending = [], {}
            for k, K in enumerate(self.rels):
                x = isqrt_ceil(len(K) if self.unit_multiplicities else K.sq_bound)
                if k in updates:
                    d = updates[k]
                    if self.unit_multiplicities:  # the deltas are ±1: Σ d² = len, max |d| = 1
                        x += isqrt_ceil(d.shape[0])
                        pending[k] = (x * x, K.max_abs + 1)
                    else:
                        x += isqrt_ceil(sum_squares(np, d))
                        pending[k] = (x * x, K.max_abs + max_abs(np, d))
                xs.append(x)
            return (xs * 3 if len(xs) == 1 else xs), pending

        def too_big(xs, pending) -> bool:
            return refuses(xs) or any(m >= VALUE_LIMIT for _, m in pending.values())

        xs, pending = bounds()
        if too_big(xs, pending) and not self.unit_multiplicities:
            if any([K.refresh_norms() for K in self.rels]):  # exact norms, then judge again
                xs, pending = bounds()
        if too_big(xs, pending):
            norms = ", ".join(f"{K.name}: {x}" for K, x in zip(self.rels, xs))
            largest = max((m for _, m in pending.values()), default=0)
            raise IntegerOverflowError(
                "this batch could overflow int64: the triangle bound Π(‖K‖₂ + ‖δ‖₂) over the "
                f"relations ({norms}) reaches 2**59, the guard's limit (int64 with a factor 16 "
                f"to spare), or a multiplicity could reach 2**62 (up to {largest}); nothing "
                "was changed")
        return pending

    def _commit_norms(self, pending: dict) -> None:
        """Record the norm bounds a checked batch left (see :meth:`_check_overflow`)."""
        if self.unit_multiplicities:  # ‖K‖₂² = |K| is read off the size; multiplicities are 1
            for k in pending:
                self.rels[k].max_abs = max(self.rels[k].max_abs, 1)
            return
        for k, (sq, mx) in pending.items():
            self.rels[k].set_bounds(sq, mx)

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path, *, metadata: dict | None = None):
        """Write the whole state to folder ``path`` atomically (see :mod:`gpu_ivm.snapshot`);
        returns a :class:`gpu_ivm.snapshot.SnapshotInfo` (path, batch_id, count, files, bytes,
        created). The full manifest is ``gpu_ivm.snapshot.read_manifest(path)``."""
        from .snapshot import SnapshotInfo, save

        return SnapshotInfo.of(path, save(self, path, metadata=metadata))

    @classmethod
    def restore(cls, path, *, backend=None):
        """An engine restored from a snapshot folder, verified (checksums, invariants, Q)."""
        from .snapshot import load

        return load(path, backend=backend, expect=cls)

    # ------------------------------------------------------------------ invariants
    def check_invariants(self) -> list[str]:
        """Check the IVM^ε state against its definitions; raise InvariantError if one fails.

        Read-only: nothing of the engine changes (a stale state is checked as it is, not
        brought up to date). Checked on host copies with plain NumPy, independent of the
        backend's kernels:

        * the stores: no stored zero, sizes and degree arrays match the tuples, tombstone
          counts, the domain partition (heavy keys' tuples in K_h, light keys' in K_l), every
          row bitmap equal to its row (:func:`gpu_ivm.invariants.check_row_bits`);
        * the count: Q equals Σ R(a,b)·S(b,c)·T(c,a) (graph form: tr(E³)) recounted from the
          stored tuples by the static counter (a worst-case-optimal join, not the maintenance
          kernels; O(|D|^1.5));
        * when the state is up to date: the size invariant ⌊N/4⌋ <= |D| < N, thresholds for N,
          heavy degrees >= ⌈θ/2⌉, light degrees < ⌈3θ/2⌉, K_ht the transpose of K_h, and every
          view equal to its definition K_h·Next_l;
        * with ``maintain=``: the free-query state (its copy of the relations, its count, every
          view of paper 001 against its definition, and the per-vertex counts, per-edge counts
          and triangle listing as read, against a recount from the stored tuples by plain
          NumPy joins, which cost Σ_b in-degree·out-degree: quadratic in the worst case).

        Returns the parts not checked: empty for an up-to-date state; after a batch took the
        recompute path (``stale``), a note naming the derived parts (partitions, thresholds,
        N, K_ht, views) that the next delta-path batch rebuilds from the stored tuples.
        """
        from .invariants import check_free_queries, check_row_bits, triangles_reference

        def fail(msg: str) -> None:
            raise InvariantError(msg)

        host = self.backend.to_host

        def items(st) -> tuple[np.ndarray, np.ndarray]:
            ks, vs = st.items()
            return host(ks), host(vs)

        fresh = not self.stale
        d = self.size
        if fresh and not (self.N // 4 <= d < self.N):
            fail(f"size invariant: |D| = {d}, N = {self.N}")
        for K in self.rels:
            th = K.th
            if fresh and th.n != self.N:
                fail(f"{K.name}: thresholds for N = {th.n}, state N = {self.N}")
            for part, st in (("h", K.h), ("l", K.l), ("ht", K.ht)):
                if part == "ht" and not fresh:
                    continue
                ks, vs = items(st)
                live, heavy = host(st.live), host(K.heavy)
                if (vs == 0).any():
                    fail(f"{K.name}_{part}: stored zero multiplicity")
                if ks.shape[0] != len(st):
                    fail(f"{K.name}_{part}: size {len(st)} but {ks.shape[0]} live tuples")
                cnt = np.bincount(ks >> 32, minlength=st.id_capacity)
                if not np.array_equal(cnt[: st.id_capacity], live):
                    fail(f"{K.name}_{part}: degree array differs from the tuples")
                if (host(st.tomb) < 0).any():
                    fail(f"{K.name}_{part}: negative tombstone count")
                check_row_bits(st, host, ks, vs, fail, f"{K.name}_{part}")
                if part == "h" and not heavy[ks >> 32].all():
                    fail(f"{K.name}_h holds a tuple of a light key")
                if part == "l" and heavy[ks >> 32].any():
                    fail(f"{K.name}_l holds a tuple of a heavy key")
            if not fresh:
                continue
            hk, hv = items(K.h)
            tk, tv = items(K.ht)
            t2k, t2v = sort_pairs(transpose(hk), hv)
            if not (np.array_equal(tk, t2k) and np.array_equal(tv, t2v)):
                fail(f"{K.name}_ht is not the transpose of {K.name}_h")
            deg = host(K.h.live) + host(K.l.live)
            hv_ = host(K.heavy)[: deg.shape[0]]
            if (hv_ & (deg == 0)).any():
                fail(f"{K.name}: heavy flag on a key without tuples")
            if (hv_ & (deg > 0) & (deg < th.down)).any():
                fail(f"{K.name}: heavy key with degree < ⌈θ/2⌉ = {th.down}")
            if (~hv_ & (deg >= th.up)).any():
                fail(f"{K.name}: light key with degree >= ⌈3θ/2⌉ = {th.up}")
            if th.all_heavy and len(K.l):
                fail(f"{K.name}: ε = 0 but the light part is not empty")
        if fresh:
            for k, K in enumerate(self.rels):
                nx, _ = self._wiring(k)
                ek, ev = _join_reference(*items(K.h), *items(nx.l))
                gk, gv = items(self.views[k])
                if not (np.array_equal(ek, gk) and np.array_equal(ev, gv)):
                    fail(f"view {k} ({K.name}_h·{nx.name}_l) differs from its definition")
        stored = []
        for K in self.rels:
            ks, vs = (np.concatenate(x) for x in zip(items(K.h), items(K.l)))
            order = np.argsort(ks, kind="stable")
            stored.append((ks[order], vs[order]))
        rels3 = [stored[k % len(stored)] for k in range(3)]
        q = int(self._count_from_stores())
        if q != self.Q:
            fail(f"the maintained count Q = {self.Q}, recounted from the stored tuples: {q}")
        notes = []
        if getattr(self, "fq", None) is not None:
            if getattr(self, "fq_fed", False):
                tri = triangles_reference(*rels3)
                if int(tri[3].sum()) != self.Q:
                    fail(f"the maintained count Q = {self.Q}, the triangles of the stored "
                         f"tuples sum to {int(tri[3].sum())}")
                check_free_queries(self, rels3, fail, tri)
            elif self.size:
                notes.append("the free-query state was not built yet (a restore builds it "
                             "after this check): not checked")
        if not fresh:
            notes.append("stale after a recompute-path batch: partitions, thresholds, N, the "
                         "transposed heavy parts and the views are rebuilt from the stored "
                         "tuples by the next delta-path batch; checked the stored tuples and "
                         "the count only")
        return notes

    # ------------------------------------------------------------------ timing helper
    def _report(self, t0: float, **kw) -> BatchReport:
        rep = BatchReport(seconds=self._clock() - t0, **kw)
        self.last_report = rep
        return rep


def _part_hints(sets: tuple[int, int], h_ins: int, h_keys: int):
    """``ZStore.add`` hints of a phase's heavy and light parts under set semantics: the
    phase's (inserts, deletes) and its heavy part's inserts and keys. A part's new keys are
    at most its inserts (a delete's key is stored), its size changes by inserts - deletes."""
    ins, dels = sets
    h_del = h_keys - h_ins
    return (h_ins, h_ins - h_del), (ins - h_ins, (ins - h_ins) - (dels - h_del))


def sum_products(ms: np.ndarray, ws: np.ndarray) -> int:
    """Exact Σ m_i·w_i as a Python int (int64 kernel sum under the overflow guard)."""
    if ms.shape[0] == 0:
        return 0
    return int(np.dot(ms, ws))


def _join_reference(ak, av, bk, bv) -> tuple[np.ndarray, np.ndarray]:
    """Σ_b A(a,b)·B(b,c) by plain NumPy (independent of the kernels), sorted, zeros dropped."""
    if ak.shape[0] == 0 or bk.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    a, b = unpack(ak)
    bf, bs = unpack(bk)  # bk sorted, so bf sorted
    lo = np.searchsorted(bf, b, "left")
    hi = np.searchsorted(bf, b, "right")
    cnt = hi - lo
    rep = np.repeat(np.arange(a.shape[0]), cnt)
    offs = np.arange(rep.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pos = lo[rep] + offs
    keys = (a[rep] << 32) | bs[pos]
    vals = av[rep] * bv[pos]
    order = np.argsort(keys, kind="stable")
    keys, vals = keys[order], vals[order]
    starts = group_starts(keys)
    sums = np.add.reduceat(vals, starts) if keys.shape[0] else vals
    ukeys = keys[starts]
    nz = sums != 0
    return ukeys[nz], sums[nz]
