"""Storage of the free-variable engine: the relations (two indexes each) and the views.

A relation K(X, Y) is kept as two :class:`~gpu_ivm.store.ZStore` indexes, ``fwd`` keyed
``(x, y)`` (rows by X, ``fwd.live[x]`` = |σ_{X=x}K|) and ``bwd`` keyed ``(y, x)``; its
heavy/light parts are not separate stores but per-value flags (``flags[0][x]`` for X,
``flags[1][y]`` for Y) with sorted lists of the heavy values, which is the double partition of
Definition 8 when both flags are used and the single partition when only the first is.

A view stores its values by key length: one variable — a dense int64 array over vertex ids;
two — a pair store (rows by the first variable); three — a pair store keyed by
``(id of (u, v), w)`` with the pair ids from a hash map, i.e. rows by the first two variables.

Arrays live in the backend's array module ``xp`` (``kernels.xp``: NumPy on the CPU, CuPy when
the state is in device memory), the pair ids of 3-ary views included
(:class:`~gpu_ivm.queries.pair_ids.PairIds`, a hash table in the same module).
"""

from __future__ import annotations

import numpy as np

from ..encoding import MAX_IDS, pack, transpose, unpack
from ..kernels import delta_kernels as _dk
from ..selection import array_module, compress_many, run_starts, select_many
from ..store import ZStore
from .pair_ids import PairIds

# the row of unknown pairs: above every pair id (ids are < MAX_IDS), so it is never stored
NO_ROW = np.int64(MAX_IDS + 1)


def consolidate(keys: np.ndarray, vals: np.ndarray, kernels=None) -> tuple[np.ndarray, np.ndarray]:
    """Sort packed keys, sum the values of equal keys, drop zero sums (arrays of the kernel
    set's array module)."""
    if keys.shape[0] == 0:
        return keys.astype(np.int64), vals.astype(np.int64)
    xp = array_module(kernels)
    dk = kernels.delta if kernels is not None else _dk
    order = xp.argsort(keys)  # equal keys are summed, so the sort need not be stable
    return dk.segment_sum_sorted(xp.ascontiguousarray(keys[order], dtype=np.int64),
                                 xp.ascontiguousarray(vals[order], dtype=np.int64))


def unique_sorted(vals: np.ndarray, xp=np) -> np.ndarray:
    """Sorted distinct values (sort + mask: numpy 2.4's np.unique is slow)."""
    s = xp.sort(vals)
    if s.shape[0] == 0:
        return s
    return s[run_starts(xp, s)]


def unique_sorted_many(xp, arrays: list) -> list:
    """:func:`unique_sorted` of each array (one host read on a device)."""
    if xp is np or len(arrays) <= 1:
        return [unique_sorted(a, xp) for a in arrays]
    ss = [xp.sort(a) for a in arrays]
    full = [s for s in ss if s.shape[0]]
    picked = iter(compress_many(xp, [(s, run_starts(xp, s)) for s in full]))
    return [next(picked) if s.shape[0] else s for s in ss]


class Relation:
    """One relation K(X, Y) with multiplicities > 0, indexed both ways, with heavy flags."""

    def __init__(self, kernels=None):
        self.kernels = kernels
        self.fwd = ZStore(0, kernels)
        self.bwd = ZStore(0, kernels)
        self.xp = xp = self.fwd.xp
        self.flags = [xp.zeros(0, np.uint8), xp.zeros(0, np.uint8)]
        self.heavy = [xp.zeros(0, np.int64), xp.zeros(0, np.int64)]

    def __len__(self) -> int:
        return len(self.fwd)

    def grow_ids(self, cap: int) -> None:
        self.fwd.grow_ids(cap)
        self.bwd.grow_ids(cap)
        for i in (0, 1):
            f = self.flags[i]
            if cap > f.shape[0]:
                g = self.xp.zeros(max(cap, 2 * f.shape[0]), np.uint8)
                g[: f.shape[0]] = f
                self.flags[i] = g

    def degree(self, pos: int, vals: np.ndarray) -> np.ndarray:
        live = (self.fwd if pos == 0 else self.bwd).live
        return live[vals]

    def get(self, keys: np.ndarray) -> np.ndarray:
        return self.fwd.get(keys)

    def add(self, keys: np.ndarray, deltas: np.ndarray) -> None:
        """Add deltas at sorted unique keys (both indexes)."""
        self.fwd.add(keys, deltas)
        tk = transpose(keys)
        order = self.xp.argsort(tk, kind="stable")
        self.bwd.add(tk[order], deltas[order])

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        return self.fwd.items()

    def rebuild(self, keys: np.ndarray, vals: np.ndarray, cap: int) -> None:
        self.fwd = ZStore.from_sorted(keys, vals, cap, self.kernels)
        tk = transpose(keys)
        order = self.xp.argsort(tk, kind="stable")
        self.bwd = ZStore.from_sorted(tk[order], vals[order], cap, self.kernels)

    def heavy_values(self, pos: int) -> np.ndarray:
        """Sorted values flagged heavy that have tuples (the heavy part's domain)."""
        live = (self.fwd if pos == 0 else self.bwd).live
        n = min(live.shape[0], self.flags[pos].shape[0])
        return self.xp.flatnonzero((self.flags[pos][:n] != 0)
                                   & (live[:n] > 0)).astype(np.int64)

    def set_heavy_lists(self) -> None:
        if self.xp is np:
            for i in (0, 1):
                self.heavy[i] = self.heavy_values(i)
            return
        masks = []
        for pos in (0, 1):  # heavy_values of both sides, with one host read
            live = (self.fwd if pos == 0 else self.bwd).live
            n = min(live.shape[0], self.flags[pos].shape[0])
            masks.append((self.flags[pos][:n] != 0) & (live[:n] > 0))
        self.heavy = select_many(self.xp, masks)


