"""The ε trade-off of hierarchical CQAPs (thesis Chapter 5, digest §4): the strategy Ω with
all its forks.

For ε < 1, Ω (digest §4.2, thesis Fig. 5.5) walks the canonical variable order of each
fracture component top down. At a variable X whose induced query (X's ancestors treated as
inputs) is CQAP_0 it stops; at an input X, or an output X with no input below it, it goes on
into X's children; otherwise (X bound with free variables below, or an output with inputs
below) it **forks**: the relations under X are partitioned on the key ``anc(X) ∪ {X}`` by
degree, with threshold θ = M^ε, and

- the **light** strategy is the access-top view tree over the light parts (every key value of
  degree < θ): an update's delta is bounded by θ, O(N^{δε});
- the **heavy** strategy treats the key as inputs over the heavy parts (at most N^{1−ε} key
  values) and Ω goes on into X's children, which may fork again (**nested forks**) on keys
  that extend this one; a relation part already light on a key is never partitioned on a
  superset of it (REMOVEHEAVYTAIL, thesis Fig. 5.19).

Each fork has an id; :func:`fork_forest` returns them per fracture component, nested as Ω
nests them. A **strategy** picks heavy or light at every fork it reaches (below a light fork
nothing is picked), one combination of Ω's alternatives for independent forks; each atom
under forks then reads one part, its *HL-signature* ``H…HL`` or ``H…H`` (the forks on its path
that the strategy makes heavy, then the light one). Every strategy is an ε = 1
:class:`~gpu_ivm.cq.engine.Engine` over the component's atoms with the parts as relations and
its heavy forks' keys as extra inputs. The strategies of a component partition its join
results: all atoms of one result agree on every key, and a key value has one status. So a
component's answers are the sum of its strategies'. Components combine per request as a
Cartesian product, as in ``Engine``.

A request asks a heavy strategy only for the heavy key values that the data supports
given the request, as the thesis opens its union view iterators on the support of each
heavy key (§5.3, BUILDUNIONITERATORS), not on every heavy value (:meth:`_supports`):

- the rows are found along the tree of the heavy keys' variables (each one's parent is the
  variable before it in a fork's key, the request's inputs left out): a variable is bound
  from the view at the strategy engine's input boundary that holds it with the fewest
  matches, and rows are filtered by every boundary view as soon as they bind its
  variables. Independent subtrees (forks side by side) are found from their parent's rows
  and only semi-joined back into them, never joined with each other; a last pass top down
  drops the rows whose parent lost its support. The boundary views' product is the
  answers' total of a row and their multiplicities are positive, so every row left has an
  answer, and a nested fork's values follow the outer values left;
- the heavy keys are inputs of the strategy's engine, so the atoms under independent forks
  fall into separate components of it. Each component is asked the rows projected on its
  own inputs, and the components' answers (or counts) are joined on the variables they
  share, each summed out as soon as no component left has it (unless it is an output):
  independent forks meet only in the answers.

A light strategy is asked the requests that have an answer in it (filtered by the same
views). So a request costs each strategy the sum over its forks of their supported values
(at most N^{1−ε} per fork; no row is asked where one of them supports none), plus its
answers, where every combination of heavy values would have cost their product.
:attr:`TradeoffEngine.request_work` counts the rows of the last request batch. A request
with a ``limit`` has every strategy's engine expand only the first ``limit`` answers per row
(request and heavy key values); a cursor materializes the answers once and pages through
them (:mod:`gpu_ivm.cq.requests`). An output reached through several values of a bound
heavy key is produced once per value and summed, where the thesis's union iterators produce
it once.

Each atom is routed by its own key columns (an atom ``R(A,B)`` under a fork at B and
``R(B,C)`` under it too read their own parts of R), so self-joins under a fork are supported;
the degree of a key value is its largest degree over the atoms under the fork.

Rebalancing (digest §4.6): ⌊M/4⌋ ≤ N < M with N the number of distinct tuples. At load and
when N leaves that range (M = 2N + 1) every fork is re-partitioned strictly (heavy iff some
atom under the fork has ≥ θ tuples with the key value, and only below heavy values of the
enclosing fork) and every strategy rebuilt: ``rebalances["major"]``. After a batch, the key
values it touched are checked fork by fork, outer forks first (a value whose enclosing fork's
value is light is not looked at): a light value with ≥ ⌈3θ/2⌉ tuples in some atom becomes
heavy (the keys below it are partitioned strictly), a heavy one with < ⌈θ/2⌉ in every atom
light (the heavy keys below it are dropped); the tuples whose part changed move from one
part to the other in every strategy that reads them: ``rebalances["minor_moves"]`` counts
the values moved. Thresholds are compared in integers (:class:`gpu_ivm.rational.Thresholds`).
ε = 1 keeps every value light (the eager engine), ε = 0 makes every present value heavy
(lazy).

Refused with :class:`~gpu_ivm.cq.engine.UnsupportedQueryError`: queries with a
non-hierarchical fracture component (Thm 3.5 needs a hierarchical fracture) and queries that
never fork (ε = 1 is optimal: use ``Engine``).

>>> eng = TradeoffEngine("Q(C | A) = R(A,B), S(B,C)", epsilon="1/2")
>>> eng.load(R={"a": [1, 1, 2], "b": [7, 8, 7]}, S={"b": [7, 7, 8], "c": [5, 6, 5]})
>>> eng.request({"A": [1, 2]}).to_pydict()
{'request': [0, 0, 1, 1], 'C': [5, 6, 5, 6], 'mult': [2, 1, 1, 1]}
>>> eng.apply({"S": {"b": [8], "c": [5], "mult": [-1]}})
>>> eng.count(), eng.fork
(4, 'B')
>>> [(f.var, f.key) for f in TradeoffEngine("Q(C | ) = R(A,B,C), S(A,B)", epsilon=0).forks]
[('A', ('A',)), ('B', ('A', 'B'))]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..rational import Thresholds, parse_epsilon
from . import ops
from .engine import Engine, UnsupportedQueryError
from .forks import Fork, find_fork, fork_forest
from .key_rows import drop_rows, find_rows, ones, union_rows, unique_rows
from .lsm import LsmRel
from .planner import plan
from .requests import RequestPaging, check_limit, first_per_request
from .syntax import Query
from .zrel import (
    ZRel,
    _exact_check,
    checked_add,
    checked_mul,
    checked_total,
    consolidate,
    empty,
    scalar,
)

__all__ = ["Fork", "TradeoffEngine", "find_fork", "fork_forest"]

REQ = "#request"


@dataclass
class _Strategy:
    """One combination of Ω's choices in a component: an ε = 1 engine over its parts."""

    heavy: tuple[int, ...]          # ids of the forks it makes heavy (their keys: inputs)
    parts: dict[int, int]           # atom under a fork -> its part (leading heavy forks)
    engine: Engine
    inputs: tuple[str, ...]         # the engine's inputs


