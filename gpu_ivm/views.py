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
        self.xp = xp = self.sparse.xp
        self.vrow = xp.full(id_capacity, -1, np.int64)
        self.vmat = xp.zeros((0, max(id_capacity, 1)), np.int64)
        self.row_keys: list[int] = []

    @property
    def n_dense(self) -> int:
        return len(self.row_keys)

    def grow_ids(self, capacity: int) -> None:
        self.sparse.grow_ids(capacity)
        if capacity > self.vrow.shape[0]:
            cap = max(capacity, 2 * self.vrow.shape[0])
            xp = self.xp
            vrow = xp.full(cap, -1, np.int64)
            vrow[: self.vrow.shape[0]] = self.vrow
            self.vrow = vrow
            if self.n_dense:
                mat = xp.zeros((self.vmat.shape[0], cap), np.int64)
                mat[:, : self.vmat.shape[1]] = self.vmat
                self.vmat = mat
            else:
                self.vmat = xp.zeros((0, cap), np.int64)

    def __len__(self) -> int:
        dense = int(self.xp.count_nonzero(self.vmat[: self.n_dense])) if self.n_dense else 0
        return len(self.sparse) + dense

    def get(self, keys: np.ndarray) -> np.ndarray:
        xp = self.xp
        keys = xp.asarray(keys, dtype=np.int64)
        out = self.sparse.get(keys)
        if not self.n_dense:
            return out
        a = keys >> 32
        inside = a < self.vrow.shape[0]
        rows = xp.where(inside, self.vrow[xp.minimum(a, self.vrow.shape[0] - 1)], -1)
        d = rows >= 0
        # gathered without a data-dependent size: keys outside dense rows read cell (0, 0)
        dense = self.vmat[xp.where(d, rows, 0), xp.where(d, keys & 0xFFFFFFFF, 0)]
        return xp.where(d, dense, out)

    def add(self, keys: np.ndarray, vals: np.ndarray, *, presorted: bool = False,
            below: int | None = None) -> None:
        """Add deltas at packed keys (any order, repeats allowed unless ``presorted``);
        ``below``: a bound on their first ids that the caller knows (``ZStore.add``)."""
        xp = self.xp
        keys = xp.asarray(keys, dtype=np.int64)
        vals = xp.asarray(vals, dtype=np.int64)
        if keys.shape[0] == 0:
            return
        if self.n_dense:
            keep = self.vk.scatter_dense(keys, vals, self.vrow, self.vmat)
            keys, vals = keys[keep], vals[keep]
        if not presorted:
            keys, vals = self.dk.segment_sum_sorted(*self._by_key(keys, vals))
        if keys.shape[0] == 0:
            return
        ride = getattr(self.vk, "promote_then", None)  # a device: read with the add's counts
        then = None if ride is None else ride(keys, self.sparse, DENSE_FRACTION, DENSE_MIN)
        self.sparse.add(keys, vals, below, then=then)
        if then is None or not then.done:
            self._promote_if_large(keys >> 32)
        elif then.rows.shape[0]:
            self.promote(then.rows)

    def _by_key(self, keys, vals):
        """``keys`` and ``vals`` ordered by key (equal keys in any order: they are summed):
        on a device one ``argsort`` and one kernel gathering both (``sorted_by_key``), else
        ``argsort`` and two gathers."""
        gather = getattr(self.sk, "sorted_by_key", None)
        if gather is not None:
            return gather(keys, vals)
        order = self.xp.argsort(keys)
        return keys[order], vals[order]

    def _promote_if_large(self, fx: np.ndarray) -> None:
        """Promote the rows among the sorted first keys ``fx`` (repeats allowed) that grew
        large enough for a dense row (one selection)."""
        big = self.vk.rows_to_promote(fx, self.sparse.live, self.sparse.id_capacity,
                                      DENSE_FRACTION, DENSE_MIN)
        if big.shape[0]:
            self.promote(big)

    def promote(self, rows: np.ndarray) -> None:
        """Move the given rows from the sparse store into dense rows."""
        xp = self.xp
        rows = xp.asarray(rows, dtype=np.int64)
        cap = self.sparse.id_capacity
        self.grow_ids(cap)
        n0 = self.n_dense
        need = n0 + rows.shape[0]
        if need > self.vmat.shape[0]:
            mat = xp.zeros((max(need, 2 * self.vmat.shape[0], 4), self.vmat.shape[1]), np.int64)
            mat[:n0] = self.vmat[:n0]
            self.vmat = mat
        ptr, keys, vals = self.sparse.rows(rows)
        slot = n0 + xp.arange(rows.shape[0], dtype=np.int64)
        self.vrow[rows] = slot
        self.row_keys.extend(rows.tolist())
        if keys.shape[0]:
            # each entry's dense row: the slot of the row whose CSR segment holds it
            at = xp.searchsorted(ptr, xp.arange(keys.shape[0], dtype=np.int64), "right") - 1
            self.vmat[slot[at], keys & 0xFFFFFFFF] = vals
            self.sparse.add(keys, -vals)

    @classmethod
    def build(cls, keys: np.ndarray, vals: np.ndarray, id_capacity: int,
              kernels=None) -> ViewStore:
        """From sorted unique keys with nonzero values; large rows become dense."""
        v = cls(id_capacity, kernels)
        xp = v.xp
        cap = max(id_capacity, 1)
        firsts = keys >> 32
        if keys.shape[0]:
            support = xp.bincount(firsts, minlength=cap)
            dense_rows = xp.flatnonzero((support * DENSE_FRACTION >= cap)
                                        & (support >= DENSE_MIN))
        else:
            dense_rows = xp.zeros(0, np.int64)
        if dense_rows.shape[0]:
            v.vmat = xp.zeros((dense_rows.shape[0], v.vrow.shape[0]), np.int64)
            v.vrow[dense_rows] = xp.arange(dense_rows.shape[0])
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
        """V = left·right restricted to first keys ``rows`` (sorted): on the CPU row by row with
        a dense accumulator (the memory of the result, never of the path list); on a device by
        :func:`product_entries` (expand, sort, reduce, in chunks of bounded path count)."""
        vk = kernels.view if kernels is not None else _cpu_view_kernels
        if not hasattr(vk, "build_view_rows"):
            keys, vals = product_entries(left, right, rows, kernels)
            return cls.build(keys, vals, id_capacity, kernels)
        cap = max(id_capacity, 1)
        v = cls(id_capacity, kernels)
        xp = v.xp
        rows = xp.ascontiguousarray(rows, dtype=np.int64)
        is_dense, mat, keys, vals = vk.build_view_rows(rows, left.nt(), right.nt(), cap,
                                                       DENSE_MIN, DENSE_FRACTION)
        dense_rows = rows[is_dense]
        if dense_rows.shape[0]:
            v.vmat = mat
            v.vrow[dense_rows] = xp.arange(dense_rows.shape[0])
            v.row_keys = dense_rows.tolist()
        v.sparse = ZStore.from_sorted(keys, vals, id_capacity, kernels)
        return v

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """All nonzero entries, sorted by key."""
        sk_, sv = self.sparse.items()
        if not self.n_dense:
            return sk_, sv
        xp = self.xp
        rows, cols = xp.nonzero(self.vmat[: self.n_dense])
        a = xp.asarray(np.asarray(self.row_keys, np.int64))[rows]
        dk_ = (a << 32) | cols.astype(np.int64)
        dv = self.vmat[rows, cols]
        keys = xp.concatenate([sk_, dk_])
        vals = xp.concatenate([sv, dv])
        order = xp.argsort(keys, kind="stable")
        return keys[order], vals[order]


