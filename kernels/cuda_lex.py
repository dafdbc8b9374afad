"""CUDA twin of :mod:`gpu_ivm.kernels.lex_search`: prefix ranges in sorted key rows.

One thread per probe (grid-stride); each runs the CPU's per-probe body
:func:`~gpu_ivm.kernels.lex_search.prefix_bounds` unchanged, so a range is the CPU's bit for
bit. The key rows and the probes are 2-D int64 arrays travelling in one tuple, the results in
another (see :mod:`gpu_ivm.kernels.cuda_launch`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import empty, grid, launch, result
from .lex_search import prefix_bounds


@cuda.jit(cache=True)
def _ranges_kernel(rows, out, n):
    """lo[q], hi[q] of probe q; O(p log |keys|) per thread."""
    keys, probes = rows
    lo, hi = out
    p = probes.shape[1]
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < n:
        lo[q], hi[q] = prefix_bounds(keys, probes, q, p)
        q += stride


def prefix_ranges(keys, probes):
    """As :func:`gpu_ivm.kernels.lex_search.prefix_ranges`, on the device."""
    if len(keys.shape) != 2 or len(probes.shape) != 2 or probes.shape[1] > keys.shape[1]:
        raise ValueError(f"prefix_ranges: keys {keys.shape} and probes {probes.shape} must be "
                         "2-D with no more probe columns than key columns")
    if keys.dtype != np.int64 or probes.dtype != np.int64:
        raise TypeError("prefix_ranges: keys and probes must be int64")
    n = probes.shape[0]
    lo, hi = empty(n), empty(n)
    if n:
        blocks, tpb = grid(n)
        launch(_ranges_kernel, blocks, tpb, (keys, probes), (lo, hi), n)
    return result(lo, probes), result(hi, probes)
