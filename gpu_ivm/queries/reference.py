"""Sequential reference enumeration of Δ3, Δ2 and Δ1 (paper 001, Prop 22, Figures 13 and 15).

This is the faithful, pure-Python counterpart of the bulk materialization in ``results.py``.
It reads the views a :class:`~gpu_ivm.queries.maintain.FreeQueries` maintains and enumerates
each query result tuple by tuple with the primitives of ``hop.py``:

* :func:`enumerate_triangles` (Δ3, digest §5.5): the five skew-aware views are disjoint, so it
  walks the listing views D3_HHH and D3_LLL, then the three view trees (each root key, then the
  third variable from the inner 3-ary view, multiplicity inner · lookup relation).
* :func:`enumerate_edges` (Δ2, Figure 13 ``EnumerateBinary``): UnionNext over I1 (iterators
  over D2_HHH, D2_LLL, D2_H(LL)*, D2_L*(HH) and the root V2^*HL) and I2 (one hop-iterator
  union per view tree H(LH)* and L*(HL), one bucket per C value of the tree's 1-ary root).
  Every distinct (a, b) is emitted once; its multiplicity m1 + m2 + m3 (lines 5-7) comes from
  :func:`~gpu_ivm.queries.results.edge_lookup`.
* :func:`enumerate_vertices` (Δ1, Figure 15 ``EnumerateUnary``): UnionNext over I1 (the six
  1-ary views) and I2 (one hop-iterator union over the (b, c) keys of the root V1^(LH)*(HL)).
  Multiplicities (lines 5-6) come from :func:`~gpu_ivm.queries.results.vertex_lookup`.

:func:`edge_iterators` and :func:`vertex_iterators` return the I1 + I2 iterator lists of the
figures, for inspection; the I2 members are :class:`HopUnion` objects whose ``union`` attribute
is the :class:`~gpu_ivm.queries.hop.UnionOfSets` (Figure 5) with its buckets and hop state.

**CandidateBuckets** (digest §6.4, §7.4). For Δ2's H(LH)* tree, the buckets that may hold
(a, b) are {c : V_RS(a, b, c) ≠ 0} ∩ V̂^{H(LH)*}: nonempty only if a is heavy in R and b light
in S (else V_RS(a, b, ·) is empty), and then c ranges over the heavy C values of S(b, ·),
found by walking the shorter of S(b, ·) (< 3/2·N^ε values, b light) and the heavy C list of S
(≤ 2N^{1-ε}) — O(N^{min{ε,1-ε}}) candidates and probes, as Lemma 11 needs. For L*(HL) it is
{c : V_TR(c, a, b) ≠ 0} ∩ V̂^{L*(HL)}, with c among the heavy C of T(·, a) (a light in R and in
T), the shorter of T(·, a) and T's heavy C list. For Δ1 it is {(b, c) : V_TR(c, a, b) ≠ 0} ∩
root keys with b from R^{LH}(a, ·) and c from T^{HL}(·, a), each side the shorter of the
relation's row and its heavy list: O(N^{2·min{ε,1-ε}}) pairs, each probed in the root.
Candidates are always confirmed by a lookup in the inner view and the 1-ary (resp. 2-ary) root,
so they never name a bucket that is not a root key.

**Buckets** are :class:`EdgeBucket` / :class:`VertexBucket` collections (``contains`` by point
lookups, ``next`` = successor). A Δ2 bucket c is walked as x in the root row c (root keyed
(C, A) resp. (C, B)), then y in the inner view's row (c, x); each row is read from the store
once, on first touch, and kept as a successor map, so successor is amortized O(1). Buckets are
non-empty at open (digest §3.4, pitfall 3) because views hold only positive values: a root key
has a witness in the inner view. A root key without one raises ``RuntimeError`` (the views
would be inconsistent).

Deviations from the RAM model, irrelevant for a reference: the I1 iterators read their view's
entries once when created (one ``items()`` call) and then walk them; the bucket objects of a
hop-union are allocated when the iterator is built (O(#buckets), not O(1)); lookups are
ZStore probes (O(log) instead of O(1) hash lookups). The generators read the live views, so
the engine must not apply a batch while one of them is being consumed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

from ..encoding import LO_MASK, pack
from . import results as rs
from . import specs as sp
from .hop import BOF, EOF, ListCollection, UnionOfSets, union_iter
from .maintain import FreeQueries
from .storage import View

__all__ = [
    "EdgeBucket",
    "HopUnion",
    "ViewIterator",
    "VertexBucket",
    "edge_candidates",
    "edge_iterators",
    "enumerate_edges",
    "enumerate_triangles",
    "enumerate_vertices",
    "vertex_candidates",
    "vertex_iterators",
]

A, B, C = sp.A, sp.B, sp.C
R, S, T = sp.R, sp.S, sp.T

#: Figure 13 line 2: the materialized Δ2 views (all keyed (A, B)).
EDGE_I1 = ("D2_HHH", "D2_LLL", "D2_H(LL)*", "D2_L*(HH)", "V2^*HL")
#: Figure 13 line 3: (view tree, its 1-ary root over C whose values are the bucket ids).
EDGE_I2 = (("V2^H(LH)*", "V2^H(LH)*^"), ("V2^L*(HL)", "V2^L*(HL)^"))
#: Figure 15 line 2: the 1-ary Δ1 views.
VERTEX_I1 = ("D1_HHH", "D1_LLL", "D1_(LL)*H", "D1_(LH)*(HH)", "V1^HL*", "V1^*HL")
#: Figure 15 line 3: the view tree whose root keys (b, c) are the bucket ids.
VERTEX_I2 = "V1^(LH)*(HL)"


# ---------------------------------------------------------------------- point access
def _one(x: int) -> np.ndarray:
    return np.array([x], np.int64)


def _key_cols(spec: sp.ViewSpec, by_var: dict[int, int]) -> list[np.ndarray]:
    return [_one(by_var[v]) for v in spec.key]


def _view_value(view: View, spec: sp.ViewSpec, by_var: dict[int, int]) -> int:
    """The view's value at the key given by variable (0 if absent)."""
    return int(view.get(_key_cols(spec, by_var))[0])


