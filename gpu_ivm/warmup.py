"""Load every compiled kernel once per process, so that no user batch pays for it.

Numba's CPU kernels are cached on disk (``cache=True``: compiled once per machine and Numba
version), but each is still loaded into the process at its first call, tens of milliseconds
per kernel and type signature, and a cold cache compiles (seconds). Without a warm-up that cost
fell on the first batches after a load. ``warm_up()`` runs a small deterministic workload
through both engines on the caller's backend, with the thresholds above which the parallel
variants run lowered to 1 and then raised above every size (so both the sequential and the
parallel variants are loaded), and with the caller's free-variable results maintained.
Engines call it at the start of ``load()``, so the first load of a process pays it once per
configuration; when it takes more than a second and has compiled something (a cold cache, or
the CUDA backend), a one-line notice goes to stderr while it runs. ``seconds`` records what
each warm-up took.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

NOTICE = "gpu_ivm: compiling kernels, first run only"
#: seconds a compiling warm-up runs before the notice (``$GPU_IVM_NOTICE_AFTER``, default 1)
NOTICE_AFTER_S = float(os.environ.get("GPU_IVM_NOTICE_AFTER", "1"))

#: seconds each warm-up took, by (backend, maintained results, track_changes)
seconds: dict[tuple, float] = {}
_started: set[tuple] = set()
_running: list[tuple] = []  # the workload's own load() calls must not start another warm-up

# The engines call warm_up() from load(), so this module does not import them: the engine
# modules register their classes here when imported (the package ``gpu_ivm`` imports both).
_engines: dict[str, type] = {}


def register_engine(kind: str, cls: type) -> None:
    """Record the engine class the workload runs for ``kind`` ("graph" or "relations");
    called by :mod:`gpu_ivm.graph_engine` and :mod:`gpu_ivm.relation_engine` when imported."""
    _engines[kind] = cls


def warm_up(backend=None, maintain=(), track_changes: bool = False) -> float:
    """Run the tiny workload once per process and configuration; return the seconds it took
    (0 when it had run before).

    >>> _ = warm_up("cpu")
    >>> warm_up("cpu")
    0.0
    """
    from .backend import get_backend

    be = get_backend(backend)  # a Backend object is used as given (never re-resolved by name)
    name = be.name
    key = (name, tuple(sorted(maintain or ())), bool(track_changes))
    if key in _started or _running:
        return 0.0
    _started.add(key)
    if name == "cuda" and _simulated():
        return 0.0  # the CUDA simulator runs kernels as Python: nothing to compile
    _running.append(key)
    t = time.perf_counter()
    done = threading.Event()
    watcher = threading.Thread(target=_notice, args=(name, done), daemon=True)
    watcher.start()
    try:
        _with_thresholds(1, be, key[1], key[2])  # the parallel variants
        _with_thresholds(1 << 62, be, key[1], key[2])  # the sequential ones
        _compact_workload(be, key[1])
    finally:
        done.set()
        _running.clear()
    seconds[key] = time.perf_counter() - t
    return seconds[key]


def _simulated() -> bool:
    from numba import config

    return bool(config.ENABLE_CUDASIM)


def _notice(backend: str, done: threading.Event) -> None:
    """Print the notice once the warm-up has run ``NOTICE_AFTER_S`` and has compiled a CPU
    kernel (a slow warm-up on a busy machine that only loads cached code is no compilation);
    the CUDA kernels are always compiled."""
    if done.wait(NOTICE_AFTER_S):
        return
    while not done.is_set():
        if backend != "cpu" or _cache_misses():
            print(NOTICE, file=sys.stderr, flush=True)
            return
        done.wait(0.25)


def _cache_misses() -> int:
    """Signatures the CPU kernels of this process compiled instead of loading from the cache."""
    from numba.core.registry import CPUDispatcher

    misses = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("gpu_ivm"):
            continue
        for v in list(vars(mod).values()):
            if isinstance(v, CPUDispatcher):
                misses += sum(v.stats.cache_misses.values())
    return misses


def _with_thresholds(value: int, backend, maintain, track_changes: bool) -> None:
    from . import compact, engine
    from .kernels import adjacency, delta_kernels, graph_listing, graph_local

    saved = (delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN, adjacency.SNAPSHOT_IDS_PER_TUPLE,
             compact.COMPACT_MAX, graph_local.PAR_MIN, graph_listing.PAR_MIN)
    delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN, graph_local.PAR_MIN = value, value, value
    graph_listing.PAR_MIN = value
    compact.COMPACT_MAX = 0  # the workload's graphs are small: in the stores all the same
    # the parallel pass runs the workload's large batches through the stores' grouped
    # kernels, the sequential one (default threshold) through the copy of the graph
    # (kernels/adjacency.py), so the kernels of both paths are loaded
    if value == 1:
        adjacency.SNAPSHOT_IDS_PER_TUPLE = 0
    try:
        _workload(backend, list(maintain) or None, track_changes)
    finally:
        (delta_kernels.PAR_MIN, engine.PAR_EMIT_MIN, adjacency.SNAPSHOT_IDS_PER_TUPLE,
         compact.COMPACT_MAX, graph_local.PAR_MIN, graph_listing.PAR_MIN) = saved


def _compact_workload(backend, maintain) -> None:
    """The compact form's kernel (:mod:`gpu_ivm.compact`), where engines of this
    configuration take it: a small graph's batches, with a new vertex, a delete and a
    conflict (which goes the general way)."""
    from . import compact

    if not compact.COMPACT_MAX or backend.name != "cpu" or set(maintain) - {"count"}:
        return
    ring = np.arange(40)
    g = _engines["graph"](backend=backend, on_conflict="ignore")
    g.load((ring, (ring + 1) % ring.shape[0]))
    g.apply({"src": np.array([0, 1, 50]), "dst": np.array([2, 3, 51]),
             "sign": np.ones(3, np.int64)})
    g.apply({"src": np.array([0, 5]), "dst": np.array([2, 9]), "sign": -np.ones(2, np.int64)})


def _workload(backend, maintain, track_changes: bool) -> None:
    GraphEngine, RelationEngine = _engines["graph"], _engines["relations"]
    rng = np.random.default_rng(12345)
    n = 64
    src = rng.integers(0, n, 900)
    dst = rng.integers(0, n, 900)
    src[:300] = rng.integers(0, 3, 300)  # hubs, so heavy keys and views exist
    kw = {"backend": backend, "adaptive": False, "maintain": maintain,
          "track_changes": track_changes}
    for directed in (False, True):
        for eps in ("1/3", "1"):
            g = GraphEngine(directed=directed, epsilon=eps, on_conflict="ignore", **kw)
            g.load((src[:400], dst[:400]))
            g.apply({"src": src[400:], "dst": dst[400:], "sign": np.ones(500, np.int64)})
            g.apply({"src": src[:700], "dst": dst[:700], "sign": -np.ones(700, np.int64)})
            g.apply({"src": src[:3], "dst": dst[:3], "sign": np.ones(3, np.int64)})
            # new vertices, one of them only in an ignored row: its id is dropped, the others
            # renumbered densely (batch_prep.used_new_ids / renumber)
            g.apply({"src": np.array([n + 2, n]), "dst": np.array([n + 3, n + 1]),
                     "sign": np.array([-1, 1])})
            if "triangles" in getattr(g.fq, "families", ()) and getattr(g.fq, "graph_local",
                                                                         False):
                list(g.fq.triangle_parts())  # listed off the stores when read: its kernels,
                g.triangles_of(src[:3])  # and the sort of the rows through some vertices
            if track_changes and g.fq is not None:
                g.last_changes()  # the change rows' sort
    # an engine that starts empty (no load): its first batch builds a run big enough for a
    # directory and rows long enough for bitmaps, which a loaded engine builds in load()
    a, b = np.triu_indices(128, 1)
    keep = rng.random(a.shape[0]) < 0.8  # about 6,500 distinct edges: degrees near 100
    g = GraphEngine(epsilon="1", **kw)
    g.apply({"src": a[keep], "dst": b[keep], "sign": np.ones(int(keep.sum()), np.int64)})
    # the stores' grouped pair weights (more tuples than light_delta takes, fewer ids per
    # tuple than the copy of the graph needs): on the calling thread in the sequential pass
    # (fewer pairs than PAR_MIN), in chunks in the parallel one
    ring = np.arange(3000)
    g = GraphEngine(epsilon="1", on_conflict="ignore", **kw)
    g.load((ring, (ring + 1) % ring.shape[0]))
    g.apply({"src": rng.integers(0, 3000, 300), "dst": rng.integers(0, 3000, 300),
             "sign": np.ones(300, np.int64)})
    # the adaptive policy's own kernel (the grouped work estimate, measured after a batch)
    g = GraphEngine(epsilon="1", on_conflict="ignore", **{**kw, "adaptive": True})
    g.load((src[:400], dst[:400]))
    g.apply({"src": src[400:], "dst": dst[400:], "sign": np.ones(500, np.int64)})
    # epsilon="auto" watches its light keys (phase_kernels.watch_lights)
    g = GraphEngine(epsilon="auto", on_conflict="ignore", **kw)
    g.load((np.arange(n), (np.arange(n) + 1) % n))
    g.apply({"src": src[400:], "dst": dst[400:], "sign": np.ones(500, np.int64)})
    r = RelationEngine(epsilon="1/3", **kw)
    rel = np.array(["R", "S", "T"])[rng.integers(0, 3, 900)]
    r.apply({"rel": rel, "src": src, "dst": dst, "mult": np.ones(900, np.int64)})
    r.apply({"rel": rel[:5], "src": src[:5], "dst": dst[:5], "mult": -np.ones(5, np.int64)})
