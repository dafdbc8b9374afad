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
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numba
import numpy as np

from .backend import Backend, get_backend
from .encoding import IdEncoder, transpose, unpack
from .errors import IntegerOverflowError, InvariantError, ResourceLimitError
from .partition import PartRel, sort_pairs
from .selection import compress_many, run_starts, select_many
from .views import ViewStore

INT64_SAFE = 1 << 62
CALIBRATE_MIN = 4096  # stored tuples from which the adaptive policy measures a recount
PAR_EMIT_MIN = 1 << 15  # view deltas per batch from which all threads emit them


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

    @property
    def epsilon_auto(self) -> bool:
        """True when the engine picks ε itself (``epsilon="auto"``) at every rebuild."""
        return any(r.auto for r in self.rels)

    # ------------------------------------------------------------------ sizes
    @property
    def size(self) -> int:
        """|D|: the number of stored tuples over all relations."""
        return sum(len(r) for r in self.rels)

    def _grow_ids(self, capacity: int) -> None:
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
            self.k.delta.path_weights(xp.ascontiguousarray(xs), xp.ascontiguousarray(ys), nx.h.nt(),
                            nx.l.nt(), pv.h.nt(), pv.l.nt(), pv.ht.nt(), view.sparse.nt(),
                            view.vrow, view.vmat, nx.heavy, pv.heavy, symmetric, out)
        return out

    def _view_update(self, view: ViewStore, keys: np.ndarray, vals: np.ndarray, st, left: bool):
        """Maintain a bilinear view under updates of one factor (see ``emit_view_deltas``)."""
        xp = self.xp
        xs, ys = unpack(keys)
        nt = st.nt()
        counts = xp.empty(keys.shape[0], np.int64)
        self.k.delta.expand_counts(ys if left else xs, nt, counts)
        total = int(counts.sum())
        if total == 0:
            return
        ok = xp.empty(total, np.int64)
        ov = xp.empty(total, np.int64)
        ms = xp.ascontiguousarray(vals, dtype=np.int64)
        par = getattr(self.k.view, "emit_view_deltas_par", None)
        if par is not None and total >= PAR_EMIT_MIN:
            ptr = xp.zeros(keys.shape[0] + 1, np.int64)
            xp.cumsum(counts, out=ptr[1:])
            par(xs, ys, ms, nt, left, view.vrow, view.vmat, ptr, ok, ov,
                numba.get_num_threads())
            nz = ov != 0
            ok, ov = ok[nz], ov[nz]
        else:
            n = self.k.view.emit_view_deltas(xs, ys, ms, nt, left, view.vrow, view.vmat, ok, ov)
            ok, ov = ok[:n], ov[:n]
        if ok.shape[0]:
            view.add(ok, ov)

    def _apply_part_deltas(self, k: int, hk, hv, lk, lv) -> None:
        """Add ΔK_h and ΔK_l to relation k, maintaining views[k] = K_h·Next_l and
        views[k-1] = Prev_h·K_l. Heavy first, then light (exact for the self-join too)."""
        K = self.rels[k]
        nx, pv = self._wiring(k)
        r = len(self.rels)
        if hk.shape[0]:
            self._view_update(self.views[k], hk, hv, nx.l, left=True)
            K.h.add(hk, hv)
            tk, tv = sort_pairs(transpose(hk), hv)
            K.ht.add(tk, tv)
        if lk.shape[0]:
            self._view_update(self.views[(k - 1) % r], lk, lv, pv.ht, left=False)
            K.l.add(lk, lv)

    # ------------------------------------------------------------------ phases
    def _phase(self, k: int, keys: np.ndarray, deltas: np.ndarray, q_delta, old=None) -> int:
        """Apply consolidated updates (sorted unique packed keys) to relation k; ``old``: the
        current multiplicities of ``keys`` when the caller knows them (set semantics)."""
        K = self.rels[k]
        firsts = keys >> 32
        if old is None:
            old = K.get(keys, assume_sorted=True)
        new = old + deltas
        sc = (new != 0).astype(np.int64) - (old != 0)
        starts = group_starts(firsts, self.xp)
        ux = firsts[starts]
        deg_new = K.degree(ux) + self.xp.add.reduceat(sc, starts)
        hv = K.heavy[ux]
        th = K.th
        xp = self.xp
        up = 1 if th.all_heavy else th.up
        # the three selections' sizes are read in one transfer on a device
        to_heavy, to_light, clear = compress_many(xp, [
            (ux, ~hv & (deg_new >= up)),
            (ux, hv & (deg_new < th.down) & (deg_new > 0)),
            (ux, hv & (deg_new == 0))])
        if to_heavy.shape[0] or to_light.shape[0]:
            self._move(k, to_heavy, to_light)
        dq = q_delta(keys, deltas) if q_delta is not None else 0
        hm = K.heavy[firsts]
        ih, il = select_many(xp, [hm, ~hm])
        self._apply_part_deltas(k, keys[ih], deltas[ih], keys[il], deltas[il])
        K.heavy[clear] = False
        if K.watch is not None:  # auto ε: light keys that grew past the rule's work bound
            K.track_lights(ux, deg_new)
        if new.shape[0]:
            K.max_abs = max(K.max_abs, int(self.xp.abs(new).max()))
        return dq

    def _move(self, k: int, to_heavy: np.ndarray, to_light: np.ndarray) -> None:
        """Minor rebalancing of the given keys of relation k (Q unchanged)."""
        K = self.rels[k]
        _, ak, av = K.l.rows(to_heavy)
        _, bk, bv = K.h.rows(to_light)
        xp = self.xp
        keys = xp.concatenate([ak, bk])
        if keys.shape[0]:
            order = xp.argsort(keys, kind="stable")
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
    def _run_phases(self, phases, q_delta_for, old=None, force: str | None = None) -> str:
        """Apply consolidated phases [(relation, sorted keys, deltas)] by the cheaper path.
        ``old``: per phase, the current multiplicities of its keys, if known."""
        plist = [(k, keys) for k, keys, _ in phases]
        if phases and not force:
            self._calibrate_recompute()
        path = force or (self.policy.choose(self, plist) if phases else "delta")
        if not phases:
            return path
        t1 = time.perf_counter()
        if path == "recompute":
            for k, keys, deltas in phases:
                self._store_raw(k, keys, deltas)
            self.Q = self._count_from_stores()
            self.stale = True
            self.policy.observe_recompute(time.perf_counter() - t1, self.size)
        else:
            try:
                self._freshen()
            except ResourceLimitError as e:
                self._degrade(e)
                return self._run_phases(phases, q_delta_for, old, force="recompute")
            t1 = time.perf_counter()
            for i, (k, keys, deltas) in enumerate(phases):
                self.Q += self._phase(k, keys, deltas, q_delta_for(k),
                                      None if old is None else old[i])
            self._major_check()
            self._epsilon_check()
            self.policy.observe_delta(time.perf_counter() - t1, self, plist)
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
        K.max_abs = max(K.max_abs, int(self.xp.abs(deltas).max()) + K.max_abs)

    def _freshen(self) -> None:
        """Bring a state left stale by the recompute path up to date: N = 2|D| + 1, strict
        partitions, views recomputed (preprocessing on the stored tuples; Q is already right)."""
        if not self.stale:
            return
        t0 = time.perf_counter()
        self.N = 2 * self.size + 1
        self._rebuild(self.N)
        self.stale = False
        self.policy.observe_rebuild(time.perf_counter() - t0, self.size)

    def _count_from_stores(self) -> int:
        raise NotImplementedError

    def _calibrate_recompute(self) -> None:
        """Measure the recompute rate with one static recount of the stored tuples (the state
        stays as it is) when the policy has none — an engine that started empty never ran
        preprocessing — or when |D| has grown 4× since the last measurement (the recount is
        superlinear). Costs one recount per 4× growth; the count doubles as a check of Q."""
        pol = self.policy
        if pol is None or not pol.enabled or pol.force:
            return
        size = self.size
        last = getattr(self, "_recompute_calibrated_at", 0)
        if size < CALIBRATE_MIN or (pol.recompute_sec_per_tuple is not None and size < 4 * last):
            return
        t = time.perf_counter()
        q = self._count_from_stores()
        seconds = time.perf_counter() - t
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
        t = time.perf_counter()
        self._path_weights(0, xs, ys, self.symmetric)
        seconds = time.perf_counter() - t
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
            try:
                self._rebuild(n)
            except ResourceLimitError as e:
                self._degrade(e)

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
        for k, K in enumerate(self.rels):
            nx, _ = self._wiring(k)
            rows = xp.flatnonzero(K.h.live[:cap] > 0) if len(nx.l) else xp.zeros(0, np.int64)
            paths = int(xp.dot(K.ht.live[:cap], nx.l.live[:cap])) if rows.shape[0] else 0
            bound += min(paths, rows.shape[0] * cap)
            plan.append((K, nx, rows))
        need = 16 * bound
        budget = memory_budget()
        if need > budget:
            raise ResourceLimitError(
                f"the materialized views may need up to {need / 2**30:.1f} GiB, more than the "
                f"memory budget of {budget / 2**30:.1f} GiB (set GPU_IVM_MEMORY_LIMIT, in bytes, "
                "to change it); a larger epsilon keeps fewer heavy keys and smaller views")
        for k, (K, nx, rows) in enumerate(plan):
            self.views[k] = ViewStore.product(K.h, nx.l, rows, cap, self.k)

    # ------------------------------------------------------------------ overflow guard
    def _check_overflow(self, batch_max, batch_rows: int) -> None:
        """Refuse, before any change, a batch whose values could leave int64.

        ``batch_max``: per relation (or one for all), the largest |multiplicity| the batch adds.
        Bound: |Q| <= Π M_k · |D|^1.5, batch deltas <= Π M_k · B · |D|, views <= M² · |D|, where
        M_k bounds |multiplicity| in relation k after the batch.
        """
        if isinstance(batch_max, int):
            batch_max = [batch_max] * len(self.rels)
        ms = [r.max_abs + b for r, b in zip(self.rels, batch_max)]
        if len(ms) == 1:
            ms = ms * 3
        m3 = ms[0] * ms[1] * ms[2]
        d = self.size + batch_rows + 1
        bound = m3 * (int(d**1.5) + 1 + batch_rows * d)
        if bound >= INT64_SAFE or max(ms) >= INT64_SAFE:
            raise IntegerOverflowError(
                "this batch could overflow int64: multiplicities up to "
                f"{max(ms)} with |D| = {self.size} bound the count by {bound}; nothing was changed"
            )

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path, *, metadata: dict | None = None) -> dict:
        """Write the whole state to folder ``path`` atomically (see :mod:`gpu_ivm.snapshot`);
        returns the manifest."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path, *, backend=None):
        """An engine restored from a snapshot folder, verified (checksums, invariants, Q)."""
        from .snapshot import load

        return load(path, backend=backend, expect=cls)

    # ------------------------------------------------------------------ invariants
    def check_invariants(self) -> None:
        """Check every structural invariant of the IVM^ε state; raise InvariantError if one fails.

        A state left stale by the recompute path is first brought up to date.

        Partition conditions (domain partition, heavy >= ⌈θ/2⌉, light < ⌈3θ/2⌉), the size
        invariant ⌊N/4⌋ <= |D| < N, consistency of the stores (degrees, transposed copy, no
        live zeros), and every view equal to its definition recomputed from the parts. Checked
        on host copies of the state, with NumPy (independent of the backend's kernels).
        """

        def fail(msg: str) -> None:
            raise InvariantError(msg)

        host = self.backend.to_host

        def items(st) -> tuple[np.ndarray, np.ndarray]:
            ks, vs = st.items()
            return host(ks), host(vs)

        self._freshen()

        d = self.size
        if not (self.N // 4 <= d < self.N):
            fail(f"size invariant: |D| = {d}, N = {self.N}")
        for K in self.rels:
            th = K.th
            if th.n != self.N:
                fail(f"{K.name}: thresholds for N = {th.n}, state N = {self.N}")
            for part, st in (("h", K.h), ("l", K.l), ("ht", K.ht)):
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
                if part == "h" and not heavy[ks >> 32].all():
                    fail(f"{K.name}_h holds a tuple of a light key")
                if part == "l" and heavy[ks >> 32].any():
                    fail(f"{K.name}_l holds a tuple of a heavy key")
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
        for k, K in enumerate(self.rels):
            nx, _ = self._wiring(k)
            ek, ev = _join_reference(*items(K.h), *items(nx.l))
            gk, gv = items(self.views[k])
            if not (np.array_equal(ek, gk) and np.array_equal(ev, gv)):
                fail(f"view {k} ({K.name}_h·{nx.name}_l) differs from its definition")

    # ------------------------------------------------------------------ timing helper
    def _report(self, t0: float, **kw) -> BatchReport:
        rep = BatchReport(seconds=time.perf_counter() - t0, **kw)
        self.last_report = rep
        return rep


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
