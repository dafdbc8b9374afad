"""Static (from-scratch) triangle counting.

These functions compute triangle counts of a whole graph at once. They are the reference the
incremental engine is checked against and the baseline it is benchmarked against.

The undirected count is the worst-case-optimal degree-ordered algorithm: vertices are ranked
by ``(degree, id)``, every edge is oriented from lower to higher rank (so every out-degree is
at most ``sqrt(2 m)``), the oriented graph is stored as a CSR with sorted out-lists, and each
oriented edge ``(u, v)`` counts the common out-neighbours of ``u`` and ``v`` above ``v``. The
intersection marks ``out(v)`` once in a per-thread array and looks up the tail of ``out(u)``
after ``v`` for every in-edge ``u -> v`` (``sum_u C(outdeg(u), 2)`` branch-free lookups, less
work than merging). Time ``O(m^1.5)``, memory ``O(n + m)``; Numba ``prange`` over vertices.
Directed 3-cycles reuse the same enumeration of undirected triangles, carrying per-pair arc
flags, and count each cyclic orientation present. :func:`count_triangles_backend` counts the
undirected form with a backend's kernels: on ``cuda`` the oriented CSR (still built on the host)
is counted on the device, one thread per oriented edge intersecting two sorted out-lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from gpu_ivm.errors import InputError, IntegerOverflowError
from gpu_ivm.kernels import static_kernels as sk
from gpu_ivm.selection import run_starts

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "simple_graph",
    "count_triangles_arrays",
    "count_triangles_backend",
    "count_triangles",
    "graph_stats",
    "relation_triangle_sum",
]

_OVERFLOW_LIMIT = float(2**62)
# edges below which a recount runs on one thread: waking the other threads for each of the
# recount's parallel passes costs more than they gain (one-off script on ca-AstroPh
# prefixes, 2 cores: 1,000 edges 389 vs 173 us, 32,000 2.9 vs 2.3 ms, 128,000 9.8 vs 9.3 ms,
# the whole 198,110 edges level)
ONE_THREAD_BELOW = 1 << 17


@contextmanager
def threads_for(edges: int) -> Iterator[None]:
    """Run the block on one Numba thread when ``edges`` is below ``ONE_THREAD_BELOW`` (the
    calling thread's setting is restored afterwards)."""
    old = numba.get_num_threads()
    if edges >= ONE_THREAD_BELOW or old == 1:
        yield
        return
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


# --------------------------------------------------------------------------- helpers


def _factorize(values: np.ndarray) -> np.ndarray:
    """Map arbitrary (e.g. string) keys to int64 codes; equal keys get equal codes."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is an optional dependency
        pd = None
    if pd is not None:
        codes, _ = pd.factorize(values)
        return np.asarray(codes, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    sorted_vals = values[order]
    new = np.ones(len(values), dtype=bool)
    new[1:] = sorted_vals[1:] != sorted_vals[:-1]
    codes = np.empty(len(values), dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes


def _key_arrays(src: Any, dst: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate two key columns and return them as int64 arrays (strings are factorized)."""
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.ndim != 1 or dst.ndim != 1:
        raise InputError("src and dst must be one-dimensional", column="src" if src.ndim != 1
                         else "dst")
    if src.shape[0] != dst.shape[0]:
        raise InputError(f"src and dst lengths differ ({src.shape[0]} vs {dst.shape[0]})",
                         column="dst")
    kinds = {src.dtype.kind, dst.dtype.kind}
    if kinds <= {"i", "u", "b"}:
        return (np.ascontiguousarray(src, dtype=np.int64),
                np.ascontiguousarray(dst, dtype=np.int64))
    if kinds <= {"i", "u", "b", "f"}:
        out = []
        for name, col in (("src", src), ("dst", dst)):
            if col.dtype.kind == "f":
                bad = ~np.isfinite(col) | (col != np.round(col))
                if bad.any():
                    raise InputError("vertex keys must be integers", column=name,
                                     row=int(np.flatnonzero(bad)[0]))
            out.append(np.ascontiguousarray(col, dtype=np.int64))
        return out[0], out[1]
    both = np.concatenate([src.astype(object), dst.astype(object)])
    codes = _factorize(both)
    n = src.shape[0]
    return codes[:n], codes[n:]


def _dense_ids(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Order-preserving dense ids ``0..n-1`` for int64 ``keys`` (no ``np.unique``)."""
    if keys.shape[0] == 0:
        return np.empty(0, dtype=np.int64), 0
    lo = int(keys.min())
    hi = int(keys.max())
    span = hi - lo + 1
    if span <= max(4 * keys.shape[0], 1 << 16):
        ids, n = sk.dense_ids_small_range(keys, lo, span)
        return ids, int(n)
    s = np.sort(keys)
    keep = np.ones(s.shape[0], dtype=bool)
    keep[1:] = s[1:] != s[:-1]
    uniq = s[keep]
    return np.searchsorted(uniq, keys).astype(np.int64, copy=False), int(uniq.shape[0])


def _ids(src: Any, dst: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense ids for the two key columns (vertices of self-loops included)."""
    s, d = _key_arrays(src, dst)
    ids, n = _dense_ids(np.concatenate([s, d]))
    m = s.shape[0]
    return ids[:m], ids[m:], n


def _unique_pairs(rows: np.ndarray, cols: np.ndarray, n: int,
                  tags: np.ndarray | None = None, *, pack: bool = True):
    """Distinct pairs ``(row, col)`` (ids in ``[0, n)``) sorted by row then column.

    With ``tags`` (small ints in ``[0, 4)``), also return the bitwise OR of the tags of each
    pair's duplicates. Sorts packed int64 keys with ``np.sort`` (much faster than an argsort)
    when they fit in 62 bits (``n <= 2**30``), else (or if ``pack`` is False) falls back to
    ``np.lexsort``.
    """
    bits = max(1, (n - 1).bit_length())
    if pack and 2 * bits + 2 <= 62:
        key = (rows << bits) | cols
        if tags is not None:
            key = (key << 2) | tags
        key.sort()
        if tags is not None:
            t = key & 3
            key >>= 2
        starts = np.empty(key.shape[0], dtype=bool)
        starts[:1] = True
        np.not_equal(key[1:], key[:-1], out=starts[1:])
        if tags is not None:
            tags = np.bitwise_or.reduceat(t, np.flatnonzero(starts)) if key.shape[0] else t
        key = key[starts]
        return key >> bits, key & ((1 << bits) - 1), tags
    perm = np.lexsort((cols, rows))
    r = rows[perm]
    c = cols[perm]
    starts = sk.run_starts(r, c)
    if tags is not None:
        first = np.flatnonzero(starts)
        tags = np.bitwise_or.reduceat(tags[perm], first) if first.shape[0] else tags[:0]
    return r[starts], c[starts], tags


def _rank_by_degree(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """``rank[v]`` = position of ``v`` when vertices are sorted by ``(degree, id)``."""
    deg = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    order = np.argsort(deg, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    return rank


def _oriented_csr(s: np.ndarray, d: np.ndarray, n: int, flags: np.ndarray | None = None):
    """Degree-ordered orientation of the simple undirected graph of the id pairs ``(s, d)``.

    Self-loops are dropped; each remaining pair is oriented from lower to higher rank (rank by
    ``(degree, id)``, degrees counted with multiplicity, which keeps every simple out-degree
    below ``sqrt(2 * rows)``); duplicates are merged. With ``flags`` (bit 0: arc ``s -> d``,
    bit 1: arc ``d -> s``), the flags are re-expressed in rank orientation and OR-ed over
    duplicates.

    Returns
    -------
    indptr, hi : int64 arrays
        Out-lists in rank space, sorted and duplicate-free.
    flags : int64 array or None
    """
    keep = s != d
    if not keep.all():
        s = s[keep]
        d = d[keep]
        if flags is not None:
            flags = flags[keep]
    rank = _rank_by_degree(s, d, n)
    ra = rank[s]
    rb = rank[d]
    if flags is not None:
        flags = np.where(ra > rb, ((flags & 1) << 1) | (flags >> 1), flags)
    lo, hi, flags = _unique_pairs(np.minimum(ra, rb), np.maximum(ra, rb), n, flags)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(lo, minlength=n), out=indptr[1:])
    return indptr, hi, flags


def oriented_csr_xp(s, d, n: int, xp, flags=None):
    """:func:`_oriented_csr` in the array module ``xp``: with CuPy the orientation runs on the
    device (degrees by ``bincount``, ranks by a stable radix sort, the CSR by a sort of packed
    pairs and a scan), so the edges never leave it. Returns ``(indptr, hi)``, equal to
    :func:`_oriented_csr`'s, or with ``flags`` (arc flags per pair, see there)
    ``(indptr, hi, flags)``. Ids must be below 2**31."""
    indptr, hi, f, _ = _orient_xp(s, d, n, xp, flags)
    return (indptr, hi) if flags is None else (indptr, hi, f)


def _orient_xp(s, d, n: int, xp, flags=None):
    """:func:`oriented_csr_xp`'s work: ``(indptr, hi, flags or None, order)`` where
    ``order[r]`` is the id of rank ``r``."""
    keep = s != d
    s, d = s[keep], d[keep]
    deg = xp.bincount(s, minlength=n) + xp.bincount(d, minlength=n)
    order = xp.argsort(deg, kind="stable")  # rank by (degree, id)
    rank = xp.empty(n, np.int64)
    rank[order] = xp.arange(n, dtype=np.int64)
    ra, rb = rank[s], rank[d]
    key = (xp.minimum(ra, rb) << 32) | xp.maximum(ra, rb)
    if flags is None:
        key = xp.sort(key)
    else:  # flags in rank orientation, sorted with their pairs
        f = flags[keep]
        f = xp.where(ra > rb, ((f & 1) << 1) | (f >> 1), f)
        by_key = xp.argsort(key)
        key, f = key[by_key], f[by_key]
    if key.shape[0]:
        first = run_starts(xp, key)
        if flags is not None:  # OR of the flags of each run of equal pairs
            f = _or_runs(xp, f, first)
        key = key[first]
    indptr = xp.zeros(n + 1, np.int64)
    xp.cumsum(xp.bincount(key >> 32, minlength=n), out=indptr[1:])
    return indptr, key & 0xFFFFFFFF, (None if flags is None else f), order


def _or_runs(xp, f, first):
    """The bitwise OR of the two-bit flags ``f`` over each run (``first`` marks run starts)."""
    starts = xp.flatnonzero(first)
    ends = xp.concatenate([starts[1:], xp.full(1, f.shape[0], np.int64)])
    out = xp.zeros(starts.shape[0], np.int64)
    for bit in (0, 1):
        ones = xp.zeros(f.shape[0] + 1, np.int64)
        xp.cumsum((f >> bit) & 1, out=ones[1:])
        out |= ((ones[ends] - ones[starts]) > 0).astype(np.int64) << bit
    return out


def _count_directed(s: np.ndarray, d: np.ndarray, n: int) -> int:
    """Directed 3-cycles of the arcs ``s -> d`` (ids in ``[0, n)``), on the host."""
    indptr, hi, flags = _oriented_csr(s, d, n, np.ones(s.shape[0], dtype=np.int64))
    if hi.shape[0] < 3:
        return 0
    in_ptr, in_edge, tail_end = sk.in_tails(indptr, hi)
    return int(sk.count_oriented_cycles(indptr, hi, flags, in_ptr, in_edge, tail_end,
                                        sk.n_blocks(n, sk.VCHUNK)))


def _count_undirected(s: np.ndarray, d: np.ndarray, n: int) -> tuple[int, int]:
    """(simple undirected edges, triangles) of the id pairs ``(s, d)``."""
    indptr, hi, _ = _oriented_csr(s, d, n)
    if hi.shape[0] < 3:
        return int(hi.shape[0]), 0
    in_ptr, in_edge, tail_end = sk.in_tails(indptr, hi)
    tri = sk.count_oriented(indptr, hi, in_ptr, in_edge, tail_end, sk.n_blocks(n, sk.VCHUNK))
    return int(hi.shape[0]), int(tri)


def list_triangles_ids(s: np.ndarray, d: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """Every triangle of the simple undirected graph of the id pairs ``(s, d)`` (ids in
    ``[0, n)``) once, as three id arrays (degree-ordered forward algorithm, O(m^1.5)).

    >>> [x.tolist() for x in list_triangles_ids(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 3]), 4)]
    [[0], [1], [2]]
    """
    indptr, hi, _ = _oriented_csr(np.asarray(s, np.int64), np.asarray(d, np.int64), n)
    empty = np.zeros(0, np.int64)
    if hi.shape[0] < 3:
        return empty, empty, empty
    in_ptr, in_edge, tail_end = sk.in_tails(indptr, hi)
    eu, v, w = sk.list_oriented(indptr, hi, in_ptr, in_edge, tail_end,
                                sk.n_blocks(n, sk.VCHUNK))
    # the tail of each edge u -> v: the row of the edge index in the CSR
    u = np.searchsorted(indptr, eu, side="right") - 1
    rank = _rank_by_degree(*_nonloop(s, d), n)
    ids = np.empty(n, np.int64)
    ids[rank] = np.arange(n, dtype=np.int64)
    a, b, c = ids[u], ids[v], ids[w]
    lo = np.minimum(np.minimum(a, b), c)
    hi_ = np.maximum(np.maximum(a, b), c)
    return lo, a + b + c - lo - hi_, hi_


def list_triangles_xp(s, d, n: int, kernels=None) -> tuple:
    """:func:`list_triangles_ids` where the ids live: with a kernel set that has a device
    listing (the cuda set's ``static.list_oriented_edges``) the ids stay on the device
    (orientation by :func:`oriented_csr_xp`, the listing by two passes of the per-edge walk)
    and the three id arrays are device arrays; otherwise the host listing.

    >>> [x.tolist() for x in list_triangles_xp(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 3]), 4)]
    [[0], [1], [2]]
    """
    lister = getattr(getattr(kernels, "static", None), "list_oriented_edges", None)
    if lister is None:
        return list_triangles_ids(s, d, n)
    xp = kernels.xp
    indptr, hi, _, order = _orient_xp(xp.asarray(s, dtype=np.int64),
                                      xp.asarray(d, dtype=np.int64), n, xp)
    ru, rv, rw = lister(indptr, hi)
    a, b, c = order[ru], order[rv], order[rw]
    lo = xp.minimum(xp.minimum(a, b), c)
    hi_ = xp.maximum(xp.maximum(a, b), c)
    return lo, a + b + c - lo - hi_, hi_


def _nonloop(s: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = s != d
    return np.asarray(s, np.int64)[keep], np.asarray(d, np.int64)[keep]


# --------------------------------------------------------------------------- public API


def count_triangles_dense(src: np.ndarray, dst: np.ndarray, n: int) -> int:
    """Triangles of the undirected graph on dense ids ``0..n-1`` (no relabelling pass).

    Self-loops and duplicates are ignored, as in :func:`count_triangles_arrays`.

    >>> import numpy as np
    >>> count_triangles_dense(np.array([0, 1, 2]), np.array([1, 2, 0]), 3)
    1
    """
    s = np.ascontiguousarray(src, dtype=np.int64)
    d = np.ascontiguousarray(dst, dtype=np.int64)
    with threads_for(s.shape[0]):
        return _count_undirected(s, d, int(n))[1]


def count_triangles_backend(src: Any, dst: Any, backend: Any = None, *,
                            n: int | None = None, directed: bool = False) -> int:
    """Triangles of the undirected simple graph of ``(src, dst)`` (``directed``: the directed
    3-cycles of its arcs), counted on ``backend``.

    For ``cuda`` the degree-ordered orientation (:func:`oriented_csr_xp`, with the arc flags
    when ``directed``) and the count (``kernels.static.count_oriented_edges``: one thread per
    oriented edge, sorted-list intersection) both run on the device; otherwise the CPU
    orientation and count of :func:`count_triangles_arrays`.

    Parameters
    ----------
    src, dst : array_like
        Edge endpoints, host or device arrays (with ``n`` given, device arrays stay on the
        device; keys to relabel are relabelled on the host). Self-loops and duplicates are
        ignored.
    backend : Backend, str or None
        Anything :func:`gpu_ivm.backend.get_backend` accepts (``None``: ``$GPU_IVM_BACKEND``,
        else ``cpu``).
    n : int, optional
        If given, ``src``/``dst`` are already dense ids in ``[0, n)`` and are not relabelled
        (as in :func:`count_triangles_dense`); otherwise they are keys of any integer range or
        strings (as in :func:`count_triangles_arrays`).
    directed : bool, default False
        Count the directed 3-cycles of the arcs ``src -> dst`` (repeated arcs count once, arcs
        both ways form 2-cycles that close no 3-cycle by themselves).

    Returns
    -------
    int
        The same number as :func:`count_triangles_arrays` with the same ``directed``.

    >>> import numpy as np
    >>> count_triangles_backend(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 3]), "cpu")
    1
    >>> count_triangles_backend(np.array([0, 1, 2]), np.array([1, 2, 0]), "cpu", n=3)
    1
    >>> count_triangles_backend(np.array([0, 1, 0]), np.array([1, 2, 2]), "cpu", directed=True)
    0
    """
    from gpu_ivm.backend import get_backend

    be = get_backend(backend)
    if n is None:  # arbitrary keys get dense ids on the host
        src, dst, n = _ids(be.to_host(src), be.to_host(dst))
    if be.name != "cuda":
        s = np.ascontiguousarray(be.to_host(src), dtype=np.int64)
        d = np.ascontiguousarray(be.to_host(dst), dtype=np.int64)
        return _count_directed(s, d, int(n)) if directed else _count_undirected(s, d, int(n))[1]
    xp = be.xp  # ids go to the device once (no copy if they are there); orient and count there
    s = xp.asarray(src, dtype=np.int64)
    d = xp.asarray(dst, dtype=np.int64)
    if not directed:
        indptr, hi = oriented_csr_xp(s, d, int(n), xp)
        return 0 if hi.shape[0] < 3 else int(be.kernels.static.count_oriented_edges(indptr, hi))
    indptr, hi, flags = oriented_csr_xp(s, d, int(n), xp, xp.ones(s.shape[0], np.int64))
    if hi.shape[0] < 3:
        return 0
    return int(be.kernels.static.count_oriented_edges(indptr, hi, flags))



def simple_graph(src: np.ndarray, dst: np.ndarray, *,
                 directed: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """Relabel vertices densely and reduce an edge list to a simple graph.

    Parameters
    ----------
    src, dst : array_like
        Edge endpoints: integer keys of any range (strings are accepted too and factorized).
    directed : bool, default False
        If False, ``(u, v)`` and ``(v, u)`` are the same edge, returned once with
        ``u < v``. If True, only exact duplicates are merged.

    Returns
    -------
    src_ids, dst_ids : numpy.ndarray of int64
        The simple edge set in dense id space, sorted by ``(src_id, dst_id)``, without
        self-loops or duplicates.
    n : int
        Number of distinct keys in ``src`` or ``dst`` (vertices that only occur in
        self-loops included). Ids preserve the order of integer keys.

    Examples
    --------
    >>> import numpy as np
    >>> s, d, n = simple_graph(np.array([10, 30, 20, 7]), np.array([20, 10, 10, 7]))
    >>> s.tolist(), d.tolist(), n
    ([1, 1], [2, 3], 4)
    >>> s, d, n = simple_graph(np.array([10, 20, 10]), np.array([20, 10, 20]), directed=True)
    >>> s.tolist(), d.tolist(), n
    ([0, 1], [1, 0], 2)
    """
    s, d, n = _ids(src, dst)
    keep = s != d
    s = s[keep]
    d = d[keep]
    if not directed:
        s, d = np.minimum(s, d), np.maximum(s, d)
    s, d, _ = _unique_pairs(s, d, n)
    return s, d, n


def count_triangles_arrays(src: np.ndarray, dst: np.ndarray, *, directed: bool = False) -> int:
    """Count triangles of the simple graph given by two endpoint arrays.

    Parameters
    ----------
    src, dst : array_like
        Edge endpoints (integer keys of any range, or strings). Self-loops and duplicates
        are ignored.
    directed : bool, default False
        If False, count the triangles of the undirected simple graph (SNAP's definition).
        If True, count directed 3-cycles ``a -> b -> c -> a`` of the simple directed graph,
        each cycle once (not once per rotation); a vertex triple can hold two cycles, one per
        orientation, when enough reciprocal arcs exist.

    Returns
    -------
    int
        The count.

    Examples
    --------
    >>> import numpy as np
    >>> count_triangles_arrays(np.array([0, 1, 2, 2, 0]), np.array([1, 2, 0, 3, 1]))
    1
    >>> count_triangles_arrays(np.array([0, 1, 2]), np.array([1, 2, 0]), directed=True)
    1
    >>> count_triangles_arrays(np.array([0, 1, 0]), np.array([1, 2, 2]), directed=True)
    0
    """
    with threads_for(len(src)):
        s, d, n = _ids(src, dst)
        if not directed:
            return _count_undirected(s, d, n)[1]
        return _count_directed(s, d, n)


def _resolve_source(source: Any, **read_options: Any) -> tuple[np.ndarray, np.ndarray]:
    """Endpoint arrays of ``source``: a ``(src, dst)`` pair of arrays or anything
    :func:`gpu_ivm.io.read_edges` accepts (``read_options`` go to it)."""
    if isinstance(source, tuple) and len(source) == 2 and not read_options:
        return np.asarray(source[0]), np.asarray(source[1])
    from gpu_ivm.io import read_edges

    edges = read_edges(source, **read_options)
    return np.asarray(edges.src), np.asarray(edges.dst)


def count_triangles(source: Any, *, directed: bool = False, **read_options: Any) -> int:
    """Count triangles of a graph read from a file, table or pair of arrays.

    Parameters
    ----------
    source : path, table or tuple of two arrays
        Anything :func:`gpu_ivm.io.read_edges` accepts (a SNAP-style text file, possibly
        gzipped, a DataFrame, ...), or a ``(src, dst)`` tuple of arrays. Keys may be integers
        or strings.
    directed : bool, default False
        Count directed 3-cycles instead of undirected triangles (see
        :func:`count_triangles_arrays`).
    **read_options
        Column and parsing options of :func:`gpu_ivm.io.read_edges` (``src=``, ``dst=``,
        ``header=``, ``ids=``); the other functions that take a source accept them too.

    Returns
    -------
    int
        The number of triangles of the simple graph (self-loops and duplicates ignored).

    Examples
    --------
    >>> import numpy as np
    >>> count_triangles((np.array(["a", "b", "c"]), np.array(["b", "c", "a"])))
    1
    """
    src, dst = _resolve_source(source, **read_options)
    return count_triangles_arrays(src, dst, directed=directed)


def _keyed_ids(source: Any, **read_options: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src ids, dst ids, user key of each id) of a graph source; ids follow key order."""
    src, dst = _resolve_source(source, **read_options)
    src, dst = np.asarray(src), np.asarray(dst)
    both = np.concatenate([src, dst])
    if both.dtype.kind in "iub":
        both = both.astype(np.int64)
    elif both.dtype.kind == "f":
        _key_arrays(src, dst)  # raises on non-integer floats
        both = both.astype(np.int64)
    else:
        both = both.astype(object)
    keys = np.sort(both)
    if keys.shape[0]:
        keys = keys[np.r_[True, keys[1:] != keys[:-1]]]
    ids = np.searchsorted(keys, both).astype(np.int64)
    m = src.shape[0]
    return ids[:m], ids[m:], keys


def _key_column(keys: np.ndarray):
    import pyarrow as pa

    if keys.dtype == object:
        return pa.array(keys.tolist(), pa.string())
    return pa.array(keys, pa.int64())


def list_triangles(source: Any, **read_options: Any) -> pa.Table:
    """Every triangle of the undirected simple graph once, as an Arrow table ``a, b, c`` with
    a < b < c (by key).

    >>> list_triangles(([1, 2, 3, 3], [2, 3, 1, 4])).to_pylist()
    [{'a': 1, 'b': 2, 'c': 3}]
    """
    import pyarrow as pa

    s, d, keys = _keyed_ids(source, **read_options)
    a, b, c = list_triangles_ids(s, d, keys.shape[0])  # ids are in key order: a < b < c
    return pa.table({"a": _key_column(keys[a]), "b": _key_column(keys[b]),
                     "c": _key_column(keys[c])})


def vertex_triangle_counts(source: Any, **read_options: Any) -> pa.Table:
    """Triangles through each vertex of the undirected simple graph, recomputed from scratch:
    an Arrow table ``vertex, triangles`` with one row for every vertex of the graph (every key
    that appears in ``src`` or ``dst``, self-loop-only vertices included), 0 for a vertex in no
    triangle, sorted by key. This is what ``networkx.triangles`` returns for the graph built
    from the same edge list. (The engines' maintained ``vertex_counts()`` lists only vertices
    in at least one triangle.)

    >>> vertex_triangle_counts(([1, 2, 3, 3], [2, 3, 1, 4])).to_pydict()
    {'vertex': [1, 2, 3, 4], 'triangles': [1, 1, 1, 0]}
    """
    import pyarrow as pa

    s, d, keys = _keyed_ids(source, **read_options)
    a, b, c = list_triangles_ids(s, d, keys.shape[0])
    counts = np.bincount(np.concatenate([a, b, c]), minlength=keys.shape[0])
    return pa.table({"vertex": _key_column(keys), "triangles": pa.array(counts, pa.int64())})


def edge_triangle_counts(source: Any, **read_options: Any) -> pa.Table:
    """Triangles containing each edge of the undirected simple graph (edge support),
    recomputed from scratch: an Arrow table ``src, dst, triangles`` (src < dst by key) of the
    edges in at least one triangle.

    >>> edge_triangle_counts(([1, 2, 3, 3], [2, 3, 1, 4])).num_rows
    3
    """
    import pyarrow as pa

    s, d, keys = _keyed_ids(source, **read_options)
    a, b, c = list_triangles_ids(s, d, keys.shape[0])
    pairs = np.concatenate([(a << 32) | b, (b << 32) | c, (a << 32) | c])
    pairs = np.sort(pairs)
    if pairs.shape[0]:
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        uniq = pairs[starts]
        cnt = np.diff(np.r_[starts, pairs.shape[0]])
    else:
        uniq = cnt = np.zeros(0, np.int64)
    return pa.table({"src": _key_column(keys[uniq >> 32]),
                     "dst": _key_column(keys[uniq & 0xFFFFFFFF]), "triangles": pa.array(cnt)})


def graph_stats(source_or_arrays: Any, **read_options: Any) -> dict:
    """Vertex, edge, self-loop and triangle counts of an undirected graph.

    Parameters
    ----------
    source_or_arrays : path, table or tuple of two arrays
        As for :func:`count_triangles`.

    Returns
    -------
    dict
        ``{"vertices": distinct vertices (self-loop-only ones included), "edges": simple
        undirected edges without self-loops, "self_loops": number of self-loop rows,
        "triangles": undirected triangles}``, all Python ints.

    Examples
    --------
    >>> import numpy as np
    >>> graph_stats((np.array([1, 2, 3, 1, 9]), np.array([2, 3, 1, 2, 9])))
    {'vertices': 4, 'edges': 3, 'self_loops': 1, 'triangles': 1}
    """
    src, dst = _resolve_source(source_or_arrays, **read_options)
    s_keys, d_keys = _key_arrays(src, dst)
    ids, n = _dense_ids(np.concatenate([s_keys, d_keys]))
    m = s_keys.shape[0]
    edges, tri = _count_undirected(ids[:m], ids[m:], n)
    return {
        "vertices": int(n),
        "edges": edges,
        "self_loops": int(np.count_nonzero(s_keys == d_keys)),
        "triangles": tri,
    }


def _relation(rel: Any, name: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if len(rel) != 3:
        raise InputError(f"relation {name} must be a tuple (first, second, mult)", column=name)
    cols = []
    for part, col in zip(("first", "second", "mult"), rel, strict=True):
        arr = np.asarray(col)
        if arr.ndim != 1 or arr.dtype.kind not in "iub":
            raise InputError(f"relation {name}: {part} must be a 1-d integer array",
                             column=f"{name}.{part}")
        cols.append(np.ascontiguousarray(arr, dtype=np.int64))
    f, s, m = cols
    if not f.shape[0] == s.shape[0] == m.shape[0]:
        raise InputError(f"relation {name}: column lengths differ", column=name)
    for part, arr in (("first", f), ("second", s)):
        if arr.shape[0]:
            bad = (arr < 0) | (arr >= n)
            if bad.any():
                raise InputError(f"relation {name}: {part} id outside [0, {n})",
                                 column=f"{name}.{part}", row=int(np.flatnonzero(bad)[0]))
    return f, s, m


def _relation_csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n: int, name: str):
    indptr, perm = sk.csr_order(rows, cols, n, n)
    r = rows[perm]
    c = cols[perm]
    starts = sk.run_starts(r, c)
    if not starts.all():
        row = int(perm[np.flatnonzero(~starts)[0]])
        raise InputError(f"relation {name} has a duplicate pair", column=name, row=row)
    return indptr, r, c, vals[perm]


def relation_triangle_sum(R: tuple, S: tuple, T: tuple, n: int) -> int:
    """Exact triangle query over three Z-relations: ``sum R(a,b) * S(b,c) * T(c,a)``.

    Parameters
    ----------
    R, S, T : tuple of three int64 arrays
        ``(first_ids, second_ids, mult)``: ids in ``[0, n)``, pairs unique within a relation,
        multiplicities nonzero and possibly negative. Self-loops (equal ids) are allowed.
    n : int
        Size of the id domain.

    Returns
    -------
    int
        ``Q = sum_{a,b,c} R(a,b) S(b,c) T(c,a)`` exactly.

    Raises
    ------
    IntegerOverflowError
        If the sum of ``|R(a,b) S(b,c) T(c,a)|`` over all terms exceeds ``2**62`` (so the
        int64 accumulation could not be trusted).
    InputError
        On ids outside ``[0, n)``, duplicate pairs or malformed arrays.

    Notes
    -----
    CSR forms of S by first id and of T by second id are built; for each tuple ``(a, b)`` of
    R the shorter of ``S(b, .)`` and ``T(., a)`` is iterated and the longer binary-searched
    (merged when their lengths are similar). Worst case ``O(N^1.5 log N)`` for
    ``N = |R| + |S| + |T|``.

    Examples
    --------
    >>> import numpy as np
    >>> R = (np.array([0]), np.array([1]), np.array([2]))
    >>> S = (np.array([1]), np.array([2]), np.array([-3]))
    >>> T = (np.array([2, 2]), np.array([0, 1]), np.array([5, 7]))
    >>> relation_triangle_sum(R, S, T, 3)
    -30
    """
    n = int(n)
    if n < 0:
        raise InputError("n must be non-negative")
    ra, rb, rm = _relation(R, "R", n)
    sf, ss, sm = _relation(S, "S", n)
    tf, ts, tm = _relation(T, "T", n)
    if ra.shape[0] == 0 or sf.shape[0] == 0 or tf.shape[0] == 0:
        return 0
    _, ra, rb, rm = _relation_csr(ra, rb, rm, n, "R")  # sorted by a: T^t(a, .) stays hot
    s_ptr, _, s_col, s_val = _relation_csr(sf, ss, sm, n, "S")
    t_ptr, _, t_col, t_val = _relation_csr(ts, tf, tm, n, "T")  # T^t: row a = T(., a)
    total, abs_total = sk.relation_triangle_kernel(
        ra, rb, rm, s_ptr, s_col, s_val, t_ptr, t_col, t_val, sk.n_blocks(ra.shape[0]))
    return _checked_sum(total, abs_total)


def _checked_sum(total, abs_total: float) -> int:
    if not abs_total <= _OVERFLOW_LIMIT:
        raise IntegerOverflowError(
            f"triangle sum may leave the int64 range (sum of |terms| ~ {abs_total:.3g})")
    return int(total)


def relation_triangle_sum_backend(rels: list, n: int, backend: Any = None) -> int:
    """:func:`relation_triangle_sum` of three relations given as ``(keys, vals)`` with packed
    keys ``a << 32 | b``, sorted and unique, and nonzero values, on ``backend``.

    On ``cuda`` the relations stay on the device: S's rows and T's transposed rows are indexed
    by a sort and a scan, and ``kernels.static.relation_sum`` sums the terms with one thread
    per tuple of R (sorted-row intersections, as the views' products), with the same int64
    overflow guard. Otherwise the keys are unpacked and :func:`relation_triangle_sum` runs.

    >>> import numpy as np
    >>> k = lambda a, b: (np.array(a) << 32) | np.array(b)
    >>> rels = [(k([0], [1]), np.array([2])), (k([1], [2]), np.array([-3])),
    ...         (k([2, 2], [0, 1]), np.array([5, 7]))]
    >>> relation_triangle_sum_backend(rels, 3, "cpu")
    -30
    """
    from gpu_ivm.backend import get_backend
    from gpu_ivm.encoding import transpose

    be = get_backend(backend)
    if be.name != "cuda":
        host = be.to_host
        trip = [(host(k) >> 32, host(k) & 0xFFFFFFFF, host(v)) for k, v in rels]
        return relation_triangle_sum(trip[0], trip[1], trip[2], n)
    xp = be.xp
    (rk, rv), (sk_, sv), (tk, tv) = rels
    if rk.shape[0] == 0 or sk_.shape[0] == 0 or tk.shape[0] == 0:
        return 0
    tt = transpose(tk)  # T^t: rows by a, sorted by (a, c)
    order = xp.argsort(tt)
    tt, tv = tt[order], tv[order]
    ptrs = []
    for keys in (sk_, tt):
        ptr = xp.zeros(n + 1, np.int64)
        xp.cumsum(xp.bincount(keys >> 32, minlength=n), out=ptr[1:])
        ptrs.append(ptr)
    total, abs_total = be.kernels.static.relation_sum(rk, rv, ptrs[0], sk_, sv, ptrs[1], tt, tv)
    return _checked_sum(total, abs_total)
