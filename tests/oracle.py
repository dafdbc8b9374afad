"""Slow, obviously correct references (Python dicts) used as test oracles."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


class RelationsOracle:
    """Z-relations R, S, T as dicts; Q = Σ R(a,b)·S(b,c)·T(c,a) by brute force."""

    def __init__(self):
        self.rels = {"R": {}, "S": {}, "T": {}}

    def add(self, rel: str, a, b, m: int) -> None:
        d = self.rels[rel]
        v = d.get((a, b), 0) + m
        if v:
            d[(a, b)] = v
        else:
            d.pop((a, b), None)

    def count(self) -> int:
        R, S, T = self.rels["R"], self.rels["S"], self.rels["T"]
        s_by_b = defaultdict(list)
        for (b, c), v in S.items():
            s_by_b[b].append((c, v))
        total = 0
        for (a, b), r in R.items():
            for c, s in s_by_b.get(b, ()):
                t = T.get((c, a), 0)
                if t:
                    total += r * s * t
        return total


class GraphOracle:
    """A simple graph as a set of edges; triangles (or directed 3-cycles) by brute force."""

    def __init__(self, directed: bool = False):
        self.directed = directed
        self.edges: set = set()

    def norm(self, u, v):
        return (u, v) if self.directed or u <= v else (v, u)

    def present(self, u, v) -> bool:
        return self.norm(u, v) in self.edges

    def apply(self, u, v, sign: int) -> None:
        e = self.norm(u, v)
        if sign > 0:
            self.edges.add(e)
        else:
            self.edges.discard(e)

    def count(self) -> int:
        out = defaultdict(set)
        for u, v in self.edges:
            out[u].add(v)
            if not self.directed:
                out[v].add(u)
        c = 0
        for u in out:
            for v in out[u]:
                for w in out.get(v, ()):
                    if w != u and u in out.get(w, ()):
                        c += 1
        return c // (3 if self.directed else 6)


def relation_matrix(rel: dict, n: int) -> np.ndarray:
    """Dense n×n int64 matrix of a relation given as {(a, b): multiplicity}."""
    m = np.zeros((n, n), np.int64)
    for (a, b), v in rel.items():
        m[a, b] = v
    return m


def relation_arrays(rel: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first ids, second ids, multiplicities) of {(a, b): multiplicity}, sorted by key."""
    ks = sorted(rel)
    return (np.array([k[0] for k in ks], np.int64), np.array([k[1] for k in ks], np.int64),
            np.array([rel[k] for k in ks], np.int64))
