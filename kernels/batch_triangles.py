"""The triangles through a batch's pairs of one sign, each once: the change feed's rows.

The triangles a batch removes are those through its deleted pairs in the graph before it; the
triangles it adds, those through its inserted pairs in the graph after it. A triangle with two
or three of the batch's pairs of that sign is found from each of them: it is kept at the
smallest (:func:`kept_triangle`: one binary search of the batch per other edge), so the rows
come out each once, without the sort a deduplication would need. Each row is written as
(lo, mid, hi), its ids in increasing order.

:func:`batch_pair_triangles` lists the pairs' common neighbours with the static listing's
walk (:func:`~gpu_ivm.kernels.graph_listing.common_above`: a long row marked once for its
pairs, or its bitmap tested) and keeps them in one compiled pass. The CUDA twin
(:func:`gpu_ivm.kernels.cuda_graph_listing.batch_pair_triangles`) gives each batch key a
thread (a hub pair a block), walks the pair with the same
:func:`~gpu_ivm.kernels.graph_listing.walk_above` and calls the same :func:`kept_triangle`;
it leaves the rows it drops in place, marked by ``lo = -1`` (no compaction, no second read),
which readers drop (:func:`live_rows`).

>>> import numpy as np
>>> from gpu_ivm.store import ZStore
>>> from gpu_ivm.encoding import pack
>>> a = np.array([0, 0, 1, 1, 1, 2, 2, 2, 3, 3])  # two triangles {0, 1, 2} and {1, 2, 3}
>>> b = np.array([1, 2, 0, 2, 3, 0, 1, 3, 1, 2])
>>> st = ZStore.from_sorted(pack(a, b), np.ones(10, np.int64), 4).nt()
>>> dk = pack(np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))  # delete {0, 1} and {1, 2}
>>> lo, mid, hi = batch_pair_triangles(dk, -np.ones(4, np.int64), -1, st, st,
...                                    np.zeros(4, np.bool_))
>>> sorted(zip(lo.tolist(), mid.tolist(), hi.tolist()))  # {0, 1, 2} once, not twice
[(0, 1, 2), (1, 2, 3)]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .graph_listing import common_above
from .graph_local import batch_value, oriented
from .jit import helper
from .lsm import LO_MASK


@helper
def kept_triangle(x, y, c, dkeys, dvals, sign):
    """``(kept, lo, mid, hi)`` for the triangle {x, y, c} found at the batch pair {x, y}
    (net change ``sign``): kept unless {x, c} or {y, c} is a pair of the batch with the same
    net change and a smaller key (``dkeys``: the batch's sorted packed keys, both
    orientations; a pair's key is (min, max) packed); lo < mid < hi its ids."""
    a = min(x, y)
    b = max(x, y)
    k = (a << 32) | b
    n = dkeys.shape[0]
    e1 = (min(x, c) << 32) | max(x, c)
    e2 = (min(y, c) << 32) | max(y, c)
    kept = not ((e1 < k and batch_value(dkeys, dvals, 0, n, e1) == sign)
                or (e2 < k and batch_value(dkeys, dvals, 0, n, e2) == sign))
    lo = min(a, c)
    hi = max(b, c)
    return kept, lo, a + b + c - lo - hi, hi


@nb.njit(cache=True)
def _pairs_of(dkeys, dvals, sign, hst, lst, heavy):
    """The batch's pairs x < y of net change ``sign``, each as (longer row, shorter row)
    after the stores' current degrees (ties: the smaller id first), sorted by the longer
    row (what :func:`common_above` takes)."""
    n = 0
    for i in range(dkeys.shape[0]):
        x = dkeys[i] >> 32
        if x < (dkeys[i] & LO_MASK) and dvals[i] == sign:
            n += 1
    ls = np.empty(n, np.int64)
    ss = np.empty(n, np.int64)
    k = 0
    for i in range(dkeys.shape[0]):
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        if x < y and dvals[i] == sign:
            # the device kernel's orientation (x < y: a tie keeps x, the smaller id, first)
            _, ls[k], _, ss[k] = oriented(x, y, hst, lst, heavy)
            k += 1
    order = np.argsort(ls, kind="mergesort")
    return ls[order], ss[order]


@nb.njit(cache=True)
def _kept_rows(ls, ss, idx, c, dkeys, dvals, sign):
    """The rows (lo, mid, hi) of the triangles (ls[idx[t]], ss[idx[t]], c[t]) that
    :func:`kept_triangle` keeps, in order."""
    n = idx.shape[0]
    lo = np.empty(n, np.int64)
    mid = np.empty(n, np.int64)
    hi = np.empty(n, np.int64)
    k = 0
    for t in range(n):
        i = idx[t]
        kept, a, b, h = kept_triangle(ls[i], ss[i], c[t], dkeys, dvals, sign)
        if kept:
            lo[k], mid[k], hi[k] = a, b, h
            k += 1
    return lo[:k], mid[:k], hi[:k]


def batch_pair_triangles(dkeys, dvals, sign, hst, lst, heavy):
    """``(lo, mid, hi)``: every triangle through a pair {x, y} of the batch with net change
    ``sign`` in the graph as stored now (heavy store ``hst``, light store ``lst``, per-id
    ``heavy`` flags), once, as its ids in increasing order. ``dkeys``: the batch's sorted
    unique packed keys, both orientations of each pair; ``dvals``: their net changes."""
    dkeys = np.ascontiguousarray(dkeys, np.int64)
    dvals = np.ascontiguousarray(dvals, np.int64)
    ls, ss = _pairs_of(dkeys, dvals, sign, hst, lst, heavy)
    floors = np.full(ls.shape[0], -1, np.int64)
    parts = []
    s = 0
    while s < ls.shape[0]:
        idx, c, s = common_above(ls, ss, floors, hst, lst, heavy, s)
        parts.append(_kept_rows(ls, ss, idx, c, dkeys, dvals, sign))
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, z
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def live_rows(lo, mid, hi) -> tuple:
    """The rows of :func:`batch_pair_triangles` (either backend's) less those it dropped in
    place (``lo = -1``, the CUDA twin's)."""
    keep = lo >= 0
    return lo[keep], mid[keep], hi[keep]
