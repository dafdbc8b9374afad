"""CUDA kernels of count deltas and view maintenance: the ``delta`` and ``view`` parts of the
cuda kernel set.

Same functions, signatures and results as :mod:`gpu_ivm.kernels.delta_kernels` and
:mod:`gpu_ivm.kernels.view_kernels`. The per-update bodies are the CPU ones: ``_one_weight``
(→ ``path_weight`` → ``dot_rows``/``dot_ranges``/``gallop``/``vget``), ``_wedges_range``,
``_rows_len`` are called from the kernels unchanged; ``emit_view_deltas`` keeps the CPU loop
over a key's runs (``run_mask``/``run_range``) but scatters into dense view rows with
``atomic.add`` and writes its sparse remainder through a per-update segment + compaction, so
the output is the CPU's, in the CPU's order.
"""

from __future__ import annotations

import os

import numba as nb
import numpy as np
from numba import cuda

from .cuda_launch import (
    CONFIG,
    array_module,
    check_1d,
    counters,
    empty,
    exclusive_scan,
    grid,
    launch,
    nothing,
    padded_scan,
    result,
    scalar,
)
from .cuda_phase import bounded, strided_dot
from .delta_kernels import _one_weight, _rows_len, _wedges_range, lane_weight, sym_case
from .elements import emit_segment
from .lsm import LO_MASK, SENTINEL, dot_rows_n, run_mask, run_range
from .view_kernels import vget

NO_BLOCKS = np.int64(2**62)  # a cut no row reaches: every update on one thread


def _coop_min(default: int = 256) -> int:
    """The block cut (see :data:`COOP_MIN`): ``GPU_IVM_COOP_MIN`` if set (a positive
    integer; ``0`` for no block path), else ``default``."""
    raw = os.environ.get("GPU_IVM_COOP_MIN", "").strip()
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        v = -1
    if v < 0:
        raise ValueError(f"GPU_IVM_COOP_MIN must be a non-negative integer, got {raw!r}")
    return v if v else int(NO_BLOCKS)


# An update whose shorter row has at least this many entries is walked by a whole block (its
# threads the lanes of the row) rather than by one thread: one thread per update leaves a
# hub's row to a single lane while the rest of its warp idles (the H100's celebrity-churn
# batch ran at 31K updates/s, docs/benchmarks.md). A power of two near the block size, not
# yet timed on hardware: ``GPU_IVM_COOP_MIN`` sets it for a sweep (bench/device_check.sh's
# COOP_SWEEP); the tests lower it to send small rows down the block path.
COOP_MIN = _coop_min()

# ----------------------------------------------------------------------------- kernels


