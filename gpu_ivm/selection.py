"""Data-dependent selections with few host reads, for NumPy and CuPy arrays alike.

On a device, the size of every boolean selection (``a[mask]``, ``flatnonzero``) must be read
by the host before the result can be allocated: one synchronisation each. The helpers here
take several selections at once and read all their sizes in one transfer; with NumPy they do
exactly the plain operations.
"""

from __future__ import annotations

import numpy as np


def array_module(kernels):
    """The array module of a kernel set (NumPy without one)."""
    return getattr(kernels, "xp", np) if kernels is not None else np


def to_host(xp, a) -> np.ndarray:
    """A host (NumPy) copy of an array of module ``xp`` (``a`` itself with NumPy)."""
    return a if xp is np else xp.asnumpy(a)


def run_starts(xp, s):
    """Boolean mask of the first entry of each run of equal values in the sorted array ``s``
    (element-wise, no host read)."""
    first = xp.ones(s.shape[0], np.bool_)
    first[1:] = s[1:] != s[:-1]
    return first


def select_many(xp, masks: list) -> list:
    """``xp.flatnonzero`` of each boolean mask. On a device the sizes of all the results are
    read in one transfer (instead of one host read per mask); masks of one length are
    placed by one kernel (:mod:`gpu_ivm.kernels.cuda_select`: a stack, a scan per row, the
    totals and their offsets, one launch), others each by a running count."""
    if xp is np or len(masks) <= 1:
        return [xp.flatnonzero(m) for m in masks]
    n = masks[0].shape[0]
    if n and all(m.shape == (n,) for m in masks):
        from gpu_ivm.kernels import cuda_select

        stacked = xp.stack(masks)
        cs = xp.cumsum(stacked, axis=1, dtype=np.int64)
        totals = cs[:, -1]
        offs = xp.cumsum(totals) - totals  # exclusive: where each mask's indices start
        counts = to_host(xp, totals).tolist()  # the one read
        out = xp.empty(sum(counts), np.int64)
        cuda_select.place(stacked, cs, offs, out)
        ends = np.cumsum(counts).tolist()
        return [out[e - c:e] for c, e in zip(counts, ends)]
    counts = to_host(xp, xp.stack([m.sum() for m in masks])).tolist()
    out = []
    for m, c in zip(masks, counts):
        buf = xp.empty(c + 1, np.int64)  # slot c takes every False entry
        buf[xp.where(m, xp.cumsum(m, dtype=np.int64) - 1, c)] = xp.arange(m.shape[0],
                                                                       dtype=np.int64)
        out.append(buf[:c])
    return out


def compress_many(xp, pairs: list) -> list:
    """``a[mask]`` for each (a, mask) of ``pairs``, with one host read on a device."""
    if xp is np or len(pairs) <= 1:
        return [a[m] for a, m in pairs]
    return [a[i] for (a, _), i in zip(pairs, select_many(xp, [m for _, m in pairs]))]


__all__ = ["array_module", "compress_many", "run_starts", "select_many",
           "to_host"]
