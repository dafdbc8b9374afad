"""The sequential reference enumerations (gpu_ivm.queries.reference) against einsum oracles.

Δ3 (Prop 22), Δ2 (Figure 13) and Δ1 (Figure 15) are enumerated tuple by tuple with UnionNext
and hop-iterator unions over the views a FreeQueries maintains; after every few batches of a
random stream (delta path forced) each enumeration must equal the dense einsum oracle (digest
§14.5) and the bulk results of results.py, emit every tuple exactly once and never a
multiplicity <= 0. The buckets of the hop unions are checked against their definitions (from
the dense relations and the engine's heavy flags), and CandidateBuckets against the buckets.

Uniform random streams on ~10 values never make the tree views of Δ2/Δ1 non-empty (a value
heavy on one side and light on the other needs degree ≥ N^ε with N = 2|D| + 1), so the streams
toggle tuples of a planted skewed structure plus random noise: one structure per view tree,
each with overlapping buckets, so Exclude/IsEmpty of Figure 5 run. At ε = 0 every value is
heavy and at ε ∈ {2/3, 1} none can be on these domains: those streams exercise the
materialized views only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from oracle import relation_arrays as arrays
from oracle import relation_matrix as dense

from gpu_ivm.encoding import pack
from gpu_ivm.queries import reference as rf
from gpu_ivm.queries import results as rs
from gpu_ivm.queries.hop import union_iter
from gpu_ivm.queries.maintain import FreeQueries

EPSILONS = ["0", "1/3", "1/2", "2/3", "1"]
ALL = ("vertex_counts", "edge_counts", "triangles")
N_DOM = 12


def planted(kind: int) -> list[set]:
    """Tuples of R, S, T that populate one view tree (with overlapping buckets)."""
    r = range(3, N_DOM)
    if kind == 0:  # Δ2 H(LH)*: a = 0 heavy in R, c ∈ {1, 2} heavy in S, b light in S
        return [{(0, b) for b in r}, {(b, c) for b in r for c in (1, 2)}, {(1, 0), (2, 0)}]
    if kind == 1:  # Δ2 L*(HL): c ∈ {0, 1} heavy in T, a light in R and in T
        return [{(a, 2) for a in r}, {(2, 0), (2, 1)}, {(c, a) for c in (0, 1) for a in r}]
    # Δ1 (LH)*(HL): b ∈ {0, 1} heavy in R, c ∈ {2, 3} heavy in T, a light in R and in T
    return [{(a, b) for a in r for b in (0, 1)}, {(b, c) for b in (0, 1) for c in (2, 3)},
            {(c, a) for c in (2, 3) for a in r}]


def toggle_batch(rng, rels, universe, size, p_delete):
    """Updates to R, S, T drawn from ``universe``: deletes (within the current multiplicity)
    of present tuples with probability ``p_delete``, inserts otherwise."""
    phases = []
    for k in range(3):
        upd: dict = {}
        uni = universe[k]
        for _ in range(int(rng.integers(0, size + 1))):
            t = uni[int(rng.integers(0, len(uni)))]
            cur = rels[k].get(t, 0) + upd.get(t, 0)
            if cur > 0 and rng.random() < p_delete:
                d = -int(rng.integers(1, cur + 1))
            else:
                d = int(rng.integers(1, 3))
            upd[t] = upd.get(t, 0) + d
        upd = {t: v for t, v in upd.items() if v}
        for t, v in upd.items():
            rels[k][t] = rels[k].get(t, 0) + v
            if rels[k][t] == 0:
                del rels[k][t]
        if upd:
            keys = pack(np.array([t[0] for t in upd]), np.array([t[1] for t in upd]))
            vals = np.array(list(upd.values()), np.int64)
            o = np.argsort(keys)
            phases.append((k, keys[o], vals[o]))
    return phases


def oracle(rels, n):
    return np.einsum("ab,bc,ca->abc", *(dense(d, n) for d in rels))


def once(pairs) -> dict:
    """Enumerated (tuple, mult) pairs as a dict, checking each tuple once and mult > 0."""
    pairs = list(pairs)
    out = dict(pairs)
    assert len(out) == len(pairs), "a tuple was emitted twice"
    assert all(isinstance(m, int) and m > 0 for m in out.values())
    return out


def nonzero(arr) -> dict:
    return {tuple(int(x) for x in k) if len(k) > 1 else int(k[0]): int(arr[k])
            for k in zip(*np.nonzero(arr))}


def flag(fq, k, pos, n):
    return fq.rels[k].flags[pos][:n].astype(np.int64)


def tree_parts(fq, rels, n) -> dict:
    """The skew-aware views of the three hop-union trees, dense (a, b, c)."""
    R, S, T = (dense(d, n) for d in rels)
    h = {(k, pos): flag(fq, k, pos, n) for k in range(3) for pos in (0, 1)}
    light = {key: 1 - f for key, f in h.items()}
    out = {}
    if "edge_counts" in fq.families:
        s_lh = S * light[1, 0][:, None] * h[1, 1][None, :]
        out["V2^H(LH)*"] = np.einsum("ab,bc,ca->abc", R * h[0, 0][:, None], s_lh, T)
        t_hl = T * h[2, 0][:, None] * light[2, 1][None, :]
        out["V2^L*(HL)"] = np.einsum("ab,bc,ca->abc", R * light[0, 0][:, None], S, t_hl)
    if "vertex_counts" in fq.families:
        r_lh = R * light[0, 0][:, None] * h[0, 1][None, :]
        t_hl = T * h[2, 0][:, None] * light[2, 1][None, :]
        out["V1^(LH)*(HL)"] = np.einsum("ab,bc,ca->abc", r_lh, S, t_hl)
    return out


def check_hop_union(hu, want_buckets: dict, universe) -> None:
    """Buckets as defined, CandidateBuckets complete, contains() = membership in the union."""
    assert list(hu.sources) == sorted(want_buckets)
    holders: dict = {}
    for bid, bucket in hu.sources.items():
        got = list(bucket)
        assert len(got) == len(set(got)) and set(got) == want_buckets[bid], (hu.name, bid)
        for t in got:
            assert bucket.contains(t)
            holders.setdefault(t, set()).add(bid)
    for t in universe:
        cands = hu.candidates(t)
        assert len(cands) == len(set(cands)) and set(cands) <= set(hu.sources)
        assert holders.get(t, set()) <= set(cands), (hu.name, t)
        assert hu.contains(t) == (t in holders)


def drain(its) -> tuple[list, dict]:
    """UnionNext to EOF; returns the output and how much excluding the hop unions did."""
    out = list(union_iter(its))
    excluded = {}
    for it in its:
        if isinstance(it, rf.HopUnion):
            u = it.union
            excluded[it.name] = (sum(len(u.buckets[b].skip_to) for b in u.buckets.initialised),
                                 len(u.ibuckets.skip_to))
    return out, excluded


def check_reference(fq, rels, n, coverage) -> None:
    d3 = oracle(rels, n)
    parts = tree_parts(fq, rels, n)
    if "triangles" in fq.families:
        got = once(rf.enumerate_triangles(fq))
        assert got == nonzero(d3)
        bulk = {}
        for a, b, c, m in rs.triangle_parts(fq, chunk=5):
            for t, v in zip(zip(a.tolist(), b.tolist(), c.tolist()), m.tolist()):
                assert t not in bulk
                bulk[t] = v
        assert got == bulk
    if "edge_counts" in fq.families:
        want = nonzero(d3.sum(2))
        its = rf.edge_iterators(fq)
        pairs = [(a, b) for a in range(n) for b in range(n)]
        for hu in its[5:]:
            x = parts[hu.name]
            buckets = {c: set(nonzero(x[:, :, c])) for c in range(n) if x[:, :, c].any()}
            check_hop_union(hu, buckets, pairs)
            holders = [t for bs in buckets.values() for t in bs]
            coverage[hu.name + " overlaps"] += len(holders) - len(set(holders))
        out, excluded = drain(rf.edge_iterators(fq))
        assert len(out) == len(set(out)) and set(out) == set(want)
        for name, (inner, outer) in excluded.items():
            coverage[name + " excluded"] += inner
            coverage[name + " buckets excluded"] += outer
        got = once(rf.enumerate_edges(fq))
        assert got == want
        a, b, m = rs.edge_counts(fq)
        assert got == dict(zip(zip(a.tolist(), b.tolist()), m.tolist()))
    if "vertex_counts" in fq.families:
        want = nonzero(d3.sum((1, 2)))
        its = rf.vertex_iterators(fq)
        x = parts["V1^(LH)*(HL)"]
        buckets = {(b, c): set(np.flatnonzero(x[:, b, c]).tolist())
                   for b in range(n) for c in range(n) if x[:, b, c].any()}
        check_hop_union(its[6], buckets, range(n))
        holders = [t for bs in buckets.values() for t in bs]
        coverage["V1^(LH)*(HL) overlaps"] += len(holders) - len(set(holders))
        out, excluded = drain(rf.vertex_iterators(fq))
        assert len(out) == len(set(out)) and set(out) == set(want)
        for name, (inner, outer) in excluded.items():
            coverage[name + " excluded"] += inner
            coverage[name + " buckets excluded"] += outer
        got = once(rf.enumerate_vertices(fq))
        assert got == want
        a, m = rs.vertex_counts(fq)
        assert got == dict(zip(a.tolist(), m.tolist()))


TREES = ("V2^H(LH)*", "V2^L*(HL)", "V1^(LH)*(HL)")


@pytest.mark.parametrize("eps", EPSILONS)
def test_reference_enumerations_match_oracle(eps):
    """Every 3 batches of skewed random streams (delta path only, minor rebalancing on): the
    reference Δ3, Δ2, Δ1 equal the einsum oracle and the bulk results, each tuple once."""
    n = N_DOM
    coverage = {f"{t} {what}": 0 for t in TREES
                for what in ("overlaps", "excluded", "buckets excluded")}
    moves = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        plant = planted(seed % 3)
        universe = []
        for k in range(3):
            noise = {(int(x), int(y)) for x, y in rng.integers(0, n, (8, 2))}
            universe.append(sorted(plant[k] | noise))
        rels = [{t: 1 for t in plant[k]} for k in range(3)]
        fq = FreeQueries(set(ALL), [Fraction(eps)] * 3)
        fq.bulk_fraction = 0
        fq.build([arrays(d) for d in rels], n)
        check_reference(fq, rels, n, coverage)
        for step in range(15):
            fq.apply(toggle_batch(rng, rels, universe, 8, 0.5 if seed < 3 else 0.7), n)
            if step % 3 == 2:
                assert fq.check_invariants() == []
                check_reference(fq, rels, n, coverage)
        moves += fq.stats["moves"]
    if eps in ("1/3", "1/2"):  # the hop unions really merged overlapping buckets
        assert all(v > 0 for v in coverage.values()), coverage
    if eps == "1/2":
        assert moves > 0  # minor rebalancing ran between the checks


@pytest.mark.parametrize("family", ALL)
def test_single_family_state(family):
    """A FreeQueries that keeps one family only; asking for another one is an error."""
    n = N_DOM
    rng = np.random.default_rng(4)
    plant = planted(2 if family == "vertex_counts" else 0)
    rels = [{t: 1 for t in plant[k]} for k in range(3)]
    fq = FreeQueries({family}, [Fraction(1, 2)] * 3)
    fq.bulk_fraction = 0
    fq.build([arrays(d) for d in rels], n)
    coverage = {f"{t} {w}": 0 for t in TREES for w in ("overlaps", "excluded",
                                                        "buckets excluded")}
    for _ in range(4):
        fq.apply(toggle_batch(rng, rels, [sorted(p) for p in plant], 6, 0.5), n)
        check_reference(fq, rels, n, coverage)
    others = {"triangles": rf.enumerate_triangles, "edge_counts": rf.enumerate_edges,
              "vertex_counts": rf.enumerate_vertices}
    for name, fn in others.items():
        if name != family:
            with pytest.raises(ValueError, match=f"does not maintain {name}"):
                list(fn(fq))


def test_edge_hop_union_excludes_a_whole_bucket():
    """Planted H(LH)* at ε = 1/2: buckets c = 1 and c = 2 both hold {(0, b) : b = 3..11}.
    Bucket 1 is walked; every pair is excluded from bucket 2, which is then excluded from
    Ibuckets and never opened (Figure 5 lines 7-10)."""
    n = N_DOM
    rels = [{t: 1 for t in p} for p in planted(0)]
    fq = FreeQueries({"edge_counts"}, [Fraction(1, 2)] * 3)
    fq.build([arrays(d) for d in rels], n)
    assert fq.rels[0].heavy[0].tolist() == [0] and fq.rels[1].heavy[1].tolist() == [1, 2]
    its = rf.edge_iterators(fq)
    hu = its[5]
    assert list(hu.sources) == [1, 2]
    assert hu.candidates((0, 3)) == [1, 2] and hu.candidates((3, 0)) == []
    out = list(union_iter(its))
    assert sorted(out) == [(0, b) for b in range(3, n)]
    assert hu.union.opened == [1]
    assert hu.union.ibuckets.skip_to == {2: rf.EOF}
    assert hu.union.buckets[2].is_empty()
    assert once(rf.enumerate_edges(fq)) == {(0, b): 2 for b in range(3, n)}


def test_vertex_hop_union_excludes_later_buckets():
    """Planted (LH)*(HL) at ε = 1/2: four buckets (b, c) ∈ {0, 1} × {2, 3}, each {3..11}; the
    first one is walked and the three others are emptied and skipped."""
    n = N_DOM
    rels = [{t: 1 for t in p} for p in planted(2)]
    fq = FreeQueries({"vertex_counts"}, [Fraction(1, 2)] * 3)
    fq.build([arrays(d) for d in rels], n)
    its = rf.vertex_iterators(fq)
    hu = its[6]
    assert list(hu.sources) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert hu.candidates(5) == list(hu.sources) and hu.candidates(0) == []
    assert list(union_iter(its)) == list(range(3, n))
    assert hu.union.opened == [(0, 2)]
    assert hu.union.ibuckets.skip_to == {(0, 3): rf.EOF}
    got = once(rf.enumerate_vertices(fq))
    assert got == {a: 4 for a in range(3, n)} == nonzero(oracle(rels, n).sum((1, 2)))


def test_digest_worked_example():
    """Digest §14.3 at ε = 1/5 (N = 19): the triangles, edge and vertex counts, before and
    after the two updates."""
    ids = {v: i for i, v in enumerate([1, 2, 10, 11, 100, 101])}
    name = {i: v for v, i in ids.items()}

    def rel(rows):
        return (np.array([ids[a] for a, _, _ in rows]), np.array([ids[b] for _, b, _ in rows]),
                np.array([m for _, _, m in rows], np.int64))

    fq = FreeQueries(set(ALL), [Fraction(1, 5)] * 3)
    fq.bulk_fraction = 0
    fq.build([rel([(1, 10, 2), (1, 11, 1), (2, 10, 1)]),
              rel([(10, 100, 1), (10, 101, 3), (11, 100, 2)]),
              rel([(100, 1, 1), (101, 1, 2), (100, 2, 5)])], 6)
    assert fq.N == 19

    def results():
        tri = {tuple(name[x] for x in t): m for t, m in once(rf.enumerate_triangles(fq)).items()}
        edges = {(name[a], name[b]): m for (a, b), m in once(rf.enumerate_edges(fq)).items()}
        verts = {name[a]: m for a, m in once(rf.enumerate_vertices(fq)).items()}
        return tri, edges, verts

    tri, edges, verts = results()
    assert tri == {(1, 10, 100): 2, (1, 10, 101): 12, (1, 11, 100): 2, (2, 10, 100): 5}
    assert edges == {(1, 10): 14, (1, 11): 2, (2, 10): 5}
    assert verts == {1: 16, 2: 5}

    def update(k, a, b, m):
        fq.apply([(k, pack(np.array([ids[a]]), np.array([ids[b]])), np.array([m]))], 6)

    update(0, 2, 11, 1)
    update(1, 10, 101, -3)
    tri, edges, verts = results()
    assert edges == {(1, 10): 2, (1, 11): 2, (2, 10): 5, (2, 11): 10}
    assert verts == {1: 4, 2: 15}
    assert sum(tri.values()) == fq.count == 19


def test_empty_state():
    fq = FreeQueries(set(ALL), [Fraction(1, 2)] * 3)
    fq.build([arrays({})] * 3, 4)
    assert list(rf.enumerate_triangles(fq)) == []
    assert list(rf.enumerate_edges(fq)) == []
    assert list(rf.enumerate_vertices(fq)) == []
