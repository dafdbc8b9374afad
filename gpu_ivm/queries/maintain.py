"""IVM^ε maintenance of the free-variable triangle queries Δ1, Δ2, Δ3 (paper 001, §4–§7).

:class:`FreeQueries` holds R, S, T (dense ids, multiplicities > 0), the heavy/light flags the
chosen query families need, and their views (``specs.py``). A batch is applied relation by
relation (R, then S, then T: the delta of each phase is linear in that relation's updates and
uses the current state of the two others, so no δ·δ terms are needed). One phase:

1. post-phase degrees of the touched values → minor rebalancing: a value whose degree leaves
   [⌈½θ⌉, ⌈3⁄2θ⌉) on its side flips its flag; its stored tuples are moved as −(old labels) and
   +(new labels) updates (MoveTuples of Figure 16; only views that read that flag see them);
2. every view that contains the relation gets its delta from batched kernel calls
   (``kernels/query_kernels.py``): updates of the relation, each with the labels of its tuple,
   joined with the other atom(s) of the view by walking the shortest bounded list, or — when
   the view's key lies inside the relation's schema and a materialized view aggregates the
   other two atoms the same way (V_ST, V̂_RS, ...) — by one lookup in that view; the
   3-relation views share one intersection per update whose terms are classified by their
   labels (``_fused_deltas``), except for updates with two long rows;
3. the relation's two indexes are updated, flags of values that vanished are reset.

After the batch, |D| outside [⌊N/4⌋, N) triggers major rebalancing: N = 2|D| + 1, strict
partitions, every view rebuilt through the same phases. With change tracking on, the triangles
each batch creates or removes (δΔ3, found by full intersection: output-sensitive) are kept for
:meth:`changed_triangles`.

All state lives in the backend's array module ``xp`` (``kernels.xp``: NumPy on the CPU, CuPy
when the engine's state is in device memory); inputs may be host or ``xp`` arrays and are
uploaded once. Results (:meth:`changed_triangles`, ``gpu_ivm.queries.results``) are ``xp``
arrays too: the public side downloads them before building Arrow arrays.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..encoding import pack, transpose, unpack
from ..kernels import query_kernels as _cpu_query_kernels
from ..kernels import view_kernels as _cpu_view_kernels
from ..kernels.phase_kernels import clip_threshold
from ..kernels.triple_sort import rows_order
from ..rational import Thresholds
from ..selection import array_module, compress_many, select_many, to_host
from ..store import ZStore
from ..views import product_entries
from . import specs as sp
from .storage import (
    Relation,
    View,
    consolidate,
    unique_sorted,
    unique_sorted_many,
)

FUSE_CHUNK = 1 << 22  # triangle terms per fused pass (bounds its memory)
BULK_FRACTION = 4  # batches with more than |D|/4 updates rebuild instead of applying deltas


def _pattern_array(spec: sp.ViewSpec, k: int) -> np.ndarray:
    n, p = (k + 1) % 3, (k + 2) % 3
    return np.array([*spec.pattern[k], *spec.pattern[n], *spec.pattern[p]], np.int64)


class FreeQueries:
    """Views and partitions for the chosen families among ``vertex_counts`` (Δ1),
    ``edge_counts`` (Δ2) and ``triangles`` (Δ3); ids are dense non-negative ints.

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1, 2)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0], [1]), e([1], [2]), e([2], [0])], 3)
    >>> fq.count
    1
    """

    def __init__(self, families, epsilons: list[Fraction], kernels=None, track_changes=False):
        unknown = set(families) - set(sp.FAMILIES)
        if unknown:
            raise ValueError(f"unknown query families {sorted(unknown)}")
        self.families = [f for f in sp.FAMILIES if f in families]
        self.epsilons = list(epsilons)
        self.kernels = kernels
        # the array module of the state (NumPy, or CuPy with the state in device memory)
        self.xp = xp = array_module(kernels)
        self._empty = xp.zeros(0, np.int64)
        # the backend's query kernels (CPU Numba unless the backend brings its own)
        self.qk = getattr(kernels, "query", None) or _cpu_query_kernels
        self._pats: dict = {}  # (spec, k) -> pattern array for the kernels, in xp
        self.track_changes = track_changes
        self.specs = sp.views_for(self.families)
        self.views = {v.signature: View(len(v.key), kernels) for v in self.specs}
        self.by_name = {}
        for f in self.families:
            for v in sp.family(f):
                self.by_name[v.name] = (v, self.views[v.signature])
        self.roots = [v for v in sp.family(self.families[0]) if v.root] if self.families else []
        used = set()
        for v in self.specs:
            for k in v.atoms:
                for pos in (0, 1):
                    if v.pattern[k][pos] != sp.ANY:
                        used.add((k, pos))
        self.used_flags = used
        self.rels = [Relation(kernels) for _ in range(3)]
        self.N = 1
        self.th = [Thresholds.of(self.N, e) for e in self.epsilons]
        self.cap = 0
        self._count = 0
        # on a device the root sums are added up there and read once, when count is read
        self._dcount = None if xp is np else xp.zeros((), np.int64)
        self.changes: list[tuple[np.ndarray, ...]] = []
        self.bulk_fraction = BULK_FRACTION  # 0: always apply deltas (tests)
        # set by the graph form when R = S = T = a symmetric edge set with multiplicities 1:
        # preprocessing then lists each triangle once instead of intersecting per tuple
        self.graph_undirected = False
        self.product_build = True  # tests: False builds the 2-relation views by deltas too
        self.fuse_limit: int | None = None  # tests: -1 sends every update to the per-view walks
        self.stats = {"major": 0, "moves": 0, "bulk": 0}
        self._lookup_view = self._aggregates()

    # ------------------------------------------------------------------ structure
    def _aggregates(self) -> dict:
        """For (3-atom view, relation k): the 2-atom view that answers its delta by lookup."""
        out = {}
        two = [v for v in self.specs if len(v.atoms) == 2]
        for v in self.specs:
            if len(v.atoms) != 3:
                continue
            for k in range(3):
                own = {k, (k + 1) % 3}
                if not set(v.key) <= own:
                    continue
                others = tuple(sorted({0, 1, 2} - {k}))
                for w in two:
                    if (w.atoms == others and set(w.key) == own
                            and all(w.pattern[j] == v.pattern[j] for j in others)):
                        out[(v.signature, k)] = w
                        break
        return out

    @property
    def count(self) -> int:
        """Δ0: the number of triangles (with multiplicities), from the root views' deltas."""
        if self._dcount is not None:
            return self._count + int(self._dcount)
        return self._count

    @count.setter
    def count(self, value: int) -> None:
        self._count = int(value)
        if self._dcount is not None:
            self._dcount[...] = 0

    def _add_count(self, vals) -> None:
        """Add Σ vals (root-view terms) to the count (no host read on a device)."""
        if self._dcount is None:
            self._count += int(vals.sum())
        else:
            self._dcount += vals.sum()

    def _pattern(self, spec: sp.ViewSpec, k: int):
        """The pattern array the query kernels take (cached; uploaded once on a device)."""
        pat = self._pats.get((spec, k))
        if pat is None:
            pat = _pattern_array(spec, k)
            if self.xp is not np:
                pat = self.xp.asarray(pat)
            self._pats[(spec, k)] = pat
        return pat

    @property
    def size(self) -> int:
        return sum(len(r) for r in self.rels)

    def grow_ids(self, cap: int) -> None:
        if cap <= self.cap:
            return
        self.cap = max(cap, 2 * self.cap)
        for r in self.rels:
            r.grow_ids(self.cap)
        for v in self.views.values():
            v.grow_ids(self.cap)

    def view(self, name: str) -> View:
        return self.by_name[name][1]

    def spec(self, name: str) -> sp.ViewSpec:
        return self.by_name[name][0]

    def _default_flag(self, k: int) -> int:
        return 1 if self.th[k].all_heavy else 0

    # ------------------------------------------------------------------ build
    def build(self, rels: list[tuple[np.ndarray, np.ndarray, np.ndarray]], cap: int) -> None:
        """Preprocessing from (first ids, second ids, multiplicities > 0) of R, S, T."""
        self.grow_ids(max(cap, 1))
        data = []
        for i, (a, b, m) in enumerate(rels):
            if i and rels[i] is rels[i - 1]:  # the graph form passes one edge set three times
                data.append(data[-1])
                continue
            xp = self.xp
            keys, vals = consolidate(pack(xp.asarray(a, dtype=np.int64),
                                          xp.asarray(b, dtype=np.int64)),
                                     xp.asarray(m, dtype=np.int64), self.kernels)
            data.append((keys, vals))
        self._rebuild(data)

    def _rebuild(self, data) -> None:
        total = sum(k.shape[0] for k, _ in data)
        self.N = 2 * total + 1
        self.th = [Thresholds.of(self.N, e) for e in self.epsilons]
        for v in self.views.values():
            v.clear()
            v.grow_ids(self.cap)
        self.count = 0
        xp = self.xp
        for k, rel in enumerate(self.rels):
            rel.rebuild(self._empty, self._empty, self.cap)
            keys, _ = data[k]
            for pos in (0, 1):
                f = xp.zeros(self.cap, np.uint8)
                if (k, pos) in self.used_flags and keys.shape[0]:
                    col = (keys >> 32) if pos == 0 else (keys & 0xFFFFFFFF)
                    deg = xp.bincount(col, minlength=self.cap)
                    f[deg >= self.th[k].strict] = 1
                    f[deg == 0] = self._default_flag(k)
                elif (k, pos) in self.used_flags:
                    f[:] = self._default_flag(k)
                rel.flags[pos] = f
            rel.set_heavy_lists()
        listing = None
        if self.graph_undirected and data[0][0].shape[0]:
            from ..static import list_triangles_xp

            keys = data[0][0]  # listed where the state lives (on a device: by the device)
            listing = list_triangles_xp(keys >> 32, keys & 0xFFFFFFFF, self.cap, self.kernels)
        products = self._product_views() if self.product_build else []
        for k in range(3):
            keys, vals = data[k]
            mine = [(v, k1, k2) for v, k1, k2 in products if max(k1, k2) == k]
            if keys.shape[0]:
                self._phase(k, keys, vals, rebalance=False, track=False,
                            listing=listing if k == 2 else None,
                            skip={v.signature for v, _, _ in mine})
            for v, k1, k2 in mine:  # complete once both relations are stored
                self._build_product(v, k1, k2)

    def _product_views(self) -> list[tuple[sp.ViewSpec, int, int]]:
        """2-relation views V(x, z) = Σ_y K1(x, y)·K2(y, z) (V_RS, V_ST, V_TR and their
        Δ1/Δ2 forms), which preprocessing builds as sparse products instead of deltas."""
        out = []
        for v in self.specs:
            if len(v.atoms) != 2 or len(v.key) != 2:
                continue
            a, b = v.atoms
            k1 = a if (a + 1) % 3 == b else b
            k2 = (k1 + 1) % 3
            if v.key == (k1, (k2 + 1) % 3):
                out.append((v, k1, k2))
        return out

    def _part_store(self, k: int, pattern: tuple[int, int]) -> ZStore:
        """The tuples of relation k in the part ``pattern`` (rows by its first variable)."""
        rel = self.rels[k]
        keys, vals = rel.fwd.items()
        keep = self.xp.ones(keys.shape[0], bool)
        if pattern[0] != sp.ANY:
            keep &= rel.flags[0][keys >> 32] == pattern[0]
        if pattern[1] != sp.ANY:
            keep &= rel.flags[1][keys & 0xFFFFFFFF] == pattern[1]
        return ZStore.from_sorted(keys[keep], vals[keep], self.cap, self.kernels)

    def _build_product(self, spec: sp.ViewSpec, k1: int, k2: int) -> None:
        """Gustavson's row-wise product of the two parts (one dense accumulator; the memory of
        the result, never of the (x, y, z) paths), straight into one sorted base run; kernel
        sets without ``build_view_rows`` (a device) take the expand-sort-reduce form,
        :func:`~gpu_ivm.views.product_entries`."""
        left = self._part_store(k1, spec.pattern[k1])
        right = self._part_store(k2, spec.pattern[k2])
        lk, _ = left.items()
        rows = unique_sorted(lk >> 32, self.xp)
        vk = getattr(self.kernels, "view", None) or _cpu_view_kernels
        if hasattr(vk, "build_view_rows"):
            _, _, keys, vals = vk.build_view_rows(rows, left.nt(), right.nt(), max(self.cap, 1),
                                                  1 << 62, 1)
        else:
            keys, vals = product_entries(left, right, rows, self.kernels)
        self.views[spec.signature].store = ZStore.from_sorted(keys, vals, self.cap,
                                                               self.kernels)
        if spec.root and any(spec is r for r in self.roots):  # (2-relation views are no roots)
            self._add_count(vals)

    # ------------------------------------------------------------------ batches
    def check(self, k: int, keys: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """Indices of updates that would make a multiplicity negative (paper footnote 2), as a
        host array (``keys`` and ``deltas`` may be host arrays: they are uploaded)."""
        xp = self.xp
        if xp is np:
            old = self.rels[k].get(keys)
            return np.flatnonzero(old + deltas < 0)
        neg = self.rels[k].get(xp.asarray(keys, dtype=np.int64)) \
            + xp.asarray(deltas, dtype=np.int64) < 0
        if not bool(neg.any()):  # the usual case: one read
            return np.zeros(0, np.int64)
        return xp.asnumpy(xp.flatnonzero(neg))

    def apply(self, phases, cap: int) -> None:
        """Apply one batch: ``phases`` = [(k, sorted unique packed keys, nonzero deltas)]
        (host arrays are uploaded; arrays of the state's module are used as they are)."""
        self.grow_ids(cap)
        if self.xp is not np:
            xp = self.xp
            phases = [(k, xp.asarray(keys, dtype=np.int64), xp.asarray(d, dtype=np.int64))
                      for k, keys, d in phases]
        self.changes = []
        updates = sum(p[1].shape[0] for p in phases)
        if self.bulk_fraction and updates * self.bulk_fraction > self.size:
            # a batch this large costs less as a rebuild (preprocessing) than as deltas
            for k, keys, deltas in phases:
                if self.track_changes and keys.shape[0]:
                    x, y = unpack(keys)
                    self._track(k, x, y, deltas)
                self.rels[k].add(keys, deltas)
            self.stats["bulk"] += 1
            self._rebuild([r.items() for r in self.rels])
            return
        for k, keys, deltas in phases:
            if keys.shape[0]:
                self._phase(k, keys, deltas, rebalance=True, track=self.track_changes)
        size = self.size
        if size >= self.N or size < self.N // 4:
            self.stats["major"] += 1
            self._rebuild([r.items() for r in self.rels])

    def _new_flags(self, k: int, pos: int, vals: np.ndarray, ins: np.ndarray, rem: np.ndarray,
                   u: np.ndarray):
        """Write the flags after this phase of the touched values ``u`` (= unique_sorted(vals))
        of one variable (``new_flags``: one pass on the host, two launches on a device);
        returns (flipped, vanished): masks over ``u`` of the values whose flag changed while
        they had tuples, and of those left without tuples."""
        rel = self.rels[k]
        xp = self.xp
        th = self.th[k]
        flip = xp.empty(u.shape[0], np.bool_)
        gone = xp.empty(u.shape[0], np.bool_)
        live = (rel.fwd if pos == 0 else rel.bwd).live
        self.qk.new_flags(u, vals, ins, rem, live, rel.flags[pos], self._default_flag(k),
                          clip_threshold(th.up), clip_threshold(th.down), flip, gone)
        return flip, gone

    def _phase(self, k: int, keys, deltas, rebalance: bool, track: bool,
               listing=None, skip=frozenset()) -> None:
        rel = self.rels[k]
        x, y = unpack(keys)
        moves = None
        if rebalance:
            old = rel.get(keys)
            new = old + deltas
            ins = ((old == 0) & (new != 0)).astype(np.int64)
            rem = ((old != 0) & (new == 0)).astype(np.int64)
            used = [(pos, col) for pos, col in ((0, x), (1, y)) if (k, pos) in self.used_flags]
            touched = unique_sorted_many(self.xp, [col for _, col in used])
            picks = []  # (values, mask) pairs: flipped and vanished values of each side
            for (pos, col), u in zip(used, touched):
                flip, gone = self._new_flags(k, pos, col, ins, rem, u)
                picks += [(u, flip), (u, gone)]
            picked = compress_many(self.xp, picks)
            flipped = [self._empty, self._empty]
            vanished = []
            for i, (pos, _) in enumerate(used):
                flipped[pos] = picked[2 * i]
                vanished.append((pos, picked[2 * i + 1]))
            moves = self._move_tuples(k, flipped)
        if track and deltas.shape[0]:
            self._track(k, x, y, deltas)
        fx = rel.flags[0][x]
        fy = rel.flags[1][y]
        cache: dict = {}
        fused = self._fused_specs(k)
        if fused and listing is not None:
            self._fused_from_listing(k, fused, listing)
        elif fused:
            self._fused_deltas(k, fused, x, y, deltas, fx, fy, moves)
        for spec in self.specs:
            if k not in spec.atoms or spec in fused or spec.signature in skip:
                continue
            xs, ys, ms, fxs, fys = x, y, deltas, fx, fy
            if moves is not None and moves[0].shape[0]:
                sel = self._moves_for(spec, k, moves)
                if sel.shape[0]:
                    cat = self.xp.concatenate
                    mx, my, mv, ofx, ofy, nfx, nfy = (m[sel] for m in moves)
                    xs = cat([x, mx, mx])
                    ys = cat([y, my, my])
                    ms = cat([deltas, -mv, mv])
                    fxs = cat([fx, ofx, nfx])
                    fys = cat([fy, ofy, nfy])
            self._view_delta(spec, k, xs, ys, ms, fxs, fys, cache)
        rel.add(keys, deltas)
        if rebalance:
            for pos, gone in vanished:
                rel.flags[pos][gone] = self._default_flag(k)
            if any(f.shape[0] for f in flipped) or vanished:
                rel.set_heavy_lists()
            if moves is not None:
                self.stats["moves"] += int(moves[0].shape[0])
        else:
            rel.set_heavy_lists()

    # ------------------------------------------------------------------ fused triangle pass
    def _fused_specs(self, k: int) -> list[sp.ViewSpec]:
        """The 3-relation views whose phase-k delta is not a lookup: their terms are the
        triangles through the phase's updates, found together by one intersection."""
        return [v for v in self.specs if len(v.atoms) == 3 and k in v.atoms
                and self._lookup_view.get((v.signature, k)) is None]

    def _fused_deltas(self, k: int, fused, x, y, deltas, fx, fy, moves) -> None:
        """Deltas of the views ``fused`` for the phase's updates and moves.

        Updates whose shorter row (N(y, ·) or P(·, x)) is at most ``L`` — light rows, and any
        row when heavy lists are as long — walk that row once, merged with the other, and each
        triangle found is classified by its six labels into the views whose pattern it matches
        (the roots partition the triangles, so each term lands in one root). The other updates
        (both rows long: heavy on both sides) take each view's own bounded walk (heavy lists)
        as before. Moves are included for every view: for a view whose pattern does not read
        the flipped flag, the −old and +new terms are equal and cancel when the view adds them.
        """
        N, P = self.rels[(k + 1) % 3], self.rels[(k + 2) % 3]
        xp = self.xp
        xs, ys, ms, fxs, fys = x, y, deltas, fx, fy
        if moves is not None and moves[0].shape[0]:
            mx, my, mv, ofx, ofy, nfx, nfy = moves
            xs = xp.concatenate([x, mx, mx])
            ys = xp.concatenate([y, my, my])
            ms = xp.concatenate([deltas, -mv, mv])
            fxs = xp.concatenate([fx, ofx, nfx])
            fys = xp.concatenate([fy, ofy, nfy])
        nlive, plive = N.fwd.live, P.bwd.live
        dn = xp.where(ys < nlive.shape[0], nlive[xp.minimum(ys, nlive.shape[0] - 1)], 0) \
            if nlive.shape[0] else xp.zeros(ys.shape[0], np.int64)
        dp = xp.where(xs < plive.shape[0], plive[xp.minimum(xs, plive.shape[0] - 1)], 0) \
            if plive.shape[0] else xp.zeros(xs.shape[0], np.int64)
        th_n, th_p = self.th[(k + 1) % 3], self.th[(k + 2) % 3]
        limit = max(th_n.up, th_p.up, 4 * (N.heavy[1].shape[0] + P.heavy[0].shape[0])) \
            if self.fuse_limit is None else self.fuse_limit
        short = xp.minimum(dn, dp) <= limit
        groups: dict = {}
        for spec in fused:
            scalar = set(spec.key) <= {k, (k + 1) % 3}
            groups.setdefault((scalar, spec.atoms, spec.pattern), []).append(spec)
        si, li = select_many(xp, [short, ~short])
        if si.shape[0]:
            self._fused_short(k, groups, xs[si], ys[si], ms[si], fxs[si], fys[si])
        if li.shape[0]:
            for (scalar, _, _), specs in groups.items():
                cols, vals = self._terms(specs[0], k, scalar, xs[li], ys[li], ms[li], fxs[li],
                                         fys[li])
                self._add_terms(specs, cols, vals)

    def _fused_short(self, k: int, groups, xs, ys, ms, fxs, fys) -> None:
        xp = self.xp
        _, _, _, length = self._plan(k, _ALL_TRIANGLES, xp.ascontiguousarray(xs, dtype=np.int64),
                                     xp.ascontiguousarray(ys, dtype=np.int64), fxs, fys)
        ends = xp.cumsum(length)
        total, m = int(ends[-1]), xs.shape[0]
        stops = [m]
        if total > FUSE_CHUNK:  # cut where the running total passes each multiple of the chunk
            marks = xp.arange(1, -(-total // FUSE_CHUNK), dtype=np.int64) * FUSE_CHUNK
            cuts = to_host(xp, xp.searchsorted(ends, marks, side="right"))  # a few ints
            stops = sorted({int(c) for c in cuts.tolist() if 0 < c < m} | {m})
        start = 0
        for stop in stops:
            sl = slice(start, stop)
            idx, z, w = self.expand(k, _ALL_TRIANGLES, xs[sl], ys[sl], ms[sl], fxs[sl], fys[sl])
            start = stop
            if w.shape[0]:
                self._classify(k, groups, xs[sl][idx], ys[sl][idx], z, w, fxs[sl][idx],
                               fys[sl][idx])

    def _classify(self, k: int, groups, tx, ty, z, w, ofx, ofy) -> None:
        """Send triangle terms (update (tx, ty) with labels (ofx, ofy), third value z, weight
        w) to the views whose pattern their six labels match. Every group's mask comes from
        one pass (``label_masks``: one launch on a device, for up to ``LABEL_GROUPS_MAX``
        groups), the patterns packed into two scalars."""
        N, P = self.rels[(k + 1) % 3], self.rels[(k + 2) % 3]
        xp = self.xp
        todo = list(groups.values())
        masks = xp.empty((len(todo), w.shape[0]), np.bool_)
        step = _cpu_query_kernels.LABEL_GROUPS_MAX
        for g0 in range(0, len(todo), step):
            part = todo[g0 : g0 + step]
            care = want = 0
            for g, specs in enumerate(part):
                for j, p in enumerate(_pattern_array(specs[0], k).tolist()):
                    bit = 1 << (_cpu_query_kernels.LABEL_BITS * g + j)
                    care |= bit if p != sp.ANY else 0
                    want |= bit if p == sp.HEAVY else 0
            self.qk.label_masks(tx, ty, z, ofx, ofy, N.flags[0], N.flags[1], P.flags[0],
                                P.flags[1], care, want, masks[g0 : g0 + len(part)])
        rows = [masks[g] for g in range(len(todo))]
        if xp is np:  # one mask at a time
            sels = (np.flatnonzero(m) for m in rows)
        else:  # the masks' sizes are read in one transfer
            sels = select_many(xp, rows)
        for specs, sel in zip(todo, sels):
            if sel.shape[0] == 0:
                continue
            cols = {k: tx[sel], (k + 1) % 3: ty[sel], (k + 2) % 3: z[sel]}
            self._add_terms(specs, cols, w[sel])

    def _fused_from_listing(self, k: int, fused, listing) -> None:
        """Preprocessing of a simple undirected graph (R = S = T = E, multiplicities 1): the
        last phase's triangle terms are the six orderings of each triangle of a static
        listing (degree-ordered, each triangle found once) instead of one intersection per
        tuple of T."""
        groups: dict = {}
        for spec in fused:
            groups.setdefault((spec.atoms, spec.pattern), []).append(spec)
        T = self.rels[k]
        tri = listing
        n = tri[0].shape[0]
        step = max(FUSE_CHUNK, 1)
        for perm in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
            for s0 in range(0, n, step):
                a = tri[perm[0]][s0:s0 + step]
                b = tri[perm[1]][s0:s0 + step]
                c = tri[perm[2]][s0:s0 + step]
                # the update is T(c, a); the third value is b (k = 2: x = C, y = A, z = B)
                self._classify(k, groups, c, a, b, self.xp.ones(a.shape[0], np.int64),
                               T.flags[0][c], T.flags[1][a])

    def _add_terms(self, specs, cols, vals) -> None:
        for spec in specs:
            if spec.root and any(spec is r for r in self.roots):
                self._add_count(vals)
            self.views[spec.signature].add([cols[v] for v in spec.key], vals)

    def _move_tuples(self, k: int, flipped: list[np.ndarray]):
        """The stored tuples of the flipped values, with old and new labels of both sides."""
        rel = self.rels[k]
        xp = self.xp
        fx_vals, fy_vals = flipped
        if fx_vals.shape[0] == 0 and fy_vals.shape[0] == 0:
            return None
        parts_k, parts_v = [], []
        if fx_vals.shape[0]:
            _, kk, vv = rel.fwd.rows(fx_vals)
            parts_k.append(kk)
            parts_v.append(vv)
        if fy_vals.shape[0]:
            _, kk, vv = rel.bwd.rows(fy_vals)
            kk = transpose(kk)
            if fx_vals.shape[0]:
                keep = ~xp.isin(kk >> 32, fx_vals)
                kk, vv = kk[keep], vv[keep]
            parts_k.append(kk)
            parts_v.append(vv)
        mk = xp.concatenate(parts_k)
        mv = xp.concatenate(parts_v)
        mx, my = unpack(mk)
        # flags were already switched to the new values; rebuild the old ones
        nfx = rel.flags[0][mx]
        nfy = rel.flags[1][my]
        ofx = nfx.copy()
        ofy = nfy.copy()
        if fx_vals.shape[0]:
            hit = xp.isin(mx, fx_vals)
            ofx[hit] = 1 - nfx[hit]
        if fy_vals.shape[0]:
            hit = xp.isin(my, fy_vals)
            ofy[hit] = 1 - nfy[hit]
        return mx, my, mv, ofx, ofy, nfx, nfy

    def _moves_for(self, spec: sp.ViewSpec, k: int, moves) -> np.ndarray:
        xp = self.xp
        _, _, _, ofx, ofy, nfx, nfy = moves
        want = xp.zeros(ofx.shape[0], bool)
        if spec.pattern[k][0] != sp.ANY:
            want |= ofx != nfx
        if spec.pattern[k][1] != sp.ANY:
            want |= ofy != nfy
        return xp.flatnonzero(want)

    # ------------------------------------------------------------------ deltas
    def _args(self, k: int, spec: sp.ViewSpec):
        n, p = (k + 1) % 3, (k + 2) % 3
        N, P = self.rels[n], self.rels[p]
        return (n in spec.atoms, p in spec.atoms, N.fwd.nt(), N.flags[0], N.flags[1],
                N.heavy[1], P.bwd.nt(), P.flags[1], P.flags[0], P.heavy[0])

    def _plan(self, k: int, spec: sp.ViewSpec, xs, ys, fxs, fys):
        """Count pass: per update, the list to walk and its length."""
        args = self._args(k, spec)
        use_n, use_p, nst, n_fx, n_fy, n_hl, pst, p_fy, p_fx, p_hl = args
        xp = self.xp
        pat = self._pattern(spec, k)
        m = xs.shape[0]
        choice = xp.empty(m, np.int64)
        length = xp.empty(m, np.int64)
        if m:
            self.qk.plan(xs, ys, xp.ascontiguousarray(fxs, dtype=np.uint8),
                         xp.ascontiguousarray(fys, dtype=np.uint8), pat, use_n, use_p, nst,
                         n_fx, n_hl, pst, p_fy, p_hl, choice, length)
        return args, pat, choice, length

    def expand(self, k: int, spec: sp.ViewSpec, xs, ys, ms, fxs, fys):
        """(index of the update, z, m·weight) for every z joining update (x, y) in ``spec``."""
        xp = self.xp
        xs = xp.ascontiguousarray(xs, dtype=np.int64)
        ys = xp.ascontiguousarray(ys, dtype=np.int64)
        m = xs.shape[0]
        if m == 0:
            return self._empty, self._empty, self._empty
        args, pat, choice, length = self._plan(k, spec, xs, ys, fxs, fys)
        use_n, use_p, nst, _, n_fy, n_hl, pst, _, p_fx, p_hl = args
        ptr = xp.zeros(m + 1, np.int64)
        xp.cumsum(length, out=ptr[1:])
        total = int(ptr[-1])
        out_z = xp.empty(total, np.int64)
        out_w = xp.empty(total, np.int64)
        count = xp.empty(m, np.int64)
        self.qk.emit(xs, ys, xp.ascontiguousarray(ms, dtype=np.int64), choice, ptr, pat, use_n,
                     use_p, nst, n_fy, n_hl, pst, p_fx, p_hl, out_z, out_w, count)
        # on a device the outputs get the plan's bound (known) and are cut to the count
        # compact returns: one host read fewer than sizing them exactly first
        n_out = int(count.sum()) if xp is np else total
        idx = xp.empty(n_out, np.int64)
        zz = xp.empty(n_out, np.int64)
        ww = xp.empty(n_out, np.int64)
        n_out = self.qk.compact(ptr, count, out_z, out_w, idx, zz, ww)
        if xp is not np:
            idx, zz, ww = idx[:n_out], zz[:n_out], ww[:n_out]
        return idx, zz, ww

    def path_sums(self, k: int, spec: sp.ViewSpec, xs, ys, fxs, fys) -> np.ndarray:
        """Σ_z over the view's other atoms, per update (x, y) (multiplicity not applied)."""
        xp = self.xp
        xs = xp.ascontiguousarray(xs, dtype=np.int64)
        ys = xp.ascontiguousarray(ys, dtype=np.int64)
        out = xp.zeros(xs.shape[0], np.int64)
        if xs.shape[0] == 0:
            return out
        args, pat, choice, _ = self._plan(k, spec, xs, ys, fxs, fys)
        use_n, use_p, nst, _, n_fy, n_hl, pst, _, p_fx, p_hl = args
        self.qk.sums(xs, ys, choice, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl, out)
        return out

    def _view_delta(self, spec: sp.ViewSpec, k: int, xs, ys, ms, fxs, fys, cache) -> None:
        """Add the phase's delta to one view. Views with the same atoms and pattern (V_RS and
        V̂_RS, a root and its per-C projection) get the same terms, so ``cache`` keeps them for
        the phase and only the key projection differs."""
        var_x, var_y = k, (k + 1) % 3
        scalar = set(spec.key) <= {var_x, var_y}
        ckey = (scalar, spec.atoms, spec.pattern)
        if ckey in cache:
            cols, vals = cache[ckey]
        else:
            cols, vals = self._terms(spec, k, scalar, xs, ys, ms, fxs, fys)
            cache[ckey] = (cols, vals)
        self._add_terms([spec], cols, vals)

    def _terms(self, spec: sp.ViewSpec, k: int, scalar: bool, xs, ys, ms, fxs, fys):
        """The view's delta terms for the phase's updates: ({variable: column}, values)."""
        var_x, var_y, var_z = k, (k + 1) % 3, (k + 2) % 3
        if scalar:
            own = spec.pattern[k]
            if own != (sp.ANY, sp.ANY):  # the updates in the view's part of relation k
                xp = self.xp
                ok = xp.ones(xs.shape[0], bool)
                if own[0] != sp.ANY:
                    ok &= fxs == own[0]
                if own[1] != sp.ANY:
                    ok &= fys == own[1]
                if xp is np:
                    xs, ys, ms, fxs, fys = xs[ok], ys[ok], ms[ok], fxs[ok], fys[ok]
                else:  # one host read for the five columns
                    sel = xp.flatnonzero(ok)
                    xs, ys, ms, fxs, fys = xs[sel], ys[sel], ms[sel], fxs[sel], fys[sel]
            agg = self._lookup_view.get((spec.signature, k))
            if agg is not None:
                cols = {var_x: xs, var_y: ys}
                w = self.views[agg.signature].get([cols[v] for v in agg.key])
            else:
                w = self.path_sums(k, spec, xs, ys, fxs, fys)
            vals = ms * w
            nz = vals != 0 if self.xp is np else self.xp.flatnonzero(vals)  # (one host read)
            cols = {var_x: xs[nz], var_y: ys[nz]}
            vals = vals[nz]
        else:
            idx, z, vals = self.expand(k, spec, xs, ys, ms, fxs, fys)
            cols = {var_x: xs[idx], var_y: ys[idx], var_z: z}
        return cols, vals

    # ------------------------------------------------------------------ changes
    def _track(self, k: int, x, y, deltas) -> None:
        spec = _ALL_TRIANGLES
        fx = self.xp.zeros(x.shape[0], np.uint8)
        idx, z, w = self.expand(k, spec, x, y, deltas, fx, fx)
        cols = {k: x[idx], (k + 1) % 3: y[idx], (k + 2) % 3: z}
        self.changes.append((cols[0], cols[1], cols[2], w))

    def changed_triangles(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """δΔ3 of the last batch: (a, b, c, delta) with nonzero deltas, sorted by (a, b, c)
        (arrays of the state's array module)."""
        xp = self.xp
        e = self._empty
        if not self.changes:
            return e, e, e, e
        a = xp.concatenate([c[0] for c in self.changes])
        b = xp.concatenate([c[1] for c in self.changes])
        c = xp.concatenate([c[2] for c in self.changes])
        w = xp.concatenate([c[3] for c in self.changes])
        if a.shape[0] == 0:
            return e, e, e, e
        order = rows_order(a, b, c, xp)
        a, b, c, w = a[order], b[order], c[order], w[order]
        new = xp.concatenate([xp.ones(1, np.bool_),
                              (a[1:] != a[:-1]) | (b[1:] != b[:-1]) | (c[1:] != c[:-1])])
        starts = xp.flatnonzero(new)
        sums = xp.add.reduceat(w, starts)
        keep = sums != 0
        return a[starts][keep], b[starts][keep], c[starts][keep], sums[keep]

    # ------------------------------------------------------------------ checks
    def check_invariants(self) -> list[str]:
        """Problems found (empty if none): thresholds, flags, positivity of every view."""
        bad = []
        xp = self.xp
        size = self.size
        if not (self.N // 4 <= size < self.N) and size:
            bad.append(f"size invariant: |D| = {size}, N = {self.N}")
        for k, rel in enumerate(self.rels):
            th = self.th[k]
            for pos in (0, 1):
                if (k, pos) not in self.used_flags:
                    continue
                live = (rel.fwd if pos == 0 else rel.bwd).live
                present = xp.flatnonzero(live)
                f = rel.flags[pos][present]
                d = live[present]
                if bool(xp.any((f == 1) & (d < th.down))):
                    bad.append(f"relation {k} var {pos}: heavy value below ½θ")
                if bool(xp.any((f == 0) & (d >= th.up))):
                    bad.append(f"relation {k} var {pos}: light value at or above 3⁄2θ")
                if not bool(xp.array_equal(rel.heavy[pos], rel.heavy_values(pos))):
                    bad.append(f"relation {k} var {pos}: heavy list out of date")
        for spec in self.specs:
            _, vals = self.views[spec.signature].items()
            if bool(xp.any(vals < 0)):
                bad.append(f"view {spec.name} holds a negative value")
        return bad


_ALL_TRIANGLES = sp.ViewSpec("D3_all", (0, 1, 2), ((sp.ANY, sp.ANY),) * 3, (0, 1, 2))
