"""CUDA twins of the query engine's joins and of its sort: :mod:`gpu_ivm.kernels.lex_expand`,
:mod:`gpu_ivm.kernels.lex_join` and the sort before a consolidation.

- :func:`expand_join`: the two-pass expand. A count kernel, one thread per left row, finds the
  row's range in the run with the CPU's per-probe body
  (:func:`~gpu_ivm.kernels.lex_search.prefix_bounds`) and writes its size; an exclusive scan
  (:func:`~gpu_ivm.kernels.cuda_launch.exclusive_scan`) gives each row its first output row
  and the total; a fill kernel, one thread per left row, writes the row's output with the
  CPU's per-row body (:func:`~gpu_ivm.kernels.lex_expand.expand_rows`), products tested for
  int64 overflow before they are taken. Equal to the CPU's, row for row.
- :func:`extend_level`: one level of Generic Join, one thread per partial tuple running the
  CPU's per-tuple body (:func:`~gpu_ivm.kernels.lex_join.extend_tuple`: walk the smallest
  range, gallop in the others) twice: a count pass (extensions and candidates per tuple), a
  scan of the counts, and a fill pass writing each tuple's extensions at its offset. Each
  thread keeps its gallop cursors in a scratch row of its own (global memory, one row per
  thread of the grid). Equal to the CPU's level, entry for entry.
- :func:`lex_order`, :func:`sort_rows`, :func:`consolidate`: the sort before a consolidation
  is the array module's ``lexsort`` (CuPy's on a device, a Thrust sort; NumPy's under the
  simulator), followed by a gather and the group-and-sum twin
  (:func:`gpu_ivm.kernels.cuda_lex.reduce_sorted`). Device arrays in, device arrays out: no
  NumPy function sees them (tested with the strict CuPy stand-in,
  ``tests/cuda_strict_cq_cases.py``).

Key rows are 2-D int64 arrays; arrays travel to the kernels in tuples (see
:mod:`gpu_ivm.kernels.cuda_launch`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import array_module, empty, exclusive_scan, grid, launch, result, scalar, zeros
from .cuda_lex import reduce_sorted
from .lex_expand import PRODUCT, check_expand, check_ranges, expand_rows, overflow_error
from .lex_join import check_extend, extend_tuple
from .lex_search import prefix_bounds

__all__ = ["array_module", "consolidate", "expand_join", "extend_level", "lex_order",
           "sort_rows"]


def _int64(name: str, *arrays) -> None:
    for a in arrays:
        if a.dtype != np.int64:
            raise TypeError(f"{name}: arrays must be int64, got {a.dtype}")


# ----------------------------------------------------------------------------- expand-join
@cuda.jit(cache=True)
def _expand_count_kernel(rows, out, n):
    """lo[q] and cnt[q] = the size of probe q's range in the run; O(p log |keys|)."""
    keys, probes = rows
    lo, cnt = out
    p = probes.shape[1]
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < n:
        a, b = prefix_bounds(keys, probes, q, p)
        lo[q] = a
        cnt[q] = b - a
        q += stride


@cuda.jit(cache=True)
def _expand_fill_kernel(left, run, ranges, out, skip, how, n):
    """Left row q writes its joined rows from offs[q] on; bad[0] = 1 + some left row whose
    product with a match leaves int64."""
    left_keys, left_mult = left
    keys, mult = run
    lo, cnt, offs, bad = ranges
    out_keys, out_mult = out
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < n:
        a = lo[q]
        if not expand_rows(left_keys, left_mult, q, keys, mult, a, a + cnt[q], skip, how,
                           out_keys, out_mult, offs[q]):
            bad[0] = q + 1
        q += stride


