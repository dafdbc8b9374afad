"""The triangle CQAPs of the query engine on the triangle engine (IVM^ε, O(√N) per update).

Issue 17's strategy choice: a query whose body is exactly three binary atoms forming a
triangle over three variables (up to renaming, atom order and the argument order of each
atom; self-joins included) is a *triangle query*, whatever its head: the total count
``Q( | ) = R(A,B), S(B,C), T(C,A)``, the per-value counts ``Q(A | )``, the per-pair counts
``Q(A,B | )``, the listing ``Q(A,B,C | )``, and every access pattern over them (``Q( | A)``,
``Q(B | A)``, ``Q(B,C | A)``, ``Q( | A,B)``, ``Q(C | A,B)``, ``Q( | A,B,C)``, any renaming).
:func:`triangle_roles` picks which query variable plays each of the
:class:`~gpu_ivm.relation_engine.RelationEngine`'s a, b and c (the free variables first,
inputs before outputs: every permutation of the three is a triangle again), and
:func:`triangle_mapping` maps each atom onto one of its relations R(a,b), S(b,c), T(c,a): the
atom over {a, b} is R, over {b, c} S, over {c, a} T; an atom whose arguments run the other way
is fed to its slot with its columns transposed. The same relation may fill several slots
(the self-join ``E(A,B), E(B,C), E(C,A)`` feeds E as R, S and T, each with its own
orientation; nothing assumes E symmetric), and every update to it goes to each slot it
fills, in one RelationEngine batch (which applies its phases in turn, so the cross terms of a
self-join are counted).

How each pattern is answered (free variables in the roles above; the RelationEngine keeps
the count and, through ``maintain=``, one of Δ1(a) = Σ_{b,c} R·S·T, Δ2(a,b) = Σ_c R·S·T or
Δ3(a,b,c) = R·S·T; its ids are decoded back to the relations' values):

=====================  =================  ==============================================
pattern                ``maintain=``      a request
=====================  =================  ==============================================
``Q( | )``             (the count)        the count
``Q(A | )``            vertex_counts      the listing of Δ1 (its nonzero values)
``Q( | A)``            vertex_counts      a lookup of Δ1(a)
``Q(A,B | )``          edge_counts        the listing of Δ2
``Q( | A,B)``          edge_counts        a lookup of Δ2(a,b)
``Q(B | A)``           edge_counts        the b with R(a,b) ≠ 0 (the base relation of
                                          the R slot, O(deg_R(a)) rows), each looked up
                                          in Δ2(a,b), zeros dropped
``Q(A,B,C | )``        triangles          the listing of Δ3
``Q(B,C | A)``         triangles          Δ3's tuples with this a
                                          (``RelationEngine.triangles_of``)
``Q(C | A,B)``         (the count)        from the base relations: R(a,b) looked up,
                                          then c expanded through the smaller of
                                          S(b,·) and T(·,a) and looked up in the other
``Q( | A,B,C)``        (the count)        R(a,b)·S(b,c)·T(c,a), three lookups
=====================  =================  ==============================================

A query without inputs has every answer in one request (or in each row of a request table),
so its listing is output-sensitive over all of Δ1, Δ2 or Δ3, as its answer is. ``count()``
is the triangle count Q for every pattern (the answers' multiplicities summed over all
inputs and outputs); ``count(inputs)`` and ``exists`` take Q per request without inputs, the
lookup where every free variable is an input, and the sum of the request's answers
otherwise (``Q(B | A)``, ``Q(B,C | A)``, ``Q(C | A,B)``: Δ1 or Δ2 is not kept beside them).

:class:`TriangleQueryEngine` has the query engine's public surface for such a query:
``load`` / ``apply`` read tables with :class:`~gpu_ivm.cq.engine.Engine`'s readers (the same
formats, column names and errors) and refuse, whole, a batch that would make a base
multiplicity negative, as ``Engine`` does (so the multiplicities stay >= 0, which Δ1, Δ2 and
Δ3 need); ``count`` / ``request`` / ``exists`` / ``cursor`` answer with ``Engine``'s return
shapes, row order and pagination (:class:`~gpu_ivm.cq.requests.RequestCursor`). It keeps the
base relations itself (sorted runs, for the negative-multiplicity check, the patterns read
from them and snapshots), so its snapshots are the query engine's format: ``Engine.restore``
and :meth:`TriangleQueryEngine.restore` read each other's.

The ε of the triangle engine is its own (default ``"auto"``, picked per relation from the
degree distribution; Δ1, Δ2 and Δ3 keep ε = 1/2) and its adaptive recompute path is on;
``backend`` goes to the RelationEngine (``backend="cuda"`` needs a device), and so does
``mode`` for the patterns without ``maintain=`` (the RelationEngine's insert-only mode keeps
the count only; for the others it runs in the general mode and the insert-only guarantee is
this class's reader's, which refuses a delete as ``Engine`` does).

:func:`gpu_ivm.cq.factory.engine` and ``gpu-ivm query`` choose this class for a triangle
query (``strategy="view_trees"`` / ``--strategy view-trees`` keeps the view trees);
``Engine(query)`` itself is always the view-tree engine.

>>> triangle_mapping("Q( | ) = E(X,Y), E(Z,Y), E(Z,X)")
[('E', False), ('E', True), ('E', False)]
>>> triangle_roles("Q(C | A,B) = R(A,B), S(B,C), T(C,A)")
('A', 'B', 'C')
>>> q = "Q(B | ) = E(A,B), E(B,C), E(C,A)"
>>> triangle_roles(q), triangle_mapping(q)
(('B', 'A', 'C'), [('E', True), ('E', True), ('E', True)])
>>> triangle_mapping("Q( | ) = R(A,B), S(B,C), T(C,D), U(D,A)") is None
True
>>> eng = TriangleQueryEngine("Q( | ) = R(A,B), S(B,C), T(C,A)")
>>> eng.load(R={"a": [1], "b": [2]}, S={"b": [2], "c": [3]}, T={"c": [3], "a": [1]})
>>> eng.apply({"T": {"c": [3], "a": [1], "mult": [2]}})
>>> eng.count(), eng.request().to_pydict()
(3, {'request': [0], 'mult': [3]})
>>> eng = TriangleQueryEngine("Q(B,C | A) = R(A,B), S(B,C), T(C,A)")
>>> eng.load(R={"a": [1, 1], "b": [2, 4]}, S={"b": [2, 4], "c": [3, 3]},
...          T={"c": [3], "a": [1], "mult": [2]})
>>> eng.request({"A": [1, 7, 1]}).to_pydict()
{'request': [0, 0, 2, 2], 'B': [2, 4, 2, 4], 'C': [3, 3, 3, 3], 'mult': [2, 2, 2, 2]}
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from ..errors import InputError
from . import ops
from .engine import REQ, Engine, UnsupportedQueryError
from .lsm import LsmRel
from .ops import check_backend
from .planner import plan
from .requests import RequestPaging
from .syntax import Query, parse_query
from .zrel import ZRel, checked_add, consolidate, empty

__all__ = ["TriangleQueryEngine", "is_triangle_count", "is_triangle_query",
           "prefers_triangle_engine", "triangle_mapping",
           "triangle_roles"]

SLOTS = ("R", "S", "T")
ROLES = ("a", "b", "c")
SLOT_ROLES = (("a", "b"), ("b", "c"), ("c", "a"))  # R(a,b), S(b,c), T(c,a)


def _parsed(query: str | Query) -> Query:
    return parse_query(query) if isinstance(query, str) else query


def triangle_roles(query: str | Query) -> tuple[str, str, str] | None:
    """The query variables that play the RelationEngine's a, b and c for a triangle query
    (three binary atoms over three variables, each pair of variables in exactly one atom):
    the free variables first, inputs before outputs, each in head order, then the others in
    order of first appearance; None for any other query."""
    q = _parsed(query)
    atoms = q.atoms
    if len(atoms) != 3:
        return None
    if any(len(a.variables) != 2 or a.variables[0] == a.variables[1] for a in atoms):
        return None
    seen = list(dict.fromkeys(v for a in atoms for v in a.variables))
    if len(seen) != 3 or len({frozenset(a.variables) for a in atoms}) != 3:
        return None
    free = [*q.inputs, *q.outputs]
    a, b, c = free + [v for v in seen if v not in free]
    return a, b, c


def triangle_mapping(query: str | Query) -> list[tuple[str, bool]] | None:
    """For a triangle query, ``[(relation, transposed)]`` for the slots R, S, T of the
    RelationEngine under :func:`triangle_roles` (``transposed``: the atom's arguments are fed
    as (dst, src)); None for any other query."""
    q = _parsed(query)
    roles = triangle_roles(q)
    if roles is None:
        return None
    var = dict(zip(ROLES, roles))
    pairs = [frozenset(a.variables) for a in q.atoms]
    out = []
    for first, second in SLOT_ROLES:
        u, w = var[first], var[second]
        a = q.atoms[pairs.index(frozenset((u, w)))]
        out.append((a.relation, a.variables != (u, w)))
    return out


def is_triangle_query(query: str | Query) -> bool:
    """Whether :class:`TriangleQueryEngine` maintains ``query`` (a triangle, any head)."""
    return triangle_roles(query) is not None


def prefers_triangle_engine(query: str | Query) -> bool:
    """Whether the planner's ``strategy="auto"`` runs ``query`` on :class:`TriangleQueryEngine`:
    a triangle query, unless it has no outputs and two or three inputs.

    ``Q( | A,B)`` and ``Q( | A,B,C)`` only look a pair or a triple up, which the view trees
    maintain for less. Measured with ``python -m bench.cq_heads --seed S`` for S = 5, 6, 7
    (uniform relations of 50,000 tuples over 3,000 values, batches of 1,000 mixed updates;
    docs/queries-cq.md): the view trees' batch took 0.56-0.63x and 0.35-0.37x the triangle
    engine's; for every other head the triangle engine's batch was 1.14-2.45x faster, with
    requests as fast or faster except ``Q(B | A)`` (0.63-0.85 against 0.38-0.50 ms for 200
    requests).

    >>> prefers_triangle_engine("Q(C | A,B) = R(A,B), S(B,C), T(C,A)")
    True
    >>> prefers_triangle_engine("Q( | A,B) = R(A,B), S(B,C), T(C,A)")
    False
    """
    q = _parsed(query)
    return (bool(q.outputs) or len(q.inputs) <= 1) and is_triangle_query(q)


def is_triangle_count(query: str | Query) -> bool:
    """Whether ``query`` is the triangle count ``Q( | ) = R(A,B), S(B,C), T(C,A)`` (up to
    renaming): a triangle query without inputs or outputs."""
    q = _parsed(query)
    return not q.inputs and not q.outputs and is_triangle_query(q)


def _pattern(q: Query) -> tuple[list[str], str]:
    """``(maintain=, how a request is answered)`` for a triangle query's head."""
    k, ins = len(q.inputs) + len(q.outputs), len(q.inputs)
    if k == 0:
        return [], "the triangle count"
    if k == 1:
        return ["vertex_counts"], ("a lookup of the per-a count Delta1(a)" if ins else
                                   "the listing of the per-a counts Delta1")
    if k == 2:
        return ["edge_counts"], [
            "the listing of the per-(a,b) counts Delta2",
            "the b with R(a,b) != 0 in the base relation of R, each looked up in "
            "Delta2(a,b)",
            "a lookup of the per-(a,b) count Delta2(a,b)"][ins]
    return [["triangles"], ["triangles"], [], []][ins], [
        "the listing of the triangles Delta3 with multiplicities",
        "the triangles Delta3 with this a (RelationEngine.triangles_of)",
        "the base relations: R(a,b) looked up, c expanded through the smaller of S(b,.) "
        "and T(.,a) and looked up in the other",
        "the base relations: R(a,b)*S(b,c)*T(c,a), three lookups"][ins]