@cuda.jit(cache=True)
def _path_weights_kernel(io, nh, nl, ph, pl, pht, vsp, vview, hv, symmetric, mk, lim, n,
                        coop_min):
    """out[i] = Σ_c Next(ys[i], c)·Prev(c, xs[i]), binned by cost in one launch: an update
    is evaluated by one thread with the CPU's per-update body (``_one_weight``: a heavy-row
    inner product, galloped, or a light row), unless the count is ``symmetric`` and its
    shorter row (:func:`~gpu_ivm.kernels.delta_kernels.sym_case`) has at least ``coop_min``
    entries: then a whole block walks it, its threads the lanes of the shorter row
    (:func:`~gpu_ivm.kernels.delta_kernels.lane_weight`), their shares added in shared
    memory. Launch config: 1-D; threads grid-stride over the short updates, then blocks
    grid-stride over the long ones (every thread of a block takes the same decisions, so the
    barriers are reached by all). ``coop_min`` = :data:`NO_BLOCKS`: one thread per update.
    ``lim``: the updates' count on the device (``cuda_phase.bounded``)."""
    xs, ys, out, work = io
    vrow, vmat = vview
    heavy_next, heavy_prev = hv
    marks = mk[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = bounded(n, lim)
    while i < n:
        if not symmetric or coop_min == NO_BLOCKS or sym_case(
                xs[i], ys[i], nh, nl, ph, pl, pht, heavy_next, heavy_prev)[3] < coop_min:
            _one_weight(i, xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next,
                        heavy_prev, symmetric, out, work, marks)
        i += stride
    if not symmetric or coop_min == NO_BLOCKS:
        return
    acc = cuda.shared.array(1, nb.int64)
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    b = cuda.blockIdx.x
    while b < n:
        x, y, case, cost = sym_case(xs[b], ys[b], nh, nl, ph, pl, pht, heavy_next, heavy_prev)
        if cost >= coop_min:
            if lane == 0:
                acc[0] = 0
            cuda.syncthreads()
            s, _ = lane_weight(case, x, y, nh, nl, ph, pl, pht, lane, lanes)
            if s != 0:
                cuda.atomic.add(acc, 0, s)
            cuda.syncthreads()
            if lane == 0:
                out[b] = acc[0] + (vget(vsp, vrow, vmat, (y << 32) | x) if case == 0 else 0)
            cuda.syncthreads()
        b += cuda.gridDim.x


@cuda.jit(cache=True)
def _expand_counts_kernel(st, io, n):
    """counts[i] = physical entries of first key keys[i]. Launch config: 1-D grid-stride."""
    keys, counts = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        counts[i] = _rows_len(st, keys[i])
        i += stride


@cuda.jit(cache=True)
def _expand_split_kernel(st, io, left, n):
    """For update i with packed key (x, y) (unpacked here): the physical entries of the
    store's row y (``left``) or x, and its segment's size in ``ptr[i + 1]``: the same, or 0
    when ``left`` and row x of the view is dense (vrow[x] >= 0: the update adds into it in
    place); ``ptr[0] = 0``, so one inclusive scan of ``ptr`` gives the segments' starts;
    totals[0], totals[1] += the sums of both. Launch config: 1-D grid-stride; each thread
    sums its own, the block adds them in shared memory, one atomic per block and total."""
    ukeys, vrow, ptr, totals = io
    acc = cuda.shared.array(2, nb.int64)
    if cuda.threadIdx.x == 0:
        acc[0] = 0
        acc[1] = 0
    cuda.syncthreads()
    mine = 0
    mine_sparse = 0
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    if i == 0:
        ptr[0] = 0
    while i < n:
        k = ukeys[i]
        x = k >> 32
        c = _rows_len(st, k & LO_MASK if left else x)
        s = c
        if left and x < vrow.shape[0] and vrow[x] >= 0:
            s = 0
        ptr[i + 1] = s
        mine += c
        mine_sparse += s
        i += stride
    if mine != 0:
        cuda.atomic.add(acc, 0, mine)
    if mine_sparse != 0:
        cuda.atomic.add(acc, 1, mine_sparse)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(totals, 0, acc[0])
        cuda.atomic.add(totals, 1, acc[1])


@cuda.jit(cache=True)
def _expand_emit_kernel(st, io, left, n):
    """Update i's expansion into its own segment out[ptr[i]:ptr[i+1]] (zero-padded).

    Launch config: 1-D grid-stride, one thread per update; segments are disjoint.
    """
    xs, ys, ms, ptr, out_keys, out_vals = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        emit_segment(i, xs, ys, ms, st, left, ptr, out_keys, out_vals)
        i += stride


@cuda.jit(cache=True)
def _seg_heads_kernel(io, n):
    """At the first entry i of each run of equal keys: sums[i] = the run's sum, walked by
    that thread, and keep[i + 1] = 1 when it is not 0; keep[i + 1] = 0 at every other entry
    and keep[0] = 0 (so that the scan of ``keep`` is the exclusive scan of the kept runs in
    one call). Launch config: 1-D grid-stride. A run is the repeats of one key: for a view's
    deltas, the updates of one batch sharing the key's row, a few except at a hub's batch
    (where one thread walks them all; no scan of group ids, no atomics)."""
    keys, vals, sums, keep = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    if i == 0:
        keep[0] = 0
    while i < n:
        k = keys[i]
        f = 0
        if i == 0 or keys[i - 1] != k:
            s = vals[i]
            j = i + 1
            while j < n and keys[j] == k:
                s += vals[j]
                j += 1
            sums[i] = s
            if s != 0:
                f = 1
        keep[i + 1] = f
        i += stride


@cuda.jit(cache=True)
def _seg_put_kernel(io, n):
    """ok[koffs[i]] = keys[i], ov[...] = sums[i] where run head i is kept (koffs[i + 1] >
    koffs[i]). Launch config: as above."""
    keys, sums, koffs, ok, ov = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if koffs[i + 1] != koffs[i]:
            ok[koffs[i]] = keys[i]
            ov[koffs[i]] = sums[i]
        i += stride


@cuda.jit(cache=True)
def _wedges_kernel(io, eh, el, hv, symmetric, n):
    """out[i] = the batch-wedge term of Δ tuple i, by the CPU's ``_wedges_range`` over [i, i+1).

    Launch config: 1-D grid-stride, one thread per Δ tuple (binary searches in the sorted batch
    plus one row inner product or probes).
    """
    dkeys, dvals, out = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        _wedges_range(i, i + 1, dkeys, dvals, eh, el, heavy, symmetric, out)
        i += stride


@cuda.jit(cache=True)
def _wedges_total_kernel(io, eh, el, hv, symmetric, lims, n, m, coef):
    """:func:`_wedges_kernel` that also adds the batch's count delta into ``acc[0]``:
    coef·Σ ms[j]·ws[j] (the path weights, computed by an earlier launch) plus the wedge
    terms, one atomic per thread. ``lims``: the device counts of the keys and of the pairs
    (``cuda_phase.bounded``). Launch config: 1-D grid-stride over the longer of the two.
    """
    dkeys, dvals, out, ms, ws, acc = io
    heavy = hv[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = bounded(n, lims[0])
    m = bounded(m, lims[1])
    # the batch is its first n tuples: the searches of _wedges_range span the array they are
    # given, and a padded array's tail is not part of it (nor sorted)
    dk = dkeys[:n]
    dv = dvals[:n]
    s = coef * strided_dot(ms, ws, i, stride, m)
    while i < n:
        _wedges_range(i, i + 1, dk, dv, eh, el, heavy, symmetric, out)
        s += out[i]
        i += stride
    if s != 0:
        cuda.atomic.add(acc, 0, s)


@cuda.jit(cache=True)
def _emit_view_kernel(st, io, vview, left, n, n_pre):
    """View deltas of update i: dense rows by ``atomic.add`` into ``vmat``, the sparse rest
    into update i's segment ``out[n_pre + ptr[i] : n_pre + ptr[i+1]]`` (zero-padded), behind
    the ``n_pre`` deltas of ``pre`` copied to ``out[:n_pre]`` by the same threads.

    Launch config: 1-D grid-stride, one thread per update. Layout (left form, V(x, z) +=
    m·st(y, z); update 1's row x is dense)::

        st row y0: z=2 z=5        seg 0: (x0,2) (x0,5)          <- sparse
        st row y1: z=1 z=7 z=9    seg 1: 0 0 0 ; vmat[vrow[x1], 1|7|9] += m1·v  (atomic)
        st row y2: z=3 (tomb)     seg 2: (x2,3) 0               <- tombstone slot padded

    The compaction that follows keeps the nonzero slots in order: the CPU's output order.
    Updates come as packed keys ``x << 32 | y`` (unpacked here, no CuPy calls for it).
    """
    ukeys, ms, ptr, out_keys, out_vals, pre_k, pre_v = io
    vrow, vmat = vview
    keys = st[0]
    vals = st[1]
    nrow = vrow.shape[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    t = i
    while t < n_pre:
        out_keys[t] = pre_k[t]
        out_vals[t] = pre_v[t]
        t += stride
    while i < n:
        xi = ukeys[i] >> 32
        yi = ukeys[i] & LO_MASK
        mi = ms[i]
        e = yi if left else xi
        dense_left = -1
        if left and xi < nrow:
            dense_left = vrow[xi]
        w = n_pre + ptr[i]
        m = run_mask(st, e)
        j = 0
        while m != 0:
            if m & 1:
                lo, hi = run_range(st, j, e)
                for p in range(lo, hi):
                    k = keys[p]
                    z = k & LO_MASK
                    if z == SENTINEL:
                        break
                    v = vals[p]
                    if v == 0:
                        continue
                    if left:
                        if dense_left >= 0:
                            cuda.atomic.add(vmat, (dense_left, z), mi * v)
                        else:
                            out_keys[w] = (xi << 32) | z
                            out_vals[w] = mi * v
                            w += 1
                    else:
                        r = vrow[z] if z < nrow else -1
                        if r >= 0:
                            cuda.atomic.add(vmat, (r, yi), v * mi)
                        else:
                            out_keys[w] = (z << 32) | yi
                            out_vals[w] = v * mi
                            w += 1
            m >>= 1
            j += 1
        while w < n_pre + ptr[i + 1]:
            out_keys[w] = 0
            out_vals[w] = 0
            w += 1
        i += stride


@cuda.jit(cache=True)
def _nonzero_flags_kernel(io, n):
    """flags[i] = vals[i] != 0. Launch config: 1-D grid-stride."""
    vals, flags = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        flags[i] = 1 if vals[i] != 0 else 0
        i += stride


@cuda.jit(cache=True)
def _compact_kernel(io, n):
    """dst[offs[i]] = src[i] where ``flags[i]``. Launch config: 1-D grid-stride."""
    src_k, src_v, flags, offs, dst_k, dst_v = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if flags[i]:
            dst_k[offs[i]] = src_k[i]
            dst_v[offs[i]] = src_v[i]
        i += stride


@cuda.jit(cache=True)
def _scatter_dense_kernel(io, vview, n):
    """Dense-row entries added to ``vmat`` (``atomic.add``: keys may repeat), keep[i] False.

    Launch config: 1-D grid-stride, one thread per key.
    """
    keys, vals, keep = io
    vrow, vmat = vview
    nrow = vrow.shape[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        a = keys[i] >> 32
        r = vrow[a] if a < nrow else -1
        if r >= 0:
            cuda.atomic.add(vmat, (r, keys[i] & LO_MASK), vals[i])
            keep[i] = False
        else:
            keep[i] = True
        i += stride


# ----------------------------------------------------------------------------- launchers


def path_weights(xs, ys, nh, nl, ph, pl, pht, vsp, vrow, vmat, heavy_next, heavy_prev,
                 symmetric, out, work=None, lim=None) -> None:
    """out[i] = Σ_c Next(ys[i], c)·Prev(c, xs[i]) for every update of the batch (see the CPU
    kernel; ``symmetric`` evaluates each update in its cheaper orientation; ``work``: entries
    read per update, the profile mode's counter; ``lim``: a device slot with the updates'
    count, the arrays padded behind it)."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    # binned by cost when symmetric (the profile mode's counters: one thread per update)
    blocks = symmetric and work is None
    shape = (min(n, CONFIG.max_blocks), CONFIG.tpb) if blocks else grid(n)
    launch(_path_weights_kernel, *shape, (xs, ys, out, empty(0) if work is None else work),
           nh, nl, ph, pl, pht, vsp, (vrow, vmat), (heavy_next, heavy_prev), bool(symmetric),
           (empty(0, np.int8),), nothing() if lim is None else lim, n,
           np.int64(COOP_MIN if blocks else NO_BLOCKS))


def expand_counts(exp_keys, st, counts) -> None:
    """counts[i] = physical entries of first key exp_keys[i] (upper bound of live tuples)."""
    check_1d("exp_keys", exp_keys)
    n = exp_keys.shape[0]
    if n == 0:
        return
    launch(_expand_counts_kernel, *grid(n), st, (exp_keys, counts), n)


def expand_counts_split(ukeys, st, vrow, left, ptr):
    """The segment sizes of a view update (:func:`emit_view_keys`) for updates given as
    packed keys ``ukeys`` (x << 32 | y): ``ptr[i + 1]`` = the physical entries of the
    store's row y (``left``) or x, or 0 for a left update whose view row x is dense, and
    ``ptr[0] = 0``, so ``cumsum(ptr)`` is the segments' pointers; returns ``totals`` (device,
    2 slots: Σ entries, Σ segment sizes), so a view update reads both sizes in one transfer
    (``TriangleEngineBase._view_update``: one launch, where it took nine CuPy calls and a
    read, and then two to unpack the keys and two to pad and scan the sizes)."""
    check_1d("ukeys", ukeys)
    totals = counters(2)
    n = ukeys.shape[0]
    if n:
        launch(_expand_split_kernel, *grid(n), st, (ukeys, vrow, ptr, totals), left, n)
    else:
        ptr[:1] = 0
    return totals


def expand_emit(xs, ys, ms, st, left, ptr, out_keys, out_vals) -> None:
    """View deltas of a bilinear view into out[ptr[i]:ptr[i+1]] (zero-padded; see the CPU
    kernel)."""
    n = xs.shape[0]
    if n == 0:
        return
    launch(_expand_emit_kernel, *grid(n), st, (xs, ys, ms, ptr, out_keys, out_vals), bool(left), n)


def segment_sum_sorted(keys, vals):
    """Group equal keys of a sorted array, sum values, drop zero sums.

    Two kernels and a scan: each run's first entry sums its run and flags it when the sum
    is not zero (:func:`_seg_heads_kernel`; the flags written after a leading 0, so the scan
    is one call, ``padded_scan``), then the kept runs are written in order. The output
    length is read back once. (Until the twenty-third session four kernels and two scans:
    group starts, group ids by a scan, sums by ``atomic.add``, flags, a second scan.)
    """
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        z = np.zeros(0, np.int64) if isinstance(keys, np.ndarray) else empty(0)
        return z, z
    sums = empty(n)
    keep = empty(n + 1)
    launch(_seg_heads_kernel, *grid(n), (keys, vals, sums, keep), n)
    koffs = padded_scan(keep)
    m = scalar(koffs, n)
    ok = empty(m)
    ov = empty(m)
    if m:
        launch(_seg_put_kernel, *grid(n), (keys, sums, koffs, ok, ov), n)
    return result(ok, keys), result(ov, keys)


def batch_wedges(dkeys, dvals, eh, el, heavy, symmetric, out) -> None:
    """out[i] = Σ_c Δ(a,b)·Δ(b,c)·(3·E(c,a) + Δ(c,a)) for Δ tuple i = (a, b) (see the CPU
    kernel)."""
    check_1d("dkeys", dkeys)
    n = dkeys.shape[0]
    if n == 0:
        return
    launch(_wedges_kernel, *grid(n), (dkeys, dvals, out), eh, el, (heavy,), bool(symmetric), n)


def batch_wedges_total(dkeys, dvals, eh, el, heavy, symmetric, out, ms, ws, coef: int,
                       acc, lims=None) -> None:
    """:func:`batch_wedges` and the count delta ``coef·Σ ms·ws + Σ out`` added into the
    device slot ``acc[0]`` in the same launch (a device's form of ``batch_wedges`` followed
    by ``cuda_phase.batch_total_into``; nothing read back). ``lims``: device slots with the
    counts of the keys and of ``ms`` / ``ws``, the arrays padded behind them."""
    check_1d("dkeys", dkeys)
    n, m = dkeys.shape[0], ms.shape[0]
    if lims is None:
        lims = (nothing(), nothing())
    if n or m:
        launch(_wedges_total_kernel, *grid(max(n, m)), (dkeys, dvals, out, ms, ws, acc), eh,
               el, (heavy,), bool(symmetric), tuple(lims), n, m, np.int64(coef))


def emit_view_deltas(xs, ys, ms, st, left, vrow, vmat, out_keys, out_vals) -> int:
    """Add the view deltas of a batch of factor updates; return the sparse remainder's length.

    Dense-row deltas go into ``vmat`` (``atomic.add``); the others are written to
    ``out_keys``/``out_vals`` in the CPU's order. Kernels: segment sizes, scan, emission,
    scan of the used slots, compaction; the remainder's length is read back once (the caller
    slices with it).
    """
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return 0
    counts = empty(n)
    launch(_expand_counts_kernel, *grid(n), st, (ys if left else xs, counts), n)
    ptr = exclusive_scan(counts)
    total = scalar(ptr, n)
    if total == 0:
        return 0
    sk = empty(total)
    sv = empty(total)
    pk = _packed(xs, ys)
    launch(_emit_view_kernel, *grid(n), st, (pk, ms, ptr, sk, sv, pk[:0], ms[:0]),
           (vrow, vmat), bool(left), n, 0)
    flags = empty(total)
    launch(_nonzero_flags_kernel, *grid(total), (sv, flags), total)
    offs = exclusive_scan(flags)
    w = scalar(offs, total)
    if w:
        launch(_compact_kernel, *grid(total), (sk, sv, flags, offs, out_keys, out_vals), total)
    return w


def emit_view_deltas_par(xs, ys, ms, st, left, vrow, vmat, ptr, out_keys, out_vals,
                         nt=0) -> None:
    """``emit_view_deltas`` with caller-given segments: update i writes its sparse deltas to
    out[ptr[i]:ptr[i+1]] and zero-fills the rest (as the CPU kernel). One launch, no read-back:
    the engine drops the zeros. ``nt`` (the CPU kernel's thread count) is ignored: dense-row
    adds are atomic here, so any thread may take any update. The engine passes its packed
    keys to :func:`emit_view_keys` instead (no pack)."""
    check_1d("xs", xs)
    if xs.shape[0]:
        emit_view_keys(_packed(xs, ys), ms, st, left, vrow, vmat, ptr, out_keys, out_vals)


def emit_view_keys(ukeys, ms, st, left, vrow, vmat, ptr, out_keys, out_vals,
                   pre=None) -> None:
    """:func:`emit_view_deltas_par` for updates given as packed keys ``x << 32 | y``.
    ``pre``: deltas ``(keys, vals)`` already emitted for the same view, copied to the front of
    ``out_keys`` / ``out_vals`` by the same launch (the updates' segments follow them), where
    a concatenation would be two calls."""
    check_1d("ukeys", ukeys)
    n = ukeys.shape[0]
    pk, pv = (ukeys[:0], ms[:0]) if pre is None else pre
    if n == 0 and pk.shape[0] == 0:
        return
    launch(_emit_view_kernel, *grid(max(n, pk.shape[0])), st,
           (ukeys, ms, ptr, out_keys, out_vals, pk, pv), (vrow, vmat), bool(left), n,
           pk.shape[0])


def _packed(xs, ys):
    """``xs << 32 | ys`` (int64) in the arrays' module."""
    xp = array_module(xs)
    return xp.ascontiguousarray((xs.astype(np.int64) << 32) | ys.astype(np.int64))


def scatter_dense(keys, vals, vrow, vmat):
    """vmat[vrow[a], c] += v for packed keys (a, c) whose row is dense; returns a keep mask."""
    check_1d("keys", keys)
    n = keys.shape[0]
    keep = empty(n, np.bool_)
    if n:
        launch(_scatter_dense_kernel, *grid(n), (keys, vals, keep), (vrow, vmat), n)
    return result(keep, keys)


@cuda.jit(cache=True)
def _pair_dot_kernel(io, stx, sty, n):
    """out[i], work[i] = Σ_c stx(x_i, c)·sty(y_i, c) and the entries read, for packed keys
    (x_i, y_i): one thread per pair (grid-stride) running the CPU's ``dot_rows_n`` over the
    two stores' runs."""
    keys, out, work = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        k = keys[i]
        out[i], work[i] = dot_rows_n(stx, k >> 32, sty, k & LO_MASK)
        i += stride


def first_grouped_weights(keys, stx, sty, ids):
    """As :func:`gpu_ivm.kernels.delta_kernels.first_grouped_weights` (the three-relation
    insert-only mode's phase weights), on the device: ``(w, work)``. The CPU shares one
    marking of a first key's row among its pairs through a scratch of ``ids`` slots, which a
    GPU thread cannot have; here each pair walks its two rows (merged or galloped, as
    ``dot_rows_n`` does on the CPU). ``ids`` is unused."""
    check_1d("keys", keys)
    n = keys.shape[0]
    out, work = empty(n), empty(n)
    if n:
        launch(_pair_dot_kernel, *grid(n), (keys, out, work), stx, sty, n)
    return result(out, keys), result(work, keys)
