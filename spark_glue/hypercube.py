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
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import time
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.engine import BatchReport
from gpu_ivm.errors import ConflictError, InputError
from gpu_ivm.io import read_edges, read_graph_updates

from ._state import EngineLog, read_recorded_tables, remove_path, write_bytes_atomic
from .ingest import collect_arrow, create_frame, validate_batch

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

BASE_BATCH_ID = -1
"""The batch id given to the base graph (Spark's micro-batch ids start at 0)."""

RESULT_SCHEMA = ("shard int, q bigint, last bigint, r_rows bigint, r_updates bigint, "
                 "ignored bigint, seconds double, restored boolean, vertex_changes binary, "
                 "edge_changes binary, triangle_changes binary")

#: The free-variable results a HyperCube can maintain, and their per-batch change tables.
CHANGE_TABLES = {"vertex_counts": "vertex_changes", "edge_counts": "edge_changes",
                 "triangles": "triangle_changes"}

LOOKUP_SCHEMA = "shard int, vertices binary, edges binary"

_REGISTRY: dict[tuple[str, int], tuple[int, Any]] = {}


def clear_registry() -> None:
    """Forget every shard engine kept in this process (as a lost executor would)."""
    _REGISTRY.clear()


# ---------------------------------------------------------------------- hashing and routing
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def vertex_hash(keys: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """h: vertex → [0, k), deterministic in every process (splitmix64 of int64 keys, CRC-32
    of UTF-8 string keys).

    Examples
    --------
    >>> import numpy as np
    >>> h = vertex_hash(np.arange(1000), 3)
    >>> sorted(set(h.tolist()))
    [0, 1, 2]
    >>> vertex_hash(np.array(["a", "b"], dtype=object), 1).tolist()
    [0, 0]
    """
    keys = np.asarray(keys)
    if keys.dtype == object or keys.dtype.kind in "US":
        x = np.fromiter((zlib.crc32(str(v).encode()) for v in keys.tolist()), np.uint64,
                        keys.shape[0])
    else:
        x = keys.astype(np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        x = x + _GOLDEN * np.uint64(seed + 1)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(k)).astype(np.int64)


def shard_coordinates(shard: int, k: int) -> tuple[int, int, int]:
    """(i, j, l) of a shard number ``(i·k + j)·k + l``.

    >>> shard_coordinates(5, 2)
    (1, 0, 1)
    """
    return shard // (k * k), (shard // k) % k, shard % k


def route_updates(src: np.ndarray, dst: np.ndarray, sign: np.ndarray, *, k: int,
                  directed: bool = False, seed: int = 0) -> pa.Table:
    """Route edge updates to the shards of a k³ HyperCube.

    Self-loops are dropped (they are not edges of a simple graph). An undirected update
    (u, v, ±1) becomes the directed updates (u, v) and (v, u); each directed update (x, y)
    goes to R in shards (h(x), h(y), t), S in (t, h(x), h(y)) and T in (h(y), t, h(x)),
    t ∈ [0, k).

    Returns
    -------
    pyarrow.Table
        Columns ``shard`` (int32), ``rel`` (int8: 0 = R, 1 = S, 2 = T), ``src``, ``dst``,
        ``mult`` (int64), ready for :meth:`gpu_ivm.RelationEngine.apply`.

    Examples
    --------
    >>> import numpy as np
    >>> t = route_updates(np.array([1]), np.array([2]), np.array([1]), k=2)
    >>> t.num_rows      # 2 directions x 3 roles x k
    12
    >>> route_updates(np.array([1]), np.array([1]), np.array([1]), k=2).num_rows
    0
    """
    src, dst = np.asarray(src), np.asarray(dst)
    sign = np.asarray(sign, np.int64)
    keep = src != dst
    src, dst, sign = src[keep], dst[keep], sign[keep]
    if not directed:
        src, dst, sign = (np.concatenate([src, dst]), np.concatenate([dst, src]),
                          np.concatenate([sign, sign]))
    n = src.shape[0]
    hx, hy = vertex_hash(src, k, seed), vertex_hash(dst, k, seed)
    t = np.tile(np.arange(k, dtype=np.int64), n)
    hx, hy = np.repeat(hx, k), np.repeat(hy, k)
    shard_r = (hx * k + hy) * k + t
    shard_s = (t * k + hx) * k + hy
    shard_t = (hy * k + t) * k + hx
    shard = np.concatenate([shard_r, shard_s, shard_t]).astype(np.int32)
    rel = np.repeat(np.arange(3, dtype=np.int8), n * k)
    s3 = np.tile(np.repeat(src, k), 3)
    d3 = np.tile(np.repeat(dst, k), 3)
    m3 = np.tile(np.repeat(sign, k), 3)
    kt = pa.string() if src.dtype == object else pa.int64()
    return pa.table({"shard": pa.array(shard, pa.int32()), "rel": pa.array(rel, pa.int8()),
                     "src": pa.array(s3, kt), "dst": pa.array(d3, kt),
                     "mult": pa.array(m3, pa.int64())})


def _route_batches(batches: Iterator[pa.RecordBatch], *, k: int, directed: bool, seed: int,
                   mode: str, string_keys: bool) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: validate each batch with the core rules, route it to shards."""
    for rb in batches:
        if mode == "load":
            el = read_edges(rb)
            src, dst, sign = el.src, el.dst, np.ones(el.src.shape[0], np.int64)
        else:
            u = validate_batch(rb, string_keys=string_keys)
            src = u.column("src").to_numpy(zero_copy_only=False)
            dst = u.column("dst").to_numpy(zero_copy_only=False)
            sign = u.column("sign").to_numpy()
        if string_keys and src.dtype != object:
            src, dst = src.astype(str).astype(object), dst.astype(str).astype(object)
        out = route_updates(src, dst, sign, k=k, directed=directed, seed=seed)
        yield from out.to_batches()


# ---------------------------------------------------------------------- shard tasks
def _present(engine: Any, rel: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Current multiplicity of (src, dst) in the engine's relation ``rel`` (0 = R, 1 = S,
    2 = T; 0 for unknown keys and for a shard without an engine yet)."""
    from gpu_ivm.encoding import pack

    out = np.zeros(src.shape[0], np.int64)
    if engine is None or len(engine.encoder) == 0 or src.shape[0] == 0:
        return out
    ia, ib = engine.encoder.lookup(src), engine.encoder.lookup(dst)
    known = (ia >= 0) & (ib >= 0)
    for r in range(3):
        sel = np.flatnonzero(known & (rel == r))
        if sel.shape[0]:
            be = engine.backend  # the relation may live in device memory
            out[sel] = be.to_host(engine.rels[r].get(be.to_device(pack(ia[sel], ib[sel]))))
    return out


def _factorize(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes of src and dst over their common domain (int64 or string keys)."""
    n = src.shape[0]
    _, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    inv = np.asarray(inv, np.int64).reshape(-1)
    return inv[:n], inv[n:]


def resolve_conflicts(engine: Any, table: pa.Table, *, shard: int, k: int, directed: bool,
                      on_conflict: str, batch_id: int) -> tuple[pa.Table, int, int]:
    """Set semantics for one shard's routed rows, decided by this shard alone.

    The rows are grouped by (role, src, dst); a group's net change plus the edge's current
    multiplicity in that role's relation must stay in {0, 1}. Each role's relation of a shard
    is exactly E restricted to the role's bucket pair, and every row of a batch for a directed
    edge reaches every replica of that edge, so every replica sees the same (present, net)
    and takes the same decision without any communication: all 3k replicas of a conflicting
    edge drop it, or all raise. With ``on_conflict="error"`` a conflicting group raises
    :class:`~gpu_ivm.errors.ConflictError` (nothing is applied); with ``"ignore"`` its rows
    are dropped, like :class:`gpu_ivm.GraphEngine` drops every row of a conflicting edge.

    Returns ``(rows to apply, r_updates, ignored)``: one consolidated row (``mult`` = net) per
    surviving group with a nonzero net; the number of R-role groups with a nonzero net
    surviving (the driver divides the sum over shards by the replication factor, as for
    rows); and the ignored rows this shard is *responsible* for. Every ignored row is
    reported by exactly one replica: the R role in the shard (h(a), h(b), 0) (l = 0), and for
    an undirected graph only the orientation with src < dst (both orientations of an
    undirected edge carry one routed row per input row, so the R-role group of (a, b), a < b,
    has as many rows as the single engine's group of the edge). The driver sums these counts
    as they are.
    """
    rel = table.column("rel").to_numpy().astype(np.int64)
    empty = table.slice(0, 0)
    if rel.shape[0] == 0:
        return empty, 0, 0
    src = table.column("src").to_numpy(zero_copy_only=False)
    dst = table.column("dst").to_numpy(zero_copy_only=False)
    mult = table.column("mult").to_numpy().astype(np.int64)
    cs, cd = _factorize(src, dst)
    order = np.lexsort((cd, cs, rel))
    srel, scs, scd = rel[order], cs[order], cd[order]
    m = order.shape[0]
    starts = np.flatnonzero(np.r_[True, (srel[1:] != srel[:-1]) | (scs[1:] != scs[:-1])
                                  | (scd[1:] != scd[:-1])])
    sizes = np.diff(np.r_[starts, m])
    first = order[starts]  # one input row per group
    net = np.add.reduceat(mult[order], starts)
    g_rel, g_src, g_dst = rel[first], src[first], dst[first]
    present = _present(engine, g_rel, g_src, g_dst)
    after = present + net
    bad = (after < 0) | (after > 1)
    ignored = 0
    if bad.any():
        if on_conflict == "error":
            i = int(np.flatnonzero(bad)[0])
            was = bool(present[i])
            if after[i] > 1:
                what = "inserts an edge that is already present" if was else \
                    "inserts an edge twice"
            else:
                what = "deletes an edge that is absent" if not was else "deletes an edge twice"
            a, b = (x.item() if hasattr(x, "item") else x for x in (g_src[i], g_dst[i]))
            raise ConflictError(
                f"batch {batch_id} {what}: ({a!r}, {b!r}) [HyperCube shard {shard}]; pass "
                "on_conflict='ignore' to skip such rows", column="sign")
        if shard % k == 0:  # l = 0: this shard reports for its R-role groups
            mine = bad & (g_rel == 0)
            if not directed:
                mine &= np.asarray(g_src < g_dst, bool)
            ignored = int(sizes[mine].sum())
    keep = ~bad & (net != 0)
    r_updates = int(np.count_nonzero(keep & (g_rel == 0)))
    rows = first[keep]
    out = table.take(pa.array(rows, pa.int64())).select(["rel", "src", "dst"])
    out = out.append_column("mult", pa.array(net[keep], pa.int64()))
    return out, r_updates, ignored


def _prune_uncommitted(log: EngineLog, expected: int | None, batch_id: int) -> None:
    """Delete the shard's snapshots and log entries above its last committed batch
    ``expected`` (all of them for a shard never committed), except those of ``batch_id``
    (which this task overwrites). They were written by attempts whose batch was not
    committed (e.g. a conflict in another shard); left in place, a later batch with another
    id could restore from them (a stale snapshot below it, or a log entry replayed)."""
    lo = BASE_BATCH_ID - 1 if expected is None else expected
    for s in log.snapshots():
        if s > lo and s != batch_id:
            remove_path(log.snapshot_path(s))
    for b in log.log_ids():
        if b > lo and b != batch_id:
            remove_path(log.log_path(b))


class _OpenShard:
    """A shard's engine at its last committed batch, ready for a task (see :func:`shard_task`).

    Opening changes nothing (the registry, the folder); :meth:`run` does the changes."""

    def __init__(self, shard: int, *, batch_id: int, expected: int | None, state_dir: str,
                 snapshot_every: int, generation: int):
        t0 = time.perf_counter()
        self.shard, self.generation = int(shard), generation
        self.key = (state_dir, self.shard)
        folder = pathlib.Path(state_dir) / f"shard-{self.shard:06d}"
        self.log = EngineLog(folder, snapshot_every=snapshot_every)
        entry = _REGISTRY.get(self.key)
        engine = entry[1] if entry is not None and entry[0] == generation else None
        self.restored = False
        if engine is None or engine.last_batch_id != expected:
            engine = None
            self.restored = True
            if expected is not None:
                engine = self.log.restore(upto=expected)
                if engine is None or engine.last_batch_id != expected:
                    raise RuntimeError(f"HyperCube shard {shard}: no durable state for batch "
                                       f"{expected} in {folder}")
        self.engine, self.expected = engine, expected
        self.seconds = time.perf_counter() - t0  # this shard's work (phases may interleave)

    def run(self, table: pa.Table, *, mode: str, batch_id: int, epsilon: str,
            r_rows: int = 0, r_updates: int = 0, ignored: int = 0,
            maintain: tuple[str, ...] = (), track_changes: bool = False,
            directed: bool = False) -> dict:
        """Load ``table`` (mode "load") or apply it (already resolved by
        :func:`resolve_conflicts`), make the state durable, return the result row.

        A new engine maintains ``maintain`` (free-variable results) and tracks changes if
        asked; with both, the row carries the shard's changes (:func:`shard_changes`)."""
        from gpu_ivm import RelationEngine

        t0 = time.perf_counter()
        _REGISTRY.pop(self.key, None)  # re-inserted only on success
        _prune_uncommitted(self.log, self.expected, batch_id)
        self.log.gc(committed=self.expected)
        engine = self.engine
        table = table.select(["rel", "src", "dst", "mult"])
        if mode == "load":
            if engine is not None:
                raise InputError(f"HyperCube shard {self.shard} already holds a graph")
            g = table.group_by(["rel", "src", "dst"]).aggregate([])  # set semantics: dedupe
            parts = {}
            for code, name in enumerate("RST"):
                p = g.filter(pc.equal(g.column("rel"), code))
                parts[name] = {"src": p.column("src"), "dst": p.column("dst")}
            engine = RelationEngine(epsilon=epsilon, maintain=list(maintain) or None,
                                    track_changes=track_changes)
            engine.load(**parts)
            engine.last_batch_id = batch_id
            r_rows = r_updates = int(parts["R"]["src"].length())
            self.log.record(engine, batch_id)
        else:
            if engine is None:
                engine = RelationEngine(epsilon=epsilon, maintain=list(maintain) or None,
                                        track_changes=track_changes)
            _check_maintains(engine, maintain, track_changes, self.shard)
            rep = engine.apply(table, batch_id=batch_id)
            if rep.path == "skipped":  # pragma: no cover - guarded by the expected-id check
                raise RuntimeError(f"HyperCube shard {self.shard}: batch {batch_id} was "
                                   "already applied")
            self.log.record(engine, batch_id, table)
            if self.log.log_path(batch_id).exists():  # logged: drop an old attempt's snapshot
                remove_path(self.log.snapshot_path(batch_id))
        self.engine = engine
        _REGISTRY[self.key] = (self.generation, engine)
        out = {"shard": self.shard, "q": int(engine.count()), "last": int(batch_id),
               "r_rows": int(r_rows), "r_updates": int(r_updates), "ignored": int(ignored),
               "seconds": 0.0, "restored": self.restored}
        if mode != "load" and maintain and track_changes:
            out.update(shard_changes(engine, maintain, directed=directed,
                                     applied=table.num_rows > 0))
        out["seconds"] = self.seconds + time.perf_counter() - t0
        return out


def _prepare(shard: int, table: pa.Table, *, batch_id: int, expected: int | None, k: int,
             directed: bool, on_conflict: str, state_dir: str, snapshot_every: int,
             generation: int) -> tuple[_OpenShard, pa.Table, dict]:
    """Open a shard (restoring it if needed) and resolve the conflicts of its rows (raises
    ConflictError with ``on_conflict="error"``); nothing is applied yet."""
    sh = _OpenShard(shard, batch_id=batch_id, expected=expected, state_dir=state_dir,
                    snapshot_every=snapshot_every, generation=generation)
    t0 = time.perf_counter()
    r_rows = int(pc.sum(pc.equal(table.column("rel"), 0)).as_py() or 0)
    resolved, r_updates, ignored = resolve_conflicts(
        sh.engine, table, shard=shard, k=k, directed=directed, on_conflict=on_conflict,
        batch_id=batch_id)
    sh.seconds += time.perf_counter() - t0
    return sh, resolved, {"r_rows": r_rows, "r_updates": r_updates, "ignored": ignored}


def shard_task(shard: int, table: pa.Table, *, mode: str, batch_id: int,
               expected: int | None, state_dir: str, epsilon: str, snapshot_every: int,
               generation: int, k: int = 1, directed: bool = False,
               on_conflict: str = "error", maintain: tuple[str, ...] = (),
               track_changes: bool = False) -> dict:
    """Apply one shard's routed rows (runs on an executor; see the module docstring).

    ``expected`` is the id of the last committed batch that touched this shard (None: the
    shard is new). Conflicts are resolved by :func:`resolve_conflicts` (``k`` and
    ``directed`` tell which replica reports ignored rows). A new shard engine maintains
    ``maintain`` (and tracks changes). Returns the shard's result row (``RESULT_SCHEMA``).
    """
    kw = dict(batch_id=batch_id, expected=expected, state_dir=state_dir,
              snapshot_every=snapshot_every, generation=generation)
    res = dict(epsilon=epsilon, maintain=tuple(maintain), track_changes=track_changes,
               directed=directed)
    if mode == "load":
        return _OpenShard(shard, **kw).run(table, mode=mode, batch_id=batch_id, **res)
    sh, resolved, counts = _prepare(shard, table, k=k, directed=directed,
                                    on_conflict=on_conflict, **kw)
    return sh.run(resolved, mode=mode, batch_id=batch_id, **res, **counts)


def _result_table(rows: list[dict]) -> pa.Table:
    return pa.table({
        "shard": pa.array([r["shard"] for r in rows], pa.int32()),
        "q": pa.array([r["q"] for r in rows], pa.int64()),
        "last": pa.array([r["last"] for r in rows], pa.int64()),
        "r_rows": pa.array([r["r_rows"] for r in rows], pa.int64()),
        "r_updates": pa.array([r["r_updates"] for r in rows], pa.int64()),
        "ignored": pa.array([r["ignored"] for r in rows], pa.int64()),
        "seconds": pa.array([r["seconds"] for r in rows], pa.float64()),
        "restored": pa.array([r["restored"] for r in rows], pa.bool_()),
        **{name: pa.array([_ipc_bytes(r.get(name)) for r in rows], pa.binary())
           for name in CHANGE_TABLES.values()},
    })


def _grouped_task(key: tuple, table: pa.Table, *, mode: str, batch_id: int,
                  expected: dict[int, int], **kw: Any) -> pa.Table:
    """``applyInArrow`` body: one group = one shard."""
    shard = int(key[0].as_py())
    return _result_table([shard_task(shard, table, mode=mode, batch_id=batch_id,
                                     expected=expected.get(shard), **kw)])


def _grouped_udf(kw: dict):
    """The ``applyInArrow`` function. pyspark infers the UDF kind from type hints and fails
    on partials / annotated keyword arguments, so this is a plain closure without hints."""

    def run(key, table):  # noqa: ANN001, ANN202 - no hints on purpose (see above)
        return _grouped_task(key, table, **kw)

    return run


def _partition_task(batches: Iterator[pa.RecordBatch], *, mode: str, batch_id: int,
                    expected: dict[int, int], **kw: Any) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body after ``repartition("shard")``: every shard's rows are in one
    partition; group them and run each shard."""
    batches = list(batches)
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    rows = []
    for shard, part in _split_by_shard(table):
        rows.append(shard_task(shard, part, mode=mode, batch_id=batch_id,
                               expected=expected.get(shard), **kw))
    if rows:
        yield from _result_table(rows).to_batches()


def _split_by_shard(table: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    if table.num_rows == 0:
        return
    sh = table.column("shard").to_numpy()
    order = np.argsort(sh, kind="stable")
    ssh = sh[order]
    starts = np.flatnonzero(np.r_[True, ssh[1:] != ssh[:-1]])
    ends = np.r_[starts[1:], ssh.shape[0]]
    for a, b in zip(starts.tolist(), ends.tolist()):
        yield int(ssh[a]), table.take(pa.array(order[a:b]))


# ---------------------------------------------------------------------- free-variable results
# In the relation form a shard engine keeps Δ1_s(a) = Σ_{b,c} R_s(a,b)·S_s(b,c)·T_s(c,a),
# Δ2_s(a,b) and the tuples of Δ3_s, i.e. the same sums restricted to the vertex triples with
# (h(a), h(b), h(c)) = the shard's coordinate. Every triple lies in exactly one shard, so
# Σ_s Δ1_s(v) = Σ_{b,c} E(v,b)·E(b,c)·E(c,v) (undirected: 2·triangles through v; directed:
# 3-cycles through v), Σ_s Δ2_s(u,v) = Δ2(u,v), and the shards' Δ3 tuples partition the
# ordered triangles. The helpers below run on the executors (per shard); the driver sums.
def _ipc_bytes(table: pa.Table | bytes | None) -> bytes | None:
    """A table as Arrow IPC stream bytes (None stays None; bytes pass through)."""
    if table is None or isinstance(table, bytes):
        return table
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _ipc_table(data: pa.Table | bytes | None) -> pa.Table | None:
    """Inverse of :func:`_ipc_bytes` (tables pass through)."""
    if data is None or isinstance(data, pa.Table):
        return data
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _key_type(key_type: str | None) -> pa.DataType:
    return pa.string() if key_type == "string" else pa.int64()


def _check_maintains(engine: Any, maintain: tuple[str, ...], track_changes: bool,
                     shard: int) -> None:
    """A shard engine (new or restored) must maintain what the driver expects."""
    if not maintain:
        return
    have = tuple(getattr(engine, "maintain", ()) or ())
    missing = [m for m in maintain if m not in have]
    if missing or (track_changes and not getattr(engine, "track_changes", False)):
        raise InputError(f"HyperCube shard {shard} does not maintain {', '.join(missing)}"
                         f"{' with track_changes' if not missing else ''} (its state was "
                         "created without them)", column="maintain")


def _canonical(table: pa.Table, directed: bool) -> pa.Table:
    """The rows of a triangle table (a, b, c, ...) in canonical form by user key: a < b < c
    (undirected), a < b and a < c (directed: the rotation starting at the smallest key).
    Of the 6 (3) ordered triples of a triangle (3-cycle) exactly one is kept."""
    a, b, c = table.column("a"), table.column("b"), table.column("c")
    second = pc.less(a, c) if directed else pc.less(b, c)
    return table.filter(pc.and_(pc.less(a, b), second))


def shard_result(engine: Any, name: str, *, directed: bool) -> pa.Table:
    """One shard's part of a result, to be summed per key over the shards (triangles: to be
    concatenated): ``vertex, triangles`` (Δ1_s, not halved), ``src, dst, triangles``
    (Δ2_s; undirected: only src < dst, since Δ2 is symmetric) or ``a, b, c`` (the shard's Δ3
    tuples in canonical form, each triangle in exactly one shard)."""
    t = engine.result_table(name)
    if name == "edge_counts" and not directed:
        t = t.filter(pc.less(t.column("src"), t.column("dst")))
    elif name == "triangles":
        t = _canonical(t, directed).select(["a", "b", "c"])
    return t


def shard_changes(engine: Any, maintain: tuple[str, ...], *, directed: bool,
                  applied: bool = True) -> dict[str, pa.Table]:
    """One shard's changes in its last batch (``engine.last_changes()``): per maintained
    result, ``vertex, delta`` / ``src, dst, delta`` (the change of Δ1_s / Δ2_s; undirected
    edges src < dst) / ``a, b, c, old, new`` (canonical triangles: their old/new values are
    global, a triangle lives in one shard). Keyed by change table name; empty tables when
    the shard applied no row (``applied=False``)."""
    ch = engine.last_changes()
    out = {}
    if "vertex_counts" in maintain:
        t = ch["vertex_counts"]
        out["vertex_changes"] = pa.table({"vertex": t.column("vertex"),
                                          "delta": pc.subtract(t.column("new"),
                                                               t.column("old"))})
    if "edge_counts" in maintain:
        t = ch["edge_counts"]
        if not directed:
            t = t.filter(pc.less(t.column("src"), t.column("dst")))
        out["edge_changes"] = pa.table({"src": t.column("src"), "dst": t.column("dst"),
                                        "delta": pc.subtract(t.column("new"),
                                                             t.column("old"))})
    if "triangles" in maintain:
        out["triangle_changes"] = _canonical(ch["triangles"], directed).select(
            ["a", "b", "c", "old", "new"])
    if not applied:
        out = {n: t.slice(0, 0) for n, t in out.items()}
    return out


def shard_lookup(engine: Any, shard: int, *, k: int, vertices: np.ndarray | None = None,
                 vertex_buckets: np.ndarray | None = None, src: np.ndarray | None = None,
                 dst: np.ndarray | None = None, edge_buckets: np.ndarray | None = None,
                 key_type: pa.DataType | None = None) -> dict[str, pa.Table]:
    """This shard's Δ1_s of the given vertices whose bucket h(v) is the shard's i, and Δ2_s
    of the given edges whose bucket pair h(u)·k + h(v) is its (i, j): ``vertices`` →
    ``vertex, value``; ``edges`` → ``src, dst, value`` (0 for unknown keys)."""
    i, j, _ = shard_coordinates(shard, k)
    key_type = key_type or pa.int64()
    out = {}
    if vertices is not None:
        sel = np.flatnonzero(vertex_buckets == i)
        v = vertices[sel]
        vals = engine.vertex_count(v) if sel.shape[0] else np.zeros(0, np.int64)
        out["vertices"] = pa.table({"vertex": pa.array(v.tolist() if v.dtype == object else v,
                                                       key_type),
                                    "value": pa.array(np.asarray(vals, np.int64))})
    if src is not None:
        sel = np.flatnonzero(edge_buckets == i * k + j)
        a, b = src[sel], dst[sel]
        vals = engine.edge_count(a, b) if sel.shape[0] else np.zeros(0, np.int64)
        out["edges"] = pa.table({
            "src": pa.array(a.tolist() if a.dtype == object else a, key_type),
            "dst": pa.array(b.tolist() if b.dtype == object else b, key_type),
            "value": pa.array(np.asarray(vals, np.int64))})
    return out


def _open_engine(shard: int, *, expected: int, state_dir: str, snapshot_every: int,
                 generation: int) -> Any:
    """A shard's engine at batch ``expected`` for a read-only query: from this process's
    registry, or restored from its folder (and then kept in the registry)."""
    sh = _OpenShard(shard, batch_id=expected, expected=expected, state_dir=state_dir,
                    snapshot_every=snapshot_every, generation=generation)
    if sh.restored and sh.engine is not None:
        _REGISTRY[sh.key] = (generation, sh.engine)
    return sh.engine


def _query_shard(shard: int, *, what: str, expected: dict[int, int], state_dir: str,
                 snapshot_every: int, generation: int, k: int, directed: bool,
                 key_type: str | None, lookup: dict | None = None,
                 ) -> Iterator[pa.RecordBatch]:
    """Executor side of a results query (``what`` = a result name) or of the change tables'
    lookups (``what`` = "lookup", one row of ``LOOKUP_SCHEMA``) for one shard."""
    if shard not in expected:
        return
    engine = _open_engine(shard, expected=expected[shard], state_dir=state_dir,
                          snapshot_every=snapshot_every, generation=generation)
    if engine is None:
        return
    if what == "lookup":
        got = shard_lookup(engine, shard, k=k, key_type=_key_type(key_type), **(lookup or {}))
        yield pa.RecordBatch.from_pydict({
            "shard": pa.array([shard], pa.int32()),
            "vertices": pa.array([_ipc_bytes(got.get("vertices"))], pa.binary()),
            "edges": pa.array([_ipc_bytes(got.get("edges"))], pa.binary())})
        return
    t = shard_result(engine, what, directed=directed)
    yield from t.to_batches(max_chunksize=1 << 16)


def _query_schema(what: str, key_type: str | None) -> str:
    kt = "string" if key_type == "string" else "bigint"
    return {"vertex_counts": f"vertex {kt}, triangles bigint",
            "edge_counts": f"src {kt}, dst {kt}, triangles bigint",
            "triangles": f"a {kt}, b {kt}, c {kt}", "lookup": LOOKUP_SCHEMA}[what]


def _arrow_schema(what: str, key_type: str | None) -> pa.Schema:
    kt = _key_type(key_type)
    if what == "lookup":
        return pa.schema([("shard", pa.int32()), ("vertices", pa.binary()),
                          ("edges", pa.binary())])
    return pa.schema({"vertex_counts": [("vertex", kt), ("triangles", pa.int64())],
                      "edge_counts": [("src", kt), ("dst", kt), ("triangles", pa.int64())],
                      "triangles": [("a", kt), ("b", kt), ("c", kt)]}[what])


def _query_grouped_udf(kw: dict):
    """``applyInArrow`` function of a query (no type hints, see :func:`_grouped_udf`)."""

    def run(key, table):  # noqa: ANN001, ANN202
        shard = int(key[0].as_py())
        batches = list(_query_shard(shard, **kw))
        schema = _arrow_schema(kw["what"], kw["key_type"])
        return pa.Table.from_batches(batches, schema=schema) if batches else \
            schema.empty_table()

    return run


def _query_partition_task(batches: Iterator[pa.RecordBatch], **kw: Any,
                          ) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of a query after ``repartition("shard")``."""
    for rb in batches:
        for shard in sorted(set(rb.column("shard").to_pylist())):
            yield from _query_shard(int(shard), **kw)


# ---------------------------------------------------------------------- driver
class _HyperCubeDriver:
    """Driver-side bookkeeping shared by the local and the Spark runner."""

    def __init__(self, state_dir: str | os.PathLike[str], *, k: int = 2, directed: bool = False,
                 epsilon: str = "1/2", seed: int = 0, snapshot_every: int = 1,
                 on_conflict: str = "error", maintain: Any = None,
                 track_changes: bool = False):
        if int(k) < 1:
            raise InputError(f"k must be at least 1, got {k}", column="shards")
        if on_conflict not in ("error", "ignore"):
            raise InputError(f"on_conflict must be 'error' or 'ignore', got {on_conflict!r}",
                             column="on_conflict")
        requested = _free_results(maintain)
        self.on_conflict = on_conflict
        self.state_dir = str(pathlib.Path(state_dir).resolve())
        pathlib.Path(self.state_dir).mkdir(parents=True, exist_ok=True)
        self.snapshot_every = int(snapshot_every)
        self.generation = 0
        #: The other result tables (change tables) of the last batch committed by this
        #: process; :meth:`recorded_tables` also reads them back after a restart.
        self.last_tables: dict[str, pa.Table] | None = None
        m = self._read_manifest()
        if m is None:
            self.k, self.directed, self.seed, self.epsilon = int(k), bool(directed), int(seed), \
                str(epsilon)
            self.committed: int | None = None
            self.shards: dict[int, tuple[int, int]] = {}
            self.last_result: dict | None = None
            #: Free-variable results the shard engines maintain (besides the count).
            self.maintain: tuple[str, ...] = requested
            #: Whether each batch computes the change tables of :attr:`maintain`.
            self.track_changes = bool(track_changes) and bool(requested)
            #: "int64" or "string" (None until the first keys are seen).
            self.key_type: str | None = None
        else:
            if (m["k"], m["directed"], m["seed"]) != (int(k), bool(directed), int(seed)):
                raise InputError(f"state folder {self.state_dir} holds a HyperCube with k="
                                 f"{m['k']}, directed={m['directed']}, seed={m['seed']}")
            self.k, self.directed, self.seed, self.epsilon = m["k"], m["directed"], m["seed"], \
                m["epsilon"]
            self.committed = m["committed"]
            self.shards = {int(s): (int(v[0]), int(v[1])) for s, v in m["shards"].items()}
            self.last_result = m.get("last_result")
            self.maintain = tuple(m.get("maintain", ()))
            self.track_changes = bool(m.get("track_changes", False))
            self.key_type = m.get("key_type")
            self._check_request(requested, bool(track_changes))

    # -------------------------------------------------------------- manifest
    @property
    def _manifest_path(self) -> pathlib.Path:
        return pathlib.Path(self.state_dir) / "manifest.json"

    def _read_manifest(self) -> dict | None:
        p = self._manifest_path
        return json.loads(p.read_text()) if p.exists() else None

    def _write_manifest(self) -> None:
        m = {"version": 1, "k": self.k, "directed": self.directed, "seed": self.seed,
             "epsilon": self.epsilon, "committed": self.committed,
             "shards": {str(s): list(v) for s, v in sorted(self.shards.items())},
             "last_result": self.last_result, "maintain": list(self.maintain),
             "track_changes": self.track_changes, "key_type": self.key_type}
        write_bytes_atomic(self._manifest_path, json.dumps(m).encode())

    # -------------------------------------------------------------- maintained results
    def _check_request(self, requested: tuple[str, ...], track: bool) -> None:
        missing = [r for r in requested if r not in self.maintain]
        if missing:
            raise InputError(
                f"the HyperCube in {self.state_dir} does not maintain {', '.join(missing)} "
                f"(it maintains {', '.join(('count',) + self.maintain)}); results cannot be "
                "added to an existing state folder: use a new one", column="maintain")
        if track and not self.track_changes and (requested or self.maintain):
            raise InputError(
                f"the HyperCube in {self.state_dir} maintains {', '.join(self.maintain)} but "
                "was created without track_changes=True, which the change tables need",
                column="maintain")

    def require(self, maintain: Any) -> None:
        """Also maintain these results with their per-batch change tables (``maintain=`` of
        :class:`~.sink.TriangleSink`): added (with ``track_changes``) while nothing is
        loaded, else checked against the state folder (``InputError``)."""
        want = _free_results(maintain)
        if not want:
            return
        if self.committed is None:
            self.maintain = tuple(r for r in CHANGE_TABLES if r in self.maintain + want)
            self.track_changes = True
            return
        self._check_request(want, True)

    @property
    def maintained(self) -> tuple[str, ...]:
        """The results whose change tables each batch produces (:attr:`maintain` when
        ``track_changes``)."""
        return self.maintain if self.track_changes else ()

    def _note_keys(self, keys: Any, string: bool | None = None) -> None:
        """Remember the key type (for result schemas) from the first keys seen."""
        if self.key_type is not None:
            return
        if string is None:
            arr = np.asarray(keys)
            if arr.shape[0] == 0:
                return
            string = arr.dtype == object or arr.dtype.kind in "US"
        self.key_type = "string" if string else "int64"

    def _result_name(self, name: str) -> str:
        from gpu_ivm.queries.api import parse_maintain

        n = parse_maintain(name)[-1]
        if n == "count":
            raise InputError(f"{name!r} is not a result table", column="name")
        if n not in self.maintain:
            raise InputError(f"this HyperCube does not maintain {n}; create it (with a new "
                             f"state folder) with maintain=[..., {n!r}]", column="maintain")
        return n

    def _gather(self, name: str) -> pa.Table:  # pragma: no cover - runners override
        raise NotImplementedError

    def result_table(self, name: str) -> pa.Table:
        """One maintained result as of the last committed batch, summed over the shards:
        ``"vertex_counts"`` → ``vertex, triangles`` (undirected: triangles through the
        vertex, what ``networkx.triangles`` gives; directed: 3-cycles through it),
        ``"edge_counts"`` → ``src, dst, triangles`` (undirected: each edge once, src < dst),
        ``"triangles"`` → ``a, b, c`` (each once; a < b < c, directed: rotated to start at
        the smallest key). Zero counts are left out; rows sorted by key."""
        n = self._result_name(name)
        schema = _arrow_schema(n, self.key_type)
        if self.committed is None:
            return schema.empty_table()
        t = self._gather(n).cast(schema)
        return t.sort_by([(c, "ascending") for c in schema.names if c != "triangles"])

    def vertex_counts(self, chunk_size: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """Per-vertex triangle counts (``vertex, triangles``) as Arrow record batches, as
        :meth:`gpu_ivm.GraphEngine.vertex_counts` (see :meth:`result_table`)."""
        yield from _chunks(self.result_table("vertex_counts"), chunk_size)

    def edge_counts(self, chunk_size: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """Per-edge triangle counts (``src, dst, triangles``) as Arrow record batches."""
        yield from _chunks(self.result_table("edge_counts"), chunk_size)

    def triangles(self, chunk_size: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """The triangles (``a, b, c``), each once, as Arrow record batches."""
        yield from _chunks(self.result_table("triangles"), chunk_size)

    def last_changes(self) -> dict[str, pa.Table]:
        """Per maintained result, the rows whose value changed in the last committed batch
        with ``old`` and ``new`` (as ``GraphEngine.last_changes()``; needs
        ``track_changes=True``). Empty after the base graph."""
        if not self.maintained:
            raise InputError("last_changes() needs a HyperCube created with maintain=[...] "
                             "and track_changes=True", column="track_changes")
        rec = self.recorded_tables(self.committed) if self.committed is not None else None
        out = {}
        for r in self.maintained:
            t = (rec or {}).get(CHANGE_TABLES[r])
            out[r] = t.drop_columns(["batch_id"]) if t is not None else \
                _change_schema(r, self.key_type).empty_table()
        return out

    # -------------------------------------------------------------- change tables
    def _lookup(self, expected: dict[int, int], lookup: dict,
                ) -> list[dict[str, pa.Table]]:  # pragma: no cover - runners override
        raise NotImplementedError

    def _change_tables(self, batch_id: int, rows: list[dict]) -> tuple[dict[str, pa.Table],
                                                                        dict]:
        """The batch's change tables (with ``batch_id``), from the shards' changes.

        A triangle lives in one shard, so its old/new values come with the shard's changes.
        A vertex's (edge's) count is a sum over the k² (k) shards of its bucket (pair), and a
        batch need not touch them all: the deltas are summed per key, then the new values of
        the changed keys are looked up in those shards (one more round of shard tasks), and
        old = new − delta."""
        res = self.maintained
        if not res:
            return {}, {}
        kt = _key_type(self.key_type)
        parts: dict[str, list[pa.Table]] = {n: [] for n in CHANGE_TABLES.values()}
        for r in rows:
            for n in parts:
                t = _ipc_table(r.get(n))
                if t is not None and t.num_rows:
                    parts[n].append(t)
        expected = dict(self._expected())
        expected.update({int(r["shard"]): int(r["last"]) for r in rows})
        k, kk = self.k, self.k * self.k
        lookup: dict[str, Any] = {}
        deltas: dict[str, pa.Table] = {}
        need: set[int] = set()
        if "vertex_counts" in res:
            d = _sum_by(parts["vertex_changes"], ["vertex"], "delta",
                        pa.schema([("vertex", kt), ("delta", pa.int64())]))
            d = d.filter(pc.not_equal(d.column("delta"), 0))
            deltas["vertex_counts"] = d
            if d.num_rows:
                v = d.column("vertex").to_numpy(zero_copy_only=False)
                hv = vertex_hash(v, k, self.seed)
                lookup.update(vertices=v, vertex_buckets=hv)
                buckets = set(hv.tolist())
                need |= {s for s in expected if s // kk in buckets}
        if "edge_counts" in res:
            d = _sum_by(parts["edge_changes"], ["src", "dst"], "delta",
                        pa.schema([("src", kt), ("dst", kt), ("delta", pa.int64())]))
            d = d.filter(pc.not_equal(d.column("delta"), 0))
            deltas["edge_counts"] = d
            if d.num_rows:
                a = d.column("src").to_numpy(zero_copy_only=False)
                b = d.column("dst").to_numpy(zero_copy_only=False)
                he = vertex_hash(a, k, self.seed) * k + vertex_hash(b, k, self.seed)
                lookup.update(src=a, dst=b, edge_buckets=he)
                buckets = set(he.tolist())
                need |= {s for s in expected if s // k in buckets}
        found = self._lookup({s: expected[s] for s in sorted(need)}, lookup) if need else []
        out = {}
        halve = not self.directed
        if "vertex_counts" in res:
            vals = [f["vertices"] for f in found if f.get("vertices") is not None]
            out["vertex_changes"] = _old_new(deltas["vertex_counts"], ["vertex"], vals, kt,
                                             halve)
        if "edge_counts" in res:
            vals = [f["edges"] for f in found if f.get("edges") is not None]
            out["edge_changes"] = _old_new(deltas["edge_counts"], ["src", "dst"], vals, kt,
                                           False)
        if "triangles" in res:
            schema = _change_schema("triangles", self.key_type)
            t = pa.concat_tables([p.cast(schema) for p in parts["triangle_changes"]]) \
                if parts["triangle_changes"] else schema.empty_table()
            out["triangle_changes"] = t.sort_by([("a", "ascending"), ("b", "ascending"),
                                                 ("c", "ascending")])
        tables = {n: _with_batch_id(t, batch_id) for n, t in out.items()}
        return tables, {"lookup_shards": len(need)}

    # -------------------------------------------------------------- recorded results
    def _result_path(self, batch_id: int, name: str) -> pathlib.Path:
        return pathlib.Path(self.state_dir) / f"result{int(batch_id):+021d}-{name}.arrow"

    def recorded_tables(self, batch_id: int) -> dict[str, pa.Table] | None:
        """The change tables recorded for ``batch_id`` (what a replay of it re-emits), or
        None if the last committed batch is another one."""
        if self.last_tables is not None and self.last_result is not None and int(
                self.last_result.get("batch_id", self.last_result.get("batch", -2))) == int(
                batch_id):
            return self.last_tables
        tables = read_recorded_tables(self.last_result, batch_id, self._result_path)
        if tables is not None:
            self.last_tables = tables
        return tables

    # -------------------------------------------------------------- batches
    @property
    def last_batch_id(self) -> int | None:
        """The last committed batch id (the base graph is ``BASE_BATCH_ID`` = -1)."""
        return self.committed

    @property
    def _per(self) -> int:
        return 3 if self.directed else 6

    @property
    def Q(self) -> int:
        return sum(q for _, q in self.shards.values())

    def count(self) -> int:
        """Triangles (directed: 3-cycles): Σ over shards of Q_s, / 6 (directed: / 3)."""
        return self.Q // self._per

    def forget_executor_state(self) -> None:
        """Make every shard task restore its engine from its folder at the next batch, as
        if every executor had been lost (bumps a generation number that registry entries
        must match; :func:`clear_registry` does the same inside one process)."""
        self.generation += 1

    def _task_kwargs(self) -> dict:
        return {"state_dir": self.state_dir, "epsilon": self.epsilon,
                "snapshot_every": self.snapshot_every, "generation": self.generation,
                "k": self.k, "directed": self.directed, "on_conflict": self.on_conflict,
                "maintain": self.maintain, "track_changes": self.track_changes}

    def _query_kwargs(self) -> dict:
        return {"state_dir": self.state_dir, "snapshot_every": self.snapshot_every,
                "generation": self.generation, "k": self.k, "directed": self.directed,
                "key_type": self.key_type}

    def _commit(self, batch_id: int, rows: list[dict], t0: float, path: str,
                tables: dict[str, pa.Table] | None = None,
                extra: dict | None = None) -> BatchReport:
        tables = tables or {}
        # the batch's tables before the manifest (the commit point): a committed batch
        # always has its results recorded for a replay
        for name, t in tables.items():
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, t.schema) as w:
                w.write_table(t)
            write_bytes_atomic(self._result_path(batch_id, name),
                               sink.getvalue().to_pybytes())
        q_before = self.Q
        for r in rows:
            self.shards[int(r["shard"])] = (int(r["last"]), int(r["q"]))
        self.committed = int(batch_id)
        dirs = self.k * (1 if self.directed else 2)
        rep = BatchReport(
            batch=int(batch_id), rows=sum(int(r["r_rows"]) for r in rows) // dirs,
            updates=sum(int(r["r_updates"]) for r in rows) // dirs,
            triangles=self.count(), delta=(self.Q - q_before) // self._per,
            seconds=time.perf_counter() - t0, path=path,
            ignored=sum(int(r.get("ignored", 0)) for r in rows),
            extra={"shards_touched": len(rows), "shards": self.k ** 3,
                   "shard_seconds_max": max((float(r["seconds"]) for r in rows), default=0.0),
                   "restored": sum(bool(r["restored"]) for r in rows), **(extra or {})})
        self.last_result = dict(rep.to_dict(), batch_id=int(batch_id), tables=sorted(tables))
        self._write_manifest()
        self.last_tables = tables
        keep = {self._result_path(batch_id, n).name for n in tables}
        for p in pathlib.Path(self.state_dir).glob("result*.arrow"):
            if p.name not in keep:
                remove_path(p)
        return rep

    def _skip(self, batch_id: int, t0: float) -> BatchReport:
        return BatchReport(batch=int(batch_id), rows=0, updates=0, triangles=self.count(),
                           delta=0, seconds=time.perf_counter() - t0, path="skipped")

    def _expected(self) -> dict[int, int]:
        return {s: last for s, (last, _) in self.shards.items()}


def _free_results(maintain: Any) -> tuple[str, ...]:
    """The free-variable results among ``maintain=`` (the count is always kept)."""
    if maintain is None:
        return ()
    from gpu_ivm.queries.api import parse_maintain

    return tuple(r for r in parse_maintain(maintain) if r != "count")


def _change_schema(result: str, key_type: str | None) -> pa.Schema:
    kt = _key_type(key_type)
    keys = {"vertex_counts": ["vertex"], "edge_counts": ["src", "dst"],
            "triangles": ["a", "b", "c"]}[result]
    return pa.schema([(c, kt) for c in keys] + [("old", pa.int64()), ("new", pa.int64())])


def _with_batch_id(table: pa.Table, batch_id: int) -> pa.Table:
    return table.add_column(0, "batch_id", pa.array(np.full(table.num_rows, int(batch_id)),
                                                    pa.int64()))


def _chunks(table: pa.Table, chunk_size: int) -> Iterator[pa.RecordBatch]:
    if not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer, got {chunk_size!r}",
                         column="chunk_size")
    batches = table.combine_chunks().to_batches(max_chunksize=int(chunk_size))
    if not batches:
        batches = [pa.RecordBatch.from_pylist([], schema=table.schema)]
    yield from batches


def _sum_by(tables: list[pa.Table], keys: list[str], col: str, schema: pa.Schema) -> pa.Table:
    """Σ ``col`` per key over the tables (cast to ``schema``)."""
    t = pa.concat_tables([x.cast(schema) for x in tables]) if tables else \
        schema.empty_table()
    g = t.group_by(keys).aggregate([(col, "sum")])
    return g.select(keys + [f"{col}_sum"]).rename_columns(keys + [col]).cast(schema)


def _old_new(deltas: pa.Table, keys: list[str], values: list[pa.Table], kt: pa.DataType,
             halve: bool) -> pa.Table:
    """Change rows ``keys..., old, new`` from the summed deltas and the shards' looked-up
    values of those keys (summed here; halved for undirected vertex counts)."""
    vs = _sum_by(values, keys, "value", pa.schema([(c, kt) for c in keys]
                                                  + [("value", pa.int64())]))
    j = deltas.join(vs, keys=keys, join_type="left outer")
    new = pc.fill_null(j.column("value"), 0).to_numpy().astype(np.int64)
    d = j.column("delta").to_numpy().astype(np.int64)
    if halve:  # Σ_s Δ1_s(v) = 2·(triangles through v) in an undirected graph
        new, d = new // 2, d // 2
    out = pa.table({**{c: j.column(c) for c in keys}, "old": pa.array(new - d),
                    "new": pa.array(new)})
    return out.sort_by([(c, "ascending") for c in keys])


def _sum_parts(name: str, parts: list[pa.Table], key_type: str | None,
               directed: bool) -> pa.Table:
    """The global result from the shards' parts (:func:`shard_result`)."""
    schema = _arrow_schema(name, key_type)
    if name == "triangles":
        return pa.concat_tables([p.cast(schema) for p in parts]) if parts else \
            schema.empty_table()
    keys = [c for c in schema.names if c != "triangles"]
    t = _sum_by(parts, keys, "triangles", schema)
    if name == "vertex_counts" and not directed:
        t = t.set_column(1, "triangles", pc.divide(t.column("triangles"), 2))
    return t



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