def _ints(col) -> np.ndarray:
    """An Arrow column of the RelationEngine's results as int64 (an empty one may come
    typed otherwise)."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


class _SlotView:
    """Slot ``k``'s base relation over its roles, with the two methods the delta join asks a
    relation for (``join_from``, ``count_from``); the columns are renamed on the way in and
    out (a transposed slot reads its relation's columns the other way)."""

    def __init__(self, eng: TriangleQueryEngine, k: int) -> None:
        self.eng, self.k = eng, k
        self.vars = SLOT_ROLES[k]

    def join_from(self, left: ZRel) -> ZRel:
        return self.eng._join_slot(self.k, left)

    def count_from(self, left: ZRel) -> np.ndarray:
        eng = self.eng
        return eng.base[eng.mapping[self.k][0]].count_from(eng._slot_left(self.k, left))


class TriangleQueryEngine(RequestPaging):
    """A triangle query on :class:`~gpu_ivm.relation_engine.RelationEngine`, with
    :class:`~gpu_ivm.cq.engine.Engine`'s interface (see the module docstring).

    Parameters as for ``Engine`` (``query``, ``relations``, ``mode``, ``backend``), and
    ``epsilon`` (default ``"auto"``) and ``adaptive`` (default True) for the RelationEngine.
    Raises :class:`~gpu_ivm.cq.engine.UnsupportedQueryError` for a query that is not a
    triangle query.
    """

    def __init__(self, query: str | Query, relations: Mapping[str, list[str]] | None = None,
                 *, mode: str = "general", backend: str = "cpu", epsilon="auto",
                 adaptive: bool = True):
        from ..insert_only import check_mode

        self.mode = check_mode(mode)
        self._backend_name = check_backend(backend)
        # the reader: Engine's table reading and validation (its views are never used)
        self._reader = Engine(query, relations)
        self.query: Query = self._reader.query
        roles = triangle_roles(self.query)
        if roles is None:
            raise UnsupportedQueryError(
                f"query {self.query} is not a triangle query (three binary atoms forming a "
                "triangle, as Q( | ) = R(A,B), S(B,C), T(C,A), the triangle count, up to "
                "renaming, with any head)")
        self.roles = roles
        self.role_of = {v: r for r, v in zip(ROLES, roles)}
        self.mapping = triangle_mapping(self.query)
        self.maintain, self.answered_by = _pattern(self.query)
        self.plan = plan(self.query)
        self.triangle_epsilon = epsilon
        self.adaptive = adaptive
        self._ops = ops.for_backend("cpu")  # the base runs: host-side bookkeeping
        self.insert_only_active = self.mode != "general"
        self.switched_at: int | None = None
        self._version = 0
        self.batches_applied = 0
        self.base: dict[str, LsmRel] = {}
        self.triangles = self._new_engine()  # fails early on an unavailable backend
        self._rebuild(self._reader._empty_base())

    # ------------------------------------------------------------------ the surface
    @property
    def columns(self) -> dict:
        return self._reader.columns

    @property
    def schemas(self) -> dict:
        return self._reader.schemas

    @property
    def backend(self):
        return self.triangles.backend

    def _new_engine(self):
        from ..relation_engine import RelationEngine

        # the insert-only RelationEngine keeps the count only: with Delta1/2/3 it runs in
        # the general mode (this class's reader refuses the deletes of the insert-only mode)
        mode = self.mode if not self.maintain else "general"
        return RelationEngine(epsilon=self.triangle_epsilon, backend=self._backend_name,
                              adaptive=self.adaptive, mode=mode,
                              maintain=self.maintain or None)

    def _slot_table(self, rel: ZRel, transposed: bool) -> dict | None:
        if not len(rel):
            return None
        s, d = (1, 0) if transposed else (0, 1)
        return {"src": np.ascontiguousarray(rel.keys[:, s]),
                "dst": np.ascontiguousarray(rel.keys[:, d]), "mult": rel.mult}

    def _rebuild(self, base: dict[str, ZRel]) -> None:
        """A fresh RelationEngine loaded from the base relations ``base`` (name -> ZRel)."""
        eng = self._new_engine()
        tables = {slot: self._slot_table(base[name], t)
                  for slot, (name, t) in zip(SLOTS, self.mapping)}
        eng.load(**{k: v for k, v in tables.items() if v is not None})
        self.triangles = eng
        self.base = {name: LsmRel(rel) for name, rel in base.items()}

    def load(self, **tables) -> None:
        """As :meth:`Engine.load`: replace the database; InputError (state untouched) on bad
        input or a negative multiplicity."""
        with self._reader._reading(fresh=True):
            self._load(**tables)

    def _load(self, **tables) -> None:
        base = self._reader._empty_base()
        deletes: list | None = [] if self.mode == "insert_only" else None
        with ops.using(self._ops):
            for name, table in tables.items():
                rel = self._reader._read(name, table, need_mult=False, deletes=deletes)
                if deletes:
                    Engine._refuse_delete(*deletes[0], what="nothing was loaded")
                self._reader._refuse_negative(name, rel.keys, rel.mult)
                base[name] = rel
            self._rebuild(base)
        self._version += 1
        self.batches_applied = 0
        self.insert_only_active, self.switched_at = self.mode != "general", None

    def apply(self, batch: Mapping[str, object]) -> None:
        """As :meth:`Engine.apply`: ``{relation: table with a mult column}``, checked whole
        first (a batch that would make a multiplicity negative is refused); on any error
        nothing changes."""
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        with self._reader._reading():
            self._apply(batch)

    def _apply(self, batch: Mapping[str, object]) -> None:
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        with ops.using(self._ops):
            deletes: list | None = [] if self.insert_only_active else None
            deltas = {name: self._reader._read(name, table, need_mult=True, deletes=deletes)
                      for name, table in batch.items()}
            if deletes and self.mode == "insert_only":
                Engine._refuse_delete(*deletes[0], what="nothing was applied")
            for name, d in deltas.items():
                neg = d.mult < 0
                if neg.any():
                    dc = ZRel(d.vars, d.keys[neg], d.mult[neg])
                    after = checked_add(self.base[name].get(dc), dc.mult)
                    self._reader._refuse_negative(name, dc.keys, after)
            rels, src, dst, mult = [], [], [], []
            for slot, (name, t) in zip(SLOTS, self.mapping):
                d = deltas.get(name)
                tab = None if d is None else self._slot_table(d, t)
                if tab is not None:
                    rels.append(np.full(len(d), slot))
                    src.append(tab["src"])
                    dst.append(tab["dst"])
                    mult.append(tab["mult"])
            saved = [(rel, rel.state()) for rel in self.base.values()]
            try:
                for name, d in deltas.items():
                    if len(d):
                        self.base[name].merge(d)
                if rels:  # the triangle engine's apply is atomic: it goes last
                    self.triangles.apply({"rel": np.concatenate(rels),
                                          "src": np.concatenate(src),
                                          "dst": np.concatenate(dst),
                                          "mult": np.concatenate(mult)})
            except BaseException:
                for rel, state in saved:
                    rel.restore(state)
                raise
        if deletes:
            self.insert_only_active, self.switched_at = False, self.batches_applied + 1
        self._version += 1
        self.batches_applied += 1

    # ------------------------------------------------------------------ requests
    def count(self, inputs=None) -> int | pa.Table:
        """As :meth:`Engine.count`: the triangle count (every pattern's answers summed over
        all inputs and outputs), or per request of a request table (see the module
        docstring for how)."""
        if inputs is None:
            return int(self.triangles.count())
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "count": totals})

    def exists(self, inputs=None) -> pa.Table:
        """As :meth:`Engine.exists` (the multiplicities are positive: an answer exists
        exactly when the request's total is not zero)."""
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "exists": totals != 0})

    def _request_totals(self, inputs) -> tuple[np.ndarray, int]:
        """Per request, its answers' multiplicities summed: Q without inputs, the lookup
        where every free variable is an input, the request's answers summed otherwise."""
        requests, n = self._reader._requests(inputs)
        q = self.query
        if not q.inputs:
            return np.full(n, int(self.triangles.count()), dtype=np.int64), n
        with ops.using(self._ops):
            if not q.outputs:
                return self._lookup(self._to_roles(requests)), n
            per = self._answer_rel(requests).marginalize((REQ,))
        totals = np.zeros(n, np.int64)
        totals[per.keys[:, 0]] = per.mult
        return totals, n

    def _answers(self, inputs) -> tuple[pa.Table, int]:
        """The answers of a request table as ``Engine`` gives them: ``request, outputs...,
        mult``, sorted by request, then by the outputs in head order."""
        requests, n = self._reader._requests(inputs)
        with ops.using(self._ops):
            out = self._answer_rel(requests)
        return self._reader._table(out), n

    def _answer_rel(self, requests: ZRel) -> ZRel:
        """The answers as a relation over (request, outputs...) in head order."""
        q = self.query
        n = len(requests)
        head = (REQ, *q.outputs)
        if not q.outputs:  # one row per request: its lookup (Q without inputs)
            mult = self._lookup(self._to_roles(requests))
            keep = mult != 0
            return ZRel(head, np.flatnonzero(keep).astype(np.int64).reshape(-1, 1), mult[keep])
        if not q.inputs:  # every request has the whole listing
            lst = self._listing().reorder(tuple(self.role_of[v] for v in q.outputs))
            m = len(lst)
            keys = np.concatenate([np.repeat(np.arange(n, dtype=np.int64), m).reshape(-1, 1),
                                   np.tile(lst.keys, (n, 1))], axis=1)
            return ZRel(head, keys, np.tile(lst.mult, n))
        rel = self._expand(self._to_roles(requests))
        cols = [rel.vars.index(v) for v in (REQ, *(self.role_of[v] for v in q.outputs))]
        return consolidate(head, rel.keys[:, cols], rel.mult)

    def _to_roles(self, requests: ZRel) -> ZRel:
        """A request relation (request, inputs...) with the inputs named by their roles."""
        return ZRel((REQ, *(self.role_of[v] for v in requests.vars[1:])), requests.keys,
                    requests.mult)

    def _lookup(self, req: ZRel) -> np.ndarray:
        """Per request (every free variable an input; ``req`` over request and roles), its
        one answer's multiplicity."""
        n, k = len(req), len(req.vars) - 1
        tri = self.triangles
        if k == 0:
            return np.full(n, int(tri.count()), dtype=np.int64)
        if not n:
            return np.zeros(0, np.int64)
        if k == 1:
            return np.asarray(tri.vertex_count(np.ascontiguousarray(req.column("a"))),
                              np.int64)
        if k == 2:
            return np.asarray(tri.edge_count(np.ascontiguousarray(req.column("a")),
                                             np.ascontiguousarray(req.column("b"))), np.int64)
        got = self._join_slots(req, [0, 1, 2]).marginalize((REQ,))
        out = np.zeros(n, np.int64)
        out[got.keys[:, 0]] = got.mult
        return out

    def _listing(self) -> ZRel:
        """Δ1, Δ2 or Δ3 (no inputs: the free variables are the outputs), over their roles."""
        tri = self.triangles
        k = len(self.query.outputs)
        if k == 1:
            t = tri.result_table("vertex_counts")
            return consolidate(("a",), _ints(t["vertex"]).reshape(-1, 1),
                               _ints(t["triangles"]))
        if k == 2:
            t = tri.result_table("edge_counts")
            return consolidate(("a", "b"), np.stack([_ints(t["src"]), _ints(t["dst"])], 1),
                               _ints(t["triangles"]))
        t = tri.result_table("triangles")
        return consolidate(ROLES, np.stack([_ints(t[r]) for r in ROLES], 1), _ints(t["mult"]))

    def _expand(self, req: ZRel) -> ZRel:
        """The answers of requests with inputs and outputs (``req`` over request and the
        inputs' roles), over request and all the free variables' roles."""
        tri = self.triangles
        if len(req.vars) == 2 and len(self.query.outputs) == 1:  # Q(B | A): Delta2
            cand = self._join_slot(0, req)  # the b with R(a,b) != 0
            if not len(cand):
                return cand
            mult = np.asarray(tri.edge_count(np.ascontiguousarray(cand.column("a")),
                                             np.ascontiguousarray(cand.column("b"))),
                              np.int64)
            keep = mult != 0
            return ZRel(cand.vars, np.ascontiguousarray(cand.keys[keep]), mult[keep])
        if len(req.vars) == 2:  # Q(B,C | A): Delta3 through a
            a = np.unique(req.column("a"))
            t = tri.triangles_of(a) if len(a) else None
            if t is None or not t.num_rows:
                return empty((REQ, *ROLES))
            found = consolidate(ROLES, np.stack([_ints(t[r]) for r in ROLES], 1),
                                _ints(t["mult"]))
            return req.join(found)
        return self._join_slots(req, [0, 1, 2])  # Q(C | A,B): from the base relations

    # ------------------------------------------------------------------ the base relations
    def _slot_rename(self, k: int) -> dict[str, str]:
        """Slot ``k``'s roles -> the columns ``c0, c1`` of its base relation."""
        first, second = SLOT_ROLES[k]
        transposed = self.mapping[k][1]
        return {first: "c1" if transposed else "c0", second: "c0" if transposed else "c1"}

    def _slot_left(self, k: int, left: ZRel) -> ZRel:
        to_base = self._slot_rename(k)
        return ZRel(tuple(to_base.get(v, v) for v in left.vars), left.keys, left.mult)

    def _join_slot(self, k: int, left: ZRel) -> ZRel:
        """``left ⋈ slot k`` (``left`` over request and roles): a lookup where ``left`` has
        both of the slot's roles, an expansion through the base relation otherwise."""
        out = self.base[self.mapping[k][0]].join_from(self._slot_left(k, left))
        back = {c: r for r, c in self._slot_rename(k).items()}
        return ZRel(tuple(back.get(v, v) for v in out.vars), out.keys, out.mult)

    def _join_slots(self, rel: ZRel, slots: list[int]) -> ZRel:
        """``rel ⋈`` the slots ``slots`` by the view trees' delta join
        (:meth:`Engine._delta_join`, Generic Join with ``rel`` fixed: every lookup first,
        then each row expands through the slot in which it has the fewest matches), each
        slot's base relation seen over its roles (:class:`_SlotView`)."""
        return Engine._delta_join(rel, [_SlotView(self, k) for k in slots], (REQ, *ROLES))

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path, *, metadata: dict | None = None) -> dict:
        """The query engine's snapshot (:mod:`gpu_ivm.cq.snapshot`): the query and the base
        relations; ``Engine.restore`` reads it too."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path, *, backend: str = "cpu") -> TriangleQueryEngine:
        """A triangle engine restored from a query engine snapshot (its own or an
        ``Engine``'s) of a triangle query; a trade-off engine's snapshot is refused (it names
        ``TradeoffEngine.restore``)."""
        from .snapshot import load

        return load(path, cls, backend=backend)

    def explain(self) -> str:
        """The strategy chosen and why, the roles and the atoms' mapping, how a request is
        answered, then the view-tree plan that was not used."""
        rels = ", ".join(f"{slot} <- {name}{' transposed' if t else ''}"
                         for slot, (name, t) in zip(SLOTS, self.mapping))
        roles = ", ".join(f"{r} <- {v}" for r, v in zip(ROLES, self.roles))
        q = self.query
        what = ("the triangle count" if not q.inputs and not q.outputs else
                f"a triangle query with inputs ({', '.join(q.inputs) or 'none'}) and outputs "
                f"({', '.join(q.outputs) or 'none'})")
        eps = self.triangle_epsilon
        return "\n".join([
            "strategy: the triangle engine (IVM^eps, gpu_ivm.RelationEngine), chosen because "
            f"the query is {what}: three binary atoms forming a triangle over three "
            "variables; its updates cost O(sqrt N) per tuple, the view trees' delta of the "
            "cyclic component more",
            f"  roles: {roles}",
            f"  relations: {rels}",
            f"  maintain: {', '.join(self.maintain) or 'the count only'}",
            f"  a request: {self.answered_by}",
            f"  epsilon: {eps}{' (per relation, from the degrees)' if eps == 'auto' else ''}, "
            f"adaptive: {self.adaptive}, mode: {self.mode}, backend: {self._backend_name}",
            "view-tree plan (not used; strategy='view_trees' runs it):",
            self.plan.explain()])
