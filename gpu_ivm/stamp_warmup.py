"""Load the insert-only and sliding-window kernels once per process (see :mod:`gpu_ivm.warmup`).

Numba's compiled kernels are cached on disk but loaded into the process at their first call;
``warm_up()`` runs a tiny workload through the insert-only engine (one-thread and all-thread
variants, the listing of ``track_changes``, a batch with conflicts), a sliding window and the
offline evaluator, so that no user batch or step pays for it.
``InsertOnlyGraphEngine.load()``, the first ``SlidingWindow`` of a process and
``gpu-ivm replay --events`` call it.

>>> warm_up()  # a no-op after the first call
"""

from __future__ import annotations

_done = False
# SlidingWindow() calls warm_up(), so this module does not import it: gpu_ivm.sliding_window
# registers the class here when imported (the package gpu_ivm imports it)
_window: list[type] = []


def register_window(cls: type) -> None:
    """Record the sliding-window class the workload runs (called by its module)."""
    _window[:] = [cls]


def warm_up() -> None:
    """Run the tiny workload once per process (no-op afterwards)."""
    global _done
    if _done:
        return
    _done = True
    from .graph_engine import GraphEngine
    from .kernels import stamp_kernels
    from .window_offline import offline_counts

    saved = stamp_kernels.PAR_MIN
    try:
        for par_min, track in ((0, False), (1 << 62, False), (1 << 62, True)):
            stamp_kernels.PAR_MIN = par_min
            g = GraphEngine(mode="insert_only", track_changes=track, on_conflict="ignore")
            g.apply({"src": [1, 2, 3, 1], "dst": [2, 3, 1, 4], "sign": [1, 1, 1, 1]})
            # a stored edge and a repeated one: the conflict path (rows skipped)
            g.apply({"src": [2, 4, 5, 5], "dst": [1, 3, 2, 2], "sign": [1, 1, 1, 1]})
    finally:
        stamp_kernels.PAR_MIN = saved
    SlidingWindow = _window[0]
    sw = SlidingWindow(window=4, step=2, start=0, backend="cpu")
    sw.push({"src": [1, 2, 3, 1, 2, 4, 1], "dst": [2, 3, 1, 2, 3, 5, 4],
             "time": [0, 1, 1, 3, 6, 6, 7]})  # births, an extension, expiries, store merges
    sw.close()
    sw._rebuild_adjacency()  # what a compaction or a restore runs
    offline_counts([1, 2, 3], [2, 3, 1], [0, 1, 2], window=4, step=2)
