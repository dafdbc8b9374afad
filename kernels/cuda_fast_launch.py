"""A launch that skips numba-cuda's per-call argument handling (``GPU_IVM_FAST_LAUNCH=0``: off).

Measured on an H200 (docs/gpu.md, "Measured on an H200"): an empty kernel with six CuPy
arrays cost the host 252 µs per launch through :func:`~gpu_ivm.kernels.cuda_launch.launch`
(each array converted to a numba device array, then typed and marshalled by numba-cuda),
468 µs with the six in a tuple, 82 µs with the six already converted, and 19 µs with one
argument. A count batch at R-MAT 18, B = 10³ launched about 10 kernels with 282 arrays in all
(the H200 profile), so milliseconds went there.

This module launches a kernel that has already run once with arguments of the same kinds
(same structure of tuples, same dtypes, dimensions and contiguity of arrays, same scalar
types) by writing the argument words itself, from each array's ``__cuda_array_interface__``,
in the layout numba-cuda's ``_Kernel._prepare_args`` writes (per array: meminfo 0, parent 0,
size, itemsize, pointer, shape, strides in bytes; per scalar: a ctypes value of the compiled
type), and calling ``cuda.core.launch`` with the compiled function. The first launch of each
kind goes through numba-cuda (compiling if needed) and records the compiled kernel and its
argument types. Anything else falls back to the ordinary launch: host arrays, arrays produced
on another stream (which need numba-cuda's synchronization), scalar types it does not know,
a numba without numba-cuda's ``cuda.core`` launch, or any error while preparing. A store's
arrays come as a :class:`Bundle`, which keeps its kind and words after its first fast launch
(host work for a launch with a 20-array bundle: 26-36 µs against 87-126 µs as a plain tuple,
``python -m bench.fast_launch_host [--bundle]`` on the 2-core machine, driver stubbed;
``GPU_IVM_BUNDLE_WORDS=0`` scans it at every launch instead).

On the H200 (2026-11-28) it took the six-array launch from 252 to 53 µs, and the count
engine's batch at R-MAT 18, B = 10³ from 69,702-99,373 to 148,337-161,649 updates/s (two
alternating rounds, every count checked against the cpu backend); the device case files
passed with it. It is on by default on hardware; ``GPU_IVM_FAST_LAUNCH=0`` turns it off.
Not available under the simulator (there is no driver).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

ENABLED: bool = os.environ.get("GPU_IVM_FAST_LAUNCH", "1").strip() != "0"
#: a :class:`Bundle` keeps its argument words (``GPU_IVM_BUNDLE_WORDS=0``: it is scanned at
#: every launch as a plain tuple is, for an A/B on a device)
KEEP_BUNDLE_WORDS: bool = os.environ.get("GPU_IVM_BUNDLE_WORDS", "1").strip() != "0"

_SCALARS = {int: "i", bool: "b", float: "f", np.int64: "i", np.int32: "i32", np.bool_: "b",
            np.float64: "f", np.uint64: "u64", np.uint32: "u32", np.int8: "i8", np.uint8: "u8"}
_ITEMSIZE: dict[str, int] = {}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class Bundle(tuple):
    """A tuple of device arrays that is launched many times as it is: a store's arrays in
    launch form (``cuda_store.device_bundle``; ``ZStore.nt`` keeps one until the store's
    structure changes). Its first fast launch reads its members' interfaces once and keeps
    its kind and argument words on the bundle itself (attribute ``fast``), so later launches
    copy the words instead of reading 13 interfaces again; they live exactly as long as the
    bundle (no cache elsewhere holds device memory or pointers). Its members must keep their
    interfaces: numba device arrays, as ``device_bundle`` makes them. Typed like a plain
    tuple by numba (no ``_asdict``)."""


def _bundle(a: Bundle, needs_sync):
    """(kind, argument words) of a bundle, computed at its first fast launch and kept on it;
    None (not kept: the next launch tries again) when a member needs numba-cuda's launch."""
    got = a.__dict__.get("fast")
    if got is None:
        cais: list = []
        kind = _scan(tuple(a), cais, needs_sync)
        if kind is None:
            return None
        words: list = []
        for cai in cais:
            _array_words(cai, words)
        got = a.fast = (kind, words)
    return got


