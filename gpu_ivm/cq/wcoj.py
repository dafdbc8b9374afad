"""A worst-case optimal join of Z-relations (Generic Join), for the views of cyclic bags.

A view ``V_X`` of a non-hierarchical component joins the relations under X (atoms, children's
marginals, indicator projections), all over variables of ``bag(X)``. Joined two at a time, an
intermediate result can exceed both the view and the AGM bound N^{ρ*}: for the triangle's
``R(A,B) ⋈ S(B,C) ⋈ I(C,A)``, ``R ⋈ S`` holds Σ_b deg_R(b)·deg_S(b) tuples, up to N², while
the view holds at most N^{3/2}. :func:`generic_join` binds the variables one at a time
instead (Generic Join / Leapfrog Triejoin): each relation is sorted in the join's variable
order, every partial tuple keeps the range of each relation's rows that agree with it, and
the next variable's values are the intersection of the ranges of the relations that contain
it, found by walking the smallest range and looking its values up in the others
(:func:`gpu_ivm.kernels.lex_join.extend_level`, one compiled pass per variable; its CUDA
twin on the cuda backend, :func:`gpu_ivm.kernels.cuda_lex_join.extend_level`). The partial
tuples after d variables are in the join of the relations' projections onto those
variables, so no level holds more than the AGM bound, and the candidates visited are
O(N^{ρ*}) over the whole join, whatever the variable order.

When all variables are bound each range is one row: the result's multiplicity is the
product of the rows' multiplicities (checked for int64 overflow). The result comes out
sorted in the variable order, each tuple once.

:func:`needs_wcoj` says which views get it: those whose relations form a cycle (the GYO
reduction leaves edges), and those where some join of a connected part of the relations,
which a binary plan may build on its way, has a larger fractional edge cover number than the
whole (its AGM bound is larger).

>>> from gpu_ivm.cq.zrel import consolidate
>>> r = consolidate(("A", "B"), [[1, 2], [1, 3], [2, 3]], [1, 2, 1])
>>> s = consolidate(("B", "C"), [[2, 5], [3, 5], [3, 6]], [1, 1, 3])
>>> t = consolidate(("C", "A"), [[5, 1], [6, 2]], [1, 1])
>>> stats = {}
>>> v = generic_join([r, s, t], ("A", "B", "C"), stats)
>>> v.keys.tolist(), v.mult.tolist(), stats["candidates"]
([[1, 2, 5], [1, 3, 5], [2, 3, 6]], [1, 2, 3], 8)
>>> needs_wcoj([{"A", "B"}, {"B", "C"}, {"C", "A"}]), needs_wcoj([{"A", "B"}, {"B", "C"}])
(True, False)
"""

from __future__ import annotations

import itertools

import numpy as np

from . import ops
from .planner import is_alpha_acyclic
from .widths import rho_star
from .zrel import ZRel, checked_mul, empty

__all__ = ["generic_join", "needs_wcoj"]


def _connected(edges: list[set[str]]) -> bool:
    seen = set(edges[0])
    rest = list(edges[1:])
    while rest:
        k = next((i for i, e in enumerate(rest) if e & seen), None)
        if k is None:
            return False
        seen |= rest.pop(k)
    return True


def needs_wcoj(edges: list[set[str]]) -> bool:
    """Whether the join of relations over ``edges`` is built by :func:`generic_join`: the
    edges form a cycle (not α-acyclic), or a connected proper part of them has a larger
    fractional edge cover number ρ* (of its own variables) than all of them have of theirs,
    so that a binary plan joining that part first may hold more than the AGM bound."""
    edges = [set(e) for e in edges if e]
    if len(edges) < 3:
        return False
    if not is_alpha_acyclic([set(e) for e in edges]):
        return True
    whole = rho_star(set().union(*edges), edges)
    for k in range(2, len(edges)):
        for part in itertools.combinations(edges, k):
            part = list(part)
            if _connected(part) and rho_star(set().union(*part), part) > whole:
                return True
    return False


def generic_join(rels: list[ZRel], order: tuple[str, ...] | None = None,
                 stats: dict | None = None) -> ZRel:
    """The natural join of ``rels`` (multiplicities multiply) over the variables ``order``
    (default: the variables in order of first occurrence), by Generic Join; the result has
    columns in ``order``, rows sorted and unique. ``stats``, if given, gets ``candidates``
    (values visited, summed over the levels), ``largest_level`` (the most partial tuples
    after any variable) and ``output`` added to what it holds."""
    if order is None:
        order = tuple(dict.fromkeys(v for r in rels for v in r.vars))
    order = tuple(order)
    if set(order) != {v for r in rels for v in r.vars}:
        raise ValueError(f"generic_join: order {order} is not the variables of the relations")
    factor = np.ones(1, np.int64)
    rs: list[ZRel] = []
    for r in rels:
        if not r.vars:  # a nullary relation multiplies every tuple
            if not len(r):
                return empty(order)
            factor = checked_mul(factor, r.mult[:1])
            continue
        rs.append(r.reorder(tuple(v for v in order if v in r.vars)))
    m = len(rs)
    extend = ops.current().extend_level
    lo = np.zeros((m, 1), np.int64)
    hi = np.array([[len(r)] for r in rs], np.int64).reshape(m, 1)
    cols: list[np.ndarray] = []
    candidates = 0
    largest = 1
    for x in order:
        parts = [j for j in range(m) if x in rs[j].vars]
        # the relation's variables before x in ``order`` are bound: its x values within a
        # partial tuple's range are one sorted column
        columns = [rs[j].keys[:, rs[j].vars.index(x)] for j in parts]
        offs = np.cumsum([0] + [len(c) for c in columns[:-1]]).astype(np.int64)[:, None]
        parent, val, nlo, nhi, n, work = extend(np.concatenate(columns), lo[parts] + offs,
                                                hi[parts] + offs)
        candidates += work
        parent = parent[:n]
        lo, hi = lo[:, parent], hi[:, parent]
        lo[parts] = nlo[:, :n] - offs
        hi[parts] = nhi[:, :n] - offs
        cols = [c[parent] for c in cols] + [val[:n]]
        largest = max(largest, n)
        if not n:
            break
    if stats is not None:
        stats["candidates"] = stats.get("candidates", 0) + candidates
        stats["largest_level"] = max(stats.get("largest_level", 0), largest)
    if not len(cols) or not len(cols[-1]) or len(cols) < len(order):
        out = empty(order) if order else (
            ZRel((), np.zeros((1, 0), np.int64), factor) if factor[0] else empty(()))
        if stats is not None:
            stats["output"] = stats.get("output", 0) + len(out)
        return out
    mult = np.repeat(factor, len(cols[0]))
    for j in range(m):  # every relation's range is one row now
        mult = checked_mul(mult, rs[j].mult[lo[j]])
    if stats is not None:
        stats["output"] = stats.get("output", 0) + len(mult)
    return ZRel(order, np.ascontiguousarray(np.stack(cols, axis=1)), mult)
