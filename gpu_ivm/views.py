"""Storage of a bilinear view: dense rows for large rows, sorted runs for the rest.

A row ``V(a, ·)`` whose support reaches a quarter of the id space is kept as a dense int64 row
(so the dense part never takes more than twice the bytes the same entries take in the sparse
store); every other entry lives in a :class:`~gpu_ivm.store.ZStore`. Rows are promoted when they
grow past the threshold and demoted only when the view is rebuilt (major rebalancing).
"""

from __future__ import annotations

import numpy as np

from .kernels import delta_kernels as _cpu_delta_kernels
from .kernels import store_kernels as _cpu_store_kernels
from .kernels import view_kernels as _cpu_view_kernels
from .store import ZStore

DENSE_FRACTION = 4  # a row is dense when support * DENSE_FRACTION >= id capacity
DENSE_MIN = 256


class ViewStore:
    """A view V(a, c) with nonzero int64 values.

    Examples
    --------
    >>> import numpy as np
    >>> v = ViewStore(4)
    >>> v.add(np.array([(1 << 32) | 3]), np.array([5]))
    >>> v.get(np.array([(1 << 32) | 3, 2])).tolist()
    [5, 0]
    """

    def __init__(self, id_capacity: int = 0, kernels=None):
        self.kernels = kernels
        self.sk = kernels.store if kernels is not None else _cpu_store_kernels
        self.vk = kernels.view if kernels is not None else _cpu_view_kernels
        self.dk = kernels.delta if kernels is not None else _cpu_delta_kernels
        self.sparse = ZStore(id_capacity, kernels)
        self.vrow = np.full(id_capacity, -1, np.int64)
        self.vmat = np.zeros((0, max(id_capacity, 1)), np.int64)
        self.row_keys: list[int] = []

    @property
    def n_dense(self) -> int:
        return len(self.row_keys)

    def grow_ids(self, capacity: int) -> None:
        self.sparse.grow_ids(capacity)
        if capacity > self.vrow.shape[0]:
            cap = max(capacity, 2 * self.vrow.shape[0])
            vrow = np.full(cap, -1, np.int64)
            vrow[: self.vrow.shape[0]] = self.vrow
            self.vrow = vrow
            if self.n_dense:
                mat = np.zeros((self.vmat.shape[0], cap), np.int64)
                mat[:, : self.vmat.shape[1]] = self.vmat
                self.vmat = mat
            else:
                self.vmat = np.zeros((0, cap), np.int64)

    def __len__(self) -> int:
        dense = int(np.count_nonzero(self.vmat[: self.n_dense])) if self.n_dense else 0
        return len(self.sparse) + dense

    def get(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, np.int64)
        out = self.sparse.get(keys)
        a = keys >> 32
        inside = a < self.vrow.shape[0]
        rows = np.full(keys.shape[0], -1, np.int64)
        rows[inside] = self.vrow[a[inside]]
        d = rows >= 0
        if d.any():
            out[d] = self.vmat[rows[d], keys[d] & 0xFFFFFFFF]
        return out

    def add(self, keys: np.ndarray, vals: np.ndarray, *, presorted: bool = False) -> None:
        """Add deltas at packed keys (any order, repeats allowed unless ``presorted``)."""
        keys = np.asarray(keys, np.int64)
        vals = np.asarray(vals, np.int64)
        if keys.shape[0] == 0:
            return
        if self.n_dense:
            keep = self.vk.scatter_dense(keys, vals, self.vrow, self.vmat)
            keys, vals = keys[keep], vals[keep]
        if not presorted:
            order = np.argsort(keys, kind="stable")
            keys, vals = self.dk.segment_sum_sorted(keys[order], vals[order])
        if keys.shape[0] == 0:
            return
        self.sparse.add(keys, vals)
        firsts = self.sk.sorted_unique_firsts(keys)
        self._promote_if_large(firsts)

    def _promote_if_large(self, firsts: np.ndarray) -> None:
        cap = self.sparse.id_capacity
        live = self.sparse.live[firsts]
        big = firsts[(live * DENSE_FRACTION >= cap) & (live >= DENSE_MIN)]
        if big.shape[0]:
            self.promote(big)

    def promote(self, rows: np.ndarray) -> None:
        """Move the given rows from the sparse store into dense rows."""
        rows = np.asarray(rows, np.int64)
        cap = self.sparse.id_capacity
        self.grow_ids(cap)
        n0 = self.n_dense
        need = n0 + rows.shape[0]
        if need > self.vmat.shape[0]:
            mat = np.zeros((max(need, 2 * self.vmat.shape[0], 4), self.vmat.shape[1]), np.int64)
            mat[:n0] = self.vmat[:n0]
            self.vmat = mat
        ptr, keys, vals = self.sparse.rows(rows)
        for i, a in enumerate(rows.tolist()):
            self.vrow[a] = n0 + i
            self.row_keys.append(a)
            seg = slice(ptr[i], ptr[i + 1])
            self.vmat[n0 + i, keys[seg] & 0xFFFFFFFF] = vals[seg]
        if keys.shape[0]:
            self.sparse.add(keys, -vals)

    @classmethod
    def build(cls, keys: np.ndarray, vals: np.ndarray, id_capacity: int,
              kernels=None) -> ViewStore:
        """From sorted unique keys with nonzero values; large rows become dense."""
        v = cls(id_capacity, kernels)
        cap = max(id_capacity, 1)
        firsts = keys >> 32
        if keys.shape[0]:
            support = np.bincount(firsts, minlength=cap)
            dense_rows = np.flatnonzero((support * DENSE_FRACTION >= cap)
                                        & (support >= DENSE_MIN))
        else:
            dense_rows = np.zeros(0, np.int64)
        if dense_rows.shape[0]:
            v.vmat = np.zeros((dense_rows.shape[0], v.vrow.shape[0]), np.int64)
            v.vrow[dense_rows] = np.arange(dense_rows.shape[0])
            v.row_keys = dense_rows.tolist()
            r = v.vrow[firsts]
            d = r >= 0
            v.vmat[r[d], keys[d] & 0xFFFFFFFF] = vals[d]
            keys, vals = keys[~d], vals[~d]
        v.sparse = ZStore.from_sorted(keys, vals, id_capacity, kernels)
        return v

    @classmethod
    def product(cls, left, right, rows: np.ndarray, id_capacity: int,
                kernels=None) -> ViewStore:
        """V = left·right restricted to first keys ``rows`` (sorted), built row by row with a
        dense accumulator (the memory of the result, never of the path list)."""
        vk = kernels.view if kernels is not None else _cpu_view_kernels
        cap = max(id_capacity, 1)
        v = cls(id_capacity, kernels)
        rows = np.ascontiguousarray(rows, np.int64)
        is_dense, mat, keys, vals = vk.build_view_rows(rows, left.nt(), right.nt(), cap,
                                                       DENSE_MIN, DENSE_FRACTION)
        dense_rows = rows[is_dense]
        if dense_rows.shape[0]:
            v.vmat = mat
            v.vrow[dense_rows] = np.arange(dense_rows.shape[0])
            v.row_keys = dense_rows.tolist()
        v.sparse = ZStore.from_sorted(keys, vals, id_capacity, kernels)
        return v

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """All nonzero entries, sorted by key."""
        sk_, sv = self.sparse.items()
        if not self.n_dense:
            return sk_, sv
        rows, cols = np.nonzero(self.vmat[: self.n_dense])
        a = np.asarray(self.row_keys, np.int64)[rows]
        dk_ = (a << 32) | cols.astype(np.int64)
        dv = self.vmat[rows, cols]
        keys = np.concatenate([sk_, dk_])
        vals = np.concatenate([sv, dv])
        order = np.argsort(keys, kind="stable")
        return keys[order], vals[order]