def _scan(a, cais: list, needs_sync):
    """A hashable description of one argument that fixes numba's type for it, or None (the
    argument needs numba-cuda's launch: a host array, an array produced on another stream
    (``needs_sync(cai)``), an unknown object, an int outside int64). The interfaces of its
    arrays are appended to ``cais`` in launch order (each read once per launch); a
    :class:`Bundle` appends its kept (kind, words) instead."""
    if type(a) is Bundle and KEEP_BUNDLE_WORDS:
        got = _bundle(a, needs_sync)
        if got is None:
            return None
        cais.append(got)
        return got[0]
    if isinstance(a, tuple):
        kinds = []
        for x in a:
            k = _scan(x, cais, needs_sync)
            if k is None:
                return None
            kinds.append(k)
        return ("T", tuple(kinds))
    k = _SCALARS.get(type(a))
    if k is not None:
        if k == "i" and type(a) is int and not _I64_MIN <= a <= _I64_MAX:
            return None  # numba types it uint64 or refuses it
        return k
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is None or needs_sync(cai):
        return None
    cais.append(cai)
    return ("A", cai["typestr"], len(cai["shape"]), _layout(cai), bool(cai["data"][1]))


def _array_words(cai, out: list) -> None:
    """One array's argument words in numba-cuda's layout: meminfo 0, parent 0, element count,
    item size, data pointer, shape, strides in bytes."""
    shape = cai["shape"]
    size = 1
    for d in shape:
        size *= d
    out.append(0)  # meminfo
    out.append(0)  # parent
    out.append(size)
    out.append(_itemsize(cai["typestr"]))
    out.append(cai["data"][0])
    out.extend(shape)
    out.extend(cai.get("strides") or _c_strides(cai))


def _layout(cai) -> str:
    """numba's layout letter for the interface: "C", "F" (2-D and up) or "A"."""
    strides = cai.get("strides")
    if strides is None or tuple(strides) == _c_strides(cai):
        return "C"
    if len(cai["shape"]) > 1 and tuple(strides) == _f_strides(cai):
        return "F"
    return "A"


def _c_strides(cai) -> tuple:
    size = _itemsize(cai["typestr"])
    out = []
    for d in reversed(cai["shape"]):
        out.append(size)
        size *= d
    return tuple(reversed(out))


def _f_strides(cai) -> tuple:
    size = _itemsize(cai["typestr"])
    out = []
    for d in cai["shape"]:
        out.append(size)
        size *= d
    return tuple(out)


def _itemsize(typestr: str) -> int:
    n = _ITEMSIZE.get(typestr)
    if n is None:
        n = _ITEMSIZE[typestr] = np.dtype(typestr).itemsize
    return n


