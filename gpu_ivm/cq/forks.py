"""Where Ω forks (thesis Chapter 5, digest §4.2, Fig. 5.5): the fork forest of a hierarchical
CQAP, which :class:`~gpu_ivm.cq.tradeoff.TradeoffEngine` partitions by degree.

Ω walks the canonical variable order of each fracture component top down. At a variable X
whose induced query (X's ancestors treated as inputs) is CQAP_0 it stops; at an input X, or an
output X with no input below it, it goes on into X's children; otherwise it **forks** on the
key ``anc(X) ∪ {X}``, and its heavy side goes on into X's children, which may fork again on
keys that extend this one (nested forks).

>>> [(f.var, f.key) for comp in fork_forest("Q(C | ) = R(A,B,C), S(A,B)") for f in comp]
[('A', ('A',))]
>>> find_fork("Q(C | A) = R(A,B), S(B,C)")
('B', [0, 1])
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .engine import UnsupportedQueryError
from .planner import plan
from .syntax import Query

__all__ = ["Fork", "find_fork", "fork_forest"]


@dataclass
class Fork:
    """A variable where Ω forks: the relations under it are partitioned on ``key``
    (``anc(var) ∪ {var}``, root first) and its heavy strategy goes on into ``children``."""

    id: int
    var: str
    key: tuple[str, ...]
    atoms: tuple[int, ...]          # the atoms under ``var`` (each holds every key variable)
    component: int                  # index of the fracture component
    parent: int | None = None       # id of the enclosing fork (whose heavy side this is in)
    children: list[Fork] = field(default_factory=list)

    def walk(self):
        """This fork and the forks nested in it, outer first."""
        yield self
        for c in self.children:
            yield from c.walk()


def fork_forest(query: str | Query) -> list[list[Fork]]:
    """Per fracture component, the outermost forks of Ω (each with its nested ones); ids
    count the forks outer first. Raises UnsupportedQueryError when a component is not
    hierarchical."""
    p = plan(query)
    q = p.query
    out: list[list[Fork]] = []
    counter = itertools.count()
    for k, part in enumerate(p.parts):
        if not part.hierarchical:
            raise UnsupportedQueryError(f"query {q} has a non-hierarchical component: the "
                                        "heavy/light trade-off (epsilon < 1) needs a "
                                        "hierarchical fracture")
        forks: list[Fork] = []
        for root in part.canonical:
            forks += _omega(root, q, [], k, None, counter)
        out.append(forks)
    return out


def find_fork(query: str | Query) -> tuple[str, list[int]] | None:
    """``(X, atoms under X)`` of the first (outermost) fork of Ω, or None when no variable
    forks (every induced query CQAP_0, as for CQAP_0 queries). Raises UnsupportedQueryError
    for a non-hierarchical query."""
    forks = [f for comp in fork_forest(query) for f in comp]
    return (forks[0].var, list(forks[0].atoms)) if forks else None


def _omega(node, q: Query, anc: list[str], comp: int, parent: int | None,
           counter) -> list[Fork]:
    """The forks of Ω in ``node``'s subtree, ``anc`` its ancestors (treated as inputs)."""
    vs = set(node.subtree_vars())
    atoms = node.subtree_atoms()
    ins = [v for v in q.inputs if v in vs] + [v for v in anc if v not in q.inputs]
    outs = [v for v in q.outputs if v in vs]
    body = ", ".join(str(q.atoms[i]) for i in atoms)
    induced = plan(f"Q({','.join(outs)} | {','.join(dict.fromkeys(ins))}) = {body}")
    if induced.cls == "CQAP_0":
        return []
    x = node.var
    if x in q.inputs or (x in q.outputs and not vs & set(q.inputs)):
        out = []
        for c in node.children:
            out += _omega(c, q, anc + [x], comp, parent, counter)
        return out
    fork = Fork(next(counter), x, tuple(anc + [x]), tuple(sorted(atoms)), comp, parent)
    for c in node.children:  # the heavy side: X and its ancestors are inputs below
        fork.children += _omega(c, q, anc + [x], comp, fork.id, counter)
    return [fork]
