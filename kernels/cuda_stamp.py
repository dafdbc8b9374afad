"""CUDA twins of the insert-only kernels (:mod:`gpu_ivm.kernels.stamp_kernels`).

- ``closed_by_batch`` has the CPU kernel's signature and result: ``out[i]`` = triangles that
  batch edge ``(us[i], vs[i])`` with stamp ``stamps[i]`` closes under the ordered delta rule.
- ``closed_by_batch_list`` lists them, as the CPU's :func:`~gpu_ivm.kernels.stamp_kernels.
  closed_by_batch_list` does (same triangles; within an edge possibly in another order), given
  the counts: each edge writes from the exclusive prefix sum of the counts.

One thread per batch edge (grid-stride); the body is the CPU's allocation-free
``older_common_runs`` (run pairs merged or galloped in place), called unchanged, counting or
writing. The insert-only engine runs on the cpu backend; these twins are tested against it in
the CUDA simulator (``tests/cuda_sim_stamp_cases.py``) so the mode can move to the device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, empty, grid, launch, scalar
from .stamp_kernels import older_common_runs


@cuda.jit(cache=True)
def _closed_kernel(st, io, n):
    """One thread per batch edge, grid-stride. The arrays travel in the tuple ``io`` (as in
    :mod:`gpu_ivm.kernels.cuda_delta`: the simulator then hands them to the ``njit`` body as
    plain arrays); ``none`` is the unused output of a count."""
    deg, us, vs, stamps, out, none = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = older_common_runs(st, deg, us[i], vs[i], stamps[i], none, none, none, 0,
                                   False)
        i += stride


@cuda.jit(cache=True)
def _list_kernel(st, io, outs, n):
    """One thread per batch edge, grid-stride: edge i writes its triangles from start[i]."""
    deg, us, vs, stamps, start = io
    oe, ow, o1, o2 = outs
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        q0 = start[i]
        q = older_common_runs(st, deg, us[i], vs[i], stamps[i], ow, o1, o2, q0, True)
        for k in range(q0, q):
            oe[k] = i
        i += stride


def _check(deg, us, vs, stamps, *more) -> None:
    for name, a in (("deg", deg), ("us", us), ("vs", vs), ("stamps", stamps)) + more:
        check_1d(name, a, np.int64)


def closed_by_batch(st, deg, us, vs, stamps, out) -> None:
    """out[i] = triangles closed by batch edge i (see the module docstring)."""
    _check(deg, us, vs, stamps, ("out", out))
    n = us.shape[0]
    if n == 0:
        return
    blocks, tpb = grid(n)
    launch(_closed_kernel, blocks, tpb, st, (deg, us, vs, stamps, out, empty(1)), n)


def closed_by_batch_list(st, deg, us, vs, stamps, counts):
    """(edge, w, s1, s2) of the triangles that batch edge i closes (``counts[i]`` of them, from
    :func:`closed_by_batch`): the closing edge's index, the third vertex, the stamps of
    (us[i], w) and (vs[i], w). Arrays where ``counts`` lives (one read of the total)."""
    _check(deg, us, vs, stamps, ("counts", counts))
    n = us.shape[0]
    ends = counts.cumsum()
    total = scalar(ends, n - 1) if n else 0
    outs = tuple(empty(max(total, 1)) for _ in range(4))
    if total:
        blocks, tpb = grid(n)
        launch(_list_kernel, blocks, tpb, st, (deg, us, vs, stamps, ends - counts), outs, n)
    return tuple(o[:total] for o in outs)
