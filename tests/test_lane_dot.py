"""The lane-split inner product the CUDA count kernel gives a long update's block
(``delta_kernels.dot_rows_lane``, ``sym_case``, ``lane_weight``): on the CPU, the lanes'
shares add up to the walk's inner product and the case split to the per-update path weight,
on stores spread over several runs with tombstones and compaction padding."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import delta_kernels as dk
from gpu_ivm.kernels.lsm import dot_rows
from gpu_ivm.kernels.view_kernels import vget

from gpu_ivm import GraphEngine


def _engine(seed: int, eps: str) -> GraphEngine:
    """A graph with three hubs (heavy at ε = 1/2) after a few batches of inserts and deletes
    (several runs)."""
    rng = np.random.default_rng(seed)
    a = np.where(rng.random(600) < 0.6, rng.integers(0, 3, 600), rng.integers(0, 80, 600))
    b = rng.integers(0, 80, 600)
    g = GraphEngine(epsilon=eps, adaptive=False, on_conflict="ignore")
    g.load((a, b))
    for k in (60, 12, 3):  # shrinking batches: runs the merges leave apart
        u = rng.integers(0, 80, (k, 2))
        g.apply({"src": u[:, 0], "dst": u[:, 1], "sign": rng.choice([-1, 1], k)})
    return g


@pytest.mark.parametrize("lanes", [1, 2, 7, 32])
def test_lane_shares_add_up_to_the_inner_product(lanes):
    g = _engine(1, "1")
    st = g.rels[0].l.nt()
    assert g.rels[0].l.nruns >= 2
    rng = np.random.default_rng(2)
    for x1, x2 in rng.integers(0, 80, (200, 2)).tolist():
        parts = [dk.dot_rows_lane(st, x1, st, x2, lane, lanes) for lane in range(lanes)]
        assert sum(p[0] for p in parts) == dot_rows(st, x1, st, x2)


@pytest.mark.parametrize("eps", ["1/2", "0", "1"])
def test_case_split_gives_the_path_weight(eps):
    g = _engine(3, eps)
    E = g.rels[0]
    view = g.views[0]
    nh, nl, pht = E.h.nt(), E.l.nt(), E.ht.nt()
    rng = np.random.default_rng(4)
    xs = np.r_[rng.integers(0, 3, 100), rng.integers(0, 80, 100)]
    ys = rng.integers(0, 80, 200)
    want = np.empty(200, np.int64)
    dk.path_weights(xs, ys, nh, nl, nh, nl, pht, view.sparse.nt(), view.vrow, view.vmat,
                    E.heavy, E.heavy, True, want)
    cases = set()
    for i in range(200):
        x, y, case, cost = dk.sym_case(xs[i], ys[i], nh, nl, nh, nl, pht, E.heavy, E.heavy)
        cases.add(case)
        w = sum(dk.lane_weight(case, x, y, nh, nl, nh, nl, pht, lane, 3)[0] for lane in range(3))
        if case == 0:
            w += vget(view.sparse.nt(), view.vrow, view.vmat, (y << 32) | x)
        assert w == want[i], (i, case)
        assert cost >= 0
    assert cases == ({0, 2} if eps == "1/2" else {0} if eps == "0" else {2}) or \
        (eps == "1/2" and cases == {0, 1, 2})
    # case 1 (x heavy, y light after the orientation) is rare in a symmetric count: each
    # case's inner product against the walk's, whatever the rows
    for case, (a1, a2) in enumerate(((nh, pht), (nl, nh), (nl, nl))):
        for x, y in rng.integers(0, 80, (50, 2)).tolist():
            w = sum(dk.lane_weight(case, x, y, nh, nl, nh, nl, pht, lane, 4)[0]
                    for lane in range(4))
            assert w == dot_rows(a1, y, a2, x), (case, x, y)
