"""Per-vertex and per-edge triangle counts and the triangles of an undirected graph engine,
read off its own stores.

The general free-query state (:class:`~gpu_ivm.queries.maintain.FreeQueries`) keeps three
copies of the edge relation, their indexes and the views of paper 001, and applies a batch
in three phases, one per copy; on an undirected graph none of it is needed: the count engine
already stores the graph, partitioned by degree, and the change of every vertex's and every
edge's count follows from the batch and the graph after it
(:mod:`gpu_ivm.kernels.graph_local`: one intersection per pair of the batch at the
min-degree bound, and the pairs of batch edges that meet at a vertex). This class holds Δ1
as one dense array over the ids and Δ2 as a table of counts keyed by the pair {x, y}, x < y
(:mod:`gpu_ivm.kernels.count_table`); Δ3 it does not hold: the triangles are listed off the
stores when read (:mod:`gpu_ivm.kernels.graph_listing`, each once at its edge of the two
smallest ids; a static listing's cost per read, in place of paper 001's constant-delay
enumeration from views kept up to date per batch). With change tracking, the triangles a
batch removes are listed off the stores before it takes them
(:meth:`GraphLocalCounts.before`), those it adds after (:meth:`GraphLocalCounts.apply`),
each once (:mod:`gpu_ivm.kernels.batch_triangles`). It
is what such an engine keeps in place of ``FreeQueries``
(:meth:`~gpu_ivm.queries.api.FreeQueryResults._init_queries`); the results module reads it
through the same functions. ``GraphEngine(results_from="views")`` keeps the general state
instead, and so does ``results_from="auto"`` (the default) under ``GPU_IVM_GRAPH_LOCAL=0``
(or ``GPU_IVM_GRAPH_VERTEX=0``, its earlier name).

Values are those ``FreeQueries`` keeps for the graph form: Δ1 counts ordered triangles (twice
the triangles through a vertex), Δ2 the triangles on an edge, in both orientations.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from ..backend import CPU
from ..encoding import pack
from ..errors import IntegerOverflowError
from ..kernels import count_table as ct
from ..kernels import graph_local as gk
from ..kernels.batch_triangles import live_rows
from ..kernels.triple_sort import rows_order
from ..selection import to_host
from ..store import ZStore

FAMILIES = ("vertex_counts", "edge_counts", "triangles")  # what this state can keep


def enabled() -> bool:
    """``GPU_IVM_GRAPH_LOCAL=0`` (or ``GPU_IVM_GRAPH_VERTEX=0``) keeps the general free-query
    state for every engine."""
    return all(os.environ.get(v, "1") != "0"
               for v in ("GPU_IVM_GRAPH_LOCAL", "GPU_IVM_GRAPH_VERTEX"))


class GraphLocalCounts:
    """Δ1, Δ2 and/or Δ3 of an undirected graph engine: a dense array over its ids, a table of
    counts over its edges, the triangles listed off its stores when read.

    ``parts()`` returns the engine's edge relation (a :class:`~gpu_ivm.partition.PartRel`)
    as it is after a batch; :meth:`apply` reads it then, with the ``local`` part of
    ``kernels`` (the backend's kernel set; the CPU's by default). ``families``: a non-empty
    subset of :data:`FAMILIES`. On a device the counts live in device memory and a batch is
    two launches (:mod:`gpu_ivm.kernels.cuda_graph_local`), both families together.

    The table holds a slot for every pair that was an edge with triangles since its last
    rebuild (a count that drops to 0 keeps its slot): ``bound`` is an upper bound on those
    pairs known on the host (the edges at the rebuild plus the pairs of every batch since),
    and the table is rebuilt from its nonzero counts, at most half full, before a batch
    could fill it past three quarters (no read of the device in between).

    Examples
    --------
    >>> import numpy as np
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine(epsilon=1, maintain=["vertex_counts", "edge_counts"])
    >>> _ = g.load(([0, 1, 2], [1, 2, 0]))
    >>> type(g.fq).__name__
    'GraphLocalCounts'
    >>> _ = g.apply({"src": [0], "dst": [3], "sign": [1]})
    >>> _ = g.apply({"src": [1], "dst": [3], "sign": [1]})
    >>> [int(g.vertex_count(v)) for v in (0, 1, 2, 3)]
    [2, 2, 1, 1]
    >>> g.result_table("edge_counts").to_pydict()
    {'src': [0, 0, 0, 1, 1], 'dst': [1, 2, 3, 2, 3], 'triangles': [2, 1, 1, 1, 1]}
    >>> t = GraphEngine(epsilon=1, maintain="triangles")
    >>> _ = t.load(([0, 1, 2, 0, 1], [1, 2, 0, 3, 3]))
    >>> t.result_table("triangles").to_pydict()
    {'a': [0, 0], 'b': [1, 1], 'c': [2, 3]}
    """

    graph_local = True  # what the results and invariants modules dispatch on

    def __init__(self, parts: Callable, families: Sequence[str] = ("vertex_counts",),
                 kernels=None, track_changes: bool = False):
        bad = [f for f in families if f not in FAMILIES]
        if bad or not families:
            raise ValueError(f"{', '.join(FAMILIES)} only, got {list(families)}")
        self.families = tuple(f for f in FAMILIES if f in families)
        self.parts = parts
        self.kernels = kernels if kernels is not None else CPU.kernels
        self.xp = self.kernels.xp
        self.cap = 0
        self.dense = self.xp.zeros(0, np.int64)
        self.tab = self.xp.zeros(0, np.int64)  # the table of per-edge counts (count_table)
        self.bound = 0
        self.version = 0  # batches and builds seen: a listing in progress stops at a change
        self.stats = {"moves": 0, "major": 0, "table_rebuilds": 0}  # no views to move here
        self.track_changes = bool(track_changes)
        z = self.xp.zeros(0, np.int64)
        self._none = (z, z, z)  # no triangles (made once: on a device each is a call)
        self._gone = self._none  # the triangles the pending batch removes (read before it)
        # the last batch's (gone, new) triangles (on a device with rows dropped in place)
        self.changes = (self._none, self._none)

    @property
    def verts(self) -> bool:
        return "vertex_counts" in self.families

    @property
    def edges(self) -> bool:
        return "edge_counts" in self.families

    @property
    def count(self) -> int:
        """Σ Δ1 (or Σ Δ2 over both orientations, or six times the triangles listed): the
        engine's Q (six per triangle)."""
        if self.verts:
            return int(self.dense.sum())
        if self.edges:
            return 2 * int(self.tab[1::2].sum())
        return 6 * sum(int(p[0].shape[0]) for p in self.triangle_parts())

    def grow_ids(self, cap: int) -> None:
        if cap <= self.cap:
            return
        self.cap = max(cap, 2 * self.cap)
        if self.verts:
            grown = self.xp.zeros(self.cap, np.int64)
            grown[: self.dense.shape[0]] = self.dense
            self.dense = grown

    def build(self, rels, cap: int) -> None:
        """Δ1 and Δ2 from scratch from the (a ids, b ids, multiplicities) of the symmetric edge
        relation (the three given are the same): Δ2(x, y) is the common neighbours of x and y,
        one intersection per edge (:func:`~gpu_ivm.kernels.graph_local.pair_weights`) against
        a host store of the edges (with the bitmaps of its long rows), whatever the backend,
        and Δ1(v) the sum over v's edges."""
        a, b, m = (np.asarray(to_host(self.xp, x), np.int64) for x in rels[0])
        if m.shape[0] and (int(m.min()) != 1 or int(m.max()) != 1):
            raise ValueError("per-vertex and per-edge counts of a graph need multiplicities "
                             "of 1")
        self.version += 1
        self.cap = 0
        self.dense = self.xp.zeros(0, np.int64)
        self.grow_ids(max(cap, 1))
        if not (self.verts or self.edges):  # the triangles are listed when read
            return
        keys = np.sort(pack(a, b))
        st = ZStore.from_sorted(keys, np.ones(keys.shape[0], np.int64), self.cap, bits=True)
        half = a < b
        xs, ys = a[half], b[half]
        w = gk.pair_weights(xs, ys, st.nt(), st.nt(), np.zeros(self.cap, np.bool_))
        if self.verts:
            counts = np.bincount(xs, w, self.cap) + np.bincount(ys, w, self.cap)
            if counts.shape[0] and counts.max() >= 2.0 ** 53:  # float64 sums exact below 2^53
                raise IntegerOverflowError("per-vertex triangle counts beyond 2^53")
            self.dense = self.xp.asarray(counts.astype(np.int64))  # a device: one upload
        if self.edges:
            some = w != 0
            tab = ct.new_table(np, ct.slots_for(xs.shape[0]))
            ct.add_counts(tab, pack(xs[some], ys[some]), w[some])
            self.tab = self.xp.asarray(tab)  # a device: one upload
            self.bound = xs.shape[0]

    def _room(self, pairs: int) -> None:
        """Make sure the table can take ``pairs`` new keys within three quarters of its
        slots: else rebuild it from its nonzero counts, at most half full (the keys' bound is
        then the edges after the batch, which include every key with a count, plus the
        batch's pairs)."""
        self.bound += pairs
        if 4 * self.bound <= 3 * (self.tab.shape[0] // 2):
            return
        keys, vals = ct.live_entries(self.xp, self.tab)
        self.bound = len(self.parts()) // 2 + pairs
        self.tab = ct.new_table(self.xp, ct.slots_for(self.bound))
        self.kernels.local.add_counts(self.tab, keys, vals)
        self.stats["table_rebuilds"] += 1

    @property
    def rels(self) -> tuple:
        """The edge relation three times (what the results module reads of R, S and T)."""
        E = self.parts()
        return E, E, E

    def before(self, phases) -> None:
        """With change tracking, read the triangles the batch removes off the graph before
        it: those of its deleted pairs (the batch as :meth:`apply` takes it)."""
        if self.track_changes:
            self._gone = self._pair_triangles(phases, -1)

    def _pair_triangles(self, phases, sign: int) -> tuple:
        """The triangles (a, b, c), a < b < c, each once, through the pairs of the batch
        (``phases`` as :meth:`apply` takes them) whose net change is ``sign``, in the graph
        as stored now (:func:`~gpu_ivm.kernels.batch_triangles.batch_pair_triangles`; on a
        device the rows it drops are left in place, ``a = -1``, and dropped when read)."""
        if not phases:
            return self._none
        E = self.parts()
        return self.kernels.local.batch_pair_triangles(phases[0][1], phases[0][2], sign,
                                                       E.h.nt(), E.l.nt(), E.heavy)

    def changed_triangles(self) -> tuple:
        """δΔ3 of the last batch as the general state gives it: (a, b, c, delta) for every
        ordering of each triangle the batch added (+1) or removed (-1), sorted by (a, b, c)."""
        xp = self.xp
        (ga, gb, gc), (na, nb, nc) = (live_rows(*rows) for rows in self.changes)
        tri = [xp.concatenate([ga, na]), xp.concatenate([gb, nb]), xp.concatenate([gc, nc])]
        w = xp.concatenate([-xp.ones(ga.shape[0], np.int64), xp.ones(na.shape[0], np.int64)])
        if w.shape[0] == 0:
            return tri[0], tri[1], tri[2], w
        orders = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
        a, b, c = (xp.concatenate([tri[o[k]] for o in orders]) for k in range(3))
        w = xp.concatenate([w] * 6)
        order = rows_order(a, b, c, xp)
        return a[order], b[order], c[order], w[order]

    def apply(self, phases, cap: int) -> None:
        """Add the change of a batch: ``phases`` as the graph engine hands them to the
        free-query state ((k, sorted packed keys with both orientations, net changes) for
        k = 0, 1, 2, the same arrays), read against the edge relation after the batch."""
        self.version += 1
        self.grow_ids(max(cap, 1))
        if self.track_changes:
            self.changes = (self._gone, self._pair_triangles(phases, 1))
            self._gone = self._none
        if not phases or not (self.verts or self.edges):
            return
        _, keys, deltas = phases[0]
        if self.edges:
            self._room(keys.shape[0] // 2 + 1)
        E = self.parts()
        self.kernels.local.local_delta(keys, deltas, E.h.nt(), E.l.nt(), E.heavy, self.dense,
                                       self.tab)

    def vertex_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, Δ1) of the vertices whose Δ1 is not 0, by id."""
        nz = self.xp.flatnonzero(self.dense)
        return nz.astype(np.int64), self.dense[nz]

    def vertex_lookup(self, ids: np.ndarray) -> np.ndarray:
        """Δ1 of each id (0 beyond the ids seen)."""
        xp = self.xp
        ids = xp.asarray(ids, dtype=np.int64)
        inside = (ids >= 0) & (ids < self.cap)
        return xp.where(inside, self.dense[xp.where(inside, ids, 0)], 0)

    def edge_counts(self, upper: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, Δ2) of the edges whose Δ2 is not 0, both orientations (``upper``: a < b
        only), by (a, b)."""
        xp = self.xp
        keys, vals = ct.live_entries(xp, self.tab)
        if upper:
            return keys >> 32, keys & 0xFFFFFFFF, vals
        both = xp.concatenate([keys, ((keys & 0xFFFFFFFF) << 32) | (keys >> 32)])
        order = xp.argsort(both)
        both = both[order]
        return both >> 32, both & 0xFFFFFFFF, xp.concatenate([vals, vals])[order]

    def edge_lookup(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Δ2(a_i, b_i) (0 for pairs that are no edge or have no triangle)."""
        xp = self.xp
        a = xp.asarray(a, dtype=np.int64)
        b = xp.asarray(b, dtype=np.int64)
        out = xp.zeros(a.shape[0], np.int64)
        if a.shape[0] and self.tab.shape[0]:
            keys = xp.ascontiguousarray(pack(xp.minimum(a, b), xp.maximum(a, b)))
            self.kernels.local.get_counts(self.tab, keys, out)
        return out

    # ------------------------------------------------------------------ Δ3, listed when read
    def _oriented(self, x, y, floors):
        """The pairs (x_i, y_i) with their floors, each as (longer row, shorter row) after the
        graph's current degrees (ties: the smaller id first), sorted by the longer row (stable):
        ``(long, short, floors, order)``, ``order`` the pairs' original positions."""
        xp = self.xp
        E = self.parts()
        lx, ly = E.degree(x), E.degree(y)
        swap = (ly > lx) | ((ly == lx) & (y < x))
        long_, short = xp.where(swap, y, x), xp.where(swap, x, y)
        order = xp.argsort(long_, kind="stable")
        return long_[order], short[order], floors[order], order

    def _above(self, x, y, floors, version: int | None = None):
        """(i, c) chunks: for each pair (x_i, y_i), its common neighbours c > floors[i] in the
        graph as stored (:func:`~gpu_ivm.kernels.graph_listing.common_above`, a pass at a
        time); ``i`` indexes the pairs as given. Raises ``RuntimeError`` when the state
        changed (a batch was applied) since ``version``."""
        E = self.parts()
        long_, short, fl, order = self._oriented(x, y, floors)
        n = long_.shape[0]
        s = 0
        while s < n:
            if version is not None and self.version != version:
                raise RuntimeError("the engine applied a batch during triangles() enumeration")
            idx, c, s = self.kernels.local.common_above(long_, short, fl, E.h.nt(), E.l.nt(),
                                                        E.heavy, s)
            if c.shape[0]:
                yield order[idx], c

    def triangle_parts(self, chunk: int = 1 << 20):
        """Δ3 as (a, b, c, mult) chunks, every triangle once with a < b < c (mult 1): the
        common neighbours c > b of each edge {a, b}, a < b, of the graph as stored, listed
        when read (nothing is kept per batch), at most ``chunk`` rows a chunk. Raises
        ``RuntimeError`` if a batch is applied while the chunks are read."""
        xp = self.xp
        E = self.parts()
        hk, _ = E.h.items(sort=False)
        lk, _ = E.l.items(sort=False)
        keys = xp.concatenate([hk, lk])
        a, b = keys >> 32, keys & 0xFFFFFFFF
        up = a < b
        a, b = a[up], b[up]
        version = self.version
        for i, c in self._above(a, b, b, version):
            for s in range(0, c.shape[0], chunk):
                if self.version != version:
                    raise RuntimeError("the engine applied a batch during triangles() "
                                       "enumeration")
                j = i[s : s + chunk]
                yield a[j], b[j], c[s : s + chunk], xp.ones(j.shape[0], np.int64)

    def triangles_with(self, ids) -> tuple:
        """(v, b, c, mult) for the triangles {v, b, c} through each vertex v of ``ids``, each
        once per v with b < c: the common neighbours c > b of v and each neighbour b."""
        xp = self.xp
        ids = xp.ascontiguousarray(xp.asarray(ids, dtype=np.int64))
        E = self.parts()
        rows = [E.h.rows(ids)[1], E.l.rows(ids)[1]]
        keys = xp.concatenate(rows)
        v, b = keys >> 32, keys & 0xFFFFFFFF
        got = list(self._above(v, b, b))
        if not got:
            z = xp.zeros(0, np.int64)
            return z, z, z, z
        i = xp.concatenate([g[0] for g in got])
        c = xp.concatenate([g[1] for g in got])
        return v[i], b[i], c, xp.ones(c.shape[0], np.int64)
