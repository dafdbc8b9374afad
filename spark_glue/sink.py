"""Exactly-once Structured Streaming sink: ``foreachBatch`` → a maintained triangle count.

:class:`TriangleSink` is the ``foreachBatch`` function. For each micro-batch it validates the
rows on the executors (:func:`.ingest.ingest`), applies them to the engine with
``batch_id=<Spark's batch id>``, makes the new state durable, and writes the batch's results to
the user's sink. The engine is either

* :class:`DriverEngine`: one :class:`gpu_ivm.GraphEngine` resident on the driver, made durable
  in a state folder (snapshots, optionally a write-ahead log, see :mod:`._state`); or
* :class:`~.hypercube.SparkHyperCube`: k³ shard engines on the executors.

Exactly-once: Spark re-runs the last micro-batch after a restart from the same checkpoint when
it had not recorded its completion. The engine keeps the last applied batch id (in its
snapshot / manifest), so the replay is skipped, and its recorded results are written again
under the same batch id (overwriting), so the results equal those of an uninterrupted run.

Results per batch are a ``dict[str, pyarrow.Table]``. Today it has ``"counts"`` (one row:
``batch_id, rows, updates, triangles, delta, seconds, path``) and, with ``dead_letter=True``,
``"dead_letter"`` (the bad rows' original columns plus ``reason``). Per-vertex and per-edge
changes will be further tables (``"vertex_changes"``, ``"edge_changes"``) once the engine
maintains them. A :class:`ParquetResults` sink writes ``<folder>/<table>/batch-<id>.parquet``;
a callable sink is called as ``fn(batch_id, tables)``.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from gpu_ivm.engine import BatchReport

from ._state import EngineLog, write_bytes_atomic
from .ingest import UPDATE_COLUMNS, collect_arrow, split_bad_rows, updates_table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["COUNT_SCHEMA", "DriverEngine", "ParquetResults", "TriangleSink", "counts_table",
           "read_results"]

#: Schema of the per-batch ``counts`` results table.
COUNT_SCHEMA = pa.schema([
    ("batch_id", pa.int64()), ("rows", pa.int64()), ("updates", pa.int64()),
    ("triangles", pa.int64()), ("delta", pa.int64()), ("seconds", pa.float64()),
    ("path", pa.string()),
])


def counts_table(batch_id: int, report: dict) -> pa.Table:
    """The one-row ``counts`` table of a batch from a report dict (``BatchReport.to_dict()``).

    Examples
    --------
    >>> t = counts_table(3, {"rows": 2, "updates": 2, "triangles": 1, "delta": 1,
    ...                      "seconds": 0.01, "path": "delta"})
    >>> t.column("triangles").to_pylist()
    [1]
    """
    return pa.table({
        "batch_id": [int(batch_id)], "rows": [int(report["rows"])],
        "updates": [int(report["updates"])], "triangles": [int(report["triangles"])],
        "delta": [int(report["delta"])], "seconds": [float(report["seconds"])],
        "path": [str(report["path"])],
    }, schema=COUNT_SCHEMA)


class ParquetResults:
    """Writes each batch's result tables to ``<folder>/<table>/batch-<id>.parquet``.

    A file is written under a temporary name and renamed, and a replayed batch overwrites its
    file, so the folder is idempotent under replays.

    Examples
    --------
    >>> import tempfile
    >>> out = ParquetResults(tempfile.mkdtemp())
    >>> t = counts_table(0, {"rows": 1, "updates": 1, "triangles": 0, "delta": 0,
    ...                      "seconds": 0.0, "path": "delta"})
    >>> out(0, {"counts": t}); out(0, {"counts": t})
    >>> read_results(out.folder).num_rows
    1
    """

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = pathlib.Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, batch_id: int, tables: dict[str, pa.Table]) -> None:
        for name, table in tables.items():
            d = self.folder / name
            d.mkdir(parents=True, exist_ok=True)
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink)
            write_bytes_atomic(d / f"batch-{int(batch_id):012d}.parquet",
                               sink.getvalue().to_pybytes())


def read_results(folder: str | os.PathLike[str], table: str = "counts") -> pa.Table:
    """Read one results table written by :class:`ParquetResults`, in batch order."""
    d = pathlib.Path(folder) / table
    files = sorted(d.glob("batch-*.parquet")) if d.is_dir() else []
    if not files:
        return COUNT_SCHEMA.empty_table() if table == "counts" else pa.table({})
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


class DriverEngine:
    """A :class:`gpu_ivm.GraphEngine` on the driver, durable across query restarts.

    Parameters
    ----------
    state_dir : path or None
        Folder for the engine's snapshots (and write-ahead log). Re-opening it restores the
        engine as of its last applied batch. None: keep the engine in memory only (no
        restart safety; for one-shot replays).
    factory : callable
        Builds the empty engine (default ``gpu_ivm.GraphEngine``), e.g.
        ``lambda: GraphEngine(epsilon="1/3")``.
    base : optional
        The base graph (anything :meth:`GraphEngine.load` takes), loaded when the state folder
        is new; recorded as batch -1.
    snapshot_every : int
        1: a snapshot after every batch; m: a small log entry per batch and a snapshot every
        m-th (a snapshot costs O(graph), a log entry O(batch)).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> e = DriverEngine(d, base={"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> e.apply({"src": [1], "dst": [4], "sign": [1]}, batch_id=0).updates
    1
    >>> DriverEngine(d).engine.last_batch_id      # a restart finds the state
    0
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None = None, *,
                 factory: Callable[[], Any] | None = None, base: Any = None,
                 snapshot_every: int = 1):
        self.state_dir = None if state_dir is None else pathlib.Path(state_dir)
        self.factory = factory
        self.base = base
        self.log = None if state_dir is None else EngineLog(state_dir,
                                                            snapshot_every=snapshot_every)
        self._engine: Any = None
        self.last_result: dict | None = None

    def _new_engine(self) -> Any:
        if self.factory is not None:
            return self.factory()
        from gpu_ivm import GraphEngine

        return GraphEngine()

    @property
    def engine(self) -> Any:
        """The engine (restored from the state folder, or built, on first use)."""
        if self._engine is None:
            eng = self.log.restore() if self.log is not None else None
            if eng is None:
                eng = self._new_engine()
                if self.base is not None:
                    eng.load(self.base)
                eng.last_batch_id = -1
                if self.log is not None:
                    self.log.record(eng, -1)
            self._engine = eng
            self.last_result = self._read_last_result()
        return self._engine

    @property
    def last_batch_id(self) -> int | None:
        return self.engine.last_batch_id

    def count(self) -> int:
        return self.engine.count()

    def _read_last_result(self) -> dict | None:
        if self.state_dir is None:
            return None
        p = self.state_dir / "last_result.json"
        return json.loads(p.read_text()) if p.exists() else None

    def apply(self, updates: Any, *, batch_id: int,
              dead_letter: bool = False) -> BatchReport:
        """Apply a batch (anything the engine reads) as ``batch_id``, durably.

        With ``dead_letter``, rows that fail validation or set semantics are dropped and
        returned in ``report.extra["dead_letter"]`` (a table: original columns + ``reason``).
        """
        eng = self.engine
        t0 = time.perf_counter()
        if eng.last_batch_id is not None and batch_id <= eng.last_batch_id:
            return eng.apply(updates, batch_id=batch_id)  # the engine reports "skipped"
        try:
            if dead_letter:
                table = updates if isinstance(updates, pa.Table) else pa.table(updates)
                reports: list[BatchReport] = []
                good, dead = split_bad_rows(
                    table, validate=lambda t: reports.append(eng.apply(t, batch_id=batch_id)))
                rep = reports[-1]
                applied: Any = good
            else:
                rep = eng.apply(updates, batch_id=batch_id)
                applied, dead = updates, None
            if self.log is not None:
                if not isinstance(applied, pa.Table):
                    from gpu_ivm.io import read_graph_updates

                    applied = updates_table(read_graph_updates(applied))
                self.log.record(eng, batch_id, applied)
                self.log.gc()
        except BaseException:
            # an engine changed in memory but not made durable must not be used again
            if eng.last_batch_id == batch_id:
                self._engine = None
            raise
        rep.seconds = time.perf_counter() - t0
        self.last_result = dict(rep.to_dict(), batch_id=int(batch_id))
        if self.state_dir is not None:
            write_bytes_atomic(self.state_dir / "last_result.json",
                               json.dumps(self.last_result).encode())
        if dead is not None:
            rep.extra["dead_letter"] = dead
        return rep


class TriangleSink:
    """The ``foreachBatch`` function maintaining the triangle count of a stream of updates.

    Parameters
    ----------
    engine : DriverEngine or SparkHyperCube
        Where the count is maintained (and made durable).
    results : path or callable
        A folder (written with :class:`ParquetResults`) or ``fn(batch_id, tables)``.
    dead_letter : bool
        Route bad rows (validation, and set-semantics conflicts with a DriverEngine) to the
        ``dead_letter`` results table instead of failing the query.

    Examples
    --------
    Without Spark, :meth:`process` takes an Arrow table directly:

    >>> import tempfile, pyarrow as pa
    >>> seen = []
    >>> sink = TriangleSink(DriverEngine(tempfile.mkdtemp()),
    ...                     lambda b, t: seen.append(t["counts"].to_pylist()[0]["triangles"]))
    >>> sink.process(pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]}), 0)
    >>> sink.process(pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]}), 0)
    >>> seen     # the replay re-emits batch 0's recorded result
    [1, 1]
    """

    def __init__(self, engine: Any, results: str | os.PathLike[str] | Callable[..., Any], *,
                 dead_letter: bool = False):
        self.engine = engine
        self.results = results if callable(results) else ParquetResults(results)
        self.dead_letter = bool(dead_letter)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """foreachBatch entry point: ``query.writeStream.foreachBatch(sink)``."""
        batch_id = int(batch_id)
        if self._replayed(batch_id):
            return
        if isinstance(self.engine, DriverEngine):
            from .ingest import ingest

            if self.dead_letter:
                table = collect_arrow(df)
                self._apply(table, batch_id)
            else:
                self._apply(collect_arrow(ingest(df)), batch_id)
        else:
            self._apply_hypercube(df, batch_id)

    def process(self, table: pa.Table, batch_id: int) -> None:
        """Handle one batch given as an Arrow table (what ``__call__`` does after collecting;
        usable without Spark)."""
        batch_id = int(batch_id)
        if self._replayed(batch_id):
            return
        if isinstance(self.engine, DriverEngine):
            self._apply(table, batch_id)
        else:
            self._emit(batch_id, self.engine.apply(table, batch_id=batch_id), None)

    # ---------------------------------------------------------------- internals
    def _replayed(self, batch_id: int) -> bool:
        last = self.engine.last_batch_id
        if last is None or batch_id > last:
            return False
        rec = self.engine.last_result
        if rec is not None and int(rec.get("batch_id", rec.get("batch", -2))) == batch_id:
            self.results(batch_id, {"counts": counts_table(batch_id, rec)})
        return True

    def _apply(self, table: pa.Table, batch_id: int) -> None:
        if not self.dead_letter:
            table = table.select(list(UPDATE_COLUMNS)) if set(UPDATE_COLUMNS) <= set(
                table.column_names) else table
        rep = self.engine.apply(table, batch_id=batch_id, dead_letter=self.dead_letter)
        self._emit(batch_id, rep, rep.extra.pop("dead_letter", None))

    def _apply_hypercube(self, df: DataFrame, batch_id: int) -> None:
        dead = None
        if self.dead_letter:
            from .ingest import ingest

            df = df.cache()
            good, dead_df = ingest(df, dead_letter=True)
            dead = collect_arrow(dead_df)
            rep = self.engine.apply(good, batch_id=batch_id)
            df.unpersist()
        else:
            rep = self.engine.apply(df, batch_id=batch_id)
        self._emit(batch_id, rep, dead)

    def _emit(self, batch_id: int, rep: BatchReport, dead: pa.Table | None) -> None:
        tables = {"counts": counts_table(batch_id, rep.to_dict())}
        if dead is not None and dead.num_rows:
            tables["dead_letter"] = dead
        self.results(batch_id, tables)
