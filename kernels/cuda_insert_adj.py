"""CUDA twin of the insert-only engine's batch count (:mod:`gpu_ivm.kernels.insert_adj`).

After :func:`~gpu_ivm.kernels.insert_adj.insert_batch` has stored a batch (the table entries,
the per-edge arrays, the row appends), the new triangles are counted by the ordered delta rule:
new edge (u, v) with stamp s counts the common neighbours w whose edges (u, w) and (v, w) have
stamps below s, so each triangle is counted once, by its youngest edge. The CPU groups the
batch's edges by long endpoint and picks, per group, marks (a scratch of one slot per vertex)
or probes of the edge table; a GPU thread cannot have such a scratch. Here one thread takes one
new edge (grid-stride), and runs the CPU's own
:func:`~gpu_ivm.kernels.insert_adj.older_probe` on the shorter of its two rows (each entry's
other edge probed in the table with :func:`gpu_ivm.kernels.hashmap.probe`): O(min degree) per
edge, no scratch, no allocation. The per-edge counts are summed with ``cuda.atomic.add`` into
one scalar, read back once.

- :func:`count_new`: the twin of :func:`~gpu_ivm.kernels.insert_adj.count_serial` /
  :func:`~gpu_ivm.kernels.insert_adj.count_par` (same arguments, less the marks / threads).

The state is :class:`gpu_ivm.insert_only_state.EdgeState`'s: rows ``(off, ln, nbr, val)``
(val = the edge's stamp), table ``(htk, htv)`` (packed key u < v -> stamp), per-edge ``eu``,
``ev``, ``stamp``. The insert-only engine runs on the cpu backend; this twin is tested against
its kernels on real states in the CUDA simulator (``tests/cuda_sim_insert_adj_cases.py``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, empty, grid, launch, scalar, zeros
from .insert_adj import older_probe


@cuda.jit(cache=True)
def _count_kernel(adj, table, edge, total, first, n):
    """One thread per new edge ``first + j`` (j < n), grid-stride; the arrays travel in tuples
    (the simulator then hands them to the ``njit`` body as plain arrays). ``edge`` is (eu, ev,
    stamp, none: the unused outputs of a count)."""
    off, ln, nbr, val = adj
    htk, htv = table
    eu, ev, stamp, none = edge
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        e = first + j
        x = eu[e]
        y = ev[e]
        if ln[y] < ln[x]:
            x, y = y, x
        c = older_probe(off, ln, nbr, val, htk, htv, x, y, stamp[e], none, none, none, 0,
                        False)
        if c:
            cuda.atomic.add(total, 0, c)
        j += stride


def count_new(off, ln, nbr, val, htk, htv, stamp, eu, ev, first: int, n: int) -> int:
    """The triangles closed by the new edges ``first`` .. ``first + n - 1`` (stored, appended
    to the rows), each counted once, by its youngest edge: the CPU's ``count_serial``."""
    for name, a in (("off", off), ("ln", ln), ("nbr", nbr), ("val", val), ("htk", htk),
                    ("htv", htv), ("stamp", stamp), ("eu", eu), ("ev", ev)):
        check_1d(name, a, np.int64)
    if n <= 0:
        return 0
    total = zeros(1)
    blocks, tpb = grid(n)
    none = empty(0)
    launch(_count_kernel, blocks, tpb, (off, ln, nbr, val), (htk, htv), (eu, ev, stamp, none),
           total, np.int64(first), np.int64(n))
    return int(scalar(total, 0))
