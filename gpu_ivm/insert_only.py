"""Insert-only mode of the graph engine: append-only edges, no partitions, no views.

``GraphEngine(mode="insert_only")`` builds an :class:`InsertOnlyGraphEngine`. Under inserts
only, the triangle count needs no heavy/light partition and no auxiliary view (paper 003,
Example 5.3; digest ``paper-insert-only-vs-insert-delete.md`` §8a): the edges are kept on the
sliding window's layout (:class:`gpu_ivm.insert_only_state.EdgeState`: an edge hash table,
per-edge endpoints and *stamps*, the position in the arrival order, and one unsorted row per
vertex, append-only). A batch's new edges get consecutive stamps, are stored, and then each
new edge (u, v) with stamp s counts the common neighbours w whose edges (u, w) and (v, w) have
stamps below s: the ordered delta rule, so each new triangle is counted exactly once, by its
youngest edge. The batch's edges are grouped by their endpoint of larger degree; a group marks
that row once and reads its edges' short rows, or reads each short row and probes the edge
table, whichever reads less (O(min degree) per lone edge). Checking, storing and counting a
batch is one compiled call (:func:`gpu_ivm.kernels.insert_adj.insert_batch`); a batch that
repeats an edge or inserts a stored one takes the general engine's conflict rules.

A batch so large that its work (the sum of its edges' smaller endpoint degrees) would exceed
``RECOUNT_RATIO`` times the stored entries is counted by a static recount of the stored graph
instead (``path == "insert_only_recount"``; same result).

A delete is refused (:class:`~gpu_ivm.errors.InputError` naming the row; nothing changes).
``mode="auto"`` runs insert-only until the first batch holding a delete, then builds the
general IVM^ε structures (strict partition, views, count) once from the stored edges and goes
on as a general engine; that batch's report says so (``path == "switched"``, ``extra["switched"]``).

Count only, undirected graphs, cpu backend (the other configurations are refused up front).

Examples
--------
>>> from gpu_ivm import GraphEngine
>>> g = GraphEngine(mode="insert_only")
>>> _ = g.load({"src": [1, 2], "dst": [2, 3]})
>>> g.apply({"src": [3, 4, 4], "dst": [1, 1, 3], "sign": [1, 1, 1]}).delta
2
>>> g.count(), g.num_edges, type(g).__name__
(2, 5, 'InsertOnlyGraphEngine')
>>> a = GraphEngine(mode="auto")
>>> _ = a.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
>>> rep = a.apply({"src": [1], "dst": [2], "sign": [-1]})
>>> rep.path, rep.triangles, a.mode, a.insert_only_active
('switched', 0, 'auto', False)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from . import io, snapshot
from .encoding import pack, unpack
from .engine import BatchReport
from .errors import InputError, IntegerOverflowError, InvariantError
from .graph_engine import GraphEngine
from .insert_only_state import EdgeState
from .kernels import batch_prep
from .kernels import stamp_kernels as sk
from .overflow import isqrt_ceil, refuses
from .triangle_log import TriangleLog, by_key

MODES = ("general", "insert_only", "auto")
# a batch whose work (sum of its edges' smaller endpoint degrees) exceeds this many times the
# stored entries (both directions) is counted by a static recount of the whole graph instead
# (same result). Measured on R-MAT 18 (3.8M edges), one thread: the batch's kernel beats the
# recount up to about 20-30 (10^5 edges into 3.4M: ratio 3.7, 0.2 against 0.6 s; 10^6 edges
# into an empty graph: ratio 37, 0.69 against 0.46 s)
RECOUNT_RATIO = 16
_NO_LIMIT = 1 << 62


def check_mode(mode: str) -> str:
    """``mode`` normalised (``insert-only`` is accepted for ``insert_only``) or InputError."""
    m = str(mode).replace("-", "_")
    if m not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}", column="mode")
    return m


class InsertOnlyGraphEngine(GraphEngine):
    """The graph engine in insert-only (or auto) mode; see the module docstring.

    Made by ``GraphEngine(mode="insert_only")`` or ``GraphEngine(mode="auto")``; takes the
    same arguments as :class:`GraphEngine` except that ``directed``, ``maintain`` and a
    non-cpu backend are refused.
    """

    def __init__(self, *, directed: bool = False, epsilon="1/2", backend=None,
                 on_conflict: str = "error", adaptive: bool = True, maintain=None,
                 track_changes: bool = False, mode: str = "insert_only",
                 results_from: str = "auto"):
        mode = check_mode(mode)
        if mode == "general":
            raise InputError("InsertOnlyGraphEngine needs mode 'insert_only' or 'auto'",
                             column="mode")
        if directed:
            raise InputError(f"mode {mode!r} supports undirected graphs only", column="mode")
        if maintain not in (None, [], (), "count", ["count"]):
            raise InputError(f"mode {mode!r} maintains the count only; drop maintain= or use "
                             "the general mode", column="maintain")
        super().__init__(directed=False, epsilon=epsilon, backend=backend,
                         on_conflict=on_conflict, adaptive=adaptive, maintain=None,
                         track_changes=track_changes, results_from=results_from)
        if self.backend.name != "cpu":
            raise InputError(f"mode {mode!r} runs on the cpu backend only (asked for "
                             f"{self.backend.name!r})", column="backend")
        self.mode = mode
        self.insert_only_active = True
        self._edges = EdgeState()
        self._seq = 0  # stamps handed out so far (stamp of an edge: 1 ..)
        # track_changes: every triangle with its birth batch, and the counts per vertex and
        # per edge (gpu_ivm.triangle_log); every edge then gets a stamp of its own at load
        self._log = TriangleLog() if track_changes else None

    # ------------------------------------------------------------------ sizes and results
    @property
    def size(self) -> int:
        if self.insert_only_active:
            return 2 * self._edges.n  # both directions, as the general engine counts them
        return super().size

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.insert_only_active:
            return super().edges()
        a, b = unpack(self.stamped_edges()[0])
        return self.encoder.decode(a), self.encoder.decode(b)

    def stamped_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(packed keys u < v, stamps) of the stored edges, in key order (insert-only state)."""
        return self._edges.stamped()

    def _static_count(self) -> int:
        from .static import count_triangles_dense

        a, b = self._edges.endpoints()
        return count_triangles_dense(a, b, max(len(self.encoder), 1))

    def recount(self) -> int:
        if not self.insert_only_active:
            return super().recount()
        return self._static_count()

    def _count_from_stores(self) -> int:
        if not self.insert_only_active:
            return super()._count_from_stores()
        return 6 * self._static_count()

    def check_invariants(self) -> None:
        """Insert-only state: the edge table, the per-edge arrays and the rows agree
        (:meth:`gpu_ivm.insert_only_state.EdgeState.check`: edges u < v over known ids, each
        once, in the table under its id, in both its rows; degrees; stamps in [1, stamps
        handed out]), Q equal to a static recount; else the general checks."""
        if not self.insert_only_active:
            return super().check_invariants()
        self._edges.check(len(self.encoder), self._seq)
        if self.Q != 6 * self._static_count():
            raise InvariantError(f"insert-only count {self.Q // 6} differs from a static "
                                 "recount")

    # ------------------------------------------------------------------ loading
    def load(self, edges: Any, **read_options: Any) -> BatchReport:
        if not self.insert_only_active:
            return super().load(edges)
        t0 = time.perf_counter()
        if self.size or self.batches_applied:
            raise InputError("load() needs an empty engine; apply batches instead")
        el = io.read_edges(edges, **read_options)
        loops = el.src == el.dst
        n = el.src.shape[0]
        ids, new = self.encoder.plan(np.concatenate([el.src, el.dst]), "src")
        self.encoder.commit(new)
        a, b = ids[:n][~loops], ids[n:][~loops]
        keys = np.unique(pack(np.minimum(a, b), np.maximum(a, b)))
        if self._log is None:
            stamps = np.ones(keys.shape[0], np.int64)
            self._seq = 1
        else:
            stamps = 1 + np.arange(keys.shape[0], dtype=np.int64)
            self._seq = max(int(keys.shape[0]), 1)
        self._store_new(keys, stamps)
        if self._log is not None:
            self._log_static(keys, stamps, birth=-1)
        self.Q = 6 * self._static_count()
        self.batches_applied = 0
        from .stamp_warmup import warm_up as warm_stamp

        warm_stamp()
        return self._report(t0, batch=-1, rows=n, updates=self.num_edges,
                            triangles=self.count(), delta=self.count(), path="load",
                            self_loops=int(np.count_nonzero(loops)))

    def _store_new(self, keys: np.ndarray, stamps: np.ndarray) -> None:
        """The state of the undirected keys (u < v, unique) with their stamps, replacing an
        empty one (load, snapshot restore)."""
        a, b = unpack(keys)
        self._edges = EdgeState.from_edges(a, b, stamps, max(len(self.encoder), 1))

    # ------------------------------------------------------------------ batches
    @staticmethod
    def _check_size(entries: int) -> None:
        """Refuse, before any change, a batch after which the count could leave int64: with
        unit multiplicities and ``entries`` stored (both directions of each edge), every value
        the kernels sum is bounded as in :mod:`gpu_ivm.overflow` by ‖E‖₂³ = entries^1.5."""
        if entries < 1 << 38:  # ceil(sqrt) <= 2**19: the bound is below 2**57 (a quick exit)
            return
        if refuses([isqrt_ceil(entries)] * 3):
            raise IntegerOverflowError(
                f"a graph of {entries // 2:,} edges could give triangle counts beyond int64")

    def apply(self, updates: Any, *, batch_id: int | None = None,
              **read_options: Any) -> BatchReport:
        """Apply a batch of edge inserts (see :meth:`GraphEngine.apply`). In insert-only mode
        a delete row is refused with :class:`~gpu_ivm.errors.InputError` (nothing changes);
        in auto mode the first delete switches the engine to the general structures."""
        if not self.insert_only_active:
            return super().apply(updates, batch_id=batch_id)
        t0 = time.perf_counter()
        skipped = self._skip_replayed(batch_id, t0)
        if skipped is not None:
            return skipped
        u = io.read_graph_updates(updates, **read_options)
        if (u.sign < 0).any():
            return self._on_delete(u, int(np.flatnonzero(u.sign < 0)[0]), updates, batch_id, t0)
        rows = len(u)
        src, dst, sign, n_loops, row_idx = self._without_loops(u)
        m = src.shape[0]
        n0 = len(self.encoder)
        ids, new = self.encoder.plan(np.concatenate([src, dst]), "src")
        st = self._edges
        self._check_size(2 * (st.n + m))
        st.reserve(n0 + new.shape[0], m)
        first = st.n
        ignored = 0
        bad, delta = self._insert(ids[:m], ids[m:])
        if bad < 0:  # no conflict: every new key is used
            self.encoder.commit(new)
        else:  # a stored or repeated edge: refused, or its rows skipped (on_conflict)
            a, b, ignored = self._without_conflicts(ids, m, n0, new, sign, row_idx, u)
            bad, delta = self._insert(a, b)
            if bad >= 0:
                raise InvariantError(f"insert-only edge {bad} of a batch without conflicts "
                                     "was found stored")
        B = st.n - first
        path = "insert_only"
        if self._log is not None:  # list the new triangles (their number is the delta)
            delta = self._log_batch(first)
        elif delta < 0:  # the row work would cost more than a static recount of the graph
            q = 6 * self._static_count()
            delta, path = (q - self.Q) // 6, "insert_only_recount"
        self.Q += 6 * delta
        rep = self._report(t0, batch=self.batches_applied, rows=rows, updates=int(B),
                           triangles=self.count(), delta=delta, path=path,
                           ignored=ignored, self_loops=n_loops)
        return self._done(rep, batch_id)

    def _insert(self, a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
        """Store and count the edges {a[i], b[i]} (:meth:`EdgeState.insert`); the count is -1
        with track_changes (the caller lists) or when a static recount is cheaper."""
        m = int(a.shape[0])
        self._seq, seq = self._seq + m, self._seq
        limit = min(RECOUNT_RATIO * 2 * (self._edges.n + m), _NO_LIMIT)
        # all threads from PAR_MIN work on, and from an eighth of the vertex ids (each thread
        # zeroes marks for every id); PAR_MIN = 0 (tests): always
        par_min = sk.PAR_MIN and max(sk.PAR_MIN, self._edges.off.shape[0] // 8)
        bad, delta = self._edges.insert(a, b, seq, par_min=min(par_min, _NO_LIMIT),
                                        limit=limit, count=self._log is None)
        if bad >= 0:
            self._seq = seq
        return bad, delta

    def _without_conflicts(self, ids, m, n0, new, sign, row_idx, u):
        """The batch's edges (ids) without the conflicting ones, with the new keys they use
        committed: (a, b, rows ignored); or the ConflictError of the earliest conflicting row
        (``on_conflict="error"``, nothing changed)."""
        key = batch_prep.pair_keys(ids, m, False)
        order = np.argsort(key)
        gkey, net, starts, kk = batch_prep.sum_groups(key, order, sign, n0)
        present = np.zeros(gkey.shape[0], np.int64)
        if kk.shape[0]:
            present[kk] = self._edges.lookup(gkey[kk]) >= 0
        bad = present + net > 1
        if self.on_conflict == "error":
            rows_kept = np.arange(m) if row_idx is None else row_idx
            raise self._conflict(bad, starts, order, rows_kept, sign, present, u)
        gkey = self._commit_keys(gkey[~bad], new, n0)
        a, b = unpack(gkey)
        return a, b, int(net[bad].sum())

    # ------------------------------------------------------------------ change tracking
    def _log_batch(self, first: int) -> int:
        """List the new triangles of the edges from id ``first`` on by the ordered rule,
        append them to the log and return how many."""
        st = self._edges
        ga, gb = st.eu[first:st.n].copy(), st.ev[first:st.n].copy()
        stamps = st.stamp[first:st.n].copy()
        self._log.add_edges(pack(ga, gb), stamps)
        e, w, s1, s2 = st.list_new(first)
        if not e.shape[0]:
            self._log.clear_last()
            return 0
        self._log.add(ga[e], gb[e], w, stamps[e], s1, s2, birth=self.batches_applied,
                      n_ids=max(len(self.encoder), 1))
        return int(e.shape[0])

    def _log_static(self, keys: np.ndarray, stamps: np.ndarray, birth: int) -> None:
        """Log the triangles of the stored edges ``keys`` (sorted, stamps alongside) at once
        (load, snapshot restore)."""
        from .static import list_triangles_ids

        self._log.add_edges(keys, stamps)
        a, b = unpack(keys)
        x, y, z = list_triangles_ids(a, b, max(len(self.encoder), 1))
        def stamp_of(p, q):
            return stamps[np.searchsorted(keys, pack(p, q))]

        self._log.add(x, y, z, stamp_of(x, y), stamp_of(x, z), stamp_of(y, z), birth=birth,
                      n_ids=max(len(self.encoder), 1))

    def _need_log(self, what: str):
        if self._log is None:
            raise InputError(f"{what} in insert-only mode needs an engine created with "
                             "track_changes=True", column="track_changes")
        return self._log

    def last_changes(self) -> dict:
        """The last batch's new triangles (``a``, ``b``, ``c``, ``old`` = 0, ``new`` = 1,
        ``birth``) and the vertices and edges whose triangle counts changed (``old``,
        ``new``), as Arrow tables (``track_changes=True``; after a switch to the general
        structures, as there).

        >>> g = GraphEngine(mode="insert_only", track_changes=True)
        >>> _ = g.load({"src": [1, 2], "dst": [2, 3]})
        >>> _ = g.apply({"src": [3], "dst": [1], "sign": [1]})
        >>> g.last_changes()["triangles"].to_pylist()
        [{'a': 1, 'b': 2, 'c': 3, 'old': 0, 'new': 1, 'birth': 0}]
        """
        if not self.insert_only_active:
            return super().last_changes()
        return self._need_log("last_changes()").changes(self.encoder.decode)

    def triangles(self, chunk_size: int = 1 << 16, as_of: int | None = None):
        """Every triangle (``a``, ``b``, ``c``, ``birth``: the batch that closed it, -1 for
        the load) as Arrow record batches; ``as_of``: only those born at or before that
        batch, i.e. the result as it was after it (``track_changes=True``; after a switch to
        the general structures, as there, without ``as_of``)."""
        if not self.insert_only_active:
            if as_of is not None:
                raise InputError("as_of= needs the insert-only state", column="as_of")
            return super().triangles(chunk_size)
        return self._need_log("triangles()").batches(self.encoder.decode, as_of, chunk_size)

    def vertex_counts(self, chunk_size: int = 1 << 16):
        """Per-vertex triangle counts (``vertex``, ``triangles``) of the vertices in at least
        one triangle, as Arrow record batches (``track_changes=True``)."""
        if not self.insert_only_active:
            return super().vertex_counts(chunk_size)
        log = self._need_log("vertex_counts()")
        ids = np.flatnonzero(log.vcount)
        return _chunks({"vertex": self.encoder.decode(ids), "triangles": log.vcount[ids]},
                       chunk_size)

    def edge_counts(self, chunk_size: int = 1 << 16):
        """Per-edge triangle counts (``src``, ``dst``, ``triangles``) of the edges in at least
        one triangle, as Arrow record batches (``track_changes=True``)."""
        if not self.insert_only_active:
            return super().edge_counts(chunk_size)
        log = self._need_log("edge_counts()")
        st = np.flatnonzero(log.ecount)
        a, b = by_key(self.encoder.decode, *unpack(log.key_of[st]))
        return _chunks({"src": a, "dst": b, "triangles": log.ecount[st]}, chunk_size)

    def _commit_keys(self, gkey: np.ndarray, new: np.ndarray, n0: int) -> np.ndarray:
        """Commit the new user keys the surviving edges use, renumbered densely; returns the
        edges (sorted, u < v) in the committed ids."""
        used = batch_prep.used_new_ids(gkey, n0) if new.shape[0] else gkey[:0]
        if used.shape[0] and used[-1] >= n0 + used.shape[0]:
            gkey = np.sort(batch_prep.renumber(gkey, used, n0, False))
        self.encoder.commit(new[used - n0] if used.shape[0] else new[:0])
        return gkey

    def _on_delete(self, u, r: int, updates, batch_id, t0) -> BatchReport:
        if self.mode == "insert_only":
            s, d = u.src[r], u.dst[r]
            s = s.item() if hasattr(s, "item") else s
            d = d.item() if hasattr(d, "item") else d
            raise InputError(f"this row deletes the edge ({s!r}, {d!r}), but the engine runs "
                             "in insert_only mode, which accepts inserts only (use mode='auto' "
                             "or the general mode for streams with deletes); nothing was "
                             "applied", column="sign", row=r)
        n_edges = self.num_edges
        ts = time.perf_counter()
        edges, seq = self._edges, self._seq
        self.switch_to_general()
        switch_s = time.perf_counter() - ts
        try:
            rep = super().apply(updates, batch_id=batch_id)
        except BaseException:  # a refused batch leaves the engine insert-only, as it was
            self._edges, self._seq, self.insert_only_active = edges, seq, True
            raise
        rep.seconds = time.perf_counter() - t0
        rep.path = "switched"
        rep.extra["switched"] = (f"first delete (row {r}): general IVM^eps structures built "
                                 f"from the {n_edges} stored edges in {switch_s:.3f} s")
        return rep

    def mark_general(self) -> None:
        """Mark a fresh engine as switched, before a snapshot of the general state that auto
        mode reached is restored into it (:func:`gpu_ivm.snapshot.load`)."""
        self.insert_only_active = False

    def switch_to_general(self) -> None:
        """Build the general IVM^ε state (partition, views, count) from the stored edges once
        and continue as a general engine (auto mode does this at the first delete)."""
        if not self.insert_only_active:
            return
        from .warmup import warm_up

        warm_up()  # the general kernels, as a general engine's load() does
        gkey, _ = self.stamped_edges()
        keys, _ = batch_prep.symmetric_delta(gkey, np.ones(gkey.shape[0], np.int64))
        q = self.Q
        self._grow_ids(max(len(self.encoder), 1))
        self._build(self.backend.to_device(keys), self.xp.ones(keys.shape[0], np.int64))
        if self.Q != q:
            raise InvariantError(f"insert-only count {q // 6} differs from the general "
                                 f"engine's recount {self.Q // 6}")
        self.insert_only_active = False
        self._edges = EdgeState()


def _chunks(cols: dict, chunk_size: int):
    n = len(next(iter(cols.values())))
    for i in range(0, n, chunk_size):
        yield pa.RecordBatch.from_pydict({k: v[i:i + chunk_size] for k, v in cols.items()})


# ---------------------------------------------------------------------------- snapshots
def write_snapshot(engine: InsertOnlyGraphEngine, folder, metadata: dict | None) -> dict:
    """The snapshot folder of an engine in its insert-only state (see :mod:`gpu_ivm.snapshot`):
    ``encoder.arrow`` and ``edges.arrow`` (packed keys u < v, ``stamp``) plus the manifest."""
    import pyarrow as pa

    from . import snapshot as sn

    keys, stamps = engine.stamped_edges()
    tables = [("encoder.arrow", sn._encoder_table(engine)),
              ("edges.arrow", pa.table({"key": pa.array(keys), "stamp": pa.array(stamps)}))]
    if engine._log is not None:  # track_changes: the triangles with their births (ids)
        a, b, c, birth = engine._log.arrays()
        tables.append(("triangles.arrow", pa.table({"a": a, "b": b, "c": c, "birth": birth})))
    fields = {
        **sn._config(engine), "mode": engine.mode, "insert_only_active": True,
        "key_kind": engine.encoder.kind, "num_keys": len(engine.encoder),
        "N": int(engine.N), "Q": int(engine.Q), "count": int(engine.count()),
        "size": int(engine.size), "stamps": int(engine._seq),
        "last_batch_id": engine.last_batch_id, "batches_applied": int(engine.batches_applied),
        "edges_sha256": sn._digest_arrays(keys, stamps), "relations": [],
    }
    return sn.write_tables(folder, dict(tables), fields, metadata)


def load_snapshot(eng: InsertOnlyGraphEngine, man: dict, folder, table, keys_arr):
    """Fill a fresh insert-only engine from a snapshot folder (called by
    :func:`gpu_ivm.snapshot.load` with its checked table reader and the encoder's keys)."""
    from .snapshot import SnapshotError, _check_pairs, _digest_arrays, _int_col

    t = table("edges.arrow", {"key": "int", "stamp": "int"})
    keys, stamps = _int_col(t, "key"), _int_col(t, "stamp")
    n_ids = keys_arr.shape[0]
    fpath = folder / "edges.arrow"
    _check_pairs(fpath, keys, stamps, n_ids)
    try:
        seq, q = int(man["stamps"]), int(man["Q"])
        last = man["last_batch_id"]
        applied = int(man["batches_applied"])
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"manifest lacks or garbles a counter: {e}",
                            file=folder / "manifest.json") from None
    a, b = unpack(keys)
    if (a >= b).any() or (stamps < 1).any() or (stamps > seq).any():
        raise SnapshotError("edges not stored as u < v with stamps in [1, stamps]", file=fpath)
    if _digest_arrays(keys, stamps) != man.get("edges_sha256"):
        raise SnapshotError("edges differ from the manifest checksum", file=fpath)
    if n_ids:
        eng.encoder.commit(keys_arr)
    eng._store_new(keys, stamps)
    eng._seq = seq
    if eng._log is not None:
        _restore_log(eng, table, keys, stamps, n_ids, folder)
    eng.Q = q
    if eng._log is not None and len(eng._log) != q // 6:
        raise SnapshotError(f"the snapshot lists {len(eng._log)} triangles, its count is "
                            f"{q // 6}", file=folder / "triangles.arrow")
    eng.batches_applied = applied
    eng.last_batch_id = None if last is None else int(last)
    try:
        eng.check_invariants()
    except InvariantError as e:
        raise SnapshotError(f"restored insert-only state is inconsistent: {e}",
                            file=folder) from None
    if eng.count() != man.get("count") or eng.size != man.get("size"):
        raise SnapshotError("count or size differs from the manifest", file=folder)
    return eng


def _restore_log(eng, table, keys, stamps, n_ids, folder) -> None:
    """The triangle log of a snapshot of an engine with track_changes: triangles.arrow, each
    triangle's edges looked up among the restored ones (a missing edge, a wrong order or a
    count that differs from the manifest's is refused)."""
    from .snapshot import SnapshotError, _int_col

    t = table("triangles.arrow", {"a": "int", "b": "int", "c": "int", "birth": "int"})
    a, b, c, birth = (_int_col(t, x) for x in ("a", "b", "c", "birth"))
    if a.shape[0] and (not ((a < b) & (b < c)).all() or a.min() < 0 or c.max() >= n_ids
                       or (np.diff(birth) < 0).any()):
        raise SnapshotError("triangles not stored as a < b < c ids in birth order",
                            file=folder / "triangles.arrow")
    eng._log.add_edges(keys, stamps)

    def stamp_of(p, q):
        k = pack(p, q)
        i = np.minimum(np.searchsorted(keys, k), max(keys.shape[0] - 1, 0))
        if a.shape[0] and (keys.shape[0] == 0 or (keys[i] != k).any()):
            raise SnapshotError("a stored triangle has an edge that is not stored",
                                file=folder / "triangles.arrow")
        return stamps[i]

    if a.shape[0]:
        eng._log.add(a, b, c, stamp_of(a, b), stamp_of(a, c), stamp_of(b, c), birth=birth,
                     n_ids=max(n_ids, 1))
    eng._log.clear_last()


# GraphEngine(mode=...) builds this class; the snapshot module writes and reads its state here
GraphEngine.register_mode_engine(InsertOnlyGraphEngine, check_mode)
snapshot.register_insert_only_format(write_snapshot, load_snapshot)
