"""CUDA twins of the sliding window's triangle work (:mod:`gpu_ivm.kernels.window_step`).

A window step's cost is the triangles through its births and its revisited (extended) edges:
O(arrivals × the smaller neighbourhood). On the CPU they come from
:func:`~gpu_ivm.kernels.window_adj.common_pairs`, which writes the long row into a scratch of
one slot per vertex; a GPU thread cannot have such a scratch. Here one thread takes one edge
(u, v) (grid-stride), walks the shorter of the two adjacency rows and looks each neighbour w
up in the window's edge hash table (key (min(v, w), max(v, w)) → edge id, the layout of
:mod:`gpu_ivm.kernels.hashmap`, probed with its ``probe``): O(min degree) per edge, no
scratch, no allocation. Every triangle found goes through the CPU's own per-triangle rule
(:func:`~gpu_ivm.kernels.window_step.birth_slot`,
:func:`~gpu_ivm.kernels.window_step.extend_move`), and its calendar change is added with
``cuda.atomic.add`` (the one difference from the CPU loops).

- :func:`birth_triangles`: the CPU's ``common_pairs`` + ``birth_triangles`` (returns the new
  triangles; one scalar read back).
- :func:`extend_triangles`: the CPU's ``common_pairs`` + ``extend_triangles``.

The adjacency ``adj`` is ``(off, ln, nbr, val)`` (val = edge id + 1) and ``table`` is
``(keys, vals)``, as :class:`~gpu_ivm.sliding_window.SlidingWindow` keeps them. The window
runs on the cpu backend; these twins are tested against its kernels on real window states in
the CUDA simulator (``tests/cuda_sim_stamp_cases.py``). The step's bookkeeping (classifying
the arrivals, the due lists, appending rows) has its twins in
:mod:`gpu_ivm.kernels.cuda_window_step`, and :class:`gpu_ivm.window_device.DeviceSlidingWindow`
runs whole steps on the device with both.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, grid, launch, scalar, zeros
from .hashmap import probe
from .window_step import birth_slot, extend_move


@cuda.jit(cache=True)
def _triangle_kernel(adj, table, edge, eids, k, seq_base, cal, total, n, extend):
    """One thread per edge of ``eids`` (births, or with ``extend`` the revisited extended
    edges), grid-stride; the arrays travel in tuples. ``edge`` is (eu, ev, end, stamp or
    previous end, ext_seq; unused for births)."""
    off, ln, nbr, val = adj
    tkeys, tvals = table
    eu, ev, end, aux, ext_seq = edge
    mask = tkeys.shape[0] - 1
    r = cal.shape[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        x = eids[j]
        s = eu[x]
        o = ev[x]
        if ln[o] < ln[s]:
            s, o = o, s
        for p in range(off[s], off[s] + ln[s]):
            w = nbr[p]
            if w == o:
                continue
            z = probe(tkeys, tvals, (min(o, w) << 32) | max(o, w), mask)
            if z < 0:
                continue
            if extend:
                old, new = extend_move(x, val[p] - 1, z, k, end, aux, ext_seq, seq_base)
                if old != new:
                    cuda.atomic.add(cal, (old + 1) % r, 1)
                    cuda.atomic.add(cal, (new + 1) % r, -1)
            else:
                q = birth_slot(x, val[p] - 1, z, k, end, aux, r)
                if q >= 0:
                    cuda.atomic.add(cal, q, -1)
                    cuda.atomic.add(total, 0, 1)
        j += stride


def _check(adj, table, *named) -> None:
    for name, a in tuple(zip(("off", "ln", "nbr", "val"), adj)) + tuple(
            zip(("table keys", "table values"), table)) + named:
        check_1d(name, a, np.int64)


def birth_triangles(adj, table, eu, ev, born, k: int, end, stamp, cal) -> int:
    """The triangles alive at step k that the edges ``born`` close, each counted once (by its
    youngest edge, ``stamp``), their removals scheduled in the ring calendar ``cal``;
    returns their number. As the CPU's ``births`` after its due-list filing."""
    _check(adj, table, ("eu", eu), ("ev", ev), ("born", born), ("end", end),
           ("stamp", stamp), ("cal", cal))
    n = born.shape[0]
    if n == 0:
        return 0
    total = zeros(1)
    blocks, tpb = grid(n)
    launch(_triangle_kernel, blocks, tpb, adj, table, (eu, ev, end, stamp, stamp), born,
           np.int64(k), np.int64(0), cal, total, n, False)
    return int(scalar(total, 0))


def extend_triangles(adj, table, eu, ev, xs, k: int, end, prev_end, ext_seq, seq_base: int,
                     cal) -> None:
    """Move the scheduled removals of the triangles alive at step k through the extended
    edges ``xs`` (their ends moved from ``prev_end`` to ``end``; ``ext_seq`` above
    ``seq_base`` marks this step's revisits), as the CPU's ``extend_triangles`` over
    ``common_pairs``."""
    _check(adj, table, ("eu", eu), ("ev", ev), ("xs", xs), ("end", end),
           ("prev_end", prev_end), ("ext_seq", ext_seq), ("cal", cal))
    n = xs.shape[0]
    if n == 0:
        return
    blocks, tpb = grid(n)
    launch(_triangle_kernel, blocks, tpb, adj, table, (eu, ev, end, prev_end, ext_seq), xs,
           np.int64(k), np.int64(seq_base), cal, zeros(1), n, True)
