"""Triangles of a sliding window over timestamped edges, with expiries scheduled at arrival.

:class:`SlidingWindow` keeps the triangle count of the undirected graph of every edge that
arrived in the last ``window`` time units, reported at step ends ``end_k = t0 + k·step``
(see :mod:`gpu_ivm.lifespans`). The user pushes arrivals only; the engine knows when each edge
expires, so no delete is ever fed in (digest ``paper-insert-only-vs-insert-delete.md`` §8b.4:
a known lifespan makes the lifespan side of the problem insert-only).

How a step k is processed (the known-lifespan method):

- Each stored edge carries its true ``end`` (the last step it is alive), a *calendar end*
  (the end its triangles' removals were scheduled with) and a birth *stamp*. An arrival makes
  the edge alive through ``last(t)``.
- **Expiry costs nothing.** When a triangle forms, the step it dies at is known:
  ``min(calendar ends of its three edges) + 1``. Its removal is scheduled there in a ring
  calendar (length ``window // step + 3``), which step k adds to the count.
- **Births** (an edge that is not alive at k arrives): the ordered delta rule of the
  insert-only mode on birth stamps; every new triangle alive at k is counted once, by its
  youngest edge, and its removal scheduled.
- **Extensions** (an alive edge arrives again) only move the edge's true end. The edge is
  revisited once, at the step its calendar end runs out: if it was extended meanwhile, the
  triangles alive through it are enumerated (once each, by the last revisited edge) and their
  scheduled removal moved from min(old calendar ends) + 1 to min(new ones) + 1; else it
  expires. An edge that keeps arriving thus costs one enumeration per window length, not one
  per arrival.
- Edges that expired stay stored (no deletion from the adjacency,
  :mod:`gpu_ivm.kernels.window_adj`: one unsorted row per vertex, intersected through marks)
  until they outnumber the live ones; then the state is rebuilt from the live edges.

So a step costs O(arrivals × the smaller neighbourhood) and nothing for the edges leaving the
window, where the general engine processes every expiry as a delete with view maintenance.
Undirected simple graph: self-loops are dropped, repeated arrivals only extend a lifespan.

Examples
--------
>>> sw = SlidingWindow(window=10, step=5, start=0)
>>> reps = sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]})
>>> [(r.step, r.end, r.triangles) for r in reps]   # step 1 ends at 5: edge 3-1 not yet
[(1, 5, 0)]
>>> reps = sw.push({"src": [1], "dst": [2], "time": [12]}) + sw.close()
>>> [(r.step, r.triangles, r.edges) for r in reps]   # 1-2 and 2-3 arrived at 0, 1: gone at 15
[(2, 1, 3), (3, 0, 2)]
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from . import io, stamp_warmup, static
from .backend import Backend, get_backend
from .encoding import IdEncoder, pack, unpack
from .errors import InputError
from .kernels import hashmap
from .kernels import stamp_kernels as sk
from .kernels import window_adj as wa
from .kernels import window_step as wk
from .lifespans import check_times, last_steps, parse_span
from .window_changes import WindowChanges

COMPACT_MIN = 4096  # stored edges below which expired ones are never compacted away
# per edge id: true last alive step, calendar end (the one the triangle removals were
# scheduled with), calendar end before this step's revisit, revisit order, birth stamp,
# endpoints (u < v), due-list link, last step that counted it extended, scratch (the revisits),
# scratch (the expiries)
_PER_EDGE = ("_end", "_cend", "_prev", "_ext", "_stamp", "_eu", "_ev", "_next", "_mark",
             "_scratch", "_gone")


@dataclass
class WindowStep:
    """What one step did. ``to_dict()`` is the CLI's JSON line (``batch`` = step − 1)."""

    step: int
    end: int
    triangles: int
    delta: int
    edges: int
    arrivals: int
    births: int
    extensions: int
    expired: int
    seconds: float

    def to_dict(self) -> dict:
        return {"batch": self.step - 1, **asdict(self)}


