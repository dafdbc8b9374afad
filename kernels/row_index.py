"""Per-row hash indexes of a sorted-run store: O(1) membership tests in long rows.

A store row ``x`` (the tuples of first key ``x``) with at least ``ZStore.index_min`` live tuples
also has an open-addressing hash table mapping the second id ``c`` to the multiplicity, in a
slab shared by all rows of the store. The store tuple (see :mod:`gpu_ivm.kernels.lsm`) carries
it as three more arrays::

    st[8]  ioff:  ioff[x] = start of x's table in the slab, -1 if x has none
    st[9]  imask: capacity - 1 of x's table (a power of two, at least ``BUCKET``)
    st[10] itab:  the slab; a slot is ``c << 32 | (m & 0xFFFFFFFF)`` (c and a multiplicity m
                  in [-2^31, 2^31), 0 once the tuple is deleted: slots are never freed), or
                  EMPTY_SLOT (-1, whose id half is SENTINEL, never a real id)

Every key lives in its home bucket of ``BUCKET`` slots (64 bytes, one cache line: the slab's
tables start at 64-byte boundaries); a table whose bucket would overflow is rebuilt twice as
large (at load <= 1/4 a bucket holds 2 keys on average). A lookup reads its one bucket whole
with no branch on the loaded slots: a branch on hit or miss, or on "look further", is
mispredicted often enough, and each misprediction waits for the table's cache miss, that the
probes serialize (measured 3-5x slower on R-MAT 18). A store whose multiplicities leave int32
drops its tables (``ZStore``).

With the index, the intersection of a short row with a long one costs one walk of the short
row plus one bucket read per entry: O(min(deg)) instead of the merge's O(deg u + deg v).

The inner functions here are plain ``njit`` functions, called by the CPU kernels and the CUDA
kernels (:mod:`gpu_ivm.kernels.cuda_store`) alike.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import home_slot
from .jit import helper
from .lsm import LO_MASK, SENTINEL, dot_ranges_n, dot_rows_n, find, real_end, run_mask, run_range
from .row_bits import has_bits, probe_bits, probe_range_bits

EMPTY_SLOT = -1
BUCKET_BITS = 3
BUCKET = 1 << BUCKET_BITS  # slots read together by a lookup (64 bytes)
VAL_MIN = -(1 << 31)
VAL_MAX = (1 << 31) - 1


@nb.njit(cache=True, inline="always")
def has_index(st, x):
    """True if row ``x`` of store ``st`` has a hash table."""
    ioff = st[8]
    return x >= 0 and x < ioff.shape[0] and ioff[x] >= 0


@nb.njit(cache=True, inline="always")
def _home(c, mask):
    """First slot of c's home bucket."""
    return home_slot(c, mask >> BUCKET_BITS) << BUCKET_BITS


@nb.njit(cache=True, inline="always")
def _slot_id(e):
    return (e >> 32) & LO_MASK


@nb.njit(cache=True, inline="always")
def _slot_val(e):
    return (e << 32) >> 32


@nb.njit(cache=True, inline="always")
def index_get(st, x, c):
    """(st(x, c), table buckets read) by x's table (the row must have one): one bucket, read
    whole, with no branch on the loaded slots (every key lives in its home bucket)."""
    off = st[8][x]
    tab = st[10]
    base = off + _home(c, st[9][x])
    acc = 0
    for k in range(BUCKET):  # casts, not conditionals
        e = tab[base + k]
        acc += np.int64(_slot_id(e) == c) * _slot_val(e)
    return acc, 1


@nb.njit(cache=True, inline="always")
def _slot_for(tab, off, mask, c):
    """Slot of ``c`` in its home bucket of the table at ``off``, or the bucket's first free
    slot, or -1 if the bucket is full without c (the table must then be rebuilt larger)."""
    base = off + _home(c, mask)
    for k in range(BUCKET):
        e = tab[base + k]
        if e == EMPTY_SLOT or _slot_id(e) == c:
            return base + k
    return -1


@nb.njit(cache=True, inline="always")
def _put(tab, t, c, v, bad):
    """Store (c, v) in slot t; flag ``bad[0]`` if v leaves the slot's int32 range."""
    if v < VAL_MIN or v > VAL_MAX:
        bad[0] = 1
    tab[t] = (c << 32) | (v & LO_MASK)


@helper
def fill_row_table(st, x, off, mask, tab, bad):
    """Build row x's table in ``tab[off : off + mask + 1]`` from the store's runs; returns the
    number of slots taken (the live tuples of x), or -1 if a home bucket overflowed."""
    for s in range(off, off + mask + 1):
        tab[s] = EMPTY_SLOT
    keys = st[0]
    vals = st[1]
    used = 0
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            for p in range(lo, hi):
                c = keys[p] & LO_MASK
                if c == SENTINEL:
                    break
                v = vals[p]
                if v == 0:
                    continue
                t = _slot_for(tab, off, mask, c)
                if t < 0:
                    return -1
                _put(tab, t, c, v, bad)
                used += 1
        m >>= 1
        j += 1
    return used


