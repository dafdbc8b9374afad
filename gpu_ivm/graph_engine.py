"""The graph form: triangles of one edge relation E under batches of edge inserts and deletes.

Undirected (default): E holds each edge in both directions and the count is the number of
triangles of the simple undirected graph (SNAP's definition), Q = tr(E³) = 6·triangles.
Directed: E holds arcs and the count is the number of directed 3-cycles, Q = 3·cycles.
Set semantics: self-loops are dropped (they are not edges of a simple graph) and counted in
the report; a batch may not insert a present edge or delete an absent one (``on_conflict``).

A batch Δ (both directions of each changed edge) changes Q by
3·tr(Δ·E²) + 3·tr(Δ²·E) + tr(Δ³) with E the state before the batch: the first term by the
IVM^ε kernels (one evaluation per undirected edge, in its cheaper orientation), the other two by
a batch-local wedge kernel; then Δ is stored with view maintenance heavy part first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np

from . import compact, device_batch, io, snapshot, warmup
from . import engine as _engine
from .backend import Backend
from .compact import CompactGraph
from .encoding import pack, unpack
from .engine import BatchReport, TriangleEngineBase, sum_products
from .errors import ConflictError, InputError, ResourceLimitError, SetViolation
from .io.device import DeviceColumns, device_columns
from .kernels import batch_prep
from .overflow import isqrt_ceil, refuses
from .queries.api import FreeQueryResults
from .rational import EpsilonLike, parse_epsilon_setting
from .recompute import AdaptivePolicy
from .warmup import warm_up

# Δ tuples (both orientations) from which an ε = 1 batch shares row passes between its pairs
# (GraphEngine._symmetric_first); below it, pairs are intersected one by one
GROUPED_MIN = 256


def _device_prep_min() -> int:
    """Rows from which a batch given on the host is prepared on the device (cuda backend):
    ``GPU_IVM_DEVICE_PREP_MIN`` if set, else 16,384. Below it the host prepares the batch
    (about 0.2 ms at 10³ rows here) and uploads it, within the launch budget; above it the
    host's preparation grows by about 55 ns a row (5.1–5.9 ms at 10⁵ rows on R-MAT 18)
    while the device's costs 5 launches and a read, 0.15–0.8 ms at the cost model's bounds
    of a launch (docs/gpu.md): they meet between about 3,000 and 15,000 rows. Not timed on
    a GPU."""
    raw = os.environ.get("GPU_IVM_DEVICE_PREP_MIN", "").strip()
    if not raw:
        return 1 << 14
    if not raw.isdigit():
        raise ValueError(f"GPU_IVM_DEVICE_PREP_MIN must be a non-negative integer, got {raw!r}")
    return int(raw)


DEVICE_PREP_MIN = _device_prep_min()


class _StoresState:
    """An attribute of a :class:`GraphEngine`'s stores that is out of date while the engine
    holds the compact form (:mod:`gpu_ivm.compact`): reading it rebuilds the stores from the
    form first (:meth:`GraphEngine._leave_compact`); it is kept as ``_<name>``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.private = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if obj._compact is not None:
            obj._leave_compact()
        return getattr(obj, self.private)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.private, value)


