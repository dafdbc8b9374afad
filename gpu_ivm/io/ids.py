"""Node-id columns: integers or strings, never a silent mix of the two.

* ``ids="auto"`` (the default): typed sources keep their type (src and dst must agree);
  ids read from text (CSV, SNAP) are integers when every id is one, strings when no id is
  one, and a mix is refused, naming the first id of the minority kind (on a tie, the
  first non-integer);
* ``ids="str"``: every id is a string (integer ids become their decimal text);
* ``ids="int"``: every id must be an integer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.errors import InputError

from .columns import INT_PATTERN, column_values, first, id_column, strings_to_int64
from .layout import Gathered

ID_MODES = ("auto", "str", "int")
_ADVICE = "pass ids='str' (--string-ids on the command line) to read every id as a string"


def check_ids(ids: str) -> str:
    if ids not in ID_MODES:
        raise InputError(f"ids= must be one of {', '.join(map(repr, ID_MODES))}, got {ids!r}")
    return ids


def _as_str(values: np.ndarray) -> np.ndarray:
    if values.dtype == object:
        return values
    return values.astype(str).astype(object)


def id_pair(g: Gathered, ids: str) -> tuple[np.ndarray, np.ndarray]:
    """The src and dst id arrays of a gathered source, by the ``ids`` rule."""
    (src_name, src_raw), (dst_name, dst_raw) = g.cols["src"], g.cols["dst"]
    if g.text_like and ids != "str":
        return _text_ids(g, ids)
    src, dst = id_column(src_raw, src_name), id_column(dst_raw, dst_name)
    if ids == "str":
        return _as_str(src), _as_str(dst)
    if ids == "int":
        return _must_be_ints(src, src_name), _must_be_ints(dst, dst_name)
    src_str, dst_str = src.dtype == object, dst.dtype == object
    if src_str != dst_str and src.shape[0]:
        kinds = {True: "strings", False: "integers"}
        raise InputError(
            f"src and dst must have the same key kind: column {src_name!r} holds "
            f"{kinds[bool(src_str)]} but column {dst_name!r} holds {kinds[bool(dst_str)]}; "
            + _ADVICE,
            column=dst_name,
            row=0,
        )
    if src_str != dst_str:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return src, dst


def _must_be_ints(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype != object:
        return values
    return strings_to_int64(values, name)


def _int_mask(raw: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, is-integer mask) of a text id column (int64 or string)."""
    values, all_str = column_values(raw, name)
    if not all_str:
        return values, np.ones(values.shape[0], dtype=bool)
    arr = pa.array(values, type=pa.string())
    return values, pc.match_substring_regex(arr, INT_PATTERN).to_numpy(zero_copy_only=False)


def _text_ids(g: Gathered, ids: str) -> tuple[np.ndarray, np.ndarray]:
    (src_name, src_raw), (dst_name, dst_raw) = g.cols["src"], g.cols["dst"]
    src, src_int = _int_mask(src_raw, src_name)
    dst, dst_int = _int_mask(dst_raw, dst_name)
    if src.shape[0] == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if src_int.all() and dst_int.all():
        return _must_be_ints(src, src_name), _must_be_ints(dst, dst_name)
    if ids == "auto" and not src_int.any() and not dst_int.any():
        return _as_str(src), _as_str(dst)
    # a mix: the first id of the minority kind is named (on a tie, or with ids="int", the
    # first non-integer: integer files stay integer)
    n_int = int(src_int.sum()) + int(dst_int.sum())
    ints = ids == "int" or 2 * n_int >= src_int.shape[0] + dst_int.shape[0]
    hits = [(first(m != ints), name, v) for m, name, v in
            ((src_int, src_name, src), (dst_int, dst_name, dst)) if (m != ints).any()]
    row, name, values = min(hits, key=lambda h: h[0])
    value = _show(values[row])
    if ids == "int":
        problem = f"id {value} is not an integer (ids='int')"
    else:
        kind, most = ("not an integer", "integers") if ints else ("an integer", "strings")
        problem = (f"id {value} is {kind}, but most ids are {most}: the ids must be all "
                   "integers or all strings; " + _ADVICE)
    raise InputError(problem, column=name, row=row)


def _show(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(int(v))