def _rel_value(fq: FreeQueries, k: int, x: int, y: int) -> int:
    """K_k(x, y) for relation k with schema (k, k+1 mod 3)."""
    return int(fq.rels[k].get(pack(_one(x), _one(y)))[0])


def _flag(fq: FreeQueries, k: int, pos: int, x: int) -> int:
    """Heaviness flag (1 heavy) of value x as the relation's ``pos``-th variable."""
    f = fq.rels[k].flags[pos]
    return int(f[x]) if x < f.shape[0] else 0


def _pair_row(view: View, u: int) -> list[int]:
    """Second key variable of the entries of a 2-ary view whose first variable is u."""
    _, keys, _ = view.store.rows(_one(u))
    return (keys & LO_MASK).tolist()


def _triple_row(view: View, u: int, v: int) -> list[int]:
    """Third key variable of the entries of a 3-ary view whose first two variables are (u, v)."""
    _, w, _ = view.rows(_one(u), _one(v))
    return w.tolist()


def _heavy_neighbours(fq: FreeQueries, k: int, side: int, x: int) -> list[int]:
    """Values y with K_k ∋ x–y (x at position ``side``) whose own variable is heavy in K_k.

    Walks the shorter of x's row in K_k and K_k's list of heavy values of the other variable
    (the paper's choice of the bounded list), so the cost is O(min(deg(x), #heavy)).
    """
    rel = fq.rels[k]
    other = 1 - side
    heavy = rel.heavy[other]
    live = (rel.fwd if side == 0 else rel.bwd).live  # degrees |σ_{X=x}K|
    deg = int(live[x]) if x < live.shape[0] else 0
    if deg == 0:
        return []
    if deg <= heavy.shape[0]:
        _, keys, _ = (rel.fwd if side == 0 else rel.bwd).rows(_one(x))
        ys = keys & LO_MASK
        return ys[rel.flags[other][ys] == 1].tolist()
    xs = np.full(heavy.shape[0], x, np.int64)
    keys = pack(xs, heavy) if side == 0 else pack(heavy, xs)
    return heavy[rel.get(keys) != 0].tolist()


