"""Executor side of the HyperCube: the shard tasks (route, resolve conflicts, apply, persist)
and the read-only query tasks, with the per-process registry of shard engines (see
:mod:`.hypercube` for the scheme and the recovery rules).
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.errors import ConflictError, InputError

from ._state import EngineLog, remove_path
from .hypercube_results import (
    CHANGE_TABLES,
    _arrow_schema,
    _check_maintains,
    _ipc_bytes,
    _key_type,
    shard_changes,
    shard_lookup,
    shard_result,
)
from .hypercube_routing import _split_by_shard

BASE_BATCH_ID = -1
"""The batch id given to the base graph (Spark's micro-batch ids start at 0)."""

RESULT_SCHEMA = ("shard int, q bigint, last bigint, r_rows bigint, r_updates bigint, "
                 "ignored bigint, seconds double, restored boolean, vertex_changes binary, "
                 "edge_changes binary, triangle_changes binary")

_REGISTRY: dict[tuple[str, int], tuple[int, Any]] = {}


def clear_registry() -> None:
    """Forget every shard engine kept in this process (as a lost executor would)."""
    _REGISTRY.clear()


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


# ---------------------------------------------------------------------- read-only query tasks
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
