"""Reading the maintained results: bulk materialization, chunked enumeration, lookups.

Bulk results follow digest §15.3 (the GPU-friendly form of the paper's enumeration): every
skew-aware view's contribution is produced as (key, multiplicity) rows — materialized views as
they are, view trees expanded root key by root key through their 3-ary inner view — and rows of
the same key are summed (the views partition the triangles, so the sum is the paper's
m1 + m2 + m3 reconciliation). The faithful sequential hop-iterator enumeration is in
``reference.py``.

All functions take a :class:`~gpu_ivm.queries.maintain.FreeQueries` and work on dense ids, in
the state's array module ``fq.xp`` (ids given as host arrays are uploaded; results are ``fq.xp``
arrays, downloaded by the caller).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..encoding import pack
from . import specs as sp
from .maintain import FreeQueries
from .storage import consolidate


def _cols(spec_key, cols):
    """Reorder a view's key columns into variables A, B, C (None where absent)."""
    out = [None, None, None]
    for var, col in zip(spec_key, cols):
        out[var] = col
    return out


def _ids(fq: FreeQueries, a) -> np.ndarray:
    """Ids as a contiguous int64 array of the state's array module (uploaded if on the host)."""
    xp = fq.xp
    return xp.ascontiguousarray(xp.asarray(a, dtype=np.int64))


def _repeat(xp, vals, ptr):
    """``vals[i]`` repeated ``ptr[i+1] - ptr[i]`` times (CuPy's repeat takes no array of
    counts: on a device each output slot finds its segment by a search in ``ptr``)."""
    if xp is np:
        return np.repeat(vals, np.diff(ptr))
    total = int(ptr[-1])
    seg = xp.searchsorted(ptr, xp.arange(total, dtype=np.int64), side="right") - 1
    return vals[seg]


