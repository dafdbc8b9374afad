"""Batched view-tree maintenance of a CQAP, eps = 1.

One view tree per fracture component, built by τ (thesis Fig. 4.2) over an access-top variable
order: at each variable X a view ``V_X`` over ``bag(X) = dep(X) + X`` that joins X's atoms and
its children's marginals ``V'_Y = Σ_Y V_Y``. Hierarchical components use the ACC-TOP order:
for CQAP_0 queries every update step is a lookup-join (O(1) per delta tuple, Thm 3.11a), for
other hierarchical queries the delta joins expand (O(N^δ) per delta tuple, Thm 3.4).
Non-hierarchical components (up to 6 variables) use the access-top order of least static
width found by :mod:`gpu_ivm.cq.widths`, with the indicator projections that GYO* keeps
(:mod:`gpu_ivm.cq.indicators`): ``I_Z R`` is a leaf of the view it hangs under, kept from a
support count per Z value (distinct tuples of the atom with that value), and changes by ±1
when a batch takes a count from 0 or to 0; that change goes up the tree like a leaf delta.
A view whose relations form a cycle, or where a binary plan could pass through a join of
some of them larger than the AGM bound of all (:func:`~gpu_ivm.cq.wcoj.needs_wcoj`), is built
by a worst-case optimal join (Generic Join over the sorted keys, :mod:`gpu_ivm.cq.wcoj`),
in O(N^{ρ*(bag)}) candidates, so a view tree is built within the thesis's O(N^w); the
delta of such a view is joined the same way with the delta's atom fixed (each delta row
expands through the relation it has the fewest matches in). Every other view is built by
binary joins, each step taking the child that shares the most variables with what is joined
so far (a lookup before an expansion). A batch is applied one relation at a time, one atom
occurrence at a time (self-joins included), each step seeing the state left by the previous
one, which is the product rule without δR ⋈ δS cross terms.

Requests walk the free part of the access-top order: inputs filter, outputs expand through the
views' supports, and the multiplicity of each answer is the product of the views at the
boundary of the free part (COMPUTEM, Fig. 4.10). Components combine per request as a Cartesian
product.

Base multiplicities must stay non-negative (digest §0 item 10: with mixed signs a view entry
can cancel to 0 and hide answers); a batch that would make one negative is refused whole.

Modes (``mode=``, as for the triangle engines; digest ``paper-insert-only-vs-insert-delete.md``
§8a): ``"general"`` takes inserts and deletes. ``"insert_only"`` refuses a row with a negative
multiplicity (an :class:`~gpu_ivm.errors.InputError` naming the relation, the row and the tuple;
nothing changes). The state and the work are those of the general mode, which looks up only
the deletes of a batch to check them (at ε = 1 there is no heavy/light partition to drop, and
the runs of an insert-only stream never hold a cancelling tuple): the mode is the guarantee.
``"auto"`` runs insert-only until the first negative row, then goes on as ``"general"`` with
the same state (nothing to rebuild); :attr:`Engine.switched_at` says at which batch.

>>> eng = Engine("Q(B,C | A) = R(A,B), S(B,C)")
>>> eng.load(R={"a": [1, 1, 2], "b": [10, 11, 10]}, S={"b": [10, 10, 11], "c": [5, 6, 5]})
>>> eng.count()
5
>>> eng.request({"A": [1, 3]}).to_pydict()
{'request': [0, 0, 0], 'B': [10, 10, 11], 'C': [5, 6, 5], 'mult': [1, 1, 1]}
>>> eng.apply({"S": {"b": [10], "c": [5], "mult": [-1]}})
>>> eng.count(), eng.request({"A": [2]}).to_pydict()["C"]
(3, [6])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..errors import InputError
from . import ops
from .lsm import LsmRel
from .planner import VONode, dep_sets, plan
from .requests import Bound, SeekCursor, check_limit, first_per_request
from .syntax import Query
from .tables import value_columns
from .values import STR, ColumnKinds, ValueDict
from .wcoj import generic_join, needs_wcoj
from .zrel import ZRel, checked_add, checked_total, consolidate, empty, scalar

__all__ = ["Engine", "UnsupportedQueryError"]

REQ = "#request"
GROUP = "#group"  # a limited request's rows whose answers are cut apart


class UnsupportedQueryError(InputError):
    """The query parses but this engine cannot maintain it yet (e.g. not hierarchical)."""


@dataclass
class _Node:
    var: str
    dep: tuple[str, ...]
    children: list[_Node] = field(default_factory=list)
    atoms: list[int] = field(default_factory=list)
    parent: _Node | None = None
    indicators: list[int] = field(default_factory=list)  # ids into Engine.indicators

    @property
    def bag(self) -> tuple[str, ...]:
        return (*self.dep, self.var)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass
class _Component:
    roots: list[_Node]
    atom_ids: list[int]          # all atoms of the component
    nullary: list[int]           # atoms without variables (each its own component)
    inputs: list[str]
    outputs: list[str]
    home: dict[int, _Node]       # atom index -> the node it hangs under


def _convert(roots: list[VONode], comp) -> list[_Node]:
    dep = dep_sets(roots, comp)

    def rec(v: VONode, parent):
        n = _Node(v.var, tuple(dep[v.var]), atoms=list(v.atoms), parent=parent)
        n.children = [rec(c, n) for c in v.children]
        return n

    return [rec(r, None) for r in roots]


def _ones(rel: ZRel) -> ZRel:
    """``rel``'s support: its keys with multiplicity 1."""
    return ZRel(rel.vars, rel.keys, np.ones(len(rel), np.int64))


