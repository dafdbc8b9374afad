"""Z-relations as sorted int64 key columns with int64 multiplicities, and their batch operators.

A :class:`ZRel` has named variables, an ``(n, k)`` int64 key array sorted lexicographically
with unique rows, and non-zero multiplicities. The operators run the kernels of the operator
set in force (:func:`gpu_ivm.cq.ops.current`: the CPU's Numba kernels, or their CUDA twins);
multiplications and sums are checked for int64 overflow.

- :func:`consolidate`: sort, sum the multiplicities of equal keys, drop zeros (the sort, then
  the group-and-sum ``reduce_sorted``);
- :meth:`ZRel.join`: natural join, multiplicities multiply: the right side sorted by the
  shared variables, then the two-pass ``expand_join`` (a lookup-join when the right side's
  variables are a subset of the left's, an expand-join otherwise);
- :meth:`ZRel.marginalize`: sum over the variables not kept (``reduce_sorted``, after a sort
  unless the kept variables are a prefix);
- :meth:`ZRel.merge`: ``V + δV`` (the linear merge ``merge_sorted``).

>>> r = consolidate(("A", "B"), [[1, 2], [1, 3], [1, 2]], [1, 1, 1])
>>> r.keys.tolist(), r.mult.tolist()
([[1, 2], [1, 3]], [2, 1])
>>> s = consolidate(("B", "C"), [[2, 7], [3, 7], [3, 8]], [5, 1, 1])
>>> j = r.join(s)
>>> j.vars, j.keys.tolist(), j.mult.tolist()
(('A', 'B', 'C'), [[1, 2, 7], [1, 3, 7], [1, 3, 8]], [10, 1, 1])
>>> m = j.marginalize(("A", "C"))
>>> m.keys.tolist(), m.mult.tolist()
([[1, 7], [1, 8]], [11, 1])
>>> m.merge(consolidate(("A", "C"), [[1, 8]], [-1])).keys.tolist()
[[1, 7]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import IntegerOverflowError
from ..kernels.lex_expand import LEFT, PRODUCT
from . import ops
from .lex_order import host_lex_order

__all__ = ["ZRel", "consolidate", "empty", "join_sorted", "scalar"]

_SAFE = 2.0 ** 62
_I64 = (-(2 ** 63), 2 ** 63 - 1)


def _exact_check(values) -> None:
    for v in values:
        if not _I64[0] <= int(v) <= _I64[1]:
            raise IntegerOverflowError(f"a multiplicity would leave the int64 range ({int(v)})")


def checked_mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise int64 product; raises IntegerOverflowError instead of wrapping."""
    with np.errstate(over="ignore"):
        p = x * y
    big = np.abs(x.astype(np.float64)) * np.abs(y.astype(np.float64)) >= _SAFE
    if big.any():
        idx = np.flatnonzero(big)
        _exact_check(int(a) * int(b) for a, b in zip(x[idx], y[idx]))
    return p


