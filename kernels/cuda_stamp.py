"""CUDA twin of the insert-only count kernel (:mod:`gpu_ivm.kernels.stamp_kernels`).

``closed_by_batch`` has the CPU kernel's signature and result: ``out[i]`` = triangles that
batch edge ``(us[i], vs[i])`` with stamp ``stamps[i]`` closes under the ordered delta rule.
One thread per batch edge (grid-stride); the body is the CPU's allocation-free
``older_common_count`` (run pairs merged or galloped in place), called unchanged. The insert-only
engine runs on the cpu backend; this twin is tested against it in the CUDA simulator
(``tests/cuda_sim_stamp_cases.py``) so the mode can move to the device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import check_1d, grid, launch
from .stamp_kernels import older_common_count


@cuda.jit(cache=True)
def _closed_kernel(st, io, n):
    """One thread per batch edge, grid-stride. The arrays travel in the tuple ``io`` (as in
    :mod:`gpu_ivm.kernels.cuda_delta`: the simulator then hands them to the ``njit`` body as
    plain arrays)."""
    deg, us, vs, stamps, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = older_common_count(st, deg, us[i], vs[i], stamps[i])
        i += stride


def closed_by_batch(st, deg, us, vs, stamps, out) -> None:
    """out[i] = triangles closed by batch edge i (see the module docstring)."""
    for name, a in (("deg", deg), ("us", us), ("vs", vs), ("stamps", stamps), ("out", out)):
        check_1d(name, a, np.int64)
    n = us.shape[0]
    if n == 0:
        return
    blocks, tpb = grid(n)
    launch(_closed_kernel, blocks, tpb, st, (deg, us, vs, stamps, out), n)
