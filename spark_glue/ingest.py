"""Arrow ingestion: Spark record batches → validated engine update batches.

The functions here run inside ``DataFrame.mapInArrow`` (or ``groupBy(...).applyInArrow``) on
the executors and use exactly the core's validation, :func:`gpu_ivm.io.read_graph_updates`,
on each ``pyarrow.RecordBatch`` Spark hands them (their size is Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 rows by default). A bad row either
fails the task with the core's :class:`~gpu_ivm.errors.InputError` (naming the column and the
row inside that Arrow batch, plus the row's values, since Spark has no global row number), or,
with ``dead_letter=True``, goes to a dead-letter output: the original columns plus ``reason``.

Nothing here imports pyspark at module level; the pure-Arrow helpers work without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from gpu_ivm.errors import InputError
from gpu_ivm.io import GraphUpdates, read_graph_updates

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "UPDATE_COLUMNS",
    "arrow_update_fn",
    "collect_arrow",
    "ingest",
    "split_bad_rows",
    "updates_table",
    "validate_batch",
]

#: The columns of a validated update batch.
UPDATE_COLUMNS: tuple[str, ...] = ("src", "dst", "sign")


def _key_type(string_keys: bool) -> pa.DataType:
    return pa.string() if string_keys else pa.int64()


def updates_table(u: GraphUpdates, *, string_keys: bool | None = None) -> pa.Table:
    """A validated :class:`~gpu_ivm.io.GraphUpdates` as an Arrow table ``src, dst, sign``.

    Examples
    --------
    >>> u = read_graph_updates({"src": [1], "dst": [2], "sign": [1]})
    >>> updates_table(u).to_pydict()
    {'src': [1], 'dst': [2], 'sign': [1]}
    """
    strings = u.src.dtype == object if string_keys is None else string_keys
    kt = _key_type(strings)
    if strings and u.src.dtype != object:
        src, dst = u.src.astype(str).astype(object), u.dst.astype(str).astype(object)
    else:
        src, dst = u.src, u.dst
    return pa.table({"src": pa.array(src, kt), "dst": pa.array(dst, kt),
                     "sign": pa.array(u.sign, pa.int64())})


def _row_values(rb: pa.RecordBatch | pa.Table, row: int) -> str:
    try:
        vals = {name: rb.column(name)[row].as_py() for name in rb.schema.names}
    except (IndexError, KeyError):  # pragma: no cover - defensive
        return ""
    return ", ".join(f"{k}={v!r}" for k, v in vals.items())


def _base_message(e: InputError) -> str:
    """The message of ``e`` without the ``(column ..., row ...)`` suffix InputError adds."""
    return e.detail


def validate_batch(rb: pa.RecordBatch | pa.Table, *,
                   string_keys: bool | None = None) -> pa.Table:
    """Validate one Arrow batch with the core rules; return it as ``src, dst, sign``.

    Raises
    ------
    gpu_ivm.errors.InputError
        The core's error for the first bad row (same ``column`` and ``row``, the row being
        0-based inside ``rb``), its message extended with the row's values.

    Examples
    --------
    >>> import pyarrow as pa
    >>> validate_batch(pa.record_batch({"src": [1], "dst": [2], "sign": [-1]})).num_rows
    1
    >>> try:
    ...     validate_batch(pa.record_batch({"src": [1, 2], "dst": [2, 3], "sign": [1, 2]}))
    ... except InputError as e:
    ...     print(e.column, e.row)
    sign 1
    """
    try:
        u = read_graph_updates(rb)
    except InputError as e:
        if e.row is None:
            raise
        raise type(e)(f"{_base_message(e)} in an Arrow batch of {rb.num_rows} rows "
                      f"[{_row_values(rb, e.row)}]", column=e.column, row=e.row) from e
    return updates_table(u, string_keys=string_keys)


def split_bad_rows(rb: pa.RecordBatch | pa.Table, *, string_keys: bool | None = None,
                   validate: Callable[[pa.Table], Any] | None = None,
                   ) -> tuple[pa.Table, pa.Table]:
    """Split an Arrow batch into validated updates and dead-letter rows.

    Rows are validated with :func:`gpu_ivm.io.read_graph_updates`; each time it names a bad
    row, that row moves to the dead-letter table with the error message as ``reason`` (the
    row number in the message is the row's index in ``rb``) and the rest is validated again.
    ``validate``, if given, is a further check run on the validated rows that raises
    InputError naming a row (e.g. an engine's ``apply``, for set-semantics conflicts); it may
    return a value, which is ignored. Errors that name no row (e.g. a missing column) are
    raised. The cost is one validation per bad row, fine when bad rows are rare.

    Returns
    -------
    (good, dead) : tuple of pyarrow.Table
        ``good`` has ``src, dst, sign``; ``dead`` the original columns plus ``reason``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> rb = pa.record_batch({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 5, 1]})
    >>> good, dead = split_bad_rows(rb)
    >>> good.num_rows, dead.column("src").to_pylist()
    (2, [2])
    >>> print(dead.column("reason")[0].as_py())
    sign must be +1 or -1, got 5 in column 'sign' (column 'sign', row 1)
    """
    table = rb if isinstance(rb, pa.Table) else pa.Table.from_batches([rb])
    keep = np.arange(table.num_rows)
    bad: list[int] = []
    reasons: list[str] = []
    cur = table
    while True:
        try:
            good = updates_table(read_graph_updates(cur), string_keys=string_keys)
            if validate is not None:
                validate(good)
            break
        except InputError as e:
            if e.row is None or not 0 <= e.row < keep.shape[0]:
                raise
            orig = int(keep[e.row])
            where = [f"column {e.column!r}"] if e.column is not None else []
            where.append(f"row {orig}")
            bad.append(orig)
            reasons.append(f"{_base_message(e)} ({', '.join(where)})")
            keep = np.delete(keep, e.row)
            cur = table.take(pa.array(keep, pa.int64()))
    if bad:
        order = np.argsort(np.asarray(bad), kind="stable")
        idx = np.asarray(bad, np.int64)[order]
        dead = table.take(pa.array(idx, pa.int64())).append_column(
            "reason", pa.array([reasons[i] for i in order], pa.string()))
    else:
        dead = table.slice(0, 0).append_column("reason", pa.array([], pa.string()))
    return good, dead


def arrow_update_fn(*, dead_letter: bool = False, string_keys: bool = False,
                    original: pa.Schema | None = None,
                    ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function turning record batches into validated update batches.

    Without ``dead_letter`` the output columns are ``src, dst, sign`` and a bad row fails the
    task (see :func:`validate_batch`). With it, every output row also has ``reason`` (null
    for good rows) and ``original``, a struct of the input row (null for good rows), so one
    pass gives both outputs; :func:`ingest` splits them.

    Examples
    --------
    >>> import pyarrow as pa
    >>> fn = arrow_update_fn()
    >>> out = list(fn(iter([pa.record_batch({"src": [1], "dst": [2], "sign": [1]})])))
    >>> out[0].to_pydict()
    {'src': [1], 'dst': [2], 'sign': [1]}
    """

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            if not dead_letter:
                t = validate_batch(rb, string_keys=string_keys)
                yield from t.to_batches() or [_empty_updates(string_keys).to_batches()[0]]
                continue
            good, dead = split_bad_rows(rb, string_keys=string_keys)
            yield from _dead_letter_batches(good, dead, rb.schema if original is None
                                            else original, string_keys)

    return fn


def _empty_updates(string_keys: bool) -> pa.Table:
    kt = _key_type(string_keys)
    return pa.table({"src": pa.array([], kt), "dst": pa.array([], kt),
                     "sign": pa.array([], pa.int64())})


def _dead_letter_batches(good: pa.Table, dead: pa.Table, original: pa.Schema,
                         string_keys: bool) -> Iterator[pa.RecordBatch]:
    kt = _key_type(string_keys)
    struct_t = pa.struct(list(original))
    ng, nd = good.num_rows, dead.num_rows
    if ng:
        yield pa.record_batch({
            "src": good.column("src").combine_chunks().cast(kt),
            "dst": good.column("dst").combine_chunks().cast(kt),
            "sign": good.column("sign").combine_chunks(),
            "reason": pa.nulls(ng, pa.string()),
            "original": pa.nulls(ng, struct_t),
        })
    if nd:
        cols = [dead.column(f.name).combine_chunks().cast(f.type) for f in original]
        yield pa.record_batch({
            "src": pa.nulls(nd, kt), "dst": pa.nulls(nd, kt), "sign": pa.nulls(nd, pa.int64()),
            "reason": dead.column("reason").combine_chunks(),
            "original": pa.StructArray.from_arrays(cols, fields=list(original)),
        })


# ---------------------------------------------------------------------- Spark side
def _spark_string_keys(df: DataFrame) -> bool:
    from pyspark.sql.types import StringType

    names = df.schema.names
    if "src" not in names:
        return False
    return isinstance(df.schema["src"].dataType, StringType)


def _update_schema(string_keys: bool) -> str:
    kt = "string" if string_keys else "bigint"
    return f"src {kt}, dst {kt}, sign bigint"


def ingest(df: DataFrame, *, dead_letter: bool = False,
           ) -> DataFrame | tuple[DataFrame, DataFrame]:
    """Validate a Spark DataFrame of updates (``src``, ``dst``, ``sign``) on the executors.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        Update rows. Ids are ``bigint`` (or anything the core turns into int64 exactly) or
        strings (a string ``src`` column makes string keys).
    dead_letter : bool
        Route bad rows to a second DataFrame instead of failing.

    Returns
    -------
    DataFrame or (DataFrame, DataFrame)
        The validated updates ``src, dst, sign``; with ``dead_letter`` also the bad rows:
        the original columns plus ``reason`` (the core's message). Both come from one
        ``mapInArrow`` pass; ``cache()`` the input if you act on both.

    Raises
    ------
    pyspark.errors.PythonException
        On an action, when a row is bad and ``dead_letter`` is False; its message holds the
        core's :class:`~gpu_ivm.errors.InputError` text (column, row, row values).
    """
    strings = _spark_string_keys(df)
    if not dead_letter:
        return df.mapInArrow(arrow_update_fn(string_keys=strings), _update_schema(strings))
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType(
        [f for f in StructType.fromDDL(_update_schema(strings)).fields]
        + [StructField("reason", StringType(), True), StructField("original", df.schema, True)]
    )
    orig_schema = _arrow_schema_of(df)
    out = df.mapInArrow(arrow_update_fn(dead_letter=True, string_keys=strings,
                                        original=orig_schema), schema)
    good = out.where(F.col("reason").isNull()).select(*UPDATE_COLUMNS)
    dead = out.where(F.col("reason").isNotNull()).select("original.*", "reason")
    return good, dead


def _arrow_schema_of(df: DataFrame) -> pa.Schema:
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:  # pragma: no cover
        return None  # type: ignore[return-value]
    return to_arrow_schema(df.schema)


def collect_arrow(df: DataFrame) -> pa.Table:
    """Collect a DataFrame to the driver as a ``pyarrow.Table`` (``toArrow`` on Spark ≥ 4,
    the private ``_collect_as_arrow`` on 3.5)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    batches = df._collect_as_arrow()  # pragma: no cover - Spark 3.5
    if batches:  # pragma: no cover
        return pa.Table.from_batches(batches)
    from pyspark.sql.pandas.types import to_arrow_schema  # pragma: no cover

    return to_arrow_schema(df.schema).empty_table()  # pragma: no cover


def create_frame(spark: Any, table: pa.Table) -> DataFrame:
    """A Spark DataFrame from an Arrow table (``createDataFrame`` takes Arrow on Spark ≥ 4;
    via pandas on 3.5)."""
    try:
        return spark.createDataFrame(table)
    except (TypeError, ValueError):  # pragma: no cover - Spark 3.5
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame(table.to_pandas(), schema=from_arrow_schema(table.schema))
