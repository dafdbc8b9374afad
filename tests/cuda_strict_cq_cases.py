"""The query engine's device operators on (simulated) device arrays under CuPy's rules.

Run by ``tests/test_cuda_sim_cq.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``. The array
module is :mod:`strict_cupy`, a CuPy stand-in that refuses NumPy functions on device arrays,
implicit conversions, host arrays in kernel launches and per-element iteration: the path the
cuda backend takes for consolidation (the array module's ``lexsort``, a gather, the
group-and-sum twin), the expand-join and a Generic Join level must run on device arrays alone
and hand device arrays back, equal to the CPU kernels. To run directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_strict_cq_cases.py
"""

from __future__ import annotations

import sys

import numba
import numpy as np
import pytest

if not numba.config.ENABLE_CUDASIM:  # pragma: no cover - guarded by test_cuda_sim_cq.py
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

import strict_cupy as sc  # noqa: E402
from gpu_ivm.kernels import cuda_launch, cuda_lex_join  # noqa: E402
from gpu_ivm.kernels import lex_expand as cpu_expand  # noqa: E402
from gpu_ivm.kernels import lex_join as cpu_join  # noqa: E402
from gpu_ivm.kernels import lex_reduce as cpu_reduce  # noqa: E402
from gpu_ivm.kernels import lex_search as cpu_search  # noqa: E402

from gpu_ivm.cq import ops  # noqa: E402

sc.install()
sys.setswitchinterval(1e-4)
XP = sc.module()
cuda_launch.use_array_module(XP)
cuda_launch.CONFIG.tpb, cuda_launch.CONFIG.max_blocks, cuda_launch.CONFIG.scan_tpb = 32, 2, 32


def dev(a) -> sc.DeviceArray:
    return XP.asarray(np.ascontiguousarray(a, dtype=np.int64))


def host(a) -> np.ndarray:
    assert isinstance(a, sc.DeviceArray), type(a)
    return sc.asnumpy(a)


def test_consolidate_on_device_arrays() -> None:
    """Sort, gather and group-and-sum on device arrays: no NumPy call, results on the device,
    equal to the CPU's consolidate; the cuda operator set's sort keeps device keys there."""
    rng = np.random.default_rng(1)
    for n, cols in ((0, 2), (1, 1), (80, 3), (30, 0)):
        keys = rng.integers(-2, 3, (n, cols))
        keys[rng.random(n) < 0.5] = 0  # a hub row
        mult = rng.integers(-2, 4, n)
        k, m = cuda_lex_join.consolidate(dev(keys), dev(mult))
        order = np.lexsort(keys.T[::-1]) if cols else np.arange(n)
        ck, cm = cpu_reduce.reduce_sorted(np.ascontiguousarray(keys[order], dtype=np.int64),
                                          mult[order].astype(np.int64), cols)
        assert host(k).tolist() == ck.tolist() and host(m).tolist() == cm.tolist()
        order = ops.cuda_ops().lex_order(dev(keys))
        assert isinstance(order, sc.DeviceArray)
    with pytest.raises(sc.DeviceMemoryError):  # the stand-in does refuse host arrays
        cuda_lex_join.consolidate(dev([[1]]), np.array([1]))


def test_expand_join_on_device_arrays() -> None:
    rng = np.random.default_rng(2)
    keys = np.unique(np.c_[rng.integers(0, 4, 50) * (rng.random(50) < 0.5),
                           rng.integers(0, 9, 50)], axis=0).astype(np.int64)
    mult = rng.integers(1, 4, keys.shape[0]).astype(np.int64)
    left = rng.integers(0, 5, (40, 2)).astype(np.int64)
    left_mult = rng.integers(-3, 4, 40).astype(np.int64)
    probes = np.ascontiguousarray(left[:, :1])
    for skip, how in ((1, cpu_expand.PRODUCT), (0, cpu_expand.LEFT), (2, cpu_expand.RIGHT)):
        k, m = cuda_lex_join.expand_join(dev(left), dev(left_mult), dev(probes), dev(keys),
                                         dev(mult), skip, how)
        ck, cm = cpu_expand.expand_join(left, left_mult, probes, keys, mult, skip, how)
        assert host(k).tolist() == ck.tolist() and host(m).tolist() == cm.tolist()
        assert ck.shape[0] > 0
    lo, hi = cpu_search.prefix_ranges(keys, probes)  # a cap of 2 rows, as a limited request's
    hi = np.minimum(hi, lo + 2)
    k, m = cuda_lex_join.expand_join(dev(left), dev(left_mult), dev(probes), dev(keys),
                                     dev(mult), 1, cpu_expand.LEFT, ranges=(dev(lo), dev(hi)))
    ck, cm = cpu_expand.expand_join(left, left_mult, probes, keys, mult, 1, cpu_expand.LEFT,
                                    ranges=(lo, hi))
    assert host(k).tolist() == ck.tolist() and host(m).tolist() == cm.tolist()


def test_extend_level_on_device_arrays() -> None:
    rng = np.random.default_rng(3)
    a = np.sort(rng.integers(0, 6, 30))
    b = np.sort(rng.integers(0, 6, 25))
    vals = np.r_[a, b].astype(np.int64)
    lo = np.array([[0, 0, 10, 30], [30, 40, 30, 55]], np.int64)
    hi = np.array([[30, 15, 30, 30], [55, 55, 50, 55]], np.int64)
    parent, val, nlo, nhi, n, work = cuda_lex_join.extend_level(dev(vals), dev(lo), dev(hi))
    cp, cv, clo, chi, cn, cwork = cpu_join.extend_level(vals, lo, hi)
    assert (n, work) == (cn, cwork) and n > 0
    assert host(parent).tolist() == cp[:n].tolist() and host(val).tolist() == cv[:n].tolist()
    assert host(nlo).tolist() == clo[:, :n].tolist()
    assert host(nhi).tolist() == chi[:, :n].tolist()
