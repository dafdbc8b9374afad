"""User keys (int64 or strings) ↔ dense vertex ids, and packed pair keys.

Ids are assigned in order of first appearance, 0, 1, 2, ...; a pair of ids packs into one int64
key ``first << 32 | second`` (ids stay below 2**31 - 1, so packed keys are non-negative int64:
we use int64 rather than uint64 because Numba promotes uint64/int64 mixes to float64).

Encoding is two-step so that a batch that fails validation changes nothing: :meth:`plan`
returns provisional ids for unseen keys without storing them, :meth:`commit` stores them.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError
from .kernels import hashmap

MAX_IDS = (1 << 31) - 2
LO_MASK = (1 << 32) - 1
# Integer keys in [0, DENSE_FACTOR * ids + DENSE_SLACK) also get a direct table key -> id,
# looked up with one load per key instead of a hash probe (the usual case: vertex ids that
# count from 0). A key outside it turns the table off for good.
DENSE_FACTOR = 4
DENSE_SLACK = 1 << 16


def _int64(a):
    """``a`` as int64 in its own array module (NumPy or CuPy); lists become NumPy arrays."""
    if getattr(a, "dtype", None) == np.int64:
        return a
    if hasattr(a, "astype"):
        return a.astype(np.int64, copy=False)
    return np.asarray(a, np.int64)


def pack(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pack id pairs into int64 keys.

    >>> pack(np.array([1]), np.array([2])).tolist()
    [4294967298]
    """
    return (_int64(first) << 32) | _int64(second)


