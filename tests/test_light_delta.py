"""The one-call count delta of small batches on graphs without a heavy part
(kernels/light_delta.py): its value equals scipy's matrix products and the two kernels it
replaces (the path weights and the batch wedges), and engines that take it or never take it
count as scipy does after every batch, on stars, a clique and R-MAT."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels import delta_kernels as dk
from gpu_ivm.kernels import light_delta as ld
from streams import graph_batches
from test_adjacency import _engine_with_runs, _fresh_engine, graph_matrix
from test_row_index import _scipy_triangles, _skewed_graph
from test_row_marks import _symmetric_delta, half_wedge_terms

from gpu_ivm import GraphEngine

# the stores' machinery on small graphs: no compact form (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_compact")

LO = (1 << 32) - 1


def _scipy_delta(A, dkeys, dvals, cap: int) -> int:
    """6·Σ_{x<y} Δ(x,y)·(A²)(x,y) + Σ_{(a,b)} Δ(a,b)·(Δ·(3A + Δ))(b, a), by scipy."""
    a, b = dkeys >> 32, dkeys & LO
    A2 = (A @ A).tocsr()
    half = a < b
    first = int((dvals[half] * np.asarray(A2[a[half], b[half]]).ravel()).sum())
    D = sp.coo_matrix((dvals, (a, b)), shape=(cap, cap)).tocsr()
    M = (D @ (3 * A + D)).tocsr()
    return 6 * first + int((dvals * np.asarray(M[b, a]).ravel()).sum())


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
def test_light_delta_equals_scipy_and_the_two_kernels(kind, monkeypatch):
    g = _engine_with_runs(kind, 3)
    E = g.rels[0]
    assert E.h.size == 0 and E.l.nruns >= 2 and E.l.tombstones() > 0
    cap = E.id_capacity
    A = graph_matrix(E)
    rng = np.random.default_rng(len(kind) + 11)
    for n_pairs in (1, 7, 60, 250):
        dkeys, dvals = _symmetric_delta(rng, g, n_pairs)
        got = ld.light_delta(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, cap)
        assert got == _scipy_delta(A, dkeys, dvals, cap)
        monkeypatch.setattr(ld, "LIGHT_DELTA_MAX", 0)  # the engine's two kernels
        assert not g._light_small(dkeys.shape[0])
        assert got == g._q_delta(dkeys, dvals)
        monkeypatch.setattr(ld, "LIGHT_DELTA_MAX", 512)
        if dkeys.shape[0] <= 512:
            assert g._light_small(dkeys.shape[0])
    assert ld.light_delta(np.zeros(0, np.int64), np.zeros(0, np.int64), E.h.nt(), E.l.nt(),
                          E.heavy, cap) == 0
    for scratch in dk._MARKS.values():  # the kernel leaves its scratch zeroed
        assert not scratch.any()


def test_light_delta_is_not_taken_with_a_heavy_part_or_directed():
    src, dst = _skewed_graph("star", np.random.default_rng(0))
    half = GraphEngine(epsilon="1/2", adaptive=False)
    half.load((src, dst))
    assert half.rels[0].h.size and not half._light_small(10)
    directed = GraphEngine(epsilon="1", adaptive=False, directed=True)
    directed.load((src, dst))
    assert not directed._light_small(10)


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("eps", ["1", "auto"])
def test_engines_with_and_without_the_light_delta_count_alike(kind, eps, monkeypatch):
    """Small batches (up to 80 rows) through the one-call delta and through the two kernels:
    both equal scipy's count of the oracle's edge set after every batch."""
    counts = {}
    for limit in (512, 0):
        monkeypatch.setattr(ld, "LIGHT_DELTA_MAX", limit)
        g, o, rng, nv = _fresh_engine(kind, len(kind) + 17, eps)
        seen = []
        for batch in graph_batches(o, rng, n_batches=12, nv=nv, max_batch=80, hub_p=0.4,
                                   shrink_from=6):
            g.apply(batch)
            assert g.count() == _scipy_triangles(o.edges)
            seen.append(g.count())
        g.check_invariants()
        counts[limit] = seen
    assert counts[512] == counts[0]


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
def test_filtered_wedges_equal_scipy_and_the_searches(kind, monkeypatch):
    """The symmetric wedge kernel by Δ's rows (Δ's row a marked once, a tuple whose Δ row b
    is {a} alone skipped by a bit of ``multi_rows``) gives every tuple the same term as the
    tuple-by-tuple binary searches, equal to scipy's 2·Δ(a,b)·(Δ·tril(3A + Δ))(b, a), with the
    rows searched or in a dense directory; the terms sum to Σ Δ(a,b)·(Δ·(3A + Δ))(b, a)."""
    g = _engine_with_runs(kind, 4)
    E = g.rels[0]
    cap = E.id_capacity
    A = graph_matrix(E)
    rng = np.random.default_rng(len(kind) + 23)
    for n_pairs in (1, 30, 400, 1500):
        dkeys, dvals = _symmetric_delta(rng, g, n_pairs)
        if dkeys.shape[0] == 0:
            continue
        a, b = dkeys >> 32, dkeys & LO
        D = sp.coo_matrix((dvals, (a, b)), shape=(cap, cap)).tocsr()
        total = int((dvals * np.asarray((D @ (3 * A + D)).tocsr()[b, a]).ravel()).sum())
        want = half_wedge_terms(dkeys, dvals, A)
        for flag, density in ((True, 0), (True, 10**9), (False, 0)):
            monkeypatch.setattr(dk, "WEDGE_BY_ROWS", flag)
            monkeypatch.setattr(dk, "WEDGE_GROUP_DENSITY", density)
            out = np.full(dkeys.shape[0], -7, np.int64)
            dk.batch_wedges(dkeys, dvals, E.h.nt(), E.l.nt(), E.heavy, True, out)
            assert np.array_equal(out, want), (flag, density)
        assert int(want.sum()) == total


def test_multi_rows_bits():
    keys = np.array([(1 << 32) | 2, (1 << 32) | 5, (3 << 32) | 1, (64 << 32) | 1,
                     (64 << 32) | 3, (64 << 32) | 9], np.int64)
    words = dk.multi_rows(keys)
    assert [x for x in range(130) if dk.has_multi(words, x)] == [1, 64]
    assert not dk.has_multi(dk.multi_rows(keys[:0]), 0)


def test_policy_takes_small_light_batches_without_its_estimate():
    """An adaptive engine without a heavy part takes a small batch (one compiled call for its
    count delta) by deltas without the work estimate; a larger batch, or one on a graph with
    a heavy part, is estimated. The counts stay scipy's either way."""
    from gpu_ivm.recompute import SKIPPED

    for eps, skipped in (("1", True), ("1/2", False)):
        g, o, rng, nv = _fresh_engine("star", 31, eps)
        g.policy.enabled = True
        g._calibrate_recompute()
        assert g.policy.recompute_sec_per_tuple is not None
        seen = []
        orig = g.policy.choose

        def spy(engine, phases, orig=orig, seen=seen):
            path = orig(engine, phases)
            seen.append((sum(p[1].shape[0] for p in phases), engine.policy.last_units, path))
            return path

        g.policy.choose = spy
        for batch in graph_batches(o, rng, n_batches=6, nv=nv, max_batch=40, hub_p=0.4,
                                   shrink_from=4):
            g.apply(batch)
            assert g.count() == _scipy_triangles(o.edges)
        assert seen
        for tuples, units, path in seen:
            small = g.rels[0].h.size == 0 and tuples <= ld.LIGHT_DELTA_MAX
            assert (units == SKIPPED and path == "delta") == (skipped and small), (eps, tuples)
