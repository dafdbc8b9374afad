"""Conjunctive queries with access patterns from Spark (:mod:`gpu_ivm.cq` on the driver).

:class:`SparkQuery` keeps a :class:`gpu_ivm.cq.engine.Engine` on the driver and takes its
relations, update batches and request batches as Spark DataFrames, each collected to the
driver once as Arrow (:func:`~gpu_ivm.spark_glue.ingest.collect_arrow`); answers come back as
DataFrames. Relation and batch frames have the relation's value columns (in atom-argument
order, or as named by ``relations=``) and ``mult`` (optional at load; +k inserts, -k
deletes); request frames have one column per input variable.

With ``state_dir`` the engine is durable: after the load and after every batch it is saved as
a numbered snapshot there (:mod:`gpu_ivm.cq.snapshot`, the newest two kept), with the last
batch id applied per relation stream; a new ``SparkQuery`` on the same folder resumes from the
newest snapshot. :meth:`foreach_batch` gives a ``writeStream.foreachBatch`` function for a
stream of one relation's updates: a batch id at or below the last one applied is a replay
(Spark re-running a micro-batch after a failure) and is skipped, so each micro-batch counts
exactly once.

Nothing here imports pyspark at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpu_ivm.cq.engine import Engine
from gpu_ivm.errors import InputError

from .ingest import collect_arrow, create_frame

__all__ = ["SparkQuery"]

META = "spark_query"


class SparkQuery:
    """A CQAP maintained on the driver over Spark DataFrames; see the module docstring.

    Parameters
    ----------
    spark : SparkSession
        The session the answer frames are created in.
    query : str
        ``Q(outputs | inputs) = atoms`` (:mod:`gpu_ivm.cq.syntax`).
    relations : mapping, optional
        Relation name -> the frame's column names in atom-argument order.
    state_dir : str or path-like, optional
        Folder of the durable state (created if missing); resumed from when it holds
        snapshots of the same query.
    """

    def __init__(self, spark: Any, query: str, *, relations: Mapping[str, list[str]] | None
                 = None, state_dir: str | Path | None = None):
        self.spark = spark
        self.engine = Engine(query, relations)
        self.state_dir = None if state_dir is None else Path(state_dir)
        self.last_batch_ids: dict[str, int] = {}
        if self.state_dir is not None:
            self._resume()

    # ------------------------------------------------------------------ durable state
    def _resume(self) -> None:
        from gpu_ivm.snapshot import find_latest, list_snapshots, read_manifest

        if not list_snapshots(self.state_dir):
            return
        latest = find_latest(self.state_dir)
        meta = read_manifest(latest).get("metadata", {}).get(META, {})
        eng = Engine.restore(latest)
        if str(eng.query) != str(self.engine.query):
            raise InputError(f"{self.state_dir} holds the state of the query {eng.query}, not "
                             f"{self.engine.query}; use another state_dir")
        self.engine = eng
        self.last_batch_ids = {str(k): int(v) for k, v in meta.get("last_batch_ids", {}).items()}

    def _save(self) -> None:
        if self.state_dir is None:
            return
        from gpu_ivm.cq.snapshot import save_numbered

        save_numbered(self.engine, self.state_dir, self.engine.batches_applied,
                      metadata={META: {"last_batch_ids": self.last_batch_ids}})

    # ------------------------------------------------------------------ updates
    def load(self, **frames: Any) -> int:
        """Replace the database with ``load(R=frame, S=frame)``; returns the count."""
        self.engine.load(**{name: collect_arrow(df) for name, df in frames.items()})
        self.last_batch_ids = {}
        self._save()
        return self.engine.count()

    def apply(self, frames: Mapping[str, Any], *, batch_id: int | None = None,
              stream: str = "batches") -> int:
        """Apply one batch ``{relation: frame with mult}`` atomically; returns the count.
        ``batch_id`` (per ``stream``): a batch at or below the last one applied is skipped."""
        if batch_id is not None:
            last = self.last_batch_ids.get(stream)
            if last is not None and int(batch_id) <= last:
                return self.engine.count()
        self.engine.apply({name: collect_arrow(df) for name, df in frames.items()})
        if batch_id is not None:
            self.last_batch_ids[stream] = int(batch_id)
        self._save()
        return self.engine.count()

    def foreach_batch(self, relation: str) -> Callable[[Any, int], None]:
        """A ``writeStream.foreachBatch`` function applying a stream of updates of
        ``relation`` (value columns and ``mult``), each micro-batch exactly once."""
        if relation not in self.engine.schemas:
            raise InputError(f"relation {relation} does not occur in the query "
                             f"(relations: {', '.join(self.engine.schemas)})")

        def fn(df: Any, batch_id: int) -> None:
            self.apply({relation: df}, batch_id=batch_id, stream=relation)

        return fn

    # ------------------------------------------------------------------ requests
    def request(self, requests: Any = None, *, limit: int | None = None) -> Any:
        """The answers of a request frame (one column per input variable; None for a query
        without inputs) as a DataFrame ``request, outputs..., mult`` (see
        :meth:`gpu_ivm.cq.engine.Engine.request`)."""
        reqs = None if requests is None else collect_arrow(requests)
        return create_frame(self.spark, self.engine.request(reqs, limit=limit))

    def count(self, requests: Any = None) -> Any:
        """The total count (no argument), or a DataFrame ``request, count`` per request."""
        if requests is None:
            return self.engine.count()
        return create_frame(self.spark, self.engine.count(collect_arrow(requests)))
