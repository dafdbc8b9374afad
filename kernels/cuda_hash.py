"""CUDA kernels of the open-addressing hash map: the ``hash`` part of the cuda kernel set.

Same functions, signatures and table layout as :mod:`gpu_ivm.kernels.hashmap` (``tkeys``,
``tvals``, a free slot has ``tvals == EMPTY``). Lookups run the CPU's search loop
(:func:`~gpu_ivm.kernels.hashmap.probe`), one thread per key. Inserts are concurrent: a thread
claims a free slot with ``atomic.cas`` on ``tvals`` and then writes the key; the keys of one
insert are distinct and absent from the table (the callers' contract, as on the CPU), so a
thread that loses a slot simply moves on to the next one and never has to read a key another
thread is still writing.
"""

from __future__ import annotations

from numba import cuda

from .cuda_launch import check_1d, grid, launch
from .hashmap import EMPTY, home_slot, probe


@cuda.jit(cache=True)
def _lookup_kernel(io, n):
    """out[i] = value of keys[i] or -1. Launch config: 1-D grid-stride, one thread per key
    (reads of consecutive keys are coalesced; the table reads are random by nature)."""
    tkeys, tvals, keys, out = io
    mask = tkeys.shape[0] - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = probe(tkeys, tvals, keys[i], mask)
        i += stride


@cuda.jit(cache=True)
def _insert_kernel(io, n):
    """Insert distinct absent keys. Launch config: 1-D grid-stride, one thread per key; a slot
    is claimed by compare-and-swap of ``tvals[slot]`` from EMPTY to the value."""
    tkeys, tvals, keys, vals = io
    mask = tkeys.shape[0] - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        k = keys[i]
        v = vals[i]
        s = home_slot(k, mask)
        while cuda.atomic.cas(tvals, s, EMPTY, v) != EMPTY:
            s = (s + 1) & mask
        tkeys[s] = k
        i += stride


def lookup(tkeys, tvals, keys, out) -> None:
    """out[i] = value stored for keys[i], or -1."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        return
    launch(_lookup_kernel, *grid(n), (tkeys, tvals, keys, out), n)


def insert(tkeys, tvals, keys, vals) -> None:
    """Insert ``keys`` (distinct, absent) with ``vals`` (>= 0); the table must have room."""
    check_1d("keys", keys)
    check_1d("vals", vals)
    n = keys.shape[0]
    if n == 0:
        return
    launch(_insert_kernel, *grid(n), (tkeys, tvals, keys, vals), n)


__all__ = ["insert", "lookup"]
