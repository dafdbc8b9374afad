"""Read relation and request tables (pyarrow, pandas or a dict of arrays) into int64 columns.

Every value is read exactly or refused with an :class:`~gpu_ivm.errors.InputError` that names
the column and the first offending row: integer columns only, no nulls.

>>> cols = int_columns({"a": [1, 2], "mult": [1, -1]}, "R")
>>> {k: v.tolist() for k, v in cols.items()}
{'a': [1, 2], 'mult': [1, -1]}
>>> int_columns({"a": [1.5]}, "relation R")
Traceback (most recent call last):
...
gpu_ivm.errors.InputError: relation R: column 'a' must hold integers, not float64 (column 'a')
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import InputError

__all__ = ["int_columns"]


def _raw_columns(table, what: str) -> dict[str, object]:
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pa = None
    if pa is not None and isinstance(table, (pa.Table, pa.RecordBatch)):
        out = {}
        for name in table.column_names:
            col = table.column(name)
            if col.null_count:
                mask = col.is_null()
                row = int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False)))[0])
                raise InputError(f"{what}: column {name!r} has a null", column=name, row=row)
            out[name] = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
        return out
    if hasattr(table, "columns") and hasattr(table, "to_numpy") and hasattr(table, "isna"):
        out = {}
        for name in table.columns:
            col = table[name]
            na = np.asarray(col.isna())
            if na.any():
                raise InputError(f"{what}: column {name!r} has a null", column=str(name),
                                 row=int(np.flatnonzero(na)[0]))
            out[str(name)] = col.to_numpy()
        return out
    if isinstance(table, Mapping):
        return {str(k): v for k, v in table.items()}
    raise InputError(f"{what}: expected a pyarrow Table, a pandas DataFrame or a dict of "
                     f"columns, not {type(table).__name__}")


def int_columns(table, what: str) -> dict[str, np.ndarray]:
    """Column name -> int64 array, all of one length; refuses non-integer data and nulls."""
    out: dict[str, np.ndarray] = {}
    n = None
    for name, raw in _raw_columns(table, what).items():
        arr = np.asarray(raw)
        if arr.ndim != 1:
            raise InputError(f"{what}: column {name!r} is not one-dimensional", column=name)
        if arr.size == 0:  # an empty list has no element type to misread
            arr = np.zeros(0, dtype=np.int64)
        elif arr.dtype == object:
            bad = [i for i, x in enumerate(arr) if x is None or not isinstance(x, (int, np.integer))
                   or isinstance(x, bool)]
            if bad:
                raise InputError(f"{what}: column {name!r} must hold integers",
                                 column=name, row=bad[0])
            vals = [int(x) for x in arr]
            big = [i for i, x in enumerate(vals) if not -(2 ** 63) <= x < 2 ** 63]
            if big:
                raise InputError(f"{what}: column {name!r} has a value outside int64",
                                 column=name, row=big[0])
            arr = np.array(vals, dtype=np.int64)
        elif arr.dtype.kind == "u":
            if len(arr) and arr.max() > np.iinfo(np.int64).max:
                raise InputError(f"{what}: column {name!r} has a value outside int64",
                                 column=name, row=int(np.argmax(arr > np.iinfo(np.int64).max)))
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "i":
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{what}: column {name!r} must hold integers, not {arr.dtype}",
                             column=name)
        if n is not None and len(arr) != n:
            raise InputError(f"{what}: column {name!r} has {len(arr)} rows, not {n}",
                             column=name)
        n = len(arr)
        out[name] = arr
    return out
