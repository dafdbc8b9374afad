"""Dense ids of (u, v) pairs, for the 3-ary views: a hash table in the backend's memory.

A 3-ary view keys its entries by ``(id of (u, v), w)`` so that a key packs into one int64. The
ids live in an open-addressing table (:mod:`gpu_ivm.kernels.hashmap`, the same layout on both
backends) in the backend's array module, with the packed pair of every id in a dense array for
decoding: on a device, nothing of it crosses to the host except the number of new pairs of a
call (one scalar read, to size the arrays).

New pairs get the next ids in the order of their packed keys (sorted), so both backends give
every pair the same id.
"""

from __future__ import annotations

import numpy as np

from ..encoding import MAX_IDS, pack, unpack
from ..kernels import hashmap
from ..selection import array_module, run_starts
from ..store import _grow


class PairIds:
    """Ids of packed (u, v) pairs, created on demand and never freed.

    Examples
    --------
    >>> import numpy as np
    >>> p = PairIds()
    >>> p.ids(np.array([7, 3, 5]), np.array([1, 1, 2]), create=True).tolist()
    [2, 0, 1]
    >>> p.ids(np.array([3, 9]), np.array([1, 9]), create=False).tolist()
    [0, -1]
    >>> [c.tolist() for c in p.decode(np.array([2, 0]))]
    [[7, 3], [1, 1]]
    """

    def __init__(self, kernels=None):
        self.xp = xp = array_module(kernels)
        self.hk = getattr(kernels, "hash", hashmap) if kernels is not None else hashmap
        self.tkeys = xp.zeros(64, np.int64)
        self.tvals = xp.full(64, hashmap.EMPTY, np.int64)
        self.keys = xp.zeros(16, np.int64)  # packed pair of each id
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def _lookup(self, keys):
        out = self.xp.empty(keys.shape[0], np.int64)
        self.hk.lookup(self.tkeys, self.tvals, keys, out)
        return out

    def _reserve(self, m: int) -> None:
        """Room for ``m`` more ids: table load at most 1/2 (rehashed by doubling)."""
        xp, need = self.xp, self.n + m
        if 2 * need > self.tkeys.shape[0]:
            cap = self.tkeys.shape[0]
            while 2 * need > cap:
                cap *= 2
            self.tkeys = xp.zeros(cap, np.int64)
            self.tvals = xp.full(cap, hashmap.EMPTY, np.int64)
            self.hk.insert(self.tkeys, self.tvals, self.keys[: self.n],
                           xp.arange(self.n, dtype=np.int64))
        self.keys = _grow(xp, self.keys, need)

    def ids(self, u, v, create: bool):
        """Ids of the pairs ``(u[i], v[i])``; unknown pairs get -1, or new ids if ``create``."""
        xp = self.xp
        keys = xp.ascontiguousarray(pack(u, v), dtype=np.int64)
        found = self._lookup(keys)
        if not create or keys.shape[0] == 0:
            return found
        # the distinct unknown keys, sorted: packed keys are >= 0, so -1 marks the known ones
        s = xp.sort(xp.where(found < 0, keys, np.int64(-1)))
        fresh = s[run_starts(xp, s) & (s >= 0)]
        m = fresh.shape[0]  # the one host read of a call with unknown pairs
        if m == 0:
            return found
        if self.n + m > MAX_IDS:
            raise OverflowError(f"more than {MAX_IDS} distinct pairs in one view")
        self._reserve(m)
        new_ids = xp.arange(self.n, self.n + m, dtype=np.int64)
        self.hk.insert(self.tkeys, self.tvals, fresh, new_ids)
        self.keys[self.n : self.n + m] = fresh
        self.n += m
        return xp.where(found < 0, self._lookup(keys), found)

    def decode(self, ids):
        """The pairs of ``ids``: ``(u, v)``."""
        return unpack(self.keys[: self.n][ids])


__all__ = ["PairIds"]
