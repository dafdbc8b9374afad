"""The current undirected edge set of a stream, as a sorted array of packed keys, and the
independent oracle built on it (the static counter on the current edge set)."""

from __future__ import annotations

import numpy as np

from gpu_ivm.static import count_triangles_arrays

_LOW = 0xFFFFFFFF


def packed(src, dst) -> np.ndarray:
    """``min << 32 | max`` of each undirected edge (ids must be in [0, 2^32))."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    return (np.minimum(src, dst) << 32) | np.maximum(src, dst)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """Sort plus mask (``np.unique`` is slow with numpy 2.4, see the toolchain notes)."""
    s = np.sort(x)
    if s.shape[0] == 0:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


class EdgeSet:
    """Sorted packed keys of the undirected simple graph (self-loops dropped)."""

    def __init__(self, src=None, dst=None):
        self.keys = np.zeros(0, np.int64)
        if src is not None:
            k = sorted_unique(packed(src, dst))
            self.keys = k[(k >> 32) != (k & _LOW)]

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def update(self, batch: dict) -> None:
        """Remove the batch's deletes and add its inserts (set semantics is checked)."""
        k = packed(batch["src"], batch["dst"])
        sign = np.asarray(batch["sign"])
        dele = np.sort(k[sign < 0])
        ins = np.sort(k[sign > 0])
        if dele.shape[0]:
            pos = np.searchsorted(self.keys, dele)
            pos_ok = np.minimum(pos, max(self.keys.shape[0] - 1, 0))
            if self.keys.shape[0] == 0 or not np.array_equal(self.keys[pos_ok], dele):
                raise ValueError("edge set: delete of an absent edge")
            self.keys = np.delete(self.keys, pos)
        if ins.shape[0]:
            pos = np.searchsorted(self.keys, ins)
            pos_ok = np.minimum(pos, max(self.keys.shape[0] - 1, 0))
            if self.keys.shape[0] and np.any(self.keys[pos_ok] == ins):
                raise ValueError("edge set: insert of a present edge")
            self.keys = np.insert(self.keys, pos, ins)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.keys >> 32, self.keys & _LOW

    def count(self) -> int:
        s, d = self.arrays()
        return int(count_triangles_arrays(s, d))


def oracle_counts(base_src, base_dst, batches: list[dict], at) -> dict[int, int]:
    """Triangle count after batch ``i`` for every ``i`` in ``at`` (-1: the base graph), with the
    static counter on the edge set maintained independently of any system under test."""
    at = set(at)
    es = EdgeSet(base_src, base_dst)
    out = {}
    if -1 in at:
        out[-1] = es.count()
    last = max(at) if at else -1
    for i, b in enumerate(batches):
        if i > last:
            break
        es.update(b)
        if i in at:
            out[i] = es.count()
    return out


def check_points(n_batches: int, k: int = 3) -> list[int]:
    """Batches after which the counts are checked: ``k`` spread over the run plus the last."""
    if n_batches <= 0:
        return []
    pts = {int(round(x)) for x in np.linspace(0, n_batches - 1, k + 1)}
    return sorted(pts | {n_batches - 1})
