"""CUDA kernels that turn a graph batch held in device memory into the engine's consolidated
updates: the ``prep`` part of the cuda kernel set, twins of the CPU passes
``prep_rows``, ``prep_groups`` and ``prep_scatter`` of :mod:`gpu_ivm.kernels.batch_prep`, whose
per-row and per-run steps they call (``row_checks``, ``row_keys``, ``run_sum``, ``run_flags``,
``put_row``, ``put_flags``, ``scatter_one``; the encoder's table is probed by
:func:`gpu_ivm.kernels.hashmap.probe`).

A batch of rows ``(src, dst, sign)`` in device memory (user keys) becomes the sorted unique
packed keys ``a << 32 | b`` of its edges with their nonzero net signs (both orientations of an
undirected edge), the multiplicities they had under set semantics, and the pairs ``a < b``
the count reads (:mod:`gpu_ivm.device_batch` drives the steps):

1. :func:`rows` (one thread per row): the ids of both keys, the edge's packed keys, and the
   row's checks (sign ±1, key in range, self-loop, key not known yet) counted in ``stats``;
2. a sort of the keys: one ``sort`` when they carry their signs in the lowest bit (PACKED,
   ids below 2**30), else ``argsort`` and two gathers (CuPy's radix sort on hardware);
3. :func:`groups` (one thread per key): the net sign of each run of equal keys, three flags
   per run (kept, pair, delete), and what the host decides on counted in ``stats``;
4. an inclusive scan of the flags (``cumsum``) and :func:`scatter`, which writes the kept runs
   in place and the totals into ``stats``.

Counters other than the totals are atomics on rare events (bad rows, loops, unknown keys,
conflicts, new ids), so they do not contend in a steady batch.
"""

from __future__ import annotations

from numba import cuda

from .batch_prep import (
    BAD_KEY,
    BAD_SIGN,
    BIG,
    DELETES,
    DIRECTED,
    KEPT,
    LOOPS,
    NEW_DELETE,
    PAIRS,
    PROBE,
    SENTINEL_KEY,
    UNKNOWN,
    USED_NEW,
    key_at,
    put_flags,
    put_row,
    row_checks,
    row_keys,
    run_flags,
    run_sum,
    scatter_one,
)
from .cuda_launch import grid, launch
from .hashmap import probe


@cuda.jit(cache=True)
def _rows_kernel(io, m, mode):
    """Ids, packed keys and checks of each row. Launch config: 1-D grid-stride, one thread
    per row; the table reads are random by nature, the rest coalesced."""
    src, dst, sign, tkeys, tvals, ids, keys, sg, stats = io
    mask = tkeys.shape[0] - 1
    directed = (mode & DIRECTED) != 0
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < m:
        s = sign[i]
        ka = src[i]
        kb = dst[i]
        bad_sign, bad_key = row_checks(s, ka, kb, mode)
        if bad_sign:
            cuda.atomic.max(stats, BAD_SIGN, m - i)
        if bad_key:
            cuda.atomic.max(stats, BAD_KEY, m - i)
        if (mode & PROBE) != 0:
            ids[i] = probe(tkeys, tvals, ka, mask)
            ids[m + i] = probe(tkeys, tvals, kb, mask)
        k0, k1, what = row_keys(ids[i], ids[m + i], ka, kb, directed)
        if what == 1:
            cuda.atomic.add(stats, LOOPS, 1)
        elif what == 2:
            cuda.atomic.add(stats, UNKNOWN, 1)
        put_row(keys, sg, i, k0, k1, s, what, mode, directed)
        i += stride


@cuda.jit(cache=True)
def _groups_kernel(io, n, n0, directed, packed):
    """The net sign of each run of equal sorted keys, at the run's first key, and its flags
    (kept, pair, delete). Launch config: 1-D grid-stride, one thread per key; a thread at a
    run's first key sums the run (runs are short: repeated rows of one edge)."""
    keys, sg, net, flags, used, stats = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        k = key_at(keys, i, packed)
        put_flags(flags, i, False, False, False)
        if k != SENTINEL_KEY and (i == 0 or key_at(keys, i - 1, packed) != k):
            s = run_sum(keys, sg, i, n, packed)
            net[i] = s
            if s != 0:
                pair, dele, big, new_del, a_new, b_new = run_flags(k, s, n0, directed)
                put_flags(flags, i, True, pair, dele)
                if big:
                    cuda.atomic.add(stats, BIG, 1)
                if new_del:
                    cuda.atomic.add(stats, NEW_DELETE, 1)
                if a_new and cuda.atomic.cas(used, (k >> 32) - n0, 0, 1) == 0:
                    cuda.atomic.add(stats, USED_NEW, 1)
                if b_new and cuda.atomic.cas(used, (k & 0xFFFFFFFF) - n0, 0, 1) == 0:
                    cuda.atomic.add(stats, USED_NEW, 1)
        i += stride


@cuda.jit(cache=True)
def _scatter_kernel(io, n, packed):
    """Kept runs to their places (``cs``: inclusive scans of the flags). Launch config: 1-D
    grid-stride, one thread per key; thread 0 also writes the totals into ``stats``."""
    keys, net, flags, cs, out, stats = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    if i == 0:
        stats[KEPT] = cs[0, n - 1]
        stats[PAIRS] = cs[1, n - 1]
        stats[DELETES] = cs[2, n - 1]
    while i < n:
        scatter_one(keys, net, flags, cs, out, i, packed)
        i += stride


def rows(src, dst, sign, tkeys, tvals, ids, keys, sg, stats, mode: int) -> None:
    """The row pass over the ``src.shape[0]`` rows (``ids``: 2m, filled when ``mode`` has
    PROBE, else read; ``keys``, ``sg``: m directed or 2m undirected)."""
    m = src.shape[0]
    if m:
        launch(_rows_kernel, *grid(m), (src, dst, sign, tkeys, tvals, ids, keys, sg, stats),
               m, mode)


def groups(keys, sg, net, flags, used, stats, n0: int, directed: bool, packed: bool) -> None:
    """The run pass over the ``keys.shape[0]`` sorted keys (``used``: a zeroed flag per new
    id, at least one slot; ``packed``: the keys carry the signs, PACKED)."""
    n = keys.shape[0]
    if n:
        launch(_groups_kernel, *grid(n), (keys, sg, net, flags, used, stats), n, n0,
               directed, packed)


def scatter(keys, net, flags, cs, out, stats, packed: bool) -> None:
    """The placement over the ``keys.shape[0]`` sorted keys (``out``: 6 rows)."""
    n = keys.shape[0]
    if n:
        launch(_scatter_kernel, *grid(n), (keys, net, flags, cs, out, stats), n, packed)


__all__ = ["groups", "rows", "scatter"]