@dataclass
class _Factor:
    """A fracture component and its strategies."""

    atoms: list[int]
    inputs: list[str]
    outputs: list[str]
    strategies: list[_Strategy]


def _choices(forks: list[Fork]) -> list[dict[int, bool]]:
    """Ω's combinations for independent ``forks``: {fork id: heavy?}, the nested forks of a
    heavy fork combined in, none below a light one."""
    combos: list[dict[int, bool]] = [{}]
    for f in forks:
        opts = [{f.id: False}] + [{f.id: True, **c} for c in _choices(f.children)]
        combos = [{**a, **b} for a in combos for b in opts]
    return combos


def _first(rel: ZRel, limit: int) -> ZRel:
    """The first ``limit`` rows of each request of ``rel`` (over REQ first, sorted)."""
    n = int(rel.keys[:, 0].max(initial=-1)) + 1
    return first_per_request(rel, np.full(n, limit, np.int64))


class TradeoffEngine(RequestPaging):
    """A hierarchical CQAP at ε < 1: per fracture component, one ε = 1 engine per strategy
    of Ω over the heavy and light parts (see the module docstring). Same API as
    :class:`~gpu_ivm.cq.engine.Engine` for ``load``, ``apply``, ``count``, ``request``,
    ``cursor`` and ``exists``.

    Attributes
    ----------
    forks : list of Fork
        Every fork, outer ones before the forks nested in them; ``heavy_sets[f.id]`` are the
        heavy values of its key (sorted unique rows, columns in ``f.key`` order).
    rebalances : dict
        ``major`` (rebuilds), ``minor_moves`` (key values moved between parts) and
        ``fork_moves`` (those per fork id).
    request_work : dict
        The work of the last request batch (``request``, ``cursor``, ``count(inputs)``,
        ``exists``), counted in rows: ``rows``, those handed to the components of the
        strategies' engines (a light strategy's: the requests with an answer in it);
        ``heavy_rows``, those handed to heavy strategies (a request with supported heavy
        key values, projected on a component's inputs); ``candidates``, those built while
        binding the heavy keys' variables (before the filters); ``expanded``, the rows the
        strategies' engines expanded for the answers (``Engine.request_work``: with a
        ``limit``, at most ``limit`` per row handed to them per output).
    """

    def __init__(self, query: str | Query, relations: Mapping[str, list[str]] | None = None,
                 *, epsilon, backend: str = "cpu") -> None:
        self.epsilon = parse_epsilon(epsilon)
        # reads and checks tables as Engine does (and refuses a bad or unavailable backend)
        self._reader = Engine(query, relations, backend=backend)
        self.backend = self._reader.backend
        self.query: Query = self._reader.query
        q = self.query
        forest = fork_forest(q)
        self.forks: list[Fork] = sorted((f for comp in forest for top in comp
                                         for f in top.walk()), key=lambda f: f.id)
        if not self.forks:
            raise UnsupportedQueryError(f"query {q} never forks (every induced query is "
                                        "CQAP_0): epsilon 1 is optimal; use Engine")
        # the forks on each atom's path, outer first, and the atom's key columns per fork
        self.chain: dict[int, list[int]] = {}
        self.keycols: dict[tuple[int, int], list[int]] = {}
        for f in self.forks:
            for i in f.atoms:
                self.chain.setdefault(i, []).append(f.id)
                self.keycols[(f.id, i)] = [q.atoms[i].variables.index(v) for v in f.key]
        sep = "__"
        while any(r.startswith(f"{a}{sep}") for r in q.schemas for a in q.schemas):
            sep += "_"
        self._sep = sep
        self.factors: list[_Factor] = []
        p = plan(q)
        for comp, tops in zip(p.components, forest):
            strategies = []
            for choice in _choices(tops):
                heavy = tuple(sorted(k for k, h in choice.items() if h))
                parts = {}
                for i in comp.atom_ids:
                    if i in self.chain:
                        parts[i] = next((j for j, fid in enumerate(self.chain[i])
                                         if not choice[fid]), len(self.chain[i]))
                ins = tuple(dict.fromkeys([*comp.inputs,
                                           *(v for k in heavy for v in self.forks[k].key)]))
                outs = [v for v in comp.outputs if v not in ins]
                body = ", ".join(f"{self._part_name(i, parts[i])}"
                                 f"({','.join(q.atoms[i].variables)})" if i in parts
                                 else str(q.atoms[i]) for i in comp.atom_ids)
                eng = Engine(f"Q({','.join(outs)} | {','.join(ins)}) = {body}",
                             backend=self.backend.name)
                strategies.append(_Strategy(heavy, parts, eng, ins))
            self.factors.append(_Factor(list(comp.atom_ids), list(comp.inputs),
                                        list(comp.outputs), strategies))
        self.base: dict[str, LsmRel] = {}
        self.heavy_sets: list[np.ndarray] = [np.zeros((0, len(f.key)), np.int64)
                                             for f in self.forks]
        self.M = 1
        self.size = 0
        self._version = 0
        self.batches_applied = 0
        self.rebalances = self._counters({})
        self.request_work = _work()
        self.load()

    def _counters(self, saved: Mapping) -> dict:
        """The rebalancing counters: ``major`` (rebuilds), ``minor_moves`` (key values moved
        between parts) and ``fork_moves`` (those moves per fork id), from ``saved``."""
        per = [int(x) for x in saved.get("fork_moves", [])]
        return {"major": int(saved.get("major", 0)),
                "minor_moves": int(saved.get("minor_moves", 0)),
                "fork_moves": per if len(per) == len(self.forks) else [0] * len(self.forks)}

    def _part_name(self, atom: int, part: int) -> str:
        """The relation name of ``atom``'s part with ``part`` leading heavy forks."""
        return f"{self.query.atoms[atom].relation}{self._sep}{atom}_{part}"

    # ------------------------------------------------------------------ compatibility
    @property
    def fork(self) -> str:
        """The variable of the first (outermost) fork."""
        return self.forks[0].var

    @property
    def heavy_keys(self) -> np.ndarray:
        """The heavy values of the first fork: 1-D when its key is one variable, else rows."""
        h = self.heavy_sets[0]
        return h[:, 0] if h.shape[1] == 1 else h

    @property
    def strategies(self) -> list[_Strategy]:
        """Every strategy of every component."""
        return [s for fac in self.factors for s in fac.strategies]

    # ------------------------------------------------------------------ partition
    def _threshold(self) -> Thresholds:
        return Thresholds.of(self.M, self.epsilon)

    def _rel(self, atom: int) -> LsmRel:
        return self.base[self.query.atoms[atom].relation]

    def _with_keys(self, atom: int, fid: int, rows: np.ndarray, support: bool = False) -> ZRel:
        """The tuples of ``atom``'s relation whose key of fork ``fid`` is among ``rows``
        (sorted unique), columns: the key's, then the others."""
        cols = self.keycols[(fid, atom)]
        left = ones(tuple(f"c{c}" for c in cols), rows)
        return self._rel(atom).join_from(left, support=support)

    def _degrees(self, fid: int, rows: np.ndarray) -> np.ndarray:
        """Per key value of fork ``fid`` (sorted unique ``rows``): its largest number of
        distinct tuples over the atoms under the fork."""
        deg = np.zeros(rows.shape[0], np.int64)
        if not rows.shape[0]:
            return deg
        k = rows.shape[1]
        for i in self.forks[fid].atoms:
            got = self._with_keys(i, fid, rows, support=True)
            per = got.marginalize(got.vars[:k])
            _, pos = find_rows(rows, per.keys)
            deg[pos] = np.maximum(deg[pos], per.mult)
        return deg

    def _key_values(self, fid: int, rels: Mapping[str, ZRel]) -> np.ndarray:
        """The key values of fork ``fid`` in ``rels`` (relation -> tuples) over its atoms."""
        k = len(self.forks[fid].key)
        vals = [rels[self.query.atoms[i].relation].keys[:, self.keycols[(fid, i)]]
                for i in self.forks[fid].atoms if self.query.atoms[i].relation in rels]
        return unique_rows(np.concatenate(vals)) if vals else np.zeros((0, k), np.int64)

    def _strict(self, f: Fork, parent_rows: np.ndarray | None, sets: list) -> None:
        """Add to ``sets`` the strictly heavy key values of fork ``f`` (all of them, or those
        extending ``parent_rows`` of the enclosing fork) and, below them, of its nested
        forks."""
        if parent_rows is None:
            cand = self._key_values(f.id, {r: rel.zrel() for r, rel in self.base.items()})
        else:
            k = len(f.key)
            vals = []
            for i in f.atoms:
                got = self._with_keys(i, f.parent, parent_rows)
                cols = [got.vars.index(f"c{c}") for c in self.keycols[(f.id, i)]]
                vals.append(got.keys[:, cols])
            cand = unique_rows(np.concatenate(vals)) if vals else np.zeros((0, k), np.int64)
        th = self._threshold()
        heavy = cand if th.all_heavy else cand[self._degrees(f.id, cand) >= th.strict]
        sets[f.id] = union_rows(sets[f.id], heavy)
        for c in f.children:
            self._strict(c, heavy, sets)

    def _parts(self, atom: int, keys: np.ndarray, sets: list) -> np.ndarray:
        """Each tuple's part for ``atom``: how many forks on its path, outer first, hold its
        key value as heavy before the first light one (TRANSIENTHLS: unseen values are
        light; REMOVEHEAVYTAIL: nothing counts below a light one)."""
        chain = self.chain[atom]
        if self._threshold().all_heavy:  # ε = 0: every value is heavy, new ones too
            return np.full(keys.shape[0], len(chain), np.int64)
        part = np.zeros(keys.shape[0], np.int64)
        alive = np.ones(keys.shape[0], bool)
        for fid in chain:
            if not alive.any():
                break
            alive &= find_rows(sets[fid], keys[:, self.keycols[(fid, atom)]])[0]
            part += alive
        return part

    @staticmethod
    def _table(rel: ZRel) -> dict:
        t = {f"c{j}": rel.keys[:, j] for j in range(rel.keys.shape[1])}
        t["mult"] = rel.mult
        return t

    def _batches(self, fac: _Factor, rels: Mapping[str, ZRel], sets: list) -> list[dict]:
        """Per strategy of ``fac``, the tables its engine reads from ``rels`` (relation ->
        tuples): an atom under a fork gets the tuples of its part, another atom the whole
        relation."""
        q = self.query
        routed = {i: self._parts(i, rels[q.atoms[i].relation].keys, sets)
                  for i in fac.atoms if i in self.chain and q.atoms[i].relation in rels}
        out = []
        for s in fac.strategies:
            t = {}
            for i in fac.atoms:
                name = q.atoms[i].relation
                if name not in rels:
                    continue
                rel = rels[name]
                if i not in s.parts:
                    t[name] = self._table(rel)
                else:
                    sel = routed[i] == s.parts[i]
                    t[self._part_name(i, s.parts[i])] = self._table(
                        ZRel(rel.vars, rel.keys[sel], rel.mult[sel]))
            out.append(t)
        return out

    def _rebuild(self) -> None:
        """Strict partition with the current M and every strategy loaded (major
        rebalancing)."""
        self.M = max(2 * self.size + 1, 1)
        sets = [np.zeros((0, len(f.key)), np.int64) for f in self.forks]
        for f in self.forks:
            if f.parent is None:
                self._strict(f, None, sets)
        self.heavy_sets = sets
        self._load_strategies()

    def _load_strategies(self) -> None:
        rels = {name: rel.zrel() for name, rel in self.base.items()}
        for fac in self.factors:
            for s, t in zip(fac.strategies, self._batches(fac, rels, self.heavy_sets)):
                s.engine.load(**t)

    # ------------------------------------------------------------------ loading, batches
    def load(self, **tables) -> None:
        """As :meth:`Engine.load`; partitions strictly and builds every strategy."""
        with self._reader._reading(fresh=True):
            self._load(**tables)

    def _load(self, **tables) -> None:
        base = {}
        for name, a in self.query.schemas.items():
            rel = (self._reader._read(name, tables[name], need_mult=False) if name in tables
                   else empty(tuple(f"c{k}" for k in range(a))))
            self._reader._refuse_negative(name, rel.keys, rel.mult)
            base[name] = rel
        unknown = set(tables) - set(base)
        if unknown:
            raise InputError(f"relation {sorted(unknown)[0]} does not occur in the query")
        self.base = {name: LsmRel(rel) for name, rel in base.items()}
        self.size = sum(len(rel) for rel in base.values())
        self._rebuild()
        self._version += 1
        self.batches_applied = 0

    def apply(self, batch: Mapping[str, object]) -> None:
        """As :meth:`Engine.apply`: the whole batch is checked first; on any error nothing
        changes (every strategy and the partition are restored)."""
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        with self._reader._reading():
            self._apply(batch)

    def _apply(self, batch: Mapping[str, object]) -> None:
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        deltas = {name: self._reader._read(name, table, need_mult=True)
                  for name, table in batch.items()}
        deltas = {name: d for name, d in deltas.items() if len(d)}
        grow = 0
        for name, d in deltas.items():
            old = self.base[name].get(d)
            after = checked_add(old, d.mult)
            self._reader._refuse_negative(name, d.keys, after)
            grow += int(((after != 0) & (old == 0)).sum() - ((after == 0) & (old != 0)).sum())
        saved = [s.engine._save() for s in self.strategies]
        saved.append([(rel, rel.state()) for rel in self.base.values()])
        # a major rebalancing replaces the engines' relations: their old ones go back too
        held = [(s.engine, s.engine.base, s.engine.views, s.engine._inserted)
                for s in self.strategies]
        saved_part = (list(self.heavy_sets), self.M, self.size, self._counters(self.rebalances))
        try:
            for name, d in deltas.items():
                self.base[name].merge(d)
            for fac in self.factors:
                for s, t in zip(fac.strategies, self._batches(fac, deltas, self.heavy_sets)):
                    if t:
                        s.engine.apply(t)
            self.size += grow
            if not self.M // 4 <= self.size < self.M:
                self.rebalances["major"] += 1
                self._rebuild()
            else:
                self._minor(deltas)
        except BaseException:
            for eng, base, views, inserted in held:
                eng.base, eng.views, eng._inserted = base, views, inserted
            for part in saved:
                Engine._restore(part)
            self.heavy_sets, self.M, self.size, self.rebalances = saved_part
            raise
        self._version += 1
        self.batches_applied += 1

    def _minor(self, deltas: dict) -> None:
        """Move the key values the batch touched whose degree crossed the thresholds, fork
        by fork, outer forks first; then move the tuples whose part changed."""
        if not deltas:
            return
        th = self._threshold()
        old = self.heavy_sets
        sets = list(old)
        moved = 0
        for f in self.forks:  # outer forks first (ids count them so)
            xs = self._key_values(f.id, deltas)
            if f.parent is not None and xs.shape[0]:  # below a light value: not partitioned
                k = len(self.forks[f.parent].key)
                xs = xs[find_rows(sets[f.parent], np.ascontiguousarray(xs[:, :k]))[0]]
            if not xs.shape[0]:
                continue
            deg = self._degrees(f.id, xs)
            is_heavy = find_rows(sets[f.id], xs)[0]
            if th.all_heavy:  # ε = 0: every present value is heavy; keep the sets exact
                up, down = xs[~is_heavy & (deg > 0)], xs[is_heavy & (deg == 0)]
            else:
                up = xs[~is_heavy & (deg >= th.up)]
                down = xs[is_heavy & (deg < th.down)]
                moved += up.shape[0] + down.shape[0]
                self.rebalances["fork_moves"][f.id] += int(up.shape[0] + down.shape[0])
            if down.shape[0]:
                sets[f.id] = drop_rows(sets[f.id], down)
                k = len(f.key)
                for g in f.walk():  # the heavy tail below a light value goes
                    if g.id != f.id and sets[g.id].shape[0]:
                        keep = ~find_rows(down, np.ascontiguousarray(sets[g.id][:, :k]))[0]
                        sets[g.id] = sets[g.id][keep]
            if up.shape[0]:
                sets[f.id] = union_rows(sets[f.id], up)
                for c in f.children:
                    self._strict(c, up, sets)
        self.heavy_sets = sets
        if moved:
            self.rebalances["minor_moves"] += int(moved)
            self._reroute(old, sets)

    def _reroute(self, old: list, new: list) -> None:
        """Move the tuples whose part differs between the partitions ``old`` and ``new``
        (an insert into the new part and a delete from the old one, in every strategy that
        reads them)."""
        changed = [np.zeros((0, len(f.key)), np.int64) if a is b else
                   union_rows(drop_rows(a, b), drop_rows(b, a))
                   for f, a, b in zip(self.forks, old, new)]
        for fac in self.factors:
            batches: list[dict] = [{} for _ in fac.strategies]
            for i in fac.atoms:
                if i not in self.chain:
                    continue
                rel = self._rel(i)
                found = [self._with_keys(i, fid, changed[fid]).reorder(rel.vars).keys
                         for fid in self.chain[i] if changed[fid].shape[0]]
                if not found:
                    continue
                keys = unique_rows(np.concatenate(found))
                if not keys.shape[0]:
                    continue
                mult = rel.get(ones(rel.vars, keys))
                p_old, p_new = self._parts(i, keys, old), self._parts(i, keys, new)
                diff = p_old != p_new
                for s, t in zip(fac.strategies, batches):
                    part = s.parts[i]
                    plus, minus = diff & (p_new == part), diff & (p_old == part)
                    if plus.any() or minus.any():
                        z = consolidate(rel.vars, np.concatenate([keys[plus], keys[minus]]),
                                        np.concatenate([mult[plus], -mult[minus]]))
                        t[self._part_name(i, part)] = self._table(z)
            for s, t in zip(fac.strategies, batches):
                if t:
                    s.engine.apply(t)

    # ------------------------------------------------------------------ reading
    def _supports(self, s: _Strategy, front: ZRel) -> tuple[ZRel, dict, dict]:
        """The requests ``front`` (REQ, component inputs) with the heavy key values the
        strategy's views support, as a tree: ``(top, nodes, up)`` with ``top`` the requests
        that have an answer in the strategy, ``nodes[x]`` for each key variable x not among
        the inputs its rows (the requests' variables, then the key variables from the top
        down to x) and ``up[x]`` the key variable above x (None: ``top``).

        The thesis opens a union view iterator on the support of each heavy key (§5.3,
        BUILDUNIONITERATORS: the enclosing contexts joined with the view below it). Here the
        supports are a semi-join program along the key variables' tree (a variable's
        parent is the one before it in a fork's key, the inputs left out): every view at the
        engine's input boundary filters the rows as soon as they bind its variables; a
        variable is bound from the view that holds it with the fewest matches; independent
        subtrees (side by side below the variables bound) are each found from their parent's
        rows and only semi-joined back into them, never joined with each other; a last pass
        top down drops the rows whose parent lost its support. Every row left has an answer
        (the product of the boundary views, their multiplicities positive, is not zero) and
        the rows the strategy stands for are the join of the nodes on a root path."""
        views = [(tuple(v.vars), v) for comp in s.engine.components
                 for v in s.engine._boundary(comp, set(comp.inputs))]
        bound = set(front.vars)
        below: dict[str | None, list[str]] = {}
        up: dict[str, str | None] = {}
        for fid in s.heavy:  # ids count the forks outer first
            parent = None
            for v in self.forks[fid].key:
                if v in bound:
                    continue
                if v not in up:
                    up[v] = parent
                    below.setdefault(parent, []).append(v)
                parent = v
        nodes: dict[str, ZRel] = {}
        top = self._subtrees(front, below.get(None, []), below, views, frozenset(), nodes)
        for x in up:  # parents first (keys list their variables top down)
            nodes[x] = nodes[x].join(top if up[x] is None else nodes[up[x]], support=True)
        return top, nodes, up

    def _subtrees(self, rows: ZRel, roots: list[str], below: dict, views: list,
                  applied: frozenset, nodes: dict) -> ZRel:
        """``rows`` filtered by the views they bind (not in ``applied``) and semi-joined
        with the supports of the key variables' subtrees at ``roots``, whose rows go to
        ``nodes``."""
        have = set(rows.vars)
        for k, (vs, view) in enumerate(views):
            if k not in applied and set(vs) <= have:
                rows = view.join_from(rows, support=True)
                applied |= {k}
        for x in roots:
            if not len(rows):
                _no_rows(rows.vars, x, below, nodes)
                continue
            node = self._bind(rows, x, views)
            nodes[x] = node = self._subtrees(node, below.get(x, []), below, views, applied,
                                             nodes)
            rows = rows.join(node.marginalize(rows.vars), support=True)  # rows' vars lead
        return rows

    def _bind(self, rows: ZRel, x: str, views: list) -> ZRel:
        """``rows`` extended by the values of ``x`` that a boundary view holding ``x`` (the
        boundary covers every atom, and an atom with x holds its key) matches: the one
        with the fewest matches (:meth:`LsmRel.count_from`; one that binds only ``x`` on a
        tie), projected when it binds more than ``x``. A view over the heavy parts holds
        heavy key values only, so an atom outside the forks (say on an input and x alone,
        with many values of x) does not bind x where a fork's view holds fewer."""
        have = set(rows.vars)
        _, more, view = min((int(v.count_from(rows).sum()), not set(vs) <= have | {x}, k)
                            for k, (vs, v) in enumerate(views) if x in vs)
        got = views[view][1].join_from(rows, support=True)
        self.request_work["candidates"] += len(got)
        return got.marginalize((*rows.vars, x)).support() if more else got

    def _engine_rows(self, s: _Strategy, front: ZRel) -> list[ZRel]:
        """Per component of the strategy's engine, the rows it is asked for the requests
        ``front`` (REQ and the component's inputs, each with an answer): the supported rows
        (:meth:`_supports`) projected on its inputs, from the node of the deepest key
        variable it has (the nodes of several, joined, where it has key variables on two
        root paths; the heavy forks' atoms do not)."""
        top, nodes, up = self._supports(s, front) if s.heavy else (self._top(s, front), {}, {})
        out = []
        for comp in s.engine.components:
            mine = {v for v in comp.inputs if v in nodes}
            above = {up[v] for v in mine}
            rel = None
            for v in (v for v in up if v in mine and v not in above):  # the deepest ones
                rel = nodes[v] if rel is None else rel.join(nodes[v], support=True)
            rel = top if rel is None else rel
            rows = rel.marginalize((REQ, *comp.inputs)).support()
            self.request_work["rows"] += len(rows)
            if s.heavy:
                self.request_work["heavy_rows"] += len(rows)
            out.append(rows)
        return out

    def _top(self, s: _Strategy, front: ZRel) -> ZRel:
        """The requests ``front`` that have an answer in the light strategy ``s`` (filtered
        by the views at its engine's input boundary)."""
        for comp in s.engine.components:
            for view in s.engine._boundary(comp, set(comp.inputs)):
                front = view.join_from(front, support=True)
        return front

    def _strategy_rows(self, s: _Strategy, front: ZRel) -> ZRel:
        """The rows ``s`` stands for, joined (REQ, the component inputs and its heavy keys):
        each request with every combination of heavy key values that has an answer. For
        inspection: requests ask the engine's components their own projections."""
        rows = None
        for part in self._engine_rows(s, front):
            rows = part if rows is None else rows.join(part)
        return rows

    def _strategy_sum(self, s: _Strategy, front: ZRel, keep: tuple[str, ...],
                      totals: bool, limit: int | None = None) -> ZRel:
        """(REQ, ``keep``) -> the strategy's answers' multiplicity (``totals``: per request,
        summed over the outputs) for the requests ``front``: each component of its engine
        answers its rows, then the components' answers are joined on the variables they
        share, each variable summed out as soon as no component left has it (the heavy keys
        are bound, not outputs), so independent forks meet only in the answers. With
        ``limit``, each component answers only the first ``limit`` of each of its rows (a
        request with bound heavy key values): an answer among a request's first ``limit`` is
        among them in every row that gives it, multiplicities being non-negative."""
        eng = s.engine
        parts = self._engine_rows(s, front)
        if any(not len(p) for p in parts):
            return empty((REQ, *keep))
        w0 = eng.request_work
        with ops.using(eng._ops):
            rels = [eng._input_counts(c, p) if totals else eng._free_answers(
                c, p, None if limit is None else np.full(len(p), limit, np.int64),
                outputs=self.query.outputs) for c, p in zip(eng.components, parts)]
        self.request_work["expanded"] += eng.request_work - w0
        want = set(keep)
        acc = None
        for k, rel in enumerate(rels):
            rest = {v for r in rels[k + 1:] for v in r.vars} | want | {REQ}
            rel = _sum_out(rel, rest | set(acc.vars if acc is not None else ()))
            acc = rel if acc is None else _join(acc, rel)
            acc = _sum_out(acc, rest)
        return acc if acc.vars == (REQ, *keep) else acc.marginalize((REQ, *keep))

    def _factor_totals(self, fac: _Factor, requests: ZRel, n: int) -> np.ndarray:
        """Per request, the component's answers' multiplicity summed over its outputs."""
        front = requests.marginalize((REQ, *fac.inputs))
        totals = np.zeros(n, np.int64)
        for s in fac.strategies:
            per = self._strategy_sum(s, front, (), totals=True)
            at = per.keys[:, 0]
            totals[at] = checked_add(totals[at], per.mult)
        return totals

    def _factor_answers(self, fac: _Factor, requests: ZRel, limit: int | None = None) -> ZRel:
        """(REQ, component outputs) -> multiplicity: the strategies' answers summed (each
        strategy's are sorted: merged in linear passes, smallest first); with ``limit``, the
        first ``limit`` per request (each strategy's answers are a subset of the sum's, so
        each strategy need only give its first ``limit``)."""
        front = requests.marginalize((REQ, *fac.inputs))
        parts = sorted((self._strategy_sum(s, front, tuple(fac.outputs), totals=False,
                                           limit=limit)
                        for s in fac.strategies), key=len)
        result = parts[0]
        for p in parts[1:]:
            if len(p):
                result = result.merge(p) if len(result) else p
        if limit is None:
            return result
        return _first(result.reorder((REQ, *(v for v in self.query.outputs
                                            if v in fac.outputs))), limit)

    def count(self, inputs=None):
        """As :meth:`Engine.count`: per component the sum over its strategies, multiplied
        across components (joined on the input variables components share)."""
        if inputs is not None:
            totals, n = self._request_totals(inputs)
            return pa.table({"request": np.arange(n, dtype=np.int64), "count": totals})
        seen: dict[str, int] = {}
        for fac in self.factors:
            for v in fac.inputs:
                seen[v] = seen.get(v, 0) + 1
        shared = {v for v, c in seen.items() if c > 1}
        if not shared:
            total = 1
            for fac in self.factors:
                part = sum(s.engine.count() for s in fac.strategies)
                _exact_check([part])
                total *= part
            _exact_check([total])
            return total
        result = scalar(1)
        for fac in self.factors:
            keep = tuple(v for v in fac.inputs if v in shared)
            per = None
            for s in fac.strategies:
                z = _input_totals(s.engine, keep)
                per = z if per is None else consolidate(
                    keep, np.concatenate([per.keys, z.keys]), np.concatenate([per.mult, z.mult]))
            result = result.join(per)
        return checked_total(result.mult)

    def exists(self, inputs=None) -> pa.Table:
        """As :meth:`Engine.exists`."""
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "exists": totals != 0})

    def _request_totals(self, inputs) -> tuple[np.ndarray, int]:
        requests, n = self._reader._requests(inputs)
        self.request_work = _work()
        totals = np.ones(n, np.int64)
        for fac in self.factors:
            totals = checked_mul(totals, self._factor_totals(fac, requests, n))
        return totals, n

    def request(self, inputs=None, *, limit: int | None = None) -> pa.Table:
        """As :meth:`gpu_ivm.cq.Engine.request`; with ``limit``, every strategy's engine
        expands only the first ``limit`` answers of each request and heavy key value (see
        :meth:`_strategy_sum`), not the whole answer."""
        if limit is None:
            return self._answers(inputs)[0]
        return self._answers(inputs, check_limit(limit))[0]

    def _answers(self, inputs, limit: int | None = None) -> tuple[pa.Table, int]:
        q = self.query
        requests, n = self._reader._requests(inputs)
        self.request_work = _work()
        if len(self.factors) > 1:  # a request without answers in one component has none
            alive = np.ones(n, bool)
            for fac in self.factors:
                alive &= self._factor_totals(fac, requests, n) != 0
            keep = alive[requests.keys[:, 0]]
            requests = ZRel(requests.vars, requests.keys[keep], requests.mult[keep])
        result = None
        for fac in self.factors:
            z = self._factor_answers(fac, requests, limit)
            result = z if result is None else result.join(z)
        out = result.marginalize((REQ, *q.outputs))
        if limit is not None:
            out = _first(out, limit)
        return self._reader._table(out), n

    # ------------------------------------------------------------------ snapshots
    @property
    def columns(self) -> dict:
        """The column names read per relation (as :attr:`Engine.columns`)."""
        return self._reader.columns

    @property
    def schemas(self) -> dict:
        return self.query.schemas

    mode = "general"  # no insert-only mode below ε = 1
    insert_only_active = False
    switched_at = None

    def snapshot(self, path, *, metadata: dict | None = None) -> dict:
        """Write the query, ε, the base relations and the partition (every fork's heavy key
        values, M) to folder ``path`` atomically (see :mod:`gpu_ivm.cq.snapshot`); returns
        the manifest."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path, *, backend: str = "cpu") -> TradeoffEngine:
        """An engine restored from a snapshot folder of a trade-off engine: every strategy
        rebuilt from the relations with the saved partition (so rebalancing goes on as it
        would have), checked against the manifest's checksums and count; ``backend`` as for
        :class:`Engine` (a snapshot holds no backend: either restores on either)."""
        from .snapshot import load

        return load(path, cls, backend=backend)

    def _restore_state(self, base: dict, heavy_sets: list[np.ndarray], M: int,
                       rebalances: dict) -> None:
        """Install restored relations and partition and build every strategy; ValueError
        when the partition does not fit the query or the relations."""
        size = sum(len(rel) for rel in base.values())
        if not M // 4 <= size < M:
            raise ValueError(f"M = {M} does not bound the {size} tuples (M/4 <= N < M)")
        if len(heavy_sets) != len(self.forks):
            raise ValueError(f"{len(heavy_sets)} heavy sets for {len(self.forks)} forks")
        for f, h in zip(self.forks, heavy_sets):
            if h.ndim != 2 or h.shape[1] != len(f.key):
                raise ValueError(f"the heavy values of fork {f.var} are not rows of "
                                 f"{len(f.key)} column(s)")
            if h.shape[0] and not np.array_equal(unique_rows(h), h):
                raise ValueError(f"the heavy values of fork {f.var} are not sorted and unique")
            if f.parent is not None and h.shape[0]:
                k = len(self.forks[f.parent].key)
                if not find_rows(heavy_sets[f.parent], np.ascontiguousarray(h[:, :k]))[0].all():
                    raise ValueError(f"a heavy value of fork {f.var} lies below a light value "
                                     f"of fork {self.forks[f.parent].var}")
        self.base = {name: LsmRel(rel) for name, rel in base.items()}
        self.size, self.M = size, int(M)
        self.heavy_sets = [np.ascontiguousarray(h, np.int64) for h in heavy_sets]
        self.rebalances = self._counters(rebalances)
        self._load_strategies()
        self._version += 1

    def explain(self) -> str:
        """The plan, the forks with their keys and heavy values, and every strategy."""
        th = self._threshold()
        lines = [self._reader.explain(),
                 f"heavy/light at eps = {self.epsilon}: M = {self.M}, theta cut-offs strict "
                 f"{th.strict}, up {th.up}, down {th.down}"]
        for f in self.forks:
            inside = "" if f.parent is None else f" (heavy side of {self.forks[f.parent].var})"
            lines.append(f"fork at {f.var}{inside}: key ({','.join(f.key)}) over "
                         f"{', '.join(str(self.query.atoms[i]) for i in f.atoms)}; "
                         f"{self.heavy_sets[f.id].shape[0]} heavy values")
        for k, fac in enumerate(self.factors, 1):
            for s in fac.strategies:
                heavy = ", ".join(self.forks[fid].var for fid in s.heavy) or "none"
                lines.append(f"component {k}, heavy forks {heavy}: {s.engine.query}")
        return "\n".join(lines)


def _sum_out(rel: ZRel, keep: set[str]) -> ZRel:
    """``rel`` summed over its variables not in ``keep`` (itself when it has none)."""
    vs = tuple(v for v in rel.vars if v in keep)
    return rel if vs == rel.vars else rel.marginalize(vs)


def _join(a: ZRel, b: ZRel) -> ZRel:
    """``a ⋈ b``, the smaller one looked up in the larger where the larger is sorted by the
    variables they share already (a join sorts its right side by them)."""
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    shared = tuple(v for v in small.vars if v in big.vars)
    if big.vars[:len(shared)] == shared:
        return small.join(big)
    return big.join(small)


def _no_rows(vars: tuple[str, ...], x: str, below: dict, nodes: dict) -> None:
    """Empty rows in ``nodes`` for ``x`` below the variables ``vars`` and for the key
    variables below it."""
    nodes[x] = empty((*vars, x))
    for c in below.get(x, []):
        _no_rows((*vars, x), c, below, nodes)


def _work() -> dict[str, int]:
    """:attr:`TradeoffEngine.request_work` before a request batch."""
    return {"rows": 0, "heavy_rows": 0, "candidates": 0, "expanded": 0}


def _input_totals(eng: Engine, keep: tuple[str, ...]) -> ZRel:
    """Per value of the input variables ``keep``, the engine's answers' multiplicity summed
    over its other inputs and its outputs (from the views at its inputs' boundary)."""
    result = scalar(1)
    for comp in eng.components:
        for rel in eng._boundary(comp, set(comp.inputs)):
            result = rel.join_from(result)
    return result.marginalize(keep)
