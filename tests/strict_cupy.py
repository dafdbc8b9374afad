"""A CuPy stand-in on NumPy that enforces device-memory rules, for the cuda backend's tests.

No GPU exists here, so CuPy itself cannot run. This module plays CuPy's role for the engines
under Numba's CUDA simulator and makes the mistakes a real device would punish visible:

- :class:`DeviceArray` is not a NumPy array. Converting it implicitly (``np.asarray``,
  ``__array__``) raises ``TypeError`` as CuPy does; mixing it with a NumPy array in one
  operation raises as CuPy does; calling a NumPy function CuPy lacks on it raises (the name
  list is CuPy 14.2's, ``CUPY_NAMES``); ``xp.repeat`` with an array of counts raises (CuPy
  takes an int or a host sequence); iterating over it raises (per-element Python on device
  data).
- Every place a real device would make the host wait for the device is counted in
  :data:`STATS`: scalar reads (``int``, ``bool``, ``float``, ``item``, ``tolist``),
  downloads (``asnumpy``, ``get``; their bytes in ``bytes_down``) and operations whose
  output size depends on the data (boolean-mask reads, ``nonzero``, ``flatnonzero``,
  ``unique``, ...), plus uploads (``xp.asarray`` of host data).
- The work a real device would be asked to do is counted in :data:`WORK`: ``launches`` (Numba kernel
  launches), ``cupy_ops`` (CuPy calls that run a kernel of CuPy's own: functions, ufuncs,
  methods, gathers and scatters; one ``op:NAME`` entry per kind) and ``allocations``.

Kernels launched in the simulator receive the underlying NumPy arrays (:func:`install`
patches the simulator's kernel call to unwrap :class:`DeviceArray` arguments, also inside
tuples), so kernels write into device memory in place, as on hardware.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

# CuPy 14.2's top-level names that NumPy also has (taken from `dir(cupy)` of the wheel).
CUPY_NAMES = frozenset("""
abs absolute add all allclose amax amin angle any append arange arccos arccosh arcsin arcsinh
arctan arctan2 arctanh argmax argmin argpartition argsort argwhere around array array_equal
array_equiv array_split asarray asanyarray ascontiguousarray asfortranarray atleast_1d
atleast_2d atleast_3d average bincount bitwise_and bitwise_not bitwise_or bitwise_xor
broadcast_arrays broadcast_to cbrt ceil choose clip column_stack compress concatenate conj
conjugate copy copysign copyto corrcoef cos cosh count_nonzero cov cross cumprod cumsum
deg2rad degrees delete diag diagflat diagonal diff digitize divide divmod dot dsplit dstack
einsum empty empty_like equal exp exp2 expand_dims expm1 extract eye fabs fill_diagonal fix
flatnonzero flip fliplr flipud float_power floor floor_divide fmax fmin fmod frexp
frombuffer fromfunction fromiter full full_like gcd greater greater_equal heaviside histogram
hsplit hstack hypot identity imag in1d indices inner interp intersect1d invert isclose
iscomplex isfinite isin isinf isnan isreal isscalar ix_ kron lcm ldexp left_shift less
less_equal lexsort linspace log log10 log1p log2 logaddexp logaddexp2 logical_and
logical_not logical_or logical_xor matmul max maximum mean median meshgrid min minimum mod
modf moveaxis multiply nan_to_num nanargmax nanargmin nancumsum nanmax nanmean nanmin
nanprod nansum ndim negative nextafter nonzero not_equal ones ones_like outer packbits
partition percentile place positive power prod ptp put putmask quantile rad2deg radians
ravel ravel_multi_index real reciprocal remainder repeat reshape resize right_shift rint
roll rollaxis rot90 round searchsorted select setdiff1d setxor1d shape sign signbit sin
sinc sinh size sort split sqrt square squeeze stack std subtract sum swapaxes take
take_along_axis tan tanh tensordot tile trace transpose trapezoid tri tril trim_zeros triu
true_divide trunc union1d unique unpackbits unravel_index var vdot vsplit vstack where
zeros zeros_like
""".split())
# dtype objects and constants pass through unchanged
PASS_NAMES = ("int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 bool_ "
              "intp dtype iinfo finfo newaxis inf nan pi e").split()
# CuPy ndarray methods (dir(cupy.ndarray) of the same wheel)
METHODS = frozenset("""
all any argmax argmin argpartition argsort astype choose clip compress conj conjugate copy
cumprod cumsum diagonal dot fill flatten max mean min nonzero partition prod ptp put ravel
repeat reshape round searchsorted sort squeeze std sum swapaxes take trace transpose var view
""".split())
UFUNC_METHODS = ("reduce", "accumulate", "reduceat", "outer", "at")
# operations whose output size depends on the data: a device must report the size to the host
SIZE_SYNC = frozenset("nonzero flatnonzero argwhere unique compress extract setdiff1d "
                      "intersect1d union1d setxor1d trim_zeros".split())
ALLOCATORS = ("empty", "zeros", "ones", "full", "arange", "eye", "identity", "linspace")

STATS: Counter = Counter()
WORK: Counter = Counter()  # launches, cupy_ops (op:NAME per kind), allocations, bytes_up


class DeviceMemoryError(TypeError):
    """A host/device rule was broken (what CuPy raises as TypeError, or slow code)."""


def _count(kind: str) -> None:
    STATS[kind] += 1
    STATS["syncs" if kind != "uploads" else "transfers"] += 1


def _op(kind: str) -> None:
    """One CuPy call that launches work on a real device (a kernel of CuPy's own)."""
    WORK["cupy_ops"] += 1
    WORK[f"op:{kind}"] += 1


def _unwrap(x, where: str):
    """The NumPy value behind ``x``; host arrays are refused (CuPy refuses to mix them)."""
    if isinstance(x, DeviceArray):
        return x._a
    if isinstance(x, np.ndarray):
        raise DeviceMemoryError(f"{where}: a host (NumPy) array mixed with device arrays; "
                                "upload it with xp.asarray first")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, where) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, where) for k, v in x.items()}
    if isinstance(x, slice):
        return slice(*(_unwrap(v, where) for v in (x.start, x.stop, x.step)))
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic):  # CuPy reductions give 0-d device arrays
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


