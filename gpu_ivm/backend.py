"""Backend choice: where arrays live and which kernels run.

``cpu`` is NumPy + Numba (``numba.njit``). ``cuda`` is Numba-CUDA kernels
(:mod:`gpu_ivm.kernels.cuda_kernels`) with CuPy as the array module on a real device; asking
for it without a usable device is an error, never a silent CPU run. With
``NUMBA_ENABLE_CUDASIM=1`` set before Numba is imported, ``cuda`` runs the same kernels in
Numba's CUDA simulator on NumPy arrays (``xp`` is NumPy): a correctness tool, thousands of times
slower than the CPU backend.

``auto`` picks ``cuda`` only when a real device is usable: never the simulator, even when
``NUMBA_ENABLE_CUDASIM`` is set (that variable is often set for other libraries' tests, and a
silent switch to the simulator would make every batch orders of magnitude slower); ask for
``cuda`` explicitly to use it. The choice comes from the ``backend`` argument or, when that is
``None``, from the ``GPU_IVM_BACKEND`` environment variable (default ``cpu``).

CuPy and ``numba.cuda`` are imported lazily, only when ``cuda`` or ``auto`` is resolved, so
``import gpu_ivm`` works without them.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from .errors import BackendUnavailableError, InputError

ENV_VAR = "GPU_IVM_BACKEND"
NAMES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class Backend:
    """An execution backend.

    Attributes
    ----------
    name : str
        ``"cpu"`` or ``"cuda"``.
    xp : module
        The array module (NumPy, or CuPy on a real device).
    kernels : SimpleNamespace
        The kernel set: ``store`` (sorted-run maintenance), ``delta`` (count deltas, view
        expansion), ``view`` (view updates), ``static`` (static counts), each a namespace whose
        functions take this backend's arrays.
    device : str
        ``"host"``, ``"simulator"`` (Numba's CUDA simulator) or the CUDA device's name.
    """

    name: str
    xp: ModuleType
    kernels: SimpleNamespace = field(default_factory=SimpleNamespace, repr=False)
    device: str = "host"

    def to_device(self, a: np.ndarray) -> Any:
        """Copy a host array to the backend's memory (no copy with NumPy); returns an array
        of ``xp`` (a NumPy or CuPy array)."""
        return self.xp.asarray(a)

    def batch_scope(self):
        """A context for one batch's kernels: on a device their atomic counters are zeroed
        once for the batch (``cuda_launch.counter_scope``); on the host nothing."""
        scope = getattr(getattr(self.kernels, "phase", None), "counter_scope", None)
        return scope() if scope is not None else nullcontext()

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (no-op on the host).

        Kernel launches and CuPy calls return before the device is done, so a host timer read
        right after them measures the queueing, not the work: every timing that feeds the
        adaptive policy calls this before reading the clock.
        """
        if self.xp is not np:
            self.xp.cuda.Device().synchronize()

    def to_host(self, a: Any) -> np.ndarray:
        """Copy a backend array to a NumPy array (no copy with NumPy)."""
        if self.xp is np:
            return np.asarray(a)
        return self.xp.asnumpy(a)


def _cpu_kernels() -> SimpleNamespace:
    from .kernels import (
        adjacency,
        batch_prep,
        batch_triangles,
        count_table,
        delta_kernels,
        graph_listing,
        graph_local,
        hashmap,
        light_delta,
        query_kernels,
        static_kernels,
        store_kernels,
        view_kernels,
    )

    return SimpleNamespace(xp=np, store=store_kernels, delta=delta_kernels, view=view_kernels,
                           static=static_kernels, query=query_kernels, hash=hashmap,
                           adjacency=adjacency, light=light_delta,
                           local=SimpleNamespace(local_delta=graph_local.local_delta,
                                                 vertex_delta=graph_local.vertex_delta,
                                                 add_counts=count_table.add_counts,
                                                 get_counts=count_table.get_counts,
                                                 common_above=graph_listing.common_above,
                                                 batch_pair_triangles=(
                                                     batch_triangles.batch_pair_triangles)),
                           prep=SimpleNamespace(rows=batch_prep.prep_rows,
                                                groups=batch_prep.prep_groups,
                                                scatter=batch_prep.prep_scatter))


CPU = Backend("cpu", np, _cpu_kernels())
_CUDA: Backend | None = None  # built once, on first request


def simulator_enabled() -> bool:
    """True if Numba's CUDA simulator is on (``NUMBA_ENABLE_CUDASIM=1`` before numba's import).

    Reads numba's configuration, not the environment: setting the variable after numba was
    imported has no effect, and this reports that.
    """
    import numba

    return bool(numba.config.ENABLE_CUDASIM)


def _device_problem() -> str | None:
    """None if a real CUDA device and CuPy are usable, else why not (for the error message)."""
    if simulator_enabled():
        return "NUMBA_ENABLE_CUDASIM=1 replaces the device by the simulator"
    try:
        from numba import cuda
    except Exception as exc:  # pragma: no cover - numba without its cuda package
        return f"numba.cuda cannot be imported ({type(exc).__name__}: {exc})"
    try:
        if not cuda.is_available():
            return "numba.cuda finds no usable CUDA device or driver"
    except Exception as exc:
        return f"numba.cuda.is_available() failed ({type(exc).__name__}: {exc})"
    try:
        import cupy
    except Exception:
        return "CuPy is not installed (pip install 'gpu_ivm[gpu]')"
    try:
        if not cupy.cuda.is_available():
            return "CuPy finds no usable CUDA device"
    except Exception as exc:
        return f"cupy.cuda.is_available() failed ({type(exc).__name__}: {exc})"
    return None


def cuda_usable() -> bool:
    """True if a real CUDA device can run the kernels (the simulator does not count)."""
    return _device_problem() is None


def _cuda_backend() -> Backend:
    global _CUDA
    if _CUDA is not None:
        return _CUDA
    sim = simulator_enabled()
    if not sim:
        problem = _device_problem()
        if problem is not None:
            raise BackendUnavailableError(
                f"the cuda backend needs a usable CUDA device and CuPy; {problem} "
                "(set GPU_IVM_BACKEND=cpu or backend='cpu'; or set NUMBA_ENABLE_CUDASIM=1 "
                "before importing numba to run the CUDA kernels in Numba's simulator)"
            )
    from .kernels.cuda_kernels import kernel_set

    if sim:
        xp, device = np, "simulator"
    else:
        import cupy
        from numba import cuda

        xp, device = cupy, cuda.get_current_device().name
        device = device.decode() if isinstance(device, bytes) else str(device)
    _CUDA = Backend("cuda", xp, kernel_set(xp), device)
    return _CUDA


def get_backend(choice: str | Backend | None = None) -> Backend:
    """Resolve a backend from an argument, ``GPU_IVM_BACKEND``, or the default ``cpu``.

    Raises
    ------
    InputError
        For an unknown name.
    BackendUnavailableError
        For ``cuda`` without a usable device (and without the simulator).

    >>> get_backend("cpu").name
    'cpu'
    """
    if isinstance(choice, Backend):
        return choice
    name = (choice if choice is not None else os.environ.get(ENV_VAR, "cpu")).strip().lower()
    if name not in NAMES:
        raise InputError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}",
                         column="backend")
    if name == "auto":
        name = "cuda" if cuda_usable() else "cpu"
    if name == "cuda":
        return _cuda_backend()
    return CPU
