"""Indicator projections of a view tree (thesis §4.1.3, Fig. 4.6; digest §2.3).

An indicator projection ``I_Z R(z)`` is 1 when some tuple of the atom ``R`` has the values
``z`` on the variables ``Z``, else 0. Placed under the view of a variable X of a cyclic
component, it never changes the query's result (every result tuple extends a tuple of R), but
it closes a cycle among X's atoms and so bounds the view: for the triangle
``Q(B,C | A) = R(A,B), S(B,C), T(C,A)`` over the order A–B–C, ``V_C(A,B,C) = S(B,C) ⋈ T(C,A)``
is every 2-path (up to N² tuples), and ``I_{A,B}R ⋈ S ⋈ T`` only the triangles (at most
N^1.5). (Over the order A–C–B that the planner picks for this query, the indicator is
``I_{C,A}T`` under B.)

:func:`indicators` runs INDICATORS over an access-top variable order: at each variable X, the
candidates are the projections of the atoms outside X's subtree onto ``S = {X} ∪ dep(X)``,
and GYO* keeps those that survive, with X's subtree atoms, in the cyclic residue of the GYO
reduction (an edge contained in another is dropped, an indicator before an atom).

>>> from gpu_ivm.cq.planner import plan, render_vo
>>> p = plan("Q(B,C | A) = R(A,B), S(B,C), T(C,A)").parts[0]
>>> render_vo(p.access[0], p.comp)
'A[C[T(C,A), B[R(A,B), S(B,C)]]]'
>>> {x: [(p.comp.query.atoms[j].relation, z) for j, z in ind]
...  for x, ind in indicators(p.access, p.comp).items()}
{'B': [('T', ('C', 'A'))]}
"""

from __future__ import annotations

from .variable_order import VONode, dep_sets

__all__ = ["gyo_star", "indicators"]


def gyo_star(atoms: list[set[str]], candidates: list[set[str]]) -> list[int]:
    """Indexes of the ``candidates`` that survive the GYO reduction of ``atoms`` plus
    ``candidates``: repeatedly drop a variable that occurs in one edge only and an edge
    contained in another (of two equal edges, a candidate before an atom); none when the
    reduction empties the hypergraph (acyclic).

    >>> gyo_star([{"B", "C"}, {"C", "A"}], [{"A", "B"}])   # closes the triangle
    [0]
    >>> gyo_star([{"C", "D"}, {"D", "A"}], [{"A"}, {"C"}])  # a path: nothing to close
    []
    """
    edges = [("atom", k, set(e)) for k, e in enumerate(atoms)]
    edges += [("cand", k, set(e)) for k, e in enumerate(candidates)]
    changed = True
    while changed:
        changed = False
        for _, _, e in edges:
            lonely = {v for v in e if sum(v in f for _, _, f in edges) == 1}
            if lonely:
                e -= lonely
                changed = True
        drop = _contained(edges)
        if drop is not None:
            del edges[drop]
            changed = True
    if all(not e for _, _, e in edges):
        return []
    return sorted(k for kind, k, _ in edges if kind == "cand")


def _contained(edges: list) -> int | None:
    """The index of an edge contained in another (a candidate rather than an atom when the
    two are equal), or None."""
    for i, (kind, _, e) in enumerate(edges):
        for j, (other, _, f) in enumerate(edges):
            if i == j or not e <= f:
                continue
            if e == f and kind == "atom" and other == "cand":
                return j  # keep the atom
            return i
    return None


def indicators(roots: list[VONode], comp) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    """{variable X: [(atom index, Z), ...]}: the indicator projections ``I_Z`` of those atoms
    to hang under X's view (INDICATORS, Fig. 4.6), Z in the atom's variable order; variables
    that get none are left out."""
    dep = dep_sets(roots, comp)
    atoms = comp.query.atoms
    out: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for r in roots:
        for node, _ in r.walk():
            below = node.subtree_atoms()
            scope = {node.var, *dep[node.var]}
            cands = []
            for j in comp.atom_ids:
                if j in below:
                    continue
                z = tuple(dict.fromkeys(v for v in atoms[j].variables if v in scope))
                if z:
                    cands.append((j, z))
            if not cands:
                continue
            keep = gyo_star([set(atoms[i].variables) for i in below],
                            [set(z) for _, z in cands])
            if keep:
                out[node.var] = [cands[k] for k in keep]
    return out