def checked_total(mult: np.ndarray) -> int:
    """Sum of ``mult`` as a Python int, refusing a result outside int64."""
    if len(mult) == 0:
        return 0
    if float(np.abs(mult).max()) * len(mult) < _SAFE:
        return int(mult.sum())
    tot = sum(int(v) for v in mult)
    _exact_check([tot])
    return tot


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start offsets of runs of equal rows in lexicographically sorted keys."""
    n = len(sorted_keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if sorted_keys.shape[1] == 0:
        return np.zeros(1, dtype=np.int64)
    change = np.any(sorted_keys[1:] != sorted_keys[:-1], axis=1)
    return np.concatenate(([0], np.flatnonzero(change) + 1))


def dense_ids(keys: np.ndarray) -> np.ndarray:
    """Rank of each row among the distinct rows (lexicographic), as int64."""
    order = host_lex_order(keys)
    starts = _group_starts(keys[order])
    flag = np.zeros(len(keys), dtype=np.int64)
    if len(starts):
        flag[starts] = 1
    ids = np.empty(len(keys), dtype=np.int64)
    ids[order] = np.cumsum(flag) - 1
    return ids


def checked_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise int64 sum; raises IntegerOverflowError instead of wrapping."""
    with np.errstate(over="ignore"):
        s = x + y
    bad = ((x >= 0) == (y >= 0)) & ((s >= 0) != (x >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _exact_check([int(x[i]) + int(y[i])])
    return s


@dataclass(frozen=True)
class ZRel:
    """A consolidated Z-relation: unique sorted keys, non-zero int64 multiplicities."""

    vars: tuple[str, ...]
    keys: np.ndarray
    mult: np.ndarray

    def __len__(self) -> int:
        return len(self.mult)

    def column(self, var: str) -> np.ndarray:
        return self.keys[:, self.vars.index(var)]

    def reorder(self, vars: tuple[str, ...]) -> ZRel:
        """The same relation with its columns in the order ``vars``."""
        if tuple(vars) == self.vars:
            return self
        if sorted(vars) != sorted(self.vars):
            raise ValueError(f"cannot reorder {self.vars} to {vars}")
        cols = [self.vars.index(v) for v in vars]
        return consolidate(tuple(vars), self.keys[:, cols], self.mult, unique=True)

    def marginalize(self, keep: tuple[str, ...]) -> ZRel:
        """Σ over the variables not in ``keep``; the result has columns in ``keep`` order."""
        cols = [self.vars.index(v) for v in keep]
        if cols == list(range(len(cols))):  # a prefix: the rows are in its order already
            return ZRel(tuple(keep), *ops.current().reduce_sorted(self.keys, self.mult,
                                                                  len(cols)))
        return consolidate(tuple(keep), self.keys[:, cols], self.mult)

    def merge(self, delta: ZRel) -> ZRel:
        """``self + delta`` (same variables, any column order): one linear merge of the two
        sorted relations."""
        d = delta.reorder(self.vars)
        return ZRel(self.vars, *ops.current().merge_sorted(self.keys, self.mult, d.keys,
                                                           d.mult))

    def support(self) -> ZRel:
        """The same keys with multiplicity 1."""
        return ZRel(self.vars, self.keys, np.ones(len(self), dtype=np.int64))

    def join(self, other: ZRel, *, support: bool = False) -> ZRel:
        """Natural join (``self ⋈ supp(other)`` with ``support``); the result's variables are
        ``self.vars`` then other's new ones. ``other`` is sorted by the shared variables
        first, then every row of ``self`` meets its range there (:func:`join_sorted`)."""
        shared = tuple(v for v in self.vars if v in other.vars)
        extra = tuple(v for v in other.vars if v not in self.vars)
        return join_sorted(self, other.reorder(shared + extra), len(shared), support=support)

    def to_dict(self) -> dict[tuple, int]:
        """{key tuple: multiplicity} with Python ints (for tests and small outputs)."""
        return {tuple(int(x) for x in k): int(m) for k, m in zip(self.keys, self.mult)}


def consolidate(vars, keys, mult, unique: bool = False) -> ZRel:
    """Sort rows, sum equal keys (unless ``unique`` promises no duplicates), drop zeros."""
    vars = tuple(vars)
    mult = np.asarray(mult, dtype=np.int64).reshape(-1)
    keys = np.asarray(keys, dtype=np.int64).reshape(len(mult), len(vars))
    op = ops.current()
    order = op.lex_order(keys)
    keys, mult = keys[order], mult[order]
    if not unique:
        return ZRel(vars, *op.reduce_sorted(keys, mult, len(vars)))
    nz = mult != 0
    return ZRel(vars, np.ascontiguousarray(keys[nz]), mult[nz])


def join_sorted(left: ZRel, right: ZRel, shared: int, *, support: bool = False,
                fence: np.ndarray | None = None) -> ZRel:
    """``left ⋈ right`` where ``right``'s first ``shared`` variables are the variables both
    have (and its rows are sorted, as a ZRel's are): each row of ``left`` is looked up by its
    values of them and expanded through its range by the two-pass ``expand_join`` kernel of
    the operator set in force; multiplicities multiply (checked), or are ``left``'s with
    ``support``. The rows come out in ``left``'s order, each one's matches in ``right``'s:
    sorted and unique, since ``left``'s are. ``fence``: ``right``'s fences, if it has them.

    >>> r = consolidate(("A", "B"), [[1, 2], [3, 4]], [2, 1])
    >>> s = consolidate(("B", "C"), [[2, 5], [2, 6]], [3, 1])
    >>> j = join_sorted(r, s, 1)
    >>> j.vars, j.keys.tolist(), j.mult.tolist()
    (('A', 'B', 'C'), [[1, 2, 5], [1, 2, 6]], [6, 2])
    """
    names = right.vars[:shared]
    if any(v not in left.vars for v in names) or any(v in left.vars
                                                       for v in right.vars[shared:]):
        raise ValueError(f"join_sorted: {right.vars} does not start with the {shared} "
                         f"variables it shares with {left.vars}")
    probes = left.keys[:, [left.vars.index(v) for v in names]]
    keys, mult = ops.current().expand_join(left.keys, left.mult, probes, right.keys,
                                           right.mult, shared, LEFT if support else PRODUCT,
                                           fence)
    return ZRel(left.vars + right.vars[shared:], keys, mult)


def empty(vars) -> ZRel:
    vars = tuple(vars)
    return ZRel(vars, np.zeros((0, len(vars)), dtype=np.int64), np.zeros(0, dtype=np.int64))


def scalar(value: int) -> ZRel:
    """A nullary relation holding ``value`` (empty when 0)."""
    return consolidate((), np.zeros((1, 0), dtype=np.int64), [value])
