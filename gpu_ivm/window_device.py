"""A sliding window whose steps run on the CUDA kernels, its state resident on the device.

:class:`DeviceSlidingWindow` is :class:`~gpu_ivm.sliding_window.SlidingWindow` with the step
(:meth:`~gpu_ivm.sliding_window.SlidingWindow._step`) replaced by the CUDA twins: the revisits
(:func:`gpu_ivm.kernels.cuda_window_step.expire_due`), the arrivals' classification against the
edge table (``classify_arrivals``), the new rows (``append``) and the births (``births``, whose
triangle work is :func:`gpu_ivm.kernels.cuda_window.birth_triangles`). It is what
``SlidingWindow(..., backend="cuda")`` makes. The per-edge arrays, the edge table, the due
lists, the calendar and the adjacency live in the cuda backend's array module (CuPy on a
device, NumPy under Numba's CUDA simulator); a step reads back a few scalars (the counts of
each part and the calendar's entry).

The host keeps what the CPU window keeps there: the user-key encoder, the pending arrivals
and the step boundaries (the base class's ``push`` / ``close`` / ``advance_to``, unchanged),
and the arrivals' last alive steps and filtering. Everything else that is not a step goes
through a host copy of the state (:meth:`DeviceSlidingWindow._to_cpu`: every per-edge array,
the table, the rows, the due lists and the calendar, O(stored edges + vertex ids) bytes over
the bus each way), running the CPU window's own code on it:

- **compaction** (the CPU's rule and code, :meth:`SlidingWindow._maybe_compact`: once the
  stored edges are at least ``COMPACT_MIN`` and more than twice the live ones): download,
  compact on the host, upload. Right after a compaction every stored edge is live, so by the
  next one more than half the stored edges have expired: the per-edge transfer is O(1) per
  expiry amortized (the rows of every vertex id seen are rebuilt each time, as on the CPU);
- **snapshots** (the CPU's format, :mod:`gpu_ivm.window_snapshot`: a snapshot of either
  backend restores on either) download the state; **restores** load on the host and upload;
- **track_changes**: each step with expiries downloads the state once (the triangles the
  expiries remove, listed by the CPU's :class:`~gpu_ivm.window_changes.WindowChanges`), each
  step with births once more (the triangles they close, listed on the host copy and checked
  against the device's count). That is O(state) transfer per step, far more than the step
  itself: a correctness feature, not a fast path; leave it off where speed matters;
- results on request (``edges()``, ``triangles()``, ...) download the live edges' arrays.

Tested in the CUDA simulator against the CPU window step by step, compactions, snapshots in
both directions and track_changes included (``tests/cuda_sim_window_step_cases.py``,
``tests/cuda_sim_window_device_cases.py``); it has not run or been timed on a GPU. Not done:
compaction by device kernels (it would spare the transfers), a parallel due-list pop.

Usage (``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported, or a CUDA device with CuPy)::

    sw = SlidingWindow(window=10, step=5, start=0, backend="cuda")   # a DeviceSlidingWindow
    reps = sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]}) + sw.close()

Without a device (and without the simulator) the cuda backend is refused with
:class:`~gpu_ivm.errors.BackendUnavailableError` naming why; the cpu backend is the same
window on the host:

>>> from gpu_ivm import SlidingWindow
>>> sw = SlidingWindow(window=10, step=5, start=0, backend="cpu")
>>> [r.triangles for r in sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]})
...  + sw.close()]
[0, 1]
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from .backend import Backend, get_backend
from .errors import InputError, InvariantError
from .sliding_window import SlidingWindow, WindowStep, register_device_window

# per edge id, as the CPU window's (sliding_window._PER_EDGE), with their fill values; the
# due lists' scratch and the expired edges ride along (room for every stored edge)
_DEVICE_EDGE = {"end": -1, "cend": -1, "prev": -1, "nxt": -1, "ext": 0, "stamp": 0, "eu": 0,
                "ev": 0, "mark": 0, "due": 0, "gone": 0}
_DEVICE_ROWS = ("off", "ln", "room", "add")  # per vertex id: the adjacency's rows
# the CPU window's state arrays and their device twins (the host copy's layout): per edge id,
# the edge table, the rows, the calendar and the due lists' heads
_HOST_OF = {"_end": "end", "_cend": "cend", "_prev": "prev", "_ext": "ext", "_stamp": "stamp",
            "_eu": "eu", "_ev": "ev", "_next": "nxt", "_mark": "mark", "_scratch": "due",
            "_gone": "gone", "_htk": "htk", "_htv": "htv", "_aoff": "off", "_aln": "ln",
            "_acap": "room", "_anbr": "nbr", "_aval": "val", "_cal": "cal",
            "_due_head": "head"}
# attributes of the device window only (never copied to a host window)
_DEVICE_ONLY = ("backend", "_cws", "_xp", "_d", "_dcap")


def _cuda_backend(backend: str | Backend | None) -> Backend:
    be = get_backend(backend)
    if be.name != "cuda":
        raise InputError(f"DeviceSlidingWindow runs on the cuda backend, not {be.name!r} "
                         "(use SlidingWindow(..., backend='cpu') for the host)",
                         column="backend")
    return be


class DeviceSlidingWindow(SlidingWindow):
    """:class:`~gpu_ivm.sliding_window.SlidingWindow` with its steps on the CUDA kernels.

    Parameters are the base class's; ``backend`` must resolve to ``"cuda"`` (the default):
    a CUDA device with CuPy, or Numba's simulator (:func:`gpu_ivm.backend.get_backend`).
    ``SlidingWindow(..., backend="cuda")`` makes one. What goes through the host, and its
    cost: the module docstring.
    """

    _ON_DEVICE = True

    def __init__(self, window: int | str, step: int | str, *, start: int | None = None,
                 track_changes: bool = False, backend: str | Backend | None = "cuda"):
        be = _cuda_backend(backend)
        super().__init__(window, step, start=start, track_changes=track_changes, backend=be)
        from .kernels import cuda_window_step

        self._cws = cuda_window_step
        self._xp = be.xp
        xp = self._xp
        self._d: dict = {}  # the device state, by name
        self._dcap = 0  # per-edge capacity on the device
        self._d["head"] = xp.full(self._ring, -1, np.int64)
        self._d["cal"] = xp.zeros(self._ring, np.int64)
        for name in (*_DEVICE_EDGE, *_DEVICE_ROWS):
            self._d[name] = xp.zeros(0, np.int64)
        self._d["nbr"] = self._d["val"] = xp.zeros(0, np.int64)
        self._set_table(0)

    # ------------------------------------------------------------------ device state
    def _set_table(self, cap: int) -> None:
        """A fresh edge table (key u < v -> id) for ``cap`` edge ids, holding the stored
        edges, and its arrival scratch."""
        from .kernels import cuda_hash
        from .kernels.window_step import empty_table

        xp = self._xp
        size = empty_table(cap)[0].shape[0]  # the CPU window's table size rule
        htk, htv = xp.zeros(size, np.int64), xp.full(size, -1, np.int64)
        n = self._n_eids
        if n:
            keys = (self._d["eu"][:n] << 32) | self._d["ev"][:n]
            cuda_hash.insert(htk, htv, keys, xp.arange(n, dtype=np.int64))
        self._d["htk"], self._d["htv"] = htk, htv
        self._d["first"], self._d["top"] = self._cws.arrival_scratch(size, xp)

    def _grow(self, n: int) -> None:
        """Room for edge ids below ``n`` on the device (the table rebuilt with room)."""
        if n <= self._dcap:
            return
        xp = self._xp
        cap = max(n, 2 * self._dcap, 1024)
        for name, fill in _DEVICE_EDGE.items():
            new = xp.full(cap, fill, np.int64)
            if self._dcap:
                new[: self._dcap] = self._d[name]
            self._d[name] = new
        self._dcap = cap
        self._set_table(cap)

    def _grow_ids(self, n: int) -> None:
        """Room for vertex ids below ``n`` in the rows."""
        old = self._d["off"].shape[0]
        if n <= old:
            return
        cap = max(n, 2 * old, 1024)
        for name in _DEVICE_ROWS:
            new = self._xp.zeros(cap, np.int64)
            new[:old] = self._d[name]
            self._d[name] = new

    def _adj(self) -> tuple:
        d = self._d
        return d["off"], d["ln"], d["nbr"], d["val"]

    # ------------------------------------------------------------------ host copies
    def _download(self, a: Any) -> np.ndarray:
        """A host copy of a device array (never a view: under the simulator the device
        arrays are NumPy arrays, and the host copy is changed by the CPU code)."""
        out = self.backend.to_host(a)
        return out.copy() if self._xp is np else out

    def _to_cpu(self) -> SlidingWindow:
        """A cpu-backend window holding a copy of this window's whole state (the CPU
        window's arrays, from their device twins; the encoder, the pending arrivals' list
        and the change tracker are shared). Costs one download of the state."""
        h = object.__new__(SlidingWindow)
        h.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _DEVICE_ONLY})
        h.backend = get_backend("cpu")
        for host_name, dev_name in _HOST_OF.items():
            setattr(h, host_name, self._download(self._d[dev_name]))
        h._cap = self._dcap
        h._marks = np.zeros(h._aoff.shape[0], np.int64)
        return h

    def _from_cpu(self, h: SlidingWindow) -> None:
        """Take the whole state of the cpu-backend window ``h`` (uploaded; its scalars,
        encoder, pending arrivals and change tracker adopted). Costs one upload."""
        xp, d = self._xp, self._d
        for host_name, dev_name in _HOST_OF.items():
            d[dev_name] = xp.array(getattr(h, host_name), dtype=np.int64)  # a copy
        self._dcap = h._cap
        d["add"] = xp.zeros(d["off"].shape[0], np.int64)
        d["first"], d["top"] = self._cws.arrival_scratch(d["htk"].shape[0], xp)
        for name, value in h.__dict__.items():
            if name not in _HOST_OF and name not in ("backend", "_cap", "_marks"):
                setattr(self, name, value)

    def _host_window(self) -> SlidingWindow:
        """A host copy of the state (:meth:`_to_cpu`): what a snapshot writes."""
        return self._to_cpu()

    def _maybe_compact(self) -> None:
        """The CPU window's compaction (same rule, same code) on a host copy of the state,
        uploaded back: rare and amortized (module docstring)."""
        if self._compact_due():
            h = self._to_cpu()
            h._maybe_compact()
            self._from_cpu(h)

    # ------------------------------------------------------------------ one step
    def _step(self, k: int, src, dst, t) -> WindowStep:
        t_start = time.perf_counter()
        d, xp, cws = self._d, self._xp, self._cws
        slot = k % self._ring
        before = self.count_
        table = (d["htk"], d["htv"])
        track = self._changes
        view: SlidingWindow = self  # the host copy the change tracker reads last
        # 1. revisits: expire, or move the extended edges' triangles' removals
        expired = 0
        if self._n_eids:
            expired, n_ext = cws.expire_due(
                self._adj(), table, d["head"], d["nxt"], slot, k, d["end"], d["cend"],
                d["prev"], d["ext"], self._ext_seq, d["eu"], d["ev"], d["cal"], d["due"],
                d["gone"])
            self._ext_seq += n_ext
            self.num_edges -= expired
        if track is not None:  # before any arrival moves an end: the triangles that go
            z = np.zeros(0, np.int64)
            left = entered = (z, z, z)
            if expired:
                view = self._to_cpu()
                left = track.removed(view, view._gone[:expired], k)
        self.count_ += int(d["cal"][slot])
        d["cal"][slot] = 0
        n_arr = int(t.shape[0])
        births = exts = 0
        arrivals = self._arrivals(k, src, dst, t)
        if arrivals is not None:
            a, b, last = (xp.asarray(x) for x in arrivals)
            m = a.shape[0]
            table = (d["htk"], d["htv"])  # _grow may have laid the table out again
            born, fresh = xp.empty(m, np.int64), xp.empty(m, np.int64)
            # 2. the arrivals: live edges' ends move, dead or unseen edges are born
            births, nf, exts, self._n_eids = cws.classify_arrivals(
                a, b, last, k, d["htk"], d["htv"], self._n_eids, self._seq,
                d["end"], d["cend"], d["stamp"], d["mark"], d["eu"], d["ev"], born, fresh,
                d["first"], d["top"])
            if nf:
                f = fresh[:nf]
                d["nbr"], d["val"], self._aused, garbage = cws.append(
                    d["off"], d["ln"], d["room"], d["add"], d["nbr"], d["val"], self._aused,
                    d["eu"][f], d["ev"][f], f)
                self._agarbage += garbage
            # 3. births: file them, count the triangles they close
            if births:
                self._seq += births
                self.num_edges += births
                if track is not None:  # the CPU's births on a host copy, listing them
                    view = self._to_cpu()
                    listed, entered = track.births(view, self._download(born[:births]), k)
                closed = cws.births(self._adj(), table, d["head"], d["nxt"], born[:births],
                                    k, d["cend"], d["stamp"], d["eu"], d["ev"], d["cal"])
                if track is not None and listed != closed:
                    raise InvariantError(f"step {k}: the births close {closed} triangles on "
                                         f"the device, {listed} listed on the host")
                self.count_ += closed
        if track is not None:
            track.record(view, k, left, entered)
        return self._closed(k, t_start, before, n_arr, births, exts, expired)

    # ------------------------------------------------------------------ results
    def _host(self, name: str) -> np.ndarray:
        """The first ``n_eids`` entries of a per-edge device array, on the host."""
        return self.backend.to_host(self._d[name][: self._n_eids])

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edges alive after the last closed step (user keys, each edge once)."""
        from .encoding import pack, unpack

        alive = np.flatnonzero(self._host("end") >= self.k)
        a, b = unpack(np.sort(pack(self._host("eu")[alive], self._host("ev")[alive])))
        return self.encoder.decode(a), self.encoder.decode(b)

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path: str | os.PathLike[str]) -> dict:
        """Write the state to folder ``path`` atomically in the CPU window's format
        (:mod:`gpu_ivm.window_snapshot`) from a host copy; returns the manifest."""
        from .window_snapshot import save

        return save(self, path)

    @classmethod
    def restore(cls, path: str | os.PathLike[str], *,
                backend: str | Backend | None = "cuda") -> DeviceSlidingWindow:
        """A device window restored from a snapshot folder of either backend: loaded and
        verified on the host (checksums, count), then uploaded."""
        be = _cuda_backend(backend)
        h = SlidingWindow.restore(path, backend="cpu")
        dev = cls(h.window, h.step_len, start=h.t0, track_changes=h.track_changes, backend=be)
        dev._from_cpu(h)
        return dev


# SlidingWindow(..., backend="cuda") and its restore make this class (see the registration)
register_device_window(DeviceSlidingWindow)
