"""String values of the query engine: a dictionary to dense int64 ids, and the kind of every
relation column.

The engine's kernels join int64 keys. A relation column may hold integers (used as they are)
or strings, which are dictionary-encoded (digest §9.3): every string of every string column
gets one id, the same in every relation, so equal strings join. A variable is of one kind:
every column it binds, in every atom, holds integers, or every one holds strings (a join of
an integer with a string would otherwise compare a number with an id). The kind of a column
is fixed by the first rows it receives; a table that breaks the rule is refused with an
:class:`~gpu_ivm.errors.InputError` naming the relation, the column and the variable.

New strings and kinds are planned while a batch is read and committed only when it is
applied (:meth:`ValueDict.commit`), so a refused batch leaves no trace. Ids follow first
appearance, and answers are sorted by them: a string output sorts in the order its values
were first seen, not alphabetically.

>>> vd = ValueDict()
>>> vd.encode(np.array(["b", "a", "b"], dtype=object)).tolist()
[0, 1, 0]
>>> vd.lookup(np.array(["a", "z"], dtype=object)).tolist()   # planned, not yet committed
[-1, -1]
>>> vd.commit(); vd.lookup(np.array(["a", "z"], dtype=object)).tolist()
[1, -1]
>>> vd.decode(np.array([1, 0])).tolist()
['a', 'b']
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InputError

__all__ = ["INT", "STR", "ColumnKinds", "ValueDict"]

INT, STR = "int", "str"


def _uniques(col: np.ndarray) -> tuple[list, np.ndarray]:
    """The distinct strings of ``col`` and, per row, its index among them (Arrow's
    dictionary encoding: one pass in C, then Python only over the distinct values)."""
    enc = pa.array(col, type=pa.string()).dictionary_encode()
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False).astype(
        np.int64)


class ValueDict:
    """Strings to dense ids (0, 1, ...), shared by every string column of an engine."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._values: list[str] = []
        self._pending: dict[str, int] = {}
        self._table: np.ndarray | None = None  # the strings as an object array, for decode

    def __len__(self) -> int:
        return len(self._values)

    @property
    def values(self) -> list[str]:
        """The committed strings, in id order."""
        return list(self._values)

    def encode(self, col: np.ndarray) -> np.ndarray:
        """Ids of the strings of ``col``; unseen ones get the next ids, planned until
        :meth:`commit` (or forgotten by :meth:`drop`)."""
        if not col.shape[0]:
            return np.zeros(0, np.int64)
        uniq, idx = _uniques(col)
        ids = np.empty(len(uniq), np.int64)
        for k, s in enumerate(uniq):
            i = self._ids.get(s)
            if i is None:
                i = self._pending.get(s)
                if i is None:
                    i = self._pending[s] = len(self._values) + len(self._pending)
            ids[k] = i
        return ids[idx]

    def lookup(self, col: np.ndarray) -> np.ndarray:
        """Ids of the committed strings of ``col``, -1 for others (changes nothing)."""
        if not col.shape[0]:
            return np.zeros(0, np.int64)
        uniq, idx = _uniques(col)
        get = self._ids.get
        return np.array([get(s, -1) for s in uniq], np.int64)[idx]

    def commit(self) -> None:
        """Keep the strings planned since the last commit or drop."""
        for s in sorted(self._pending, key=self._pending.__getitem__):
            self._ids[s] = len(self._values)
            self._values.append(s)
            self._table = None
        self._pending.clear()

    def drop(self) -> None:
        """Forget the strings planned since the last commit."""
        self._pending.clear()

    def decode_one(self, i: int) -> str:
        """The string of id ``i`` (committed or planned)."""
        if i < len(self._values):
            return self._values[i]
        return next(s for s, j in self._pending.items() if j == i)

    def decode(self, ids: np.ndarray) -> np.ndarray:
        """The strings of committed ids (an object array)."""
        if not len(ids):
            return np.zeros(0, dtype=object)
        if self._table is None:  # built once per change of the dictionary, not per request
            self._table = np.array(self._values, dtype=object)
        return self._table[np.asarray(ids, np.int64)]

    def restore(self, values: list[str]) -> None:
        """Start over from ``values`` (a snapshot's strings, in id order)."""
        if len(set(values)) != len(values):
            raise ValueError("a string appears twice in the dictionary")
        self._values = list(values)
        self._ids = {s: i for i, s in enumerate(self._values)}
        self._table = None
        self._pending.clear()


class ColumnKinds:
    """The kind (:data:`INT` or :data:`STR`) of every relation column, kept consistent
    along the query's variables (see the module docstring).

    ``atoms``: ``(relation, variables)`` per atom of the query.
    """

    def __init__(self, atoms) -> None:
        self._cols: dict[str, list[tuple[str, int]]] = {}  # variable -> the columns it binds
        self._vars: dict[tuple[str, int], list[str]] = {}  # column -> the variables it binds
        for rel, variables in atoms:
            for j, v in enumerate(variables):
                self._cols.setdefault(v, []).append((rel, j))
                self._vars.setdefault((rel, j), []).append(v)
        self.kinds: dict[tuple[str, int], str] = {}
        self._pending: dict[tuple[str, int], str] = {}

    def _known(self, col: tuple[str, int]) -> str | None:
        return self._pending.get(col, self.kinds.get(col))

    def of_variable(self, var: str) -> str | None:
        """The committed kind of ``var``, or None while no column bound to it has rows."""
        return next((self.kinds[c] for c in self._cols.get(var, ()) if c in self.kinds), None)

    def of_column(self, rel: str, j: int) -> str | None:
        """The kind of column ``j`` of relation ``rel`` (planned or committed), or None."""
        return self._known((rel, j))

    def check(self, rel: str, j: int, name: str, kind: str) -> None:
        """Plan column ``j`` of relation ``rel`` (named ``name`` in the table) as ``kind``;
        InputError if a column bound to one of its variables has the other kind."""
        for v in self._vars.get((rel, j), ()):
            for other in self._cols[v]:
                k = self._known(other)
                if k is not None and k != kind:
                    where = "this column" if other == (rel, j) else \
                        f"relation {other[0]} (its column {other[1] + 1})"
                    raise InputError(
                        f"relation {rel}: column {name!r} holds "
                        f"{'strings' if kind == STR else 'integers'} but variable {v} is "
                        f"bound to {'strings' if k == STR else 'integers'} in {where}",
                        column=name)
        self._pending[(rel, j)] = kind

    def commit(self) -> None:
        self.kinds.update(self._pending)
        self._pending.clear()

    def drop(self) -> None:
        self._pending.clear()
