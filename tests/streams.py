"""Random update streams for property tests (deterministic given a seed)."""

from __future__ import annotations

import numpy as np
from oracle import GraphOracle


def graph_batches(oracle: GraphOracle, rng: np.random.Generator, *, n_batches: int, nv: int,
                  max_batch: int, hub_p: float, n_hubs: int = 2, shrink_from: int | None = None):
    """Yield valid set-semantics batches (dicts), updating ``oracle`` as they are produced.

    A fraction ``hub_p`` of the rows touch one of ``n_hubs`` hub vertices (skewed degrees force
    minor rebalancing); from batch ``shrink_from`` on, rows are mostly deletes, preferably of hub
    edges (forcing heavy → light moves and halving of N). Each edge appears at most once per
    batch.
    """
    for i in range(n_batches):
        size = int(rng.integers(1, max_batch + 1))
        rows = {}
        shrinking = shrink_from is not None and i >= shrink_from
        present = sorted(oracle.edges)
        hub_edges = [e for e in present if e[0] < n_hubs or e[1] < n_hubs]
        for _ in range(size):
            if shrinking and hub_edges and rng.random() < 0.6:
                u, v = hub_edges[int(rng.integers(len(hub_edges)))]
            elif shrinking and present and rng.random() < 0.85:
                u, v = present[int(rng.integers(len(present)))]
            else:
                u = int(rng.integers(n_hubs)) if rng.random() < hub_p else int(rng.integers(nv))
                v = int(rng.integers(nv))
            if u == v:
                continue
            e = oracle.norm(u, v)
            if e in rows:
                continue
            rows[e] = (u, v, -1 if oracle.present(u, v) else 1)
        for u, v, s in rows.values():
            oracle.apply(u, v, s)
        vals = list(rows.values())
        yield {
            "src": np.array([r[0] for r in vals], np.int64),
            "dst": np.array([r[1] for r in vals], np.int64),
            "sign": np.array([r[2] for r in vals], np.int64),
        }
