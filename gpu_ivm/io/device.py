"""Batches that are already in device memory: cuDF DataFrames, CuPy arrays, anything with
``__cuda_array_interface__`` or a CUDA DLPack capsule, read without a host copy.

The readers of this package return NumPy arrays; an engine on the ``cuda`` backend asks
:func:`device_columns` first. It recognises a table whose columns live on the device:

* a cuDF ``DataFrame`` (its ``Series`` expose ``__cuda_array_interface__``),
* a mapping of column names to device arrays,
* a tuple or list of device arrays (``src, dst[, sign]`` by position),

and returns the columns as arrays of the backend's array module (CuPy on hardware, the very
same memory) with only metadata checked on the host: dtype, length, nulls. The values are
checked on the device as the batch is prepared (:mod:`gpu_ivm.device_batch`): a sign other
than ±1 or an unsigned key above the int64 range is reported there, with its row. A source
whose columns are all on the host gives None (the usual readers take it). A table that mixes
device and host columns, or asks for a reader option that only files have, is refused.

Column picks follow :mod:`gpu_ivm.io.layout`: ``src=``, ``dst=``, ``sign=`` name a column or
give its 0-based position, else the usual names (``src``/``source``, ``dst``/``target``,
``sign``), else the first columns by position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_ivm.errors import InputError

from .layout import EDGES, GRAPH_UPDATES, Layout

#: the libraries whose DataFrames hold device columns (read by column name)
_DEVICE_FRAME_MODULES = frozenset({"cudf", "dask_cudf"})
#: DLPack device types of CUDA memory (kDLCUDA, kDLCUDAManaged)
_DLPACK_CUDA = (2, 13)


@dataclass
class DeviceColumns:
    """Validated device columns of one batch (arrays of the backend's module).

    ``src``, ``dst``: int64 (uint64 columns viewed as int64, with ``keys_u64``); ``sign``:
    int64 or None (an edge list); ``sign_u64``: the sign column was uint64.
    """

    src: Any
    dst: Any
    sign: Any
    keys_u64: bool = False
    sign_u64: bool = False
    source_dtypes: tuple = ()

    @property
    def rows(self) -> int:
        return int(self.src.shape[0])

    def to_host(self, backend) -> dict[str, np.ndarray]:
        """The columns downloaded, in their own dtypes (for the host's reader to judge):
        what a batch that needs the host's rules (a conflict, a bad row) falls back to."""
        out = {}
        dtypes = self.source_dtypes or (np.dtype(np.int64),) * 3
        for name, col, dt in zip(("src", "dst", "sign"), (self.src, self.dst, self.sign),
                                 dtypes):
            if col is not None:
                host = backend.to_host(col)
                out[name] = host.view(dt) if dt.itemsize == 8 and dt != host.dtype else host
        return out


def is_device_array(a: Any, xp) -> bool:
    """Whether ``a`` lives in device memory: an array of a device ``xp`` (CuPy), anything
    with ``__cuda_array_interface__``, or a DLPack producer on a CUDA device."""
    if isinstance(a, np.ndarray):
        return False
    if xp is not np and isinstance(a, xp.ndarray):
        return True
    if hasattr(a, "__cuda_array_interface__"):
        return True
    dev = getattr(a, "__dlpack_device__", None)
    if dev is not None:
        try:
            return int(dev()[0]) in _DLPACK_CUDA
        except Exception:  # noqa: BLE001 - a producer that cannot say is not on a device
            return False
    return False


def _columns_of(source: Any) -> tuple[list[str] | None, list[Any]] | None:
    """(names or None, columns) of a table-like source, or None."""
    if isinstance(source, Mapping):
        return [str(k) for k in source], list(source.values())
    if isinstance(source, (tuple, list)) and source and not isinstance(source[0], tuple):
        return None, list(source)
    if type(source).__module__.split(".")[0] in _DEVICE_FRAME_MODULES:
        names = [str(c) for c in source.columns]
        return names, [source[c] for c in source.columns]
    return None


def _pick(layout: Layout, names: list[str] | None, n_cols: int,
          picks: Mapping[str, Any]) -> dict[str, int]:
    """The column index of each layout key (absent keys left out)."""
    out: dict[str, int] = {}
    lower = [n.strip().lower() for n in names] if names is not None else None
    for pos, key in enumerate(layout.keys):
        want = picks.get(key)
        if want is not None:
            if isinstance(want, (int, np.integer)) and not isinstance(want, bool):
                if not 0 <= int(want) < n_cols:
                    raise InputError(f"column position {want} for {key} is out of range: the "
                                     f"table has {n_cols} columns", column=key)
                out[key] = int(want)
            elif names is not None and str(want) in names:
                out[key] = names.index(str(want))
            else:
                raise InputError(f"no column {want!r} for {key}", column=str(want))
            continue
        if lower is not None:
            hit = [lower.index(a) for a in layout.aliases[key] if a in lower]
            if hit:
                out[key] = hit[0]
                continue
            if any(n in {a for k in layout.keys for a in layout.aliases[k]} for n in lower):
                if pos < layout.required:
                    raise InputError(f"no column {layout.display(key)!r} "
                                     f"(expected {layout.describe()})", column=key)
                continue
        if pos < n_cols and pos not in out.values():
            out[key] = pos
        elif pos < layout.required:
            raise InputError(f"the table has {n_cols} columns; expected {layout.describe()}",
                             column=key)
    return out


def _as_backend_array(col: Any, name: str, xp) -> Any:
    """A device column as an array of ``xp`` over the same memory (nulls refused)."""
    nulls = getattr(col, "null_count", 0)
    if nulls:
        raise InputError(f"column {name!r} has {int(nulls)} null values", column=name)
    if xp is not np:
        if isinstance(col, xp.ndarray):
            return col
        if hasattr(col, "__cuda_array_interface__"):
            return xp.asarray(col)  # CuPy: zero-copy over the interface's pointer
        return xp.from_dlpack(col)
    # Numba's CUDA simulator: "device" memory is host memory, read through the interface
    from gpu_ivm.kernels.cuda_launch import _host_view

    if hasattr(col, "__cuda_array_interface__"):
        try:
            return _host_view(col.__cuda_array_interface__)
        except TypeError as e:
            raise InputError(f"column {name!r}: {e}", column=name) from None
    return np.from_dlpack(col)


def _int64(a: Any, name: str, xp, sign: bool) -> tuple[Any, bool]:
    """(int64 array, was uint64) of an integer device column; other dtypes are refused."""
    if a.ndim != 1:
        raise InputError(f"column {name!r} must be 1-D, got {a.ndim} dimensions", column=name)
    kind = a.dtype.kind
    if kind not in "iu":
        what = "signs" if sign else "vertex keys"
        raise InputError(f"column {name!r} holds {a.dtype} values; device columns of {what} "
                         "must be integers (string keys: pass the table on the host)",
                         column=name)
    if a.dtype == np.uint64:
        return a.view(np.int64), True
    if a.dtype != np.int64:
        return a.astype(np.int64), False
    return a, False


def device_columns(source: Any, xp, *, updates: bool,
                   read_options: Mapping[str, Any]) -> DeviceColumns | None:
    """The device columns of ``source`` as a batch (``updates``: src, dst, sign) or an edge
    list (src, dst), or None when ``source`` holds no device column.

    Raises :class:`~gpu_ivm.errors.InputError` for a table that mixes device and host
    columns, non-integer or nullable columns, columns of unequal lengths, or reader options
    that only apply to files (``header``, ``ids`` other than "auto").
    """
    got = _columns_of(source)
    if got is None:
        return None
    names, cols = got
    on_dev = [is_device_array(c, xp) for c in cols]
    if not any(on_dev):
        return None
    layout = GRAPH_UPDATES if updates else EDGES
    opts = dict(read_options)
    if opts.pop("header", None) is not None or opts.pop("ids", "auto") != "auto":
        raise InputError("header= and ids= are options of files; device columns are read "
                         "as they are (integer keys)")
    unknown = set(opts) - set(layout.keys)
    if unknown:
        raise InputError(f"unknown read options {sorted(unknown)} for device columns")
    where = _pick(layout, names, len(cols), opts)
    if not updates:
        where.pop("time", None)  # an edge list's times are not used by load()
    out: dict[str, Any] = {}
    u64: dict[str, bool] = {}
    dtypes = []
    for key in ("src", "dst", "sign"):
        if key not in where:
            dtypes.append(np.dtype(np.int64))
            continue
        j = where[key]
        label = names[j] if names is not None else key
        if not on_dev[j]:
            raise InputError(f"column {label!r} is in host memory while others are on the "
                             "device; pass every column on one side", column=label)
        a = _as_backend_array(cols[j], label, xp)
        dtypes.append(np.dtype(a.dtype))
        out[key], u64[key] = _int64(a, label, xp, key == "sign")
    lengths = {int(a.shape[0]) for a in out.values()}
    if len(lengths) > 1:
        raise InputError(f"device columns of unequal lengths {sorted(lengths)}")
    return DeviceColumns(out["src"], out["dst"], out.get("sign"),
                         keys_u64=u64["src"] or u64["dst"], sign_u64=u64.get("sign", False),
                         source_dtypes=tuple(dtypes))


def upload_batch(table: Any, backend) -> dict[str, Any] | None:
    """A host Arrow table of updates (``src``, ``dst``, ``sign``, integer columns without
    nulls) moved to the backend's device with one upload, as a mapping of device columns
    that :meth:`GraphEngine.apply` prepares on the device; None where that does not apply
    (the host backend, other tables: string keys, other column names, nulls), and the caller
    applies the table as it is.

    This is the move a Spark job on a GPU node makes once per micro-batch
    (:class:`gpu_ivm.spark_glue.DriverEngine` with ``device_batches=True``).
    """
    import pyarrow as pa

    if backend.name == "cpu" or not isinstance(table, (pa.Table, pa.RecordBatch)):
        return None
    names = ("src", "dst", "sign")
    if table.schema.names != list(names):
        return None
    cols = []
    for name in names:
        col = table.column(name)
        if not pa.types.is_integer(col.type) or col.type == pa.uint64() or col.null_count:
            return None  # the host's reader judges these (an out-of-range key, nulls)
        cols.append(col.to_numpy().astype(np.int64, copy=False))
    m = table.num_rows
    buf = backend.to_device(np.concatenate(cols))  # the batch's one upload
    return {name: buf[i * m:(i + 1) * m] for i, name in enumerate(names)}
