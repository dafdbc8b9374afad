"""Software prefetch of the store rows a loop over pairs will walk next.

Finding row x of a sorted-run store is a chain of dependent loads: its run mask and length
(``st[6][x]``, ``st[7][x]``), then for each run its directory entry (``st[5][dirptr[j] + x]``),
then the row's first entries (``st[0]``, ``st[1]``). A batch's rows are spread over the whole
graph, so on a graph larger than the caches each link misses, and a loop that walks one pair
after another waits for three misses before the walk starts. Asking for each link a few pairs
ahead lets those waits overlap: :func:`prefetch_pairs` takes the pairs of a window through
one stage, and a loop keeps three cursors, each stage ``STAGE_GAP`` pairs behind the one
before, so that when a pair's stage reads a link, the stage before has asked for it
(:func:`gpu_ivm.kernels.delta_kernels._pair_chunk`). Prefetches are hints: results never
depend on them.

>>> import numpy as np
>>> from gpu_ivm.store import ZStore
>>> from gpu_ivm.encoding import pack
>>> st = ZStore.from_sorted(pack(np.array([0, 1]), np.array([1, 0])), np.ones(2, np.int64), 2)
>>> for stage in (1, 2, 3):
...     prefetch_pairs(pack(np.array([0]), np.array([1])), 0, 1, stage, st.nt(), st.nt())
"""

from __future__ import annotations

import numba as nb

from .jit import helper
from .lsm import LO_MASK
from .prefetch import prefetch

STAGE_GAP = 4  # pairs between a pair's stages: the third stage runs this many pairs ahead


@helper
def _row_words(runmask, live, boff, x):
    """Stage 1: the per-id words a walk of row x reads first."""
    if x < runmask.shape[0]:
        prefetch(runmask, x)
    if x < live.shape[0]:
        prefetch(live, x)
    if x < boff.shape[0]:
        prefetch(boff, x)


@helper
def _row_runs(keys, vals, runmask, dirptr, dirlen, dirs, x, heads):
    """Stage 2 (``heads`` False): the directory entries of row x in each run that holds it;
    stage 3 (``heads`` True): the row's first entries in those runs, by those entries."""
    if x >= runmask.shape[0]:
        return
    m = runmask[x]
    j = 0
    while m != 0:
        if m & 1:
            dp = dirptr[j]
            if dp >= 0 and x + 1 < dirlen[j]:
                if not heads:
                    prefetch(dirs, dp + x)
                elif dirs[dp + x] < keys.shape[0]:
                    prefetch(keys, dirs[dp + x])
                    prefetch(vals, dirs[dp + x])
        m >>= 1
        j += 1


@helper
def _stage(st, x, stage):
    if stage == 1:
        _row_words(st[6], st[7], st[11], x)
    else:
        _row_runs(st[0], st[1], st[6], st[3], st[4], st[5], x, stage == 3)


@nb.njit(cache=True, inline="always")
def prefetch_pairs(okeys, q0, q1, stage, stx, sty):
    """Stage ``stage`` (1, 2 or 3) of the prefetch for the pairs okeys[q0:q1] (packed (x, y),
    sorted by x): row x of ``stx`` once per run of equal x, row y of ``sty`` for each."""
    for q in range(q0, q1):
        x = okeys[q] >> 32
        if q == 0 or (okeys[q - 1] >> 32) != x:
            _stage(stx, x, stage)
        _stage(sty, okeys[q] & LO_MASK, stage)
