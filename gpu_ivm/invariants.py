"""Read-only checks of an engine's state against the definitions it maintains.

Everything here works on host (NumPy) copies of the state and recomputes the definitions with
plain NumPy joins written for checking (independent of the kernels that maintain the state);
nothing of the engine is changed. Used by ``engine.check_invariants()``.

The joins materialize every path a→b→c of two relations, chunk by chunk: their cost is
Σ_b in-degree·out-degree (quadratic in the worst case), which is what a check may cost.

>>> import numpy as np
>>> from gpu_ivm.encoding import pack
>>> e = (pack(np.array([0, 1, 2]), np.array([1, 2, 0])), np.ones(3, np.int64))
>>> [x.tolist() for x in triangles_reference(e, e, e)]
[[0, 1, 2], [1, 2, 0], [2, 0, 1], [1, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from .encoding import transpose, unpack

CHUNK = 1 << 21  # paths materialized at a time
Rel = tuple[np.ndarray, np.ndarray]  # (sorted packed keys, multiplicities), host arrays


def paths(first: Rel, second: Rel) -> Iterator[tuple[np.ndarray, ...]]:
    """Chunks (x, y, z, v1, v2) of the paths first(x, y)·second(y, z), v1, v2 the two
    multiplicities (``second``'s keys sorted)."""
    ak, av = first
    bk, bv = second
    if ak.shape[0] == 0 or bk.shape[0] == 0:
        return
    x, y = unpack(ak)
    bf, bs = unpack(bk)
    lo = np.searchsorted(bf, y, "left")
    cnt = np.searchsorted(bf, y, "right") - lo
    ends = np.cumsum(cnt)
    s = 0
    while s < x.shape[0]:
        base = ends[s] - cnt[s]
        e = max(int(np.searchsorted(ends, base + CHUNK, "right")), s + 1)
        c = cnt[s:e]
        rep = np.repeat(np.arange(s, e), c)
        offs = np.arange(rep.shape[0]) - np.repeat(np.cumsum(c) - c, c)
        pos = lo[rep] + offs
        yield x[rep], y[rep], bs[pos], av[rep], bv[pos]
        s = e


def triangles_reference(r: Rel, s: Rel, t: Rel) -> tuple[np.ndarray, ...]:
    """All (a, b, c, R(a,b)·S(b,c)·T(c,a)) with a nonzero product, sorted by (a, b, c)."""
    tk, tv = t
    out = []
    for a, b, c, rv, sv in paths(r, s):
        want = (c << 32) | a
        i = np.minimum(np.searchsorted(tk, want), max(tk.shape[0] - 1, 0))
        hit = tk[i] == want if tk.shape[0] else np.zeros(want.shape[0], bool)
        out.append((a[hit], b[hit], c[hit], rv[hit] * sv[hit] * tv[i[hit]]))
    if not out:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    a, b, c, m = (np.concatenate([o[j] for o in out]) for j in range(4))
    order = np.lexsort((c, b, a))
    return a[order], b[order], c[order], m[order]


def group_sum(cols: list[np.ndarray], vals: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Σ vals per distinct key (columns), keys sorted lexicographically, zero sums dropped."""
    if vals.shape[0] == 0:
        return [c[:0] for c in cols], vals[:0]
    order = np.lexsort(tuple(reversed(cols)))
    cols = [c[order] for c in cols]
    vals = vals[order]
    new = np.zeros(vals.shape[0], bool)
    new[0] = True
    for c in cols:
        new[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(new)
    sums = np.add.reduceat(vals, starts)
    keep = sums != 0
    return [c[starts][keep] for c in cols], sums[keep]


def same(got_cols, got_vals, want_cols, want_vals) -> bool:
    """Equal key columns and values after sorting the ``got`` side lexicographically."""
    got_cols, got_vals = group_sum([np.asarray(c, np.int64) for c in got_cols],
                                   np.asarray(got_vals, np.int64))
    return (len(got_vals) == len(want_vals) and np.array_equal(got_vals, want_vals)
            and all(np.array_equal(g, w) for g, w in zip(got_cols, want_cols)))


def check_row_bits(st, host, ks: np.ndarray, vs: np.ndarray, fail: Callable[[str], None],
                   name: str) -> None:
    """The row bitmaps of store ``st`` (see :mod:`gpu_ivm.kernels.row_bits`) against its live
    tuples ``ks, vs`` (host arrays): a row with a bitmap holds multiplicity 1 only, its bitmap
    has exactly the bits of its second ids, no two rows share a slot, and the free slots are
    distinct and held by no row."""
    boff = host(st.boff)
    rows = np.flatnonzero(boff >= 0)
    bits = host(st.bits)
    slots = boff[rows]
    n_free, n_out = (int(v) for v in host(st.bmeta))
    free = host(st.bstack)[:n_free]
    if np.unique(slots).shape[0] != slots.shape[0]:
        fail(f"{name}: two rows share a bitmap slot")
    if (slots >= n_out).any() or np.isin(free, slots).any() \
            or np.unique(free).shape[0] != free.shape[0]:
        fail(f"{name}: a bitmap slot is both free and in use, or beyond the slots handed out")
    if rows.shape[0] == 0:
        return
    x = ks >> 32
    mine = np.zeros(ks.shape[0], np.bool_)
    inside = x < boff.shape[0]
    mine[inside] = boff[x[inside]] >= 0
    if (vs[mine] != 1).any():
        fail(f"{name}: a row with a bitmap holds a multiplicity other than 1")
    c = ks[mine] & 0xFFFFFFFF
    words = bits.shape[1]
    if (c >> 6 >= words).any():
        fail(f"{name}: a row with a bitmap holds an id beyond it")
    want = np.zeros((rows.shape[0], words), np.uint64)
    np.bitwise_or.at(want, (np.searchsorted(rows, x[mine]), c >> 6),
                     np.left_shift(np.uint64(1), (c & 63).astype(np.uint64)))
    if not np.array_equal(want, bits[slots]):
        bad = rows[(want != bits[slots]).any(axis=1)]
        fail(f"{name}: the bitmap of row {int(bad[0])} differs from the row's tuples")


def _check_vertex_results(fq, tri: tuple[np.ndarray, ...], host,
                          fail: Callable[[str], None]) -> None:
    """Per-vertex Δ1 as the engine reads it (bulk and lookups) against ``tri``."""
    from .queries import results as rs

    a, m = tri[0], tri[3]
    want = group_sum([a], m)
    ids, vals = map(host, rs.vertex_counts(fq))
    if not same([ids], vals, *want):
        fail("per-vertex counts differ from a recount from the stored tuples")
    dense = np.zeros(fq.cap, np.int64)
    np.add.at(dense, a, m)
    if not np.array_equal(host(rs.vertex_lookup(fq, np.arange(fq.cap, dtype=np.int64))),
                          dense):
        fail("per-vertex lookups differ from a recount from the stored tuples")


def _check_edge_results(fq, tri: tuple[np.ndarray, ...], rels: list[Rel], host,
                        fail: Callable[[str], None]) -> None:
    """Per-edge Δ2 as the engine reads it (bulk, and a lookup of every stored R tuple)
    against ``tri``."""
    from .queries import results as rs

    a, b, _, m = tri
    want = group_sum([a, b], m)
    ea, eb, vals = map(host, rs.edge_counts(fq))
    if not same([ea, eb], vals, *want):
        fail("per-edge counts differ from a recount from the stored tuples")
    rk = rels[0][0]
    ra, rb = unpack(rk)
    exp = np.zeros(rk.shape[0], np.int64)
    wk = (want[0][0] << 32) | want[0][1]
    exp[np.searchsorted(rk, wk)] = want[1]
    if not np.array_equal(host(rs.edge_lookup(fq, ra, rb)), exp):
        fail("per-edge lookups differ from a recount from the stored tuples")


def _check_listed_triangles(fq, tri: tuple[np.ndarray, ...], host,
                            fail: Callable[[str], None]) -> None:
    """Δ3 listed off an undirected graph's stores (each triangle once, a < b < c) against
    ``tri``, and the triangles through every vertex."""
    from .queries import results as rs

    up = (tri[0] < tri[1]) & (tri[1] < tri[2])
    want = [x[up] for x in tri[:3]]
    parts = [tuple(map(host, p)) for p in rs.triangle_parts(fq)]
    got = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
           for i in range(4)]
    order = np.lexsort((got[2], got[1], got[0]))
    if not (all(np.array_equal(g[order], w) for g, w in zip(got, want))
            and np.all(got[3] == 1)):
        fail("the triangle listing differs from a recount from the stored tuples "
             "(missing, extra or repeated)")
    # through every vertex: each triangle once per corner, as (v, b, c) with b < c
    v, b, c, _ = map(host, rs.triangles_with(fq, np.arange(fq.cap, dtype=np.int64)))
    rows = np.sort(np.stack([v, b, c]), axis=0)
    order = np.lexsort((rows[2], rows[1], rows[0]))
    thrice = [np.repeat(w, 3) for w in want]
    if not (np.all(b < c) and all(np.array_equal(r[order], w) for r, w in zip(rows, thrice))):
        fail("the triangles through a vertex differ from a recount from the stored tuples")


def check_free_queries(eng, rels: list[Rel], fail: Callable[[str], None],
                       tri: tuple[np.ndarray, ...] | None = None) -> None:
    """The free-query state of ``eng`` (``eng.fq``) against its definitions, from the engine's
    stored relations ``rels`` (R, S, T as host (keys, multiplicities)): its copies of the
    relations, Δ0, every view of paper 001 (a product of relation parts, by the current
    heavy/light flags, summed over the variables not in its key), and the results as the
    engine reads them (per-vertex Δ1, per-edge Δ2, the triangle listing Δ3, and the lookups).
    ``tri``: :func:`triangles_reference` of ``rels`` if already computed."""
    from .queries import results as rs
    from .queries import specs as sp

    fq = eng.fq
    host = eng.backend.to_host
    if tri is None:
        tri = triangles_reference(*rels)
    if getattr(fq, "graph_local", False):  # Δ1, Δ2 off the engine's stores: the results only
        if "vertex_counts" in fq.families:
            _check_vertex_results(fq, tri, host, fail)
        if "edge_counts" in fq.families:
            _check_edge_results(fq, tri, rels, host, fail)
        if "triangles" in fq.families:
            _check_listed_triangles(fq, tri, host, fail)
        if fq.count != eng.Q:
            fail(f"per-vertex or per-edge counts sum to {fq.count}, engine Q {eng.Q}")
        return
    for problem in fq.check_invariants():
        fail(f"free-query state: {problem}")
    for k, (keys, vals) in enumerate(rels):
        fk, fv = map(host, fq.rels[k].items())
        if not (np.array_equal(fk, keys) and np.array_equal(fv, vals)):
            fail(f"free-query copy of relation {eng.names[k % len(eng.names)]} differs from "
                 "the engine's stored tuples")
        bk, bv = map(host, fq.rels[k].bwd.items())
        tk, tv = transpose(keys), vals
        order = np.argsort(tk, kind="stable")
        if not (np.array_equal(bk, tk[order]) and np.array_equal(bv, tv[order])):
            fail(f"free-query relation {k}: backward index is not the transpose")
    if fq.count != int(tri[3].sum()) or fq.count != eng.Q:
        fail(f"free-query count {fq.count}, recount {int(tri[3].sum())}, engine Q {eng.Q}")
    flags = [[host(fq.rels[k].flags[p]) for p in (0, 1)] for k in range(3)]

    def matches(spec, k: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        ok = np.ones(first.shape[0], bool)
        for pos, ids in ((0, first), (1, second)):
            want = spec.pattern[k][pos]
            if want != sp.ANY:
                ok &= flags[k][pos][ids] == want
        return ok

    for spec in fq.specs:
        if len(spec.atoms) == 3:
            abc = list(tri[:3])
            ok = np.ones(tri[3].shape[0], bool)
            for k in range(3):
                ok &= matches(spec, k, abc[k], abc[(k + 1) % 3])
            want = group_sum([abc[v][ok] for v in spec.key], tri[3][ok])
        else:
            k1 = spec.atoms[0] if (spec.atoms[0] + 1) % 3 == spec.atoms[1] else spec.atoms[1]
            k2 = (k1 + 1) % 3
            cols, vals = [], []
            for x, y, z, v1, v2 in paths(rels[k1], rels[k2]):
                ok = matches(spec, k1, x, y) & matches(spec, k2, y, z)
                by_var = {k1: x[ok], k2: y[ok], (k1 + 2) % 3: z[ok]}
                cols.append([by_var[v] for v in spec.key])
                vals.append(v1[ok] * v2[ok])
            if cols:
                want = group_sum([np.concatenate([c[i] for c in cols])
                                  for i in range(len(spec.key))], np.concatenate(vals))
            else:
                want = ([np.zeros(0, np.int64)] * len(spec.key), np.zeros(0, np.int64))
        got_cols, got_vals = fq.views[spec.signature].items()
        if not same([host(c) for c in got_cols], host(got_vals), *want):
            fail(f"free-query view {spec.name} differs from its definition")
    if "vertex_counts" in fq.families:
        _check_vertex_results(fq, tri, host, fail)
    if "edge_counts" in fq.families:
        _check_edge_results(fq, tri, rels, host, fail)
    if "triangles" in fq.families:
        parts = [tuple(map(host, p)) for p in rs.triangle_parts(fq)]
        got = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
               for i in range(4)]
        order = np.lexsort((got[2], got[1], got[0]))
        got = [g[order] for g in got]
        if not all(np.array_equal(g, w) for g, w in zip(got, tri)):
            fail("the triangle listing differs from a recount from the stored tuples "
                 "(missing, extra, repeated or wrong multiplicity)")
