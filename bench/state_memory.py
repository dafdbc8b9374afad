"""Bytes of engine state per stored edge: ``python -m bench.state_memory [--scales 14 16]``.

``--factorized SCALE``: instead, load R = S = T = both directions of ``rmat_edges(SCALE, 16,
seed=1)`` into ``RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})`` (the README's per-relation
ε) and print the view entries and the peak resident-memory growth of the load, or the
``ResourceLimitError`` it raises (set ``GPU_IVM_MEMORY_LIMIT`` to try a smaller machine).

Loads the base graph of ``workloads.mixed_stream(scale, seed=1)`` (R-MAT, Graph500
parameters, edge factor 16) into a ``GraphEngine(epsilon="1/2")`` with and without the
free-query results (``maintain=[...]``), then sums the bytes of every array the engine holds
(stores, views, partitions, id encoder, free-query state; each underlying buffer once, array
capacity included, Python object overhead not). Deterministic: no timing, the numbers do not
depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from gpu_ivm import GraphEngine, RelationEngine, ResourceLimitError
from gpu_ivm.workloads import mixed_stream, rmat_edges

CONFIGS = {
    "count": None,
    "vertex_counts": ["vertex_counts"],
    "edge_counts": ["edge_counts"],
    "vertex and edge counts": ["vertex_counts", "edge_counts"],
    "all three": ["vertex_counts", "edge_counts", "triangles"],
}


def state_bytes(obj) -> int:
    """Σ nbytes of the arrays reachable from ``obj`` through attributes, lists, tuples and
    dicts of gpu_ivm objects (each root buffer once)."""
    seen_obj: set[int] = set()
    seen_buf: set[int] = set()
    total = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen_obj:
            continue
        seen_obj.add(id(o))
        if isinstance(o, np.ndarray):
            root = o
            while isinstance(root.base, np.ndarray):
                root = root.base
            if id(root) not in seen_buf:
                seen_buf.add(id(root))
                total += root.nbytes
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set)):
            stack.extend(o)
        elif type(o).__module__.startswith("gpu_ivm") and hasattr(o, "__dict__"):
            if "policy" in type(o).__name__.lower():
                continue
            stack.extend(vars(o).values())
    return total


def measure(scale: int) -> list[dict]:
    st = mixed_stream(scale, batch_size=1, n_batches=1, seed=1)
    out = []
    for label, maintain in CONFIGS.items():
        g = GraphEngine(epsilon="1/2", maintain=maintain)
        g.load({"src": st.base_src, "dst": st.base_dst})
        b = state_bytes(g)
        out.append({"scale": scale, "edges": g.num_edges, "maintain": label, "bytes": b,
                    "bytes_per_edge": round(b / g.num_edges, 1)})
        del g
    return out


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def factorized(scale: int) -> dict:
    """The README's per-relation ε on R = S = T = an undirected R-MAT edge set."""
    s, d = rmat_edges(scale, 16, seed=1)
    keep = s != d
    s, d = s[keep], d[keep]
    rel = {"src": np.r_[s, d], "dst": np.r_[d, s]}
    warm = RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})  # compile outside the measurement
    tiny = {"src": [1, 2], "dst": [2, 3]}
    warm.load(R=tiny, S=tiny, T=tiny)
    with open("/proc/self/clear_refs", "w") as f:  # reset the resident high-water mark
        f.write("5")
    rss0 = _status("VmRSS:")
    e = RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})
    row = {"scale": scale, "tuples_per_relation": int(rel["src"].shape[0])}
    try:
        e.load(R=rel, S=rel, T=rel)
    except ResourceLimitError as err:
        row["refused"] = str(err)
        return row
    row["view_entries"] = [len(v) for v in e.views]
    row["peak_rss_growth_gib"] = round((_status("VmHWM:") - rss0) / 2**30, 2)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[14, 16])
    ap.add_argument("--factorized", type=int, metavar="SCALE")
    args = ap.parse_args(argv)
    if args.factorized is not None:
        print(json.dumps(factorized(args.factorized)))
        return
    for scale in args.scales:
        for row in measure(scale):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
