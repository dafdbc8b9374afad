"""Widths of any component by search: exact fractional edge covers and access-top VO search.

The thesis gives closed forms only for hierarchical components (Lemma 5.11); for the others the
static width is the minimum over access-top variable orders of ``max_X ρ*(bag(X))`` (Def. 4.12).
This module computes it exactly (``Fraction``) for small queries: ρ* by enumerating the vertices
of the covering polytope, and the variable orders that split into connected parts at every
level with inputs above outputs above bound variables. The dynamic width of a non-hierarchical
component also depends on its indicator projections (GYO*, :mod:`gpu_ivm.cq.indicators`): it
is not computed here.

>>> rho_star({"A", "B", "C"}, [{"A", "B"}, {"B", "C"}, {"C", "A"}])
Fraction(3, 2)
>>> from gpu_ivm.cq.planner import plan
>>> min_static_width(plan("Q(B,C | A) = R(A,B), S(B,C), T(C,A)").components[0])
Fraction(3, 2)
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from functools import lru_cache

from .variable_order import VONode

__all__ = ["access_top_orders", "best_order", "min_static_width", "order_to_vo", "rho_star",
           "update_width"]

MAX_VARIABLES = 6


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Solve a square system exactly; None when singular."""
    n = len(rows)
    m = [r[:] + [b] for r, b in zip(rows, rhs)]
    for c in range(n):
        piv = next((r for r in range(c, n) if m[r][c] != 0), None)
        if piv is None:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


@lru_cache(maxsize=4096)
def _rho_cached(target: frozenset, edges: frozenset) -> Fraction:
    verts = sorted(target)
    es = [e for e in edges if not any(e < f for f in edges)]  # dominated edges never help
    m = len(es)
    cons = [[Fraction(int(v in e)) for e in es] for v in verts]        # A λ >= 1
    cons += [[Fraction(int(j == k)) for j in range(m)] for k in range(m)]  # λ >= 0
    rhs = [Fraction(1)] * len(verts) + [Fraction(0)] * m
    best = None
    for pick in itertools.combinations(range(len(cons)), m):
        sol = _solve([cons[i] for i in pick], [rhs[i] for i in pick])
        if sol is None:
            continue
        if any(x < 0 for x in sol):
            continue
        if any(sum(a * x for a, x in zip(cons[i], sol)) < 1 for i in range(len(verts))):
            continue
        val = sum(sol, Fraction(0))
        best = val if best is None or val < best else best
    if best is None:
        raise ValueError(f"variables {verts} cannot be covered")
    return best


def rho_star(target, edges) -> Fraction:
    """Fractional edge cover number of ``target`` by ``edges`` (exact)."""
    t = frozenset(target)
    if not t:
        return Fraction(0)
    return _rho_cached(t, frozenset(frozenset(e) & t for e in edges if set(e) & t))


def access_top_orders(comp):
    """Variable orders of ``comp`` as (var, parent) maps: at each level the remaining variables
    split into connected parts, and each part's root has the lowest rank (input < output <
    bound) in that part, so the order is access-top."""
    edges = [set(a.variables) for a in comp.atoms]
    rank = {"input": 0, "output": 1, "bound": 2}

    def parts(vs: frozenset) -> list[frozenset]:
        left, out = set(vs), []
        while left:
            comp_set = {left.pop()}
            grow = True
            while grow:
                grow = False
                for e in edges:
                    if e & comp_set and (e & left):
                        comp_set |= e & left
                        left -= e
                        grow = True
            out.append(frozenset(comp_set))
        return out

    def orders(vs: frozenset, parent):
        if not vs:
            yield {}
            return
        per_part = []
        for p in parts(vs):
            low = min(rank[comp.role(v)] for v in p)
            opts = []
            for r in sorted(v for v in p if rank[comp.role(v)] == low):
                for sub in orders(p - {r}, r):
                    opts.append({r: parent, **sub})
            per_part.append(opts)
        for combo in itertools.product(*per_part):
            merged: dict = {}
            for d in combo:
                merged.update(d)
            yield merged

    yield from orders(frozenset(comp.variables), None)


def _bags(parent: dict, comp) -> list[set[str]]:
    anc = {}
    for v in parent:
        chain, u = [], parent[v]
        while u is not None:
            chain.append(u)
            u = parent[u]
        anc[v] = chain
    out = []
    for v in parent:
        below = {u for u in parent if u == v or v in anc[u]}
        co = set()
        for a in comp.atoms:
            if set(a.variables) & below:
                co |= set(a.variables)
        out.append({v} | (set(anc[v]) & co))
    return out


def update_width(parent: dict, comp) -> Fraction:
    """max over variables X and atoms R under X of ρ*(bag(X) − vars(R)) by the atoms under X:
    the exponent of the delta a single-tuple update of R makes in the view at X (an AGM bound
    of the tuples of that view that agree with the update), for view trees without indicator
    projections. It tells apart orders of equal static width: for the 4-cycle
    R(A,B), S(B,C), T(C,D), U(D,A), A[B[R, C[S, D[T, U]]]] has 2 (an update of T meets the
    view over A, B, C), A[C[B[R, S], D[T, U]]] has 1."""
    bags = dict(zip(parent, _bags(parent, comp)))

    def under(v: str) -> set[str]:
        out, u = {v}, None
        for u in parent:
            x = u
            while x is not None and x != v:
                x = parent[x]
            if x == v:
                out.add(u)
        return out

    worst = Fraction(0)
    for v, bag in bags.items():
        below = under(v)
        atoms = [set(a.variables) for a in comp.atoms if set(a.variables) & below]
        for a in atoms:
            worst = max(worst, rho_star(bag - a, atoms))
    return worst


def best_order(comp) -> tuple[Fraction, dict] | None:
    """(w, parent map) of an access-top VO of least static width, ties broken by the least
    :func:`update_width`; None above MAX_VARIABLES variables."""
    if len(comp.variables) > MAX_VARIABLES:
        return None
    edges = [set(a.variables) for a in comp.atoms]
    best = None
    for parent in access_top_orders(comp):
        w = max([rho_star(b, edges) for b in _bags(parent, comp)] + [Fraction(1)])
        if best is not None and w > best[0]:
            continue
        key = (w, update_width(parent, comp))
        if best is None or key < best:
            best = (*key, parent)
    return None if best is None else (best[0], best[2])


def min_static_width(comp) -> Fraction | None:
    """min over access-top VOs of max ρ*(bag); None above MAX_VARIABLES variables."""
    best = best_order(comp)
    return None if best is None else best[0]


def order_to_vo(parent: dict, comp) -> list:
    """The VONode forest of a parent map, each atom under its deepest variable."""
    nodes = {v: VONode(v) for v in parent}
    roots = []
    for v in sorted(parent, key=comp.variables.index):
        (nodes[parent[v]].children if parent[v] is not None else roots).append(nodes[v])

    def depth(v):
        d = 0
        while parent[v] is not None:
            v, d = parent[v], d + 1
        return d

    for i in comp.atom_ids:
        vs = comp.query.atoms[i].variables
        if vs:
            nodes[max(vs, key=depth)].atoms.append(i)
    return roots
