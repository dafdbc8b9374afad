"""CUDA kernels of the free-variable triangle queries: the ``query`` part of the cuda kernel set.

Same functions, signatures and results as :mod:`gpu_ivm.kernels.query_kernels` (``plan``,
``emit``, ``sums``, ``compact``, ``pair_sums``). The per-update bodies are the CPU ones:
``choose`` (which list update i walks) and ``_walk`` (→ ``_intersect`` → ``_merge``, or the
walk of one row / heavy list with ``_weight`` probes) are called from the kernels unchanged, so
a slot, a count and a sum are the CPU's bit for bit; ``pair_sums`` calls the CPU's per-vertex
body ``pair_sum_one``.

Every kernel is a 1-D grid-stride loop with one thread per update: the work of update i is the
length of the list ``choose`` picked for it (bounded by N^ε or N^{1-ε}), so it is skewed on
power-law inputs; see docs/gpu.md for the launch shape and the warp-per-long-row variant.
``compact`` replaces the CPU's sequential gather by an exclusive scan of the per-update counts
and one copy kernel (update i copies its ``count[i]`` slots from ``ptr[i]`` to ``offs[i]``), so
the output order is the CPU's.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, exclusive_scan, grid, launch, scalar, zeros
from .lsm import lower_bound
from .query_kernels import _walk, choose, label_match, new_flag_one, pair_sum_one

# ----------------------------------------------------------------------------- kernels


@cuda.jit(cache=True)
def _plan_kernel(io, nside, pside, use_n, use_p, nst, pst, n):
    """choice[i], length[i] of update i by the CPU's ``choose``.

    Launch config: 1-D grid-stride, one thread per update; O(1) work each (flag reads, three
    degree reads), coalesced on the update arrays.
    """
    xs, ys, fxs, fys, pat, choice, length = io
    n_fx, n_hl = nside
    p_fy, p_hl = pside
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        c, ln = choose(xs[i], ys[i], fxs[i], fys[i], pat, use_n, use_p, nst, n_fx, n_hl,
                       pst, p_fy, p_hl)
        choice[i] = c
        length[i] = ln
        i += stride


@cuda.jit(cache=True)
def _walk_kernel(io, side, use_n, use_p, nst, pst, n, emit):
    """``_walk`` of every update: with ``emit`` update i's terms (z, m·N(y,z)·P(z,x)) go to
    out[ptr[i]:ptr[i] + count[i]] and count[i] is their number; without (sum mode)
    count[i] = Σ_z N(y,z)·P(z,x), and ``ms``, ``ptr`` and the outputs are stand-ins that are
    never read or written (a kernel cannot allocate the CPU kernel's empty dummies).

    Launch config: 1-D grid-stride, one thread per update; segments are disjoint (``ptr`` is
    the scan of the plan's upper bounds), so no atomics. Work per thread: the length of the
    chosen list (plus a probe or a gallop per entry), skewed; see docs/gpu.md.
    """
    xs, ys, ms, choice, ptr, out_z, out_w, count = io
    pat, n_fy, n_hl, p_fx, p_hl = side
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        c = choice[i]
        if c < 0:
            count[i] = 0
        elif emit:
            count[i] = _walk(i, xs[i], ys[i], ms[i], c, use_n, use_p, pat, nst, n_fy, n_hl,
                             pst, p_fx, p_hl, True, ptr[i], out_z, out_w)
        else:
            count[i] = _walk(i, xs[i], ys[i], 1, c, use_n, use_p, pat, nst, n_fy, n_hl,
                             pst, p_fx, p_hl, False, 0, out_z, out_w)
        i += stride


@cuda.jit(cache=True)
def _compact_query_kernel(io, n):
    """Update i copies its count[i] slots from ptr[i] to offs[i] (offs = scan of count).

    Launch config: 1-D grid-stride, one thread per update; writes are disjoint. A thread copies
    at most the length of its list (the plan's bound), so the skew is the emit kernel's.
    """
    ptr, count, offs, out_z, out_w, keep_idx, keep_z, keep_w = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        src = ptr[i]
        dst = offs[i]
        for t in range(count[i]):
            keep_idx[dst + t] = i
            keep_z[dst + t] = out_z[src + t]
            keep_w[dst + t] = out_w[src + t]
        i += stride


@cuda.jit(cache=True)
def _pair_sums_kernel(io, rside, tside, rst, tst, sst, r_want_y, t_want_x, n):
    """out[i] = :func:`pair_sum_one` of xs[i].

    Launch config: 1-D grid-stride, one thread per x; work |R(x,·)|·|T(·,x)| probes of S (both
    rows are short for the light x the caller keeps, but the caller passes every x).
    """
    xs, out = io
    r_fy = rside[0]
    t_fx = tside[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = pair_sum_one(xs[i], rst, r_fy, r_want_y, tst, t_fx, t_want_x, sst)
        i += stride


# ----------------------------------------------------------------------------- launchers


@cuda.jit(cache=True)
def _label_masks_kernel(io, flags, care, want, n):
    """:func:`~gpu_ivm.kernels.query_kernels.label_match` of each term. Launch config: 1-D
    grid-stride, one thread per term; each writes its own column of every group's mask."""
    tx, ty, z, ofx, ofy, out = io
    nf0, nf1, pf0, pf1 = flags
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        label_match(i, tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, out)
        i += stride


def label_masks(tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, out) -> None:
    """Every group's mask of triangle terms in one launch (see the CPU kernel); ``care`` and
    ``want`` travel as scalars, so nothing is uploaded."""
    check_1d("tx", tx)
    n = tx.shape[0]
    if n == 0 or out.shape[0] == 0:
        return
    launch(_label_masks_kernel, *grid(n), (tx, ty, z, ofx, ofy, out), (nf0, nf1, pf0, pf1),
           np.int64(care), np.int64(want), n)


@cuda.jit(cache=True)
def _flag_change_kernel(io, n):
    """change[j] += ins[i] - rem[i] for the position j of vals[i] in ``u``. Launch config:
    1-D grid-stride, one thread per value of ``vals``; an atomic add each (a value's
    positions are few: the phase's tuples with that value on one side)."""
    u, vals, ins, rem, change = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        d = ins[i] - rem[i]
        if d != 0:
            cuda.atomic.add(change, lower_bound(u, 0, u.shape[0], vals[i]), d)
        i += stride


@cuda.jit(cache=True)
def _new_flags_kernel(io, default, up, down, n):
    """:func:`~gpu_ivm.kernels.query_kernels.new_flag_one` of each touched value. Launch
    config: 1-D grid-stride, one thread per value of ``u`` (distinct: the flag writes are
    disjoint)."""
    u, change, live, flags, flip, gone = io
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        new_flag_one(j, u, change, live, flags, default, up, down, flip, gone)
        j += stride


def new_flags(u, vals, ins, rem, live, flags, default, up, down, flip, gone) -> None:
    """The flags after a phase of the touched values ``u`` (see the CPU kernel): two launches
    and a zeroed buffer, nothing read back."""
    check_1d("u", u)
    n = u.shape[0]
    if n == 0:
        return
    change = zeros(n)
    if vals.shape[0]:
        launch(_flag_change_kernel, *grid(vals.shape[0]), (u, vals, ins, rem, change),
               vals.shape[0])
    launch(_new_flags_kernel, *grid(n), (u, change, live, flags, flip, gone), np.int64(default),
           np.int64(up), np.int64(down), n)


def plan(xs, ys, fxs, fys, pat, use_n, use_p, nst, n_fx, n_hl, pst, p_fy, p_hl,
         choice, length) -> None:
    """Count pass: the list each update walks and its length (an upper bound of its outputs);
    see the CPU kernel."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_plan_kernel, *grid(n), (xs, ys, fxs, fys, pat, choice, length), (n_fx, n_hl),
           (p_fy, p_hl), bool(use_n), bool(use_p), nst, pst, n)


def emit(xs, ys, ms, choice, ptr, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl,
         out_z, out_w, count) -> None:
    """Emit pass: (z, m·N(y,z)·P(z,x)) of update i into out[ptr[i]:ptr[i] + count[i]]."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_walk_kernel, *grid(n), (xs, ys, ms, choice, ptr, out_z, out_w, count),
           (pat, n_fy, n_hl, p_fx, p_hl), bool(use_n), bool(use_p), nst, pst, n,
           True)


def sums(xs, ys, choice, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl, out) -> None:
    """Sum pass: out[i] = Σ_z N(y,z)·P(z,x) over the pattern (the update's m not applied)."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_walk_kernel, *grid(n), (xs, ys, xs, choice, xs, out, out, out),
           (pat, n_fy, n_hl, p_fx, p_hl), bool(use_n), bool(use_p), nst, pst, n,
           False)


def compact(ptr, count, out_z, out_w, keep_idx, keep_z, keep_w) -> int:
    """Gather the emitted slots (CSR with actual counts) into dense arrays; returns n.

    An exclusive scan of ``count`` gives each update its output offset; one copy kernel. The
    total is read back once (the CPU function returns it).
    """
    check_1d("count", count)
    n = count.shape[0]
    if n == 0:
        return 0
    offs = exclusive_scan(count)
    w = scalar(offs, n)
    if w:
        launch(_compact_query_kernel, *grid(n), (ptr, count, offs, out_z, out_w, keep_idx, keep_z,
               keep_w), n)
    return w


def pair_sums(xs, rst, r_fy, r_want_y, tst, t_fx, t_want_x, sst, out) -> None:
    """out[i] = Σ_{b,c} R(x,b)·S(b,c)·T(c,x) over flagged b and c (see the CPU kernel;
    ``rst`` is R, ``tst`` is T transposed)."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_pair_sums_kernel, *grid(n), (xs, out), (r_fy,), (t_fx,), rst, tst, sst, int(r_want_y),
           int(t_want_x), n)
