"""Driver side of the HyperCube: the manifest (committed batch, per-shard batch ids and Q_s),
the maintained results' bookkeeping, the sums of the shards' results and change tables, and
the batch commit shared by :class:`~.hypercube.LocalHyperCube` and
:class:`~.hypercube.SparkHyperCube`.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.engine import BatchReport
from gpu_ivm.errors import InputError

from ._state import read_recorded_tables, remove_path, write_bytes_atomic
from .hypercube_results import CHANGE_TABLES, _arrow_schema, _ipc_table, _key_type
from .hypercube_routing import vertex_hash


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
