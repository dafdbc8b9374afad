"""Open-addressing hash map int64 → int64 (linear probing), for the user-key encoder."""

from __future__ import annotations

import numba as nb
import numpy as np

EMPTY = -1  # vals[slot] == EMPTY marks a free slot (values are ids >= 0)


@nb.njit(cache=True, inline="always")
def _hash(x, mask):
    h = x * np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, wraps in int64
    h ^= h >> 29
    h *= np.int64(-4658895280553007687)
    h ^= h >> 32
    return h & mask


@nb.njit(cache=True)
def lookup(tkeys, tvals, keys, out):
    """out[i] = value stored for keys[i], or -1."""
    mask = tkeys.shape[0] - 1
    for i in range(keys.shape[0]):
        k = keys[i]
        s = _hash(k, mask)
        while True:
            v = tvals[s]
            if v == EMPTY:
                out[i] = -1
                break
            if tkeys[s] == k:
                out[i] = v
                break
            s = (s + 1) & mask


@nb.njit(cache=True)
def insert(tkeys, tvals, keys, vals):
    """Insert keys (absent) with vals; the table must have room."""
    mask = tkeys.shape[0] - 1
    for i in range(keys.shape[0]):
        k = keys[i]
        s = _hash(k, mask)
        while tvals[s] != EMPTY:
            if tkeys[s] == k:
                break
            s = (s + 1) & mask
        tkeys[s] = k
        tvals[s] = vals[i]


@nb.njit(cache=True)
def plan_new(keys, known, first_new):
    """Provisional ids for unknown keys in order of first appearance.

    ``known[i]`` is the id of keys[i] or -1. Returns (ids, new_keys): ids[i] is known[i] or
    first_new + (index of keys[i] among the distinct unknown keys).
    """
    n = keys.shape[0]
    ids = known.copy()
    cap = 16
    while cap < 2 * n:
        cap *= 2
    tk = np.empty(cap, np.int64)
    tv = np.full(cap, EMPTY, np.int64)
    mask = cap - 1
    new_keys = np.empty(n, np.int64)
    nn = 0
    for i in range(n):
        if ids[i] >= 0:
            continue
        k = keys[i]
        s = _hash(k, mask)
        while True:
            v = tv[s]
            if v == EMPTY:
                tk[s] = k
                tv[s] = nn
                new_keys[nn] = k
                ids[i] = first_new + nn
                nn += 1
                break
            if tk[s] == k:
                ids[i] = first_new + v
                break
            s = (s + 1) & mask
    return ids, new_keys[:nn]
