"""Systems under test, behind one small interface so more can be added as adapters.

A :class:`System` loads a base edge set, applies batches (dicts of int64 arrays ``src``,
``dst``, ``sign`` with +1 inserts and -1 deletes, valid under set semantics) and reports the
triangle count. ``apply`` returns the wall-clock seconds the batch took; ``skip`` applies a batch
without being timed (a system that is too slow to time on every batch); ``info`` returns extra
per-batch facts (e.g. the path gpu_ivm took).

Register a new system by adding a factory to :data:`SYSTEMS`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from gpu_ivm.graph_engine import GraphEngine
from gpu_ivm.static import count_triangles_arrays


class System(ABC):
    """A triangle-count maintainer under test."""

    name: str = "system"  # stable identifier used in the result records
    label: str = "system"  # how tables and plots show it
    family: str = "other"
    #: True if the runner may time only a sample of the batches (``skip`` the rest)
    sampled: bool = False

    @abstractmethod
    def load(self, base_src: np.ndarray, base_dst: np.ndarray) -> float:
        """Load the base graph; return seconds."""

    @abstractmethod
    def apply(self, batch: dict) -> float:
        """Apply one batch; return its wall-clock seconds."""

    @abstractmethod
    def count(self) -> int:
        """The current number of triangles."""

    def skip(self, batch: dict) -> None:
        """Apply a batch outside the timed sample (default: like :meth:`apply`)."""
        self.apply(batch)

    def info(self) -> dict:
        """Extra facts about the last batch (merged into the per-batch log)."""
        return {}

    def describe(self) -> dict:
        """Static configuration for the result records."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Drop large state."""


class GpuIvmSystem(System):
    """``gpu_ivm.GraphEngine`` with a given ε and, optionally, a forced path."""

    family = "gpu_ivm"

    def __init__(self, name: str, label: str, epsilon: str = "1/2", force: str | None = None,
                 adaptive: bool = True):
        self.name, self.label = name, label
        self.epsilon, self.force, self.adaptive = epsilon, force, adaptive
        self.engine: GraphEngine | None = None
        self._last: dict = {}

    def describe(self) -> dict:
        return {"epsilon": self.epsilon, "force": self.force, "adaptive": self.adaptive}

    def load(self, base_src, base_dst) -> float:
        self.engine = GraphEngine(epsilon=self.epsilon, adaptive=self.adaptive)
        self.engine.policy.force = self.force
        t = time.perf_counter()
        self.engine.load({"src": base_src, "dst": base_dst})
        return time.perf_counter() - t

    def apply(self, batch) -> float:
        t = time.perf_counter()
        rep = self.engine.apply(batch)
        sec = time.perf_counter() - t
        self._last = {"path": rep.path, "engine_s": rep.seconds, "updates": rep.updates}
        return sec

    def info(self) -> dict:
        return dict(self._last)

    def count(self) -> int:
        return int(self.engine.count())

    def close(self) -> None:
        self.engine = None


class RecountSystem(System):
    """Recount from scratch after every batch with the static counter.

    The edge set is a sorted array of packed keys ``min << 32 | max``; a batch removes its
    deletes (``np.searchsorted`` + ``np.delete``) and inserts its inserts (``np.searchsorted`` +
    ``np.insert``), then ``count_triangles_arrays`` runs on the whole current edge set. Both
    parts are timed. ``skip`` only maintains the edge set; the count is then computed lazily.
    """

    name = "recount"
    label = "recount per batch"
    family = "baseline"
    sampled = True

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.int64)
        self._count: int | None = None

    @staticmethod
    def _packed(src, dst) -> np.ndarray:
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        return (np.minimum(src, dst) << 32) | np.maximum(src, dst)

    def load(self, base_src, base_dst) -> float:
        t = time.perf_counter()
        keys = np.unique(self._packed(base_src, base_dst))
        self.keys = keys[(keys >> 32) != (keys & 0xFFFFFFFF)]
        self._count = self._recount()
        return time.perf_counter() - t

    def _update(self, batch) -> None:
        k = self._packed(batch["src"], batch["dst"])
        sign = np.asarray(batch["sign"])
        dele = np.sort(k[sign < 0])
        ins = np.sort(k[sign > 0])
        if dele.shape[0]:
            pos = np.searchsorted(self.keys, dele)
            pos_ok = np.minimum(pos, self.keys.shape[0] - 1)
            if not np.array_equal(self.keys[pos_ok], dele):
                raise ValueError("recount: delete of an absent edge")
            self.keys = np.delete(self.keys, pos)
        if ins.shape[0]:
            self.keys = np.insert(self.keys, np.searchsorted(self.keys, ins), ins)
        self._count = None

    def _recount(self) -> int:
        return int(count_triangles_arrays(self.keys >> 32, self.keys & 0xFFFFFFFF))

    def apply(self, batch) -> float:
        t = time.perf_counter()
        self._update(batch)
        self._count = self._recount()
        return time.perf_counter() - t

    def skip(self, batch) -> None:
        self._update(batch)

    def count(self) -> int:
        if self._count is None:
            self._count = self._recount()
        return self._count

    def close(self) -> None:
        self.keys = np.zeros(0, np.int64)


#: name -> factory of a fresh system
SYSTEMS: dict[str, Callable[[], System]] = {
    "gpu_ivm_eps_half": lambda: GpuIvmSystem("gpu_ivm_eps_half", "gpu_ivm ε=½ (adaptive)"),
    "gpu_ivm_eps_half_delta": lambda: GpuIvmSystem(
        "gpu_ivm_eps_half_delta", "gpu_ivm ε=½ delta", force="delta"),
    "gpu_ivm_eps_1_delta": lambda: GpuIvmSystem(
        "gpu_ivm_eps_1_delta", "gpu_ivm ε=1 delta (first-order IVM)", epsilon="1",
        force="delta"),
    "recount": RecountSystem,
}


def make(name: str) -> System:
    try:
        return SYSTEMS[name]()
    except KeyError:
        raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None