class FastLauncher:
    """Launches through recorded compiled kernels (see the module docstring)."""

    def __init__(self) -> None:
        from cuda.core import LaunchConfig, launch
        from cupy.cuda.runtime import getDevice
        from numba.cuda import types as nbtypes
        from numba.cuda._compat import CUDA_CORE_GE_1_0
        from numba.cuda.cudadrv import driver

        self._launch = launch
        self._Config = LaunchConfig
        self._coop_kw = "is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch"
        self._stream = driver._to_core_stream(0)
        self._types = nbtypes
        self._device = getDevice  # the current device: a compiled function is per device
        # (id(dispatcher), device, kinds) -> (dispatcher, the compiled function, argument types)
        self._kernels: dict = {}
        self._configs: dict = {}
        self.fast = 0      # launches that took this path
        self.slow = 0      # launches that fell back

    def launch(self, dispatcher, blocks: int, tpb: int, args: tuple, shared: int,
               ordinary, needs_stream_sync) -> None:
        """``dispatcher[blocks, tpb, 0, shared](*args)``; ``ordinary(dispatcher, blocks, tpb,
        args, shared)`` is the package's usual launch (used the first time and as fallback),
        ``needs_stream_sync(cai)`` whether an array must be synchronized on first (then the
        ordinary launch does it)."""
        cais: list = []
        kinds = tuple(_scan(a, cais, needs_stream_sync) for a in args)
        if None in kinds:
            self.slow += 1
            ordinary(dispatcher, blocks, tpb, args, shared)
            return
        key = (id(dispatcher), self._device(), kinds)
        rec = self._kernels.get(key)
        if rec is None:
            self.slow += 1
            conv = ordinary(dispatcher, blocks, tpb, args, shared)
            self._record(key, dispatcher, conv)
            return
        try:
            words: list = []
            arrays = iter(cais)
            for t, v in zip(rec[2], args):
                self._words(t, v, words, arrays)
            cfg = self._configs.get((blocks, tpb, shared))
            if cfg is None:
                cfg = self._configs[(blocks, tpb, shared)] = self._Config(
                    grid=(blocks, 1, 1), block=(tpb, 1, 1), shmem_size=shared,
                    **{self._coop_kw: False})
            self._launch(self._stream, cfg, rec[1], *words)
        except Exception:  # nothing was launched: this kind goes the ordinary way from now
            self._kernels.pop(key, None)
            self.slow += 1
            ordinary(dispatcher, blocks, tpb, args, shared)
            return
        self.fast += 1

    def _record(self, key, dispatcher, conv: tuple) -> None:
        """After an ordinary launch with the converted ``conv``: remember the compiled kernel
        for this kind of arguments (nothing if numba-cuda's layout is not the expected one)."""
        try:
            argtypes = tuple(dispatcher.typeof_pyval(a) for a in conv)
            kern = dispatcher.overloads.get(argtypes)
            if kern is None or getattr(kern, "debug", False) or getattr(
                    kern, "cooperative", False) or dispatcher.extensions:
                return
            cufunc = kern._codelibrary.get_cufunc()
            self._kernels[key] = (dispatcher, cufunc.kernel, tuple(kern.argument_types))
        except Exception:  # an unexpected numba-cuda: this kind stays on the ordinary path
            return

    def _words(self, ty, val, out: list, arrays) -> None:
        """The argument words of one argument, as numba-cuda's ``_prepare_args`` writes them
        (``arrays``: the interfaces of the arrays, in order, as :func:`_scan` read them)."""
        T = self._types
        if isinstance(ty, T.Array):
            _array_words(next(arrays), out)
        elif type(val) is Bundle and KEEP_BUNDLE_WORDS:  # its words, kept by _bundle
            out.extend(next(arrays)[1])
        elif isinstance(ty, T.BaseTuple):
            for t, v in zip(ty, val):
                self._words(t, v, out, arrays)
        elif isinstance(ty, T.Integer):
            out.append(getattr(ctypes, f"c_{ty}")(val))
        elif ty == T.boolean:
            out.append(val)
        elif ty == T.float64:
            out.append(ctypes.c_double(val))
        elif ty == T.float32:
            out.append(ctypes.c_float(val))
        else:
            raise NotImplementedError(ty)


_LAUNCHER: FastLauncher | None = None
_TRIED = False


def launcher(simulator: bool) -> FastLauncher | None:
    """The process's fast launcher, or None (disabled, ``simulator``, or no numba-cuda)."""
    global _LAUNCHER, _TRIED
    if not _TRIED:
        _TRIED = True
        if ENABLED and not simulator:
            try:
                _LAUNCHER = FastLauncher()
            except Exception:  # numba's built-in cuda target or an older numba-cuda
                _LAUNCHER = None
    return _LAUNCHER
