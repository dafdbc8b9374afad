"""The public side of the free-variable queries, mixed into GraphEngine and RelationEngine.

An engine created with ``maintain=`` (any of ``"vertex_counts"``, ``"edge_counts"``,
``"triangles"``, besides the count it always keeps) holds a
:class:`~gpu_ivm.queries.maintain.FreeQueries` next to its count state and feeds it the same
consolidated batches. In the graph form the three relations are three copies of the edge
relation (both directions when undirected), and results follow the simple-graph convention:
a vertex's count is the number of triangles through it (what ``networkx.triangles`` returns),
an edge's count the number of triangles containing it (each undirected edge once, src < dst),
and each triangle is listed once (a < b < c; directed 3-cycles start at their smallest vertex).

The views live in the backend's memory (``backend.xp``); results are computed there and
downloaded with ``backend.to_host`` right before ids are decoded and Arrow arrays are built.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..encoding import pack
from ..errors import InputError
from ..kernels.triple_sort import triple_order
from . import device_results as dr
from . import graph_local
from . import results as rs
from .graph_local import GraphLocalCounts
from .maintain import FreeQueries
from .storage import consolidate

RESULTS = ("vertex_counts", "edge_counts", "triangles")
DEFAULT_CHUNK = 1 << 16
#: where an engine's results come from (``GraphEngine(results_from=...)``): the count's own
#: stores (:mod:`.graph_local`), paper 001's views (:mod:`.maintain`), or the stores wherever
#: they can serve and ``GPU_IVM_GRAPH_LOCAL`` is not ``0``
RESULTS_FROM = ("auto", "stores", "views")


def parse_maintain(maintain) -> tuple[str, ...]:
    """Normalize ``maintain=``: a name or names among count, vertex_counts, edge_counts,
    triangles (``-`` or ``_``); the count is always kept.

    >>> parse_maintain("edge-counts")
    ('count', 'edge_counts')
    """
    if maintain is None:
        return ("count",)
    if isinstance(maintain, str):
        maintain = [maintain]
    names = []
    for m in maintain:
        if not isinstance(m, str):
            raise InputError(f"maintain= takes result names, got {m!r}", column="maintain")
        n = m.strip().lower().replace("-", "_")
        if n not in ("count",) + RESULTS:
            raise InputError(f"unknown result {m!r} in maintain=; choose from count, "
                             "vertex_counts, edge_counts, triangles", column="maintain")
        names.append(n)
    return ("count",) + tuple(r for r in RESULTS if r in names)


def _sorted_rows(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each row (a_i, b_i, c_i) of numbers sorted (smallest, middle, largest), by minima and
    maxima (``np.sort(..., axis=0)`` of the stacked columns sorts three values per row
    slowly).

    >>> [x.tolist() for x in _sorted_rows(np.array([3, 1]), np.array([1, 2]), np.array([2, 0]))]
    [[1, 0], [2, 1], [3, 2]]
    """
    lo_ab, hi_ab = np.minimum(a, b), np.maximum(a, b)
    return (np.minimum(lo_ab, c), np.maximum(lo_ab, np.minimum(hi_ab, c)),
            np.maximum(hi_ab, c))


