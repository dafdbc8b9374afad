"""Per-element ``numba.njit`` bodies shared by the CPU loops and the CUDA kernels.

``count_rows``, ``fill_rows``, ``compact_keys`` (store kernels) and ``expand_emit`` (delta
kernels) loop over these on the CPU; the CUDA kernels call them once per thread. Built from
the inner loops of :mod:`gpu_ivm.kernels.lsm` (``run_mask``, ``run_range``); no CUDA import.
"""

from __future__ import annotations

from .jit import helper
from .lsm import LO_MASK, SENTINEL, run_mask, run_range


@helper
def count_row(st, x):
    """Number of live tuples with first key ``x`` (the body of ``count_rows``)."""
    keys = st[0]
    vals = st[1]
    m = run_mask(st, x)
    j = 0
    c = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            for p in range(lo, hi):
                if (keys[p] & LO_MASK) == SENTINEL:
                    break
                if vals[p] != 0:
                    c += 1
        m >>= 1
        j += 1
    return c


@helper
def fill_row(st, x, w, out_keys, out_vals):
    """Write the live tuples of first key ``x`` to ``out[w:]`` (the body of ``fill_rows``)."""
    keys = st[0]
    vals = st[1]
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            for p in range(lo, hi):
                k = keys[p]
                if (k & LO_MASK) == SENTINEL:
                    break
                if vals[p] != 0:
                    out_keys[w] = k
                    out_vals[w] = vals[p]
                    w += 1
        m >>= 1
        j += 1
    return w


@helper
def compact_key(st, tomb, x):
    """Squeeze the tombstones of first key ``x`` out of its ranges (the body of
    ``compact_keys``). Touches only x's ranges and ``tomb[x]``: distinct keys never race."""
    keys = st[0]
    vals = st[1]
    m = run_mask(st, x)
    j = 0
    sent = (x << 32) | SENTINEL
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            w = lo
            for p in range(lo, hi):
                k = keys[p]
                if (k & LO_MASK) == SENTINEL:
                    break
                if vals[p] != 0:
                    keys[w] = k
                    vals[w] = vals[p]
                    w += 1
            for p in range(w, hi):
                if (keys[p] & LO_MASK) == SENTINEL:
                    break
                keys[p] = sent
                vals[p] = 0
        m >>= 1
        j += 1
    tomb[x] = 0


@helper
def emit_segment(i, xs, ys, ms, st, left, ptr, out_keys, out_vals):
    """Expansion of update ``i`` into ``out[ptr[i]:ptr[i+1]]``, zero-padded (the body of
    ``expand_emit``)."""
    keys = st[0]
    vals = st[1]
    e = ys[i] if left else xs[i]
    w = ptr[i]
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
                if v != 0:
                    if left:
                        out_keys[w] = (xs[i] << 32) | z
                    else:
                        out_keys[w] = (z << 32) | ys[i]
                    out_vals[w] = ms[i] * v
                    w += 1
        m >>= 1
        j += 1
    while w < ptr[i + 1]:
        out_keys[w] = 0
        out_vals[w] = 0
        w += 1
