"""Chunks of equal estimated cost (kernels/work_split.py) and the kernels that run on them."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest
import scipy.sparse as sp
from gpu_ivm.kernels import delta_kernels as dk
from gpu_ivm.kernels.work_split import equal_cost_cuts

from gpu_ivm import GraphEngine

LO = 0xFFFFFFFF


@pytest.mark.parametrize("seed", range(6))
def test_equal_cost_cuts_bound_every_chunk(seed):
    """Cuts are monotone, cover every item once, and no chunk costs more than the average
    plus its largest item (checked against sums computed here with Python ints)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    cost = rng.integers(0, 50, n) * (rng.random(n) < 0.9)
    if n and seed % 2:
        cost[rng.integers(0, n)] = 10_000  # one hub
    parts = int(rng.integers(1, 40))
    cuts = equal_cost_cuts(cost.astype(np.int64), parts).tolist()
    assert len(cuts) == parts + 1 and cuts[0] == 0 and cuts[-1] == n
    assert all(a <= b for a, b in zip(cuts, cuts[1:]))
    total = sum(cost.tolist())
    for k in range(parts):
        chunk = cost[cuts[k]:cuts[k + 1]].tolist()
        assert sum(chunk) <= total / parts + max(chunk, default=0)
    # the running cost at cut k is the largest prefix not above k/parts of the total
    prefix = np.r_[0, np.cumsum(cost)]
    for k in range(1, parts):
        target = total * k // parts
        assert prefix[cuts[k]] <= target
        assert cuts[k] == n or prefix[cuts[k] + 1] > target


def _skewed(rng, n=300):
    """Two hubs joined to most vertices, a clique, and random edges: hub pairs dominate."""
    hubs = np.array([0, 1])
    src = [np.repeat(hubs, n - 2), rng.integers(2, n, 3 * n)]
    dst = [np.tile(np.arange(2, n), 2), rng.integers(2, n, 3 * n)]
    c = np.arange(2, 14)
    iu, ju = np.triu_indices(c.shape[0], 1)
    src.append(c[iu])
    dst.append(c[ju])
    return np.concatenate(src), np.concatenate(dst)


@pytest.mark.parametrize("gap", [0, 1, 4])
@pytest.mark.parametrize("chunks", [1, 3, 64])
def test_grouped_weights_on_any_cut(chunks, gap, monkeypatch):
    """Pair weights cut into 1, 3 or 64 chunks per thread (so a hub's pairs are split between
    chunks, each marking the hub's row) equal scipy's E², on one thread and on two; with the
    rows' prefetch off (gap 0) and its cursors at gaps 1 and 4 (kernels/row_prefetch.py)."""
    rng = np.random.default_rng(chunks)
    src, dst = _skewed(rng)
    g = GraphEngine(epsilon="1", adaptive=False)
    g.load((src, dst))
    E = g.rels[0]
    cap = E.id_capacity
    keys, vals = E.items()
    adj = sp.coo_matrix((vals, (keys >> 32, keys & LO)), shape=(cap, cap)).tocsr()
    sq = (adj @ adj).toarray()
    # every pair of distinct vertices below 60, both orientations: >= PAR_MIN pairs
    x, y = np.triu_indices(60, 1)
    dkeys = np.sort(np.r_[(x << 32) | y, (y << 32) | x]).astype(np.int64)
    monkeypatch.setattr(dk, "CHUNKS_PER_THREAD", chunks)
    monkeypatch.setattr(dk, "PAIR_PREFETCH", gap)
    threads = nb.get_num_threads()
    try:
        for t in sorted({1, min(2, nb.config.NUMBA_NUM_THREADS)}):
            nb.set_num_threads(t)
            sel, w, work = dk.pair_weights_grouped(dkeys, E.l.nt(), cap)
            a, b = dkeys[sel] >> 32, dkeys[sel] & LO
            assert sel.shape[0] == x.shape[0]
            assert np.array_equal(w, sq[a, b])
            assert (work >= 0).all()
    finally:
        nb.set_num_threads(threads)
    for scratch in dk._MARKS.values():
        assert not scratch.any()