def _require(fq: FreeQueries, family: str) -> None:
    if family not in fq.families:
        raise ValueError(f"this FreeQueries does not maintain {family} "
                         f"(families: {', '.join(fq.families) or 'none'})")


# ---------------------------------------------------------------------- iterators
class ViewIterator:
    """Iterator over a materialized view (digest §3.1): ``next()`` walks its nonzero entries,
    ``contains(t)`` is a point lookup; elements are tuples over ``out_vars`` (a bare int when
    ``out_vars`` has one variable).

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0], [1]), e([1], [2]), e([2], [0])], 3)
    >>> it = ViewIterator(fq, "D2_LLL", (A, B))
    >>> it.next(), it.next(), it.contains((0, 1)), it.contains((1, 0))
    ((0, 1), EOF, True, False)
    """

    def __init__(self, fq: FreeQueries, name: str, out_vars: tuple[int, ...]) -> None:
        self.name = name
        self.spec = fq.spec(name)
        self.view = fq.view(name)
        if sorted(out_vars) != sorted(self.spec.key):
            raise ValueError(f"view {name} is keyed {self.spec.key}, not {out_vars}")
        self.out_vars = tuple(out_vars)
        cols, _ = self.view.items()
        by_var = dict(zip(self.spec.key, (c.tolist() for c in cols)))
        if len(out_vars) == 1:
            self._items: list[Any] = by_var[out_vars[0]]
        else:
            self._items = list(zip(*(by_var[v] for v in out_vars)))
        self._pos = 0

    def next(self) -> Any:
        if self._pos >= len(self._items):
            return EOF
        t = self._items[self._pos]
        self._pos += 1
        return t

    def contains(self, t: Any) -> bool:
        vals = (t,) if len(self.out_vars) == 1 else t
        return _view_value(self.view, self.spec, dict(zip(self.out_vars, vals))) != 0

    def __repr__(self) -> str:
        return f"ViewIterator({self.name!r}, pos={self._pos}/{len(self._items)})"


class EdgeBucket:
    """Bucket c of a Δ2 view tree (digest §6.4): the pairs (a, b) with a triangle (a, b, c) in
    the tree's skew-aware view, as a :class:`~gpu_ivm.queries.hop.SuccessorCollection`.

    The root is keyed (C, X) with X ∈ {A, B}; the bucket is walked as x in root row c, then y
    (the other of A, B) in the inner view's row (c, x). ``contains((a, b))`` is inner(a, b, c)
    ≠ 0 and lookup-relation ≠ 0 (V_RS(a,b,c)·T(c,a) resp. V_TR(c,a,b)·S(b,c)).

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 0, 0], [1, 2, 3]), e([1, 6, 7], [5, 5, 5]), e([5], [0])], 8)
    >>> fq.N, fq.view("V2^H(LH)*^").dense.tolist()  # θ ≈ 2.5: a = 0 heavy in R, c = 5 in S
    (15, [0, 0, 0, 0, 0, 1, 0, 0])
    >>> bucket = EdgeBucket(fq, "V2^H(LH)*", 5)
    >>> bucket.next(BOF), bucket.next((0, 1)), bucket.contains((0, 1)), bucket.contains((0, 2))
    ((0, 1), EOF, True, False)
    """

    def __init__(self, fq: FreeQueries, tree: str, c: int) -> None:
        spec = next(t for t in sp.trees("edge_counts") if t.root == tree)
        self.fq = fq
        self.root_spec, self.root = fq.spec(spec.root), fq.view(spec.root)
        self.inner_spec, self.inner = fq.spec(spec.inner), fq.view(spec.inner)
        self.lookup = spec.lookup
        if self.root_spec.key[0] != C or len(self.root_spec.key) != 2:
            raise ValueError(f"root {tree} is not keyed (C, ·)")
        self.outer_var = self.root_spec.key[1]
        self.inner_var = B if self.outer_var == A else A
        if self.inner_spec.key[2] != self.inner_var:
            raise ValueError(f"inner view {spec.inner} does not give {'AB'[self.inner_var]}")
        self.c = int(c)
        self._outer: ListCollection | None = None
        self._rows: dict[int, ListCollection] = {}

    def _pair(self, x: int, y: int) -> tuple[int, int]:
        return (x, y) if self.outer_var == A else (y, x)

    def _outer_values(self) -> ListCollection:
        if self._outer is None:
            self._outer = ListCollection(_pair_row(self.root, self.c))
        return self._outer

    def _row(self, x: int) -> ListCollection:
        row = self._rows.get(x)
        if row is None:
            by_var = {C: self.c, self.outer_var: x}
            ys = _triple_row(self.inner, by_var[self.inner_spec.key[0]],
                             by_var[self.inner_spec.key[1]])
            if not ys:  # a root key always has a witness (positive views)
                raise RuntimeError(f"bucket c={self.c} of {self.root_spec.name}: x={x} has no "
                                   f"entries in {self.inner_spec.name} (not a root key, or "
                                   "views inconsistent)")
            row = self._rows[x] = ListCollection(ys)
        return row

    def next(self, t: Any) -> Any:
        if t is EOF:
            return EOF
        if t is BOF:
            x = self._outer_values().next(BOF)
            return EOF if x is EOF else self._pair(x, self._row(x).next(BOF))
        x, y = t[self.outer_var], t[self.inner_var]
        ny = self._row(x).next(y)
        if ny is not EOF:
            return self._pair(x, ny)
        nx = self._outer_values().next(x)
        return EOF if nx is EOF else self._pair(nx, self._row(nx).next(BOF))

    def contains(self, t: Any) -> bool:
        if t is BOF or t is EOF:
            return False
        a, b = t
        by_var = {A: a, B: b, C: self.c}
        if _view_value(self.inner, self.inner_spec, by_var) == 0:
            return False
        k = self.lookup
        return _rel_value(self.fq, k, by_var[k], by_var[(k + 1) % 3]) != 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        t = self.next(BOF)
        while t is not EOF:
            yield t
            t = self.next(t)

    def __repr__(self) -> str:
        return f"EdgeBucket({self.root_spec.name!r}, c={self.c})"


