"""CUDA twins of :mod:`gpu_ivm.kernels.lex_search`: prefix ranges in sorted key rows and the
merge of two runs.

- :func:`prefix_ranges`: one thread per probe (grid-stride); each runs the CPU's per-probe body
  :func:`~gpu_ivm.kernels.lex_search.prefix_bounds` unchanged, so a range is the CPU's bit for
  bit.
- :func:`merge_sorted`: one thread per row of either run finds its rank in the other run with
  the same body (merge path by ranks), writing itself (with an equal row's multiplicity added)
  to its merged position; an exclusive scan of the kept positions compacts them. The result
  equals the CPU's one-pass merge.
- :func:`reduce_sorted`: one thread per row flags the first row of each group
  (:func:`~gpu_ivm.kernels.lex_reduce.starts_group`), a scan numbers the groups, the thread
  of each group's first row sums the group (:func:`~gpu_ivm.kernels.lex_reduce.segment_sum`),
  and a scan of the nonzero sums compacts them: consolidate and marginalize, equal to the
  CPU's pass.

Key rows are 2-D int64 arrays; the arrays travel in tuples (see
:mod:`gpu_ivm.kernels.cuda_launch`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import empty, exclusive_scan, grid, launch, result, scalar, zeros
from .int64_checks import add_overflows
from .lex_reduce import check_shapes, overflow_error, segment_sum, starts_group
from .lex_search import prefix_bounds


@cuda.jit(cache=True)
def _ranges_kernel(rows, out, n):
    """lo[q], hi[q] of probe q; O(p log |keys|) per thread."""
    keys, probes = rows
    lo, hi = out
    p = probes.shape[1]
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < n:
        lo[q], hi[q] = prefix_bounds(keys, probes, q, p)
        q += stride


def prefix_ranges(keys, probes):
    """As :func:`gpu_ivm.kernels.lex_search.prefix_ranges`, on the device."""
    if len(keys.shape) != 2 or len(probes.shape) != 2 or probes.shape[1] > keys.shape[1]:
        raise ValueError(f"prefix_ranges: keys {keys.shape} and probes {probes.shape} must be "
                         "2-D with no more probe columns than key columns")
    if keys.dtype != np.int64 or probes.dtype != np.int64:
        raise TypeError("prefix_ranges: keys and probes must be int64")
    n = probes.shape[0]
    lo, hi = empty(n), empty(n)
    if n:
        blocks, tpb = grid(n)
        launch(_ranges_kernel, blocks, tpb, (keys, probes), (lo, hi), n)
    return result(lo, probes), result(hi, probes)


@cuda.jit(cache=True)
def _merge_place_kernel(runs, slots, n1, n2):
    """Slot t < n1 is row t of run 1, slot n1 + j row j of run 2. Each finds its rank in the
    other run with the CPU's ``prefix_bounds`` (all columns): a row of run 1 goes to position
    t + (rows of run 2 below it), with the multiplicity of an equal row of run 2 added; a row
    of run 2 equal to one of run 1 is left to that row, any other goes to j + (rows of run 1
    below it). The positions are the merged order with a hole per equal pair."""
    k1, m1, k2, m2 = runs
    keep_at, slot_at, val_at, overflow = slots
    cols = k1.shape[1]
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    while t < n1 + n2:
        if t < n1:
            lo, hi = prefix_bounds(k2, k1, t, cols)
            v = m1[t]
            if hi > lo:
                w = m2[lo]
                if add_overflows(v, w):
                    overflow[0] = 1
                v = v + w
            pos = t + lo
            keep_at[pos] = 1 if v != 0 else 0
            slot_at[pos] = t
            val_at[pos] = v
        else:
            j = t - n1
            lo, hi = prefix_bounds(k1, k2, j, cols)
            if hi == lo:
                pos = j + lo
                keep_at[pos] = 1
                slot_at[pos] = t
                val_at[pos] = m2[j]
        t += stride


@cuda.jit(cache=True)
def _merge_scatter_kernel(runs, slots, offs, out, n1, n):
    """Position p with a kept row writes it to ``offs[p]`` of the output."""
    k1, m1, k2, m2 = runs
    keep_at, slot_at, val_at, overflow = slots
    keys, mult = out
    cols = k1.shape[1]
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n:
        if keep_at[p] != 0:
            o = offs[p]
            t = slot_at[p]
            for c in range(cols):
                keys[o, c] = k1[t, c] if t < n1 else k2[t - n1, c]
            mult[o] = val_at[p]
        p += stride


def merge_sorted(k1, m1, k2, m2):
    """As :func:`gpu_ivm.kernels.lex_search.merge_sorted`, on the device: two launches and a
    scan; the output length and the overflow flag are read back (two scalars)."""
    n1, n2 = k1.shape[0], k2.shape[0]
    cols = k1.shape[1]
    n = n1 + n2
    keep_at = zeros(n)
    slot_at, val_at, overflow = empty(n), empty(n), zeros(1)
    slots = (keep_at, slot_at, val_at, overflow)
    runs = (k1, m1, k2, m2)
    if n:
        launch(_merge_place_kernel, *grid(n), runs, slots, n1, n2)
    offs = exclusive_scan(keep_at)
    if int(scalar(overflow, 0)):
        from gpu_ivm.errors import IntegerOverflowError

        raise IntegerOverflowError("a multiplicity would leave the int64 range (merging runs)")
    m = int(scalar(offs, n))
    keys, mult = empty((m, cols)), empty(m)
    if m:
        launch(_merge_scatter_kernel, *grid(n), runs, slots, offs, (keys, mult), n1, n)
    return result(keys, m1), result(mult, m1)


@cuda.jit(cache=True)
def _heads_kernel(keys, heads, n, p):
    """heads[r] = 1 where row r starts a group of equal first p columns."""
    (k,) = keys
    (h,) = heads
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    while r < n:
        h[r] = 1 if starts_group(k, r, p) else 0
        r += stride


@cuda.jit(cache=True)
def _group_sums_kernel(rows, groups, n):
    """The thread of a group's first row sums the group: sums[g], its first row first[g],
    keep[g] = 1 when the sum is nonzero; overflow[0] = 1 + the first row of a group whose
    sum leaves int64."""
    mult, heads, gid = rows
    sums, first, keep, overflow = groups
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    while r < n:
        if heads[r] != 0:
            e = r + 1
            while e < n and heads[e] == 0:
                e += 1
            v, exact = segment_sum(mult, r, e)
            if not exact:
                overflow[0] = r + 1  # some overflowing group's first row, plus 1
            g = gid[r]
            sums[g] = v
            first[g] = r
            keep[g] = 1 if v != 0 else 0
        r += stride


@cuda.jit(cache=True)
def _group_scatter_kernel(keys, groups, offs, out, g_n, p):
    """Group g with a nonzero sum writes its row (first p columns) and sum to offs[g]."""
    (k,) = keys
    sums, first, keep, overflow = groups
    out_keys, out_mult = out
    g = cuda.grid(1)
    stride = cuda.gridsize(1)
    while g < g_n:
        if keep[g] != 0:
            o = offs[g]
            r = first[g]
            for c in range(p):
                out_keys[o, c] = k[r, c]
            out_mult[o] = sums[g]
        g += stride


def reduce_sorted(keys, mult, p: int):
    """As :func:`gpu_ivm.kernels.lex_reduce.reduce_sorted`, on the device: three launches
    and two scans; the number of groups, of nonzero sums and the overflow flag are read back
    (three scalars)."""
    check_shapes(keys, mult, p)
    n = keys.shape[0]
    heads = zeros(n)
    if n:
        launch(_heads_kernel, *grid(n), (keys,), (heads,), n, p)
    gid = exclusive_scan(heads)
    g_n = int(scalar(gid, n))
    sums, first, keep, overflow = empty(g_n), empty(g_n), zeros(g_n), zeros(1)
    groups = (sums, first, keep, overflow)
    if n:
        launch(_group_sums_kernel, *grid(n), (mult, heads, gid), groups, n)
    bad = int(scalar(overflow, 0))
    if bad:
        raise overflow_error(None, bad - 1, p)
    offs = exclusive_scan(keep)
    m = int(scalar(offs, g_n))
    out_keys, out_mult = empty((m, p)), empty(m)
    if m:
        launch(_group_scatter_kernel, *grid(g_n), (keys,), groups, offs, (out_keys, out_mult),
               g_n, p)
    return result(out_keys, mult), result(out_mult, mult)
