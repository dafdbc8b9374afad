"""The count delta of a small undirected batch against a graph without a heavy part, in one
compiled call.

At ε = 1 (what ``epsilon="auto"`` keeps on graphs without hubs far above √N) every row of the
graph E lives in the light store, the views are empty, and the count's delta for a symmetric
batch Δ is

    6·Σ_{x<y} Δ(x,y)·|N(x) ∩ N(y)|  +  Σ_{(a,b)} Δ(a,b)·Σ_c Δ(b,c)·(3·E(c,a) + Δ(c,a)),

the pair term of :func:`~gpu_ivm.kernels.delta_kernels.path_weights` (its case 2, two light
rows) and the wedge term of :func:`~gpu_ivm.kernels.delta_kernels.batch_wedges`. A small batch
took two kernels, each with its own launch, scratch and a Python step between them, whose
fixed cost was most of the batch's (a few tens of tuples on a sliding window over a few
thousand edges). Here both terms come from one kernel over the batch's tuples, with the same
inner loops (:func:`~gpu_ivm.kernels.row_marks.dot_rows_mk`,
:func:`~gpu_ivm.kernels.delta_kernels._wedges_range`), so the sums are the same integers.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .delta_kernels import _wedges_range, mark_scratch
from .lsm import LO_MASK
from .row_marks import dot_rows_mk

#: up to this many Δ tuples (both orientations) a batch takes :func:`light_delta`
LIGHT_DELTA_MAX = 512


@nb.njit(cache=True)
def _light_delta_one(dkeys, dvals, eh, el, heavy, marks):
    """(Σ_{x<y} Δ(x,y)·|N(x) ∩ N(y)|, Σ of the wedge terms) of the batch, on the calling
    thread: a parallel kernel's launch costs more than such a batch (docs/design.md)."""
    n = dkeys.shape[0]
    wedges = np.empty(n, np.int64)
    _wedges_range(0, n, dkeys, dvals, eh, el, heavy, True, wedges)
    own = marks[0]
    pairs = 0
    for i in range(n):
        x = dkeys[i] >> 32
        y = dkeys[i] & LO_MASK
        if x < y:
            pairs += dvals[i] * dot_rows_mk(el, y, el, x, own)[0]
    return pairs, wedges.sum()


def light_delta(dkeys: np.ndarray, dvals: np.ndarray, eh, el, heavy: np.ndarray,
                ids: int) -> int:
    """The count delta (6·tr(Δ·E²) + 3·tr(Δ²·E) + tr(Δ³), each triangle 6 times) of a
    symmetric batch (sorted unique packed keys ``dkeys``, both orientations, net changes
    ``dvals``) against an undirected E whose heavy part ``eh`` is empty; ``el`` its light
    store, ``heavy`` the (all False) flags, ``ids`` the id space. On the calling thread.

    >>> import numpy as np
    >>> from gpu_ivm.store import ZStore
    >>> from gpu_ivm.encoding import pack
    >>> a, b = np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1])  # the path 0 - 1 - 2
    >>> order = np.argsort(pack(a, b))
    >>> el = ZStore.from_sorted(pack(a, b)[order], np.ones(4, np.int64), 3)
    >>> eh = ZStore(3)
    >>> d = pack(np.array([0, 2]), np.array([2, 0]))  # insert the edge 0 - 2
    >>> light_delta(d, np.ones(2, np.int64), eh.nt(), el.nt(), np.zeros(3, np.bool_), 3)
    6
    """
    if dkeys.shape[0] == 0:
        return 0
    pairs, wedges = _light_delta_one(dkeys, dvals, eh, el, heavy, mark_scratch(1, ids))
    return 6 * int(pairs) + int(wedges)