class VertexBucket:
    """Bucket (b, c) of the Δ1 view tree (digest §7.4): {a : V_TR(c, a, b) ≠ 0}, walked through
    the inner view's row (c, b) (read once, on first touch); ``contains(a)`` is a lookup.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"vertex_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> # θ ≈ 2.5: b = 1 heavy in R, c = 2 heavy in T, a = 0 light in both: (LH)*(HL)
    >>> fq.build([e([0, 3, 4], [1, 1, 1]), e([1], [2]), e([2, 2, 2], [0, 6, 7])], 8)
    >>> bucket = VertexBucket(fq, (1, 2))
    >>> list(bucket), bucket.contains(0), bucket.contains(3)
    ([0], True, False)
    """

    def __init__(self, fq: FreeQueries, bc: tuple[int, int]) -> None:
        tree = sp.trees("vertex_counts")[0]
        self.fq = fq
        self.inner_spec, self.inner = fq.spec(tree.inner), fq.view(tree.inner)
        if self.inner_spec.key[2] != A:
            raise ValueError(f"inner view {tree.inner} does not give A")
        self.b, self.c = int(bc[0]), int(bc[1])
        self._items: ListCollection | None = None

    def _values(self) -> ListCollection:
        if self._items is None:
            by_var = {B: self.b, C: self.c}
            a_s = _triple_row(self.inner, by_var[self.inner_spec.key[0]],
                              by_var[self.inner_spec.key[1]])
            if not a_s:  # a root key always has a witness (positive views)
                raise RuntimeError(f"bucket (b={self.b}, c={self.c}) is empty in "
                                   f"{self.inner_spec.name} (not a root key, or views "
                                   "inconsistent)")
            self._items = ListCollection(a_s)
        return self._items

    def next(self, x: Any) -> Any:
        return EOF if x is EOF else self._values().next(x)

    def contains(self, x: Any) -> bool:
        if x is BOF or x is EOF:
            return False
        return _view_value(self.inner, self.inner_spec, {A: x, B: self.b, C: self.c}) != 0

    def __iter__(self) -> Iterator[int]:
        return iter(self._values())

    def __repr__(self) -> str:
        return f"VertexBucket(b={self.b}, c={self.c})"


