"""Maintained results handed back in device memory: ``vertex_counts(as_="device")`` (a dict of
the backend's arrays) or ``as_="cudf"`` (a cuDF DataFrame over them), with no host copy.

The results are computed where the views live (:mod:`gpu_ivm.queries.results`); here the ids
are decoded to user keys on the device, with the engine's device copy of its keys
(:class:`gpu_ivm.device_batch.DeviceKeyTable`), and the rows get the same order and the same
orientation rules as the Arrow results: vertex counts by id, an undirected edge as (smaller
key, larger key), an undirected triangle with its keys sorted, a directed 3-cycle rotated to
start at its smallest key. Only integer keys can stay on the device; an engine with string
keys is refused (its Arrow results carry the strings).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError

FORMS = ("arrow", "device", "cudf")


def check_form(as_: str) -> str:
    """``as_`` checked: "arrow" (record batches, host), "device" or "cudf"."""
    if as_ not in FORMS:
        raise InputError(f"as_ must be one of {', '.join(FORMS)}, got {as_!r}", column="as_")
    return as_


def frame(columns: dict[str, Any], as_: str) -> Any:
    """The result columns (device arrays) as ``as_`` asks: the dict itself, or a cuDF
    DataFrame (which takes device arrays through ``__cuda_array_interface__``)."""
    if as_ == "device":
        return columns
    try:
        import cudf
    except ImportError:
        raise InputError("as_='cudf' needs cuDF (RAPIDS) installed; as_='device' returns the "
                         "same columns as device arrays", column="as_") from None
    return cudf.DataFrame(columns)


def user_keys(engine, ids):
    """User keys of ids (device arrays), decoded on the device."""
    if engine.encoder.kind == "str":
        raise InputError("this engine's keys are strings, which live on the host: use the "
                         "Arrow results (as_='arrow')", column="as_")
    if engine.backend.name == "cpu":
        return engine.encoder.decode(ids)
    return engine._key_table().keys_of(engine.encoder, ids)


def ordered_edges(xp, ua, ub, undirected: bool):
    """An undirected edge's keys as (smaller, larger)."""
    if not undirected:
        return ua, ub
    return xp.minimum(ua, ub), xp.maximum(ua, ub)


def ordered_triangles(xp, ua, ub, uc, graph: bool, directed: bool):
    """A triangle's keys sorted (undirected), or a 3-cycle rotated to start at its smallest
    key (directed); the relation form as it is."""
    if not graph:
        return ua, ub, uc
    if directed:
        first_b = (ub < ua) & (ub < uc)
        first_c = (uc < ua) & (uc < ub)
        return (xp.where(first_b, ub, xp.where(first_c, uc, ua)),
                xp.where(first_b, uc, xp.where(first_c, ua, ub)),
                xp.where(first_b, ua, xp.where(first_c, ub, uc)))
    lo, hi = xp.minimum(ua, ub), xp.maximum(ua, ub)
    return (xp.minimum(lo, uc), xp.maximum(lo, xp.minimum(hi, uc)), xp.maximum(hi, uc))