@helper
def upsert_group(st, keys_in, deltas, g0, g1, iused, bad):
    """Add deltas[g0:g1] (keys of one first key x) to x's table, if it has one; a full home
    bucket sets iused[x] = -1 (the caller rebuilds the table from the store)."""
    x = keys_in[g0] >> 32
    if not has_index(st, x):
        return
    off = st[8][x]
    mask = st[9][x]
    tab = st[10]
    for i in range(g0, g1):
        c = keys_in[i] & LO_MASK
        t = _slot_for(tab, off, mask, c)
        if t < 0:
            iused[x] = -1
            return
        e = tab[t]
        if e == EMPTY_SLOT:
            _put(tab, t, c, deltas[i], bad)
            iused[x] += 1
        else:
            _put(tab, t, c, _slot_val(e) + deltas[i], bad)


@nb.njit(cache=True, parallel=True)
def index_fill(st, rows, offs, masks, tab, iused, bad):
    """Build the tables of ``rows`` (distinct first keys) at ``offs`` with ``masks``."""
    for r in nb.prange(rows.shape[0]):
        x = rows[r]
        iused[x] = fill_row_table(st, x, offs[r], masks[r], tab, bad)


@nb.njit(cache=True, parallel=True)
def index_upsert(st, keys_in, deltas, starts, iused, bad):
    """Add a batch (sorted unique keys; ``starts``: where each first key's group starts, and
    len(keys_in) last) to the tables of the rows that have one (one row per iteration: no two
    threads write a table)."""
    for g in nb.prange(starts.shape[0] - 1):
        upsert_group(st, keys_in, deltas, starts[g], starts[g + 1], iused, bad)


@nb.njit(cache=True, inline="always")
def row_live(st, x):
    """Live tuples of row x (0 outside the store's id range)."""
    lv = st[7]
    if x >= 0 and x < lv.shape[0]:
        return lv[x]
    return 0


@helper
def probe_row(st1, x1, st2, x2):
    """(Σ_c st1(x1,c)·st2(x2,c), entries read): walk row x1, probe x2's table per entry.

    No branch per entry: deleted entries (value 0) contribute 0, compaction padding is cut off
    per run by ``real_end``; entries read = entries walked + one bucket each.
    """
    keys = st1[0]
    vals = st1[1]
    s = 0
    t = 0
    m = run_mask(st1, x1)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st1, j, x1)
            hi = real_end(keys, lo, hi, x1)
            for p in range(lo, hi):
                s += vals[p] * index_get(st2, x2, keys[p] & LO_MASK)[0]
            if hi > lo:
                t += 2 * (hi - lo)
        m >>= 1
        j += 1
    return s, t


@helper
def dot_rows_ix(st1, x1, st2, x2):
    """(Σ_c st1(x1,c)·st2(x2,c), entries read) at the min-degree bound: the shorter row is
    walked and the longer one probed when it has a bitmap (:mod:`.row_bits`) or a table; else
    merged or galloped."""
    a = row_live(st1, x1)
    b = row_live(st2, x2)
    if a == 0 or b == 0:
        return 0, 0
    if a <= b:
        if has_bits(st2, x2):
            return probe_bits(st1, x1, st2, x2)
        if has_index(st2, x2):
            return probe_row(st1, x1, st2, x2)
    elif has_bits(st1, x1):
        return probe_bits(st2, x2, st1, x1)
    elif has_index(st1, x1):
        return probe_row(st2, x2, st1, x1)
    return dot_rows_n(st1, x1, st2, x2)


@helper
def dot_range_row_ix(k1, v1, lo1, hi1, st, x):
    """(Σ_c range(c)·st(x, c), entries read) for a plain sorted single-first-key range: tests
    x's bitmap when x has one, probes x's table when x has one and is not shorter than the
    range, else merges per run."""
    if hi1 <= lo1:
        return 0, 0
    if has_bits(st, x):
        return probe_range_bits(k1, v1, lo1, hi1, st, x), hi1 - lo1
    if has_index(st, x) and hi1 - lo1 <= row_live(st, x):
        s = 0
        for i in range(lo1, hi1):
            s += v1[i] * index_get(st, x, k1[i] & LO_MASK)[0]
        return s, 2 * (hi1 - lo1)
    k2 = st[0]
    v2 = st[1]
    m = run_mask(st, x)
    s = 0
    t = 0
    j = 0
    while m != 0:
        if m & 1:
            lo2, hi2 = run_range(st, j, x)
            hi2 = real_end(k2, lo2, hi2, x)
            ds, dt = dot_ranges_n(k1, v1, lo1, hi1, k2, v2, lo2, hi2)
            s += ds
            t += dt
        m >>= 1
        j += 1
    return s, t


@helper
def get_ix(st, x, c):
    """(st(x, c), entries read): by x's table when it has one, else a store search (counted
    as one read)."""
    if has_index(st, x):
        return index_get(st, x, c)
    p = find(st, (x << 32) | c)
    if p < 0:
        return 0, 1
    return st[1][p], 1
