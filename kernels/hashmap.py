"""Open-addressing hash map int64 → int64 (linear probing): the user-key encoder's table and
the pair ids of 3-ary query views.

A table is two arrays of a power-of-two capacity, ``tkeys`` and ``tvals``; a slot is free while
``tvals[slot] == EMPTY`` (values are ids >= 0, keys may be any int64). :func:`probe` is the one
search loop, shared with the CUDA kernels of :mod:`gpu_ivm.kernels.cuda_hash`, which fill the
same layout on a device (a thread claims a slot by compare-and-swap on ``tvals``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

EMPTY = -1  # vals[slot] == EMPTY marks a free slot (values are ids >= 0)


@nb.njit(cache=True, inline="always")
def home_slot(x, mask):
    """The slot where the search for key ``x`` starts (``mask`` = capacity - 1)."""
    h = x * np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, wraps in int64
    h ^= h >> 29
    h *= np.int64(-4658895280553007687)
    h ^= h >> 32
    return h & mask


@nb.njit(cache=True, inline="always")
def probe(tkeys, tvals, k, mask):
    """The value stored for key ``k``, or -1 (``mask`` = capacity - 1)."""
    s = home_slot(k, mask)
    while True:
        v = tvals[s]
        if v == EMPTY:
            return -1
        if tkeys[s] == k:
            return v
        s = (s + 1) & mask


@nb.njit(cache=True, inline="always")
def find_or_add(tkeys, tvals, k, mask, new):
    """(value of key ``k``, False) if stored, else (``new``, True) after storing it (the table
    must have a free slot; ``mask`` = capacity - 1)."""
    s = home_slot(k, mask)
    while True:
        v = tvals[s]
        if v == EMPTY:
            tkeys[s] = k
            tvals[s] = new
            return new, True
        if tkeys[s] == k:
            return v, False
        s = (s + 1) & mask


@nb.njit(cache=True)
def lookup(tkeys, tvals, keys, out):
    """out[i] = value stored for keys[i], or -1."""
    mask = tkeys.shape[0] - 1
    for i in range(keys.shape[0]):
        out[i] = probe(tkeys, tvals, keys[i], mask)


@nb.njit(cache=True)
def insert(tkeys, tvals, keys, vals):
    """Insert keys (absent) with vals; the table must have room."""
    mask = tkeys.shape[0] - 1
    for i in range(keys.shape[0]):
        k = keys[i]
        s = home_slot(k, mask)
        while tvals[s] != EMPTY:
            if tkeys[s] == k:
                break
            s = (s + 1) & mask
        tkeys[s] = k
        tvals[s] = vals[i]


@nb.njit(cache=True)
def dense_lookup(dense, keys, out):
    """out[i] = dense[keys[i]] for keys in ``[0, len(dense))``, -1 for the others (a direct
    table of the ids of small non-negative keys: one load per key where :func:`lookup`
    probes a hash table). Returns how many keys were not found."""
    n = dense.shape[0]
    missing = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        v = dense[k] if 0 <= k < n else -1
        out[i] = v
        if v < 0:
            missing += 1
    return missing


@nb.njit(cache=True)
def plan_new(keys, known, first_new):
    """Provisional ids for unknown keys in order of first appearance.

    ``known[i]`` is the id of keys[i] or -1. Returns (ids, new_keys): ids[i] is known[i] or
    first_new + (index of keys[i] among the distinct unknown keys). The table of the unknown
    keys is sized by their number, not the batch's: a batch of 10⁵ updates with a few hundred
    new vertices writes 32 KB, not 8 MB (on R-MAT 16's first batch after a load: 1,833 page
    faults and 5.1 ms before, 391 and 2.1 ms after, in a one-off timing).
    """
    n = keys.shape[0]
    ids = known.copy()
    unknown = 0
    for i in range(n):
        unknown += ids[i] < 0
    cap = 16
    while cap < 2 * unknown:
        cap *= 2
    tk = np.empty(cap, np.int64)
    tv = np.full(cap, EMPTY, np.int64)
    mask = cap - 1
    new_keys = np.empty(unknown, np.int64)
    nn = 0
    for i in range(n):
        if ids[i] >= 0:
            continue
        v, added = find_or_add(tk, tv, keys[i], mask, nn)
        if added:
            new_keys[nn] = keys[i]
            nn += 1
        ids[i] = first_new + v
    return ids, new_keys[:nn]