PRODUCT_CHUNK = 1 << 24  # (a, b, c) paths expanded at once by product_entries (16 B each)


def product_entries(left: ZStore, right: ZStore, rows, kernels, chunk: int = PRODUCT_CHUNK):
    """Sorted nonzero entries (keys, values) of Σ_b left(a, b)·right(b, c) over first keys
    ``rows`` of ``left`` (sorted, unique), for kernel sets without ``build_view_rows``.

    The expand-sort-reduce form of a sparse product, which suits a GPU: the left tuples of the
    rows are cut into chunks of at most ``chunk`` paths (a prefix sum of the paths per tuple
    and a search for the cut points, a few host reads per chunk); each chunk's paths are
    emitted by the view-delta kernel, sorted and summed per key; the chunks' partial sums are
    merged the same way. Memory: the result plus one chunk of paths.
    """
    xp = left.xp
    _, lk, lv = left.rows(rows)
    empty = xp.zeros(0, np.int64)
    if lk.shape[0] == 0 or len(right) == 0:
        return empty, empty
    xs, ys = lk >> 32, lk & 0xFFFFFFFF
    paths = xp.cumsum(right.live[ys])
    total = int(paths[-1])
    cuts = [0]
    while total > 0 and cuts[-1] < lk.shape[0]:
        done = int(paths[cuts[-1] - 1]) if cuts[-1] else 0
        target = xp.asarray(np.array([done + chunk], np.int64))  # CuPy searches arrays only
        nxt = int(xp.searchsorted(paths, target, "right")[0])
        cuts.append(max(nxt, cuts[-1] + 1))  # a tuple with more paths than chunk goes alone
    no_dense = xp.zeros(0, np.int64), xp.zeros((0, 1), np.int64)  # no dense rows
    keys, vals = empty, empty
    for s, e in zip(cuts[:-1], cuts[1:]):
        n_paths = int(paths[e - 1]) - (int(paths[s - 1]) if s else 0)
        ok = xp.empty(n_paths, np.int64)
        ov = xp.empty(n_paths, np.int64)
        n = kernels.view.emit_view_deltas(xs[s:e], ys[s:e], lv[s:e], right.nt(), True,
                                          *no_dense, ok, ov)
        ck, cv = _sum_by_key(xp, kernels, xp.concatenate([keys, ok[:n]]),
                             xp.concatenate([vals, ov[:n]]))
        keys, vals = ck, cv
    return keys, vals


def _sum_by_key(xp, kernels, keys, vals):
    """Sorted unique keys with the sums of their values, zeros dropped."""
    order = xp.argsort(keys)  # summed per key: any order of equal keys
    keys, vals = kernels.delta.segment_sum_sorted(keys[order], vals[order])
    nz = vals != 0
    return keys[nz], vals[nz]