class DeviceArray(NDArrayOperatorsMixin):
    """An array in (simulated) device memory; see the module docstring."""

    __slots__ = ("_a",)
    __array_priority__ = 100

    def __init__(self, a: np.ndarray):
        self._a = a

    # metadata: no sync
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: DeviceArray(self._a.T))

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"

    # forbidden: implicit host conversion, per-element iteration
    def __array__(self, *args, **kwargs):
        raise DeviceMemoryError("implicit conversion of a device array to NumPy; use "
                                "backend.to_host (cupy.asnumpy) explicitly")

    def __iter__(self):
        raise DeviceMemoryError("iteration over a device array (per-element Python)")

    # host reads: counted
    def __int__(self) -> int:
        _count("scalar_reads")
        return int(self._a)

    __index__ = __int__

    def __float__(self) -> float:
        _count("scalar_reads")
        return float(self._a)

    def __bool__(self) -> bool:
        _count("scalar_reads")
        return bool(self._a)

    def item(self):
        _count("scalar_reads")
        return self._a.item()

    def tolist(self):
        _count("downloads")
        STATS["bytes_down"] += self._a.nbytes
        return self._a.tolist()

    def get(self) -> np.ndarray:
        _count("downloads")
        STATS["bytes_down"] += self._a.nbytes
        return self._a.copy()

    # indexing
    def __getitem__(self, idx):
        idx = _unwrap(idx, "indexing")
        if isinstance(idx, np.ndarray) and idx.dtype == np.bool_:
            _count("size_syncs")
        if isinstance(idx, np.ndarray) or (isinstance(idx, tuple) and any(
                isinstance(i, np.ndarray) for i in idx)):
            _op("gather")
        return _wrap(self._a[idx])

    def __setitem__(self, idx, value) -> None:
        _op("setitem")
        self._a[_unwrap(idx, "assignment")] = _unwrap(value, "assignment")

    # NumPy protocols: CuPy implements both, so np.f(device) runs CuPy's f
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc.__name__ not in CUPY_NAMES:
            raise DeviceMemoryError(f"CuPy has no ufunc {ufunc.__name__}")
        return _call_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _call(func, args, kwargs)

    def __getattr__(self, name: str):
        if name not in METHODS:
            raise AttributeError(f"CuPy arrays have no attribute {name!r}")
        if name in SIZE_SYNC:
            _count("size_syncs")
        meth = getattr(self._a, name)

        def call(*args, **kwargs):
            _op(f"method:{name}")
            if name == "repeat" and args and not isinstance(args[0], (int, np.integer)):
                raise DeviceMemoryError("cupy.ndarray.repeat takes an int")
            if name == "searchsorted" and args and not isinstance(args[0], DeviceArray):
                raise DeviceMemoryError("cupy.ndarray.searchsorted takes a device array")
            return _wrap(meth(*_unwrap(args, name), **_unwrap(kwargs, name)))

        return call


def _call(func, args, kwargs):
    name = func.__name__
    if name not in CUPY_NAMES:
        raise DeviceMemoryError(f"CuPy has no function {name}")
    if name == "repeat" and len(args) > 1 and isinstance(args[1], DeviceArray):
        raise DeviceMemoryError("cupy.repeat takes an int or a host sequence of counts, not "
                                "a device array")
    if name == "searchsorted" and not isinstance(args[1] if len(args) > 1 else kwargs.get("v"),
                                                 DeviceArray):
        raise DeviceMemoryError("cupy.searchsorted takes the values to find as a device array")
    if name in SIZE_SYNC:
        _count("size_syncs")
    _op(name)
    out = kwargs.get("out")
    res = func(*_unwrap(args, f"np.{name}"), **_unwrap(kwargs, f"np.{name}"))
    if out is not None:
        return out
    return _wrap(res)


