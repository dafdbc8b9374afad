"""The import graph of gpu_ivm and bench has no cycles (docs/design.md, "Module layering").

Every module is parsed with :mod:`ast`; every ``import`` / ``from ... import`` statement counts,
at module level and inside functions and methods alike (a function-level import is how a cycle
hides: it only runs later, but the two modules still need each other). The graph is computed
from the sources, never listed by hand, and its strongly connected components are found by
Tarjan's algorithm; the test is cross-checked against networkx's own cycle finder.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: import name -> source folder (pyproject's [tool.setuptools.package-dir]; bench is a folder)
PACKAGES = {"gpu_ivm": "gpu_ivm", "gpu_ivm.kernels": "kernels",
            "gpu_ivm.spark_glue": "spark_glue", "bench": "bench"}

#: the modules the engineering standards name: none of them may be on an import cycle
CORE = ("gpu_ivm.engine", "gpu_ivm.snapshot", "gpu_ivm.graph_engine", "gpu_ivm.relation_engine",
        "gpu_ivm.warmup", "gpu_ivm.insert_only", "gpu_ivm.recompute", "gpu_ivm.partition",
        "gpu_ivm.store", "gpu_ivm.views", "gpu_ivm.queries.*", "bench.peers", "bench.systems")


def module_files() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package ``__init__``)."""
    mods: dict[str, tuple[Path, bool]] = {}
    for pkg, folder in PACKAGES.items():
        base = ROOT / folder
        assert (base / "__init__.py").is_file(), base
        for f in sorted(base.rglob("*.py")):
            rel = f.relative_to(base).with_suffix("").parts
            if any(p.startswith(".") for p in rel) or (pkg == "bench" and rel[0] == "results"):
                continue  # virtual environments, benchmark outputs
            is_pkg = rel[-1] == "__init__"
            parts = [pkg, *rel[:-1]] if is_pkg else [pkg, *rel]
            mods[".".join(parts)] = (f, is_pkg)
    return mods


def _known(name: str, mods) -> str | None:
    """The longest module of ``mods`` that ``name`` names or lies in (None: outside)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, is_pkg: bool, mods) -> set[str]:
    """The project modules ``name`` imports anywhere in its source. ``from P import x`` is an
    edge to ``P.x`` when that is a module, else to ``P`` (whose ``__init__`` defines ``x``)."""
    package = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in mods else base)
        for t in targets:
            got = _known(t, mods)
            if got is not None and got != name:
                out.add(got)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = module_files()
    return {m: imports_of(m, f, is_pkg, mods) for m, (f, is_pkg) in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _describe(graph, comps) -> str:
    lines = []
    for comp in comps:
        lines.append(" <-> ".join(comp))
        lines += [f"    {a} imports {b}" for a in comp for b in sorted(graph[a]) if b in comp]
    return "\n".join(lines)


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    # the package re-exports its engines: a module-level relative import
    assert "gpu_ivm.graph_engine" in graph["gpu_ivm"]
    # GraphEngine.load() reads its input through gpu_ivm.io (module level, "from . import io")
    assert "gpu_ivm.io" in graph["gpu_ivm.graph_engine"]
    # kernels/ is the gpu_ivm.kernels package; backend imports the CPU kernels in a function
    assert "gpu_ivm.kernels.delta_kernels" in graph["gpu_ivm.backend"]
    # bench.systems registers the peers inside a function
    assert "bench.peers" in graph["bench.systems"]


def test_cycle_finder_on_small_graphs():
    nx = pytest.importorskip("networkx")
    rng = __import__("random").Random(7)
    for _ in range(200):
        n = rng.randint(1, 9)
        g = {str(i): {str(rng.randrange(n)) for _ in range(rng.randint(0, 3))} - {str(i)}
             for i in range(n)}
        expect = sorted(sorted(c) for c in nx.strongly_connected_components(
            nx.DiGraph([(a, b) for a in g for b in g[a]] + [(a, a) for a in g]))
            if len(c) > 1)
        assert sorted(cycles(g)) == expect


def test_core_modules_are_on_no_import_cycle():
    graph = import_graph()
    core = set()
    for c in CORE:
        found = ({m for m in graph if m.startswith(c[:-1])} if c.endswith("*")
                 else {c} & set(graph))
        assert found, f"{c} names no module"
        core |= found
    bad = [comp for comp in cycles(graph) if core & set(comp)]
    assert not bad, "import cycles through core modules:\n" + _describe(graph, bad)


def test_no_import_cycle_anywhere():
    graph = import_graph()
    comps = cycles(graph)
    assert not comps, "import cycles:\n" + _describe(graph, comps)