class HopUnion:
    """A :class:`~gpu_ivm.queries.hop.UnionOfSets` (Figure 5) as an iterator for UnionNext:
    ``next()`` is the union's Next(), ``contains(t)`` asks the buckets named by
    CandidateBuckets(t) (all buckets holding t are among them), O(|candidates|·lookup).

    ``union`` is the opened UnionOfSets; ``sources`` maps bucket ids to bucket collections.

    >>> from gpu_ivm.queries.hop import ListCollection
    >>> buckets = {1: ListCollection("xy"), 2: ListCollection("yz")}
    >>> u = HopUnion("demo", buckets, lambda t: [1, 2])
    >>> [u.next() for _ in range(4)], u.contains("z"), u.contains("w")
    (['x', 'y', 'z', EOF], True, False)
    """

    def __init__(self, name: str, sources: dict[Hashable, Any],
                 candidates: Callable[[Any], list[Hashable]]) -> None:
        self.name = name
        self.sources = sources
        self.candidates = candidates
        self.union = UnionOfSets(list(sources.items()), candidates)
        self.union.open()

    def next(self) -> Any:
        return self.union.next()

    def contains(self, t: Any) -> bool:
        return any(self.sources[b].contains(t) for b in self.candidates(t))

    def __repr__(self) -> str:
        return f"HopUnion({self.name!r}, {len(self.sources)} buckets)"


# ---------------------------------------------------------------------- CandidateBuckets
def edge_candidates(fq: FreeQueries, tree: str) -> Callable[[tuple[int, int]], list[int]]:
    """CandidateBuckets^{tree}(a, b) of Figure 13 for ``tree`` ∈ {"V2^H(LH)*", "V2^L*(HL)"}:
    the c with inner(a, b, c) ≠ 0 that are bucket ids (1-ary root ≠ 0), in increasing order.

    H(LH)*: {c : V_RS(a, b, c) ≠ 0} ∩ V̂^{H(LH)*}; the c come from the heavy C of S(b, ·)
    (only when a is heavy in R and b light in S). L*(HL): {c : V_TR(c, a, b) ≠ 0} ∩
    V̂^{L*(HL)}; the c come from the heavy C of T(·, a) (only when a is light in R and in T).
    Each side walks the shorter of the relation's row and its heavy list (module docstring).

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 0, 0], [1, 2, 3]), e([1, 6, 7], [5, 5, 5]), e([5], [0])], 8)
    >>> edge_candidates(fq, "V2^H(LH)*")((0, 1)), edge_candidates(fq, "V2^L*(HL)")((0, 1))
    ([5], [])
    """
    _require(fq, "edge_counts")
    roots = dict(EDGE_I2)
    if tree not in roots:
        raise ValueError(f"no Δ2 hop-union tree {tree!r}; choose from {sorted(roots)}")
    spec = next(t for t in sp.trees("edge_counts") if t.root == tree)
    inner_spec, inner = fq.spec(spec.inner), fq.view(spec.inner)
    top = fq.view(roots[tree]).dense

    def from_s(a: int, b: int) -> list[int]:  # V_RS = R^H(a, b) · S^{LH}(b, c)
        if _flag(fq, R, 0, a) != 1 or _flag(fq, S, 0, b) != 0:
            return []
        return _heavy_neighbours(fq, S, 0, b)

    def from_t(a: int, b: int) -> list[int]:  # V_TR = T^{HL}(c, a) · R^L(a, b)
        if _flag(fq, R, 0, a) != 0 or _flag(fq, T, 1, a) != 0:
            return []
        return _heavy_neighbours(fq, T, 1, a)

    source = from_s if tree == "V2^H(LH)*" else from_t

    def candidates(t: tuple[int, int]) -> list[int]:
        a, b = t
        out = []
        for c in sorted(source(a, b)):
            if c < top.shape[0] and top[c] != 0 and \
                    _view_value(inner, inner_spec, {A: a, B: b, C: c}) != 0:
                out.append(c)
        return out

    return candidates


