"""A local SparkSession configured the way gpu_ivm's Spark glue expects."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["local_session"]


def local_session(master: str = "local[2]", *, app_name: str = "gpu_ivm",
                  shuffle_partitions: int = 2, max_records_per_batch: int | None = None,
                  log_level: str = "ERROR") -> SparkSession:
    """Start (or get) a SparkSession for the glue.

    Sets ``PYSPARK_PYTHON`` to this interpreter (Spark's workers otherwise run the
    ``python3`` on PATH, which may lack pyarrow and gpu_ivm) and ``SPARK_LOCAL_IP`` to
    127.0.0.1 unless they are set, disables the UI and the console progress bar, and sets
    ``spark.sql.shuffle.partitions`` (the number of tasks that apply HyperCube shards) and,
    if given, ``spark.sql.execution.arrow.maxRecordsPerBatch`` (the Arrow batch size the
    ingestion functions see; Spark's default is 10,000).

    Raises
    ------
    ImportError
        If pyspark is not installed (``pip install 'gpu_ivm[spark]'``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the Spark glue needs pyspark: pip install 'gpu_ivm[spark]'") from e
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(int(shuffle_partitions))))
    if max_records_per_batch is not None:
        b = b.config("spark.sql.execution.arrow.maxRecordsPerBatch",
                     str(int(max_records_per_batch)))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
