"""Inner loops of the sorted-run (LSM) Z-relation store, shared by every kernel.

A store is the tuple ``st = (keys, vals, bounds, dirptr, dirlen, dirs, runmask)``:

- ``keys`` / ``vals``: int64 arrays; run ``j`` occupies ``[bounds[j], bounds[j+1])`` and is
  sorted by the packed key ``first << 32 | second``. Keys are unique across runs.
- ``vals[p] == 0`` marks a tombstone (a deleted tuple, revived in place if re-inserted); a key
  whose second half is ``SENTINEL`` is padding left by per-key compaction, always at the end of
  its first key's range.
- ``dirptr[j] >= 0``: run ``j`` has a dense directory ``dirs[dirptr[j] + x]`` giving the start of
  first key ``x`` (its end is the next entry); ``dirlen[j]`` directory entries.
- ``runmask[x]``: bit ``j`` set if run ``j`` may hold tuples with first key ``x``.

These functions are plain ``numba.njit`` functions so that the CPU kernels and the CUDA kernels
(which may call ``njit`` functions) run the very same code.
"""

from __future__ import annotations

import numba as nb

LO_MASK = (1 << 32) - 1
SENTINEL = LO_MASK  # second id reserved for compaction padding


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


@nb.njit(cache=True, inline="always")
def run_range(st, j, x):
    """[lo, hi) of the entries of first key ``x`` in run ``j`` (may include padding)."""
    keys = st[0]
    bounds = st[2]
    s = bounds[j]
    e = bounds[j + 1]
    dp = st[3][j]
    if dp >= 0:
        if x + 1 >= st[4][j]:
            return e, e
        dirs = st[5]
        return dirs[dp + x], dirs[dp + x + 1]
    lo = lower_bound(keys, s, e, x << 32)
    hi = lower_bound(keys, lo, e, (x + 1) << 32)
    return lo, hi


@nb.njit(cache=True, inline="always")
def run_mask(st, x):
    rm = st[6]
    if x < 0 or x >= rm.shape[0]:
        return 0
    return rm[x]


@nb.njit(cache=True)
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


@nb.njit(cache=True)
def get(st, key):
    """Multiplicity of ``key`` (0 if absent)."""
    p = find(st, key)
    if p < 0:
        return 0
    return st[1][p]


@nb.njit(cache=True)
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