class GraphEngine(FreeQueryResults, TriangleEngineBase):
    """Maintain the triangle count of a graph under batches of edge inserts and deletes.

    Parameters
    ----------
    directed : bool
        Count directed 3-cycles of a directed graph instead of undirected triangles.
    epsilon : "auto", str, Fraction, int or float
        The IVM^ε exponent in [0, 1], or ``"auto"`` (default): the engine picks ε from the
        degree distribution at load and at every major rebalancing (see
        :mod:`gpu_ivm.eps_policy`; ``epsilon`` then reads the current choice). ε = 1/2 bounds
        the worst-case work per update by O(√N) but maintains views for every vertex of degree
        >= √N; 1 and 0 give classical first-order IVM.
    backend : str, optional
        ``"cpu"``, ``"cuda"`` or ``"auto"``; default from ``GPU_IVM_BACKEND`` or ``"cpu"``.
    on_conflict : {"error", "ignore"}
        What to do with rows that insert a present edge or delete an absent one: raise
        :class:`~gpu_ivm.errors.ConflictError` (nothing changes), or skip and count them.
        A batch is judged edge by edge on its net change: an edge's rows are summed, and an
        edge whose sum would take it out of {0, 1} is the conflict (the error names the row
        where, taken in order, it first leaves {0, 1}); ``"ignore"`` skips all of that
        edge's rows in the batch. So an absent edge inserted twice in one batch stays
        absent under ``"ignore"`` (both rows counted in ``ignored``), and a delete followed
        by an insert of an absent edge nets to no change, without a conflict.
    adaptive : bool
        Recompute from scratch when a batch is so large that this is cheaper (same results).
    maintain : str or list of str
        Results kept fresh besides the count: ``"vertex_counts"`` (triangles per vertex),
        ``"edge_counts"`` (triangles per edge), ``"triangles"`` (the list), with the views of
        paper 001 (see :mod:`gpu_ivm.queries`); views for results not asked for are not kept.
    track_changes : bool
        Keep each batch's result changes for :meth:`last_changes` (output-sensitive cost).
    results_from : {"auto", "stores", "views"}
        Where the ``maintain`` results come from. ``"stores"`` (undirected graphs): the
        per-vertex and per-edge counts are updated from the count's own stores and the
        triangles listed off them when read (cheapest per batch; a read of the triangles
        costs a static listing); ``"views"``: paper 001's skew-aware views (constant-delay
        listing, counts kept factorized for pairs of hubs; required for directed graphs);
        ``"auto"``: the stores wherever they can serve
        (``GPU_IVM_GRAPH_LOCAL=0`` in the environment makes it the views). See
        docs/queries.md.
    mode : {"general", "insert_only", "auto"}
        ``"insert_only"``: a stream without deletes, kept without partitions or views (faster;
        a delete is refused), ``"auto"``: insert-only until the first delete, then general;
        see :mod:`gpu_ivm.insert_only` and docs/modes.md.

    Examples
    --------
    >>> g = GraphEngine()
    >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> g.count()
    1
    >>> rep = g.apply({"src": [3, 1], "dst": [4, 4], "sign": [1, 1]})
    >>> g.count(), rep.delta
    (2, 1)
    >>> g.apply({"src": [1], "dst": [2], "sign": [-1]}).triangles  # {1, 3, 4} is left
    1
    """

    names = ("E",)
    unit_multiplicities = True
    #: during a batch on a device: (its Δ keys, x, y, Δ of its pairs x < y), uploaded with it
    _half: tuple | None = None
    #: batches held in device memory: prepared there, and of those judged by the host's
    #: rules on their downloaded columns (a bad row, a conflict, a cancelled new vertex)
    device_batches: int = 0
    device_to_host: int = 0
    #: the graph in its compact form (:mod:`gpu_ivm.compact`), or None; while it is set the
    #: stores are out of date and :attr:`rels` rebuilds them from it on first use
    _compact: CompactGraph | None = None

    def __init__(self, *, directed: bool = False, epsilon: EpsilonLike = "auto",
                 backend: str | Backend | None = None, on_conflict: str = "error",
                 adaptive: bool = True, maintain: str | Iterable[str] | None = None,
                 track_changes: bool = False, mode: str = "general",
                 results_from: str = "auto"):
        if on_conflict not in ("error", "ignore"):
            raise InputError(f"on_conflict must be 'error' or 'ignore', got {on_conflict!r}",
                             column="on_conflict")
        self.directed = bool(directed)
        eps = parse_epsilon_setting(epsilon)
        self.on_conflict = on_conflict
        super().__init__([eps], backend)
        self.symmetric = not self.directed
        self.rels[0].symmetric = self.symmetric
        self.policy = AdaptivePolicy(enabled=adaptive)
        # the free-query structures keep a fixed ε (1/2 under "auto")
        self._init_queries(maintain, [Fraction(1, 2) if eps is None else eps] * 3,
                           track_changes, results_from)

    @property
    def epsilon(self) -> Fraction:
        """The ε in use (under ``epsilon="auto"``, the one chosen at the last rebuild)."""
        return self._rels[0].eps

    @property
    def epsilon_auto(self) -> bool:
        """True when the engine picks ε itself (``epsilon="auto"``) at every rebuild."""
        return self._rels[0].auto

    #: the relation's stores (one, E) and the thresholds' base N (IVM^ε's N, kept within
    #: [|D|, 4|D|]): read, they are brought up to date from the compact form first
    rels = _StoresState()
    N = _StoresState()

    @property
    def compact_form(self) -> bool:
        """Whether the graph is held in the compact form of :mod:`gpu_ivm.compact` now (a
        small undirected graph on the cpu backend; the stores are rebuilt when read)."""
        return self._compact is not None

    @property
    def size(self) -> int:
        """|D|: the number of stored tuples (undirected: both orientations of each edge)."""
        if self._compact is not None:
            return len(self._compact)
        return len(self._rels[0])

    # ------------------------------------------------------------------ summary
    def __len__(self) -> int:
        """The number of stored edges (:attr:`num_edges`: undirected edges once each)."""
        return self.num_edges

    def __bool__(self) -> bool:
        return True  # an engine is truthy even while it holds no edge

    def __repr__(self) -> str:
        """Form, ε, edges, triangles and backend, from maintained counters (no recount).

        >>> g = GraphEngine()
        >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
        >>> g
        GraphEngine(undirected, epsilon=1 (auto), edges=3, triangles=1, backend='cpu')
        >>> GraphEngine(epsilon="1/2")
        GraphEngine(undirected, epsilon=1/2, edges=0, triangles=0, backend='cpu')

        ``(auto)``: ε was chosen by the engine (``epsilon="auto"``, the default).
        """
        extra = f", maintain={list(self.maintain[1:])}" if self.fq is not None else ""
        return (f"GraphEngine({'directed' if self.directed else 'undirected'}, "
                f"epsilon={self.epsilon}{' (auto)' if self.epsilon_auto else ''}, "
                f"edges={self.num_edges}, "
                f"{'cycles' if self.directed else 'triangles'}={self.count()}, "
                f"backend={self.backend.name!r}{extra})")

    # ------------------------------------------------------------------ results
    @property
    def _per_count(self) -> int:
        return 3 if self.directed else 6

    def count(self) -> int:
        """Triangles of the undirected graph (directed: directed 3-cycles)."""
        return self.Q // self._per_count

    @property
    def num_edges(self) -> int:
        """Edges of the graph (undirected: each counted once)."""
        return self.size if self.directed else self.size // 2

    @property
    def num_vertices(self) -> int:
        """Vertices seen so far (including ones whose edges were all deleted)."""
        return len(self.encoder)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The current edges as user keys (undirected: once each, in id order)."""
        keys, _ = self.rels[0].items()
        a, b = unpack(self.backend.to_host(keys))
        if not self.directed:
            keep = a < b
            a, b = a[keep], b[keep]
        return self.encoder.decode(a), self.encoder.decode(b)

    # ------------------------------------------------------------------ loading
    def load(self, edges: Any, **read_options: Any) -> BatchReport:
        """Load the base graph (preprocessing: strict partition, views, static count).

        ``edges`` is anything :func:`gpu_ivm.io.read_edges` reads (a file, arrays, a table);
        ``read_options`` (``src=``, ``dst=``, ``time=``, ``header=``, ``ids=``) go to it.
        Duplicate edges are merged and self-loops dropped. The engine must be empty.
        """
        t0 = self._clock()
        if self.size or self.batches_applied:
            raise InputError("load() needs an empty engine; apply batches instead")
        # kernels loaded (or compiled, cold cache) once per process before any timed batch
        warm_up(self.backend, self.maintain, self.track_changes)
        got = self._load_device(edges, read_options)
        if isinstance(got, dict):  # a key the device refused: the host's reader judges it
            edges, read_options, got = got, {}, None
        if got is not None:  # columns already on the device: prepared there
            keys, n, n_loops = got
        else:
            el = io.read_edges(edges, **read_options)
            src, dst = el.src, el.dst
            loops = src == dst
            n_loops = int(np.count_nonzero(loops))
            keys_all = np.concatenate([src, dst])
            ids, new = self.encoder.plan(keys_all, "src")
            self.encoder.commit(new)
            n = src.shape[0]
            a, b = ids[:n][~loops], ids[n:][~loops]
            keys = self.backend.to_device(self._directed_keys(a, b))  # the load's one upload
        ones = self.xp.ones(keys.shape[0], np.int64)
        self._build(keys, ones)
        self._queries_build([(keys >> 32, keys & 0xFFFFFFFF, ones)] * 3)
        self.batches_applied = 0
        return self._report(t0, batch=-1, rows=n, updates=self.num_edges,
                            triangles=self.count(), delta=self.count(), path="load",
                            self_loops=n_loops)

    def _load_device(self, edges: Any, read_options: dict):
        """(sorted unique keys, rows, self-loops) of an edge list held in device memory,
        encoded and deduplicated there (:func:`gpu_ivm.device_batch.prepare_load`), or None
        for an edge list on the host. An edge list with a uint64 key above the int64 range
        comes back as its columns downloaded once (a dict), for the host's reader to judge."""
        if self.backend.name == "cpu":
            return None
        cols = device_columns(edges, self.xp, updates=False, read_options=read_options)
        if cols is None:
            return None
        table = self._key_table()
        got = device_batch.prepare_load(self.backend, table, self.encoder, cols, self.directed)
        if got is None:
            return cols.to_host(self.backend)
        keys, new_keys, n_loops = got
        if new_keys is not None:
            n0 = len(self.encoder)
            self.encoder.commit(self.backend.to_host(new_keys))
            table.added(self.encoder, new_keys, n0)
        return keys, cols.rows, n_loops

    def _directed_keys(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.directed:
            k = pack(a, b)
        else:
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            k = pack(lo, hi)
        k = np.sort(k)
        k = k[np.r_[True, k[1:] != k[:-1]]] if k.shape[0] else k
        if not self.directed:
            lo, hi = unpack(k)
            k = np.sort(np.concatenate([k, pack(hi, lo)]))
        return k

    def _build(self, keys: np.ndarray, vals: np.ndarray) -> None:
        """Preprocessing from a full tuple set: N = 2|D| + 1, strict partition, views, Q."""
        t0 = self._clock()
        # id-indexed arrays get 1/8 headroom: the stream's first new vertices then do not
        # double them all inside a timed batch (45 ms of the first batch after loading R-MAT 20)
        n_ids = max(len(self.encoder), 1)
        self._grow_ids(n_ids + n_ids // 8)
        self.N = 2 * keys.shape[0] + 1
        self.rels[0].rebuild(self.N, keys, vals)
        self._rebuild_views()
        t1 = self._clock()
        self.Q = self._static_q(keys)
        t2 = self._clock()
        self.stale = False
        self._calibrate_delta()
        self.policy.observe_rebuild(t2 - t0, keys.shape[0])
        self.policy.observe_recompute(t2 - t1, keys.shape[0])
        if self.policy.recompute_sec_per_tuple is not None:
            self._recompute_calibrated_at = keys.shape[0]

    def _static_q(self, keys: np.ndarray) -> int:
        from .static import count_triangles_backend, count_triangles_dense

        n = max(len(self.encoder), 1)
        a, b = unpack(keys)
        if self.directed:  # every arc; each 3-cycle is found 3 times by the IVM^ε count
            return 3 * count_triangles_backend(a, b, self.backend, n=n, directed=True)
        keep = a < b
        if self.backend.name == "cuda":  # orient and count on the device
            return 6 * count_triangles_backend(a[keep], b[keep], self.backend, n=n)
        return 6 * count_triangles_dense(a[keep], b[keep], n)

    def _count_from_stores(self) -> int:
        E = self.rels[0]
        keys = self.xp.concatenate([E.h.items(sort=False)[0], E.l.items(sort=False)[0]])
        return self._static_q(keys)

    def recount(self) -> int:
        """The count recomputed from the stored edges with the IVM^ε kernels (for checking);
        a state left stale by the recompute path is brought up to date first."""
        self._freshen()
        keys, vals = self.rels[0].items()
        a, b = unpack(keys)
        w = self._path_weights(0, a, b, self.symmetric)
        return sum_products(vals, w) // self._per_count

    # ------------------------------------------------------------------ batches
    def apply(self, updates: Any, *, batch_id: int | None = None,
              **read_options: Any) -> BatchReport:
        """Apply one batch of edge inserts (sign +1) and deletes (sign -1) atomically.

        ``updates`` has columns ``src``, ``dst``, ``sign`` (anything
        :func:`gpu_ivm.io.read_graph_updates` reads; ``read_options`` such as ``src=``,
        ``dst=``, ``sign=``, ``header=``, ``ids=`` go to it). Validation happens before any
        change: a bad batch raises :class:`~gpu_ivm.errors.InputError` and leaves the engine
        as it was.

        ``batch_id`` (optional, increasing): the caller's id of this batch, kept as
        ``last_batch_id`` (and in snapshots); a batch whose id is not above it is a replay and
        is skipped (report ``path == "skipped"``), which makes replays after a restart safe.
        """
        # an engine that starts empty never calls load(): its first batch warms up, untimed
        warm_up(self.backend, self.maintain, self.track_changes)
        t0 = self._start_clock()
        skipped = self._skip_replayed(batch_id, t0)
        if skipped is not None:
            return skipped
        with self.backend.batch_scope():
            return self._apply_batch(updates, batch_id, t0, read_options)

    def _apply_batch(self, updates: Any, batch_id: int | None, t0: float,
                     read_options: dict, on_host: bool = False) -> BatchReport:
        """:meth:`apply` after the replay check (``t0``: the batch's start); ``on_host``:
        prepared on the host whatever its size (a device batch judged by the host's rules)."""
        device = self.backend.name != "cpu" and not on_host
        if device:  # columns already on the device stay there
            cols = device_columns(updates, self.xp, updates=True, read_options=read_options)
            if cols is not None:
                return self._apply_device(cols, batch_id, t0)
        u = io.read_graph_updates(updates, **read_options)
        if device and len(u) >= DEVICE_PREP_MIN and u.src.dtype == np.int64 \
                and self.encoder.kind != "str":  # a large batch: up once, prepared there
            cols = DeviceColumns(*self._upload([u.src, u.dst, u.sign]))
            return self._apply_device(cols, batch_id, t0)
        src, dst, sign, n_loops, row_idx = self._without_loops(u)
        m = src.shape[0]
        n0 = len(self.encoder)
        ids, new = self.encoder.plan(np.concatenate([src, dst]), "src")
        key = batch_prep.pair_keys(ids, m, self.directed)
        order = batch_prep.packed_order(key)
        gkey, net, starts, kk = batch_prep.sum_groups(key, order, sign, n0)
        batch = (len(u), n_loops, new, n0, t0, batch_id)
        if self._compact_takes(gkey.shape[0]):
            rep = self._apply_compact(gkey, net, kk, batch)
            if rep is not None:
                return rep
        room = n0 + new.shape[0] <= (self._id_bound or 0)  # no id array grows
        if kk.shape[0] and room and self._check_rides() and self._valid_unless_stored(net, kk):
            # the edges between known vertices are checked with the batch's phase: on a
            # device in its read, on the host as the store locates the keys (or just before
            # the first change); a conflict stops the batch before it changes anything
            # (not even an array's capacity) and it is done again, checked first
            try:
                return self._apply_groups(gkey, net, 0, batch, ahead=True)
            except SetViolation:
                pass
        present = np.zeros(gkey.shape[0], np.int64)
        checked = None  # indices of known edges validated on the device (presence not read)
        if kk.shape[0]:
            self._grow_ids(n0)
            checked = self._check_known(gkey, net, kk, present)
        after = present + net
        bad = (after < 0) | (after > 1)
        if checked is not None:
            bad[checked] = False
        ignored = 0
        keep = net != 0
        if bad.any():
            if self.on_conflict == "error":
                rows_kept = np.arange(m) if row_idx is None else row_idx
                raise self._conflict(bad, starts, order, rows_kept, sign, present, u)
            sizes = np.diff(np.r_[starts, m])
            ignored = int(sizes[bad].sum())
            keep &= ~bad
        if not keep.all():
            gkey, net = gkey[keep], net[keep]
        return self._apply_groups(gkey, net, ignored, batch, ahead=False)

    # ------------------------------------------------------------------ compact form
    def _compact_takes(self, n_edges: int) -> bool:
        """Whether a host batch of ``n_edges`` distinct edges may take the compact form
        (:mod:`gpu_ivm.compact`): an undirected engine on the cpu backend that maintains
        nothing but the count, outside the profile mode, not forced to recount, with the
        batch within :data:`~gpu_ivm.compact.COMPACT_MAX` tuples; the graph already in the
        compact form, or small enough (half the bound), fresh and with no heavy part (then
        the transposed heavy part and the view E_h·E_l are empty too)."""
        cap = compact.COMPACT_MAX
        if (not cap or 2 * n_edges > cap or not self.symmetric or self.fq is not None
                or self.backend.name != "cpu" or _engine.PROFILE_WORK
                or self.policy.force not in (None, "delta")):
            return False
        if self._compact is not None:
            return True
        E = self._rels[0]
        return not self.stale and 2 * len(E) <= cap and E.h.size == 0

    def _apply_compact(self, gkey: np.ndarray, net: np.ndarray, kk: np.ndarray,
                       batch: tuple) -> BatchReport | None:
        """Apply a batch's edge groups (sorted ``gkey`` of known and provisional ids, net
        changes ``net``; ``kk`` the groups between known vertices) to the compact form,
        taking it first from the stores where needed. None, with nothing changed, for a
        batch the general path must judge: a conflict under set semantics (which it words
        or skips), or a batch the overflow guard might refuse."""
        rows, n_loops, new, n0, t0, batch_id = batch
        if not self._valid_unless_stored(net, kk):
            return None
        gkey, net, fresh = self._kept_groups(gkey, net, new, n0)
        dkeys, dvals = batch_prep.symmetric_delta(gkey, net)
        entered = self._compact is None
        if entered:
            keys, _ = self._rels[0].items()  # multiplicities 1 (set semantics)
            self._compact = CompactGraph(keys)
        C = self._compact
        # the overflow guard of the graph form (_check_overflow's first case); a batch it
        # might refuse goes the general way, which words the error
        x = max(1, isqrt_ceil(len(C)) + isqrt_ceil(dkeys.shape[0]))
        if refuses([x, x, x]):
            delta, bad = 0, 1
        else:
            delta, bad = C.step(dkeys, dvals, n0 + fresh.shape[0])
        if bad:
            if entered:  # the stores are still the graph's state
                self._compact = None
            else:
                self._leave_compact()
            return None
        self.encoder.commit(fresh)
        self.Q += delta
        if len(C) > compact.COMPACT_MAX:
            self._leave_compact()  # grown past the bound: the stores from here on
        rep = self._report(t0, batch=self.batches_applied, rows=rows,
                           updates=int(gkey.shape[0]), triangles=self.count(),
                           delta=delta // self._per_count, path="delta", self_loops=n_loops)
        return self._done(rep, batch_id)

    def _leave_compact(self) -> None:
        """Rebuild the stores from the compact form and drop it: a strict repartition with
        N = 2|D| + 1 (ε chosen again when automatic), as at a major rebalancing."""
        C, self._compact = self._compact, None
        keys = C.keys
        n_ids = max(len(self.encoder), 1)
        self._grow_ids(n_ids + n_ids // 8)
        self.N = 2 * keys.shape[0] + 1
        self._rels[0].rebuild(self.N, keys, np.ones(keys.shape[0], np.int64))
        try:
            self._rebuild_views()
        except ResourceLimitError as e:
            self._degrade(e)

    def _check_rides(self) -> bool:
        """Whether the set check can ride on the batch's own work: on a device (the phase's
        read), on the host where the light store's add is the batch's first change (no
        heavy tuple: ε = 1). Elsewhere the check before the batch is the cheaper one (it
        probes one orientation of the known edges, the rows with a bitmap by their bit)."""
        E = self.rels[0]
        return self.backend.name != "cpu" or (E.h.size == 0 and E.ht.size == 0)

    @staticmethod
    def _valid_unless_stored(net: np.ndarray, kk: np.ndarray) -> bool:
        """Whether the batch's groups (net changes ``net``; ``kk`` those between known
        vertices) can only conflict with a stored edge: no net change beyond ±1, and no
        net delete of an edge with a new vertex (absent for sure)."""
        if np.abs(net).max(initial=0) > 1:
            return False
        unknown = np.ones(net.shape[0], np.bool_)
        unknown[kk] = False
        return not (unknown & (net < 0)).any()

    def _kept_groups(self, gkey: np.ndarray, net: np.ndarray, new: np.ndarray, n0: int):
        """(keys, net changes, new keys to commit) of a batch's groups with a net change: the
        new ids (provisional, from ``n0``; ``new`` their keys) that surviving updates use,
        renumbered densely, and only their keys committed."""
        keep = net != 0
        if not keep.all():
            gkey, net = gkey[keep], net[keep]
        used = batch_prep.used_new_ids(gkey, n0) if new.shape[0] else gkey[:0]
        if used.shape[0] and used[-1] >= n0 + used.shape[0]:
            gkey = batch_prep.renumber(gkey, used, n0, self.directed)
            o = np.argsort(gkey)  # unique keys
            gkey, net = gkey[o], net[o]
        return gkey, net, new[used - n0] if used.shape[0] else new[:0]

    def _apply_groups(self, gkey: np.ndarray, net: np.ndarray, ignored: int, batch: tuple,
                      ahead: bool) -> BatchReport:
        """Apply the batch's edge groups (sorted ``gkey`` with net changes ``net``), checked
        against the stored edges before, or with ``ahead`` checked as the batch runs
        (:attr:`_unverified`): :class:`~gpu_ivm.errors.SetViolation` when that check fails,
        with nothing changed."""
        rows, n_loops, new, n0, t0, batch_id = batch
        gkey, net, fresh = self._kept_groups(gkey, net, new, n0)
        hkeys, hvals = self._directed_delta(gkey, net)
        # set semantics: a delete's edge is present (1), an insert's absent (0)
        old = (hvals < 0).astype(np.int64)
        # the validated batch goes to the backend's memory once (with the pairs x < y of an
        # undirected batch, which the count reads, on a device)
        pairs = self._pair_half(hkeys, hvals) if self.xp is not np and self.symmetric else []
        arrays = self._upload([hkeys, hvals, old, *pairs])
        return self._apply_edges(arrays, int(gkey.shape[0]), int(old.sum()),
                                 n0 + fresh.shape[0], lambda: self.encoder.commit(fresh),
                                 ignored, batch, ahead)

    def _apply_edges(self, arrays: list, n_updates: int, n_deletes: int, n_ids: int,
                     commit, ignored: int, batch: tuple, ahead: bool) -> BatchReport:
        """Apply a batch's edges in the backend's memory: ``arrays`` = the sorted unique keys
        (both orientations when undirected), their net signs and multiplicities before the
        batch, then the pairs x < y (x, y, net) where the count reads them; ``n_updates``
        edges, ``n_deletes`` of the keys deletes; ``commit`` makes the batch's new vertex
        ids (below ``n_ids``) real, once its set check has passed (``ahead``) or now."""
        rows, n_loops, _, _, t0, batch_id = batch
        dkeys, dvals, dold, *half = arrays
        norms = self._check_overflow({0: dvals})
        self._grow_ids(max(n_ids, 1))
        self._half = (dkeys, *half) if half else None
        q_before = self.Q
        stats0 = dict(self._stats)
        phases = [(0, dkeys, dvals)] if dkeys.shape[0] else []
        self._set_counts = (dkeys.shape[0] - n_deletes, n_deletes)
        if ahead:  # the new ids become real once the check has passed
            self._unverified = commit
        else:
            commit()
        self._queries_before(phases)
        try:
            path = self._run_phases(phases, lambda k: self._q_delta, old=[dold])
            self._verified(0)  # no phase ran the check: nothing was stored to check
        finally:
            self._half = None
            self._set_counts = None
            self._unverified = None
        self._commit_norms(norms)
        # always called: a batch without net changes must still reset last_changes()
        self._queries_apply([(k, dkeys, dvals) for k in range(3)] if dkeys.shape[0] else [])
        rep = self._report(
            t0, batch=self.batches_applied, rows=rows, updates=n_updates,
            triangles=self.count(), delta=(self.Q - q_before) // self._per_count, path=path,
            ignored=ignored, self_loops=n_loops,
            major_rebalances=self._stats["major"] - stats0["major"],
            minor_moves=self._stats["moves"] - stats0["moves"])
        return self._done(rep, batch_id)

    # ------------------------------------------------------------------ device batches
    def _host_rules(self, cols, batch_id: int | None, t0: float) -> BatchReport:
        """A device batch that only the host's rules decide (nothing of it applied yet):
        its columns downloaded once and applied by the host's path."""
        self._drop_ahead()
        self.device_to_host += 1
        return self._apply_batch(cols.to_host(self.backend), batch_id, t0, {}, on_host=True)

    def _apply_device(self, cols, batch_id: int | None, t0: float) -> BatchReport:
        """:meth:`apply` of a batch in device memory, prepared there
        (:mod:`gpu_ivm.device_batch`); what only the host's rules decide (a bad row, a
        conflict) is applied from the columns downloaded once, by the host's path."""
        be = self.backend
        self.device_batches += 1
        table = self._key_table()
        early = self._phase_early()
        block = be.kernels.prep.counters(batch_prep.N_STATS + early) if early else None
        done = device_batch.launch(be, table, self.encoder, cols, self.directed,
                                   None if block is None else block[:batch_prep.N_STATS])
        run = self._run_early(done, block[batch_prep.N_STATS:]) if early else None
        st = be.to_host(done.stats if block is None else block).tolist()  # the batch's read
        prep = device_batch.finish(be, table, self.encoder, cols, self.directed, done,
                                   st[:batch_prep.N_STATS])
        if run is not None:  # the phase launched with the preparation is this batch's phase
            if prep.host_rules or prep.n_new or not prep.keys.shape[0]:
                run.undo()
            else:
                self._ahead = (prep.keys, run, st[batch_prep.N_STATS:])
        try:
            return self._apply_prepared(prep, cols, batch_id, t0)
        finally:
            self._drop_ahead()  # not taken (an error before the phase): undone

    def _phase_early(self) -> int:
        """How many counter slots the phase takes when it can be launched with the batch's
        preparation, before the preparation's sizes are read (one read for both), else 0:
        an undirected engine whose state is in device arrays (the simulator's NumPy form runs
        the host's phase) and fresh, whose id arrays cover the known vertices, outside the
        profile mode. The phase then walks the preparation's
        padded arrays up to the counts on the device (``cuda_phase.bounded``); a batch that
        goes another way (new vertices, the host's rules, the recompute path) undoes it."""
        if (self.xp is np or not self.symmetric or self.stale or _engine.PROFILE_WORK
                or len(self.encoder) > (self._id_bound or 0) or not self._check_rides()):
            return 0
        return self.k.phase.N_THEN + 1

    def _run_early(self, done, counts):
        """The phase of the launched preparation ``done`` (its padded arrays, its device
        counts as limits), checked and counted in the same launches, into ``counts``."""
        out = done.out
        keys, vals = out[0], out[1]
        self._half = (keys, out[3], out[4], out[5])
        self._limits = done.limits()
        try:
            into = self._q_delta_into(self._q_delta)
            return self._phase_launch(0, keys, out[2], vals, None if into is None else
                                      lambda acc: into(keys, vals, acc), True, counts,
                                      self._limits[0])
        finally:
            self._half = None
            self._limits = None

    def _apply_prepared(self, prep, cols, batch_id: int | None, t0: float) -> BatchReport:
        """:meth:`_apply_device` once the batch's preparation is read back (``prep``)."""
        be = self.backend
        n0, n_new = prep.n0, prep.n_new
        if prep.host_rules:
            return self._host_rules(cols, batch_id, t0)
        half = list(prep.pairs) if self.xp is not np and self.symmetric else []
        arrays = [prep.keys, prep.vals, prep.old, *half]
        batch = (prep.rows, prep.loops, None, n0, t0, batch_id)

        def commit() -> None:
            if n_new:
                self.encoder.commit(be.to_host(prep.new_keys))
                self._key_table().added(self.encoder, prep.new_keys, n0)

        room = n0 + n_new <= (self._id_bound or 0)  # no id array grows
        if room and self._check_rides():
            try:  # checked with the batch's phase, as a host batch's known edges are
                return self._apply_edges(arrays, prep.n_pairs, prep.n_deletes, n0 + n_new,
                                         commit, 0, batch, ahead=True)
            except SetViolation:
                return self._host_rules(cols, batch_id, t0)
        self._grow_ids(max(n0 + n_new, 1))
        if prep.keys.shape[0] and self._conflicts(prep.keys, prep.vals):
            return self._host_rules(cols, batch_id, t0)
        return self._apply_edges(arrays, prep.n_pairs, prep.n_deletes, n0 + n_new, commit,
                                 0, batch, ahead=False)

    def _check_known(self, gkey, net, kk, present):
        """Set-semantics check of the batch's edges between known vertices (``gkey[kk]``)
        against the stored edges. On the host backend their presence is written into
        ``present``. On a device the check runs there and only its verdict comes back: returns
        ``kk``, all valid (their presence is not needed); on a conflict the presence is
        downloaded (for the error or the rows to skip) and None is returned."""
        be = self.backend
        E = self.rels[0]
        if be.xp is np:
            present[kk] = E.get(gkey[kk], assume_sorted=True)
            return None
        keys_d, net_d = self._upload([gkey[kk], net[kk]])
        got = be.xp.empty(kk.shape[0], np.int64)
        if not self.k.phase.check_sets(E.h.nt(), E.l.nt(), E.heavy, keys_d, net_d, got):
            return kk
        present[kk] = be.to_host(got)
        return None

    @staticmethod
    def _without_loops(u):
        """(src, dst, sign, self-loops dropped, rows kept) of a read batch: the rows without
        self-loops (rows kept: their indices, or None when there was none to drop)."""
        src, dst, sign = u.src, u.dst, u.sign
        loops = src == dst
        n_loops = int(np.count_nonzero(loops))
        row_idx = None
        if n_loops:
            row_idx = np.flatnonzero(~loops)
            src, dst, sign = src[row_idx], dst[row_idx], sign[row_idx]
        return src, dst, sign, n_loops, row_idx

    @staticmethod
    def _conflict(bad, starts, order, row_idx, sign, present, u) -> ConflictError:
        """The error for the earliest row at which some edge's multiplicity leaves {0, 1}
        when the batch's rows are taken in order."""
        m = order.shape[0]
        ends = np.r_[starts[1:], m]
        best = None
        for g in np.flatnonzero(bad).tolist():
            rows = np.sort(order[starts[g]:ends[g]])  # the group's rows in batch order
            running = int(present[g]) + np.cumsum(sign[rows])
            out = np.flatnonzero((running < 0) | (running > 1))
            j = int(out[0]) if out.shape[0] else rows.shape[0] - 1
            r = int(row_idx[rows[j]])
            if best is None or r < best[0]:
                best = (r, int(running[j]), int(present[g]))
        r, value, was = best
        s_key, d_key = u.src[r], u.dst[r]
        s_key = s_key.item() if hasattr(s_key, "item") else s_key
        d_key = d_key.item() if hasattr(d_key, "item") else d_key
        if value > 1:
            what = "inserts an edge that is already present" if was else \
                "inserts an edge twice"
        else:
            what = "deletes an edge that is absent" if not was else "deletes an edge twice"
        return ConflictError(f"this row {what}: ({s_key!r}, {d_key!r}); pass "
                             "on_conflict='ignore' to skip such rows", column="sign", row=r)

    def _directed_delta(self, gkey: np.ndarray, net: np.ndarray):
        if self.directed:
            return gkey, net
        # host arrays (the batch is prepared on the host); unique keys
        return batch_prep.symmetric_delta(gkey, net)

    def _grouped_pairs(self, n_tuples: int) -> bool:
        """Whether a batch of ``n_tuples`` Δ tuples takes ``pair_weights_grouped`` (undirected,
        no heavy part, large enough, a backend that has it); the adaptive policy's work
        estimate asks too (``recompute.grouped_units``)."""
        return (self.symmetric and n_tuples >= GROUPED_MIN and self.rels[0].h.size == 0
                and hasattr(self.k.delta, "pair_weights_grouped"))

    def _symmetric_first(self, dkeys, dvals, a, b) -> tuple:
        """(m, w) with Σ m_i·w_i = Σ over the batch's pairs of Δ(x,y)·(E²)(x,y) (the first
        term is 6 times that): by the IVM^ε path weights, or, when E has no heavy part (ε = 1)
        and the batch is large, with one pass per long row shared by the pairs at that row
        (``pair_weights_grouped``)."""
        E = self.rels[0]
        if self._grouped_pairs(dkeys.shape[0]):
            sel, w, work = self.k.delta.pair_weights_grouped(dkeys, E.l.nt(), E.id_capacity)
            if _engine.PROFILE_WORK:
                x, y = a[sel], b[sel]
                self.work["updates"] += int(sel.shape[0])
                self.work["entries"] += int(work.sum())
                self.work["min_degree_sum"] += int(np.minimum(E.degree(x), E.degree(y)).sum())
            return dvals[sel], w
        own = self._own_pairs(dkeys)
        if own is not None:
            hx, hy, hv = own
        else:
            half = self.xp.flatnonzero(a < b)  # one selection for the three arrays
            hx, hy, hv = a[half], b[half], dvals[half]
        return hv, self._path_weights(0, hx, hy, True)

    def _own_pairs(self, dkeys):
        """(x, y, Δ) of the pairs x < y uploaded with the batch whose Δ keys are ``dkeys``,
        or None (on the host, or for other keys)."""
        if self._half is None or self._half[0] is not dkeys:
            return None
        return self._half[1:]

    @staticmethod
    def _pair_half(hkeys: np.ndarray, hvals: np.ndarray) -> list[np.ndarray]:
        """(x, y, Δ) of the pairs x < y of a symmetric batch (host arrays): what the count
        reads of an undirected batch, uploaded with it so that the device selects nothing."""
        a, b = unpack(hkeys)
        half = np.flatnonzero(a < b)
        return [a[half], b[half], hvals[half]]

    def _upload(self, arrays: list[np.ndarray]) -> list:
        """Host int64 arrays in the backend's memory: on a device one transfer for all of
        them (views of one buffer), on the host the arrays themselves."""
        if self.xp is np:
            return arrays
        buf = self.backend.to_device(np.concatenate(arrays))
        ends = np.cumsum([a.shape[0] for a in arrays]).tolist()
        return [buf[e - a.shape[0]:e] for a, e in zip(arrays, ends)]

    def _snapshot_path(self, n_tuples: int) -> bool:
        """Whether a batch of ``n_tuples`` Δ tuples runs against the CSR copy of E
        (``kernels/adjacency.py``): only on a backend that has it, undirected, with no heavy
        part (every row in E_l, as ``epsilon="auto"`` keeps uniform graphs), from one Δ tuple
        per ``SNAPSHOT_IDS_PER_TUPLE`` ids, and not in the profile mode (whose counters are
        the stores' kernels'). The adaptive policy asks too (its rate differs)."""
        E = self.rels[0]
        adj = getattr(self.k, "adjacency", None)
        return not (adj is None or not self.symmetric or E.h.size or _engine.PROFILE_WORK
                    or n_tuples * adj.SNAPSHOT_IDS_PER_TUPLE < E.id_capacity)

    def _light_small(self, n_tuples: int) -> bool:
        """Whether a batch of ``n_tuples`` Δ tuples takes ``light_delta`` (both terms of the
        count delta in one call): on a backend that has it, undirected, no heavy part, at most
        ``LIGHT_DELTA_MAX`` tuples, and not in the profile mode (whose counters are the
        path weights')."""
        light = getattr(self.k, "light", None)
        return not (light is None or not self.symmetric or self.rels[0].h.size
                    or n_tuples > light.LIGHT_DELTA_MAX or _engine.PROFILE_WORK)

    def _snapshot_for(self, dkeys: np.ndarray):
        """The CSR copy of E that this batch runs against, or None (see
        :meth:`_snapshot_path`; also None when a multiplicity is not 1)."""
        if not self._snapshot_path(dkeys.shape[0]):
            return None
        E = self.rels[0]
        return self.k.adjacency.adjacency_snapshot(E.h.nt(), E.l.nt(), E.heavy, E.id_capacity)

    def _q_delta(self, dkeys: np.ndarray, dvals: np.ndarray) -> int:
        """3·tr(Δ·E²) + 3·tr(Δ²·E) + tr(Δ³) against the current (pre-batch) E."""
        E = self.rels[0]
        if self._light_small(dkeys.shape[0]):  # both terms in one call
            return self.k.light.light_delta(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy,
                                            E.id_capacity)
        snap = self._snapshot_for(dkeys)
        if snap is not None:  # a large batch: against a compact copy of E, one walk a pair
            terms = self.k.adjacency.pair_terms_snapshot(dkeys, dvals, *snap, E.l.nt(),
                                                         E.id_capacity)
            if terms is not None:
                sel, w = terms
                return sum_products(dvals[sel], w)
        coef, ms, ws, wedge = self._q_delta_terms(dkeys, dvals)
        if self.xp is np:
            return coef * sum_products(ms, ws) + int(wedge.sum())
        return self.k.phase.batch_total(ms, ws, coef, wedge)  # one launch, one read

    def _q_delta_terms(self, dkeys: np.ndarray, dvals: np.ndarray, acc=None) -> tuple:
        """(c, m, w, wedges) with the count delta c·Σ m_i·w_i + Σ wedges, against the
        stores (the path weights and the wedge terms, launched on a device). ``acc``: a
        device slot the wedge kernel also adds the whole delta into, where the backend has
        that kernel (``batch_wedges_total``); then None is returned."""
        E = self.rels[0]
        # the pairs uploaded with the batch need no unpacking
        a, b = (None, None) if self._own_pairs(dkeys) is not None else unpack(dkeys)
        if self.directed:  # the first term is 3·Σ Δ·w over the arcs
            coef, ms, ws = 3, dvals, self._path_weights(0, a, b, False)
        else:
            coef, (ms, ws) = 6, self._symmetric_first(dkeys, dvals, a, b)
        wedge = self.xp.empty(dkeys.shape[0], np.int64)
        both = getattr(self.k.delta, "batch_wedges_total", None) if acc is not None else None
        if both is not None:
            lims = {} if self._limits is None else {"lims": self._limits}
            both(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, self.symmetric, wedge, ms, ws,
                 coef, acc, **lims)
            return None
        self.k.delta.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, self.symmetric,
                                  wedge)
        return coef, ms, ws, wedge

    def _q_delta_into(self, q_delta):
        """On a device, :meth:`_q_delta` launched into a device slot (the stores' path: the
        compact copy of the graph is the CPU's)."""
        if self.xp is np or q_delta != self._q_delta:
            return None

        def launch(dkeys, dvals, acc) -> None:
            terms = self._q_delta_terms(dkeys, dvals, acc)
            if terms is not None:  # no fused kernel: the sums in a launch of their own
                coef, ms, ws, wedge = terms
                self.k.phase.batch_total_into(ms, ws, coef, wedge, acc)

        return launch


# the snapshot reader and the warm-up workload build engines of this class (see their modules)
snapshot.register_form("graph", GraphEngine)
warmup.register_engine("graph", GraphEngine)