class View:
    """Values of one view, keyed by 1, 2 or 3 variables (see module docstring)."""

    def __init__(self, arity: int, kernels=None):
        self.arity = arity
        self.kernels = kernels
        self.store = ZStore(0, kernels)
        self.xp = self.store.xp
        self.dense = self.xp.zeros(0, np.int64)
        self.pairs = PairIds(kernels) if arity == 3 else None

    def grow_ids(self, cap: int) -> None:
        if self.arity == 1 and cap > self.dense.shape[0]:
            g = self.xp.zeros(max(cap, 2 * self.dense.shape[0]), np.int64)
            g[: self.dense.shape[0]] = self.dense
            self.dense = g

    def __len__(self) -> int:
        if self.arity == 1:
            return int(self.xp.count_nonzero(self.dense))
        return len(self.store)

    def clear(self) -> None:
        self.dense[:] = 0
        self.store = ZStore(0, self.kernels)
        if self.arity == 3:
            self.pairs = PairIds(self.kernels)

    def pair_ids(self, u: np.ndarray, v: np.ndarray, create: bool) -> np.ndarray:
        """Ids of the pairs (u, v) (-1 for unknown pairs unless ``create``)."""
        return self.pairs.ids(u, v, create)

    def add(self, cols: list[np.ndarray], vals: np.ndarray) -> None:
        """Add ``vals`` at the keys given as one column per key variable (repeats allowed)."""
        if vals.shape[0] == 0:
            return
        if self.arity == 1:
            self.xp.add.at(self.dense, cols[0], vals)
            return
        if self.arity == 2:
            keys = pack(cols[0], cols[1])
        else:
            keys = pack(self.pair_ids(cols[0], cols[1], True), cols[2])
        keys, vals = consolidate(keys, vals, self.kernels)
        if len(self.store) == 0 and self.store.used == 0:
            # an empty view (preprocessing, rebuilds): one sorted base run, no merging
            cap = int(keys[-1] >> 32) + 1 if keys.shape[0] else 0
            self.store = ZStore.from_sorted(keys, vals, cap, self.kernels)
            return
        self.store.add(keys, vals)

    def get(self, cols: list[np.ndarray]) -> np.ndarray:
        """Values at the keys (0 where absent)."""
        xp = self.xp
        if self.arity == 1:
            v = cols[0]
            out = xp.zeros(v.shape[0], np.int64)
            inside = v < self.dense.shape[0]
            out[inside] = self.dense[v[inside]]
            return out
        if self.arity == 2:
            return self.store.get(pack(cols[0], cols[1]))
        pid = self.pair_ids(cols[0], cols[1], False)
        return self.store.get(pack(xp.where(pid < 0, NO_ROW, pid), cols[2]))

    def items(self) -> tuple[list[np.ndarray], np.ndarray]:
        """All nonzero entries: (key columns, values), sorted by key."""
        xp = self.xp
        if self.arity == 1:
            nz = xp.flatnonzero(self.dense)
            return [nz.astype(np.int64)], self.dense[nz]
        keys, vals = self.store.items()
        first, last = unpack(keys)
        if self.arity == 2:
            return [first, last], vals
        u, v = self.pairs.decode(first)
        return [u, v, last], vals

    def rows(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a 3-ary view, the entries of pairs (u_i, v_i): (CSR ptr, third variable, value)."""
        pid = self.pair_ids(u, v, False)
        pid = self.xp.where(pid < 0, NO_ROW, pid)
        ptr, keys, vals = self.store.rows(pid)
        return ptr, keys & 0xFFFFFFFF, vals
