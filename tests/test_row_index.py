"""Row hash tables of the store (kernels/row_index.py) against independent oracles.

Lookups, row inner products and the count kernel's path weights with the tables are compared
with Python dicts (brute force), with scipy sparse products, and with the sorted-run merge
they replace, on skewed graphs (stars, cliques, R-MAT) under batches of inserts and deletes.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels import delta_kernels as dk
from gpu_ivm.kernels.lsm import dot_rows_n
from gpu_ivm.kernels.row_index import dot_rows_ix, get_ix, has_index
from oracle import GraphOracle
from streams import graph_batches

from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm import engine as engine_mod
from gpu_ivm.partition import PartRel
from gpu_ivm.store import ZStore
from gpu_ivm.workloads import rmat_edges

LO = (1 << 32) - 1


def _no_tables(st):
    """The same store tuple with every row table hidden (lookups fall back to the runs)."""
    return st[:8] + (np.full(0, -1, np.int64),) + st[9:]


def _random_batch(rng, ref, n_rows, nv, hub_p, big):
    """Sorted unique keys and deltas: inserts, deletes of present keys, value changes."""
    out = {}
    present = list(ref)
    for _ in range(int(rng.integers(1, n_rows + 1))):
        if present and rng.random() < 0.35:
            k = present[int(rng.integers(len(present)))]
            d = -ref[k] if rng.random() < 0.7 else int(rng.integers(-3, 4))
        else:
            x = int(rng.integers(3)) if rng.random() < hub_p else int(rng.integers(nv))
            k = (x << 32) | int(rng.integers(nv))
            d = int(rng.integers(-big, big + 1))
        if d:
            out[k] = out.get(k, 0) + d
    out = {k: d for k, d in out.items() if d}
    keys = np.array(sorted(out), np.int64)
    return keys, np.array([out[int(k)] for k in keys], np.int64)


def _check_store(s: ZStore, ref: dict, nv: int, index_min: int | None):
    st = s.nt()
    rows = _row_dicts(ref)
    for x in range(nv):
        row = rows.get(x, {})
        if index_min is not None:
            # tables exist for rows of index_min or more, not for rows below index_min / 2
            if len(row) >= index_min:
                assert has_index(st, x)
            if 2 * len(row) < index_min:
                assert not has_index(st, x)
        for c in range(nv):
            assert get_ix(st, x, c)[0] == row.get(c, 0)
    for x1 in range(nv):
        for x2 in range(0, nv, 3):
            want = sum(v * rows.get(x2, {}).get(c, 0) for c, v in rows.get(x1, {}).items())
            assert dot_rows_ix(st, x1, st, x2)[0] == want
            assert dot_rows_n(_no_tables(st), x1, _no_tables(st), x2)[0] == want


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("index_min", [1, 2, 8])
def test_store_tables_follow_batches(seed, index_min):
    """Lookups and row products through the tables equal a dict model after every batch of
    inserts, deletes and value changes, including rows growing past and shrinking below the
    table threshold and tables rebuilt larger."""
    rng = np.random.default_rng(seed)
    nv = 24
    ref: dict[int, int] = {}
    s = ZStore(nv, index_min=index_min)
    for _ in range(15):
        keys, deltas = _random_batch(rng, ref, 80, nv, hub_p=0.5, big=3)
        if keys.shape[0] == 0:
            continue
        s.add(keys, deltas)
        _ref_add(ref, keys, deltas)
        _check_store(s, ref, nv, index_min)


def test_store_tables_from_sorted_and_wide_values():
    """A store loaded in one run gets its tables; a multiplicity outside int32 turns the
    tables off for good and every lookup stays exact."""
    rng = np.random.default_rng(7)
    nv = 20
    keys = np.unique((rng.integers(0, 3, 200) << 32) | rng.integers(0, nv, 200))
    vals = rng.integers(1, 5, keys.shape[0])
    s = ZStore.from_sorted(keys, vals, nv, index_min=4)
    ref = dict(zip(keys.tolist(), vals.tolist()))
    _check_store(s, ref, nv, 4)
    k = np.array([keys[0]], np.int64)
    s.add(k, np.array([1 << 31], np.int64))
    ref[int(keys[0])] += 1 << 31
    assert s.index_min is None
    _check_store(s, ref, nv, None)


def _ref_add(ref: dict, keys, deltas) -> None:
    """Add a batch to the dict model {packed key: multiplicity} (zeros dropped)."""
    for k, d in zip(keys.tolist(), deltas.tolist()):
        v = ref.get(k, 0) + d
        if v:
            ref[k] = v
        else:
            ref.pop(k, None)


def _row_dicts(ref: dict) -> dict[int, dict[int, int]]:
    """The dict model by row: {x: {c: multiplicity}}."""
    rows: dict[int, dict[int, int]] = {}
    for k, v in ref.items():
        rows.setdefault(k >> 32, {})[k & LO] = v
    return rows


def _dict_dot(rows: dict, x1: int, x2: int) -> int:
    """Σ_c rows[x1][c]·rows[x2][c], by brute force."""
    return sum(v * rows.get(x2, {}).get(c, 0) for c, v in rows.get(x1, {}).items())


def _oracle_of(src: np.ndarray, dst: np.ndarray) -> GraphOracle:
    """A graph oracle holding the edges (src[i], dst[i])."""
    o = GraphOracle()
    for u, v in zip(src.tolist(), dst.tolist()):
        o.apply(u, v, 1)
    return o


def _skewed_graph(kind: str, rng) -> tuple[np.ndarray, np.ndarray]:
    if kind == "star":  # two overlapping stars and a few random edges
        leaves = np.arange(2, 300)
        src = np.concatenate([np.zeros(298, np.int64), np.ones(149, np.int64),
                              rng.integers(2, 300, 200)])
        dst = np.concatenate([leaves, leaves[::2], rng.integers(2, 300, 200)])
    elif kind == "clique":  # a 40-clique plus a sparse fringe
        a, b = np.triu_indices(40, 1)
        src = np.concatenate([a, rng.integers(0, 200, 300)])
        dst = np.concatenate([b, rng.integers(0, 200, 300)])
    else:
        src, dst = rmat_edges(9, 8, seed=int(rng.integers(1 << 30)))
    keep = src != dst
    return src[keep].astype(np.int64), dst[keep].astype(np.int64)


def _scipy_triangles(edges: set) -> int:
    if not edges:
        return 0
    e = np.array(sorted(edges), np.int64)
    n = int(e.max()) + 1
    a = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    a = a + a.T
    return int(round((a @ a).multiply(a).sum() / 6))


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
@pytest.mark.parametrize("max_batch", [1, 60, 2000, 10000])
def test_graph_counts_with_tables(kind, eps, max_batch, monkeypatch):
    """Triangle counts with tables on every row of 2+ tuples equal scipy's count of the
    oracle's edge set, batch after batch; path weights equal the merge without tables and
    the scipy product (A·A)[x, y]."""
    monkeypatch.setattr(PartRel, "index_min", 2)
    monkeypatch.setattr(PartRel, "row_bits", False)  # the tables, not the bitmaps, are probed
    rng = np.random.default_rng(len(kind) * 7 + max_batch)
    src, dst = _skewed_graph(kind, rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon=eps, adaptive=False)
    g.load((src, dst))
    assert g.count() == _scipy_triangles(o.edges)
    nv = int(max(src.max(), dst.max())) + 5
    for batch in graph_batches(o, rng, n_batches=4, nv=nv, max_batch=max_batch, hub_p=0.4,
                               shrink_from=2):
        rep = g.apply(batch)
        assert rep.path == "delta"
        assert g.count() == _scipy_triangles(o.edges)
    _check_path_weights(g, rng)
    g.check_invariants()


def _check_path_weights(g: GraphEngine, rng) -> None:
    E = g.rels[0]
    keys, _ = E.items()
    n = E.id_capacity
    a, b = keys >> 32, keys & LO
    adj = sp.coo_matrix((np.ones(a.shape[0], np.int64), (a, b)), shape=(n, n)).tocsr()
    xs = rng.integers(0, n, 300)
    ys = rng.integers(0, n, 300)
    xs = np.concatenate([xs, a[:300]])
    ys = np.concatenate([ys, b[:300]])
    want = np.asarray((adj @ adj)[xs, ys]).ravel()
    got = g._path_weights(0, xs, ys, True)
    assert np.array_equal(got, want)
    view = g.views[0]
    old = np.empty(xs.shape[0], np.int64)
    strip = _no_tables
    dk.path_weights(xs, ys, strip(E.h.nt()), strip(E.l.nt()), strip(E.h.nt()),
                    strip(E.l.nt()), strip(E.ht.nt()), view.sparse.nt(), view.vrow, view.vmat,
                    E.heavy, E.heavy, True, old)
    assert np.array_equal(old, want)


@pytest.mark.parametrize("eps", ["0", "1/2", "1"])
def test_relation_engine_with_tables(eps, monkeypatch):
    """Z-relations with multiplicities (negative ones too) through the tables: the count
    equals the brute-force Σ R(a,b)·S(b,c)·T(c,a) of dicts after every batch."""
    from oracle import RelationsOracle

    monkeypatch.setattr(PartRel, "index_min", 2)
    rng = np.random.default_rng(3)
    o = RelationsOracle()
    e = RelationEngine(epsilon=eps, adaptive=False)
    init = {}
    for r in "RST":
        a = np.where(rng.random(300) < 0.4, 0, rng.integers(0, 40, 300))
        b = rng.integers(0, 40, 300)
        m = rng.integers(-3, 4, 300)
        init[r] = {"src": a, "dst": b, "mult": m}
        for x, y, z in zip(a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
    e.load(**init)
    assert e.count() == o.count()
    for n in (1, 50, 1000):
        rel = rng.choice(list("RST"), n)
        a = np.where(rng.random(n) < 0.4, 0, rng.integers(0, 45, n))
        b = rng.integers(0, 45, n)
        m = rng.integers(-3, 4, n)
        e.apply({"rel": list(rel), "src": a.tolist(), "dst": b.tolist(), "mult": m.tolist()})
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert e.count() == o.count()
        assert e.recount() == e.count()
    e.check_invariants()


def test_profile_mode_counts(monkeypatch):
    """The profile mode leaves results unchanged; its Σ min(deg) equals the one computed from
    the oracle's degrees, and the entries it reports are at least one per probed row entry."""
    rng = np.random.default_rng(5)
    src, dst = rmat_edges(8, 8, seed=2)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon="1/2", adaptive=False)
    g.load((src, dst))
    deg = np.zeros(256, np.int64)  # degrees before the batch (the kernel reads that state)
    for u, v in o.edges:
        deg[u] += 1
        deg[v] += 1
    batch = next(graph_batches(o, rng, n_batches=1, nv=256, max_batch=300, hub_p=0.3))
    monkeypatch.setattr(engine_mod, "PROFILE_WORK", True)
    rep = g.apply(batch)
    assert g.count() == _scipy_triangles(o.edges) == rep.triangles
    w = g.work
    s, d, sign = batch["src"], batch["dst"], batch["sign"]
    pairs = {}
    for u, v, z in zip(s.tolist(), d.tolist(), sign.tolist()):
        pairs[(min(u, v), max(u, v))] = z
    want = sum(min(deg[u], deg[v]) for u, v in pairs)
    assert w["updates"] == len(pairs)
    assert w["min_degree_sum"] == want
    assert w["entries"] > 0
