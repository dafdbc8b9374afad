"""Inner loops of the sorted-run (LSM) Z-relation store, shared by every kernel.

A store is the tuple ``st = (keys, vals, bounds, dirptr, dirlen, dirs, runmask, live, ioff,
imask, itab, boff, bits)``:

- ``keys`` / ``vals``: int64 arrays; run ``j`` occupies ``[bounds[j], bounds[j+1])`` and is
  sorted by the packed key ``first << 32 | second``. Keys are unique across runs.
- ``vals[p] == 0`` marks a tombstone (a deleted tuple, revived in place if re-inserted); a key
  whose second half is ``SENTINEL`` is padding left by per-key compaction, always at the end of
  its first key's range. A device store's run may end with entries ``PAD_KEY`` (first key
  ``PAD_ROW``, above every id): its length was fixed before the device knew how many of its
  slots it would fill (see ``gpu_ivm.store.ZStore``).
- ``dirptr[j] >= 0``: run ``j`` has a dense directory ``dirs[dirptr[j] + x]`` giving the start of
  first key ``x`` (its end is the next entry); ``dirlen[j]`` directory entries.
- ``runmask[x]``: bit ``j`` set if run ``j`` may hold tuples with first key ``x``.
- ``live[x]``: live tuples of first key ``x``.
- ``ioff, imask, itab``: per-row hash tables of the long rows
  (:mod:`gpu_ivm.kernels.row_index`; empty arrays where the store keeps none).
- ``boff, bits``: per-row bitmaps of the long rows (:mod:`gpu_ivm.kernels.row_bits`; empty
  where the store keeps none).

These functions are plain ``numba.njit`` functions so that the CPU kernels and the CUDA kernels
(which may call ``njit`` functions) run the very same code.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper

LO_MASK = (1 << 32) - 1
SENTINEL = LO_MASK  # second id reserved for compaction padding
# first id of the padding that closes a device store's run of known length: above every id
# (ids stay below 2**31 - 2, gpu_ivm.encoding.MAX_IDS) and with PAD_KEY + 1 still an int64
PAD_ROW = (1 << 31) - 2
PAD_KEY = (PAD_ROW << 32) | SENTINEL


@nb.njit(cache=True, inline="always")
def pack(first, second):
    return (first << 32) | second


@nb.njit(cache=True, inline="always")
def lower_bound(keys, lo, hi, key):
    """First position p in [lo, hi) with keys[p] >= key (keys sorted)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True)
def first_key_starts(keys):
    """Starts of the runs of equal first keys in sorted packed keys, and len(keys) last."""
    n = keys.shape[0]
    out = np.empty(n + 1, np.int64)
    k = 0
    for i in range(n):
        if i == 0 or (keys[i] >> 32) != (keys[i - 1] >> 32):
            out[k] = i
            k += 1
    out[k] = n
    return out[: k + 1]


