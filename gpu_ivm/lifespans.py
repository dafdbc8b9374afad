"""Sliding-window time arithmetic: spans, steps, and lifespans of timestamped edges.

A sliding window of length ``window`` advanced by ``step`` from ``t0`` has step ends
``end_k = t0 + k·step`` (k = 1, 2, …). After step k the graph holds every edge with an
arrival at a time t with ``end_k − window ≤ t < end_k``. So an arrival at t is present exactly
at the steps ``first(t) ≤ k ≤ last(t)`` with

- ``first(t) = (t − t0) // step + 1`` (the first step whose end exceeds t) and
- ``last(t) = (t + window − t0) // step`` (the last step with ``end_k ≤ t + window``),

an empty range when the window is shorter than the gap to the next step end. An edge's
*lifespan* is the union of its arrivals' ranges, kept as disjoint closed step intervals
(:func:`merge_lifespans`: one sort and an adjacent compare, digest §8b.1). All arithmetic is
in int64 integers, checked against overflow.

Examples
--------
>>> parse_span("30d"), parse_span("12h"), parse_span("3600")
(2592000, 43200, 3600)
>>> import numpy as np
>>> t = np.array([0, 5, 10, 25])
>>> first_steps(t, 0, 10).tolist(), last_steps(t, 0, 15, 10).tolist()
([1, 1, 2, 3], [1, 2, 2, 4])
>>> merge_lifespans(np.array([7, 7, 7]), np.array([1, 2, 6]), np.array([3, 4, 6]))
(array([7, 7]), array([1, 6]), array([4, 6]))
"""

from __future__ import annotations

import re

import numpy as np

from .errors import InputError
from .kernels.stamp_kernels import segmented_cummax

UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_SPAN = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
INT64_MAX = (1 << 63) - 1


def parse_span(text, option: str = "span") -> int:
    """A positive span: a plain integer (in the stream's time unit) or an integer with a unit
    s, m, h, d or w (seconds, minutes, hours, days, weeks; for times in seconds)."""
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool):
        value = int(text)
    else:
        m = _SPAN.match(str(text))
        if m is None:
            raise InputError(f"{text!r} is not a span: use an integer (time units) or an "
                             "integer with s, m, h, d or w, e.g. 30d, 12h, 3600",
                             option=option)
        value = int(m.group(1)) * UNITS[m.group(2)]
    if value <= 0:
        raise InputError(f"{text!r}: a span must be positive", option=option)
    if value > INT64_MAX // 4:
        raise InputError(f"{text!r}: span too large", option=option)
    return value


def check_times(t: np.ndarray, t0: int, window: int, lo: int | None = None,
                hi: int | None = None) -> None:
    """Refuse times whose step arithmetic could overflow int64 (t + window, t − t0);
    ``lo`` / ``hi``: t's minimum and maximum when the caller has them."""
    if t.shape[0] == 0:
        return
    if lo is None or hi is None:
        hi, lo = int(t.max()), int(t.min())
    if hi > INT64_MAX - window or lo - t0 < -INT64_MAX // 2 or hi - t0 > INT64_MAX // 2:
        raise InputError(f"times {lo}..{hi} are too large for int64 step arithmetic with a "
                         f"window of {window}", column="time")


def first_steps(t: np.ndarray, t0: int, step: int) -> np.ndarray:
    """The first step whose end exceeds each time t (t ≥ t0)."""
    return (np.asarray(t, np.int64) - t0) // step + 1


def last_steps(t: np.ndarray, t0: int, window: int, step: int) -> np.ndarray:
    """The last step whose window still holds an arrival at t."""
    return (np.asarray(t, np.int64) + window - t0) // step


def num_steps(t_min: int, t_max: int, step: int) -> int:
    """Steps of a stream from t_min to t_max: the last is the first whose end exceeds t_max."""
    return (t_max - t_min) // step + 1


def merge_lifespans(keys: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Disjoint lifespans from (key, [start, end]) step intervals: per key, intervals that
    overlap or touch are merged. Returns (keys, starts, ends) sorted by key then start."""
    keys = np.asarray(keys, np.int64)
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    n = keys.shape[0]
    if n == 0:
        return keys, start, end
    order = np.lexsort((start, keys))
    k, s, e = keys[order], start[order], end[order]
    key_start = np.r_[True, k[1:] != k[:-1]]
    run = np.empty(n, np.int64)
    segmented_cummax(e, key_start, run)  # the furthest end so far within each key
    new = key_start | np.r_[True, s[1:] > run[:-1] + 1]
    idx = np.flatnonzero(new)
    last = np.r_[idx[1:], n] - 1
    return k[idx], s[idx], run[last]
