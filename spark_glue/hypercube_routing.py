"""HyperCube routing: the vertex hash, each shard's coordinate, and the rows an update sends to
its (shard, role) pairs (see :mod:`.hypercube` for the scheme).

>>> import numpy as np
>>> t = route_updates(np.array([1]), np.array([2]), np.array([1]), k=2)
>>> t.num_rows, sorted(set(t.column("rel").to_pylist()))   # 6k rows, roles R, S, T
(12, [0, 1, 2])
>>> shard_coordinates(5, 2)
(1, 0, 1)
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from gpu_ivm.io import read_edges

from .ingest import validate_batch

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def vertex_hash(keys: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """h: vertex → [0, k), deterministic in every process (splitmix64 of int64 keys, CRC-32
    of UTF-8 string keys).

    Examples
    --------
    >>> import numpy as np
    >>> h = vertex_hash(np.arange(1000), 3)
    >>> sorted(set(h.tolist()))
    [0, 1, 2]
    >>> vertex_hash(np.array(["a", "b"], dtype=object), 1).tolist()
    [0, 0]
    """
    keys = np.asarray(keys)
    if keys.dtype == object or keys.dtype.kind in "US":
        x = np.fromiter((zlib.crc32(str(v).encode()) for v in keys.tolist()), np.uint64,
                        keys.shape[0])
    else:
        x = keys.astype(np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        x = x + _GOLDEN * np.uint64(seed + 1)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(k)).astype(np.int64)


def shard_coordinates(shard: int, k: int) -> tuple[int, int, int]:
    """(i, j, l) of a shard number ``(i·k + j)·k + l``.

    >>> shard_coordinates(5, 2)
    (1, 0, 1)
    """
    return shard // (k * k), (shard // k) % k, shard % k


def route_updates(src: np.ndarray, dst: np.ndarray, sign: np.ndarray, *, k: int,
                  directed: bool = False, seed: int = 0) -> pa.Table:
    """Route edge updates to the shards of a k³ HyperCube.

    Self-loops are dropped (they are not edges of a simple graph). An undirected update
    (u, v, ±1) becomes the directed updates (u, v) and (v, u); each directed update (x, y)
    goes to R in shards (h(x), h(y), t), S in (t, h(x), h(y)) and T in (h(y), t, h(x)),
    t ∈ [0, k).

    Returns
    -------
    pyarrow.Table
        Columns ``shard`` (int32), ``rel`` (int8: 0 = R, 1 = S, 2 = T), ``src``, ``dst``,
        ``mult`` (int64), ready for :meth:`gpu_ivm.RelationEngine.apply`.

    Examples
    --------
    >>> import numpy as np
    >>> t = route_updates(np.array([1]), np.array([2]), np.array([1]), k=2)
    >>> t.num_rows      # 2 directions x 3 roles x k
    12
    >>> route_updates(np.array([1]), np.array([1]), np.array([1]), k=2).num_rows
    0
    """
    src, dst = np.asarray(src), np.asarray(dst)
    sign = np.asarray(sign, np.int64)
    keep = src != dst
    src, dst, sign = src[keep], dst[keep], sign[keep]
    if not directed:
        src, dst, sign = (np.concatenate([src, dst]), np.concatenate([dst, src]),
                          np.concatenate([sign, sign]))
    n = src.shape[0]
    hx, hy = vertex_hash(src, k, seed), vertex_hash(dst, k, seed)
    t = np.tile(np.arange(k, dtype=np.int64), n)
    hx, hy = np.repeat(hx, k), np.repeat(hy, k)
    shard_r = (hx * k + hy) * k + t
    shard_s = (t * k + hx) * k + hy
    shard_t = (hy * k + t) * k + hx
    shard = np.concatenate([shard_r, shard_s, shard_t]).astype(np.int32)
    rel = np.repeat(np.arange(3, dtype=np.int8), n * k)
    s3 = np.tile(np.repeat(src, k), 3)
    d3 = np.tile(np.repeat(dst, k), 3)
    m3 = np.tile(np.repeat(sign, k), 3)
    kt = pa.string() if src.dtype == object else pa.int64()
    return pa.table({"shard": pa.array(shard, pa.int32()), "rel": pa.array(rel, pa.int8()),
                     "src": pa.array(s3, kt), "dst": pa.array(d3, kt),
                     "mult": pa.array(m3, pa.int64())})


def _route_batches(batches: Iterator[pa.RecordBatch], *, k: int, directed: bool, seed: int,
                   mode: str, string_keys: bool) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: validate each batch with the core rules, route it to shards."""
    for rb in batches:
        if mode == "load":
            el = read_edges(rb)
            src, dst, sign = el.src, el.dst, np.ones(el.src.shape[0], np.int64)
        else:
            u = validate_batch(rb, string_keys=string_keys)
            src = u.column("src").to_numpy(zero_copy_only=False)
            dst = u.column("dst").to_numpy(zero_copy_only=False)
            sign = u.column("sign").to_numpy()
        if string_keys and src.dtype != object:
            src, dst = src.astype(str).astype(object), dst.astype(str).astype(object)
        out = route_updates(src, dst, sign, k=k, directed=directed, seed=seed)
        yield from out.to_batches()


def _split_by_shard(table: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    if table.num_rows == 0:
        return
    sh = table.column("shard").to_numpy()
    order = np.argsort(sh, kind="stable")
    ssh = sh[order]
    starts = np.flatnonzero(np.r_[True, ssh[1:] != ssh[:-1]])
    ends = np.r_[starts[1:], ssh.shape[0]]
    for a, b in zip(starts.tolist(), ends.tolist()):
        yield int(ssh[a]), table.take(pa.array(order[a:b]))
