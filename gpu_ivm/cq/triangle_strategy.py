"""The triangle count of the query engine on the triangle engine (IVM^ε, O(√N) per update).

Issue 17's strategy choice: a query whose body is exactly three binary atoms forming a
triangle over three variables, with no inputs and no outputs, is the total triangle count
``Q( | ) = R(A,B), S(B,C), T(C,A)`` (up to renaming, atom order and the argument order of
each atom). :func:`triangle_mapping` recognizes it and maps each atom onto one of the
:class:`~gpu_ivm.relation_engine.RelationEngine`'s relations R(a,b), S(b,c), T(c,a): the
first atom is R, the atom that shares its second variable is S and the third is T; an atom
whose arguments run the other way is fed to its slot with its columns transposed. The same
relation may fill several slots (the self-join ``E(A,B), E(B,C), E(C,A)`` feeds E as R, S
and T, each with its own orientation; nothing assumes E symmetric), and every update to it
goes to each slot it fills, in one RelationEngine batch (which applies its phases in turn,
so the cross terms of a self-join are counted).

:class:`TriangleQueryEngine` has the query engine's public surface for such a query:
``load`` / ``apply`` read tables with :class:`~gpu_ivm.cq.engine.Engine`'s readers (the same
formats, column names and errors) and refuse, whole, a batch that would make a base
multiplicity negative, as ``Engine`` does; ``count`` / ``request`` / ``exists`` / ``cursor``
answer the one request a query without inputs has (or one per row of a request table)
with ``Engine``'s return shapes. It keeps the base relations itself (sorted runs, for the
negative-multiplicity check and for snapshots), so its snapshots are the query engine's
format: ``Engine.restore`` and :meth:`TriangleQueryEngine.restore` read each other's.

The ε of the triangle engine is its own (default ``"auto"``, picked per relation from the
degree distribution) and its adaptive recompute path is on; ``mode`` and ``backend`` go to
the RelationEngine as well (``backend="cuda"`` needs a device).

:func:`gpu_ivm.cq.tradeoff.engine` and ``gpu-ivm query`` choose this class for a recognized
query (``strategy="view_trees"`` / ``--strategy view-trees`` keeps the view trees);
``Engine(query)`` itself is always the view-tree engine.

>>> triangle_mapping("Q( | ) = E(X,Y), E(Z,Y), E(Z,X)")
[('E', False), ('E', True), ('E', False)]
>>> triangle_mapping("Q(A | ) = R(A,B), S(B,C), T(C,A)") is None
True
>>> eng = TriangleQueryEngine("Q( | ) = R(A,B), S(B,C), T(C,A)")
>>> eng.load(R={"a": [1], "b": [2]}, S={"b": [2], "c": [3]}, T={"c": [3], "a": [1]})
>>> eng.apply({"T": {"c": [3], "a": [1], "mult": [2]}})
>>> eng.count(), eng.request().to_pydict()
(3, {'request': [0], 'mult': [3]})
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from ..errors import InputError
from . import ops
from .engine import Engine, UnsupportedQueryError
from .lsm import LsmRel
from .ops import check_backend
from .planner import plan
from .requests import RequestPaging
from .syntax import Query, parse_query
from .zrel import ZRel, checked_add

__all__ = ["TriangleQueryEngine", "is_triangle_count", "triangle_mapping"]

SLOTS = ("R", "S", "T")


def triangle_mapping(query: str | Query) -> list[tuple[str, bool]] | None:
    """For the triangle count query, ``[(relation, transposed)]`` for the slots R, S, T of
    the RelationEngine (``transposed``: the atom's arguments are fed as (dst, src)); None for
    any other query."""
    q = parse_query(query) if isinstance(query, str) else query
    if q.inputs or q.outputs or len(q.atoms) != 3:
        return None
    atoms = q.atoms
    if any(len(a.variables) != 2 or a.variables[0] == a.variables[1] for a in atoms):
        return None
    if len({v for a in atoms for v in a.variables}) != 3:
        return None
    pairs = [frozenset(a.variables) for a in atoms]
    if len(set(pairs)) != 3:
        return None
    x, y = atoms[0].variables
    (z,) = {v for a in atoms for v in a.variables} - {x, y}
    out = [(atoms[0].relation, False)]
    for u, w in ((y, z), (z, x)):  # S(y, z), then T(z, x)
        a = atoms[pairs.index(frozenset((u, w)))]
        out.append((a.relation, a.variables != (u, w)))
    return out


def is_triangle_count(query: str | Query) -> bool:
    """Whether :class:`TriangleQueryEngine` maintains ``query``."""
    return triangle_mapping(query) is not None


class TriangleQueryEngine(RequestPaging):
    """The triangle count query on :class:`~gpu_ivm.relation_engine.RelationEngine`, with
    :class:`~gpu_ivm.cq.engine.Engine`'s interface (see the module docstring).

    Parameters as for ``Engine`` (``query``, ``relations``, ``mode``, ``backend``), and
    ``epsilon`` (default ``"auto"``) and ``adaptive`` (default True) for the RelationEngine.
    Raises :class:`~gpu_ivm.cq.engine.UnsupportedQueryError` for a query that is not the
    triangle count.
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
        mapping = triangle_mapping(self.query)
        if mapping is None:
            raise UnsupportedQueryError(f"query {self.query} is not the triangle count "
                                        "Q( | ) = R(A,B), S(B,C), T(C,A) (up to renaming)")
        self.mapping = mapping
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

        return RelationEngine(epsilon=self.triangle_epsilon, backend=self._backend_name,
                              adaptive=self.adaptive, mode=self.mode)

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
        base = self._reader._empty_base()
        deletes: list | None = [] if self.mode == "insert_only" else None
        with ops.using(self._ops):
            for name, table in tables.items():
                rel = self._reader._read(name, table, need_mult=False, deletes=deletes)
                if deletes:
                    Engine._refuse_delete(*deletes[0], what="nothing was loaded")
                Engine._refuse_negative(name, rel.keys, rel.mult)
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
                    Engine._refuse_negative(name, dc.keys, after)
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

    def count(self, inputs=None) -> int | pa.Table:
        """As :meth:`Engine.count`: the triangle count, or per request of a request table
        (every request has the same count: the query has no inputs)."""
        if inputs is None:
            return int(self.triangles.count())
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "count": totals})

    def _request_totals(self, inputs) -> tuple[np.ndarray, int]:
        _, n = self._reader._requests(inputs)
        return np.full(n, int(self.triangles.count()), dtype=np.int64), n

    def _answers(self, inputs) -> tuple[pa.Table, int]:
        totals, n = self._request_totals(inputs)
        keep = totals != 0
        return pa.table({"request": np.arange(n, dtype=np.int64)[keep],
                         "mult": totals[keep]}), n

    def exists(self, inputs=None) -> pa.Table:
        """As :meth:`Engine.exists`."""
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "exists": totals != 0})

    # ------------------------------------------------------------------ persistence
    def snapshot(self, path, *, metadata: dict | None = None) -> dict:
        """The query engine's snapshot (:mod:`gpu_ivm.cq.snapshot`): the query and the base
        relations; ``Engine.restore`` reads it too."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path, *, backend: str = "cpu") -> TriangleQueryEngine:
        """A triangle engine restored from a query engine snapshot (its own or an
        ``Engine``'s) of the triangle count query; a trade-off engine's snapshot is refused
        (it names ``TradeoffEngine.restore``)."""
        from .snapshot import load

        return load(path, cls, backend=backend)

    def explain(self) -> str:
        """The strategy chosen and why, the atoms' mapping, then the view-tree plan that was
        not used."""
        rels = ", ".join(f"{slot} <- {name}{' transposed' if t else ''}"
                         for slot, (name, t) in zip(SLOTS, self.mapping))
        eps = self.triangle_epsilon
        return "\n".join([
            "strategy: the triangle engine (IVM^eps, gpu_ivm.RelationEngine), chosen because "
            "the query is the triangle count: three binary atoms forming a triangle over three "
            "variables, no inputs, no outputs; its updates cost O(sqrt N) per tuple, the "
            "view trees' delta of the cyclic component more",
            f"  relations: {rels}",
            f"  epsilon: {eps}{' (per relation, from the degrees)' if eps == 'auto' else ''}, "
            f"adaptive: {self.adaptive}, mode: {self.mode}, backend: {self._backend_name}",
            "view-tree plan (not used; strategy='view_trees' runs it):",
            self.plan.explain()])
