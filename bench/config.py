"""Benchmark profiles: the sizes each scenario runs at.

``full`` is the configuration the project's goals are stated for; ``quick`` is a smaller version
for a few minutes' check; ``tiny`` exercises the whole code path in seconds (the smoke test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GPU_IVM = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_half_delta",
           "gpu_ivm_eps_0_delta", "gpu_ivm_eps_1_delta", "gpu_ivm_factorized")
RECOUNTS = ("recount", "recount_scipy", "recount_networkit", "duckdb_recount")
PEERS = ("duckdb_delta", "pathway")
ALL = GPU_IVM + RECOUNTS + PEERS


@dataclass(frozen=True)
class ReplayConfig:
    """Replay of a mixed insert/delete stream over an R-MAT graph (``workloads.mixed_stream``).

    ``batches`` maps batch size B to the number of batches. ``recount_timed`` maps B to how many
    batches the recounting systems time (evenly spaced; all batches are still applied to their
    edge sets); ``None`` means every batch. ``cap_s``: per-(system, B) time cap.
    """

    scale: int
    batches: dict[int, int]
    recount_timed: dict[int, int | None]
    seed: int = 1
    systems: tuple[str, ...] = ALL
    warmup: bool = True  # run every system once on a small stream first (Numba compilation)
    cap_s: float = 180.0
    #: more R-MAT scales at some batch sizes: {scale: {B: n_batches}} (e.g. the B = 10⁵ goal
    #: at scale 16 in the full profile)
    also: dict[int, dict[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ScalingConfig:
    """Throughput vs graph size: R-MAT at each scale, one batch size. A (system, scale) that
    the replay scenario of the same run already measured at that B is taken from it."""

    scales: tuple[int, ...]
    batch_size: int = 1000
    n_batches: int = 10
    recount_timed: int = 3
    systems: tuple[str, ...] = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta",
                                "recount", "recount_networkit", "duckdb_delta", "pathway")
    seed: int = 1
    cap_s: float = 180.0
    #: skip a scale when gpu_ivm's peak memory, extrapolated from the previous scale, would
    #: exceed this share of the available memory
    mem_share: float = 0.8


@dataclass(frozen=True)
class WindowConfig:
    """Sliding windows over the SNAP temporal streams."""

    datasets: tuple[str, ...] = ("CollegeMsg", "sx-mathoverflow")
    window_days: int = 30
    step_days: int = 1
    fixed_batch: int = 1000  # the variant with a fixed number of stream changes per batch
    max_batches: int | None = None  # cut long streams (None: the whole stream)
    # batches timed per sampled peer (evenly spaced; None: every batch, as the engines are)
    recount_timed: int | None = 20
    systems: tuple[str, ...] = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta",
                                "gpu_ivm_factorized", "recount", "recount_scipy",
                                "recount_networkit", "duckdb_delta", "duckdb_recount",
                                "pathway")
    cap_s: float = 180.0


@dataclass(frozen=True)
class StaticConfig:
    """Static SNAP graphs: load, delete a random half in batches, re-insert it."""

    datasets: tuple[str, ...] = ("facebook_combined", "ca-GrQc", "ca-AstroPh", "email-Eu-core")
    batch_size: int = 1000
    seed: int = 5
    recount_timed: int = 6
    systems: tuple[str, ...] = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta",
                                "gpu_ivm_factorized", "recount", "recount_scipy",
                                "recount_networkit", "duckdb_delta", "duckdb_recount",
                                "pathway")
    cap_s: float = 180.0


@dataclass(frozen=True)
class SparkConfig:
    """gpu_ivm through the Spark glue vs the plain engine, same R-MAT workload."""

    scale: int = 16
    batches: dict[int, int] = field(default_factory=lambda: {1000: 10, 10_000: 5})
    seed: int = 1
    cap_s: float = 300.0
    enabled: bool = True  # the tiny profile (smoke test) does not start Spark


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
class QueriesConfig:
    """Free-variable queries: update throughput with Δ1, Δ2 or Δ3 maintained next to the count,
    versus the count alone, and enumeration throughput, on one R-MAT mixed stream per ε."""

    scale: int = 16
    batch_size: int = 1000
    n_batches: int = 10
    epsilons: tuple[str, ...] = ("0", "1/2", "1")
    maintain: tuple[str, ...] = ("count", "vertex_counts", "edge_counts", "triangles")
    seed: int = 1
    cap_s: float = 300.0


@dataclass(frozen=True)
class CelebrityConfig:
    """Celebrity churn (``workloads.celebrity_churn``): R-MAT plus ``n_celebrities`` vertices
    of degree ``celebrity_degree``; each batch toggles ``batch_size`` celebrity pairs."""

    scale: int = 18
    n_celebrities: int = 64
    celebrity_degree: int = 40_000
    batch_size: int = 1000
    n_batches: int = 30
    seed: int = 1
    recount_timed: int = 3
    systems: tuple[str, ...] = ALL
    cap_s: float = 180.0


@dataclass(frozen=True)
class ModesConfig:
    """Insert-only vs general on the growing SNAP graphs, and the known-lifespan window vs
    the general engine, a recount and the offline evaluator (``bench.modes``)."""

    datasets: tuple[str, ...] = ("CollegeMsg", "email-Eu-core-temporal", "sx-mathoverflow")
    repeats: int = 3
    window_days: int = 30
    step_days: int = 1


@dataclass(frozen=True)
class CqConfig:
    """The query engine: flatness of a CQAP_0 query as N grows, and three queries against
    DuckDB's delta SQL (``bench.cq_bench``)."""

    sizes: tuple[int, ...] = (100_000, 1_600_000)
    peer_size: int = 100_000
    peer_queries: tuple[str, ...] = ("2-path", "star", "4-cycle")
    batch_size: int = 1000
    n_batches: int = 30
    epsilons: tuple[str, ...] = ("0", "1/4", "1/2", "3/4", "1")  # the ε table (skewed B)
    eps_batches: int = 10


