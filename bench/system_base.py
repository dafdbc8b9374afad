"""The interface every system under test implements (:class:`System`) and the recount-per-batch
base class (:class:`RecountBase`); :mod:`bench.systems` registers the systems, :mod:`bench.peers`
adds the peers. Both import this module, so neither needs the other's.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import numpy as np

from bench.edgeset import EdgeSet

__all__ = ["RecountBase", "System"]


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

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this system cannot run here (a missing package), or None."""
        return None

    #: True for systems that run a whole replay at once (:meth:`run_stream`), e.g. in a
    #: subprocess
    external: bool = False


class RecountBase(System):
    """Recount from scratch after every batch.

    The edge set is a :class:`bench.edgeset.EdgeSet` (sorted packed keys ``min << 32 | max``;
    a batch is applied with ``np.searchsorted`` + ``np.delete`` / ``np.insert``); then
    :meth:`_recount` counts the whole current edge set. Both parts are timed. ``skip`` only
    maintains the edge set; the count is then computed lazily.
    """

    family = "baseline"
    sampled = True

    def __init__(self) -> None:
        self.edges = EdgeSet()
        self._count: int | None = None

    @abstractmethod
    def _recount(self) -> int:
        """Count the triangles of ``self.edges``."""

    def load(self, base_src, base_dst) -> float:
        t = time.perf_counter()
        self.edges = EdgeSet(base_src, base_dst)
        self._count = self._recount()
        return time.perf_counter() - t

    def _update(self, batch) -> None:
        self.edges.update(batch)
        self._count = None

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
        self.edges = EdgeSet()
