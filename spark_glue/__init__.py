"""Spark integration for gpu_ivm (optional extra: ``pip install 'gpu_ivm[spark]'``).

* :mod:`.ingest` — Arrow ingestion: ``mapInArrow`` functions that validate Spark record
  batches with the core rules, failing on a bad row or routing it to a dead-letter output;
* :mod:`.sink` — :class:`TriangleSink`, an exactly-once ``foreachBatch`` sink over a durable
  driver-resident engine (:class:`DriverEngine`) or the HyperCube shards;
* :mod:`.hypercube` — HyperCube (shares) scale-out of the count over k³ shard engines
  (:class:`SparkHyperCube`, and :class:`LocalHyperCube` without Spark);
* :mod:`.query` — :class:`SparkQuery`, a conjunctive query with access patterns
  (:mod:`gpu_ivm.cq`) over DataFrames: relations, update batches, ``foreachBatch`` streams
  and request batches;
* :mod:`.cli` — the ``gpu-ivm spark-replay`` subcommand; :mod:`.session` — a local session.

Importing this package does not import pyspark (the Spark-facing functions import it when
called). See docs/spark.md.

>>> import gpu_ivm.spark_glue as sg
>>> sg.snapshot_format() in ("gpu_ivm.snapshot", "pickle")
True
"""

from __future__ import annotations

from ._state import EngineLog, load_engine, save_engine, snapshot_format
from .hypercube import LocalHyperCube, SparkHyperCube, clear_registry, route_updates, vertex_hash
from .ingest import arrow_update_fn, collect_arrow, ingest, split_bad_rows, validate_batch
from .query import SparkQuery
from .session import local_session
from .sink import DriverEngine, ParquetResults, TriangleSink, read_results

__all__ = [
    "DriverEngine",
    "EngineLog",
    "LocalHyperCube",
    "ParquetResults",
    "SparkHyperCube",
    "SparkQuery",
    "TriangleSink",
    "arrow_update_fn",
    "clear_registry",
    "collect_arrow",
    "ingest",
    "load_engine",
    "local_session",
    "read_results",
    "route_updates",
    "save_engine",
    "snapshot_format",
    "split_bad_rows",
    "validate_batch",
    "vertex_hash",
]
