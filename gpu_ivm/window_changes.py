"""Each step's result changes of a sliding window (``SlidingWindow(track_changes=True)``).

The window's count needs no triangle to be listed: expiries are read from a calendar. To
report what each step changed, as the general engine's ``last_changes()`` does, the
triangles that appear and disappear are listed, which costs about what a birth costs:

- **Removed at step k**: the triangles alive at step k − 1 with an edge whose true end is
  k − 1. Those edges are exactly the ones that expire at k (their calendar end is k − 1 and
  they were not extended), and they are still in the adjacency, so their triangles are listed
  through :func:`gpu_ivm.kernels.window_adj.common_pairs`; a triangle with several such
  edges is listed by the one of smallest id.
- **Born at step k**: the triangles the births close, by the same rule as their count (each
  by its youngest edge); with tracking on, the births' one intersection both counts and
  lists them.
- A triangle removed and born again in the same step (an edge expired and arrived again)
  did not change; it is left out.

Per-vertex and per-edge triangle counts are kept (by vertex id and by edge id) and updated
from the net changes, so every change row has its ``old`` and ``new`` value. After a snapshot
is restored they are recounted from the live edges.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .errors import InvariantError
from .kernels import window_adj as wa
from .kernels.stamp_kernels import due_push
from .kernels.window_step import birth_triangles
from .triangle_log import by_key, grown


def _common_pairs(sw, eids: np.ndarray):
    return wa.common_pairs(sw._aoff, sw._aln, sw._anbr, sw._aval, sw._eu[eids], sw._ev[eids],
                           sw._marks)


def _flat(eids: np.ndarray, o, c, y, z):
    """``common_pairs``' output as (x, y, z): each triangle's edge x of ``eids`` and the ids
    of its two other edges."""
    total = int(c.sum())
    idx = np.repeat(o - (np.cumsum(c) - c), c) + np.arange(total, dtype=np.int64)
    return np.repeat(eids, c), y[idx] - 1, z[idx] - 1


class WindowChanges:
    """Per-vertex and per-edge triangle counts of a window and the changes of its last
    closed steps (see the module docstring)."""

    def __init__(self) -> None:
        self.vcount = np.zeros(0, np.int64)  # per vertex id
        self.ecount = np.zeros(0, np.int64)  # per edge id
        self.steps: list[tuple] = []  # per closed step: (step, triangles, vertices, edges)

    def clear(self) -> None:
        self.steps = []

    def removed(self, sw, expired: np.ndarray, k: int):
        """The triangles alive at k − 1 that step k removes (``expired``: the edges whose
        true end is k − 1), each once."""
        x, y, z = _flat(expired, *_common_pairs(sw, expired))
        end = sw._end
        keep = (end[y] >= k - 1) & (end[z] >= k - 1)
        keep &= ((end[y] != k - 1) | (y > x)) & ((end[z] != k - 1) | (z > x))
        return x[keep], y[keep], z[keep]

    def births(self, sw, born: np.ndarray, k: int):
        """What the window's ``births`` kernel does for the edges ``born`` at step k (file
        them under their expiry check, count the triangles they close and schedule their
        removal), from one intersection that also lists those triangles (each by its youngest
        edge, by the same rule, checked against the count). Returns (count, (x, y, z))."""
        cend, stamp = sw._cend, sw._stamp
        due_push(sw._due_head, sw._next, cend, born)
        pairs = _common_pairs(sw, born)
        count = int(birth_triangles(*pairs, born, k, cend, stamp, sw._cal))
        x, y, z = _flat(born, *pairs)
        keep = (cend[y] >= k) & (cend[z] >= k) & (stamp[y] < stamp[x]) & (stamp[z] < stamp[x])
        if int(keep.sum()) != count:
            raise InvariantError(f"step {k}: {int(keep.sum())} triangles listed for the "
                                 f"births, the count kernel found {count}")
        return count, (x[keep], y[keep], z[keep])

    def record(self, sw, k: int, gone, new) -> None:
        """Net the step's removed and born triangles, update the counts, keep the rows."""
        x = np.concatenate([gone[0], new[0]])
        y = np.concatenate([gone[1], new[1]])
        z = np.concatenate([gone[2], new[2]])
        sign = np.concatenate([np.full(gone[0].shape[0], -1, np.int64),
                               np.ones(new[0].shape[0], np.int64)])
        u, v = sw._eu[x], sw._ev[x]
        w = np.where((sw._eu[y] == u) | (sw._eu[y] == v), sw._ev[y], sw._eu[y])
        tri = np.sort(np.stack([u, v, w]), axis=0)
        if sign.shape[0]:  # a triangle both removed and born did not change
            order = np.lexsort(tri[::-1])
            tri, sign, x, y, z = tri[:, order], sign[order], x[order], y[order], z[order]
            same = np.r_[False, (tri[:, 1:] == tri[:, :-1]).all(axis=0)]
            drop = same | np.r_[same[1:], False]
            keep = ~drop
            tri, sign, x, y, z = tri[:, keep], sign[keep], x[keep], y[keep], z[keep]
        self.vcount = grown(self.vcount, sw._aoff.shape[0])
        self.ecount = grown(self.ecount, sw._cap)
        verts = self._update(self.vcount, tri.ravel(), np.tile(sign, 3))
        eids, old, new = self._update(self.ecount, np.concatenate([x, y, z]), np.tile(sign, 3))
        # edges by their endpoints: a compaction at the end of the step renumbers the ids
        edges = ((sw._eu[eids], sw._ev[eids]), old, new)
        self.steps.append((k, (tri, sign), verts, edges))

    @staticmethod
    def _update(counts: np.ndarray, ids: np.ndarray, d: np.ndarray):
        """counts[ids] += d (repeated ids summed); (ids whose count changed, old, new)."""
        touched = np.unique(ids)
        old = counts[touched].copy()
        np.add.at(counts, ids, d)
        new = counts[touched]
        moved = new != old
        return touched[moved], old[moved], new[moved]

    def remap(self, old_ids: np.ndarray) -> None:
        """Edge ids renumbered by a compaction: new id i was ``old_ids[i]``."""
        ecount = np.zeros(max(old_ids.shape[0], 1), np.int64)
        ecount[: old_ids.shape[0]] = self.ecount[old_ids]
        self.ecount = ecount

    def recount(self, sw) -> None:
        """The counts recomputed from the live edges (after a snapshot is restored)."""
        from .kernels.hashmap import lookup
        from .static import list_triangles_ids

        n = sw._n_eids
        alive = np.flatnonzero(sw._end[:n] >= sw.k)
        ids = max(sw._aoff.shape[0], 1)
        a, b, c = list_triangles_ids(sw._eu[alive], sw._ev[alive], ids)
        self.vcount = np.bincount(np.concatenate([a, b, c]), minlength=ids).astype(np.int64)
        keys = np.concatenate([(a << 32) | b, (a << 32) | c, (b << 32) | c])
        eid = np.empty(keys.shape[0], np.int64)
        lookup(sw._htk, sw._htv, keys, eid)
        self.ecount = np.bincount(eid, minlength=max(sw._cap, 1)).astype(np.int64)

    def tables(self, decode) -> dict[str, pa.Table]:
        """The changes of the steps kept, as Arrow tables with a ``step`` column:
        ``triangles`` (a < b < c by key, ``old``, ``new``), ``vertex_counts`` (``vertex``,
        ``old``, ``new``) and ``edge_counts`` (``src`` < ``dst`` by key, ``old``, ``new``)."""
        z = np.zeros(0, np.int64)
        tri = [np.concatenate([s[1][0][i] for s in self.steps] or [z]) for i in range(3)]
        sign = np.concatenate([s[1][1] for s in self.steps] or [z])
        tstep = np.concatenate([np.full(s[1][1].shape[0], s[0]) for s in self.steps] or [z])
        ta, tb, tc = by_key(decode, *tri)
        out = {"triangles": pa.table({"step": tstep, "a": ta, "b": tb, "c": tc,
                                      "old": (sign < 0).astype(np.int64),
                                      "new": (sign > 0).astype(np.int64)})}
        for name, pos in (("vertex_counts", 2), ("edge_counts", 3)):
            old = np.concatenate([s[pos][1] for s in self.steps] or [z])
            new = np.concatenate([s[pos][2] for s in self.steps] or [z])
            step = np.concatenate([np.full(s[pos][1].shape[0], s[0]) for s in self.steps]
                                  or [z])
            if name == "vertex_counts":
                cols = {"vertex": decode(np.concatenate([s[2][0] for s in self.steps] or [z]))}
            else:
                eu = np.concatenate([s[3][0][0] for s in self.steps] or [z])
                ev = np.concatenate([s[3][0][1] for s in self.steps] or [z])
                src, dst = by_key(decode, eu, ev)
                cols = {"src": src, "dst": dst}
            out[name] = pa.table({"step": step, **cols, "old": old, "new": new})
        return out