@dataclass(frozen=True)
class PairedConfig:
    """The in-process engines run together, batch by batch (``bench.scenarios.paired``): the
    R-MAT streams ``rmat`` = {scale: {B: n_batches}} (replay's seed), and with ``celebrity`` /
    ``windows`` the profile's celebrity churn and SNAP windows."""

    rmat: dict[int, dict[int, int]] = field(default_factory=lambda: {16: {1000: 30}})
    celebrity: bool = True
    windows: bool = True
    systems: tuple[str, ...] = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta")
    cap_s: float = 300.0


@dataclass(frozen=True)
class Profile:
    name: str
    replay: ReplayConfig
    storage: StorageConfig
    scaling: ScalingConfig
    windows: WindowConfig
    static: StaticConfig
    spark: SparkConfig
    queries: QueriesConfig = field(default_factory=QueriesConfig)
    celebrity: CelebrityConfig = field(default_factory=CelebrityConfig)
    modes: ModesConfig = field(default_factory=ModesConfig)
    cq: CqConfig = field(default_factory=CqConfig)
    paired: PairedConfig = field(default_factory=PairedConfig)
    notes: tuple[str, ...] = field(default_factory=tuple)


FULL = Profile(
    name="full",
    replay=ReplayConfig(scale=18, batches={100: 30, 1000: 30, 10_000: 10, 100_000: 4},
                        recount_timed={100: 3, 1000: 3, 10_000: 3, 100_000: 2},
                        also={16: {100_000: 4}}),
    scaling=ScalingConfig(scales=(14, 16, 18, 20)),
    windows=WindowConfig(),
    static=StaticConfig(),
    spark=SparkConfig(scale=16),
    storage=StorageConfig(sizes=(1 << 20, 1 << 24), time_budget=300.0),
)

QUICK = Profile(
    name="quick",
    replay=ReplayConfig(scale=16, batches={1000: 10, 10_000: 5, 100_000: 2},
                        recount_timed={1000: 2, 10_000: 2, 100_000: 1}, cap_s=60.0,
                        systems=("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_half_delta",
                                 "gpu_ivm_eps_0_delta", "gpu_ivm_eps_1_delta",
                                 "gpu_ivm_factorized", "recount", "recount_scipy",
                                 "recount_networkit", "duckdb_recount", "duckdb_delta")),
    scaling=ScalingConfig(scales=(14, 16), n_batches=5, recount_timed=2, cap_s=60.0),
    windows=WindowConfig(datasets=("CollegeMsg",), recount_timed=5, cap_s=60.0),
    static=StaticConfig(datasets=("facebook_combined", "ca-GrQc"), batch_size=5000,
                        recount_timed=3, cap_s=60.0),
    spark=SparkConfig(scale=14, batches={1000: 5, 10_000: 3}, cap_s=120.0),
    storage=StorageConfig(sizes=(1 << 18, 1 << 22), time_budget=60.0, repeats=1),
    queries=QueriesConfig(scale=14, n_batches=6, cap_s=120.0),
    celebrity=CelebrityConfig(scale=16, n_batches=10, recount_timed=2, cap_s=60.0,
                              systems=tuple(x for x in ALL if x != "pathway")),
    modes=ModesConfig(datasets=("CollegeMsg",), repeats=1),
    cq=CqConfig(sizes=(20_000, 320_000), peer_size=20_000, n_batches=5),
    paired=PairedConfig(rmat={16: {1000: 10, 100_000: 2}}),
)

