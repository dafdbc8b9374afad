"""The static SNAP graphs: published triangle counts through load() and through a replay that
inserts the graph in batches and then deletes half of it (checked against a recount)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_ivm import GraphEngine, count_triangles
from gpu_ivm.io import read_edges
from gpu_ivm.static import count_triangles_arrays, simple_graph

PUBLISHED = {
    "facebook_combined.txt.gz": 1_612_010,
    "ca-GrQc.txt.gz": 48_260,
    "ca-AstroPh.txt.gz": 1_351_441,
    "email-Eu-core.txt.gz": 105_461,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_count_triangles_published(data_dir, name):
    assert count_triangles(data_dir / name) == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_load_published(data_dir, name):
    g = GraphEngine()
    g.load(data_dir / name)
    assert g.count() == PUBLISHED[name]
    assert g.recount() == PUBLISHED[name]  # the IVM^ε kernels over the loaded state


@pytest.mark.parametrize("name,eps", [(n, "1/2") for n in sorted(PUBLISHED)]
                         + [("ca-GrQc.txt.gz", "1"), ("email-Eu-core.txt.gz", "1/3")])
def test_replay_insert_then_delete_half(data_dir, name, eps):
    el = read_edges(data_dir / name)
    s, d, _ = simple_graph(el.src, el.dst)
    rng = np.random.default_rng(0)
    order = rng.permutation(s.shape[0])
    s, d = s[order], d[order]
    g = GraphEngine(epsilon=eps, adaptive=False)
    for chunk in np.array_split(np.arange(s.shape[0]), 8):
        g.apply({"src": s[chunk], "dst": d[chunk], "sign": np.ones(chunk.shape[0], np.int64)})
    assert g.count() == PUBLISHED[name]
    half = s.shape[0] // 2
    for chunk in np.array_split(np.arange(half), 4):
        g.apply({"src": s[chunk], "dst": d[chunk], "sign": -np.ones(chunk.shape[0], np.int64)})
    assert g.count() == count_triangles_arrays(s[half:], d[half:])
    assert g.num_edges == s.shape[0] - half
    if s.shape[0] < 50_000:
        g.check_invariants()
