"""Launch machinery shared by the CUDA kernels: launch shapes, arrays, prefix sums.

Imported only by the ``cuda`` backend (it imports ``numba.cuda``). Three things live here:

- :data:`CONFIG`, the launch shape of the element-wise kernels (threads per block, a cap on the
  number of blocks; every element-wise kernel is a grid-stride loop, so any shape is correct);
- array helpers: temporaries are NumPy arrays under the CUDA simulator (whose kernels run on
  NumPy) and device arrays on hardware; results handed back to the engine follow the kind of
  the caller's input (host in, host out);
- a device-wide exclusive prefix sum (:func:`exclusive_scan`, reduce-then-scan in three
  kernels) and the stream compactions built on it.

Array arguments travel in tuples ("bundles"): numba-cuda flattens tuples of arrays at launch
(``_prepare_args`` recurses into ``BaseTuple``), and the simulator passes tuples through
untouched, so inside a kernel the arrays of a bundle are plain NumPy arrays there and the very
same ``numba.njit`` helpers of :mod:`gpu_ivm.kernels.lsm` accept them (a top-level array
argument would be wrapped in the simulator's ``FakeCUDAArray``, which ``njit`` cannot type).
:func:`launch` passes every array through :func:`device_view` first, so arrays of other
libraries (CuPy, cuDF columns: anything with ``__cuda_array_interface__``) reach the kernel as
numba device arrays, which the built-in ``numba.cuda`` types too. Every launch of the package
goes through it.
"""

from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numba as nb
import numpy as np
from numba import cuda

SIMULATOR: bool = bool(nb.config.ENABLE_CUDASIM)

# NumPy 2.5 removed ``np.row_stack`` (an alias of ``vstack`` since NumPy 2.0); numba-cuda
# releases of 2025-26 still register an overload for it when their target first loads, so the
# first kernel compile fails with AttributeError (seen on an H100 image with numpy 2.5.2).
# Restoring the alias before that point is harmless: it is what the name always meant.
if not hasattr(np, "row_stack"):
    setattr(np, "row_stack", np.vstack)  # noqa: B010 (the name NPY201 flags)

# A batch of a few updates launches small grids by design; numba-cuda warns about each one
# ("Grid size N will likely result in GPU under-utilization"). Only that message is silenced.
# (numba-cuda raises its own NumbaPerformanceWarning class, not numba's: filter by message.)
warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU")


def _serialise_simulator_shared_arrays() -> None:
    """Work around a race in the CUDA simulator's ``cuda.shared.array``.

    The simulator gives the threads of a block one NumPy array per allocating source line, but
    looks it up and inserts it without a lock (``FakeCUDAShared.array``), so two threads that
    reach the line together can get two different "shared" arrays and a block-wide scan then
    reads another thread's stale copy (seen here as wrong prefix sums once in a few hundred
    launches with a short GIL switch interval). This replacement does the same under a lock. It
    is installed only under the simulator; hardware has one shared array per block.
    """
    import sys
    import threading
    import traceback

    from numba.core import types
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    from numba.np import numpy_support

    original = FakeCUDAShared.array
    if getattr(original, "_gpu_ivm_locked", False):
        return
    lock = threading.Lock()

    def array(self, shape, dtype):
        if shape == 0:  # dynamic shared memory: one buffer, no lookup, no race
            return original(self, shape, dtype)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # the kernel's line
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = np.empty(shape, dtype)
                self._allocations[caller] = res
        return res

    array._gpu_ivm_locked = True
    FakeCUDAShared.array = array


