"""Backend choice: where arrays live and which kernels run.

``cpu`` is NumPy + Numba (``numba.njit``). ``cuda`` is CuPy + Numba-CUDA (issue: the CUDA
path); asking for it without a usable device is an error, never a silent CPU run. ``auto``
picks ``cuda`` only when a device is usable. The choice comes from the ``backend`` argument or,
when that is ``None``, from the ``GPU_IVM_BACKEND`` environment variable (default ``cpu``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace

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
        The array module (NumPy or CuPy).
    kernels : SimpleNamespace
        The kernel set: ``store`` (sorted-run maintenance), ``delta`` (count deltas, view
        expansion), ``view`` (view updates), ``static`` (static counts), each a module whose
        functions take this backend's arrays.
    """

    name: str
    xp: ModuleType
    kernels: SimpleNamespace = field(default_factory=SimpleNamespace, repr=False)

    def to_device(self, a: np.ndarray):
        """Copy a host array to the backend's memory (no copy on the CPU)."""
        return self.xp.asarray(a)

    def to_host(self, a) -> np.ndarray:
        """Copy a backend array to a NumPy array (no copy on the CPU)."""
        if self.name == "cpu":
            return np.asarray(a)
        return self.xp.asnumpy(a)


def _cpu_kernels() -> SimpleNamespace:
    from .kernels import delta_kernels, static_kernels, store_kernels, view_kernels

    return SimpleNamespace(store=store_kernels, delta=delta_kernels, view=view_kernels,
                           static=static_kernels)


CPU = Backend("cpu", np, _cpu_kernels())


def cuda_usable() -> bool:
    """True if a CUDA device can run kernels (or the Numba CUDA simulator is enabled)."""
    try:
        import cupy  # noqa: F401
        from numba import cuda
    except Exception:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def get_backend(choice: str | Backend | None = None) -> Backend:
    """Resolve a backend from an argument, ``GPU_IVM_BACKEND``, or the default ``cpu``.

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
        raise BackendUnavailableError(
            "the cuda backend needs CuPy and a usable CUDA device; none is usable here "
            "(set GPU_IVM_BACKEND=cpu or backend='cpu')"
        )
    return CPU
