"""The triangles of an insert-only graph with their birth batch, and their per-vertex and
per-edge counts: what ``GraphEngine(mode="insert_only", track_changes=True)`` keeps.

Under inserts only a triangle, once formed, never goes away, so the whole result is the union
of the batches' new triangles, each stamped with the batch that closed it (its *birth*, -1
for :meth:`~gpu_ivm.graph_engine.GraphEngine.load`). The ordered delta rule lists each new
triangle once, by its youngest edge (:func:`gpu_ivm.kernels.insert_adj.list_new`); this log
appends them, updates the per-vertex counts (by vertex id) and the per-edge counts (by edge
stamp: every stored edge has its own stamp in this mode), and answers:

- :meth:`TriangleLog.changes`: the last batch's new triangles, and the vertices and edges
  whose counts changed, with old and new counts, as Arrow tables (each triangle's and
  edge's user keys in increasing order, as the general engine reports them);
- :meth:`TriangleLog.batches`: the triangles born at or before a batch (as of that batch),
  as Arrow record batches.

>>> import numpy as np
>>> log = TriangleLog()
>>> log.add_edges(np.array([1, 2, 4294967298]), np.array([1, 2, 3]))  # stamps 1..3
>>> log.add(np.array([0]), np.array([1]), np.array([2]), np.array([3]), np.array([1]),
...         np.array([2]), birth=0, n_ids=3)
>>> t = log.changes(lambda ids: ids)
>>> t["triangles"].to_pylist(), t["vertex_counts"].column("new").to_pylist()
([{'a': 0, 'b': 1, 'c': 2, 'old': 0, 'new': 1, 'birth': 0}], [1, 1, 1])
>>> [b.num_rows for b in log.batches(lambda ids: ids, as_of=-1)]
[]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from .encoding import unpack

Decode = Callable[[np.ndarray], np.ndarray]


def by_key(decode: Decode, *ids: np.ndarray) -> list[np.ndarray]:
    """User keys of the id columns, each row reordered by user key (as the general engine
    reports undirected edges and triangles)."""
    cols = [decode(x) for x in ids]
    if not cols[0].shape[0]:
        return cols
    st = np.sort(np.stack(cols), axis=0)
    return list(st)


def grown(arr: np.ndarray, n: int) -> np.ndarray:
    """``arr`` with room for ``n`` int64 counts (doubled at least, new slots zero)."""
    if n <= arr.shape[0]:
        return arr
    out = np.zeros(max(n, 2 * arr.shape[0], 16), np.int64)
    out[: arr.shape[0]] = arr
    return out


class TriangleLog:
    """Triangles with births, per-vertex counts and per-edge counts (see module docstring)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []  # (a, b, c, birth) per batch, a < b < c
        self.vcount = np.zeros(0, np.int64)  # per vertex id
        self.ecount = np.zeros(0, np.int64)  # per edge stamp
        self.key_of = np.zeros(0, np.int64)  # packed key (u < v) per edge stamp
        self.last: tuple[np.ndarray, ...] | None = None

    def __len__(self) -> int:
        return sum(int(p[0].shape[0]) for p in self.parts)

    def add_edges(self, keys: np.ndarray, stamps: np.ndarray) -> None:
        """Record new edges (keys u < v) with their stamps (each edge its own)."""
        if not keys.shape[0]:
            return
        top = int(stamps.max()) + 1
        self.key_of = grown(self.key_of, top)
        self.ecount = grown(self.ecount, top)
        self.key_of[stamps] = keys

    def add(self, u, v, w, s_uv, s_uw, s_vw, *, birth, n_ids: int) -> None:
        """Append the triangles (u[i], v[i], w[i]) whose edges have stamps s_uv, s_uw, s_vw,
        born at batch ``birth`` (one batch, or an array: a snapshot's triangles); update the
        counts (``n_ids``: vertex ids in use)."""
        lo = np.minimum(np.minimum(u, v), w)
        hi = np.maximum(np.maximum(u, v), w)
        mid = u + v + w - lo - hi
        births = np.broadcast_to(np.asarray(birth, np.int64), lo.shape).copy()
        self.parts.append((lo, mid, hi, births))
        self.vcount = grown(self.vcount, n_ids)
        vid, dv = np.unique(np.concatenate([u, v, w]), return_counts=True)
        vold = self.vcount[vid].copy()
        self.vcount[vid] += dv
        sid, de = np.unique(np.concatenate([s_uv, s_uw, s_vw]), return_counts=True)
        eold = self.ecount[sid].copy()
        self.ecount[sid] += de
        self.last = (lo, mid, hi, births, vid, vold, sid, eold)

    def clear_last(self) -> None:
        """A batch that closed no triangle: its changes are empty."""
        z = np.zeros(0, np.int64)
        self.last = (z, z, z, z, z, z, z, z)

    def changes(self, decode: Decode) -> dict[str, pa.Table]:
        """The last batch's new triangles (``a``, ``b``, ``c``, ``old`` = 0, ``new`` = 1,
        ``birth``) and the vertices and edges whose counts changed (``old``, ``new``), in user
        keys."""
        z = np.zeros(0, np.int64)
        lo, mid, hi, birth, vid, vold, sid, eold = self.last or (z,) * 8
        ea, eb = by_key(decode, *unpack(self.key_of[sid]))
        ta, tb, tc = by_key(decode, lo, mid, hi)
        return {
            "triangles": pa.table({"a": ta, "b": tb, "c": tc,
                                   "old": np.zeros(lo.shape[0], np.int64),
                                   "new": np.ones(lo.shape[0], np.int64), "birth": birth}),
            "vertex_counts": pa.table({"vertex": decode(vid), "old": vold,
                                       "new": self.vcount[vid]}),
            "edge_counts": pa.table({"src": ea, "dst": eb, "old": eold,
                                     "new": self.ecount[sid]}),
        }

    def batches(self, decode: Decode, as_of: int | None = None,
                chunk_size: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """The triangles born at or before batch ``as_of`` (all of them: None), in birth
        order, as record batches of at most ``chunk_size`` rows."""
        for a, b, c, birth in self.parts:
            if as_of is not None:
                keep = birth <= as_of
                if not keep.all():
                    a, b, c, birth = a[keep], b[keep], c[keep], birth[keep]
            for i in range(0, a.shape[0], chunk_size):
                j = i + chunk_size
                ua, ub, uc = by_key(decode, a[i:j], b[i:j], c[i:j])
                yield pa.RecordBatch.from_pydict({"a": ua, "b": ub, "c": uc,
                                                  "birth": birth[i:j]})

    def arrays(self) -> tuple[np.ndarray, ...]:
        """All triangles (a, b, c, birth) as four arrays (for snapshots)."""
        if not self.parts:
            z = np.zeros(0, np.int64)
            return z, z, z, z
        return tuple(np.concatenate([p[i] for p in self.parts]) for i in range(4))
