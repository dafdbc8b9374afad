"""Offline sliding windows: the whole log at once, one static evaluation with lifespans.

When the whole event log is known (``gpu-ivm replay --events … --offline``), every edge's
lifespan in steps is extracted (digest ``paper-insert-only-vs-insert-delete.md`` §8b.1: the
sort and adjacent compare of :func:`gpu_ivm.lifespans.merge_lifespans`, done here by
:func:`gpu_ivm.kernels.stamp_kernels.lifespan_segments` with a hash of the edges and two
counting sorts, in time linear in the events), and the triangles of the *union* graph are
enumerated once (degree-ordered, each triangle once); a triangle's alive steps are the common
intervals of its three edges' lifespans, added to a difference array whose prefix sums are the
per-step counts (the pragmatic Q̄ evaluator of §8b.2: point join with interval annotations).
It gives the same counts as the online :class:`gpu_ivm.sliding_window.SlidingWindow`.

Examples
--------
>>> r = offline_counts([1, 2, 3, 1], [2, 3, 1, 2], [0, 1, 6, 12], window=10, step=5)
>>> r.triangles.tolist(), r.edges.tolist(), r.ends.tolist()
([0, 1, 0], [2, 3, 2], [5, 10, 15])
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .encoding import IdEncoder, unpack
from .errors import InputError
from .kernels import stamp_kernels as sk
from .lifespans import check_times, first_steps, last_steps, num_steps, parse_span


@dataclass
class WindowCounts:
    """Per-step results of an offline window evaluation (step k = index + 1)."""

    ends: np.ndarray  # end_k
    triangles: np.ndarray
    edges: np.ndarray
    arrivals: np.ndarray
    seconds: float
    segments: int  # lifespan intervals after merging
    union_edges: int


def _oriented(keys: np.ndarray, n: int):
    """Degree-ordered CSR of the undirected edges ``keys`` (u < v packed, unique): vertices
    relabelled by rank (degree, id), each edge stored once from lower to higher rank, rows
    sorted; ``edge_of`` maps every entry back to its index in ``keys``."""
    a, b = unpack(keys)
    deg = np.bincount(np.concatenate([a, b]), minlength=n)
    order = np.lexsort((np.arange(n), deg))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    ra, rb = rank[a], rank[b]
    lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
    o = np.lexsort((hi, lo))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(lo, minlength=n), out=indptr[1:])
    return indptr, np.ascontiguousarray(hi[o]), np.ascontiguousarray(o.astype(np.int64))


def offline_counts(src, dst, t, *, window, step, start: int | None = None) -> WindowCounts:
    """Per-step triangle and edge counts of a sliding window over a whole event log.

    ``src``, ``dst``: endpoint keys (integers or strings); ``t``: int64 times; ``window``,
    ``step``: spans (:func:`gpu_ivm.lifespans.parse_span`); ``start``: t0 (default min t).
    Steps k = 1..K end at t0 + k·step, the last being the first whose end exceeds max t.
    """
    t_begin = time.perf_counter()
    window = parse_span(window, "window")
    step = parse_span(step, "step")
    src, dst = np.asarray(src), np.asarray(dst)
    t = np.asarray(t, np.int64)
    if t.shape[0] == 0:
        raise InputError("no events", column="time")
    t0 = int(t.min()) if start is None else int(start)
    if int(t.min()) < t0:
        raise InputError(f"an event at {int(t.min())} is before the start {t0}", column="time",
                         row=int(np.argmin(t)))
    check_times(t, t0, window)
    K = num_steps(t0, int(t.max()), step)
    first = first_steps(t, t0, step)
    arrivals = np.bincount(first, minlength=K + 1)[1:K + 1]
    last = np.minimum(last_steps(t, t0, window, step), K)
    keep = (src != dst) & (last >= first)
    m = int(keep.sum())
    ids, new = IdEncoder().plan(np.concatenate([src[keep], dst[keep]]), "src")  # dense ids
    a, b = ids[:m], ids[m:]
    ukeys, seg_ptr, sstart, send, ediff = sk.lifespan_segments(
        np.minimum(a, b), np.maximum(a, b), first[keep], last[keep], K)
    diff = np.zeros(K + 2, np.int64)
    n = max(int(new.shape[0]), 1)
    if ukeys.shape[0]:
        indptr, indices, edge_of = _oriented(ukeys, n)
        sk.lifespan_triangles(indptr, indices, edge_of, seg_ptr, sstart, send, diff)
    return WindowCounts(ends=t0 + np.arange(1, K + 1, dtype=np.int64) * step,
                        triangles=np.cumsum(diff)[1:K + 1], edges=np.cumsum(ediff)[1:K + 1],
                        arrivals=arrivals, seconds=time.perf_counter() - t_begin,
                        segments=int(sstart.shape[0]), union_edges=int(ukeys.shape[0]))