@nb.njit(cache=True)
def row_cuts(keys, parts):
    """``parts + 1`` ascending cuts of the sorted packed ``keys`` (first 0, last len), each
    inner one moved forward to the start of a row (first key), so that no row is split."""
    n = keys.shape[0]
    cuts = np.empty(parts + 1, np.int64)
    cuts[0] = 0
    for c in range(1, parts):
        p = max((n * c) // parts, cuts[c - 1])
        while 0 < p < n and (keys[p] >> 32) == (keys[p - 1] >> 32):
            p += 1
        cuts[c] = p
    cuts[parts] = n
    return cuts


@nb.njit(cache=True, inline="always")
def first_key_end(keys, i, e):
    """The end of the run of keys with keys[i]'s first key, within keys[i:e] (sorted)."""
    x = keys[i] >> 32
    g = i + 1
    while g < e and (keys[g] >> 32) == x:
        g += 1
    return g


@nb.njit(cache=True, inline="always")
def run_range_a(keys, bounds, dirptr, dirlen, dirs, j, x):
    """:func:`run_range` on the store's arrays (``st[0]``, ``st[2]`` to ``st[5]``).

    Kernels that locate many rows take these arrays from ``st`` once, before their loops, and
    call this: Numba keeps a reference-count increment and decrement of every array taken from
    the tuple inside a loop, which made the location of a batch's keys 8x slower (74 keys on
    a 3-run store: 17 vs 2.2 us, one-off script)."""
    s = bounds[j]
    e = bounds[j + 1]
    dp = dirptr[j]
    lo = e
    hi = e
    if dp >= 0:
        if x + 1 < dirlen[j]:
            lo = dirs[dp + x]
            hi = dirs[dp + x + 1]
    else:
        lo = lower_bound(keys, s, e, x << 32)
        hi = lower_bound(keys, lo, e, (x + 1) << 32)
    return lo, hi


@nb.njit(cache=True, inline="always")
def run_range(st, j, x):
    """[lo, hi) of the entries of first key ``x`` in run ``j`` (may include padding)."""
    return run_range_a(st[0], st[2], st[3], st[4], st[5], j, x)


@nb.njit(cache=True, inline="always")
def run_mask(st, x):
    rm = st[6]
    if x < 0 or x >= rm.shape[0]:
        return 0
    return rm[x]


@helper
def find(st, key):
    """Position of ``key`` (live or tombstone) or -1."""
    x = key >> 32
    m = run_mask(st, x)
    keys = st[0]
    j = 0
    while m != 0:
        if m & 1:
            dp = st[3][j]
            if dp >= 0:
                lo, hi = run_range(st, j, x)
            else:
                lo = st[2][j]
                hi = st[2][j + 1]
            p = lower_bound(keys, lo, hi, key)
            if p < hi and keys[p] == key:
                return p
        m >>= 1
        j += 1
    return -1


@helper
def get(st, key):
    """Multiplicity of ``key`` (0 if absent)."""
    p = find(st, key)
    if p < 0:
        return 0
    return st[1][p]


@helper
def live_range_len(st, x):
    """Physical number of entries of first key ``x`` over all runs (an enumeration's cost)."""
    m = run_mask(st, x)
    j = 0
    total = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            total += hi - lo
        m >>= 1
        j += 1
    return total


@nb.njit(cache=True, inline="always")
def gallop(keys, p, hi, key):
    """First position q in [p, hi) with keys[q] >= key, searching forward from p (sorted keys).

    O(log(q - p)): cheap when consecutive targets are close, as in merges of sorted lists.
    """
    step = 1
    lo = p
    while p + step < hi and keys[p + step] < key:
        lo = p + step
        step <<= 1
    return lower_bound(keys, lo, min(p + step + 1, hi), key)


@nb.njit(cache=True, inline="always")
def real_end(keys, lo, hi, x):
    """End of the real entries of first key x in [lo, hi) (compaction padding excluded)."""
    if hi > lo and (keys[hi - 1] & LO_MASK) == SENTINEL:
        return lower_bound(keys, lo, hi, (x << 32) | SENTINEL)
    return hi


@nb.njit(cache=True, inline="always")
def gallop_n(keys, p, hi, key):
    """:func:`gallop` that also returns the number of keys it compared (a work count)."""
    step = 1
    lo = p
    n = 0
    while p + step < hi and keys[p + step] < key:
        lo = p + step
        step <<= 1
        n += 1
    hi2 = min(p + step + 1, hi)
    while lo < hi2:
        mid = (lo + hi2) >> 1
        n += 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi2 = mid
    return lo, n + 1


@helper
def dot_ranges_n(k1, v1, lo1, hi1, k2, v2, lo2, hi2):
    """:func:`dot_ranges` and the number of entries it read: ``(sum, entries)``."""
    n1 = hi1 - lo1
    n2 = hi2 - lo2
    if n1 <= 0 or n2 <= 0:
        return 0, 0
    s = 0
    t = 0
    if n1 * 8 < n2 or n2 * 8 < n1:
        if n2 < n1:
            k1, v1, lo1, hi1, k2, v2, lo2, hi2 = k2, v2, lo2, hi2, k1, v1, lo1, hi1
        base = k2[lo2] & ~LO_MASK
        p = lo2
        for i in range(lo1, hi1):
            t += 1
            a = v1[i]
            if a == 0:
                continue
            q = k1[i] & LO_MASK
            key = base | q
            p, c = gallop_n(k2, p, hi2, key)
            t += c
            if p >= hi2:
                break
            if k2[p] == key:
                s += a * v2[p]
        return s, t
    i = lo1
    j = lo2
    while i < hi1 and j < hi2:
        t += 1
        c1 = k1[i] & LO_MASK
        c2 = k2[j] & LO_MASK
        if c1 < c2:
            i += 1
        elif c2 < c1:
            j += 1
        else:
            s += v1[i] * v2[j]
            i += 1
            j += 1
    return s, t


@helper
def dot_ranges(k1, v1, lo1, hi1, k2, v2, lo2, hi2):
    """Σ v1[i]·v2[j] over entries with equal second ids in two sorted single-first-key ranges.

    Merges when the lengths are comparable, otherwise gallops the longer range with the entries
    of the shorter one: O(min·log(max/min)), the cost the IVM^ε bounds ask for.
    """
    return dot_ranges_n(k1, v1, lo1, hi1, k2, v2, lo2, hi2)[0]


@helper
def dot_rows_n(st1, x1, st2, x2):
    """:func:`dot_rows` and the number of entries it read: ``(sum, entries)``."""
    k1 = st1[0]
    v1 = st1[1]
    k2 = st2[0]
    v2 = st2[1]
    m1 = run_mask(st1, x1)
    m2full = run_mask(st2, x2)
    if m1 == 0 or m2full == 0:
        return 0, 0
    s = 0
    t = 0
    j1 = 0
    while m1 != 0:
        if m1 & 1:
            lo1, hi1 = run_range(st1, j1, x1)
            hi1 = real_end(k1, lo1, hi1, x1)
            if hi1 > lo1:
                m2 = m2full
                j2 = 0
                while m2 != 0:
                    if m2 & 1:
                        lo2, hi2 = run_range(st2, j2, x2)
                        hi2 = real_end(k2, lo2, hi2, x2)
                        ds, dt = dot_ranges_n(k1, v1, lo1, hi1, k2, v2, lo2, hi2)
                        s += ds
                        t += dt
                    m2 >>= 1
                    j2 += 1
        m1 >>= 1
        j1 += 1
    return s, t


@helper
def dot_rows(st1, x1, st2, x2):
    """Σ_c st1(x1, c)·st2(x2, c): the inner product of two rows, over all run pairs (merged or
    galloped; :func:`gpu_ivm.kernels.row_index.dot_rows_ix` probes a long row's table)."""
    return dot_rows_n(st1, x1, st2, x2)[0]


@helper
def dot_range_row(k1, v1, lo1, hi1, st, x):
    """Σ_c k1-range(c)·st(x, c): a plain sorted range against a store row."""
    if hi1 <= lo1:
        return 0
    k2 = st[0]
    v2 = st[1]
    m = run_mask(st, x)
    s = 0
    j = 0
    while m != 0:
        if m & 1:
            lo2, hi2 = run_range(st, j, x)
            hi2 = real_end(k2, lo2, hi2, x)
            s += dot_ranges(k1, v1, lo1, hi1, k2, v2, lo2, hi2)
        m >>= 1
        j += 1
    return s
