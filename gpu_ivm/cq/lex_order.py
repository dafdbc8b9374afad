"""Lexicographic order of integer key rows on the host (the CPU operator set's sort).

Kept apart from :mod:`gpu_ivm.cq.zrel` (which uses the operator sets of :mod:`gpu_ivm.cq.ops`)
and from :mod:`gpu_ivm.cq.ops` (whose CPU set sorts with it), so that neither imports the
other.
"""

from __future__ import annotations

import numpy as np


def pack(*arrays: np.ndarray) -> list[np.ndarray] | None:
    """Order-preserving packing of the rows of same-width int64 key arrays into one int64
    each (first column most significant), or None when the value ranges need over 62 bits.

    >>> [p.tolist() for p in pack(np.array([[5, 1], [5, 3]]), np.array([[6, 1]]))]
    [[0, 2], [4]]
    """
    k = arrays[0].shape[1]
    nonempty = [a for a in arrays if len(a)]
    if not nonempty or k == 0:
        return [np.zeros(len(a), dtype=np.int64) for a in arrays]
    lo = np.min([a.min(axis=0) for a in nonempty], axis=0)
    hi = np.max([a.max(axis=0) for a in nonempty], axis=0)
    spans = [int(h) - int(l) for l, h in zip(lo, hi)]
    bits = [max(1, s.bit_length()) for s in spans]
    if sum(bits) > 62:
        return None
    out = []
    for a in arrays:
        p = np.zeros(len(a), dtype=np.int64)
        for c in range(k):
            p = (p << bits[c]) | (a[:, c] - lo[c])
        out.append(p)
    return out


def host_lex_order(keys: np.ndarray) -> np.ndarray:
    """A stable order that sorts the rows lexicographically (NumPy: ``lexsort``, or one
    ``argsort`` of the packed rows; the CPU operator set's sort)."""
    if keys.shape[1] == 0:
        return np.arange(len(keys))
    if keys.shape[1] > 1 and len(keys) >= 4096:  # one int64 per row sorts about 2x faster
        packed = pack(keys)
        if packed is not None:
            return np.argsort(packed[0], kind="stable")
    return np.lexsort(keys.T[::-1])