TINY = Profile(
    name="tiny",
    replay=ReplayConfig(scale=8, batches={10: 3, 100: 3}, recount_timed={10: 2, 100: None},
                        warmup=False, cap_s=60.0,
                        systems=GPU_IVM + ("recount", "recount_scipy", "recount_networkit",
                                           "duckdb_recount", "duckdb_delta")),
    scaling=ScalingConfig(scales=(7, 8), batch_size=100, n_batches=2, recount_timed=1,
                          systems=("gpu_ivm_eps_half", "recount"), cap_s=60.0),
    windows=WindowConfig(datasets=("CollegeMsg",), max_batches=12, fixed_batch=200,
                         recount_timed=2, cap_s=60.0,
                         systems=("gpu_ivm_eps_half", "recount", "duckdb_delta")),
    static=StaticConfig(datasets=("ca-GrQc",), batch_size=4000, recount_timed=1, cap_s=60.0,
                        systems=("gpu_ivm_eps_half", "gpu_ivm_factorized", "recount")),
    spark=SparkConfig(scale=8, batches={100: 2}, cap_s=60.0, enabled=False),
    storage=StorageConfig(sizes=(1 << 12, 1 << 13), batch=200, time_budget=30.0,
                          repeats=1, warmup=False),
    queries=QueriesConfig(scale=8, batch_size=50, n_batches=3, cap_s=60.0),
    celebrity=CelebrityConfig(scale=8, n_celebrities=8, celebrity_degree=200, batch_size=20,
                              n_batches=3, recount_timed=2, cap_s=60.0,
                              systems=GPU_IVM + ("recount", "recount_scipy",
                                                 "recount_networkit", "duckdb_recount",
                                                 "duckdb_delta")),
    modes=ModesConfig(datasets=("CollegeMsg",), repeats=1),
    cq=CqConfig(sizes=(2_000, 32_000), peer_size=2_000, batch_size=100, n_batches=2,
                epsilons=("0", "1/2", "1"), eps_batches=2),
    paired=PairedConfig(rmat={8: {10: 3, 100: 3}}, cap_s=60.0),
)

KERNEL_SYSTEMS = ("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta", "recount",
                  "recount_networkit", "duckdb_delta")

#: the count kernel's goals (issue 14) in one run of ~15 minutes: R-MAT 16 and 18 at B = 10³
#: and 10⁵, scaling 16 to 20, celebrity churn and the SNAP windows, against the project's
#: recount, NetworKit and DuckDB's delta queries. Pathway, DuckDB's recount, scipy and the
#: factorized form are left to the full profile (at these sizes they run out of memory or
#: time, or are far behind: see its tables).
KERNELS = Profile(
    name="kernels",
    replay=ReplayConfig(scale=18, batches={1000: 30, 100_000: 4},
                        recount_timed={1000: 3, 100_000: 2},
                        also={16: {1000: 30, 100_000: 4}}, systems=KERNEL_SYSTEMS),
    # 30 batches at every scale, as replay's scales 16 and 18 that scaling takes over: the
    # goal compares means, and a stream of 10 at scale 20 weighed its first batches (cold
    # caches after the load: 8 ms against 3.5-4 in the steady state) three times as much
    scaling=ScalingConfig(scales=(16, 18, 20), n_batches=30,
                          systems=("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta",
                                   "recount")),
    # the recount timed on every batch: its goal compares means over the same batches (on
    # CollegeMsg's daily windows 20 sampled ones, each after untimed batches, gave 0.361 ms a
    # batch, every batch of the next run 0.249)
    windows=WindowConfig(systems=("gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta",
                                  "recount"), recount_timed=None),
    static=StaticConfig(systems=("gpu_ivm_auto", "recount")),
    spark=SparkConfig(enabled=False),
    storage=StorageConfig(sizes=(1 << 20,), time_budget=30.0, repeats=1),
    celebrity=CelebrityConfig(systems=KERNEL_SYSTEMS),
    paired=PairedConfig(rmat={16: {1000: 30, 100_000: 4}, 18: {1000: 30, 100_000: 4}}),
)

PROFILES = {p.name: p for p in (TINY, QUICK, FULL, KERNELS)}