def _presence_change(rel: ZRel, old: np.ndarray, new: np.ndarray) -> ZRel:
    """The keys of ``rel`` whose value goes from 0 to nonzero (+1) or back (-1)."""
    d = (old == 0).astype(np.int64) * (new != 0) - (old != 0) * (new == 0)
    return ZRel(rel.vars, rel.keys[d != 0], d[d != 0])


class _IndicatorView:
    """An indicator projection read from its support counts (an :class:`LsmRel`): joins
    take the counts' support, so the indicator needs no relation of its own."""

    def __init__(self, counts: LsmRel) -> None:
        self.counts = counts
        self.vars = counts.vars

    def join_from(self, left: ZRel) -> ZRel:
        return self.counts.join_from(left, support=True)

    def count_from(self, left: ZRel) -> np.ndarray:
        return self.counts.count_from(left)

    def zrel(self) -> ZRel:
        return _ones(self.counts.zrel())


def _indicator(counts):
    """The indicator of support ``counts``: a ZRel of ones while views are built from
    ZRels, an :class:`_IndicatorView` over the kept counts afterwards."""
    return _ones(counts) if isinstance(counts, ZRel) else _IndicatorView(counts)


def _on_backend(method: Callable) -> Callable:
    """Run an :class:`Engine` method with the engine's operator set in force
    (:func:`gpu_ivm.cq.ops.using`)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with ops.using(self._ops):
            return method(self, *args, **kwargs)

    return run


class Engine:
    """Maintain ``query`` under batches of inserts and deletes; answer access requests.

    Parameters
    ----------
    query : str or Query
        ``Q(outputs | inputs) = atoms`` (see :mod:`gpu_ivm.cq.syntax`).
    relations : mapping, optional
        Relation name -> column names to read from its tables, in atom-argument order. Without
        it a table's columns other than ``mult`` are taken in their order.
    mode : {"general", "insert_only", "auto"}, default "general"
        See the module docstring; ``"insert-only"`` is accepted too.
    backend : {"cpu", "cuda"}, default "cpu"
        Where the operators run (:mod:`gpu_ivm.cq.ops`): the CPU's Numba kernels, or their
        CUDA twins (lookup, expand-join, merge, group-and-sum, Generic Join levels, and the
        sort by the array module's ``lexsort``). The engine's state and its host-side glue
        stay in host memory on both, so on a device every operator copies its arguments over
        and its results back (see docs/gpu.md). ``"cuda"`` without a device, and without
        Numba's CUDA simulator, raises :class:`~gpu_ivm.errors.BackendUnavailableError`; the
        ``GPU_IVM_BACKEND`` variable is not read.

    Examples
    --------
    >>> eng = Engine("Q(B | A) = R(A,B)", mode="insert_only")
    >>> eng.load(R={"a": [1], "b": [2]})
    >>> eng.apply({"R": {"a": [1], "b": [3], "mult": [1]}})
    >>> eng.count(), eng.insert_only_active
    (2, True)
    """

    def __init__(self, query: str | Query, relations: Mapping[str, list[str]] | None = None,
                 *, mode: str = "general", backend: str = "cpu"):
        from ..backend import get_backend
        from ..insert_only import check_mode

        self.mode = check_mode(mode)
        self.backend = get_backend(ops.check_backend(backend))  # cuda: a device or simulator
        self._ops = ops.for_backend(self.backend.name)
        self.insert_only_active = self.mode != "general"
        self.switched_at: int | None = None  # auto mode: the batch of the first delete
        self.plan = plan(query)
        self.query: Query = self.plan.query
        if any(part.access is None for part in self.plan.parts):
            raise UnsupportedQueryError(
                f"query {self.query} has a non-hierarchical fracture component with more "
                "than 6 variables; no variable order is searched for it (see explain())")
        self.schemas = self.query.schemas
        self.columns: dict[str, list[str] | None] = {r: None for r in self.schemas}
        for name, cols in (relations or {}).items():
            if name not in self.schemas:
                raise InputError(f"relation {name} does not occur in the query")
            cols = list(cols)
            if len(cols) != self.schemas[name]:
                raise InputError(f"relation {name} has arity {self.schemas[name]} in the "
                                 f"query but {len(cols)} columns are named: {cols}")
            self.columns[name] = cols
        self.components: list[_Component] = []
        # indicator projections: (atom index, Z variables, the node it hangs under)
        self.indicators: list[tuple[int, tuple[str, ...], _Node]] = []
        for part in self.plan.parts:
            comp = part.comp
            roots = _convert(part.access, comp)
            home = {i: n for r in roots for n in r.walk() for i in n.atoms}
            for node in (n for r in roots for n in r.walk()):
                for j, z in part.indicators.get(node.var, []):
                    node.indicators.append(len(self.indicators))
                    self.indicators.append((j, z, node))
            nullary = [i for i in comp.atom_ids if not self.query.atoms[i].variables]
            self.components.append(_Component(roots, list(comp.atom_ids), nullary,
                                              comp.inputs, comp.outputs, home))
        self._free_nodes = {id(n) for c in self.components for r in c.roots for n in r.walk()
                            if n.var in c.inputs or n.var in c.outputs}
        # V_X = V'_Y when X is free with one child Y, no atom and the same variables: kept once
        self._aliased = {id(n) for c in self.components for r in c.roots for n in r.walk()
                         if id(n) in self._free_nodes and not n.atoms and len(n.children) == 1
                         and not n.indicators and set(n.children[0].dep) == set(n.bag)}
        # the views built by a worst-case optimal join (cyclic bags; see gpu_ivm.cq.wcoj)
        self._wcoj = {id(n) for c in self.components for r in c.roots for n in r.walk()
                      if needs_wcoj(self._edges(n))}
        #: what the last load's view builds did: views built by the worst-case optimal join,
        #: the candidates it visited, its largest level of partial tuples, and the largest
        #: intermediate of a binary join (for inspection and tests)
        self.build_stats: dict[str, int] = {}
        self.base: dict[str, LsmRel] = {}
        self.views: dict[tuple, LsmRel] = {}
        self._version = 0  # load() and apply() count up: a request cursor's state
        self.request_work = 0  # rows the free expansion of the last request (page) made
        self._values = ValueDict()  # the strings of every string column, to ids
        self._kinds = self._new_kinds()  # int or str, per relation column
        self._inserted = 0.0  # multiplicities ever inserted: a bound of every multiplicity
        self.batches_applied = 0
        with ops.using(self._ops):
            self._rebuild(self._empty_base())

    # ----------------------------------------------------------------------------- reading
    def _read(self, name: str, table, need_mult: bool, deletes: list | None = None) -> ZRel:
        """The table as a consolidated relation; ``deletes`` (insert-only modes) collects
        ``(name, row, tuple, mult)`` of its first row with a negative multiplicity."""
        if name not in self.schemas:
            raise InputError(f"relation {name} does not occur in the query "
                             f"(relations: {', '.join(self.schemas)})")
        what = f"relation {name}"
        cols = value_columns(table, what)
        if cols.get("mult", (None, "int"))[1] == STR:
            raise InputError(f"{what}: column 'mult' must hold integers, not strings",
                             column="mult")
        if need_mult and "mult" not in cols:
            raise InputError(f"{what}: a batch needs a 'mult' column (+k inserts, -k deletes)",
                             column="mult")
        names = self.columns[name]
        if names is None:
            names = [c for c in cols if c != "mult"]
            if len(names) != self.schemas[name]:
                raise InputError(f"{what} has arity {self.schemas[name]} in the query but the "
                                 f"table has {len(names)} value columns: {names}")
        for c in names:
            if c not in cols:
                raise InputError(f"{what}: missing column {c!r}", column=c)
        n = len(next(iter(cols.values()))[0]) if cols else 0
        for j, c in enumerate(names):
            arr, kind = cols[c]
            if arr.shape[0]:  # an empty column has no kind to check
                self._kinds.check(name, j, c, kind)
            if kind == STR:
                cols[c] = (self._values.encode(arr), kind)
        keys = np.stack([cols[c][0] for c in names], axis=1) if names else np.zeros((n, 0))
        mult = cols["mult"][0] if "mult" in cols else np.ones(n, dtype=np.int64)
        if deletes is not None:
            neg = np.flatnonzero(mult < 0)
            if len(neg):
                r = int(neg[0])
                deletes.append((name, r, self._shown(name, keys[r]), int(mult[r])))
        return consolidate(tuple(f"c{k}" for k in range(len(names))), keys, mult)

    def _new_kinds(self) -> ColumnKinds:
        return ColumnKinds([(a.relation, a.variables) for a in self.query.atoms])

    @contextmanager
    def _reading(self, fresh: bool = False) -> Iterator[None]:
        """Read a batch (``fresh``: a whole database, whose column kinds start over): the
        strings and column kinds its tables bring are kept if the block succeeds and
        forgotten if it raises (a refused batch leaves no trace)."""
        kinds = self._kinds
        if fresh:
            self._kinds = self._new_kinds()
        try:
            yield
        except BaseException:
            self._values.drop()
            kinds.drop()
            self._kinds = kinds
            raise
        self._values.commit()
        self._kinds.commit()

    def _shown(self, name: str, key: np.ndarray) -> tuple:
        """A tuple of relation ``name`` as the user wrote it (strings decoded)."""
        out = []
        for j, x in enumerate(key.tolist()):
            if self._kinds.of_column(name, j) == STR:
                out.append(self._values.decode_one(int(x)))
            else:
                out.append(int(x))
        return tuple(out)

    def _atom_rel(self, i: int, rel: ZRel) -> ZRel:
        """The atom's view of a base relation: equal columns for a repeated variable."""
        vs = self.query.atoms[i].variables
        first: dict[str, int] = {}
        keep = np.ones(len(rel), dtype=bool)
        for k, v in enumerate(vs):
            if v in first:
                keep &= rel.keys[:, k] == rel.keys[:, first[v]]
            else:
                first[v] = k
        return consolidate(tuple(first), rel.keys[keep][:, list(first.values())],
                           rel.mult[keep], unique=True)

    def _empty_base(self) -> dict[str, ZRel]:
        return {r: empty(tuple(f"c{k}" for k in range(a))) for r, a in self.schemas.items()}

    def _refuse_negative(self, name: str, keys: np.ndarray, mult: np.ndarray) -> None:
        """Refuse the batch if a tuple's multiplicity (``mult``, after the batch) is < 0."""
        neg = np.flatnonzero(mult < 0)
        if len(neg):
            t = self._shown(name, keys[neg[0]])
            raise InputError(f"relation {name}: tuple {t} would have multiplicity "
                             f"{int(mult[neg[0]])}; multiplicities must stay >= 0 "
                             "(a delete of an absent tuple?)")

    # ----------------------------------------------------------------------------- views
    def _children_rels(self, views, node: _Node) -> list[tuple[object, object]]:
        out: list[tuple[object, object]] = [(("L", i), views[("L", i)]) for i in node.atoms]
        out += [(("C", id(c)), views[("C", id(c))]) for c in node.children]
        out += [(("I", k), _indicator(views[("S", k)])) for k in node.indicators]
        return out

    def _edges(self, node: _Node) -> list[set[str]]:
        """The variables of each relation joined into ``node``'s view (as
        :meth:`_children_rels` lists them)."""
        out = [set(self.query.atoms[i].variables) for i in node.atoms]
        out += [set(c.dep) for c in node.children]
        out += [set(self.indicators[k][1]) for k in node.indicators]
        return out

    def _join_node(self, node: _Node, rels: list[ZRel]) -> ZRel:
        """The join of ``rels`` (the relations under ``node``) over ``node.bag``: by Generic
        Join where :func:`~gpu_ivm.cq.wcoj.needs_wcoj` says so, else by binary joins."""
        stats = self.build_stats
        if id(node) in self._wcoj:
            stats["wcoj_views"] = stats.get("wcoj_views", 0) + 1
            return generic_join(rels, node.bag, stats)
        return self._join_all(rels, stats).marginalize(node.bag)

    @staticmethod
    def _next_join(have: set[str], rels: list) -> int:
        """Which of ``rels`` (objects with ``vars``) to join next onto a relation over
        ``have``: one whose variables are all in ``have`` (a lookup) first, then the one
        sharing the most variables."""
        return max(range(len(rels)), key=lambda k: (set(rels[k].vars) <= have,
                                                      len(have & set(rels[k].vars))))

    def _support(self, k: int, leaf: ZRel) -> ZRel:
        """The support counts of indicator ``k`` from its atom's leaf: per Z value, the
        number of the leaf's tuples with it (the indicator is their support)."""
        return _ones(leaf).marginalize(self.indicators[k][1])

    def _rebuild(self, base: dict[str, ZRel]) -> None:
        """Base relations ``base`` and every view built from them (static evaluation)."""
        views: dict[tuple, ZRel] = {}
        self.build_stats = {}
        for i, atom in enumerate(self.query.atoms):
            views[("L", i)] = self._atom_rel(i, base[atom.relation])
        for k, (j, _, _) in enumerate(self.indicators):
            views[("S", k)] = self._support(k, views[("L", j)])
        for comp in self.components:
            for r in comp.roots:
                self._build(views, r)
        self.base = {name: LsmRel(rel) for name, rel in base.items()}
        self._inserted = sum(float(rel.mult.sum(dtype=np.float64)) for rel in base.values())
        # a bound variable's bag view V_X is read by no update and no request (updates read
        # the children's marginals V'_Y, requests the views of the free variables): only its
        # marginal is kept
        self.views = {key: LsmRel(rel) for key, rel in views.items()
                      if key[0] != "V" or key[1] in self._free_nodes}
        for comp in self.components:
            for node in (n for r in comp.roots for n in r.walk()):
                if id(node) in self._aliased:
                    self.views[("V", id(node))] = self.views[("C", id(node.children[0]))]

    @classmethod
    def _join_all(cls, rels: list[ZRel], stats: dict | None = None) -> ZRel:
        """The join of ``rels`` by binary joins: the smallest first, then by
        :meth:`_next_join`; ``stats["binary_intermediate"]``, if ``stats`` is given, keeps
        the largest intermediate."""
        rest = list(rels)
        v = rest.pop(min(range(len(rest)), key=lambda k: len(rest[k])))
        while rest:
            v = v.join(rest.pop(cls._next_join(set(v.vars), rest)))
            if stats is not None and rest:
                stats["binary_intermediate"] = max(stats.get("binary_intermediate", 0), len(v))
        return v

    def _build(self, views, node: _Node) -> None:
        for c in node.children:
            self._build(views, c)
        views[("V", id(node))] = self._join_node(
            node, [rel for _, rel in self._children_rels(views, node)])
        views[("C", id(node))] = views[("V", id(node))].marginalize(node.dep)

    def _propagate(self, i: int, delta: ZRel) -> None:
        """Apply a delta of atom ``i``'s leaf up its view tree (APPLY, Fig. 4.11), then the
        changes it makes to the indicator projections of atom ``i`` up theirs."""
        views = self.views
        mine = [k for k, (j, _, _) in enumerate(self.indicators) if j == i]
        flips = None
        if mine:  # tuples of the leaf that appear (+1) or disappear (-1)
            old = views[("L", i)].get(delta)
            flips = _presence_change(delta, old, checked_add(old, delta.mult))
        views[("L", i)].merge(delta)
        self._up(("L", i), next((c.home[i] for c in self.components if i in c.home), None),
                 delta)
        for k in mine:
            d_ind = self._indicator_delta(k, flips)
            self._up(("I", k), self.indicators[k][2], d_ind)

    def _indicator_delta(self, k: int, flips: ZRel) -> ZRel:
        """Merge the support-count changes of indicator ``k`` (its atom's tuples that
        appeared or disappeared, ``flips``) and return the indicator's delta: +1 for a Z
        value whose count left 0, -1 for one whose count reached 0."""
        dc = flips.marginalize(self.indicators[k][1])
        counts = self.views[("S", k)]
        old = counts.get(dc)
        counts.merge(dc)
        return _presence_change(dc, old, old + dc.mult)

    def _up(self, key, node: _Node | None, delta: ZRel) -> None:
        """Take the delta of child ``key`` of ``node`` up the tree: at each node the delta is
        looked up in the node's other children (lookup- or expand-joins on the variables
        they share, in :meth:`_next_join` order; at a view built by Generic Join, by
        :meth:`_delta_join`), marginalized and merged into the node's views, in place."""
        views = self.views
        while node is not None and len(delta):
            rest = [rel for k, rel in self._children_rels(views, node) if k != key]
            if id(node) in self._wcoj:
                dv = self._delta_join(delta, rest, node.bag)
            else:
                dv = delta
                while rest:
                    dv = rest.pop(self._next_join(set(dv.vars), rest)).join_from(dv)
            dv = dv.marginalize(node.bag)
            if ("V", id(node)) in views and id(node) not in self._aliased:  # free ones only
                views[("V", id(node))].merge(dv)
            delta = dv.marginalize(node.dep)
            key = ("C", id(node))
            views[key].merge(delta)
            node = node.parent

    @classmethod
    def _delta_join(cls, dv: ZRel, rest: list, bag: tuple[str, ...]) -> ZRel:
        """``dv ⋈ rest`` (LsmRels or indicator views) over a cyclic bag, in the manner of
        Generic Join with the delta's atom fixed: every lookup first (a relation whose
        variables the delta rows bind already filters them), then each row expands through
        the relation in which it has the fewest matches (:meth:`LsmRel.count_from`), the
        others then looking the new values up; rows with no match in some relation are
        dropped. Through a hub value the rows expand through the small side of the
        intersection, where a fixed order would expand through the hub's whole degree."""
        while rest:
            have = set(dv.vars)
            look = next((k for k, r in enumerate(rest) if set(r.vars) <= have), None)
            if look is not None:
                dv = rest.pop(look).join_from(dv)
                continue
            if len(rest) == 1:
                return rest[0].join_from(dv)
            counts = np.stack([r.count_from(dv) for r in rest])
            best = counts.argmin(axis=0)
            best[counts.min(axis=0) == 0] = -1  # no match in some relation: no result
            parts = []
            for k in range(len(rest)):
                sel = best == k
                if sel.any():
                    part = ZRel(dv.vars, dv.keys[sel], dv.mult[sel])
                    part = cls._delta_join(rest[k].join_from(part),
                                           rest[:k] + rest[k + 1:], bag)
                    parts.append(part.reorder(tuple(v for v in bag if v in part.vars)))
            if not parts:
                return empty(tuple(v for v in bag if v in have or any(
                    v in r.vars for r in rest)))
            # the parts extend disjoint sets of the delta's rows: their rows are distinct
            return consolidate(parts[0].vars, np.concatenate([p.keys for p in parts]),
                               np.concatenate([p.mult for p in parts]), unique=True)
        return dv

    # ----------------------------------------------------------------------------- public API
    @_on_backend
    def load(self, **tables) -> None:
        """Replace the database: ``load(R=table, S=table)``; ``mult`` optional (default 1).

        Relations not given are empty. Raises InputError (state untouched) on bad input or
        a negative multiplicity.
        """
        base = self._empty_base()
        deletes: list | None = [] if self.mode == "insert_only" else None
        with self._reading(fresh=True):
            for name, table in tables.items():
                rel = self._read(name, table, need_mult=False, deletes=deletes)
                if deletes:
                    self._refuse_delete(*deletes[0], what="nothing was loaded")
                self._refuse_negative(name, rel.keys, rel.mult)
                base[name] = rel
            self._rebuild(base)  # builds the new state, then replaces the old one
        self._version += 1
        self.batches_applied = 0
        self.insert_only_active, self.switched_at = self.mode != "general", None

    @staticmethod
    def _refuse_delete(name: str, row: int, tup: tuple, mult: int, what: str) -> None:
        raise InputError(f"relation {name}: this row gives the tuple {tup} multiplicity {mult}, "
                         "a delete, but the engine runs in insert_only mode, which accepts "
                         "inserts only (use mode='auto' or 'general' for streams with "
                         f"deletes); {what}", column="mult", row=row)

    @_on_backend
    def apply(self, batch: Mapping[str, object]) -> None:
        """Apply ``{relation: table with a mult column}``: +k inserts, -k deletes.

        The whole batch is checked first; on any error nothing changes.
        """
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        with self._reading():
            self._apply(batch)

    def _apply(self, batch: Mapping[str, object]) -> None:
        deletes: list | None = [] if self.insert_only_active else None
        deltas = {name: self._read(name, table, need_mult=True, deletes=deletes)
                  for name, table in batch.items()}
        if deletes and self.mode == "insert_only":
            self._refuse_delete(*deletes[0], what="nothing was applied")
        inserted = self._inserted + sum(float(d.mult[d.mult > 0].sum(dtype=np.float64))
                                        for d in deltas.values())
        for name, d in deltas.items():
            # Only deletes can make a multiplicity negative, and no multiplicity can leave
            # int64 while the multiplicities ever inserted sum to less than 2^61 (a float sum,
            # with room for its rounding): the other tuples are not looked up (an insert-only
            # batch looks up none)
            check = d.mult < 0 if inserted < 2.0 ** 61 else np.ones(len(d), bool)
            if check.any():
                dc = ZRel(d.vars, d.keys[check], d.mult[check])
                after = checked_add(self.base[name].get(dc), dc.mult)
                self._refuse_negative(name, dc.keys, after)
        saved = self._save()
        try:
            for name, d in deltas.items():
                if not len(d):
                    continue
                self.base[name].merge(d)
                for i, atom in enumerate(self.query.atoms):
                    if atom.relation == name:
                        self._propagate(i, self._atom_rel(i, d))
        except BaseException:  # e.g. an int64 overflow half-way: the batch leaves no trace
            self._restore(saved)
            raise
        self._inserted = inserted
        if deletes:  # auto mode's first delete: the same state serves the general mode
            self.insert_only_active, self.switched_at = False, self.batches_applied + 1
        self._version += 1
        self.batches_applied += 1

    def _save(self) -> list:
        """Every relation's runs, for :meth:`_restore` (runs never change in place)."""
        rels = {id(r): r for r in (*self.base.values(), *self.views.values())}  # aliases once
        return [(rel, rel.state()) for rel in rels.values()]

    @staticmethod
    def _restore(saved: list) -> None:
        for rel, state in saved:
            rel.restore(state)

    def _boundary(self, comp: _Component, top: set[str]) -> list[LsmRel]:
        """The views whose product gives Q over the top-closed variable set ``top``."""
        rels = [self.views[("L", i)] for i in comp.nullary]
        stack = list(comp.roots)
        for r in comp.roots:
            if r.var not in top:
                rels.append(self.views[("C", id(r))])
        while stack:
            node = stack.pop()
            if node.var not in top:
                continue
            rels += [self.views[("L", i)] for i in node.atoms]
            for c in node.children:
                if c.var in top:
                    stack.append(c)
                else:
                    rels.append(self.views[("C", id(c))])
        return rels

    @_on_backend
    def count(self, inputs=None) -> int | pa.Table:
        """The result multiplicity summed over all input and output tuples; with ``inputs``
        (a request table as for :meth:`request`), per request: an Arrow table
        ``request, count``, from the views at the inputs' boundary without enumerating the
        outputs."""
        if inputs is not None:
            totals, n = self._request_totals(inputs)
            return pa.table({"request": np.arange(n, dtype=np.int64), "count": totals})
        # Components that share no input variable (the fracture copies an input variable
        # into every component it occurs in) multiply: each gives the product of its roots'
        # marginals and nullary atoms, relations of at most one row. Shared inputs are
        # joined on, from the views at the inputs' boundary (O(their size)).
        seen: set[str] = set()
        shared = False
        for comp in self.components:
            shared |= bool(seen & set(comp.inputs))
            seen |= set(comp.inputs)
        result = scalar(1)
        for comp in self.components:
            for rel in self._boundary(comp, set(comp.inputs) if shared else set()):
                result = rel.join_from(result)
        return checked_total(result.mult)

    def _requests(self, inputs) -> tuple[ZRel, int]:
        """A request table as the relation (request number, inputs...) and its row count."""
        q = self.query
        if inputs is None:
            if q.inputs:
                raise InputError(f"the query has inputs {', '.join(q.inputs)}; pass a table "
                                 "with those columns")
            cols: dict[str, np.ndarray] = {}
            n = 1
        else:
            cols = {v: self._input_ids(v, arr, kind)
                    for v, (arr, kind) in value_columns(inputs, "requests").items()}
            missing = [v for v in q.inputs if v not in cols]
            if missing:
                raise InputError(f"requests: missing input column {missing[0]!r}",
                                 column=missing[0])
            n = len(next(iter(cols.values()))) if cols else (1 if not q.inputs else 0)
        req_keys = np.stack([np.arange(n, dtype=np.int64)] + [cols[v] for v in q.inputs], axis=1)
        return ZRel((REQ, *q.inputs), req_keys, np.ones(n, dtype=np.int64)), n

    def _input_ids(self, var: str, arr: np.ndarray, kind: str) -> np.ndarray:
        """A request column of variable ``var`` as the engine's values: integers as they
        are; strings as their ids, -1 for a string never seen (which matches nothing, as
        string ids are >= 0); a column of the other kind than the variable's is refused."""
        have = self._kinds.of_variable(var)
        if kind == STR:
            if have not in (None, STR):
                raise InputError(f"requests: column {var!r} holds strings but variable {var} "
                                 "holds integers", column=var)
            return self._values.lookup(arr)
        if have == STR and arr.shape[0]:
            raise InputError(f"requests: column {var!r} holds integers but variable {var} "
                             "holds strings", column=var)
        return arr

    def _answers(self, inputs) -> tuple[pa.Table, int]:
        requests, n = self._requests(inputs)
        return self._table(self._page(requests)), n

    def _table(self, out: ZRel) -> pa.Table:
        """Answers over ``(request, outputs...)`` as the Arrow table requests return
        (string outputs decoded)."""
        data = {"request": out.keys[:, 0]}
        for k, v in enumerate(self.query.outputs, 1):
            col = out.keys[:, k]
            data[v] = pa.array(self._values.decode(col), pa.string()) \
                if self._kinds.of_variable(v) == STR else col
        data["mult"] = out.mult
        return pa.table(data)

    def _page(self, requests: ZRel, limit: int | None = None, bound: Bound | None = None,
              given: np.ndarray | None = None) -> ZRel:
        """The answers to ``requests`` (rows over the request number and the inputs) over
        ``(request, outputs...)``, sorted; with ``limit``, only the first ``limit`` per
        request after ``bound`` (a request's last answer handed out, where it has one;
        ``given``: how many each request was handed, indexed by request number).

        One component seeks: each output is expanded in the answers' order, only past the
        bound and at most ``limit`` (+1) values per request, so a page costs its own rows
        and not the answers before it. Several components are capped at ``given + limit``
        each (an answer's projection ranks no later in its component than the answer in
        the product), then combined, filtered past the bound and cut.
        """
        q = self.query
        self.request_work = 0
        if len(self.components) > 1:
            # semijoin first: a request without an answer in one component has none at all,
            # so it is dropped before another component enumerates its outputs for it
            alive = self._component_totals(requests)
            keep = np.isin(requests.keys[:, 0], alive.keys[:, 0])
            requests = ZRel(requests.vars, requests.keys[keep], requests.mult[keep])
        cap = None
        if limit is not None:
            cap = np.full(int(requests.keys[:, 0].max(initial=-1)) + 1, limit, np.int64)
            if given is not None and len(self.components) > 1:
                cap += given[:cap.shape[0]]
        seek = bound if len(self.components) == 1 else None
        result = None
        for comp in self.components:
            front = requests.marginalize((REQ, *comp.inputs))
            front = self._free_answers(comp, front, None if cap is None else
                                       cap[front.keys[:, 0]], seek)
            result = front if result is None else result.join(front)
        out = result.marginalize((REQ, *q.outputs))
        if limit is not None:
            if bound is not None:
                out = bound.after(out)
            out = first_per_request(out, np.full(cap.shape[0], limit, np.int64))
        return out

    def _free_answers(self, comp: _Component, front: ZRel, cap: np.ndarray | None = None,
                      bound: Bound | None = None, outputs: tuple[str, ...] | None = None
                      ) -> ZRel:
        """``front`` (rows over the request number, ``comp``'s inputs and maybe other
        variables bound by the caller, multiplicity 1) with ``comp``'s answers to each: its
        variables, then the outputs, with the answers' multiplicities (the free part walked
        through the views' supports, then COMPUTEM from the views at its boundary).

        With ``cap`` (per row of ``front``), only what the first ``cap`` answers of each row
        in the outputs' order need (at least those; more where a step cannot cut): the
        inputs are joined first and the outputs expanded in that order while the tree
        allows, each step cut to ``cap`` rows per row of ``front`` (every row of a free
        view's support extends to an answer, multiplicities being non-negative), and with
        ``bound`` only past the request's last answer handed out. ``outputs``: the order
        the answers are cut in (the query's outputs unless a caller has its own)."""
        free = set(comp.inputs) | set(comp.outputs)
        order = [v for v in (outputs or self.query.outputs) if v in comp.outputs]
        n_inputs = sum(n.var in comp.inputs for r in comp.roots for n in r.walk())
        if cap is not None:  # each row's answers cut apart: its number leads
            n = len(front)
            front = ZRel((GROUP, *front.vars), np.concatenate(
                [np.arange(n, dtype=np.int64).reshape(n, 1), front.keys], axis=1), front.mult)
        done: list[str] = []  # outputs expanded, in expansion order
        plain = set(front.vars)  # while the front has no other variable, a row per answer
        cutting = cap is not None
        avail = [r for r in comp.roots if r.var in free]
        while avail:
            node = next((a for a in avail if a.var in comp.inputs), None)
            if node is None:
                node = min(avail, key=lambda a: order.index(a.var))
            avail.remove(node)
            avail += [c for c in node.children if c.var in free]
            view = self.views[("V", id(node))]
            if node.var in comp.inputs:
                n_inputs -= 1
                front = view.join_from(front, support=True)
                cutting &= plain >= set(front.vars)
                continue
            done.append(node.var)
            plain.add(node.var)
            cut = cutting and n_inputs == 0 and done == order[:len(done)]
            if cut and bound is not None and len(done) > 1:  # rows before the bound go
                keep = bound.not_before(front, front.column(REQ), done[:-1])
                front = ZRel(front.vars, front.keys[keep], front.mult[keep])
            step = view.expand_first(front, *self._step_cut(front, cap, bound, done)) \
                if cut else None
            if step is None:
                front = view.join_from(front, support=True)
                cutting &= plain >= set(front.vars)  # else several rows per answer prefix
            else:
                slack = 1 if bound is not None and len(done) < len(order) else 0
                front = first_per_request(step, cap + slack)
            self.request_work += len(front)
        if cap is not None:
            front = ZRel(front.vars[1:], np.ascontiguousarray(front.keys[:, 1:]), front.mult)
        for rel in self._boundary(comp, free):
            front = rel.join_from(front)
        return front

    @staticmethod
    def _step_cut(front: ZRel, cap: np.ndarray, bound: Bound | None, done: list[str]):
        """``(cap, seek, seek_value, strict)`` per row of ``front`` (whose first column
        numbers the rows capped apart) for expanding the output ``done[-1]`` (the outputs
        ``done`` in order, the earlier ones already in ``front``): a row at its request's
        bound on the earlier outputs starts at the bound's value (past it for the last
        output), and may waste a slot on answers up to the bound, hence one more row of
        cap."""
        group = cap[front.keys[:, 0]]
        if bound is None:
            return group, None, None, False
        req = front.column(REQ)
        j = len(done) - 1
        tight = bound.tight(front, req, done[:j])
        strict = j == len(bound.outputs) - 1
        return group + (0 if strict else 1), tight, bound.values[req, j], strict

    def _input_counts(self, comp: _Component, front: ZRel) -> ZRel:
        """The rows of ``front`` (over the request number and ``comp``'s inputs) with an
        answer in ``comp``, each with its answers' multiplicity summed over the outputs
        (from the views at the inputs' boundary)."""
        for rel in self._boundary(comp, set(comp.inputs)):
            front = rel.join_from(front)
        return front

    @_on_backend
    def request(self, inputs=None, *, limit: int | None = None) -> pa.Table:
        """Answer a batch of access requests; returns a pyarrow Table
        ``(request, outputs..., mult)`` with ``request`` the 0-based row of the request,
        sorted by request, then by the output values.

        ``inputs`` is a table with one column per input variable; for a query without
        inputs it may be omitted (one request, number 0). ``limit``: at most this many
        answers per request (the first ones in that order), found without enumerating the
        others where the variable order allows (see :meth:`_page`); :meth:`cursor` pages
        through the rest.

        >>> eng = Engine("Q(B | A) = R(A,B)")
        >>> eng.load(R={"a": [1, 1, 1, 2], "b": [7, 5, 6, 5]})
        >>> eng.request({"A": [1, 2]}, limit=2).to_pydict()
        {'request': [0, 0, 1], 'B': [5, 6, 5], 'mult': [1, 1, 1]}
        """
        if limit is None:
            return self._answers(inputs)[0]
        limit = check_limit(limit)
        requests, _ = self._requests(inputs)
        return self._table(self._page(requests, limit))

    @_on_backend
    def cursor(self, inputs=None, *, limit: int) -> SeekCursor:
        """A :class:`~gpu_ivm.cq.requests.SeekCursor` over the answers of a batch of
        access requests, ``limit`` answers per request per page, in the order of
        :meth:`request`; the answers are those of the current state (the cursor refuses to
        go on after another batch is applied). Each page resumes every request after its
        last answer handed out (a seek, not a re-enumeration of the pages before)."""
        limit = check_limit(limit)
        requests, n = self._requests(inputs)
        return SeekCursor(self, requests, n, limit, self._version)

    @_on_backend
    def _seek_page(self, requests: ZRel, limit: int, bound: Bound, given) -> ZRel:
        """A cursor's next page (see :class:`~gpu_ivm.cq.requests.SeekCursor`)."""
        return self._page(requests, limit, bound, given)

    def _request_totals(self, inputs) -> tuple[np.ndarray, int]:
        """Per request, the answers' multiplicity summed over the outputs, from the views at
        the inputs' boundary (the outputs are summed out inside the views: nothing is
        enumerated)."""
        requests, n = self._requests(inputs)
        result = self._component_totals(requests)
        totals = np.zeros(n, np.int64)
        totals[result.keys[:, 0]] = result.mult
        return totals, n

    def _component_totals(self, requests: ZRel) -> ZRel:
        """(request, total) for the requests with a non-zero total: per component from the
        views at the inputs' boundary, multiplied across components."""
        result = None
        for comp in self.components:
            front = self._input_counts(comp, requests.marginalize((REQ, *comp.inputs)))
            front = front.marginalize((REQ,))
            result = front if result is None else result.join(front)
        return result

    @_on_backend
    def exists(self, inputs=None) -> pa.Table:
        """Per request, whether it has an answer: an Arrow table ``request, exists``
        (from the same views as :meth:`count`; the multiplicities are positive, so an answer
        exists exactly when its total is not zero)."""
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "exists": totals != 0})

    @_on_backend
    def view(self, var: str, component: int = 0, marginal: bool = False) -> dict[tuple, int]:
        """The view ``V_var`` (or ``V'_var`` with ``marginal``) of a fracture component, as
        {key tuple in bag order: multiplicity}, strings decoded; for inspection and tests."""
        comp = self.components[component]
        node = next((n for r in comp.roots for n in r.walk() if n.var == var), None)
        if node is None:
            raise InputError(f"component {component} has no variable {var}")
        key = ("C" if marginal else "V", id(node))
        if key in self.views:  # (in bag order: an aliased view has its child's order)
            rel = self.views[key].zrel().reorder(node.dep if marginal else node.bag)
        else:  # a bound variable's bag view is not kept: evaluated here from its children
            rels = [rel.zrel() for _, rel in self._children_rels(self.views, node)]
            rel = generic_join(rels, node.bag) if id(node) in self._wcoj else \
                self._join_all(rels).marginalize(node.bag)
        strs = [self._kinds.of_variable(v) == STR for v in rel.vars]
        return {tuple(self._values.decode_one(x) if st else x for x, st in zip(k, strs)): m
                for k, m in rel.to_dict().items()}

    # ----------------------------------------------------------------------------- persistence
    def snapshot(self, path, *, metadata: dict | None = None) -> dict:
        """Write the query and the base relations to folder ``path`` atomically (see
        :mod:`gpu_ivm.cq.snapshot`); returns the manifest."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path, *, backend: str = "cpu") -> Engine:
        """An engine restored from a snapshot folder: the views rebuilt from the relations,
        checked against the manifest's checksums and count; ``backend`` as in the constructor
        (a snapshot holds no backend: either restores on either)."""
        from .snapshot import load

        return load(path, cls, backend=backend)

    def explain(self) -> str:
        """The plan: fracture, class, widths, variable orders, view trees."""
        return self.plan.explain()