def _quicken_simulator_device_calls() -> None:
    """Make a device function call in the CUDA simulator cost a lookup, not a module scan.

    The simulator calls a ``cuda.jit(device=True)`` function inside
    ``swapped_cuda_module``, a context manager that scans every global of the function's
    module for the ``cuda`` module, binds those names to the running kernel's fake module
    and binds them back on exit (``FakeCUDAKernel.__call__``). That took about 5 µs a call
    here, most of a simulated kernel's time where a thread calls device functions per
    element (a batch of 10⁵ updates spent minutes in them). This replacement does the same
    binding with the names found once per module, and calls the function directly when
    none of them is bound to the real module (the caller's kernel swapped them already: a
    device function of the kernel's own module): about 1 µs. The semantics are the
    simulator's, including what a thread sees while another one swaps the names back.
    Installed only under the simulator.
    """
    from numba.cuda.simulator import kernel as sim_kernel

    original = sim_kernel.FakeCUDAKernel.__call__
    if getattr(original, "_gpu_ivm_quick", False):
        return
    names: dict[int, tuple[str, ...]] = {}

    def call(self, *args):
        if not self._device:
            return original(self, *args)
        globs = self.fn.__globals__
        cand = names.get(id(globs))
        if cand is None:
            cand = names[id(globs)] = tuple(k for k, v in globs.items() if v is cuda)
        swap = [k for k in cand if globs.get(k) is cuda]
        if not swap:
            return self.fn(*args)
        fake = sim_kernel._get_kernel_context()
        for k in swap:
            globs[k] = fake
        try:
            return self.fn(*args)
        finally:
            for k in swap:
                globs[k] = cuda

    call._gpu_ivm_quick = True
    sim_kernel.FakeCUDAKernel.__call__ = call


if SIMULATOR:
    _serialise_simulator_shared_arrays()
    _quicken_simulator_device_calls()


@dataclass
class LaunchConfig:
    """Launch shape of the element-wise kernels and of the scan.

    Attributes
    ----------
    tpb : int
        Threads per block of the element-wise kernels (a multiple of 32).
    max_blocks : int
        Cap on their grid; beyond ``tpb * max_blocks`` items each thread loops (grid stride).
    scan_tpb : int
        Threads per block of the scan kernels; a power of two, at most 1024. The scan also
        uses at most ``scan_tpb`` blocks (their partial sums are scanned by one block).
    """

    tpb: int = 256
    max_blocks: int = 4096
    scan_tpb: int = 512


# Hardware: 256 threads per block (8 warps; good occupancy for register-heavy searches) and up
# to 4096 blocks (an H100 has 132 SMs x 2048 threads = 1056 blocks of 256 resident, so four
# waves before the grid-stride loops take over). Simulator: one Python thread per GPU thread,
# so a tiny grid; the grid-stride loops make the result independent of the shape.
CONFIG = LaunchConfig(32, 2, 32) if SIMULATOR else LaunchConfig()


