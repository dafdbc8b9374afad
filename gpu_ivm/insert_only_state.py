"""The stored edges of the insert-only graph engine: the sliding window's layout, append-only.

:class:`EdgeState` holds, for edge ids 0 .. n - 1 in arrival order:

- per-edge arrays: endpoints ``eu`` < ``ev`` and ``stamp``, the edge's position in the arrival
  order (1 ..; every edge of a ``load()`` without ``track_changes`` has stamp 1);
- an edge hash table, packed key u < v → stamp (:mod:`gpu_ivm.kernels.hashmap`, at load factor
  at most one half);
- one unsorted row per vertex in a slab (neighbour, stamp) with room doubling
  (:mod:`gpu_ivm.kernels.window_adj`); a row's length is the vertex's degree.

(The sliding window's table and rows hold edge ids; here the stamps, which never change, so
the count reads no per-edge array: see :mod:`gpu_ivm.kernels.insert_adj`.)

A batch is stored and counted by one compiled call (:func:`gpu_ivm.kernels.insert_adj.
insert_batch`); nothing is ever deleted, so there are no tombstones and no rebuilds (the
slab's garbage from row moves stays below the entries in use, see
:meth:`gpu_ivm.sliding_window.SlidingWindow._maybe_compact`).

>>> import numpy as np
>>> st = EdgeState.from_edges(np.array([0, 1]), np.array([1, 2]), np.array([1, 2]), 3)
>>> st.reserve(3, 1)
>>> bad, delta = st.insert(np.array([2]), np.array([0]), 2, par_min=1 << 62)
>>> int(bad), int(delta), st.n, st.ln[:3].tolist()   # the degrees: the rows' lengths
(-1, 1, 3, [2, 2, 2])
>>> st.stamped()[1].tolist()   # stamps in key order: (0, 1), (0, 2), (1, 2)
[1, 3, 2]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .encoding import pack
from .errors import InvariantError
from .kernels import hashmap
from .kernels import insert_adj as ia
from .kernels import window_adj as wa
from .kernels import window_step as wk

_PER_EDGE = ("eu", "ev", "stamp")
_PER_ID = ("off", "ln", "cap")


class EdgeState:
    """Edges of an insert-only graph (see the module docstring)."""

    def __init__(self) -> None:
        self.n = 0  # edges stored (ids 0 .. n - 1)
        self.htk, self.htv = wk.empty_table(0)
        z = np.zeros(0, np.int64)
        self.eu = self.ev = self.stamp = z
        self.off = self.ln = self.cap = z
        self.marks = z  # zeros, one per vertex id (the grouped intersections)
        self.nbr = self.val = z
        self.used = self.garbage = 0

    @classmethod
    def from_edges(cls, us: np.ndarray, vs: np.ndarray, stamps: np.ndarray,
                   n_ids: int) -> EdgeState:
        """The state of the edges (us[i], vs[i]) (distinct, us < vs) with their stamps, as edge
        ids 0 .. n - 1 in that order, for vertex ids below ``n_ids``."""
        st = cls()
        n = int(us.shape[0])
        st.reserve(max(n_ids, 1), n)
        st.eu[:n], st.ev[:n], st.stamp[:n] = us, vs, stamps
        st.n = n
        st._index()
        ids = st.off.shape[0]
        (st.off, st.ln, st.cap, st.nbr, st.val, st.used) = wa.build(ids, st.eu[:n], st.ev[:n])
        filled = st.val != 0  # edge index + 1 -> the edge's stamp
        st.val[filled] = st.stamp[st.val[filled] - 1]
        return st

    def _index(self) -> None:
        """Fill the (empty) edge table from the per-edge arrays."""
        n = self.n
        hashmap.insert(self.htk, self.htv, pack(self.eu[:n], self.ev[:n]), self.stamp[:n])

    # ------------------------------------------------------------------ room
    def reserve(self, n_ids: int, m: int) -> None:
        """Room for vertex ids below ``n_ids`` and ``m`` more edges (table included)."""
        if n_ids > self.off.shape[0]:
            cap = max(n_ids, 2 * self.off.shape[0], 1024)
            for name in _PER_ID:
                setattr(self, name, _grown(getattr(self, name), cap))
            self.marks = np.zeros(cap, np.int64)
        need = self.n + m
        if need > self.eu.shape[0]:
            cap = max(need, 2 * self.eu.shape[0], 1024)
            for name in _PER_EDGE:
                setattr(self, name, _grown(getattr(self, name), cap))
        if 2 * need > self.htk.shape[0]:
            # the old table's entries in its slot order: their new home slots then come in a
            # few increasing streams (the hash's low bits are the old slot), so the rehash
            # writes the new table almost in order instead of at random
            live = self.htv != hashmap.EMPTY
            keys, vals = self.htk[live], self.htv[live]
            self.htk, self.htv = wk.empty_table(max(need, self.htk.shape[0]))
            hashmap.insert(self.htk, self.htv, keys, vals)

    # ------------------------------------------------------------------ a batch
    def insert(self, a: np.ndarray, b: np.ndarray, seq: int, *, par_min: int,
               limit: int = 1 << 62, count: bool = True) -> tuple[int, int]:
        """Store the edges {a[i], b[i]} (ids of rows without self-loops; :meth:`reserve` first)
        with stamps seq + 1 + i and count the triangles they close: (bad, delta) as
        :func:`gpu_ivm.kernels.insert_adj.insert_batch` returns them (bad >= 0: that row's
        edge is stored or repeated, nothing changed)."""
        m = int(a.shape[0])
        bad, self.nbr, self.val, self.used, garbage, delta = ia.insert_batch(
            a, b, self.htk, self.htv, self.n, seq, self.eu, self.ev, self.stamp, self.off,
            self.ln, self.cap, self.nbr, self.val, self.used, self.marks, par_min,
            nb.get_num_threads(), limit, count)
        if bad < 0:
            self.n += m
            self.garbage += int(garbage)
        return int(bad), int(delta)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The stamp of each packed key u < v, or -1 (not stored)."""
        out = np.empty(keys.shape[0], np.int64)
        hashmap.lookup(self.htk, self.htv, np.ascontiguousarray(keys, np.int64), out)
        return out

    def list_new(self, first: int) -> tuple[np.ndarray, ...]:
        """The triangles closed by the edges from id ``first`` on (see
        :func:`gpu_ivm.kernels.insert_adj.list_new`): (edge index from ``first``, w, stamp of
        (eu, w), stamp of (ev, w)), by edge, each edge's by w."""
        e, w, s1, s2 = ia.list_new(self.off, self.ln, self.nbr, self.val, self.htk, self.htv,
                                   self.stamp, self.eu, self.ev, first, self.n - first,
                                   self.marks)
        # by edge, then w: independent of the rows' order (a restore rebuilds them)
        order = np.argsort((e << 32) | w)
        return e[order], w[order], s1[order], s2[order]

    # ------------------------------------------------------------------ contents
    def endpoints(self) -> tuple[np.ndarray, np.ndarray]:
        """(eu, ev) of the stored edges, in id order."""
        return self.eu[: self.n], self.ev[: self.n]

    def stamped(self) -> tuple[np.ndarray, np.ndarray]:
        """(packed keys u < v, stamps) of the stored edges, in key order."""
        keys = pack(self.eu[: self.n], self.ev[: self.n])
        order = np.argsort(keys)
        return keys[order], self.stamp[: self.n][order]

    def check(self, n_ids: int, seq: int) -> None:
        """The table, the per-edge arrays and the rows agree (InvariantError otherwise): each
        edge u < v (ids below ``n_ids``, no two alike) is found in the table with its stamp and
        nothing else is; each row holds exactly its vertex's edges with their stamps, once
        each, within its room and the slab's entries in use, without overlapping another row;
        stamps in [1, seq]."""
        n = self.n
        eu, ev, stamp = self.eu[:n], self.ev[:n], self.stamp[:n]
        if n and ((eu >= ev).any() or eu.min() < 0 or ev.max() >= n_ids):
            raise InvariantError("insert-only edges not stored as u < v over known ids")
        if n and (stamp.min() < 1 or stamp.max() > seq):
            raise InvariantError("insert-only stamps outside [1, stamps handed out]")
        keys = pack(eu, ev)
        if np.unique(keys).shape[0] != n:
            raise InvariantError("insert-only edge stored twice")
        if not np.array_equal(self.lookup(keys), stamp) \
                or int(np.count_nonzero(self.htv != hashmap.EMPTY)) != n:
            raise InvariantError("insert-only edge table differs from the stored edges")
        ids = self.off.shape[0]
        deg = np.bincount(np.concatenate([eu, ev]), minlength=ids)
        if deg.shape[0] != ids or not np.array_equal(deg, self.ln):
            raise InvariantError("insert-only degrees differ from the stored rows")
        if (self.ln > self.cap).any():
            raise InvariantError("insert-only row longer than its room")
        live = np.flatnonzero(self.cap)
        order = live[np.argsort(self.off[live])]
        ends = self.off[order] + self.cap[order]
        if order.shape[0] and (ends.max() > self.used or self.used > self.nbr.shape[0]
                               or (self.off[order][1:] < ends[:-1]).any()):
            raise InvariantError("insert-only rows overlap or leave the slab")
        x = np.repeat(np.arange(ids), self.ln)
        pos = np.repeat(self.off - np.cumsum(self.ln) + self.ln, self.ln) \
            + np.arange(x.shape[0])
        if x.shape[0] != 2 * n:
            raise InvariantError("insert-only rows hold other than two entries per edge")
        if not n:
            return
        w = self.nbr[pos]
        rk = pack(np.minimum(x, w), np.maximum(x, w))
        by_key = np.argsort(keys)
        e = by_key[np.minimum(np.searchsorted(keys, rk, sorter=by_key), n - 1)]
        if not np.array_equal(keys[e], rk):
            raise InvariantError("insert-only row entry names no stored edge")
        side = x == eu[e]  # the entry in the row of the edge's smaller endpoint
        if not np.array_equal(self.val[pos], stamp[e]) \
                or not (np.bincount(e[side], minlength=n) == 1).all() \
                or not (np.bincount(e[~side], minlength=n) == 1).all():
            raise InvariantError("insert-only rows differ from the stored edges")


def _grown(arr: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros(cap, np.int64)
    out[: arr.shape[0]] = arr
    return out