def vertex_candidates(fq: FreeQueries) -> Callable[[int], list[tuple[int, int]]]:
    """CandidateBuckets^{(LH)*(HL)}(a) of Figure 15: {(b, c) : V_TR(c, a, b) ≠ 0} ∩ root keys,
    from b ∈ R^{LH}(a, ·) and c ∈ T^{HL}(·, a) (a light in R and in T), sorted.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"vertex_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 3, 4], [1, 1, 1]), e([1], [2]), e([2, 2, 2], [0, 6, 7])], 8)
    >>> vertex_candidates(fq)(0), vertex_candidates(fq)(3)
    ([(1, 2)], [])
    """
    _require(fq, "vertex_counts")
    tree = sp.trees("vertex_counts")[0]
    root_spec, root = fq.spec(tree.root), fq.view(tree.root)
    inner_spec, inner = fq.spec(tree.inner), fq.view(tree.inner)

    def candidates(a: int) -> list[tuple[int, int]]:
        if _flag(fq, R, 0, a) != 0 or _flag(fq, T, 1, a) != 0:
            return []
        bs = _heavy_neighbours(fq, R, 0, a)  # R^{LH}(a, b): b heavy in R
        cs = _heavy_neighbours(fq, T, 1, a)  # T^{HL}(c, a): c heavy in T
        out = []
        for b in sorted(bs):
            for c in sorted(cs):
                by_var = {A: a, B: b, C: c}
                if _view_value(root, root_spec, by_var) != 0 and \
                        _view_value(inner, inner_spec, by_var) != 0:
                    out.append((b, c))
        return out

    return candidates


# ---------------------------------------------------------------------- Figure 13 / 15 sets
def edge_iterators(fq: FreeQueries) -> list[Any]:
    """I1 ∪ I2 of Figure 13 (lines 2-3), freshly opened: five :class:`ViewIterator` over the
    materialized Δ2 views, then two :class:`HopUnion` (H(LH)*, L*(HL)) whose buckets are the C
    values of the 1-ary roots, in increasing order. Elements are (a, b) tuples.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 0, 0], [1, 2, 3]), e([1, 6, 7], [5, 5, 5]), e([5], [0])], 8)
    >>> [(it.name, len(it.sources)) for it in edge_iterators(fq)[5:]]
    [('V2^H(LH)*', 1), ('V2^L*(HL)', 0)]
    """
    _require(fq, "edge_counts")
    its: list[Any] = [ViewIterator(fq, name, (A, B)) for name in EDGE_I1]
    for tree, top in EDGE_I2:
        bucket_ids = np.flatnonzero(fq.view(top).dense).tolist()
        sources = {c: EdgeBucket(fq, tree, c) for c in bucket_ids}
        its.append(HopUnion(tree, sources, edge_candidates(fq, tree)))
    return its


def vertex_iterators(fq: FreeQueries) -> list[Any]:
    """I1 ∪ I2 of Figure 15 (lines 2-3), freshly opened: six :class:`ViewIterator` over the
    1-ary Δ1 views, then one :class:`HopUnion` whose buckets are the (b, c) keys of
    V1^(LH)*(HL) in key order. Elements are vertex ids.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"vertex_counts"}, [Fraction(1, 3)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 3, 4], [1, 1, 1]), e([1], [2]), e([2, 2, 2], [0, 6, 7])], 8)
    >>> its = vertex_iterators(fq)
    >>> [it.next() for it in its]
    [EOF, EOF, EOF, EOF, EOF, EOF, 0]
    """
    _require(fq, "vertex_counts")
    its: list[Any] = [ViewIterator(fq, name, (A,)) for name in VERTEX_I1]
    root_spec, root = fq.spec(VERTEX_I2), fq.view(VERTEX_I2)
    cols, _ = root.items()
    by_var = dict(zip(root_spec.key, (c.tolist() for c in cols)))
    sources = {(b, c): VertexBucket(fq, (b, c)) for b, c in zip(by_var[B], by_var[C])}
    its.append(HopUnion(VERTEX_I2, sources, vertex_candidates(fq)))
    return its