def grid(n: int) -> tuple[int, int]:
    """(blocks, threads per block) for ``n`` items of an element-wise kernel (``n >= 1``)."""
    tpb = CONFIG.tpb
    return min((n + tpb - 1) // tpb, CONFIG.max_blocks), tpb


# ----------------------------------------------------------------------------- arrays
# The array module temporaries are allocated with: CuPy on hardware (numba-cuda kernels take
# CuPy arrays through __cuda_array_interface__, zero-copy), NumPy under the simulator; set by
# the backend (use_array_module), so kernel outputs live where the engine's state lives.
_XP = None


def use_array_module(xp) -> None:
    """Allocate kernel temporaries and outputs with ``xp`` (``None``: the default choice)."""
    global _XP
    _XP = xp


def array_module(a=None):
    """The array module of ``a`` (NumPy for host arrays), or the one device temporaries are
    made with (CuPy on hardware, NumPy under the simulator unless a test set another)."""
    if isinstance(a, np.ndarray):
        return np
    if _XP is not None:
        return _XP
    if SIMULATOR:
        return np
    import cupy

    return cupy


def on_device(a) -> bool:
    """True for device arrays (CuPy, numba-cuda), False for NumPy arrays."""
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


def empty(n: int | tuple[int, ...], dtype=np.int64):
    """An uninitialised temporary (``n``: a length or a shape): NumPy under the simulator, a
    device array on hardware."""
    if _XP is not None:
        return _XP.empty(n, dtype)
    if SIMULATOR:
        return np.empty(n, dtype)
    return cuda.device_array(n, dtype)


def zeros(n: int, dtype=np.int64):
    """A zeroed temporary (see :func:`empty`)."""
    if _XP is not None:
        return _XP.zeros(n, dtype)
    if SIMULATOR:
        return np.zeros(n, dtype)
    return cuda.to_device(np.zeros(n, dtype))


# Kernels that count with atomics need their counters zeroed first: a CuPy call each. Inside
# a batch (:func:`counter_scope`, entered by the engines through ``Backend.batch_scope``) the
# counters are slices of one buffer zeroed once, handed out in turn; outside one, each is a
# zeroed array of its own. The scopes are per thread: engines applying batches in two
# threads never share a buffer.
_SCOPES = threading.local()


def _scopes() -> list:
    """This thread's scopes, innermost last: [buffer, slots used] each."""
    stack = getattr(_SCOPES, "stack", None)
    if stack is None:
        stack = _SCOPES.stack = []
    return stack


def counters(k: int):
    """``k`` zeroed int64 device slots for a kernel's atomic counters (see above)."""
    stack = _scopes()
    if not stack:
        return zeros(k)
    scope = stack[-1]
    buf, used = scope
    if used + k > buf.shape[0]:
        buf, used = zeros(max(k, buf.shape[0])), 0
        scope[0] = buf
    scope[1] = used + k
    return buf[used : used + k]


class _Pair:
    """A thread's two counter buffers for its outermost scopes, used in turn: while a batch
    counts in one, a kernel of that batch zeros the other (:func:`spare_counters`), so the
    next batch finds its buffer zeroed without a call of its own. ``clean[i]``: buffer i is
    known to be zero (a batch that ended before its zeroing kernel leaves the other buffer
    unknown, and the next scope zeros it with a call, as a nested scope always does)."""

    def __init__(self, xp, size: int) -> None:
        self.xp, self.size = xp, size
        self.bufs = [None, None]
        self.clean = [False, False]
        self.now = 0  # the buffer of the current (or last) outermost scope
        self.spare_taken = False

    def enter(self):
        i = 1 - self.now
        if self.bufs[i] is None or not self.clean[i]:
            self.bufs[i] = zeros(self.size)
        self.clean[i] = False  # in use
        self.now = i
        self.spare_taken = False
        return self.bufs[i]


def _pair(size: int) -> _Pair:
    """This thread's :class:`_Pair` (made again when the array module or size changed)."""
    pair = getattr(_SCOPES, "pair", None)
    xp = array_module()
    if pair is None or pair.xp is not xp or pair.size != size:
        pair = _SCOPES.pair = _Pair(xp, size)
    return pair


@contextmanager
def counter_scope(size: int = 64):
    """``size`` zeroed counter slots for the kernels launched inside (one batch): an
    outermost scope takes the buffer the last batch's :func:`spare_counters` kernel zeroed
    (a zeroing call only when there is none), a nested one zeros a buffer of its own."""
    stack = _scopes()
    stack.append([zeros(size) if stack else _pair(size).enter(), 0])
    try:
        yield
    finally:
        stack.pop()


_NOTHING: dict = {}


def nothing():
    """A zero-length int64 array of the current array module, made once: the argument of a
    kernel's optional array (no spare buffer to zero, no device-side limit)."""
    xp = array_module()
    got = _NOTHING.get(id(xp))
    if got is None or got[0] is not xp:
        got = _NOTHING[id(xp)] = (xp, empty(0))
    return got[1]


@contextmanager
def spare_counters():
    """The counter buffer that the next outermost scope will use, for the kernel launched
    inside to zero (every slot, grid-stride), or an empty array when there is none to zero
    (no outermost scope, or already zeroed in this scope). The buffer counts as zeroed once
    the launch has been made (the next scope's kernels run after it on the stream)."""
    stack = _scopes()
    pair = getattr(_SCOPES, "pair", None)
    if len(stack) != 1 or pair is None or pair.spare_taken or stack[0][0] is not \
            pair.bufs[pair.now] or pair.xp is not array_module():
        yield nothing()
        return
    i = 1 - pair.now
    if pair.bufs[i] is None:
        pair.bufs[i] = empty(pair.size)
    pair.spare_taken = True
    yield pair.bufs[i]
    pair.clean[i] = True


def result(a, like):
    """Hand a kernel output back in the kind of the caller's array ``like`` (host or device)."""
    if isinstance(like, np.ndarray) and not isinstance(a, np.ndarray):
        return a.get() if hasattr(a, "get") else a.copy_to_host()  # CuPy / numba-cuda
    return a


def scalar(a, i: int) -> int:
    """Read one element back to the host (one device-to-host copy of 8 bytes on hardware)."""
    return int(a[i])


def host_ints(a) -> list[int]:
    """Read a small device array back to the host as ints (one copy for all its elements)."""
    return result(a, np.empty(0)).tolist()


def check_1d(name: str, a, dtype=np.int64) -> None:
    """Reject arrays the kernels cannot take: not 1-D, or of another dtype."""
    if a.ndim != 1:
        raise TypeError(f"{name} must be a 1-D array, got {a.ndim} dimensions")
    if a.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {a.dtype.name}")


# ----------------------------------------------------------------------------- launching
def device_view(a):
    """``a`` in the form a ``@cuda.jit`` kernel types on every toolchain, without a copy.

    NumPy arrays and numba device arrays pass through. Any other object exposing
    ``__cuda_array_interface__`` (CuPy, cuDF columns, PyTorch...) becomes, on hardware, a
    numba device array over the same memory (``cuda.as_cuda_array``: the built-in
    ``numba.cuda`` cannot type CuPy arrays, least of all inside tuples; numba-cuda >= 0.30
    can). Under the simulator, where "device" memory is host memory, it becomes a NumPy view
    of the interface's pointer, so the interface itself (pointer, shape, typestr, strides,
    zero-length arrays with a null pointer) is what the simulator tests exercise.
    """
    if isinstance(a, np.ndarray) or not hasattr(a, "__cuda_array_interface__"):
        return a
    if not SIMULATOR:
        from numba.cuda.api import from_cuda_array_interface
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        if isinstance(a, DeviceNDArray):
            return a
        cai = a.__cuda_array_interface__
        return from_cuda_array_interface(cai, owner=a, sync=needs_stream_sync(cai))
    return _host_view(a.__cuda_array_interface__)


# Version 3 of the CUDA array interface names the stream the producer last used ("stream":
# None, 1 = the legacy default stream, 2 = the per-thread default stream, else a handle) and
# asks the consumer to synchronize on it before use. numba-cuda does so by default, for every
# array of every launch: a stream synchronization each, hundreds per batch (the host then
# waits for the device at every launch). The package's launches go to numba's default stream,
# the legacy one unless NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM=1, and work queued on one stream
# runs in order: an array produced on that same stream needs no synchronization.
# GPU_IVM_CAI_SYNC=always restores numba-cuda's behaviour (a safety switch, and the baseline of
# docs/gpu.md's measurement).
_ALWAYS_SYNC = os.environ.get("GPU_IVM_CAI_SYNC", "").strip().lower() == "always"
# numba's default stream as the interface names it: 2 (per-thread) or 1 (legacy); read once,
# as numba reads its configuration once (this runs for every array of every launch)
_DEFAULT_STREAM = 2 if (
    bool(getattr(nb.config, "CUDA_PER_THREAD_DEFAULT_STREAM", 0))
    or os.environ.get("NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM", "0").strip() not in ("", "0")
) else 1


def needs_stream_sync(cai: dict) -> bool:
    """Whether an array with this interface must be synchronized on before a launch on
    numba's default stream: only when it was produced on another stream.

    >>> needs_stream_sync({"stream": None}), needs_stream_sync({"stream": 1})
    (False, False)
    >>> needs_stream_sync({"stream": 0x7F00DEADBEEF})
    True
    """
    if _ALWAYS_SYNC:
        return True
    stream = cai.get("stream")
    if stream is None:
        return False
    return int(stream) != _DEFAULT_STREAM


def _host_view(cai: dict) -> np.ndarray:
    """A NumPy view of a (simulated) CUDA array interface: C-contiguous arrays only."""
    import ctypes

    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(d) for d in cai["shape"])
    size = int(np.prod(shape, dtype=np.int64))
    strides = cai.get("strides")
    if strides is not None and size > 0:
        want = np.empty(shape, dtype).strides
        if tuple(strides) != want:
            raise TypeError(f"kernels take C-contiguous arrays, got strides {tuple(strides)}")
    if cai.get("mask") is not None:
        raise TypeError("kernels take arrays without a null mask")
    if size == 0:
        return np.empty(shape, dtype)
    ptr = int(cai["data"][0])
    buf = (ctypes.c_char * (size * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype).reshape(shape)


def launch_args(args: tuple) -> tuple:
    """Launch arguments with every array (top level and inside bundles) through
    :func:`device_view`."""
    return tuple(launch_args(a) if isinstance(a, tuple) else device_view(a) for a in args)


def launch(kernel, blocks: int, tpb: int, *args, shared: int = 0) -> None:
    """``kernel[blocks, tpb, 0, shared](*args)`` with :func:`launch_args` applied.

    Example (under the simulator, ``NUMBA_ENABLE_CUDASIM=1``)::

        vals = np.arange(5, dtype=np.int64); sums = np.zeros(2, np.int64)
        launch(_scan_kernels(32)[0], 1, 32, (vals, sums), 5, 32)   # sums[0] == 10
    """
    fast = _fast_launcher()
    if fast is not None:
        fast.launch(kernel, blocks, tpb, args, shared, _ordinary_launch, needs_stream_sync)
    else:
        _ordinary_launch(kernel, blocks, tpb, args, shared)


def _ordinary_launch(kernel, blocks: int, tpb: int, args: tuple, shared: int) -> tuple:
    """numba-cuda's launch of ``kernel`` with :func:`launch_args`; returns the arguments as
    launched."""
    conv = launch_args(args)
    if shared:
        kernel[blocks, tpb, 0, shared](*conv)
    else:
        kernel[blocks, tpb](*conv)
    return conv


_FAST = None


def _fast_launcher():
    """:func:`gpu_ivm.kernels.cuda_fast_launch.launcher`, looked up once."""
    global _FAST
    if _FAST is None:
        from .cuda_fast_launch import launcher

        _FAST = (launcher(SIMULATOR),)
    return _FAST[0]


# ----------------------------------------------------------------------------- prefix sum
_SCAN_CACHE: dict[int, tuple] = {}


def _scan_kernels(tpb: int) -> tuple:
    """The three scan kernels for blocks of ``tpb`` threads (cached per ``tpb``).

    Shared arrays need their size at compile time, hence one specialisation per block size
    (the ``Reduce`` factory pattern of numba-cuda's ``kernels/reduction.py``).
    """
    if tpb in _SCAN_CACHE:
        return _SCAN_CACHE[tpb]
    if tpb & (tpb - 1) or not 1 <= tpb <= 1024:
        raise ValueError(f"scan_tpb must be a power of two in [1, 1024], got {tpb!r}")

    @cuda.jit(cache=True)
    def chunk_sums(bundle, n, chunk):
        """sums[b] = Σ vals over block b's chunk ``[b·chunk, (b+1)·chunk)``.

        Launch config: ``nb <= tpb`` blocks of ``tpb`` threads; ``tpb * 8`` bytes of shared
        memory. Threads stride through the chunk tile by tile (coalesced), then a tree
        reduction in shared memory (no warp shuffles: the simulator lacks them).
        """
        vals, sums = bundle
        sh = cuda.shared.array(tpb, nb.int64)
        t = cuda.threadIdx.x
        lo = cuda.blockIdx.x * chunk
        hi = min(lo + chunk, n)
        acc = 0
        i = lo + t
        while i < hi:
            acc += vals[i]
            i += tpb
        sh[t] = acc
        cuda.syncthreads()
        s = tpb // 2
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            sums[cuda.blockIdx.x] = sh[0]

    @cuda.jit(cache=True)
    def scan_sums(bundle, nblk):
        """In place: sums[b] ← Σ_{b' < b} sums[b']; sums[nblk] ← the total.

        Launch config: one block of ``tpb >= nblk`` threads; Hillis-Steele inclusive scan in
        shared memory (log2 tpb steps), turned exclusive by subtracting the own value.
        """
        sums = bundle[0]
        sh = cuda.shared.array(tpb, nb.int64)
        t = cuda.threadIdx.x
        v = sums[t] if t < nblk else 0
        sh[t] = v
        cuda.syncthreads()
        off = 1
        while off < tpb:
            x = sh[t - off] if t >= off else 0
            cuda.syncthreads()
            sh[t] += x
            cuda.syncthreads()
            off *= 2
        if t < nblk:
            sums[t] = sh[t] - v
        if t == tpb - 1:
            sums[nblk] = sh[t]

    @cuda.jit(cache=True)
    def chunk_scan(bundle, n, chunk):
        """out[i] = sums[b] + Σ vals over block b's chunk before i; out[n] = the total.

        Launch config: as :func:`chunk_sums`. Layout (tpb = 4, chunk = 8, 2 blocks)::

            vals  | 1 0 1 1 | 0 1 1 0 || 1 1 0 0 | 1 0 0 1 |
                   block 0 tile 0,1     block 1 tile 0,1
            carry  0 ──────► 3 ───────► 5 (from sums) ──► 7
            out   | 0 1 1 2 | 3 3 4 5 || 5 6 7 7 | 7 8 8 8 |  out[n] = 9

        Each tile is scanned in shared memory; the running carry passes from tile to tile.
        """
        vals, sums, out = bundle
        sh = cuda.shared.array(tpb, nb.int64)
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        lo = b * chunk
        hi = min(lo + chunk, n)
        carry = sums[b]
        base = lo
        while base < hi:  # same trip count for every thread of the block: syncthreads is safe
            i = base + t
            v = vals[i] if i < hi else 0
            sh[t] = v
            cuda.syncthreads()
            off = 1
            while off < tpb:
                x = sh[t - off] if t >= off else 0
                cuda.syncthreads()
                sh[t] += x
                cuda.syncthreads()
                off *= 2
            if i < hi:
                out[i] = carry + sh[t] - v
            carry += sh[tpb - 1]
            cuda.syncthreads()  # everyone has read sh before the next tile overwrites it
            base += tpb
        if b == 0 and t == 0:
            out[n] = sums[cuda.gridDim.x]

    _SCAN_CACHE[tpb] = (chunk_sums, scan_sums, chunk_scan)
    return _SCAN_CACHE[tpb]


def exclusive_scan(vals):
    """Exclusive prefix sum of an int64 array: ``out[i] = Σ vals[:i]``, ``out[n] = Σ vals``.

    An array of the engine's array module is scanned by its own ``cumsum`` (CuPy's CUB scan
    on a device: one call, where the kernels below take three launches). Other arrays (any
    ``__cuda_array_interface__`` object) take three kernels (reduce-then-scan): per-chunk
    sums, a one-block scan of the chunk sums, a per-chunk rescan with the chunk's offset.
    About 3 passes over ``vals`` (24 bytes per item). No host round trip either way; the total
    stays on the device in ``out[n]``.
    """
    xp = array_module()
    if not isinstance(vals, xp.ndarray):
        return kernel_scan(vals)
    n = vals.shape[0]
    out = empty(n + 1)
    out[:1] = 0
    if n:
        xp.cumsum(vals, out=out[1:])
    return out


def padded_scan(flags):
    """:func:`exclusive_scan` of ``flags[1:]`` for an array whose ``flags[0]`` is 0 (the
    kernel that wrote the flags after that leading 0 set it): the inclusive scan of the whole
    array, one ``cumsum`` call on an array of the engine's array module (no write of the
    leading 0 of its own), else :func:`kernel_scan` of ``flags[1:]``."""
    xp = array_module()
    if isinstance(flags, xp.ndarray):
        return xp.cumsum(flags)
    return kernel_scan(flags[1:])


def kernel_scan(vals):
    """:func:`exclusive_scan` by the three kernels, for any array the kernels take."""
    n = vals.shape[0]
    if n == 0:
        return zeros(1)
    out = empty(n + 1)
    tpb = CONFIG.scan_tpb
    chunk_sums, scan_sums, chunk_scan = _scan_kernels(tpb)
    nblk = min((n + tpb - 1) // tpb, CONFIG.max_blocks, tpb)
    tiles = ((n + tpb - 1) // tpb + nblk - 1) // nblk
    chunk = tiles * tpb  # chunks are whole tiles: every tile load is aligned and coalesced
    nblk = (n + chunk - 1) // chunk
    sums = empty(nblk + 1)
    launch(chunk_sums, nblk, tpb, (vals, sums), n, chunk)
    launch(scan_sums, 1, tpb, (sums,), nblk)
    launch(chunk_scan, nblk, tpb, (vals, sums, out), n, chunk)
    return out