def expand_join(left_keys, left_mult, probes, keys, mult, skip: int, how: int = PRODUCT,
                ranges=None):
    """As :func:`gpu_ivm.kernels.lex_expand.expand_join` (without fences), on the device:
    two launches and a scan (one launch and a scan with ``ranges``, whose sizes are a
    subtraction); the output size and the overflow flag are read back (two scalars). Results
    are device arrays for device inputs, host arrays for host inputs."""
    check_expand(left_keys, left_mult, probes, keys, mult, skip, how)
    _int64("expand_join", left_keys, left_mult, probes, keys, mult)
    n = left_keys.shape[0]
    if ranges is not None:
        lo, hi = check_ranges(ranges, n, keys.shape[0], array_module(keys))
        cnt = hi - lo
    else:
        lo, cnt = empty(n), empty(n)
    if n and ranges is None:
        launch(_expand_count_kernel, *grid(n), (keys, probes), (lo, cnt), n)
    offs = exclusive_scan(cnt)
    total = int(scalar(offs, n))
    out_keys = empty((total, left_keys.shape[1] + keys.shape[1] - skip))
    out_mult = empty(total)
    if total:
        bad = zeros(1)
        launch(_expand_fill_kernel, *grid(n), (left_keys, left_mult), (keys, mult),
               (lo, cnt, offs, bad), (out_keys, out_mult), skip, how, n)
        q = int(scalar(bad, 0))
        if q:
            raise overflow_error(None, q - 1)
    return result(out_keys, left_mult), result(out_mult, left_mult)


# ----------------------------------------------------------------------------- Generic Join
@cuda.jit(cache=True)
def _extend_count_kernel(ranges, scratch, counts, n):
    """found[p], work[p]: partial tuple p's extensions and candidates visited (nothing is
    written: ``found`` and ``cur`` stand in for the outputs ``extend_tuple`` leaves alone
    when it only counts)."""
    vals, lo, hi = ranges
    cur, start = scratch
    found, work = counts
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    p = t
    while p < n:
        f, w = extend_tuple(vals, lo, hi, p, cur, start, t, False, 0, found, found, cur, cur)
        found[p] = f
        work[p] = w
        p += stride


@cuda.jit(cache=True)
def _extend_fill_kernel(ranges, scratch, offs, out, n):
    """Partial tuple p writes its extensions from offs[p] on (the count pass's order)."""
    vals, lo, hi = ranges
    cur, start = scratch
    out_parent, out_val, out_lo, out_hi = out
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    p = t
    while p < n:
        extend_tuple(vals, lo, hi, p, cur, start, t, True, offs[p], out_parent, out_val,
                     out_lo, out_hi)
        p += stride


def extend_level(vals, lo, hi):
    """As :func:`gpu_ivm.kernels.lex_join.extend_level`, on the device: ``(parent, val,
    new_lo, new_hi, n, work)`` with arrays of exactly ``n`` entries; two launches and two
    scans, three scalars read back (the number of extensions, of candidates, and nothing
    else)."""
    check_extend(vals, lo, hi)
    _int64("extend_level", vals, lo, hi)
    k, tuples = lo.shape
    found, work = zeros(tuples), zeros(tuples)
    blocks, tpb = grid(tuples) if tuples else (0, 0)
    scratch = (empty((blocks * tpb, k)), empty((blocks * tpb, k)))  # a row per thread
    if tuples:
        launch(_extend_count_kernel, blocks, tpb, (vals, lo, hi), scratch, (found, work),
               tuples)
    offs = exclusive_scan(found)
    n = int(scalar(offs, tuples))
    visited = int(scalar(exclusive_scan(work), tuples))
    out = (empty(n), empty(n), empty((k, n)), empty((k, n)))
    if n:
        launch(_extend_fill_kernel, blocks, tpb, (vals, lo, hi), scratch, offs, out, tuples)
    return (*(result(a, lo) for a in out), n, visited)


# ----------------------------------------------------------------------------- sorting
def lex_order(keys):
    """An order that sorts the rows of ``keys`` (``(n, k)``) lexicographically, by the array
    module of ``keys`` (``lexsort``, last key primary: the columns reversed)."""
    xp = array_module(keys)
    n, k = keys.shape
    if k == 0 or n < 2:
        return xp.arange(n, dtype=np.int64)
    return xp.lexsort(xp.ascontiguousarray(keys.T[::-1]))


def sort_rows(keys, mult):
    """``keys`` and ``mult`` with the rows in lexicographic order (a sort and a gather)."""
    order = lex_order(keys)
    return keys[order], mult[order]


def consolidate(keys, mult):
    """Sort, sum equal rows exactly (or raise :class:`~gpu_ivm.errors.IntegerOverflowError`),
    drop zero sums: as :func:`gpu_ivm.cq.zrel.consolidate` on the arrays, on the device."""
    keys, mult = sort_rows(keys, mult)
    xp = array_module(keys)
    return reduce_sorted(xp.ascontiguousarray(keys), xp.ascontiguousarray(mult), keys.shape[1])