def unpack(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack`.

    >>> [a.tolist() for a in unpack(np.array([4294967298]))]
    [[1], [2]]
    """
    keys = _int64(keys)
    return keys >> 32, keys & LO_MASK


def transpose(keys: np.ndarray) -> np.ndarray:
    """Swap the halves of packed keys (result unsorted)."""
    keys = _int64(keys)
    return ((keys & LO_MASK) << 32) | (keys >> 32)



def _headroom(need: int) -> int:
    """The entries an id array or the hash table (at half load) is sized for when it must
    grow to hold ``need`` keys: a quarter more, so that the batches after a bulk load (which
    numbers every vertex at once) add their new vertices without rebuilding the table or
    copying the arrays (R-MAT 20, whose 10⁶ vertices filled the table to its limit: about
    1.8 ms of the first batch after the load)."""
    return need + need // 4


class IdEncoder:
    """Dictionary encoder of user keys to dense ids.

    The key kind ("int" or "str") is fixed by the first keys it sees.

    Examples
    --------
    >>> enc = IdEncoder()
    >>> ids, new = enc.plan(np.array([10, -3, 10]))
    >>> ids.tolist()
    [0, 1, 0]
    >>> enc.commit(new); len(enc)
    2
    >>> enc.decode(np.array([1, 0])).tolist()
    [-3, 10]
    """

    def __init__(self) -> None:
        self.kind: str | None = None
        self._tkeys = np.zeros(64, np.int64)
        self._tvals = np.full(64, hashmap.EMPTY, np.int64)
        self._ints = np.zeros(64, np.int64)
        self._strs: dict[str, int] = {}
        self._str_list: list[str] = []
        self.n = 0
        # key -> id for small non-negative integer keys (-1: none), while every key fits;
        # None once one does not (see DENSE_FACTOR)
        self._dense: np.ndarray | None = np.full(0, -1, np.int64)

    def __len__(self) -> int:
        return self.n

    def _check_kind(self, keys: np.ndarray, column: str) -> str:
        kind = "str" if keys.dtype == object or keys.dtype.kind in "US" else "int"
        if self.kind is not None and keys.shape[0] and kind != self.kind:
            raise InputError(
                f"keys are {'strings' if kind == 'str' else 'integers'} but this engine was "
                f"built with {'string' if self.kind == 'str' else 'integer'} keys",
                column=column,
                row=0,
            )
        return kind

    def lookup(self, keys: np.ndarray, column: str = "src") -> np.ndarray:
        """Ids of known keys, -1 for unknown ones (changes nothing)."""
        return self._lookup(keys, column)[0]

    def _lookup(self, keys: np.ndarray, column: str) -> tuple[np.ndarray, int]:
        """:meth:`lookup` and how many keys it did not find (-1: not counted)."""
        kind = self._check_kind(keys, column)
        if kind == "str":
            get = self._strs.get
            return np.fromiter((get(k, -1) for k in keys.tolist()), np.int64,
                               keys.shape[0]), -1
        keys = np.ascontiguousarray(keys, np.int64)
        out = np.empty(keys.shape[0], np.int64)
        if self._dense is not None:  # every known key is in the direct table
            return out, hashmap.dense_lookup(self._dense, keys, out)
        hashmap.lookup(self._tkeys, self._tvals, keys, out)
        return out, -1

    def plan(self, keys: np.ndarray, column: str = "src") -> tuple[np.ndarray, np.ndarray]:
        """Ids for ``keys``: known ids, or provisional ones (len(self), ...) for unseen keys.

        Returns ``(ids, new_keys)``; pass ``new_keys`` to :meth:`commit` to make them real.
        """
        known, missing = self._lookup(keys, column)
        if self.kind == "str" or (self.kind is None and keys.dtype.kind in "OUS"):
            ids = known.copy()
            new: dict[str, int] = {}
            klist = keys.tolist()
            for i in np.flatnonzero(known < 0).tolist():
                k = klist[i]
                if not isinstance(k, str):
                    raise InputError("mixed key types: expected a string", column=column, row=i)
                ids[i] = self.n + new.setdefault(k, len(new))
            new_keys = np.array(list(new), dtype=object)
        elif missing == 0:  # every key known: nothing to number
            ids, new_keys = known, np.zeros(0, np.int64)
        else:
            ids, new_keys = hashmap.plan_new(np.ascontiguousarray(keys, np.int64), known, self.n)
        self.check_room(new_keys.shape[0], column)
        return ids, new_keys

    def commit(self, new_keys: np.ndarray) -> None:
        """Store keys returned by :meth:`plan` (in that order)."""
        m = new_keys.shape[0]
        if m == 0:
            return
        if self.kind is None:
            self.kind = "str" if new_keys.dtype == object or new_keys.dtype.kind in "US" else "int"
        if self.kind == "str":
            for i, k in enumerate(new_keys.tolist()):
                self._strs[k] = self.n + i
            self._str_list.extend(new_keys.tolist())
        else:
            new_keys = np.ascontiguousarray(new_keys, np.int64)
            if 2 * (self.n + m) > self._tkeys.shape[0]:
                cap = self._tkeys.shape[0]
                while 2 * _headroom(self.n + m) > cap:
                    cap *= 2
                self._tkeys = np.zeros(cap, np.int64)
                self._tvals = np.full(cap, hashmap.EMPTY, np.int64)
                hashmap.insert(self._tkeys, self._tvals, self._ints[: self.n],
                               np.arange(self.n, dtype=np.int64))
            hashmap.insert(self._tkeys, self._tvals, new_keys,
                           np.arange(self.n, self.n + m, dtype=np.int64))
            if self.n + m > self._ints.shape[0]:
                grown = np.zeros(max(2 * self._ints.shape[0], _headroom(self.n + m)), np.int64)
                grown[: self.n] = self._ints[: self.n]
                self._ints = grown
            self._ints[self.n : self.n + m] = new_keys
            self._dense_add(new_keys, self.n)
        self.n += m

    def _dense_add(self, new_keys: np.ndarray, first: int) -> None:
        """Enter integer keys with ids ``first, first + 1, ...`` in the direct table, or turn
        it off when one of them falls outside the range it may cover."""
        if self._dense is None or not new_keys.shape[0]:
            return
        lo, hi = int(new_keys.min()), int(new_keys.max())
        room = DENSE_FACTOR * (first + new_keys.shape[0]) + DENSE_SLACK
        if lo < 0 or hi >= room:
            self._dense = None
            return
        if hi >= self._dense.shape[0]:
            grown = np.full(min(max(_headroom(hi + 1), 2 * self._dense.shape[0]), room), -1,
                            np.int64)
            grown[: self._dense.shape[0]] = self._dense
            self._dense = grown
        self._dense[new_keys] = np.arange(first, first + new_keys.shape[0], dtype=np.int64)

    def hash_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The integer keys' hash table ``(tkeys, tvals)`` (layout of
        :mod:`gpu_ivm.kernels.hashmap`; every committed key is in it): what a device keeps a
        copy of to encode batches there (:class:`gpu_ivm.device_batch.DeviceKeyTable`)."""
        return self._tkeys, self._tvals

    def int_keys(self) -> np.ndarray:
        """The integer keys in id order (a view; ``decode`` of every id)."""
        return self._ints[: self.n]

    def check_room(self, n_new: int, column: str = "src") -> None:
        """Refuse ``n_new`` more keys when the ids would run out (as :meth:`plan` does)."""
        if self.n + n_new > MAX_IDS:
            raise InputError(f"more than {MAX_IDS} distinct keys", column=column)

    def decode(self, ids: np.ndarray) -> np.ndarray:
        """User keys of ``ids``."""
        ids = np.asarray(ids, np.int64)
        if self.kind == "str":
            return np.array(self._str_list, dtype=object)[ids]
        return self._ints[: self.n][ids]
