"""The triangle CQAPs through the general query engine (gpu_ivm.cq) against the triangle
engines: the count, per-vertex and per-edge counts of GraphEngine on an undirected graph
stream (the edge relation given in both orientations), and RelationEngine's three-relation
count under bag multiplicities."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm.cq import Engine

TRI = "E(A,B), E(B,C), E(C,A)"


def both_ways(src, dst, mult):
    return {"a": np.concatenate([src, dst]), "b": np.concatenate([dst, src]),
            "mult": np.concatenate([mult, mult])}


def table_dict(batches) -> dict:
    t = pa.Table.from_batches(list(batches))
    return t.to_pydict()


@pytest.mark.parametrize("seed", range(3))
def test_graph_triangle_queries(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 25
    edges: set[tuple[int, int]] = set()
    while len(edges) < 90:
        a, b = sorted(rng.integers(0, n, 2).tolist())
        if a != b:
            edges.add((a, b))
    graph = GraphEngine(maintain=["vertex_counts", "edge_counts"], adaptive=False)
    src = np.array([e[0] for e in edges])
    dst = np.array([e[1] for e in edges])
    graph.load({"src": src, "dst": dst})
    q_count = Engine(f"Q( | ) = {TRI}")
    q_vertex = Engine(f"Q(A | ) = {TRI}")
    q_edge = Engine(f"Q(A,B | ) = {TRI}")
    q_access = Engine(f"Q(C | A,B) = {TRI}")
    for e in (q_count, q_vertex, q_edge, q_access):
        e.load(E=both_ways(src, dst, np.ones(len(src), np.int64)))
    for _ in range(8):
        present = sorted(edges)
        gone = [present[i] for i in rng.choice(len(present), 6, replace=False)]
        new: set[tuple[int, int]] = set()
        while len(new) < 6:
            a, b = sorted(rng.integers(0, n, 2).tolist())
            if a != b and (a, b) not in edges:
                new.add((a, b))
        rows = gone + sorted(new)
        sign = np.array([-1] * len(gone) + [1] * len(new))
        s = np.array([r[0] for r in rows])
        d = np.array([r[1] for r in rows])
        graph.apply({"src": s, "dst": d, "sign": sign})
        for e in (q_count, q_vertex, q_edge, q_access):
            e.apply({"E": both_ways(s, d, sign)})
        edges = (edges - set(gone)) | new
        # ordered triangles: 6 per triangle, 2 per vertex's triangle, 1 per oriented edge's
        assert q_count.count() == 6 * graph.count()
        vc = table_dict(graph.vertex_counts())
        want_v = {(v,): 2 * t for v, t in zip(vc["vertex"], vc["triangles"])}
        got_v = q_vertex.request().to_pydict()
        assert dict(zip(((a,) for a in got_v["A"]), got_v["mult"])) == want_v
        ec = table_dict(graph.edge_counts())
        want_e = {}
        for a, b, t in zip(ec["src"], ec["dst"], ec["triangles"]):
            want_e[(a, b)] = want_e[(b, a)] = t
        got_e = q_edge.request().to_pydict()
        assert dict(zip(zip(got_e["A"], got_e["B"]), got_e["mult"])) == want_e
        # per-edge counts as access requests, one request per edge
        pairs = sorted(want_e)[:20] + [(0, n + 5)]
        counts = q_access.count({"A": [p[0] for p in pairs], "B": [p[1] for p in pairs]})
        assert counts.column("count").to_pylist() == [want_e.get(p, 0) for p in pairs]


def test_three_relation_count_under_bags() -> None:
    rng = np.random.default_rng(7)
    rel = RelationEngine(adaptive=False)
    cq = Engine("Q( | ) = R(A,B), S(B,C), T(C,A)")
    held = {r: {} for r in "RST"}

    def batch(k: int, deletes: bool) -> dict:
        names, src, dst, mult = [], [], [], []
        for _ in range(k):
            r = str(rng.choice(list("RST")))
            if deletes and held[r] and rng.random() < 0.4:
                t = list(held[r])[int(rng.integers(len(held[r])))]
                m = -int(rng.integers(1, held[r][t] + 1))
            else:
                t = tuple(int(x) for x in rng.integers(0, 8, 2))
                m = int(rng.integers(1, 4))
            held[r][t] = held[r].get(t, 0) + m
            if held[r][t] == 0:
                del held[r][t]
            names.append(r)
            src.append(t[0])
            dst.append(t[1])
            mult.append(m)
        return {"rel": names, "src": src, "dst": dst, "mult": mult}

    def split(b: dict, x: str, y: str) -> dict:
        """The rows of relation r as {x: ..., y: ..., "mult": ...}, per relation present."""
        return {r: {x: [s for n, s in zip(b["rel"], b["src"]) if n == r],
                    y: [d for n, d in zip(b["rel"], b["dst"]) if n == r],
                    "mult": [m for n, m in zip(b["rel"], b["mult"]) if n == r]}
                for r in "RST" if r in b["rel"]}

    first = batch(120, False)
    rel.load(**split(first, "src", "dst"))
    cq.load(**split(first, "a", "b"))
    assert cq.count() == rel.count() > 0
    for _ in range(10):
        b = batch(15, True)
        rel.apply(b)
        cq.apply(split(b, "a", "b"))
        assert cq.count() == rel.count()