def _rel_get(fq: FreeQueries, k: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return fq.rels[k].get(pack(first, second))


def tree_rows(fq: FreeQueries, tree: sp.TreeSpec, start: int = 0, stop: int | None = None):
    """Triangles (a, b, c, mult) of one view tree, for root entries ``[start, stop)``."""
    rspec, root = fq.spec(tree.root), fq.view(tree.root)
    ispec, inner = fq.spec(tree.inner), fq.view(tree.inner)
    rcols, _ = root.items()
    rcols = [c[start:stop] for c in rcols]
    by_var = _cols(rspec.key, rcols)
    u, v = by_var[ispec.key[0]], by_var[ispec.key[1]]
    ptr, w, vals = inner.rows(u, v)
    abc = [None, None, None]
    abc[ispec.key[0]] = _repeat(fq.xp, u, ptr)
    abc[ispec.key[1]] = _repeat(fq.xp, v, ptr)
    abc[ispec.key[2]] = w
    k = tree.lookup
    look = _rel_get(fq, k, abc[k], abc[(k + 1) % 3])
    return abc[0], abc[1], abc[2], vals * look


def triangle_parts(fq: FreeQueries, chunk: int = 1 << 20) -> Iterator[tuple[np.ndarray, ...]]:
    """Δ3 as (a, b, c, mult) chunks: the two listing views, then the three view trees (the five
    skew-aware views are disjoint, so no tuple is repeated)."""
    if getattr(fq, "graph_local", False):  # listed off the engine's stores, a < b < c
        yield from fq.triangle_parts(chunk)
        return
    for name in ("D3_HHH", "D3_LLL"):
        spec, view = fq.spec(name), fq.view(name)
        cols, vals = view.items()
        abc = _cols(spec.key, cols)
        for s in range(0, vals.shape[0], chunk):
            yield abc[0][s:s + chunk], abc[1][s:s + chunk], abc[2][s:s + chunk], vals[s:s + chunk]
    for tree in sp.trees("triangles"):
        n_root = len(fq.view(tree.root))
        s = 0
        # root entries per step chosen so a step emits about ``chunk`` rows on average
        step = max(1, chunk // 4)
        while s < n_root:
            a, b, c, m = tree_rows(fq, tree, s, s + step)
            s += step
            if m.shape[0]:
                yield a, b, c, m


def edge_counts(fq: FreeQueries, upper: bool = False) -> tuple[np.ndarray, np.ndarray,
                                                                np.ndarray]:
    """Δ2 as (a, b, mult), sorted by (a, b), multiplicities nonzero; ``upper``: only the rows
    with a < b are needed (an undirected graph's edges, once each; more rows may come)."""
    if getattr(fq, "graph_local", False):
        return fq.edge_counts(upper)
    keys, vals = [], []
    for spec in sp.family("edge_counts"):
        if not spec.root or spec.name in {t.root for t in sp.trees("edge_counts")}:
            continue
        cols, v = fq.view(spec.name).items()
        abc = _cols(spec.key, cols)
        keys.append(pack(abc[0], abc[1]))
        vals.append(v)
    for tree in sp.trees("edge_counts"):
        a, b, _, m = tree_rows(fq, tree)
        keys.append(pack(a, b))
        vals.append(m)
    k, v = consolidate(fq.xp.concatenate(keys), fq.xp.concatenate(vals), fq.kernels)
    return k >> 32, k & 0xFFFFFFFF, v


def vertex_counts(fq: FreeQueries) -> tuple[np.ndarray, np.ndarray]:
    """Δ1 as (a, mult), sorted by a, multiplicities nonzero."""
    if getattr(fq, "graph_local", False):
        return fq.vertex_counts()
    xp = fq.xp
    total = xp.zeros(fq.cap, np.int64)
    for spec in sp.family("vertex_counts"):
        if spec.root and len(spec.key) == 1:
            total += fq.view(spec.name).dense[: fq.cap]
    for tree in sp.trees("vertex_counts"):
        a, _, _, m = tree_rows(fq, tree)
        xp.add.at(total, a, m)
    nz = xp.flatnonzero(total)
    return nz.astype(np.int64), total[nz]


# ---------------------------------------------------------------------- lookups
def edge_lookup(fq: FreeQueries, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Δ2(a_i, b_i) by Figure 13 lines 5–7: O(1) lookups in the materialized views (m1) and
    sums over at most min(1.5N^ε, 2N^{1-ε}) values c for the two view trees (m2, m3)."""
    if getattr(fq, "graph_local", False):
        return fq.edge_lookup(a, b)
    a = _ids(fq, a)
    b = _ids(fq, b)
    out = fq.xp.zeros(a.shape[0], np.int64)
    if a.shape[0] == 0:
        return out
    cols = {0: a, 1: b}
    trees = {t.root for t in sp.trees("edge_counts")}
    for spec in sp.family("edge_counts"):
        if spec.root and spec.name not in trees:
            out += fq.view(spec.name).get([cols[v] for v in spec.key])
    r = fq.rels[0]
    fa = r.flags[0][a]
    fb = r.flags[1][b]
    rv = r.get(pack(a, b))
    for tree in sp.trees("edge_counts"):
        spec = fq.spec(tree.root)
        out += rv * fq.path_sums(0, spec, a, b, fa, fb) * _own_ok(spec, fa, fb, fq.xp)
    return out


def _own_ok(spec: sp.ViewSpec, fa: np.ndarray, fb: np.ndarray, xp=np) -> np.ndarray:
    ok = xp.ones(fa.shape[0], np.int64)
    if spec.pattern[0][0] != sp.ANY:
        ok &= (fa == spec.pattern[0][0]).astype(np.int64)
    if spec.pattern[0][1] != sp.ANY:
        ok &= (fb == spec.pattern[0][1]).astype(np.int64)
    return ok


def vertex_lookup(fq: FreeQueries, a: np.ndarray) -> np.ndarray:
    """Δ1(a_i) by Figure 15 lines 5–6: dense view lookups (m1) plus Σ over the (b, c) pairs of
    R^{LH}(a, ·) × T^{HL}(·, a) (both short: a is light there) for the (LH)∗(HL) tree (m2)."""
    if getattr(fq, "graph_local", False):
        return fq.vertex_lookup(a)
    xp = fq.xp
    a = _ids(fq, a)
    out = xp.zeros(a.shape[0], np.int64)
    if a.shape[0] == 0:
        return out
    inside = a < fq.cap
    for spec in sp.family("vertex_counts"):
        if spec.root and len(spec.key) == 1:
            out[inside] += fq.view(spec.name).dense[a[inside]]
    r, s, t = fq.rels
    extra = xp.zeros(a.shape[0], np.int64)
    fq.qk.pair_sums(a, r.fwd.nt(), r.flags[1], 1, t.bwd.nt(), t.flags[0], 1, s.fwd.nt(), extra)
    light = (r.flags[0][a] == 0) & (t.flags[1][a] == 0) if fq.cap else xp.zeros(0, bool)
    out += xp.where(light, extra, 0)
    return out


def triangles_with(fq: FreeQueries, a: np.ndarray) -> tuple[np.ndarray, ...]:
    """Δ3 restricted to A ∈ ``a``: (a, b, c, mult) by intersecting S(b, ·) with T(·, a) for
    every b ∈ R(a, ·) (output-sensitive; no view is needed)."""
    if getattr(fq, "graph_local", False):
        return fq.triangles_with(a)
    a = _ids(fq, a)
    r = fq.rels[0]
    ptr, keys, vals = r.fwd.rows(a)
    xa = keys >> 32
    xb = keys & 0xFFFFFFFF
    zero = fq.xp.zeros(xa.shape[0], np.uint8)
    from .maintain import _ALL_TRIANGLES

    idx, c, w = fq.expand(0, _ALL_TRIANGLES, xa, xb, vals, zero, zero)
    return xa[idx], xb[idx], c, w
