"""An open-addressing table of int64 counts keyed by packed pairs (linear probing): the
per-edge triangle counts of :mod:`gpu_ivm.queries.graph_local`.

A table is one int64 array ``tab`` of twice a power-of-two capacity: slot s holds its key at
``tab[2s]`` and its count at ``tab[2s + 1]``, so an add touches one cache line (the two in
separate arrays cost two misses on a table larger than the caches, which it is). A slot is
free while its key is ``FREE`` (keys are packed pairs ``x << 32 | y``, never negative).
Adding to a key claims its slot on first use; a count that returns to 0 keeps its slot
until the owner rebuilds the table (:func:`live_entries`), so a slot's key never changes
while the table lives and concurrent adders on a device need only a compare-and-swap on the
key and an atomic add on the count (:mod:`gpu_ivm.kernels.cuda_graph_local`). The search
starts at :func:`~gpu_ivm.kernels.hashmap.home_slot`, the encoder table's hash.

>>> import numpy as np
>>> tab = new_table(np, 8)
>>> add_counts(tab, np.array([5, 9, 5]), np.array([2, 1, 3]))
>>> out = np.empty(3, np.int64)
>>> get_counts(tab, np.array([5, 9, 7]), out)
>>> out.tolist()
[5, 1, 0]
>>> [a.tolist() for a in live_entries(np, tab)]
[[5, 9], [5, 1]]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import home_slot

FREE = -1  # tab[2s] == FREE marks a free slot


def new_table(xp, slots: int):
    """An empty table of ``slots`` slots (a power of two) in array module ``xp``."""
    tab = xp.zeros(2 * slots, np.int64)
    tab[0::2] = FREE
    return tab


@nb.njit(cache=True, inline="always")
def slot_of(tab, k, mask):
    """The slot of key ``k``, claimed if absent (one thread; the table must have a free
    slot; ``mask`` = slots - 1)."""
    s = home_slot(k, mask)
    while True:
        t = tab[2 * s]
        if t == k:
            return s
        if t == FREE:
            tab[2 * s] = k
            return s
        s = (s + 1) & mask


@nb.njit(cache=True, inline="always")
def add_at(tab, k, v):
    """The count of key ``k`` += v (nothing when v is 0: no slot is claimed for it)."""
    if v != 0:
        tab[2 * slot_of(tab, k, (tab.shape[0] >> 1) - 1) + 1] += v


@nb.njit(cache=True, inline="always")
def count_of(tab, k):
    """The count of key ``k`` (0 when absent)."""
    mask = (tab.shape[0] >> 1) - 1
    s = home_slot(k, mask)
    while True:
        t = tab[2 * s]
        if t == k:
            return tab[2 * s + 1]
        if t == FREE:
            return 0
        s = (s + 1) & mask


@nb.njit(cache=True)
def add_counts(tab, keys, vals):
    """The count of keys[i] += vals[i] for each i (keys may repeat)."""
    for i in range(keys.shape[0]):
        add_at(tab, keys[i], vals[i])


@nb.njit(cache=True)
def get_counts(tab, keys, out):
    """out[i] = the count of keys[i] (0 when absent)."""
    for i in range(keys.shape[0]):
        out[i] = count_of(tab, keys[i])


def slots_for(n: int) -> int:
    """A power-of-two number of slots, at least 2·n and 16: at most half full after a
    rebuild."""
    slots = 16
    while slots < 2 * n:
        slots *= 2
    return slots


def live_entries(xp, tab):
    """(keys, counts) of the slots whose count is not 0, sorted by key."""
    keys, vals = tab[0::2], tab[1::2]
    live = (keys != FREE) & (vals != 0)
    keys = keys[live]
    order = xp.argsort(keys)
    return keys[order], vals[live][order]
