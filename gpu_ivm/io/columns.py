"""Column conversion and validation: any column-like to a validated numpy array.

Every function names the column and the 0-based row of the first bad value in the
:class:`~gpu_ivm.errors.InputError` it raises. Validation is vectorised with numpy and pyarrow;
only columns of Python objects are inspected element by element.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.errors import InputError

_INT64_MAX = int(np.iinfo(np.int64).max)
_INT64_MIN = int(np.iinfo(np.int64).min)
_TWO_63 = 2.0**63
INT_PATTERN = r"^[+-]?[0-9]+$"
"""A decimal integer token, as the readers accept it (one optional sign)."""


def is_dataframe(source: Any) -> bool:
    """True for a pandas DataFrame (without importing pandas)."""
    pd_mod = sys.modules.get("pandas")
    return pd_mod is not None and isinstance(source, pd_mod.DataFrame)


def is_series(obj: Any) -> bool:
    """True for a pandas Series (without importing pandas)."""
    pd_mod = sys.modules.get("pandas")
    return pd_mod is not None and isinstance(obj, pd_mod.Series)


def first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


def null_error(name: str, row: int, what: str = "null value") -> InputError:
    return InputError(f"{what} in column {name!r}", column=name, row=row)


def _primitive_to_numpy(arr: pa.Array) -> np.ndarray:
    """Zero-copy view of a null-free integer/float Arrow array.

    Read straight from the data buffer: ``Array.to_numpy`` would import pandas (when it is
    installed) on first use, which costs a few hundred milliseconds.
    """
    t = arr.type
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    buf = arr.buffers()[1]
    if len(arr) == 0 or buf is None:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _arrow_values(arr: pa.Array | pa.ChunkedArray, name: str) -> tuple[np.ndarray, bool]:
    """Null-check an Arrow column and convert it to numpy. Returns (values, all_str)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count:
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        raise null_error(name, first(nulls))
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _primitive_to_numpy(arr), False
    if pa.types.is_boolean(t):
        return np.zeros(len(arr), dtype=bool), False  # refused (if not empty) by the caller
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.to_numpy(zero_copy_only=False), True
    if pa.types.is_null(t):  # only reachable with zero rows
        return np.empty(0, dtype=np.int64), False
    raise InputError(
        f"column {name!r} has unsupported type {t}",
        column=name,
        row=0 if len(arr) else None,
    )


def _pandas_values(series: Any, name: str) -> tuple[np.ndarray, bool]:
    na = np.asarray(series.isna(), dtype=bool)
    if na.any():
        raise null_error(name, first(na))
    if isinstance(series.dtype, np.dtype):
        return column_values(series.to_numpy(), name)
    try:
        arr = pa.array(series)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputError(
            f"column {name!r} has unsupported dtype {series.dtype}", column=name
        ) from exc
    return _arrow_values(arr, name)


def column_values(raw: Any, name: str) -> tuple[np.ndarray, bool]:
    """Turn any column-like into a 1-D numpy array (nulls rejected). (values, all_str)."""
    if isinstance(raw, (pa.Array, pa.ChunkedArray)):
        return _arrow_values(raw, name)
    if is_series(raw):
        return _pandas_values(raw, name)
    if isinstance(raw, np.ndarray):
        arr = raw
    elif isinstance(raw, (list, tuple)):
        arr = np.fromiter(raw, dtype=object, count=len(raw))  # never nested or stringified
    else:
        try:
            arr = np.asarray(raw)
        except (TypeError, ValueError) as exc:
            raise InputError(f"column {name!r} is not array-like: {exc}", column=name) from exc
    if arr.ndim != 1:
        raise InputError(
            f"column {name!r} must be one-dimensional, got shape {arr.shape}", column=name
        )
    if arr.dtype == object:
        return _object_values(arr, name)
    if arr.dtype.kind == "U":
        return arr.astype(object), True
    return arr, False


