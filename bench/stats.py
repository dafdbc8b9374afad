"""Summaries of timing samples."""

from __future__ import annotations

import numpy as np


def summarize(seconds, updates=None) -> dict:
    """Total, mean, median, p99 and max of per-batch ``seconds``; with ``updates`` (per batch
    or a total) also updates per second = total updates / total seconds.

    p99 uses linear interpolation, so with few samples it sits close to the maximum.
    """
    s = np.asarray(seconds, dtype=float)
    if s.shape[0] == 0:
        return {"n": 0}
    total = float(s.sum())
    out = {
        "n": int(s.shape[0]),
        "total_s": total,
        "mean_s": total / s.shape[0],
        "median_s": float(np.median(s)),
        "p99_s": float(np.percentile(s, 99)),
        "max_s": float(s.max()),
        "min_s": float(s.min()),
    }
    if updates is not None:
        n_upd = int(np.sum(updates))
        out["updates"] = n_upd
        out["updates_per_s"] = n_upd / total if total > 0 else float("inf")
    return out


def evenly_spaced(n: int, k: int | None) -> set[int]:
    """``k`` indices spread evenly over ``range(n)`` (all of them when ``k`` is None or >= n)."""
    if k is None or k >= n:
        return set(range(n))
    if k <= 0:
        return set()
    return {int(round(x)) for x in np.linspace(0, n - 1, k)}
