"""Executor side of the HyperCube's free-variable results: each shard engine's per-vertex /
per-edge counts and triangles, its change tables and lookups, as Arrow tables (see
:mod:`.hypercube`; the driver sums them in :mod:`.hypercube_driver`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_ivm.errors import InputError

from .hypercube_routing import shard_coordinates

#: The free-variable results a HyperCube can maintain, and their per-batch change tables.
CHANGE_TABLES = {"vertex_counts": "vertex_changes", "edge_counts": "edge_changes",
                 "triangles": "triangle_changes"}

LOOKUP_SCHEMA = "shard int, vertices binary, edges binary"


# ---------------------------------------------------------------------- free-variable results
# In the relation form a shard engine keeps Δ1_s(a) = Σ_{b,c} R_s(a,b)·S_s(b,c)·T_s(c,a),
# Δ2_s(a,b) and the tuples of Δ3_s, i.e. the same sums restricted to the vertex triples with
# (h(a), h(b), h(c)) = the shard's coordinate. Every triple lies in exactly one shard, so
# Σ_s Δ1_s(v) = Σ_{b,c} E(v,b)·E(b,c)·E(c,v) (undirected: 2·triangles through v; directed:
# 3-cycles through v), Σ_s Δ2_s(u,v) = Δ2(u,v), and the shards' Δ3 tuples partition the
# ordered triangles. The helpers below run on the executors (per shard); the driver sums.
def _ipc_bytes(table: pa.Table | bytes | None) -> bytes | None:
    """A table as Arrow IPC stream bytes (None stays None; bytes pass through)."""
    if table is None or isinstance(table, bytes):
        return table
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _ipc_table(data: pa.Table | bytes | None) -> pa.Table | None:
    """Inverse of :func:`_ipc_bytes` (tables pass through)."""
    if data is None or isinstance(data, pa.Table):
        return data
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _key_type(key_type: str | None) -> pa.DataType:
    return pa.string() if key_type == "string" else pa.int64()


def _check_maintains(engine: Any, maintain: tuple[str, ...], track_changes: bool,
                     shard: int) -> None:
    """A shard engine (new or restored) must maintain what the driver expects."""
    if not maintain:
        return
    have = tuple(getattr(engine, "maintain", ()) or ())
    missing = [m for m in maintain if m not in have]
    if missing or (track_changes and not getattr(engine, "track_changes", False)):
        raise InputError(f"HyperCube shard {shard} does not maintain {', '.join(missing)}"
                         f"{' with track_changes' if not missing else ''} (its state was "
                         "created without them)", column="maintain")


def _canonical(table: pa.Table, directed: bool) -> pa.Table:
    """The rows of a triangle table (a, b, c, ...) in canonical form by user key: a < b < c
    (undirected), a < b and a < c (directed: the rotation starting at the smallest key).
    Of the 6 (3) ordered triples of a triangle (3-cycle) exactly one is kept."""
    a, b, c = table.column("a"), table.column("b"), table.column("c")
    second = pc.less(a, c) if directed else pc.less(b, c)
    return table.filter(pc.and_(pc.less(a, b), second))


def shard_result(engine: Any, name: str, *, directed: bool) -> pa.Table:
    """One shard's part of a result, to be summed per key over the shards (triangles: to be
    concatenated): ``vertex, triangles`` (Δ1_s, not halved), ``src, dst, triangles``
    (Δ2_s; undirected: only src < dst, since Δ2 is symmetric) or ``a, b, c`` (the shard's Δ3
    tuples in canonical form, each triangle in exactly one shard)."""
    t = engine.result_table(name)
    if name == "edge_counts" and not directed:
        t = t.filter(pc.less(t.column("src"), t.column("dst")))
    elif name == "triangles":
        t = _canonical(t, directed).select(["a", "b", "c"])
    return t


def shard_changes(engine: Any, maintain: tuple[str, ...], *, directed: bool,
                  applied: bool = True) -> dict[str, pa.Table]:
    """One shard's changes in its last batch (``engine.last_changes()``): per maintained
    result, ``vertex, delta`` / ``src, dst, delta`` (the change of Δ1_s / Δ2_s; undirected
    edges src < dst) / ``a, b, c, old, new`` (canonical triangles: their old/new values are
    global, a triangle lives in one shard). Keyed by change table name; empty tables when
    the shard applied no row (``applied=False``)."""
    ch = engine.last_changes()
    out = {}
    if "vertex_counts" in maintain:
        t = ch["vertex_counts"]
        out["vertex_changes"] = pa.table({"vertex": t.column("vertex"),
                                          "delta": pc.subtract(t.column("new"),
                                                               t.column("old"))})
    if "edge_counts" in maintain:
        t = ch["edge_counts"]
        if not directed:
            t = t.filter(pc.less(t.column("src"), t.column("dst")))
        out["edge_changes"] = pa.table({"src": t.column("src"), "dst": t.column("dst"),
                                        "delta": pc.subtract(t.column("new"),
                                                             t.column("old"))})
    if "triangles" in maintain:
        out["triangle_changes"] = _canonical(ch["triangles"], directed).select(
            ["a", "b", "c", "old", "new"])
    if not applied:
        out = {n: t.slice(0, 0) for n, t in out.items()}
    return out


def shard_lookup(engine: Any, shard: int, *, k: int, vertices: np.ndarray | None = None,
                 vertex_buckets: np.ndarray | None = None, src: np.ndarray | None = None,
                 dst: np.ndarray | None = None, edge_buckets: np.ndarray | None = None,
                 key_type: pa.DataType | None = None) -> dict[str, pa.Table]:
    """This shard's Δ1_s of the given vertices whose bucket h(v) is the shard's i, and Δ2_s
    of the given edges whose bucket pair h(u)·k + h(v) is its (i, j): ``vertices`` →
    ``vertex, value``; ``edges`` → ``src, dst, value`` (0 for unknown keys)."""
    i, j, _ = shard_coordinates(shard, k)
    key_type = key_type or pa.int64()
    out = {}
    if vertices is not None:
        sel = np.flatnonzero(vertex_buckets == i)
        v = vertices[sel]
        vals = engine.vertex_count(v) if sel.shape[0] else np.zeros(0, np.int64)
        out["vertices"] = pa.table({"vertex": pa.array(v.tolist() if v.dtype == object else v,
                                                       key_type),
                                    "value": pa.array(np.asarray(vals, np.int64))})
    if src is not None:
        sel = np.flatnonzero(edge_buckets == i * k + j)
        a, b = src[sel], dst[sel]
        vals = engine.edge_count(a, b) if sel.shape[0] else np.zeros(0, np.int64)
        out["edges"] = pa.table({
            "src": pa.array(a.tolist() if a.dtype == object else a, key_type),
            "dst": pa.array(b.tolist() if b.dtype == object else b, key_type),
            "value": pa.array(np.asarray(vals, np.int64))})
    return out


def _query_schema(what: str, key_type: str | None) -> str:
    kt = "string" if key_type == "string" else "bigint"
    return {"vertex_counts": f"vertex {kt}, triangles bigint",
            "edge_counts": f"src {kt}, dst {kt}, triangles bigint",
            "triangles": f"a {kt}, b {kt}, c {kt}", "lookup": LOOKUP_SCHEMA}[what]


def _arrow_schema(what: str, key_type: str | None) -> pa.Schema:
    kt = _key_type(key_type)
    if what == "lookup":
        return pa.schema([("shard", pa.int32()), ("vertices", pa.binary()),
                          ("edges", pa.binary())])
    return pa.schema({"vertex_counts": [("vertex", kt), ("triangles", pa.int64())],
                      "edge_counts": [("src", kt), ("dst", kt), ("triangles", pa.int64())],
                      "triangles": [("a", kt), ("b", kt), ("c", kt)]}[what])
