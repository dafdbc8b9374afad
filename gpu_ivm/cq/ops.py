"""The query engine's operators on a backend: which kernels the relations' operations call.

Every operator of the query engine that touches more than a few values goes through one of
six kernels:

============== ================================== ======================================
operator       CPU (Numba)                        CUDA twin
============== ================================== ======================================
lookup         ``lex_search.prefix_ranges``       ``cuda_lex.prefix_ranges``
merge          ``lex_search.merge_sorted``        ``cuda_lex.merge_sorted``
group-and-sum  ``lex_reduce.reduce_sorted``       ``cuda_lex.reduce_sorted``
expand-join    ``lex_expand.expand_join``         ``cuda_lex_join.expand_join``
Generic Join   ``lex_join.extend_level``          ``cuda_lex_join.extend_level``
sort           NumPy ``lexsort`` / packed         the array module's ``lexsort`` (CuPy on
               ``argsort``                        a device)
============== ================================== ======================================

:class:`Ops` holds one column of that table. The relations (:mod:`gpu_ivm.cq.zrel`,
:mod:`gpu_ivm.cq.lsm`, :mod:`gpu_ivm.cq.wcoj`) call :func:`current`, which is the CPU set
unless a caller chose another with :func:`using` (``Engine(..., backend="cuda")`` wraps its
public methods in it), so one process can run engines on both backends side by side.

The CUDA set takes the engine's host arrays (the engine's state stays in host memory: see
docs/gpu.md) and hands host arrays back; on a device each call copies its inputs over and
its outputs back. Under Numba's CUDA simulator the twins run on the host arrays directly.

>>> current().name
'cpu'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["Ops", "check_backend", "cpu_ops", "cuda_ops", "current", "for_backend", "using"]


@dataclass(frozen=True)
class Ops:
    """One backend's operator kernels (see the module docstring for what each computes).

    Attributes
    ----------
    name : str
        ``"cpu"`` or ``"cuda"``.
    prefix_ranges : callable
        ``(keys, probes, fence) -> (lo, hi)``.
    merge_sorted : callable
        ``(k1, m1, k2, m2) -> (keys, mult)``.
    reduce_sorted : callable
        ``(keys, mult, p) -> (keys, mult)``.
    expand_join : callable
        ``(left_keys, left_mult, probes, keys, mult, skip, how, fence, ranges) -> (keys,
        mult)``.
    extend_level : callable
        ``(vals, lo, hi) -> (parent, val, new_lo, new_hi, n, work)``.
    lex_order : callable
        ``keys -> order`` sorting the rows lexicographically.
    """

    name: str
    prefix_ranges: Callable
    merge_sorted: Callable
    reduce_sorted: Callable
    expand_join: Callable
    extend_level: Callable
    lex_order: Callable


_CPU: Ops | None = None
_CUDA: Ops | None = None
_CURRENT: ContextVar[Ops | None] = ContextVar("gpu_ivm_cq_ops", default=None)


def cpu_ops() -> Ops:
    """The CPU kernels (Numba), the default."""
    global _CPU
    if _CPU is None:
        from ..kernels.lex_expand import expand_join
        from ..kernels.lex_join import extend_level
        from ..kernels.lex_reduce import reduce_sorted
        from ..kernels.lex_search import merge_sorted, prefix_ranges
        from .lex_order import host_lex_order

        _CPU = Ops("cpu", prefix_ranges, merge_sorted, reduce_sorted, expand_join,
                   extend_level, host_lex_order)
    return _CPU


def _c(a):
    """A host array as the kernels take it (C-contiguous int64); device arrays pass."""
    return np.ascontiguousarray(a, dtype=np.int64) if isinstance(a, np.ndarray) else a


def cuda_ops() -> Ops:
    """The CUDA twins (``kernels/cuda_lex.py``, ``kernels/cuda_lex_join.py``): on a device, or
    in the simulator when ``NUMBA_ENABLE_CUDASIM=1``. Fences are a CPU cache device; the
    twins search the runs without them."""
    global _CUDA
    if _CUDA is None:
        from ..kernels import cuda_lex, cuda_lex_join

        def prefix_ranges(keys, probes, fence=None):
            return cuda_lex.prefix_ranges(_c(keys), _c(probes))

        def merge_sorted(k1, m1, k2, m2):
            return cuda_lex.merge_sorted(_c(k1), _c(m1), _c(k2), _c(m2))

        def reduce_sorted(keys, mult, p):
            return cuda_lex.reduce_sorted(_c(keys), _c(mult), p)

        def expand_join(left_keys, left_mult, probes, keys, mult, skip, how=0, fence=None,
                        ranges=None):
            return cuda_lex_join.expand_join(_c(left_keys), _c(left_mult), _c(probes),
                                             _c(keys), _c(mult), skip, how,
                                             None if ranges is None else tuple(map(_c, ranges)))

        def extend_level(vals, lo, hi):
            return cuda_lex_join.extend_level(_c(vals), _c(lo), _c(hi))

        def lex_order(keys):
            if not isinstance(keys, np.ndarray):
                return cuda_lex_join.lex_order(keys)
            xp = cuda_lex_join.array_module()  # host keys: sorted on the device, order back
            order = cuda_lex_join.lex_order(xp.asarray(_c(keys)))
            return order if xp is np else xp.asnumpy(order)

        _CUDA = Ops("cuda", prefix_ranges, merge_sorted, reduce_sorted, expand_join,
                    extend_level, lex_order)
    return _CUDA


def for_backend(name: str) -> Ops:
    """The operator set of backend ``name`` (``"cpu"`` or ``"cuda"``)."""
    return cuda_ops() if name == "cuda" else cpu_ops()


def current() -> Ops:
    """The operator set in force (the CPU's unless inside :func:`using`)."""
    ops = _CURRENT.get()
    return ops if ops is not None else cpu_ops()


@contextmanager
def using(ops: Ops) -> Iterator[Ops]:
    """Run the block with ``ops`` as :func:`current` (nests; per thread and task)."""
    token = _CURRENT.set(ops)
    try:
        yield ops
    finally:
        _CURRENT.reset(token)


def check_backend(backend: str) -> str:
    """``backend`` if the query engine runs there (``"cpu"`` or ``"cuda"``), else an
    :class:`~gpu_ivm.errors.InputError` naming the choices."""
    if backend not in ("cpu", "cuda"):
        raise InputError(f"unknown backend {backend!r}; the query engine runs on 'cpu' or "
                         "'cuda'", column="backend")
    return backend