def _kind_of(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "null" if v != v else "float"
    return "null" if v is None or type(v).__name__ in ("NAType", "NaTType") else "other"


def _ints_to_int64(values: list[int], name: str) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        i = next(i for i, v in enumerate(values) if not _INT64_MIN <= v <= _INT64_MAX)
        raise InputError(
            f"int64 overflow: value {values[i]} in column {name!r} is outside the int64 range",
            column=name,
            row=i,
        ) from None


def _exact_int(v: Any, name: str, row: int) -> int:
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not np.isfinite(f) or f != int(f):
            what = "non-finite" if not np.isfinite(f) else "non-integral"
            raise InputError(f"{what} value {f!r} in column {name!r}", column=name, row=row)
    return int(v)


def _object_values(arr: np.ndarray, name: str) -> tuple[np.ndarray, bool]:
    """Validate a column of Python objects: no nulls, one kind (str or number), no bools."""
    if arr.shape[0] == 0:
        return arr.copy(), True
    try:  # fast path: pyarrow infers one type for the whole column in C
        inferred = pa.array(arr, from_pandas=True)
    except Exception:  # noqa: BLE001 - any failure means mixed or odd values: inspect
        inferred = None
    if inferred is not None:
        if inferred.null_count:
            raise null_error(name, first(inferred.is_null().to_numpy(zero_copy_only=False)))
        t = inferred.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return arr.copy(), True
        if pa.types.is_integer(t):
            return inferred.to_numpy(zero_copy_only=False), False
    # Slow path (mixed kinds, or floats, which must not round large integers): every value.
    vals = arr.tolist()
    strings = isinstance(vals[0], str)
    for i, v in enumerate(vals):
        kind = _kind_of(v)
        if kind == "null":
            raise null_error(name, i)
        if kind in ("bool", "other"):
            problem = (f"boolean value {v!r} in column {name!r}: booleans are not valid here"
                       if kind == "bool" else
                       f"unsupported value {v!r} of type {type(v).__name__} in column {name!r}")
            raise InputError(problem, column=name, row=i)
        if (kind == "str") != strings:
            raise InputError(
                f"mixed value types in column {name!r}: row 0 holds a "
                f"{'str' if strings else 'number'} but this row holds {type(v).__name__} {v!r}",
                column=name,
                row=i,
            )
    if strings:
        return np.array([str(v) for v in vals], dtype=object), True
    return _ints_to_int64([_exact_int(v, name, i) for i, v in enumerate(vals)], name), False


def _floats_to_int64(v: np.ndarray, name: str) -> np.ndarray:
    v = v.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.trunc(v) == v) & (v >= -_TWO_63) & (v < _TWO_63)
    if not ok.all():
        i = first(~ok)
        x = float(v[i])
        if np.isnan(x):
            raise null_error(name, i, "null value (NaN)")
        if np.isinf(x):
            raise InputError(f"non-finite value {x!r} in column {name!r}", column=name, row=i)
        if x != np.trunc(x):
            raise InputError(f"non-integral value {x!r} in column {name!r}", column=name, row=i)
        raise InputError(
            f"int64 overflow: value {int(x)} in column {name!r} is outside the int64 range",
            column=name,
            row=i,
        )
    return v.astype(np.int64)


def strings_to_int64(values: np.ndarray, name: str) -> np.ndarray:
    """Parse a column of decimal integer strings, naming the first row that is not one."""
    arr = pc.replace_substring_regex(pa.array(values, type=pa.string()), r"^\+", "")
    try:
        return pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False).copy()
    except pa.ArrowInvalid:
        pass
    ok = pc.match_substring_regex(arr, INT_PATTERN).to_numpy(zero_copy_only=False)
    if not ok.all():
        i = first(~ok)
        raise InputError(
            f"value {values[i]!r} in column {name!r} is not an integer", column=name, row=i
        )
    _ints_to_int64([int(s) for s in values], name)  # raises the overflow error with its row
    raise InputError(f"cannot parse column {name!r} as int64", column=name)  # pragma: no cover


def _numbers_to_int64(values: np.ndarray, name: str) -> np.ndarray:
    """Convert a validated numeric numpy array to a fresh int64 array."""
    kind = values.dtype.kind
    if kind == "i":
        return values.astype(np.int64, copy=True)
    if kind == "u":
        if values.dtype.itemsize == 8 and values.shape[0]:
            big = values > np.uint64(_INT64_MAX)
            if big.any():
                i = first(big)
                raise InputError(
                    f"int64 overflow: value {int(values[i])} in column {name!r} exceeds the "
                    "int64 maximum",
                    column=name,
                    row=i,
                )
        return values.astype(np.int64)
    if kind == "f":
        return _floats_to_int64(values, name)
    if kind == "b":
        if values.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        raise InputError(
            f"column {name!r} holds booleans, which are not valid here", column=name, row=0
        )
    raise InputError(
        f"column {name!r} has unsupported dtype {values.dtype}",
        column=name,
        row=0 if values.shape[0] else None,
    )


def id_column(raw: Any, name: str) -> np.ndarray:
    """Node ids: int64, or an object array of str."""
    values, all_str = column_values(raw, name)
    return values if all_str else _numbers_to_int64(values, name)


def int_column(raw: Any, name: str) -> np.ndarray:
    """An integer column (sign, mult, time): integral floats and integer strings accepted."""
    values, all_str = column_values(raw, name)
    if all_str:
        return strings_to_int64(values, name)
    return _numbers_to_int64(values, name)


def sign_column(raw: Any, name: str) -> np.ndarray:
    sign = int_column(raw, name)
    bad = (sign != 1) & (sign != -1)
    if bad.any():
        i = first(bad)
        raise InputError(
            f"sign must be +1 or -1, got {int(sign[i])} in column {name!r}", column=name, row=i
        )
    return sign


def rel_column(raw: Any, name: str) -> np.ndarray:
    """Relation codes, int8: ``"R"``, ``"S"``, ``"T"`` (any case) or 0, 1, 2."""
    values, all_str = column_values(raw, name)
    if all_str:
        upper = pc.utf8_upper(pa.array(values, type=pa.string()))
        idx = pc.index_in(upper, value_set=pa.array(["R", "S", "T", "0", "1", "2"]))
        bad = idx.is_null().to_numpy(zero_copy_only=False)
        codes = idx.fill_null(0).to_numpy(zero_copy_only=False) % 3
    else:
        codes = _numbers_to_int64(values, name)
        bad = (codes < 0) | (codes > 2)
    if bad.any():
        i = first(bad)
        shown = repr(values[i]) if all_str else int(codes[i])
        raise InputError(f"invalid relation {shown} in column {name!r}: expected 'R', 'S', 'T' "
                         "or 0, 1, 2", column=name, row=i)
    return codes.astype(np.int8)
