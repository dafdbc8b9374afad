"""The CUDA kernel of :func:`gpu_ivm.selection.select_many` on a device: the indices of the
True entries of k boolean masks of one length, all placed by one launch.

The caller stacks the masks (k × n), scans each row (``cumsum``: CuPy's CUB scan), reads
the k totals in one transfer and allocates one output; :func:`place` writes, for every True
entry (j, i), index i at ``offs[j] + cs[j, i] - 1``, where ``offs`` is the exclusive scan of
the totals (on the device: nothing is uploaded). Before, each mask took a scan, a
subtraction, a ``where``, an ``arange`` and a scatter of its own (5 CuPy calls a mask).
"""

from __future__ import annotations

from numba import cuda

from .cuda_launch import grid, launch


@cuda.jit(cache=True)
def _place_kernel(io, k, n):
    """out[offs[j] + cs[j, i] - 1] = i for every True masks[j, i]. Launch config: 1-D
    grid-stride over the k·n entries, one thread per entry (writes of one mask are ordered
    by i, so neighbouring threads write neighbouring slots)."""
    masks, cs, offs, out = io
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    while t < k * n:
        j = t // n
        i = t - j * n
        if masks[j, i]:
            out[offs[j] + cs[j, i] - 1] = i
        t += stride


def place(masks, cs, offs, out) -> None:
    """Launch :func:`_place_kernel` over the (k, n) ``masks``."""
    k, n = masks.shape
    if k * n:
        launch(_place_kernel, *grid(k * n), (masks, cs, offs, out), k, n)


__all__ = ["place"]