# ---------------------------------------------------------------------- enumerations
def enumerate_triangles(fq: FreeQueries) -> Iterator[tuple[tuple[int, int, int], int]]:
    """Δ3 (Prop 22, digest §5.5): yield ((a, b, c), multiplicity) for every triangle, once.

    The listing views D3_HHH and D3_LLL first, then the view trees of ``specs.trees``: for
    each root key, each third variable of the inner 3-ary view's row, with multiplicity
    inner · lookup relation (e.g. V_RS(a, b, c) · T(c, a)). The five views are disjoint.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"triangles"}, [Fraction(1, 2)] * 3)
    >>> e = lambda a, b, m=1: (np.array(a), np.array(b), np.full(len(a), m, np.int64))
    >>> fq.build([e([0, 0], [1, 2]), e([1, 2], [2, 2], 2), e([2], [0])], 3)
    >>> sorted(enumerate_triangles(fq))
    [((0, 1, 2), 2), ((0, 2, 2), 2)]
    """
    _require(fq, "triangles")
    for name in ("D3_HHH", "D3_LLL"):
        spec = fq.spec(name)
        cols, vals = fq.view(name).items()
        by_var = dict(zip(spec.key, (c.tolist() for c in cols)))
        yield from zip(zip(by_var[A], by_var[B], by_var[C]), vals.tolist())
    for tree in sp.trees("triangles"):
        rspec, root = fq.spec(tree.root), fq.view(tree.root)
        ispec, inner = fq.spec(tree.inner), fq.view(tree.inner)
        third = ispec.key[2]
        k = tree.lookup
        cols, _ = root.items()
        for key in zip(*(c.tolist() for c in cols)):
            abc = dict(zip(rspec.key, key))
            _, ws, vals = inner.rows(_one(abc[ispec.key[0]]), _one(abc[ispec.key[1]]))
            for w, v in zip(ws.tolist(), vals.tolist()):
                abc[third] = w
                m = v * _rel_value(fq, k, abc[k], abc[(k + 1) % 3])
                yield (abc[A], abc[B], abc[C]), m


def enumerate_edges(fq: FreeQueries) -> Iterator[tuple[tuple[int, int], int]]:
    """Δ2 by Figure 13 ``EnumerateBinary``: yield ((a, b), multiplicity), each pair once.

    UnionNext over :func:`edge_iterators` (lines 2-4); the multiplicity m1 + m2 + m3 (lines
    5-7) by :func:`~gpu_ivm.queries.results.edge_lookup`. Delay O(N^{min{ε,1-ε}}) in the RAM
    model (Prop 26).

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"edge_counts"}, [Fraction(1, 2)] * 3)
    >>> e = lambda a, b: (np.array(a), np.array(b), np.ones(len(a), np.int64))
    >>> fq.build([e([0, 0, 0, 0], [1, 2, 3, 4]), e([1, 2], [5, 5]), e([5], [0])], 6)
    >>> list(enumerate_edges(fq))
    [((0, 1), 1), ((0, 2), 1)]
    """
    for a, b in union_iter(edge_iterators(fq)):
        yield (a, b), int(rs.edge_lookup(fq, _one(a), _one(b))[0])


def enumerate_vertices(fq: FreeQueries) -> Iterator[tuple[int, int]]:
    """Δ1 by Figure 15 ``EnumerateUnary``: yield (a, multiplicity), each vertex once.

    UnionNext over :func:`vertex_iterators` (lines 2-4); the multiplicity m1 + m2 (lines 5-6)
    by :func:`~gpu_ivm.queries.results.vertex_lookup`. Delay O(N^{2·min{ε,1-ε}}) in the RAM
    model (Prop 30).

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> fq = FreeQueries({"vertex_counts"}, [Fraction(1, 2)] * 3)
    >>> e = lambda a, b, m=1: (np.array(a), np.array(b), np.full(len(a), m, np.int64))
    >>> fq.build([e([0, 3], [1, 1]), e([1], [2], 3), e([2, 2], [0, 3])], 4)
    >>> sorted(enumerate_vertices(fq))
    [(0, 3), (3, 3)]
    """
    for a in union_iter(vertex_iterators(fq)):
        yield a, int(rs.vertex_lookup(fq, _one(a))[0])