def _first_of_each(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct row (a_i, b_i, c_i), in order (what
    ``np.unique(..., axis=1, return_index=True)`` gives, sorted; by one sort of the rows,
    :func:`~gpu_ivm.kernels.triple_sort.triple_order`, and the smallest position of each
    group of equal rows).

    >>> _first_of_each(np.array([1, 0, 1, 1]), np.array([2, 5, 2, 3]), np.array([3, 6, 3, 4]))
    array([0, 1, 3])
    """
    order = triple_order(a, b, c)
    sa, sb, sc = a[order], b[order], c[order]
    new = np.ones(order.shape[0], bool)
    new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1]) | (sc[1:] != sc[:-1])
    group = np.cumsum(new) - 1  # equal rows may come in any order: the smallest position
    first = np.full(int(group[-1]) + 1 if group.shape[0] else 0, order.shape[0], np.int64)
    np.minimum.at(first, group, order)
    return np.sort(first)


class FreeQueryResults:
    """Result access for engines that maintain Δ1, Δ2 or Δ3 (see the module docstring)."""

    fq: FreeQueries | None = None
    maintain: tuple[str, ...] = ("count",)
    # False until the free-query state was given tuples (load, a batch, a restore's rebuild)
    fq_fed = False

    # ------------------------------------------------------------------ wiring
    def _init_queries(self, maintain, epsilons, track_changes: bool,
                      results_from: str = "auto") -> None:
        if results_from not in RESULTS_FROM:
            raise InputError(f"results_from must be one of {', '.join(map(repr, RESULTS_FROM))}"
                             f", got {results_from!r}", column="results_from")
        self.maintain = parse_maintain(maintain)
        self.track_changes = bool(track_changes)
        self.results_from = results_from
        fams = [m for m in self.maintain if m != "count"]
        own = self._own_local_counts(fams)
        if results_from == "stores" and fams and not own:
            raise InputError("results_from='stores' needs an undirected graph engine (its "
                             "results are read off the count's stores); use 'views' or "
                             "'auto'", column="results_from")
        if own and (results_from == "stores"
                    or (results_from == "auto" and graph_local.enabled())):
            self.fq = GraphLocalCounts(lambda: self.rels[0], fams, self.backend.kernels,
                                       self.track_changes)
        else:
            self.fq = (FreeQueries(fams, epsilons, self.backend.kernels, track_changes)
                       if fams else None)
        if isinstance(self.fq, FreeQueries):
            self.fq.graph_undirected = self._graph and not self.directed
        self._changes_cache = None

    def _own_local_counts(self, fams: list[str]) -> bool:
        """Whether the engine can keep its results off its own stores (:mod:`.graph_local`):
        an undirected graph, families of :data:`graph_local.FAMILIES`, a kernel set with the
        ``local`` part."""
        return (bool(fams) and set(fams) <= set(graph_local.FAMILIES) and self._graph
                and not self.directed and hasattr(self.backend.kernels, "local"))

    @property
    def _graph(self) -> bool:
        return hasattr(self, "directed")

    def _queries_build(self, rels) -> None:
        """Preprocessing of the free-variable views from (a ids, b ids, mult) of R, S, T."""
        if self.fq is None:
            return
        for _, _, m in rels:
            if m.shape[0] and int(m.min()) <= 0:
                raise InputError("maintaining vertex_counts, edge_counts or triangles needs "
                                 "positive multiplicities (paper 001, footnote 2)",
                                 column="mult")
        self.fq.build(rels, max(len(self.encoder), 1))
        self.fq_fed = True
        self._changes_cache = None

    def _queries_rebuild(self) -> None:
        """Rebuild the free-variable state from the engine's relations (after a restore)."""
        if self.fq is None:
            return
        rels = []
        for k in range(3):
            K = self.rels[k % len(self.rels)]
            keys, vals = K.items()
            rels.append((keys >> 32, keys & 0xFFFFFFFF, vals))
        self._queries_build(rels)

    def _queries_check(self, phases, decode) -> None:
        """Reject (before any change) updates that would leave a negative multiplicity;
        ``decode(id)`` gives the user key of an id (new ids included)."""
        if self.fq is None:
            return
        for k, keys, deltas in phases:
            bad = self.fq.check(k, keys, deltas)
            if bad.shape[0]:
                ua = decode(int(keys[bad[0]] >> 32))
                ub = decode(int(keys[bad[0]] & 0xFFFFFFFF))
                ua = ua.item() if hasattr(ua, "item") else ua
                ub = ub.item() if hasattr(ub, "item") else ub
                raise InputError(
                    f"update to {self.names[k]}({ua!r}, {ub!r}) "
                    "deletes more than the tuple's multiplicity; maintaining vertex_counts, "
                    "edge_counts or triangles needs multiplicities >= 0 (paper 001, footnote 2)",
                    column="mult")

    def _queries_before(self, phases) -> None:
        """Hand the batch to the free-query state before the engine's stores take it (what
        the state reads of the graph before the batch: the triangles a batch removes, when
        changes are tracked off the stores)."""
        if self.fq is not None and hasattr(self.fq, "before"):
            self.fq.before(phases)

    def _queries_apply(self, phases) -> None:
        if self.fq is None:
            return
        self.fq.apply(phases, max(len(self.encoder), 1))
        self.fq_fed = True
        self._changes_cache = None

    def _need(self, name: str) -> FreeQueries:
        if self.fq is None or name not in self.maintain:
            raise InputError(f"this engine does not maintain {name}; create it with "
                             f"maintain=[..., {name!r}]", column="maintain")
        return self.fq

    # ------------------------------------------------------------------ decoding
    def _host(self, *arrays):
        """Host (NumPy) copies of backend arrays: one array, or a tuple for several."""
        host = self.backend.to_host
        return host(arrays[0]) if len(arrays) == 1 else tuple(host(a) for a in arrays)

    def _decode(self, ids: np.ndarray) -> pa.Array:
        return self._user_array(self.encoder.decode(self._host(ids)))

    def _ids(self, keys) -> np.ndarray:
        arr = np.asarray(keys)
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        if arr.dtype.kind not in "iuO":
            raise InputError(f"keys must be integers or strings, got dtype {arr.dtype}",
                             column="key")
        if arr.dtype.kind == "u":
            arr = arr.astype(np.int64)
        return self.encoder.lookup(arr.ravel(), "key")

    def _canonical_triangles(self, a, b, c, m):
        if not self._graph:
            return a, b, c, m
        if self.directed:
            keep = (a < b) & (a < c)
        else:
            keep = (a < b) & (b < c)
        return a[keep], b[keep], c[keep], m[keep]

    def _user_triangles(self, a, b, c) -> list[pa.Array]:
        """User keys of triangles; in the graph form each row reordered by user key (sorted
        when undirected, rotated to start at its smallest key when directed)."""
        ua, ub, uc = (self.encoder.decode(np.asarray(x, np.int64)) for x in (a, b, c))
        if self._graph and ua.shape[0]:
            if self.directed:
                first_b = (ub < ua) & (ub < uc)
                first_c = (uc < ua) & (uc < ub)
                ua, ub, uc = (np.where(first_b, ub, np.where(first_c, uc, ua)),
                              np.where(first_b, uc, np.where(first_c, ua, ub)),
                              np.where(first_b, ua, np.where(first_c, ub, uc)))
            elif ua.dtype == object:
                st = np.sort(np.stack([ua, ub, uc]), axis=0)
                ua, ub, uc = st[0], st[1], st[2]
            else:
                ua, ub, uc = _sorted_rows(ua, ub, uc)
        return [self._user_array(x) for x in (ua, ub, uc)]

    def _user_edges(self, a, b) -> list[pa.Array]:
        """User keys of edges; undirected edges as (smaller key, larger key)."""
        ua, ub = self.encoder.decode(np.asarray(a, np.int64)), self.encoder.decode(
            np.asarray(b, np.int64))
        if self._graph and not self.directed and ua.shape[0]:
            swap = ub < ua
            ua, ub = np.where(swap, ub, ua), np.where(swap, ua, ub)
        return [self._user_array(ua), self._user_array(ub)]

    @staticmethod
    def _user_array(vals: np.ndarray) -> pa.Array:
        if vals.dtype == object:
            return pa.array(vals.tolist(), pa.string())
        return pa.array(vals, pa.int64())

    def _triangle_batch(self, a, b, c, m) -> pa.RecordBatch:
        ua, ub, uc = self._user_triangles(a, b, c)
        cols = {"a": ua, "b": ub, "c": uc}
        if not self._graph:
            cols["mult"] = pa.array(m, pa.int64())
        return pa.RecordBatch.from_pydict(cols)

    @staticmethod
    def _chunks(table: dict, n: int, chunk_size: int) -> Iterator[pa.RecordBatch]:
        full = pa.RecordBatch.from_pydict(table)
        if n == 0:
            yield full
            return
        for s in range(0, n, chunk_size):
            yield full.slice(s, chunk_size)

    @staticmethod
    def _check_chunk(chunk_size: int) -> int:
        if not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise InputError(f"chunk_size must be a positive integer, got {chunk_size!r}",
                             column="chunk_size")
        return int(chunk_size)

    # ------------------------------------------------------------------ results
    def vertex_counts(self, chunk_size: int = DEFAULT_CHUNK, *, as_: str = "arrow"):
        """Per-vertex triangle counts Δ1 as Arrow record batches (``vertex``, ``triangles``),
        sorted by internal id: one row per vertex in at least one triangle (nonzero count).
        Vertices in no triangle — with or without edges — are left out (``vertex_count(v)``
        gives 0 for them; :func:`gpu_ivm.vertex_triangle_counts` lists every vertex, as
        ``networkx.triangles`` does). In the relation form ``vertex`` is the A value and a row
        is a value with Δ1 ≠ 0.

        ``as_="device"`` returns the whole result as a dict of the backend's arrays (CuPy on
        a GPU, no host copy; integer keys only), ``as_="cudf"`` as a cuDF DataFrame over them
        (:mod:`gpu_ivm.queries.device_results`); the rows are the same, in the same order.
        """
        fq = self._need("vertex_counts")
        chunk_size = self._check_chunk(chunk_size)
        if dr.check_form(as_) == "arrow":
            return self._vertex_batches(fq, chunk_size)
        ids, m = rs.vertex_counts(fq)
        if self._graph and not self.directed:
            m = m // 2
        return dr.frame({"vertex": dr.user_keys(self, ids), "triangles": m}, as_)

    def _vertex_batches(self, fq, chunk_size: int) -> Iterator[pa.RecordBatch]:
        ids, m = self._host(*rs.vertex_counts(fq))
        if self._graph and not self.directed:
            m = m // 2
        yield from self._chunks({"vertex": self._decode(ids), "triangles": pa.array(m)},
                                ids.shape[0], chunk_size)

    def edge_counts(self, chunk_size: int = DEFAULT_CHUNK, *, as_: str = "arrow"):
        """Per-edge triangle counts Δ2 as Arrow record batches (``src``, ``dst``,
        ``triangles``); edges in no triangle are left out. ``as_``: as for
        :meth:`vertex_counts`."""
        fq = self._need("edge_counts")
        chunk_size = self._check_chunk(chunk_size)
        form = dr.check_form(as_)
        a, b, m = rs.edge_counts(fq, upper=self._graph and not self.directed)
        if self._graph and not self.directed:
            keep = a < b
            a, b, m = a[keep], b[keep], m[keep]
        if form == "arrow":
            return self._edge_batches(a, b, m, chunk_size)
        us, ud = dr.ordered_edges(self.xp, dr.user_keys(self, a), dr.user_keys(self, b),
                                  self._graph and not self.directed)
        return dr.frame({"src": us, "dst": ud, "triangles": m}, as_)

    def _edge_batches(self, a, b, m, chunk_size: int) -> Iterator[pa.RecordBatch]:
        a, b, m = self._host(a, b, m)
        us, ud = self._user_edges(a, b)
        yield from self._chunks({"src": us, "dst": ud, "triangles": pa.array(m)}, a.shape[0],
                                chunk_size)

    def triangles(self, chunk_size: int = DEFAULT_CHUNK, *, as_: str = "arrow"):
        """The triangles Δ3 as Arrow record batches of at most ``chunk_size`` rows (``a``,
        ``b``, ``c``, and ``mult`` in the relation form), each exactly once.

        The batches are produced lazily from the five disjoint skew-aware views, or, on an
        undirected graph that keeps its results off the count's stores, listed off them
        (:mod:`gpu_ivm.queries.graph_local`); applying a batch while iterating raises
        ``RuntimeError``. ``as_="device"`` / ``"cudf"``: every
        triangle at once, in device memory (as for :meth:`vertex_counts`)."""
        fq = self._need("triangles")
        chunk_size = self._check_chunk(chunk_size)
        if dr.check_form(as_) == "arrow":
            return self._triangle_batches(fq, chunk_size)
        xp = self.xp
        parts = [self._canonical_triangles(*p) for p in rs.triangle_parts(fq, chunk_size)]
        a, b, c, m = ([xp.concatenate([p[i] for p in parts]) for i in range(4)] if parts
                      else [xp.zeros(0, np.int64)] * 4)
        ua, ub, uc = dr.ordered_triangles(xp, *(dr.user_keys(self, x) for x in (a, b, c)),
                                          self._graph, self._graph and self.directed)
        cols = {"a": ua, "b": ub, "c": uc}
        if not self._graph:
            cols["mult"] = m
        return dr.frame(cols, as_)

    def _triangle_batches(self, fq, chunk_size: int) -> Iterator[pa.RecordBatch]:
        version = self.batches_applied
        buf: list[tuple[np.ndarray, ...]] = []
        held = 0
        for part in rs.triangle_parts(fq, chunk_size):
            if self.batches_applied != version:
                raise RuntimeError("the engine applied a batch during triangles() enumeration")
            a, b, c, m = self._host(*self._canonical_triangles(*part))
            buf.append((a, b, c, m))
            held += a.shape[0]
            while held >= chunk_size:
                cat = [np.concatenate([p[i] for p in buf]) for i in range(4)]
                yield self._triangle_batch(*(x[:chunk_size] for x in cat))
                rest = [x[chunk_size:] for x in cat]
                buf = [tuple(rest)]
                held = rest[0].shape[0]
        if held or not buf:
            cat = [np.concatenate([p[i] for p in buf]) if buf else np.zeros(0, np.int64)
                   for i in range(4)]
            yield self._triangle_batch(*cat)

    def result_table(self, name: str) -> pa.Table:
        """One maintained result as a single Arrow table (``vertex_counts``, ``edge_counts``
        or ``triangles``)."""
        n = parse_maintain(name)[-1]
        gen = {"vertex_counts": self.vertex_counts, "edge_counts": self.edge_counts,
               "triangles": self.triangles}.get(n)
        if gen is None:
            raise InputError(f"{name!r} is not a result table", column="name")
        return pa.Table.from_batches(list(gen(1 << 30)))

    # ------------------------------------------------------------------ lookups
    def vertex_count(self, v: Any) -> int | np.ndarray:
        """Triangles through vertex ``v`` (Δ1); an array of keys gives an array of counts.
        Unknown vertices count 0."""
        fq = self._need("vertex_counts")
        scalar = np.ndim(v) == 0
        ids = self._ids([v] if scalar else v)
        out = np.zeros(ids.shape[0], np.int64)
        ok = (ids >= 0) & (ids < fq.cap)
        out[ok] = self._host(rs.vertex_lookup(fq, ids[ok]))
        if self._graph and not self.directed:
            out //= 2
        return int(out[0]) if scalar else out

    def edge_count(self, u: Any, v: Any) -> int | np.ndarray:
        """Triangles containing edge (u, v) (Δ2(u, v)); arrays give an array. Absent edges
        count 0."""
        fq = self._need("edge_counts")
        scalar = np.ndim(u) == 0 and np.ndim(v) == 0
        a = self._ids([u] if scalar else u)
        b = self._ids([v] if scalar else v)
        if a.shape != b.shape:
            raise InputError(f"edge_count needs as many u as v keys ({a.shape[0]} vs "
                             f"{b.shape[0]})", column="key")
        out = np.zeros(a.shape[0], np.int64)
        ok = (a >= 0) & (b >= 0) & (a < fq.cap) & (b < fq.cap)
        out[ok] = self._host(rs.edge_lookup(fq, a[ok], b[ok]))
        return int(out[0]) if scalar else out

    def triangles_of(self, v: Any) -> pa.Table:
        """The triangles through vertex ``v`` (or any of an array of vertices) as an Arrow
        table; in the relation form, the Δ3 tuples whose A value is ``v``."""
        fq = self._need("triangles")
        ids = self._ids([v] if np.ndim(v) == 0 else v)
        ids = ids[(ids >= 0) & (ids < fq.cap)]
        a, b, c, m = self._host(*rs.triangles_with(fq, np.unique(ids)))
        if self._graph:
            if self.directed:  # rotate each cycle to start at its smallest id
                lo = np.minimum(a, np.minimum(b, c))
                rot1 = lo == b
                rot2 = lo == c
                a, b, c = (np.where(rot1, b, np.where(rot2, c, a)),
                           np.where(rot1, c, np.where(rot2, a, b)),
                           np.where(rot1, a, np.where(rot2, b, c)))
            else:
                keep = b < c
                a, b, c, m = a[keep], b[keep], c[keep], m[keep]
                a, b, c = _sorted_rows(a, b, c)
            if a.shape[0]:  # a triangle through two asked vertices is found twice
                first = _first_of_each(a, b, c)
                a, b, c, m = a[first], b[first], c[first], m[first]
        return pa.Table.from_batches([self._triangle_batch(a, b, c, m)])

    # ------------------------------------------------------------------ change feed
    def last_changes(self) -> dict[str, pa.Table]:
        """For each maintained result, the rows whose value changed in the last batch, with
        ``old`` and ``new`` values (needs ``track_changes=True``)."""
        if self.fq is None:
            raise InputError("this engine maintains no vertex_counts, edge_counts or "
                             "triangles; create it with maintain=[...]", column="maintain")
        if not self.track_changes:
            raise InputError("last_changes() needs an engine created with track_changes=True",
                             column="track_changes")
        if self._changes_cache is None:
            self._changes_cache = self._compute_changes()
        return self._changes_cache

    def _compute_changes(self) -> dict[str, pa.Table]:
        fq = self.fq
        a, b, c, w = fq.changed_triangles()
        out = {}
        graph_und = self._graph and not self.directed
        if "vertex_counts" in self.maintain:
            ids, d = consolidate(a, w, fq.kernels)
            new = rs.vertex_lookup(fq, ids)
            ids, d, new = self._host(ids, d, new)
            if graph_und:
                new, d = new // 2, d // 2
            out["vertex_counts"] = pa.table({"vertex": self._decode(ids),
                                             "old": pa.array(new - d), "new": pa.array(new)})
        if "edge_counts" in self.maintain:
            keys, d = consolidate(pack(a, b), w, fq.kernels)
            ea, eb = keys >> 32, keys & 0xFFFFFFFF
            if graph_und:
                keep = ea < eb
                ea, eb, d = ea[keep], eb[keep], d[keep]
            new = rs.edge_lookup(fq, ea, eb)
            ea, eb, d, new = self._host(ea, eb, d, new)
            us, ud = self._user_edges(ea, eb)
            out["edge_counts"] = pa.table({"src": us, "dst": ud,
                                           "old": pa.array(new - d), "new": pa.array(new)})
        if "triangles" in self.maintain:
            ta, tb, tc, d = self._canonical_triangles(a, b, c, w)
            r, s, t = fq.rels
            new = r.get(pack(ta, tb)) * s.get(pack(tb, tc)) * t.get(pack(tc, ta))
            ta, tb, tc, d, new = self._host(ta, tb, tc, d, new)
            ua, ub, uc = self._user_triangles(ta, tb, tc)
            cols = {"a": ua, "b": ub, "c": uc, "old": pa.array(new - d), "new": pa.array(new)}
            out["triangles"] = pa.table(cols)
        return out


