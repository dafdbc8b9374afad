"""Arrays for the CUDA cases files, in Numba's CUDA simulator and on a real device alike
(imported by them, not a test).

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) the cuda backend's array module is NumPy and
"device" arrays are NumPy arrays; on a real device (the cases files run there with
``GPU_IVM_TEST_DEVICE=1``) it is CuPy, and the kernel wrappers hand results back as device
arrays in many places. The helpers below let one test body serve both:

- :data:`ON_DEVICE`: True on a real device (not under the simulator);
- :func:`dev`: an input as the backend's array (``BACKEND.xp.asarray``: the very same NumPy
  array under the simulator, a CuPy copy on a device; tuples element by element, scalars
  unchanged);
- :func:`like`: a host array in the kind of another array (host or device);
- :func:`host`: a NumPy array of a NumPy, CuPy or numba device array (NumPy passes through);
- :func:`array_equal`: ``np.array_equal`` of the two host copies;
- :class:`InterfaceOnly`: a foreign device array exposing only ``__cuda_array_interface__``,
  over host memory under the simulator (as before) and over real device memory on a device.
"""

from __future__ import annotations

import numba
import numpy as np

ON_DEVICE: bool = not numba.config.ENABLE_CUDASIM


def backend():
    """The cuda backend (resolved on first use)."""
    from gpu_ivm.backend import get_backend

    return get_backend("cuda")


def device_name() -> str:
    """The backend's ``device`` as it must read: "simulator", or the GPU's name."""
    if not ON_DEVICE:
        return "simulator"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def dev(x):
    """``x`` as the backend's array: NumPy arrays through ``BACKEND.xp.asarray`` (no copy
    under the simulator), tuples element by element; anything else unchanged."""
    if not ON_DEVICE:  # the simulator's backend arrays are NumPy: the very same array
        return x
    if isinstance(x, tuple):
        return tuple(dev(v) for v in x)
    if isinstance(x, np.ndarray):
        return backend().xp.asarray(x)
    return x


def like(x, ref):
    """The host array ``x`` in the kind of ``ref``: itself for a NumPy ``ref``, else
    :func:`dev` of it (a state's own array module, whichever backend built the state)."""
    return x if isinstance(ref, np.ndarray) else dev(x)


def host(x):
    """A NumPy array of ``x`` (NumPy arrays pass through; CuPy and numba device arrays are
    copied to the host; :class:`InterfaceOnly` gives its memory's current contents); tuples
    element by element, lists as one array; anything else through ``np.asarray``."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, tuple):
        return tuple(host(v) for v in x)
    if isinstance(x, list):
        return np.asarray([host(v) for v in x])
    if isinstance(x, InterfaceOnly):
        return x.host()
    if ON_DEVICE and hasattr(x, "__cuda_array_interface__"):
        import cupy  # CuPy, numba device arrays, any interface (strided ones included)

        return cupy.asnumpy(cupy.asarray(x))
    if hasattr(x, "copy_to_host"):  # the simulator's numba device arrays
        return x.copy_to_host()
    return np.asarray(x)


def array_equal(a, b) -> bool:
    """``np.array_equal`` of the host copies of ``a`` and ``b``."""
    return bool(np.array_equal(host(a), host(b)))


class InterfaceOnly:
    """A device array as a foreign library hands it over: only ``__cuda_array_interface__``
    (version 3) plus ``shape``/``dtype``; no NumPy conversion (``__array__`` raises), so a
    kernel can reach the memory only through the interface's pointer.

    Under the simulator the interface points at ``a``'s own (host) memory, a zero-length
    array with a null pointer as CuPy hands it over; kernels write into ``a`` in place. On a
    device it is the interface of a CuPy copy of ``a`` (real device memory, kept alive by
    this object; with ``strides``, a strided CuPy array with those byte strides), and
    :meth:`host` reads the memory back.
    """

    def __init__(self, a: np.ndarray, strides=None) -> None:
        self.shape, self.dtype = a.shape, a.dtype
        if ON_DEVICE:
            import cupy

            if strides is None:
                d = cupy.ascontiguousarray(cupy.asarray(a))
            else:  # a strided view of a larger allocation, as a[::2] of a device array
                span = (sum((k - 1) * abs(s) for k, s in zip(a.shape, strides))
                        // a.dtype.itemsize + 1) if a.size else 0
                d = cupy.lib.stride_tricks.as_strided(cupy.zeros(span, a.dtype), a.shape,
                                                      strides)
                d[...] = cupy.asarray(a)
            self._a = d
            self.__cuda_array_interface__ = d.__cuda_array_interface__
            return
        self._a = a
        ptr = a.ctypes.data if a.size else 0  # CuPy hands zero-length arrays a null pointer
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (ptr, False), "version": 3,
                                         "strides": strides}

    def host(self) -> np.ndarray:
        """The memory's current contents (``a`` itself under the simulator)."""
        return self._a.get() if ON_DEVICE else self._a

    def __array__(self, *args, **kwargs):
        raise TypeError("host conversion of a device array")
