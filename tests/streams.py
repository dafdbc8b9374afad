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


def insert_only_relation_batches(rng: np.random.Generator, mode: str, count: int = 5):
    """``count`` relation batches (columns rel, src, dst, mult) over 12 keys with a hub key 0,
    all inserts; with ``mode == "auto"`` the fourth (index 3) starts with the delete of a tuple
    the same batch adds (the insert-only engines' switch to the general form)."""
    for i in range(count):
        n = int(rng.integers(8, 20))
        a = rng.integers(0, 12, n)
        a[rng.random(n) < 0.4] = 0  # a hub key
        b = rng.integers(0, 12, n)
        m = rng.integers(1, 3, n)
        if mode == "auto" and i == 3:
            m[0], m[1] = -1, 2  # a delete of a tuple added in the same batch
            a[0], b[0] = a[1], b[1]
        batch = {"rel": rng.choice(list("RST"), n).tolist(), "src": a.tolist(),
                 "dst": b.tolist(), "mult": m.tolist()}
        batch["rel"][0] = batch["rel"][1]
        yield batch
