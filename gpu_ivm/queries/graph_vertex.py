"""Per-vertex triangle counts of an undirected graph engine, read off its own stores.

The general free-query state (:class:`~gpu_ivm.queries.maintain.FreeQueries`) keeps three
copies of the edge relation, their indexes and the views of paper 001, and applies a batch in
three phases, one per copy; on an undirected graph that maintains ``vertex_counts`` only,
none of it is needed: the count engine already stores the graph, partitioned by degree, and
the change of every vertex's count follows from the batch and the graph after it
(:mod:`gpu_ivm.kernels.graph_vertex`: one intersection per pair of the batch at the
min-degree bound, and the pairs of batch edges that meet at a vertex). This class holds the
counts as one dense array and is what such an engine keeps in place of ``FreeQueries``
(:meth:`~gpu_ivm.queries.api.FreeQueryResults._init_queries`); the results module reads it
through the same functions. ``GPU_IVM_GRAPH_VERTEX=0`` turns it off (the general state then).

Values are Δ1 of the graph form (ordered triangles: twice the triangles through a vertex),
as ``FreeQueries`` keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from ..backend import CPU
from ..encoding import pack
from ..errors import IntegerOverflowError
from ..kernels import graph_vertex as gk
from ..selection import to_host
from ..store import ZStore


def enabled() -> bool:
    """``GPU_IVM_GRAPH_VERTEX=0`` keeps the general free-query state for every engine."""
    return os.environ.get("GPU_IVM_GRAPH_VERTEX", "1") != "0"


class GraphVertexCounts:
    """Δ1 of an undirected graph engine as a dense array over its ids.

    ``parts()`` returns the engine's edge relation (a :class:`~gpu_ivm.partition.PartRel`)
    as it is after a batch; :meth:`apply` reads it then, with the ``vertex`` part of
    ``kernels`` (the backend's kernel set; the CPU's by default). On a device the counts
    live in device memory and a batch is two launches
    (:mod:`gpu_ivm.kernels.cuda_graph_vertex`).

    Examples
    --------
    >>> import numpy as np
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine(epsilon=1, maintain="vertex_counts")
    >>> _ = g.load(([0, 1, 2], [1, 2, 0]))
    >>> type(g.fq).__name__
    'GraphVertexCounts'
    >>> _ = g.apply({"src": [0], "dst": [3], "sign": [1]})
    >>> _ = g.apply({"src": [1], "dst": [3], "sign": [1]})
    >>> [int(g.vertex_count(v)) for v in (0, 1, 2, 3)]
    [2, 2, 1, 1]
    """

    families = ("vertex_counts",)
    graph_vertex = True  # what the results and invariants modules dispatch on

    def __init__(self, parts: Callable, kernels=None):
        self.parts = parts
        self.kernels = kernels if kernels is not None else CPU.kernels
        self.xp = self.kernels.xp
        self.cap = 0
        self.dense = self.xp.zeros(0, np.int64)
        self.stats = {"moves": 0, "major": 0}  # the free-query state's own: none here

    @property
    def count(self) -> int:
        """Σ Δ1: the engine's Q (six per triangle)."""
        return int(self.dense.sum())

    def grow_ids(self, cap: int) -> None:
        if cap <= self.cap:
            return
        self.cap = max(cap, 2 * self.cap)
        grown = self.xp.zeros(self.cap, np.int64)
        grown[: self.dense.shape[0]] = self.dense
        self.dense = grown

    def build(self, rels, cap: int) -> None:
        """Δ1 from scratch from the (a ids, b ids, multiplicities) of the symmetric edge
        relation (the three given are the same): Δ1(v) = Σ over v's edges {v, u} of their
        common neighbours, one intersection per edge (:func:`~gpu_ivm.kernels.graph_vertex.
        pair_weights`) against a host store of the edges (with the bitmaps of its long
        rows), whatever the backend."""
        a, b, m = (np.asarray(to_host(self.xp, x), np.int64) for x in rels[0])
        if m.shape[0] and (int(m.min()) != 1 or int(m.max()) != 1):
            raise ValueError("per-vertex counts of a graph need multiplicities of 1")
        self.cap = 0
        self.dense = self.xp.zeros(0, np.int64)
        self.grow_ids(max(cap, 1))
        keys = np.sort(pack(a, b))
        st = ZStore.from_sorted(keys, np.ones(keys.shape[0], np.int64), self.cap, bits=True)
        half = a < b
        xs, ys = a[half], b[half]
        w = gk.pair_weights(xs, ys, st.nt(), st.nt(), np.zeros(self.cap, np.bool_))
        counts = np.bincount(xs, w, self.cap) + np.bincount(ys, w, self.cap)
        if counts.shape[0] and counts.max() >= 2.0 ** 53:  # float64 sums exact below 2^53
            raise IntegerOverflowError("per-vertex triangle counts beyond 2^53")
        self.dense = self.xp.asarray(counts.astype(np.int64))  # a device: one upload

    def apply(self, phases, cap: int) -> None:
        """Add the change of a batch: ``phases`` as the graph engine hands them to the
        free-query state ((k, sorted packed keys with both orientations, net changes) for
        k = 0, 1, 2, the same arrays), read against the edge relation after the batch."""
        self.grow_ids(max(cap, 1))
        if not phases:
            return
        _, keys, deltas = phases[0]
        E = self.parts()
        self.kernels.vertex.vertex_delta(keys, deltas, E.h.nt(), E.l.nt(), E.heavy, self.dense)

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