class _Ufunc:
    def __init__(self, uf: np.ufunc):
        self._uf = uf
        self.__name__ = uf.__name__

    def __call__(self, *args, **kwargs):
        return _call_ufunc(self._uf, "__call__", args, kwargs)

    def __getattr__(self, method: str):
        if method not in UFUNC_METHODS:
            raise AttributeError(method)
        return lambda *a, **k: _call_ufunc(self._uf, method, a, k)


def _call_ufunc(uf, method, args, kwargs):
    where = f"cupy.{uf.__name__}.{method}"
    _op(f"ufunc:{uf.__name__}")
    res = getattr(uf, method)(*_unwrap(args, where), **_unwrap(kwargs, where))
    if "out" in kwargs:  # the result lives in the caller's device array
        out = kwargs["out"]
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return _wrap(res)


def _function(name: str):
    f = getattr(np, name)
    if isinstance(f, np.ufunc):
        return _Ufunc(f)

    def call(*args, **kwargs):
        return _call(f, args, kwargs)

    call.__name__ = name
    return call


def asarray(a, dtype=None, order=None):
    """``cupy.asarray``: device arrays pass (cast if asked), host data is uploaded (counted)."""
    if isinstance(a, DeviceArray):
        return a if dtype is None or a.dtype == dtype else DeviceArray(a._a.astype(dtype))
    _count("uploads")
    WORK["bytes_up"] += np.asarray(a).nbytes
    return DeviceArray(np.array(a, dtype=dtype, copy=True))


def ascontiguousarray(a, dtype=None):
    if not isinstance(a, DeviceArray):
        raise DeviceMemoryError("cupy.ascontiguousarray takes a device array; upload with "
                                "xp.asarray")
    if dtype is not None and a.dtype != dtype or not a._a.flags.c_contiguous:
        _op("ascontiguousarray")
    return DeviceArray(np.ascontiguousarray(a._a, dtype))


def asnumpy(a) -> np.ndarray:
    if isinstance(a, DeviceArray):
        _count("downloads")
        STATS["bytes_down"] += a._a.nbytes
        return a._a.copy()
    return np.asarray(a)


#: what ``empty`` fills an integer array with (``None``: whatever NumPy's allocator gives, often
#: zeros or a freed array's stale values, so a read of an unwritten entry goes unseen): a
#: large negative value, which sorts before every key, is no valid count or id, and makes
#: any sum it enters wrong. Every strict test runs with it.
POISON: int | None = -(2**62) - 12345


def _allocator(name: str):
    f = getattr(np, name)

    def call(*args, **kwargs):
        WORK["allocations"] += 1
        if name != "empty":  # the others fill the memory: a kernel
            _op(name)
        got = f(*_unwrap(args, name), **_unwrap(kwargs, name))
        if name == "empty" and POISON is not None and got.dtype.kind in "iu":
            got.fill(np.array(POISON).astype(got.dtype))
        return DeviceArray(got)

    call.__name__ = name
    return call


class _R:
    def __getitem__(self, items):
        items = items if isinstance(items, tuple) else (items,)
        return _wrap(np.r_[_unwrap(items, "cupy.r_")])


class _Device:
    """``cupy.cuda.Device()``: ``synchronize`` counts (the host waits for the device)."""

    def synchronize(self) -> None:
        _count("synchronize")


def module() -> SimpleNamespace:
    """The stand-in for ``cupy``: every name of CUPY_NAMES, plus asnumpy, ndarray, r_."""
    ns = {n: _function(n) for n in CUPY_NAMES if hasattr(np, n)}
    ns.update({n: _allocator(n) for n in ALLOCATORS})
    ns.update({n: getattr(np, n) for n in PASS_NAMES if hasattr(np, n)})
    ns.update(asarray=asarray, array=asarray, ascontiguousarray=ascontiguousarray,
              asnumpy=asnumpy, ndarray=DeviceArray, r_=_R(), __name__="strict_cupy",
              cuda=SimpleNamespace(Device=_Device))
    return SimpleNamespace(**ns)


def _unwrap_for_kernel(x):
    if isinstance(x, DeviceArray):
        return x._a
    if isinstance(x, tuple):
        return tuple(_unwrap_for_kernel(v) for v in x)
    if isinstance(x, np.ndarray) and x.ndim > 0:
        raise DeviceMemoryError("a host array passed to a kernel launch (a real device would "
                                "copy it over PCIe at every launch)")
    return x


_installed = False


def install() -> None:
    """Let simulator kernels take DeviceArray arguments (unwrapped, written in place)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    original = FakeCUDAKernel.__call__

    def call(self, *args):
        if self._device:
            return original(self, *args)
        WORK["launches"] += 1
        return original(self, *(_unwrap_for_kernel(a) for a in args))

    FakeCUDAKernel.__call__ = call
    _installed = True


def reset() -> dict:
    """Return the host-sync counters (:data:`STATS`) and zero them and :data:`WORK`."""
    out = dict(STATS)
    STATS.clear()
    WORK.clear()
    return out


def work() -> dict:
    """The work counters (:data:`WORK`) since the last :func:`reset`."""
    return dict(WORK)


__all__ = ["DeviceArray", "DeviceMemoryError", "STATS", "WORK", "asnumpy", "install",
           "module", "reset", "work"]
