"""The compact form of a small undirected graph: one sorted array, one compiled call per batch.

The IVM^ε stores (:mod:`gpu_ivm.store`, :mod:`gpu_ivm.partition`) keep a batch's cost
independent of the graph's size, at a price per batch that does not shrink with the graph:
on a sliding window of a few thousand edges a batch of 150 updates took about 300 µs, most of
it in the steps around the kernels, and the engine lost to recounting the window from scratch
(docs/benchmarks.md). Below :data:`COMPACT_MAX` stored tuples (both orientations of every edge)
an undirected engine on the cpu backend therefore keeps its edges as one sorted array of packed
keys (:class:`CompactGraph`) and applies each batch with
:func:`gpu_ivm.kernels.compact_graph.compact_step`: a merge that checks set semantics, the count
delta against the graph before the batch, and the new array, in one call. A batch then costs
O(|E| + |Δ| log |Δ| + Σ min-degree): at this size a rewrite of the array is cheaper than the
stores' bookkeeping.

The engine's stores are left as they were when the compact form was taken and are rebuilt from
the array (a strict repartition, as at a major rebalancing) as soon as anything else reads
them: a batch the compact form does not take (a conflict, which the general path words; more
than ``COMPACT_MAX`` tuples), a query other than the count and the sizes, a snapshot, a
recount. So every result is the one the stores give, and the compact form is an execution
strategy, not a second model. ``GPU_IVM_COMPACT_MAX=0`` turns it off.

>>> import numpy as np
>>> from gpu_ivm import GraphEngine
>>> g = GraphEngine()
>>> _ = g.load({"src": [1, 2], "dst": [2, 3]})
>>> rep = g.apply({"src": [1], "dst": [3], "sign": [1]})
>>> g.compact_form, rep.triangles
(True, 1)
>>> g.edges()[0].tolist(), g.compact_form  # the stores read: rebuilt from the array
([1, 1, 2], False)
"""

from __future__ import annotations

import os

import numpy as np

from .kernels.compact_graph import compact_step


def _compact_max_from_env() -> int:
    """``GPU_IVM_COMPACT_MAX`` (stored tuples, both orientations of each edge), default 2¹⁶."""
    v = os.environ.get("GPU_IVM_COMPACT_MAX", "").strip()
    if not v:
        return 1 << 16
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"GPU_IVM_COMPACT_MAX must be an integer, got {v!r}") from None
    if n < 0:
        raise ValueError(f"GPU_IVM_COMPACT_MAX must be >= 0, got {n}")
    return n


#: an engine keeps the compact form while it stores at most this many tuples (both
#: orientations of each undirected edge) and takes it again at half of it (so a graph near the
#: bound does not move between the forms at every batch); 0: never
COMPACT_MAX: int = _compact_max_from_env()


class CompactGraph:
    """The sorted packed keys ``x << 32 | y`` of both orientations of every edge, with the
    zeroed scratch that :func:`compact_step` needs (a vertex → Δ row map and marks, one entry
    per id).

    >>> import numpy as np
    >>> c = CompactGraph(np.array([1, 1 << 32], np.int64))  # the edge 0 - 1
    >>> c.step(np.array([2, 2 << 32], np.int64), np.array([1, 1]), 3)  # add 0 - 2
    (0, 0)
    >>> len(c), c.step(np.array([1, 1 << 32], np.int64), np.array([1, 1]), 3)[1]
    (4, 2)
    """

    def __init__(self, keys: np.ndarray):
        self.keys = np.ascontiguousarray(keys, dtype=np.int64)
        self._slot = np.full(0, -1, np.int64)
        self._marks = np.zeros(0, np.int8)
        self._scratch(int(self.keys[-1] >> 32) + 1 if self.keys.shape[0] else 0)

    def __len__(self) -> int:
        return self.keys.shape[0]

    def _scratch(self, n_ids: int) -> None:
        """Scratch for the ids below ``n_ids`` (doubling)."""
        if n_ids > self._slot.shape[0]:
            cap = max(n_ids, 2 * self._slot.shape[0], 64)
            self._slot = np.full(cap, -1, np.int64)
            self._marks = np.zeros(cap, np.int8)

    def step(self, dk: np.ndarray, dv: np.ndarray, n_ids: int) -> tuple[int, int]:
        """Apply the symmetric batch (sorted unique keys ``dk`` of both orientations, net
        signs ``dv`` of ±1, every id below ``n_ids``): ``(count delta, six per triangle;
        set-semantics violations)``. With a violation nothing changes."""
        self._scratch(n_ids)
        delta, bad, keys = compact_step(self.keys, dk, dv, self._slot, self._marks)
        if not bad:
            self.keys = keys
        return int(delta), int(bad)
