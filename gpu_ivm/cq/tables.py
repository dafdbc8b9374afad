"""Read relation and request tables (pyarrow, pandas or a dict of arrays) into int64 columns,
or string columns for the values a :class:`~gpu_ivm.cq.values.ValueDict` encodes.

Every value is read exactly or refused with an :class:`~gpu_ivm.errors.InputError` that names
the column and the first offending row: integer (or, where allowed, string) columns only, no
nulls, no column mixing the two.

>>> cols = int_columns({"a": [1, 2], "mult": [1, -1]}, "R")
>>> {k: v.tolist() for k, v in cols.items()}
{'a': [1, 2], 'mult': [1, -1]}
>>> int_columns({"a": [1.5]}, "relation R")
Traceback (most recent call last):
...
gpu_ivm.errors.InputError: relation R: column 'a' must hold integers, not float64 (column 'a')
>>> {k: (v.tolist(), kind) for k, (v, kind) in value_columns({"a": ["x", "y"], "b": [1, 2]},
...                                                          "R").items()}
{'a': (['x', 'y'], 'str'), 'b': ([1, 2], 'int')}
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import InputError

__all__ = ["int_columns", "value_columns"]


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
    return {name: arr for name, (arr, _) in _columns(table, what, strings=False).items()}


def value_columns(table, what: str) -> dict[str, tuple[np.ndarray, str]]:
    """Column name -> ``(array, kind)``, all of one length: an int64 array (kind ``"int"``)
    or an object array of Python strings (kind ``"str"``); refuses other data, nulls and
    columns that mix integers and strings."""
    return _columns(table, what, strings=True)


def _columns(table, what: str, strings: bool) -> dict[str, tuple[np.ndarray, str]]:
    out: dict[str, tuple[np.ndarray, str]] = {}
    n = None
    for name, raw in _raw_columns(table, what).items():
        arr, kind = _column(np.asarray(raw), name, what, strings)
        if n is not None and len(arr) != n:
            raise InputError(f"{what}: column {name!r} has {len(arr)} rows, not {n}",
                             column=name)
        n = len(arr)
        out[name] = (arr, kind)
    return out


def _column(arr: np.ndarray, name: str, what: str, strings: bool) -> tuple[np.ndarray, str]:
    """One column as ``(int64 array, "int")`` or ``(object array of str, "str")``."""
    if arr.ndim != 1:
        raise InputError(f"{what}: column {name!r} is not one-dimensional", column=name)
    if arr.size == 0:  # an empty list has no element type to misread
        return np.zeros(0, dtype=np.int64), "int"
    if strings and arr.dtype.kind == "U":
        return arr.astype(object), "str"
    if arr.dtype == object:
        if strings and isinstance(arr[0], str):
            bad = [i for i, x in enumerate(arr) if not isinstance(x, str)]
            if bad:
                raise InputError(f"{what}: column {name!r} mixes strings with "
                                 f"{type(arr[bad[0]]).__name__} values", column=name,
                                 row=bad[0])
            return arr, "str"
        bad = [i for i, x in enumerate(arr) if x is None or not isinstance(x, (int, np.integer))
               or isinstance(x, bool)]
        if bad:
            kinds = "integers or strings" if strings else "integers"
            raise InputError(f"{what}: column {name!r} must hold {kinds}", column=name,
                             row=bad[0])
        vals = [int(x) for x in arr]
        big = [i for i, x in enumerate(vals) if not -(2 ** 63) <= x < 2 ** 63]
        if big:
            raise InputError(f"{what}: column {name!r} has a value outside int64",
                             column=name, row=big[0])
        return np.array(vals, dtype=np.int64), "int"
    if arr.dtype.kind == "u":
        if len(arr) and arr.max() > np.iinfo(np.int64).max:
            raise InputError(f"{what}: column {name!r} has a value outside int64",
                             column=name, row=int(np.argmax(arr > np.iinfo(np.int64).max)))
        return arr.astype(np.int64), "int"
    if arr.dtype.kind == "i":
        return arr.astype(np.int64), "int"
    kinds = "integers or strings" if strings else "integers"
    raise InputError(f"{what}: column {name!r} must hold {kinds}, not {arr.dtype}",
                     column=name)
