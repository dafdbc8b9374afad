"""A sliding window whose steps run on the CUDA kernels, its state resident on the device.

:class:`DeviceSlidingWindow` is :class:`~gpu_ivm.sliding_window.SlidingWindow` with the step
(:meth:`~gpu_ivm.sliding_window.SlidingWindow._step`) replaced by the CUDA twins: the revisits
(:func:`gpu_ivm.kernels.cuda_window_step.expire_due`), the arrivals' classification against the
edge table (``classify_arrivals``), the new rows (``append``) and the births (``births``, whose
triangle work is :func:`gpu_ivm.kernels.cuda_window.birth_triangles`). The per-edge arrays, the
edge table, the due lists, the calendar and the adjacency live in the cuda backend's array
module (CuPy on a device, NumPy under Numba's CUDA simulator) and never come back to the host;
a step reads back a few scalars (the counts of each part and the calendar's entry).

The host keeps what the CPU window keeps there: the user-key encoder, the pending arrivals
and the step boundaries (the base class's ``push`` / ``close`` / ``advance_to``, unchanged),
and the arrivals' last alive steps and filtering. Not on this class (yet): the expired edges
are never compacted away (the CPU window rebuilds its state once they outnumber the live
ones; here the stored edges only grow), and ``track_changes``, snapshots and restores are
refused. Tested in the CUDA simulator against the CPU window step by step
(``tests/cuda_sim_window_step_cases.py``); it has not run on a GPU.

Usage (``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported, or a CUDA device with CuPy)::

    sw = DeviceSlidingWindow(window=10, step=5, start=0)
    reps = sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]}) + sw.close()
"""

from __future__ import annotations

import os
import time

import numpy as np

from .backend import get_backend
from .errors import InputError
from .lifespans import last_steps
from .sliding_window import SlidingWindow, WindowStep

# per edge id, as the CPU window's (sliding_window._PER_EDGE), with their fill values; the
# due lists' scratch and the expired edges ride along (room for every stored edge)
_DEVICE_EDGE = {"end": -1, "cend": -1, "prev": -1, "nxt": -1, "ext": 0, "stamp": 0, "eu": 0,
                "ev": 0, "mark": 0, "due": 0, "gone": 0}
_DEVICE_ROWS = ("off", "ln", "room", "add")  # per vertex id: the adjacency's rows


class DeviceSlidingWindow(SlidingWindow):
    """:class:`~gpu_ivm.sliding_window.SlidingWindow` with its steps on the CUDA kernels.

    Parameters are the base class's, without ``track_changes``. Needs the cuda backend
    (:func:`gpu_ivm.backend.get_backend`): a CUDA device with CuPy, or the simulator.
    """

    def __init__(self, window: int | str, step: int | str, *, start: int | None = None):
        super().__init__(window, step, start=start)
        from .kernels import cuda_window_step

        self._cws = cuda_window_step
        self._xp = get_backend("cuda").xp
        xp = self._xp
        self._d: dict = {}  # the device state, by name
        self._dcap = 0  # per-edge capacity on the device
        self._d["head"] = xp.full(self._ring, -1, np.int64)
        self._d["cal"] = xp.zeros(self._ring, np.int64)
        for name in _DEVICE_ROWS:
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

    def _maybe_compact(self) -> None:  # not on the device yet (module docstring)
        return None

    # ------------------------------------------------------------------ one step
    def _step(self, k: int, src, dst, t) -> WindowStep:
        t_start = time.perf_counter()
        d, xp, cws = self._d, self._xp, self._cws
        slot = k % self._ring
        before = self.count_
        table = (d["htk"], d["htv"])
        # 1. revisits: expire, or move the extended edges' triangles' removals
        expired = 0
        if self._n_eids:
            expired, n_ext = cws.expire_due(
                self._adj(), table, d["head"], d["nxt"], slot, k, d["end"], d["cend"],
                d["prev"], d["ext"], self._ext_seq, d["eu"], d["ev"], d["cal"], d["due"],
                d["gone"])
            self._ext_seq += n_ext
            self.num_edges -= expired
        self.count_ += int(d["cal"][slot])
        d["cal"][slot] = 0
        n_arr = int(t.shape[0])
        births = exts = 0
        last = last_steps(t, self.t0, self.window, self.step_len)
        keep = (src != dst) & (last >= k)
        if not keep.all():
            src, dst, last = src[keep], dst[keep], last[keep]
        if src.shape[0]:
            m = src.shape[0]
            ids, new = self.encoder.plan(np.concatenate([src, dst]), "src")
            self.encoder.commit(new)
            self._grow_ids(len(self.encoder))
            self._grow(self._n_eids + m)
            table = (d["htk"], d["htv"])
            a = xp.asarray(np.minimum(ids[:m], ids[m:]))
            b = xp.asarray(np.maximum(ids[:m], ids[m:]))
            born, fresh = xp.empty(m, np.int64), xp.empty(m, np.int64)
            # 2. the arrivals: live edges' ends move, dead or unseen edges are born
            births, nf, exts, self._n_eids = cws.classify_arrivals(
                a, b, xp.asarray(last), k, d["htk"], d["htv"], self._n_eids, self._seq,
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
                self.count_ += cws.births(self._adj(), table, d["head"], d["nxt"],
                                          born[:births], k, d["cend"], d["stamp"], d["eu"],
                                          d["ev"], d["cal"])
        self.k = k
        return WindowStep(step=k, end=self.t0 + k * self.step_len, triangles=self.count_,
                          delta=self.count_ - before, edges=self.num_edges, arrivals=n_arr,
                          births=births, extensions=exts, expired=expired,
                          seconds=time.perf_counter() - t_start)

    # ------------------------------------------------------------------ results
    def _host(self, name: str) -> np.ndarray:
        """The first ``n_eids`` entries of a per-edge device array, on the host."""
        return get_backend("cuda").to_host(self._d[name][: self._n_eids])

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edges alive after the last closed step (user keys, each edge once)."""
        from .encoding import pack, unpack

        alive = np.flatnonzero(self._host("end") >= self.k)
        a, b = unpack(np.sort(pack(self._host("eu")[alive], self._host("ev")[alive])))
        return self.encoder.decode(a), self.encoder.decode(b)

    def snapshot(self, path: str | os.PathLike[str]) -> dict:
        """Not available on the device window (yet)."""
        raise InputError("DeviceSlidingWindow has no snapshots yet; use SlidingWindow")

    @classmethod
    def restore(cls, path: str | os.PathLike[str]) -> SlidingWindow:
        """Not available on the device window (yet)."""
        raise InputError("DeviceSlidingWindow has no snapshots yet; use SlidingWindow")
