"""Snapshots of a :class:`gpu_ivm.sliding_window.SlidingWindow`.

The folder follows :mod:`gpu_ivm.snapshot`'s format (a checksummed ``manifest.json`` with
``form: "sliding_window"``, Arrow IPC files, written to a temporary folder and renamed into
place): ``encoder.arrow`` (user keys by id), ``edges.arrow`` (the edges alive after the last
closed step: packed ids ``key`` u < v, true ``end``, calendar end ``cend``, birth ``stamp``),
``calendar.arrow`` (the scheduled count changes of the next steps) and ``pending.arrow``
(arrivals pushed but not yet in a closed step). Restoring rebuilds the store and the expiry
schedule from the edges and checks the count against a static recount of them.

The format holds no backend: a snapshot of the cuda backend's window
(:class:`gpu_ivm.window_device.DeviceSlidingWindow`, whose state is copied to the host to be
written) restores on the cpu backend and the other way round
(``SlidingWindow.restore(path, backend=...)``; the device window restores on the host and
uploads the state).

Examples
--------
>>> import tempfile, pathlib
>>> from gpu_ivm import SlidingWindow
>>> sw = SlidingWindow(window=10, step=5, start=0)
>>> _ = sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 1, 6]})
>>> d = pathlib.Path(tempfile.mkdtemp()) / "w"
>>> _ = sw.snapshot(d)
>>> r = SlidingWindow.restore(d)
>>> [(x.step, x.triangles) for x in r.close()] == [(x.step, x.triangles) for x in sw.close()]
True
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

FORM = "sliding_window"


def _key_array(keys: np.ndarray) -> pa.Array:
    if keys.dtype == object:
        return pa.array(keys.tolist(), pa.large_string())
    return pa.array(np.ascontiguousarray(keys, np.int64))


def save(sw, path, *, metadata: dict | None = None) -> dict:
    """Write ``sw`` to the folder ``path`` atomically; returns the manifest. ``metadata``
    (JSON-serialisable) is stored in the manifest under ``"metadata"`` (the CLI records its
    inputs there)."""
    from . import snapshot as sn
    from .encoding import pack

    target = Path(path)
    if not target.parent.is_dir():
        raise sn.SnapshotError("the parent folder does not exist", file=target.parent)
    h = sw._host_window()  # the state's arrays on the host (a copy from a device window)
    e = np.flatnonzero(h._end[: sw._n_eids] >= sw.k)  # the live edges, in key order
    keys = pack(h._eu[e], h._ev[e])
    order = np.argsort(keys)
    keys, e = keys[order], e[order]
    r = sw._ring
    cal = np.array([h._cal[(sw.k + 1 + i) % r] for i in range(r - 1)], np.int64)
    psrc, pdst, pt = sw._take_pending()
    sw._pending = [(psrc, pdst, pt)] if pt.shape[0] else []
    n = len(sw.encoder)
    enc = sw.encoder.decode(np.arange(n, dtype=np.int64)) if n else np.zeros(0, np.int64)
    tables = {
        "encoder.arrow": pa.table({"key": _key_array(enc)}),
        "edges.arrow": pa.table({"key": pa.array(keys), "end": pa.array(h._end[e]),
                                 "cend": pa.array(h._cend[e]),
                                 "stamp": pa.array(h._stamp[e])}),
        "calendar.arrow": pa.table({"change": pa.array(cal)}),
        "pending.arrow": pa.table({"src": _key_array(np.asarray(psrc)),
                                   "dst": _key_array(np.asarray(pdst)),
                                   "time": pa.array(np.asarray(pt, np.int64))}),
    }

    def write(folder: Path) -> dict:
        fields = {"form": FORM, "window": sw.window, "step": sw.step_len, "t0": sw.t0,
                  "steps_closed": sw.k, "count": sw.count_, "edges": sw.num_edges,
                  "stamps": sw._seq, "t_max": sw._t_max, "key_kind": sw.encoder.kind,
                  "track_changes": sw.track_changes, "num_keys": n}
        return sn.write_tables(folder, tables, fields, metadata)

    return sn.write_atomically(target, write, metadata)


def save_numbered(sw, folder, n: int, *, metadata: dict | None = None, keep: int = 2) -> Path:
    """Save ``sw`` as ``folder/snapshot-<n>`` (zero-padded) and keep the newest ``keep``
    numbered snapshots (:func:`gpu_ivm.snapshot.save_numbered` with this module's writer)."""
    from . import snapshot as sn

    return sn.save_numbered(sw, folder, n, metadata=metadata, keep=keep, writer=save)


def load(path, cls):
    """A :class:`SlidingWindow` restored from ``path``, verified (checksums, ranges, the count
    against a static recount of the stored window). ``cls`` makes an empty window on the cpu
    backend (passed by ``SlidingWindow.restore``, so this module need not import its module;
    the device window restores through it and uploads the result)."""
    from . import snapshot as sn
    from .encoding import unpack
    from .static import count_triangles_dense

    folder, man, mpath, table = sn.open_folder(path, FORM, "a sliding window")
    kind = man.get("key_kind")
    kcol = "str" if kind == "str" else "int"
    enc = table("encoder.arrow", {"key": kcol})
    edges = table("edges.arrow", {"key": "int", "end": "int", "cend": "int", "stamp": "int"})
    cal = sn._int_col(table("calendar.arrow", {"change": "int"}), "change")
    pend = table("pending.arrow", {"src": kcol, "dst": kcol, "time": "int"})
    try:
        sw = cls(window=int(man["window"]), step=int(man["step"]), start=man["t0"],
                 track_changes=bool(man.get("track_changes", False)))
        k, count, n_edges = int(man["steps_closed"]), int(man["count"]), int(man["edges"])
        seq = int(man["stamps"])
    except (KeyError, TypeError, ValueError) as e:
        raise sn.SnapshotError(f"manifest lacks or garbles a field: {e}", file=mpath) from None
    keys = sn._int_col(edges, "key")
    end, cend, stamp = (sn._int_col(edges, c) for c in ("end", "cend", "stamp"))
    n_ids = enc.num_rows
    a, b = unpack(keys)
    bad = (keys.shape[0] and ((np.diff(keys) <= 0).any() or (a >= b).any()
                              or b.max() >= n_ids or (end < cend).any() or (cend < k).any()
                              or (stamp < 1).any() or (stamp > seq).any()))
    if bad or keys.shape[0] != n_edges or cal.shape[0] != sw._ring - 1:
        raise sn.SnapshotError("stored edges or calendar out of range", file=folder)
    if kind == "str":
        ekeys = np.array(enc.column("key").to_pylist(), dtype=object)
    else:
        ekeys = sn._int_col(enc, "key")
    if n_ids:
        sw.encoder.commit(ekeys)
    n = keys.shape[0]
    sw._grow(n)
    sw._end[:n], sw._cend[:n], sw._stamp[:n] = end, cend, stamp
    sw._eu[:n], sw._ev[:n] = a, b
    sw._n_eids = n
    sw._index_edges()
    sw._grow_ids(max(n_ids, 1))
    sw._rebuild_adjacency()
    sw._schedule(np.arange(n, dtype=np.int64))
    for i in range(sw._ring - 1):
        sw._cal[(k + 1 + i) % sw._ring] = cal[i]
    sw.k, sw.count_, sw.num_edges, sw._seq = k, count, n_edges, seq
    sw._ext_seq = 0
    sw._t_max = man.get("t_max")
    if pend.num_rows:
        if kind == "str":
            ps = np.array(pend.column("src").to_pylist(), dtype=object)
            pd = np.array(pend.column("dst").to_pylist(), dtype=object)
        else:
            ps, pd = sn._int_col(pend, "src"), sn._int_col(pend, "dst")
        sw._pending = [(ps, pd, sn._int_col(pend, "time"))]
    recount = count_triangles_dense(a, b, max(n_ids, 1)) if n else 0
    if recount != count:
        raise sn.SnapshotError(f"the stored window has {recount} triangles, manifest says "
                               f"{count}", file=folder)
    if sw._changes is not None:  # the per-vertex and per-edge counts, from the live edges
        sw._changes.recount(sw)
    return sw