class SlidingWindow:
    """Triangle count of a sliding time window, maintained with known lifespans.

    Parameters
    ----------
    window, step : int or str
        Window length and step, in the stream's time unit (an integer) or as spans like
        ``"30d"``, ``"12h"`` for times in seconds (:func:`gpu_ivm.lifespans.parse_span`).
    start : int, optional
        t0, the start of step 1; default: the first pushed arrival's time.
    track_changes : bool
        Also list each step's result changes: the triangles that appear and disappear and
        the per-vertex and per-edge counts that change (:meth:`last_changes`; costs about
        what the births cost again, see :mod:`gpu_ivm.window_changes`).
    backend : str or Backend, optional
        ``"cpu"``, ``"cuda"`` or ``"auto"`` (:func:`gpu_ivm.backend.get_backend`); default
        from ``GPU_IVM_BACKEND`` or ``"cpu"``. ``"cuda"`` (or ``"auto"`` with a usable
        device) makes the window a :class:`gpu_ivm.window_device.DeviceSlidingWindow`, whose
        steps run on the CUDA kernels with the state on the device (same results, step by
        step); without a usable device it raises
        :class:`~gpu_ivm.errors.BackendUnavailableError` naming the problem.

    Arrivals are pushed in batches (:meth:`push`) whose times may be in any order but not
    before the end of the last closed step; steps close as soon as an arrival at or after
    their end is seen, and :meth:`close` closes the step holding the latest arrival.

    >>> sw = SlidingWindow(window=10, step=5, start=0, backend="cpu")
    >>> type(sw).__name__, sw.backend.name
    ('SlidingWindow', 'cpu')
    """

    _ON_DEVICE = False  # True on the subclass whose steps run on the cuda backend

    def __new__(cls, *args: Any, **kwargs: Any) -> SlidingWindow:
        # SlidingWindow(..., backend="cuda") is a DeviceSlidingWindow (same parameters); a
        # bare cls.__new__(cls) (copy, pickle) keeps the class
        if cls is SlidingWindow and (args or kwargs) \
                and get_backend(kwargs.get("backend")).name == "cuda":
            cls = _device_window()
        return super().__new__(cls)

    def __init__(self, window: int | str, step: int | str, *, start: int | None = None,
                 track_changes: bool = False, backend: str | Backend | None = None):
        self.backend = get_backend(backend)
        if self.backend.name != "cpu" and not self._ON_DEVICE:
            raise InputError(f"{type(self).__name__} runs on the cpu backend only",
                             column="backend")
        self.window = parse_span(window, "window")
        self.step_len = parse_span(step, "step")
        self.t0 = None if start is None else int(start)
        self.encoder = IdEncoder()
        self.k = 0  # steps closed so far
        self.count_ = 0
        self.num_edges = 0  # edges alive at step k
        self._ring = self.window // self.step_len + 3
        self._cal = np.zeros(self._ring, np.int64)  # triangle count changes per future step
        # per future step (ring slot): the edges whose calendar end runs out there, as a
        # linked list (head per slot, next per edge id)
        self._due_head = np.full(self._ring, -1, np.int64)
        self._cap = 0
        self._n_eids = 0
        self._clear_per_edge()
        self._htk, self._htv = wk.empty_table(0)  # edge key (u < v) -> id
        # the adjacency (kernels/window_adj.py): per vertex id, a row's place, length and room
        # in the slab (neighbour, edge id + 1); entries used, and left behind by row moves
        self._aoff = self._aln = self._acap = np.zeros(0, np.int64)
        self._anbr = self._aval = np.zeros(0, np.int64)
        self._aused = self._agarbage = 0
        self._marks = np.zeros(0, np.int64)  # zeros, one per vertex id (common_pairs)
        self._seq = 0
        self._ext_seq = 0
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._t_max: int | None = None
        self.track_changes = bool(track_changes)
        self._changes = WindowChanges() if self.track_changes else None
        from .stamp_warmup import warm_up

        warm_up()  # once per process: no step pays for loading the compiled kernels

    # ------------------------------------------------------------------ results
    def count(self) -> int:
        """Triangles of the window after the last closed step."""
        return self.count_

    @property
    def steps_closed(self) -> int:
        return self.k

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edges alive after the last closed step (user keys, each edge once)."""
        alive = np.flatnonzero(self._end[: self._n_eids] >= self.k)
        a, b = unpack(np.sort(pack(self._eu[alive], self._ev[alive])))
        return self.encoder.decode(a), self.encoder.decode(b)

    # ------------------------------------------------------------------ results on request
    # The window maintains its count; these list the results of the live edges on request,
    # by a static enumeration (O(m^1.5) for m live edges), as of the last closed step.
    def triangles(self) -> pa.Table:
        """The window's triangles after the last closed step: an Arrow table ``a, b, c``
        (a < b < c by key), enumerated from the live edges on request
        (:func:`gpu_ivm.static.list_triangles`)."""
        return static.list_triangles(self.edges())

    def vertex_counts(self) -> pa.Table:
        """Triangles through each vertex of the window after the last closed step: an Arrow
        table ``vertex, triangles`` with a row (0 included) for every endpoint of a live edge,
        sorted by key, computed from the live edges on request
        (:func:`gpu_ivm.static.vertex_triangle_counts`)."""
        return static.vertex_triangle_counts(self.edges())

    def edge_counts(self) -> pa.Table:
        """Triangles through each live edge after the last closed step: an Arrow table
        ``src, dst, triangles`` (src < dst by key) of the edges in at least one triangle,
        computed from the live edges on request (:func:`gpu_ivm.static.edge_triangle_counts`).

        >>> sw = SlidingWindow(window=10, step=5, start=0)
        >>> _ = sw.push({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4], "time": [0, 1, 2, 6]})
        >>> sw.edge_counts().to_pydict(), sw.vertex_counts().to_pydict()["triangles"]
        ({'src': [1, 1, 2], 'dst': [2, 3, 3], 'triangles': [1, 1, 1]}, [1, 1, 1])
        """
        return static.edge_triangle_counts(self.edges())

    def last_changes(self) -> dict[str, pa.Table]:
        """The result changes of the steps closed by the last :meth:`push`, :meth:`close` or
        :meth:`advance_to` (``track_changes=True``), as Arrow tables with a ``step`` column:
        ``triangles`` (``a`` < ``b`` < ``c`` by key, ``old``, ``new``: 1 → 0 for a triangle
        that left the window, 0 → 1 for one that entered it), ``vertex_counts`` (``vertex``,
        ``old``, ``new``) and ``edge_counts`` (``src`` < ``dst``, ``old``, ``new``), the
        rows whose count changed. A triangle whose edge expired and arrived again in the same
        step did not change and is not listed.

        >>> sw = SlidingWindow(window=10, step=5, start=0, track_changes=True)
        >>> _ = sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]})
        >>> _ = sw.push({"src": [3], "dst": [1], "time": [12]})   # closes step 2: 1-2-3 born
        >>> sw.last_changes()["triangles"].to_pylist()
        [{'step': 2, 'a': 1, 'b': 2, 'c': 3, 'old': 0, 'new': 1}]
        >>> _ = sw.close()                      # step 3: 1-2 and 2-3 have expired
        >>> sw.last_changes()["edge_counts"].to_pydict()["new"]
        [0, 0, 0]
        """
        if self._changes is None:
            raise InputError("last_changes() needs a window created with track_changes=True",
                             column="track_changes")
        return self._changes.tables(self.encoder.decode)

    # ------------------------------------------------------------------ input
    def push(self, events: Any, **read_options: Any) -> list[WindowStep]:
        """Add arrivals (columns ``src``, ``dst``, ``time``; anything
        :func:`gpu_ivm.io.read_edges` reads) and close every step that ended before the
        latest arrival seen. An arrival before the end of the last closed step is refused
        with :class:`~gpu_ivm.errors.InputError` naming the row (nothing changes).
        ``read_options`` (``src=``, ``dst=``, ``time=``, ``header=``, ``ids=``) go to the
        reader."""
        el = io.read_edges(events, **read_options)
        if el.time is None:
            raise InputError("the events have no time column (expected src, dst, time)",
                             column="time")
        t = np.asarray(el.time, np.int64)
        if t.shape[0] == 0:
            return []
        lo_t, hi = int(t.min()), int(t.max())
        t0 = lo_t if self.t0 is None else self.t0
        floor = t0 + self.k * self.step_len
        if lo_t < floor:
            r = int(np.flatnonzero(t < floor)[0])
            if self.k == 0:
                raise InputError(f"arrival at time {int(t[r])} is before the window's start "
                                 f"{floor}", column="time", row=r)
            raise InputError(f"arrival at time {int(t[r])} is before the end of step {self.k} "
                             f"({floor}), which is already closed", column="time", row=r)
        check_times(t, t0, self.window, lo_t, hi)
        self.encoder._check_kind(el.src, "src")
        self.t0 = t0
        self._pending.append((el.src, el.dst, t))
        self._t_max = hi if self._t_max is None else max(self._t_max, hi)
        # steps whose end is <= the latest time seen are complete
        return self._close_until((self._t_max - self.t0) // self.step_len)

    def close(self) -> list[WindowStep]:
        """Close the remaining steps up to the one holding the latest arrival (the first step
        whose end exceeds it)."""
        if self._t_max is None:
            return []
        return self._close_until((self._t_max - self.t0) // self.step_len + 1)

    def advance_to(self, k: int) -> list[WindowStep]:
        """Close steps up to k (later arrivals must then be at or after end_k)."""
        if self.t0 is None:
            raise InputError("advance_to() needs a start time (start= or a first push)")
        return self._close_until(int(k))

    def _close_until(self, k_last: int) -> list[WindowStep]:
        if self._changes is not None:
            self._changes.clear()  # last_changes(): the steps this call closes
        if k_last <= self.k:
            return []
        src, dst, t = self._take_pending()
        if t.shape[0] > 1 and (t[1:] < t[:-1]).any():  # arrivals pushed out of time order
            order = np.argsort(t, kind="stable")
            src, dst, t = src[order], dst[order], t[order]
        ends = self.t0 + np.arange(self.k + 1, k_last + 1, dtype=np.int64) * self.step_len
        cuts = np.searchsorted(t, ends, side="left")
        reps = []
        lo = 0
        for i, k in enumerate(range(self.k + 1, k_last + 1)):
            hi = int(cuts[i])
            reps.append(self._step(k, src[lo:hi], dst[lo:hi], t[lo:hi]))
            lo = hi
        if lo < t.shape[0]:
            self._pending.append((src[lo:], dst[lo:], t[lo:]))
        return reps

    def _take_pending(self):
        if not self._pending:
            z = np.zeros(0, np.int64)
            return z, z, z
        parts = self._pending
        self._pending = []
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    # ------------------------------------------------------------------ one step
    def _grow_ids(self, n: int) -> None:
        """Room for vertex ids below ``n`` in the adjacency and the marks."""
        if n <= self._aoff.shape[0]:
            return
        cap = max(n, 2 * self._aoff.shape[0], 1024)
        for name in ("_aoff", "_aln", "_acap"):
            old = getattr(self, name)
            new = np.zeros(cap, np.int64)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        self._marks = np.zeros(cap, np.int64)

    def _append_edges(self, eids: np.ndarray) -> None:
        """Append the edges ``eids`` (endpoints in ``_eu`` / ``_ev``) to the adjacency."""
        us, vs = self._eu[eids], self._ev[eids]
        need = self._aused + wa.room(self._aln, self._acap, us, vs)
        if need > self._anbr.shape[0]:
            size = max(need, 2 * self._anbr.shape[0], 1024)
            for name in ("_anbr", "_aval"):
                new = np.zeros(size, np.int64)
                new[: self._aused] = getattr(self, name)[: self._aused]
                setattr(self, name, new)
        self._aused, garbage = wa.append(self._aoff, self._aln, self._acap, self._anbr,
                                         self._aval, self._aused, us, vs, eids)
        self._agarbage += garbage

    def _rebuild_adjacency(self) -> None:
        """The adjacency of edge ids 0 .. n - 1, built afresh (no garbage)."""
        n = self._n_eids
        ids = max(self._aoff.shape[0], len(self.encoder), 1)
        (self._aoff, self._aln, self._acap, self._anbr, self._aval,
         self._aused) = wa.build(ids, self._eu[:n], self._ev[:n])
        self._agarbage = 0
        self._marks = np.zeros(ids, np.int64)

    def _clear_per_edge(self) -> None:
        for name in _PER_EDGE:
            setattr(self, name, np.zeros(0, np.int64))

    def _grow(self, n: int) -> None:
        if n <= self._cap:
            return
        cap = max(n, 2 * self._cap, 1024)
        for name in _PER_EDGE:
            old = getattr(self, name)
            new = np.full(cap, -1 if name in ("_end", "_cend", "_prev", "_next") else 0,
                          np.int64)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        self._cap = cap
        self._index_edges()

    def _schedule(self, eids: np.ndarray) -> None:
        """File edges under the step after their calendar end (their expiry check)."""
        sk.due_push(self._due_head, self._next, self._cend, eids)

    def _arrivals(self, k: int, src, dst, t):
        """The arrivals of step k that count (no self-loop, alive at k) as (a, b, last):
        endpoint ids a < b, new user keys committed, the adjacency's and the per-edge arrays'
        room grown; None when no arrival counts."""
        last = last_steps(t, self.t0, self.window, self.step_len)
        keep = (src != dst) & (last >= k)
        if not keep.all():
            src, dst, last = src[keep], dst[keep], last[keep]
        if not src.shape[0]:
            return None
        m = src.shape[0]
        ids, new = self.encoder.plan(np.concatenate([src, dst]), "src")
        self.encoder.commit(new)
        self._grow_ids(len(self.encoder))
        self._grow(self._n_eids + m)
        return np.minimum(ids[:m], ids[m:]), np.maximum(ids[:m], ids[m:]), last

    def _step(self, k: int, src, dst, t) -> WindowStep:
        t_start = time.perf_counter()
        slot = k % self._ring
        before = self.count_
        # 1. edges whose calendar end was k - 1: expire, or (extended since) move the
        # scheduled removals of their triangles to the new end, before the calendar is read
        expired = 0
        track = self._changes
        if self._due_head[slot] >= 0:
            expired, n_ext = wk.expire_due(
                self._aoff, self._aln, self._anbr, self._aval, self._due_head, self._next,
                slot, k, self._end, self._cend, self._prev, self._ext, self._ext_seq,
                self._eu, self._ev, self._cal, self._scratch, self._marks, self._gone)
            self._ext_seq += n_ext
            self.num_edges -= expired
        if track is not None:  # before any arrival moves an end: the triangles that go
            z = np.zeros(0, np.int64)
            left = track.removed(self, self._gone[:expired], k) if expired else (z, z, z)
            entered = (z, z, z)
        self.count_ += int(self._cal[slot])
        self._cal[slot] = 0
        n_arr = int(t.shape[0])
        births = exts = 0
        arrivals = self._arrivals(k, src, dst, t)
        if arrivals is not None:
            a, b, last = arrivals
            m = a.shape[0]
            # 2. one pass over the arrivals: a live edge's true end moves (it is revisited
            # when due); a dead or unseen edge is born (unseen ones get ids)
            born = np.empty(m, np.int64)
            fresh = np.empty(m, np.int64)
            births, nf, exts, self._n_eids = wk.classify_arrivals(
                a, b, last, k, self._htk, self._htv, self._n_eids, self._seq, self._end,
                self._cend, self._stamp, self._mark, self._eu, self._ev, born, fresh)
            if nf:
                self._append_edges(fresh[:nf])
            # 3. births: count the triangles they close, schedule their removal
            if births:
                self._seq += births
                self.num_edges += births
                if track is None:
                    closed = int(wk.births(self._aoff, self._aln, self._anbr, self._aval,
                                           self._due_head, self._next, born[:births], k,
                                           self._cend, self._stamp, self._eu, self._ev,
                                           self._cal, self._marks))
                else:  # the same, from an intersection that also lists the triangles
                    closed, entered = track.births(self, born[:births], k)
                self.count_ += closed
        if track is not None:
            track.record(self, k, left, entered)
        return self._closed(k, t_start, before, n_arr, births, exts, expired)

    def _closed(self, k: int, t_start: float, before: int, arrivals: int, births: int,
                exts: int, expired: int) -> WindowStep:
        """Step k is done: compact if due, and its report."""
        self.k = k
        self._maybe_compact()
        return WindowStep(step=k, end=self.t0 + k * self.step_len, triangles=self.count_,
                          delta=self.count_ - before, edges=self.num_edges, arrivals=arrivals,
                          births=births, extensions=exts, expired=expired,
                          seconds=time.perf_counter() - t_start)

    def _index_edges(self) -> None:
        """Rebuild the edge table (key u < v -> id) from the stored endpoints, with room for
        the id capacity."""
        n = self._n_eids
        self._htk, self._htv = wk.empty_table(self._cap)
        hashmap.insert(self._htk, self._htv, pack(self._eu[:n], self._ev[:n]),
                        np.arange(n, dtype=np.int64))

    def _compact_due(self) -> bool:
        """The compaction rule: at least ``COMPACT_MIN`` stored edges, more than twice the
        live ones."""
        return self._n_eids >= COMPACT_MIN and self._n_eids > 2 * self.num_edges

    def _maybe_compact(self) -> None:
        """Drop the expired edges (new ids, table, adjacency and due lists) once they outnumber
        the live ones. (The garbage that row moves leave in the slab needs no rebuild of its
        own: a row of room C has left 4 + 8 + ... + C/2 < C behind and holds more than C/2,
        so the slab stays below four entries per stored one.)"""
        if self._compact_due():
            stored = self._n_eids
            old = np.flatnonzero(self._end[:stored] >= self.k)
            n = old.shape[0]
            kept = {name: getattr(self, name)[old]
                    for name in ("_end", "_cend", "_stamp", "_eu", "_ev")}
            if self._changes is not None:
                self._changes.remap(old)
            self._cap = self._n_eids = 0
            self._clear_per_edge()
            self._grow(n)
            for name, v in kept.items():
                getattr(self, name)[:n] = v
            self._n_eids = n
            self._index_edges()
            self._rebuild_adjacency()
            self._due_head[:] = -1
            self._schedule(np.arange(n, dtype=np.int64))

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path: str | os.PathLike[str]) -> dict:
        """Write the whole state to folder ``path`` atomically (see
        :mod:`gpu_ivm.window_snapshot`); returns the manifest."""
        from .window_snapshot import save

        return save(self, path)

    def _host_window(self) -> SlidingWindow:
        """A window whose host arrays hold this one's state (itself; the device window
        returns a host copy)."""
        return self

    @classmethod
    def restore(cls, path: str | os.PathLike[str], *,
                backend: str | Backend | None = None) -> SlidingWindow:
        """A window restored from a snapshot folder, verified (checksums, count), on
        ``backend`` (as the constructor's; a snapshot of either backend restores on either)."""
        from .window_snapshot import load

        be = get_backend(backend)
        if be.name != "cpu":
            return _device_window().restore(path, backend=be)
        return load(path, _cpu_window)


_DEVICE_WINDOW: list[type] = []  # the cuda window's class, registered by gpu_ivm.window_device


def register_device_window(cls: type) -> None:
    """Called by :mod:`gpu_ivm.window_device` (which the package imports) with
    :class:`~gpu_ivm.window_device.DeviceSlidingWindow`, the class that
    ``SlidingWindow(..., backend="cuda")`` and ``restore(..., backend="cuda")`` make: the
    device module builds on this one, so this one does not import it."""
    _DEVICE_WINDOW[:] = [cls]


def _device_window() -> type:
    if not _DEVICE_WINDOW:  # pragma: no cover - gpu_ivm/__init__ imports the device module
        raise RuntimeError("gpu_ivm.window_device is not imported")
    return _DEVICE_WINDOW[0]


def _cpu_window(window: int | str, step: int | str, **kwargs: Any) -> SlidingWindow:
    """A window on the cpu backend (what a restore fills)."""
    return SlidingWindow(window, step, backend="cpu", **kwargs)


# the kernel warm-up of the insert-only engine and the window runs a window of this class
stamp_warmup.register_window(SlidingWindow)
