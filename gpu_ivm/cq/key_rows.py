"""Sets of key-value rows (2-D int64 arrays, one row per key value) for the heavy/light
trade-off: order-preserving ids, membership, union and difference of sorted unique rows.

>>> import numpy as np
>>> a = np.array([[1, 2], [3, 4]]); b = np.array([[3, 4], [5, 6]])
>>> union_rows(a, b).tolist(), drop_rows(a, b).tolist()
([[1, 2], [3, 4], [5, 6]], [[1, 2]])
"""

from __future__ import annotations

import numpy as np

from .lex_order import pack
from .zrel import ZRel, dense_ids

__all__ = ["drop_rows", "find_rows", "ones", "row_ids", "union_rows", "unique_rows"]


def row_ids(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order-preserving int64 ids of the rows of two same-width key arrays."""
    packed = pack(a, b)
    if packed is not None:
        return packed[0], packed[1]
    ids = dense_ids(np.concatenate([a, b]))
    return ids[:len(a)], ids[len(a):]


def find_rows(table: np.ndarray, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position) of each row of ``probe`` in the sorted unique rows ``table``."""
    ta, pb = row_ids(table, probe)
    pos = np.searchsorted(ta, pb)
    found = pos < ta.shape[0]
    found[found] = ta[pos[found]] == pb[found]
    return found, pos


def unique_rows(rows: np.ndarray) -> np.ndarray:
    return np.unique(rows, axis=0) if rows.shape[0] else rows


def union_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return unique_rows(np.concatenate([a, b]))


def drop_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rows of ``a`` not in ``b`` (both sorted unique)."""
    return a[~find_rows(b, a)[0]] if a.shape[0] and b.shape[0] else a


def ones(vars: tuple[str, ...], rows: np.ndarray) -> ZRel:
    return ZRel(vars, rows, np.ones(rows.shape[0], np.int64))
