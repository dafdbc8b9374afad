"""The public surface: repr and len of the engines (against networkx and brute-force tuple
counts), type hints on every public parameter, py.typed shipped in the package."""

from __future__ import annotations

import inspect
from collections import defaultdict
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import gpu_ivm
from gpu_ivm import GraphEngine, RelationEngine

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("directed", [False, True])
def test_graph_len_and_repr_match_networkx(directed, monkeypatch):
    rng = np.random.default_rng(7)
    s, d = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    g = GraphEngine(directed=directed, epsilon="1/3")
    g.load({"src": s, "dst": d})
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_edges_from((a, b) for a, b in zip(s.tolist(), d.tolist()) if a != b)
    if directed:
        want = sum(1 for c in nx.simple_cycles(G, length_bound=3) if len(c) == 3)
    else:
        want = sum(nx.triangles(G).values()) // 3
    assert len(g) == G.number_of_edges()
    # repr reads maintained counters only: a recount would fail here
    monkeypatch.setattr(g, "_count_from_stores", lambda: pytest.fail("repr recounted"))
    monkeypatch.setattr(g, "recount", lambda: pytest.fail("repr recounted"))
    r = repr(g)
    form = "directed" if directed else "undirected"
    what = "cycles" if directed else "triangles"
    assert r == (f"GraphEngine({form}, epsilon=1/3, edges={G.number_of_edges()}, "
                 f"{what}={want}, backend='cpu')")
    empty = GraphEngine(maintain="vertex_counts")
    assert len(empty) == 0 and bool(empty)
    assert repr(empty).endswith("maintain=['vertex_counts'])")


def test_relation_len_and_repr_match_brute_force():
    rng = np.random.default_rng(8)
    rows = {nm: {"src": rng.integers(0, 6, 40), "dst": rng.integers(0, 6, 40),
                 "mult": rng.integers(-2, 3, 40)} for nm in "RST"}
    e = RelationEngine(epsilon={"R": "1/4", "S": 0, "T": 1})
    e.load(**rows)
    sums = {nm: defaultdict(int) for nm in "RST"}
    for nm, c in rows.items():
        for a, b, m in zip(c["src"].tolist(), c["dst"].tolist(), c["mult"].tolist()):
            sums[nm][a, b] += m
    nonzero = {nm: {k: v for k, v in d.items() if v} for nm, d in sums.items()}
    q = sum(r * s * nonzero["T"].get((c, a), 0)
            for (a, b), r in nonzero["R"].items()
            for (b2, c), s in nonzero["S"].items() if b2 == b)
    assert len(e) == sum(len(v) for v in nonzero.values())
    sizes = {nm: len(v) for nm, v in nonzero.items()}
    assert repr(e) == (f"RelationEngine(epsilon={{'R': '1/4', 'S': '0', 'T': '1'}}, "
                       f"tuples={sizes}, count={q}, backend='cpu')")


def test_every_public_parameter_has_a_type_hint():
    missing = []
    for name in gpu_ivm.__all__:
        obj = getattr(gpu_ivm, name)
        funcs = []
        if inspect.isclass(obj):
            funcs = [(f"{name}.{m}", f) for m, f in inspect.getmembers(obj, callable)
                     if not m.startswith("_") or m == "__init__"]
        elif callable(obj):
            funcs = [(name, obj)]
        for fname, f in funcs:
            try:
                sig = inspect.signature(f)
            except (TypeError, ValueError):
                continue
            if fname.endswith((".snapshot", ".restore")):
                continue  # persistence signatures belong to the snapshot module's owner
            for p in sig.parameters.values():
                if p.name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.annotation is inspect.Parameter.empty:
                    missing.append(f"{fname}({p.name})")
    assert missing == []


def test_py_typed_and_every_subpackage_are_packaged():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    st = conf["tool"]["setuptools"]
    assert "py.typed" in st["package-data"]["gpu_ivm"]
    assert (ROOT / "gpu_ivm" / "py.typed").is_file()
    subpackages = {"gpu_ivm." + ".".join(p.parent.relative_to(ROOT / "gpu_ivm").parts)
                   for p in (ROOT / "gpu_ivm").rglob("__init__.py")
                   if p.parent != ROOT / "gpu_ivm" and "__pycache__" not in p.parts}
    assert subpackages <= set(st["packages"])
