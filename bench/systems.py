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
from collections.abc import Callable

from bench.system_base import RecountBase, System
from gpu_ivm.graph_engine import GraphEngine
from gpu_ivm.static import count_triangles_arrays


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
        chosen = None if self.engine is None else str(self.engine.epsilon)
        return {"epsilon": self.epsilon, "force": self.force, "adaptive": self.adaptive,
                "epsilon_chosen": chosen}

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


class RecountSystem(RecountBase):
    """Recount with the project's static counter ``count_triangles_arrays``."""

    name = "recount"
    label = "recount per batch (static counter)"

    def _recount(self) -> int:
        s, d = self.edges.arrays()
        return int(count_triangles_arrays(s, d))


#: name -> factory of a fresh system
SYSTEMS: dict[str, Callable[[], System]] = {
    "gpu_ivm_auto": lambda: GpuIvmSystem("gpu_ivm_auto", "gpu_ivm default (ε auto, adaptive)",
                                         epsilon="auto"),
    "gpu_ivm_eps_half": lambda: GpuIvmSystem("gpu_ivm_eps_half", "gpu_ivm ε=½ (adaptive)"),
    "gpu_ivm_eps_half_delta": lambda: GpuIvmSystem(
        "gpu_ivm_eps_half_delta", "gpu_ivm ε=½ delta", force="delta"),
    "gpu_ivm_eps_0_delta": lambda: GpuIvmSystem(
        "gpu_ivm_eps_0_delta", "gpu_ivm ε=0 delta (classical IVM)", epsilon="0",
        force="delta"),
    "gpu_ivm_eps_1_delta": lambda: GpuIvmSystem(
        "gpu_ivm_eps_1_delta", "gpu_ivm ε=1 delta (classical IVM)", epsilon="1",
        force="delta"),
    "recount": RecountSystem,
}


def _register_peers() -> None:
    """Add the peers of :mod:`bench.peers` to :data:`SYSTEMS` on first use."""
    if "pathway" in SYSTEMS:
        return
    from bench import peers

    for cls in (peers.FactorizedSystem, peers.ScipyRecount, peers.NetworkitRecount,
                peers.DuckDBDelta, peers.DuckDBRecount, peers.SparkDriverSystem,
                peers.PathwaySystem):
        SYSTEMS[cls.name] = cls


def system_class(name: str):
    """The class a factory builds, without building it (for ``unavailable``)."""
    _register_peers()
    f = SYSTEMS[name]
    return f if isinstance(f, type) else System


#: the reference of the "ratio to gpu_ivm" columns
REFERENCE = "gpu_ivm_eps_half"


def make(name: str) -> System:
    _register_peers()
    try:
        return SYSTEMS[name]()
    except KeyError:
        raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}") from None

