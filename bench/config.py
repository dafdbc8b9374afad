"""Benchmark profiles: the sizes each scenario runs at.

``full`` is the configuration the project's goals are stated for; ``quick`` is a smaller version
for a few minutes' check; ``tiny`` exercises the whole code path in seconds (the smoke test).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplayConfig:
    """Replay of a mixed insert/delete stream over an R-MAT graph (``workloads.mixed_stream``).

    ``batches`` maps batch size B to the number of batches. ``recount_timed`` maps B to how many
    batches the recount system times (evenly spaced; all batches are still applied to its edge
    set); ``None`` means every batch.
    """

    scale: int
    batches: dict[int, int]
    recount_timed: dict[int, int | None]
    seed: int = 1
    systems: tuple[str, ...] = ("gpu_ivm_eps_half", "gpu_ivm_eps_half_delta",
                                "gpu_ivm_eps_1_delta", "recount")
    warmup: bool = True  # run every system once on a small stream first (Numba compilation)


@dataclass(frozen=True)
class StorageConfig:
    """ZStore scaling: a base run of N tuples, then batches of ``batch`` sorted unique keys, half
    deletes of present keys and half inserts of absent keys, until more than ``N / 2`` keys have
    been inserted (or ``time_budget`` seconds of timed batches have passed)."""

    sizes: tuple[int, ...]
    batch: int = 1000
    time_budget: float = 300.0
    seed: int = 7
    repeats: int = 3  # the report shows the repeat with the median amortized cost
    warmup: bool = True


@dataclass(frozen=True)
class Profile:
    name: str
    replay: ReplayConfig
    storage: StorageConfig
    notes: tuple[str, ...] = field(default_factory=tuple)


FULL = Profile(
    name="full",
    replay=ReplayConfig(scale=18, batches={1000: 30, 10_000: 10, 100_000: 4},
                        recount_timed={1000: 5, 10_000: 5, 100_000: None}),
    storage=StorageConfig(sizes=(1 << 20, 1 << 24), time_budget=300.0),
)

QUICK = Profile(
    name="quick",
    replay=ReplayConfig(scale=16, batches={1000: 10, 10_000: 5, 100_000: 2},
                        recount_timed={1000: 5, 10_000: 5, 100_000: None}),
    storage=StorageConfig(sizes=(1 << 18, 1 << 22), time_budget=60.0),
)

TINY = Profile(
    name="tiny",
    replay=ReplayConfig(scale=8, batches={10: 3, 100: 3}, recount_timed={10: 2, 100: None},
                        warmup=False),
    storage=StorageConfig(sizes=(1 << 12, 1 << 13), batch=200, time_budget=30.0,
                          repeats=1, warmup=False),
)

PROFILES = {p.name: p for p in (TINY, QUICK, FULL)}
