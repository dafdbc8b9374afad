"""Cutting a batch's work into chunks of equal estimated cost.

A batch's cost per item (a pair to intersect, a Δ tuple to close wedges over) is known from
row lengths before any intersection runs. Items sorted by first key put a graph's hubs
together (R-MAT numbers its hubs first), so Numba's default split of a ``prange`` into one
contiguous block per thread gave one thread nearly all the work: the grouped pair weights of
a batch of 10⁵ updates on R-MAT 16 ran 57 ms on one thread and 51 ms on two. The kernels
instead cut the items into ``CHUNKS_PER_THREAD`` chunks per thread of equal total cost
(:func:`equal_cost_cuts`) and hand the chunks out dynamically, one at a time.

The same cuts serve a GPU launch: a chunk of equal cost maps to a block (or a warp), so a hub
row does not leave the other blocks idle. Everything here is plain ``njit`` code.

>>> import numpy as np
>>> equal_cost_cuts(np.array([8, 1, 1, 1, 1, 1, 1, 1, 1]), 2).tolist()
[0, 1, 9]
>>> equal_cost_cuts(np.array([1, 1, 1, 1]), 8).tolist()  # empty chunks where items run out
[0, 0, 1, 1, 2, 2, 3, 3, 4]
"""

from __future__ import annotations

import numba as nb
import numpy as np

#: chunks per thread: enough that a misjudged chunk does not hold the batch up, few enough
#: that handing them out costs nothing (R-MAT 16 and 18, B = 10³: 8 to 64 per thread within
#: 10 % of each other, all ~1.5x faster than one block per thread; B = 10⁵: 8 per thread best)
CHUNKS_PER_THREAD = 8

#: the estimated cost of an item besides the entries it reads: finding its rows (a few
#: dependent loads, each likely a cache miss), in units of entries read
ITEM_OVERHEAD = 16


@nb.njit(cache=True)
def equal_cost_cuts(cost, parts):
    """Bounds ``cuts[0] = 0 <= cuts[1] <= ... <= cuts[parts] = len(cost)`` of ``parts``
    contiguous chunks of the items: chunk k ends at the first item at which the running cost
    passes k/parts of the total (so no chunk's cost exceeds the average by more than its
    last item's). Costs are non-negative int64 with a total below 2**62 / ``parts``."""
    n = cost.shape[0]
    parts = max(parts, 1)
    total = 0
    for i in range(n):
        total += cost[i]
    cuts = np.empty(parts + 1, np.int64)
    cuts[0] = 0
    acc = 0
    i = 0
    for k in range(1, parts):
        target = total * k // parts
        while i < n and acc + cost[i] <= target:
            acc += cost[i]
            i += 1
        cuts[k] = i
    cuts[parts] = n
    return cuts
