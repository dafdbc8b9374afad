"""HyperCube (shares) scale-out of the triangle queries over k³ shards.

Write the triangle query as Q = Σ_{a,b,c} R(a,b)·S(b,c)·T(c,a) with R = S = T = E, the directed
edge relation (an undirected graph stores each edge in both directions, so Q = 6·triangles;
a directed graph gives Q = 3·directed 3-cycles). With a hash h: vertex → [0, k), shard
(i, j, l) ∈ [0, k)³ keeps

* R_s = {(a, b) ∈ E : h(a) = i, h(b) = j}   — an edge plays R in the k shards (h(a), h(b), *)
* S_s = {(b, c) ∈ E : h(b) = j, h(c) = l}   — S in the k shards (*, h(b), h(c))
* T_s = {(c, a) ∈ E : h(c) = l, h(a) = i}   — T in the k shards (h(a), *, h(c))

and runs a :class:`gpu_ivm.RelationEngine` on them. Its Q_s is the sum of
E(a,b)·E(b,c)·E(c,a) over exactly the vertex triples with (h(a), h(b), h(c)) = (i, j, l). Every
triple has exactly one such shard, whatever the collisions of h, so Σ_s Q_s = Q and the global
count is Σ_s Q_s / 6 (directed: / 3). Each update of a directed edge goes to 3k (shard,
role) pairs; an undirected update is two directed ones, so 6k rows.

Free-variable results (``maintain=``: "vertex_counts", "edge_counts", "triangles") are
maintained by every shard engine in the relation form: Δ1_s(a) = Σ_{b,c} R_s(a,b)·S_s(b,c)·
T_s(c,a), Δ2_s(a,b), and the tuples of Δ3_s, i.e. the same sums over the triples of the shard's
coordinate only. As every ordered triple lies in exactly one shard, Σ_s Δ1_s(v) =
Σ_{b,c} E(v,b)·E(b,c)·E(c,v) (undirected: 2·t(v), t(v) the triangles through v; directed: the
3-cycles through v), Σ_s Δ2_s(u,v) = Δ2(u,v) (undirected: the triangles containing {u,v}), and
the shards' Δ3 tuples partition the ordered triangles; keeping the tuples in canonical order
by user key (a < b < c; directed: a < b, a < c) lists each triangle once. The driver sums per
key (:meth:`~_HyperCubeDriver.result_table`; Spark: one task per shard, then
``groupBy(key).sum``). With ``track_changes=True`` each batch also yields change tables: the
shards return their deltas, the driver sums them per key and looks the new values of the
changed vertices / edges up in the k² / k shards of their bucket (one more round of shard
tasks), old = new − delta; triangles come with their global old/new from their one shard.

Set semantics (``on_conflict``, as :class:`gpu_ivm.GraphEngine`) are decided by each shard for
its own rows (:func:`resolve_conflicts`): a shard's R, S and T are exactly E restricted to
their bucket pairs and every replica of an edge receives all of the batch's rows for it, so
all replicas take the same decision; exactly one replica (R role, l = 0, src < dst when
undirected) reports each ignored row.

Shard state lives in a per-process registry (one Python worker keeps its shards' engines
between micro-batches) and is made durable after every batch in ``state_dir/shard-<s>`` (a
snapshot, or a write-ahead log entry with periodic snapshots, see :mod:`._state`). The driver
keeps a manifest: the last committed batch id and, per shard, the id of the last batch that
touched it and its Q_s (and ``maintain``, ``track_changes``, the key type; a batch's change
tables are written to ``result<id>-<table>.arrow`` before the manifest commits it). A task
whose registry entry is missing or not at the expected batch id (lost executor, another
worker ran the shard meanwhile, a failed attempt) restores the shard from its folder first.
A batch is committed only when every shard task succeeded, so a failed or replayed batch is
re-applied from the committed states and counted exactly once.

:class:`LocalHyperCube` runs the same tasks in-process (no Spark, for checks and tests);
:class:`SparkHyperCube` runs them as Arrow UDFs: ``mapInArrow`` routes rows to shards and
``groupBy("shard").applyInArrow`` applies each shard's rows (Spark ≥ 4; on 3.5 a
``repartition("shard")`` + ``mapInArrow`` does the same).

The code is split by job: :mod:`.hypercube_routing` (the vertex hash, shard coordinates,
routing), :mod:`.hypercube_shards` (the executor-side shard tasks and the engine registry),
:mod:`.hypercube_results` (the executor-side free-variable results), :mod:`.hypercube_driver`
(the driver's manifest, sums and batch commit); this module holds the two runners and
re-exports the functions named above.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from gpu_ivm.engine import BatchReport
from gpu_ivm.errors import ConflictError, InputError
from gpu_ivm.io import read_edges, read_graph_updates

from .hypercube_driver import _HyperCubeDriver, _sum_parts
from .hypercube_results import _ipc_table, _key_type, _query_schema, shard_lookup, shard_result
from .hypercube_routing import (
    _route_batches,
    _split_by_shard,
    route_updates,
    shard_coordinates,
    vertex_hash,
)
from .hypercube_shards import (
    BASE_BATCH_ID,
    RESULT_SCHEMA,
    _grouped_udf,
    _open_engine,
    _partition_task,
    _prepare,
    _query_grouped_udf,
    _query_partition_task,
    clear_registry,
    resolve_conflicts,
    shard_task,
)
from .ingest import collect_arrow, create_frame

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LocalHyperCube",
    "SparkHyperCube",
    "clear_registry",
    "resolve_conflicts",
    "route_updates",
    "shard_coordinates",
    "vertex_hash",
]


class LocalHyperCube(_HyperCubeDriver):
    """The HyperCube count (and maintained results) with every shard task run in this
    process (no Spark).

    Same state folder layout, tasks and results as :class:`SparkHyperCube`; used to check the
    partitioning and the restore path, and as the reference for the Spark runner. Parameters
    as :class:`SparkHyperCube` (without ``spark`` and ``method``); results are summed in this
    process. Shards are run in two
    phases: all of them resolve their conflicts (see :func:`resolve_conflicts`), then all
    apply, so a batch that raises :class:`~gpu_ivm.errors.ConflictError` changes no shard.

    Examples
    --------
    >>> import tempfile
    >>> hc = LocalHyperCube(tempfile.mkdtemp(), k=2)
    >>> _ = hc.load({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4]})
    >>> hc.count()
    1
    >>> hc.apply({"src": [1, 2], "dst": [4, 4], "sign": [1, 1]}, batch_id=0).triangles  # K4
    4
    >>> hc.apply({"src": [9], "dst": [8], "sign": [1]}, batch_id=0).path   # a replay
    'skipped'
    >>> hc = LocalHyperCube(tempfile.mkdtemp(), k=2, on_conflict="ignore")
    >>> _ = hc.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> rep = hc.apply({"src": [2, 3, 4, 4], "dst": [1, 4, 1, 2], "sign": [1, 1, 1, -1]})
    >>> rep.triangles, rep.updates, rep.ignored   # (2, 1) is present; (4, 2) is absent
    (2, 2, 2)

    Per-vertex counts summed over the shards, and their changes per batch:

    >>> hc = LocalHyperCube(tempfile.mkdtemp(), k=2, maintain="vertex_counts",
    ...                     track_changes=True)
    >>> _ = hc.load({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4]})
    >>> _ = hc.apply({"src": [1, 2], "dst": [4, 4], "sign": [1, 1]})
    >>> hc.result_table("vertex_counts").to_pylist()[0]
    {'vertex': 1, 'triangles': 3}
    >>> hc.last_changes()["vertex_counts"].column("old").to_pylist()
    [1, 1, 1, 0]
    """

    def load(self, edges: Any) -> BatchReport:
        """Load the base graph (anything :func:`gpu_ivm.io.read_edges` reads)."""
        t0 = time.perf_counter()
        if self.committed is not None:
            raise InputError("load() needs an empty HyperCube state folder")
        el = read_edges(edges)
        self._note_keys(el.src)
        routed = route_updates(el.src, el.dst, np.ones(len(el), np.int64), k=self.k,
                               directed=self.directed, seed=self.seed)
        rows = self._run(routed, "load", BASE_BATCH_ID)
        return self._commit(BASE_BATCH_ID, rows, t0, "load")

    def apply(self, updates: Any, *, batch_id: int | None = None) -> BatchReport:
        """Apply one batch (anything :func:`gpu_ivm.io.read_graph_updates` reads)."""
        t0 = time.perf_counter()
        if batch_id is None:
            batch_id = (self.committed if self.committed is not None else -1) + 1
        if self.committed is not None and batch_id <= self.committed:
            return self._skip(batch_id, t0)
        u = read_graph_updates(updates)
        self._note_keys(u.src)
        routed = route_updates(u.src, u.dst, u.sign, k=self.k, directed=self.directed,
                               seed=self.seed)
        rows = self._run(routed, "apply", batch_id)
        tables, extra = self._change_tables(batch_id, rows)
        return self._commit(batch_id, rows, t0, "hypercube", tables, extra)

    def _run(self, routed: pa.Table, mode: str, batch_id: int) -> list[dict]:
        exp = self._expected()
        kw = self._task_kwargs()
        if mode == "load":
            return [shard_task(s, part, mode=mode, batch_id=batch_id, expected=exp.get(s),
                               **kw)
                    for s, part in _split_by_shard(routed)]
        # two phases: every shard resolves its conflicts before any shard changes, so a
        # ConflictError leaves every shard (memory, registry and folder) as it was
        run_kw = {n: kw.pop(n) for n in ("epsilon", "maintain", "track_changes")}
        prepared = [_prepare(s, part, batch_id=batch_id, expected=exp.get(s), **kw)
                    for s, part in _split_by_shard(routed)]
        return [sh.run(resolved, mode=mode, batch_id=batch_id, directed=self.directed,
                       **run_kw, **counts)
                for sh, resolved, counts in prepared]

    def _engines(self, expected: dict[int, int]) -> Iterator[tuple[int, Any]]:
        kw = self._query_kwargs()
        for s in sorted(expected):
            eng = _open_engine(s, expected=expected[s], state_dir=kw["state_dir"],
                               snapshot_every=kw["snapshot_every"],
                               generation=kw["generation"])
            if eng is not None:
                yield s, eng

    def _gather(self, name: str) -> pa.Table:
        parts = [shard_result(eng, name, directed=self.directed)
                 for _, eng in self._engines(self._expected())]
        return _sum_parts(name, parts, self.key_type, self.directed)

    def _lookup(self, expected: dict[int, int], lookup: dict) -> list[dict[str, pa.Table]]:
        kt = _key_type(self.key_type)
        return [shard_lookup(eng, s, k=self.k, key_type=kt, **lookup)
                for s, eng in self._engines(expected)]


class SparkHyperCube(_HyperCubeDriver):
    """The HyperCube count (and maintained results) with shard tasks as Spark Arrow UDFs.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
    state_dir : path
        The folder for the manifest and the shards' snapshots; must be visible to the driver
        and every executor under the same path (local disk for ``local[*]``, a shared mount
        on a cluster). Re-opening a folder continues from its last committed batch.
    k : int
        Shards per dimension (k³ shards).
    directed, epsilon, seed, snapshot_every
        Directed 3-cycles instead of triangles; the shards' IVM^ε exponent; the hash seed;
        snapshot frequency (1: a snapshot of every touched shard after every batch; m: a log
        entry per batch and a snapshot every m-th).
    maintain : str or list of str, optional
        Free-variable results the shard engines keep besides the count ("vertex_counts",
        "edge_counts", "triangles"); :meth:`result_table` / :meth:`vertex_counts` /
        :meth:`edge_counts` / :meth:`triangles` sum them over the shards (:meth:`result_frame`
        as a DataFrame). Stored in the state folder: a re-opened folder keeps its results and
        cannot add new ones (``InputError``).
    track_changes : bool
        With ``maintain``: compute each batch's change tables (``last_changes()``, and the
        ``*_changes`` tables of :class:`~.sink.TriangleSink`), at the cost of one more round
        of shard tasks per batch (lookups of the changed keys' new values).
    on_conflict : {"error", "ignore"}
        As :class:`gpu_ivm.GraphEngine`: rows that insert a present edge or delete an absent
        one (taking a batch's rows of one edge together: its net change) raise
        :class:`~gpu_ivm.errors.ConflictError` and the batch is not committed, or are
        skipped and counted in ``BatchReport.ignored``. Every replica of an edge decides
        alike from its own copy and exactly one reports the ignored rows
        (:func:`resolve_conflicts`). With "error" the shard tasks run concurrently, so
        shards without the conflicting edge may apply the batch before the job fails; the
        batch is not committed, and those shards are restored at their committed batch by
        their next task (their uncommitted files are deleted), so the result is as if the
        batch had never been attempted. Not stored in the state folder: a re-opened folder
        may use either.
    method : {"auto", "grouped", "partitions"}
        ``groupBy("shard").applyInArrow`` (Spark ≥ 4, "auto" picks it when available) or
        ``repartition("shard").mapInArrow``.
    """

    def __init__(self, spark: SparkSession, state_dir: str | os.PathLike[str], *, k: int = 2,
                 directed: bool = False, epsilon: str = "1/2", seed: int = 0,
                 snapshot_every: int = 1, method: str = "auto", on_conflict: str = "error",
                 maintain: Any = None, track_changes: bool = False):
        super().__init__(state_dir, k=k, directed=directed, epsilon=epsilon, seed=seed,
                         snapshot_every=snapshot_every, on_conflict=on_conflict,
                         maintain=maintain, track_changes=track_changes)
        self.spark = spark
        if method not in ("auto", "grouped", "partitions"):
            raise InputError(f"method must be auto, grouped or partitions, got {method!r}")
        if method == "auto":
            from pyspark.sql.group import GroupedData

            method = "grouped" if hasattr(GroupedData, "applyInArrow") else "partitions"
        self.method = method

    def _frame(self, source: Any, mode: str) -> DataFrame:
        from pyspark.sql import DataFrame

        if isinstance(source, DataFrame):
            return source
        if mode == "load":
            el = read_edges(source)
            t = pa.table({"src": el.src, "dst": el.dst})
        else:
            from .ingest import updates_table

            t = updates_table(read_graph_updates(source))
        return create_frame(self.spark, t)

    def _run(self, df: DataFrame, mode: str, batch_id: int) -> list[dict]:
        from .ingest import _spark_string_keys

        strings = _spark_string_keys(df)
        self._note_keys(None, string=strings)
        kt = "string" if strings else "bigint"
        routed = df.mapInArrow(
            functools.partial(_route_batches, k=self.k, directed=self.directed, seed=self.seed,
                              mode=mode, string_keys=strings),
            f"shard int, rel tinyint, src {kt}, dst {kt}, mult bigint")
        kw = dict(mode=mode, batch_id=int(batch_id), expected=self._expected(),
                  **self._task_kwargs())
        if self.method == "grouped":
            res = routed.groupBy("shard").applyInArrow(_grouped_udf(kw), RESULT_SCHEMA)
        else:
            n = int(self.spark.conf.get("spark.sql.shuffle.partitions", "200"))
            res = routed.repartition(n, "shard").mapInArrow(
                functools.partial(_partition_task, **kw), RESULT_SCHEMA)
        try:
            return collect_arrow(res).to_pylist()
        except Exception as e:  # surface the core's error types from the executors
            raise _unwrap(e) from e

    def load(self, edges: Any) -> BatchReport:
        """Load the base graph: a DataFrame with ``src``, ``dst`` or anything
        :func:`gpu_ivm.io.read_edges` reads (read on the driver)."""
        t0 = time.perf_counter()
        if self.committed is not None:
            raise InputError("load() needs an empty HyperCube state folder")
        rows = self._run(self._frame(edges, "load"), "load", BASE_BATCH_ID)
        return self._commit(BASE_BATCH_ID, rows, t0, "load")

    def apply(self, updates: Any, *, batch_id: int | None = None) -> BatchReport:
        """Apply one batch: a DataFrame with ``src``, ``dst``, ``sign`` (validated on the
        executors) or anything :func:`gpu_ivm.io.read_graph_updates` reads. A batch id not
        above the last committed one is a replay and is skipped."""
        t0 = time.perf_counter()
        if batch_id is None:
            batch_id = (self.committed if self.committed is not None else -1) + 1
        if self.committed is not None and batch_id <= self.committed:
            return self._skip(batch_id, t0)
        rows = self._run(self._frame(updates, "apply"), "apply", batch_id)
        tables, extra = self._change_tables(batch_id, rows)
        return self._commit(batch_id, rows, t0, "hypercube", tables, extra)

    # -------------------------------------------------------------- results
    def _query_frame(self, what: str, expected: dict[int, int],
                     lookup: dict | None = None) -> DataFrame:
        """One task per shard of ``expected`` (the same operators as the batch tasks), each
        opening its shard at its expected batch id (registry, else a restore) and yielding
        its part of ``what``."""
        ids = self.spark.createDataFrame([(int(s),) for s in sorted(expected)], "shard int")
        kw = dict(what=what, expected=expected, lookup=lookup, **self._query_kwargs())
        schema = _query_schema(what, self.key_type)
        if self.method == "grouped":
            return ids.groupBy("shard").applyInArrow(_query_grouped_udf(kw), schema)
        n = int(self.spark.conf.get("spark.sql.shuffle.partitions", "200"))
        return ids.repartition(n, "shard").mapInArrow(
            functools.partial(_query_partition_task, **kw), schema)

    def result_frame(self, name: str) -> DataFrame:
        """A maintained result as a Spark DataFrame, summed on the executors: one task per
        shard yields the shard's part (:func:`shard_result`), then ``groupBy(key).sum``
        (vertex counts halved when undirected); triangles are the union of the shards'
        canonical tuples. Columns as :meth:`result_table` (unsorted). Lazy, but bound to
        the batch committed when it is created: evaluate it before applying more batches
        (the shards' older states may be gone by then)."""
        from pyspark.sql import functions as F

        n = self._result_name(name)
        df = self._query_frame(n, self._expected() if self.committed is not None else {})
        if n == "vertex_counts":
            total = "sum(triangles)" + ("" if self.directed else " div 2")
            return df.groupBy("vertex").agg(F.expr(f"CAST({total} AS BIGINT)")
                                            .alias("triangles"))
        if n == "edge_counts":
            return df.groupBy("src", "dst").agg(F.expr("CAST(sum(triangles) AS BIGINT)")
                                                .alias("triangles"))
        return df

    def _gather(self, name: str) -> pa.Table:
        try:
            return collect_arrow(self.result_frame(name))
        except Exception as e:
            raise _unwrap(e) from e

    def _lookup(self, expected: dict[int, int], lookup: dict) -> list[dict[str, pa.Table]]:
        try:
            got = collect_arrow(self._query_frame("lookup", expected, lookup)).to_pylist()
        except Exception as e:
            raise _unwrap(e) from e
        return [{"vertices": _ipc_table(r["vertices"]), "edges": _ipc_table(r["edges"])}
                for r in got]


def _unwrap(e: Exception) -> Exception:
    """A Spark task failure carrying a gpu_ivm error → that error type with its message."""
    text = str(e)
    for cls in (ConflictError, InputError):
        tag = f"{cls.__module__}.{cls.__name__}: "
        alt = f"{cls.__name__}: "
        for t in (tag, alt):
            i = text.rfind(t)
            if i >= 0:
                msg = text[i + len(t):].strip().splitlines()[0]
                return cls(msg)
    return e
