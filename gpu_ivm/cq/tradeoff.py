"""The ε trade-off of hierarchical CQAPs (thesis Chapter 5, digest §4) at one fork variable.

For ε < 1, the strategy Ω of the thesis partitions the relations under a variable X whose
induced query is not CQAP_0 (X bound with free variables below it, or an output with inputs
below it) by the degree of their X values, with threshold θ = M^ε:

- the **light tree** is the query over the light parts (every X value of degree < θ): the
  access-top view tree of the ε = 1 engine, whose delta per update is at most θ: O(N^{δε});
- the **heavy tree** treats X as an input over the heavy parts (at most N/θ = N^{1−ε} X
  values): a query with X among its inputs, maintained by the ε = 1 engine, O(1) per update
  for the queries handled here; a request asks it once per heavy X value, so an answer waits
  O(N^{1−ε}) (the delay of Thm 3.5).

Each result has one X value, so it comes from exactly one tree and a request's answers are
the sum of the two trees' (digest §4.4 [OWN]: the trees partition the data). ε = 1 puts every
X value in the light tree (the eager engine), ε = 0 every one in the heavy tree (lazy).

Scope: the fork must be at a root of the canonical variable order of one fracture component
(key {X}); the heavy and light trees are ε = 1 view trees below it (a query that Ω would fork
again deeper keeps ε = 1 there); no self-joins among the partitioned relations. Other
queries are refused with :class:`~gpu_ivm.cq.engine.UnsupportedQueryError`; ε = 1 is
:class:`~gpu_ivm.cq.engine.Engine`.

Rebalancing (digest §4.6): ⌊M/4⌋ ≤ N < M with N the number of distinct tuples; at load and
when N leaves that range (M doubled or halved) the partition is recomputed strictly (heavy
iff some relation has ≥ θ tuples with that X value) and both trees rebuilt; after a batch, an
X value it touched moves to the heavy tree when some relation has ≥ ⌈3θ/2⌉ tuples with it,
and to the light tree when every relation has fewer than ⌈θ/2⌉ (its tuples deleted from one
tree and inserted into the other). Thresholds are compared in integers
(:class:`gpu_ivm.rational.Thresholds`).

>>> eng = TradeoffEngine("Q(C | A) = R(A,B), S(B,C)", epsilon="1/2")
>>> eng.load(R={"a": [1, 1, 2], "b": [7, 8, 7]}, S={"b": [7, 7, 8], "c": [5, 6, 5]})
>>> eng.request({"A": [1, 2]}).to_pydict()
{'request': [0, 0, 1, 1], 'C': [5, 6, 5, 6], 'mult': [2, 1, 1, 1]}
>>> eng.apply({"S": {"b": [8], "c": [5], "mult": [-1]}})
>>> eng.count(), eng.fork
(4, 'B')
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..rational import Thresholds, parse_epsilon
from .engine import Engine, UnsupportedQueryError
from .lsm import LsmRel
from .planner import plan
from .requests import RequestCursor, check_limit
from .syntax import Query
from .zrel import ZRel, _exact_check, checked_add, consolidate, empty

__all__ = ["TradeoffEngine", "find_fork"]

REQ = "#request"


def find_fork(query: str | Query) -> tuple[str, list[int]] | None:
    """``(X, atoms under X)`` of the variable where Ω forks, or None when no variable forks
    (every induced query CQAP_0, as for CQAP_0 queries). Raises UnsupportedQueryError for a
    fork this module does not handle (below a root, in two components, non-hierarchical)."""
    p = plan(query)
    q = p.query
    forks = []
    for part in p.parts:
        if not part.hierarchical:
            raise UnsupportedQueryError(f"query {q} has a non-hierarchical component: the "
                                        "heavy/light trade-off (epsilon < 1) needs a "
                                        "hierarchical fracture")
        for root in part.canonical:
            forks += _forks(root, q, [])
    if not forks:
        return None
    if len(forks) > 1 or forks[0][2]:
        where = ", ".join(f[0] for f in forks)
        raise UnsupportedQueryError(f"query {q}: the heavy/light strategy forks at {where}; "
                                    "only one fork at a root of the canonical variable order "
                                    "is implemented (use epsilon=1)")
    return forks[0][0], forks[0][1]


def _forks(node, q: Query, anc: list[str]) -> list[tuple[str, list[int], bool]]:
    """(X, subtree atoms, below a root?) of Ω's forks in ``node``'s subtree."""
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
            out += _forks(c, q, anc + [x])
        return out
    return [(x, atoms, bool(anc))]


class TradeoffEngine:
    """A hierarchical CQAP at ε < 1: a heavy and a light ε = 1 engine split at the fork
    variable (see the module docstring). Same API as :class:`~gpu_ivm.cq.engine.Engine` for
    ``load``, ``apply``, ``count``, ``request``, ``cursor`` and ``exists``."""

    def __init__(self, query: str | Query, relations: Mapping[str, list[str]] | None = None,
                 *, epsilon) -> None:
        self.epsilon = parse_epsilon(epsilon)
        self._reader = Engine(query, relations)  # reads and checks tables as Engine does
        self.query: Query = self._reader.query
        q = self.query
        found = find_fork(q)
        if found is None:
            raise UnsupportedQueryError(f"query {q} never forks (every induced query is "
                                        "CQAP_0): epsilon 1 is optimal; use Engine")
        self.fork, atoms = found
        self.parted = sorted({q.atoms[i].relation for i in atoms})
        if any(r in q.self_joins for r in self.parted):
            raise UnsupportedQueryError(f"query {q}: a relation under the fork variable "
                                        f"{self.fork} occurs twice (self-joins are not "
                                        "partitioned yet)")
        self.column = {q.atoms[i].relation: q.atoms[i].variables.index(self.fork)
                       for i in atoms}
        self.light = Engine(self._renamed("L", q.inputs, q.outputs))
        heavy_out = tuple(v for v in q.outputs if v != self.fork)
        self.heavy = Engine(self._renamed("H", (*q.inputs, self.fork), heavy_out))
        self.base: dict[str, LsmRel] = {}
        self.heavy_keys = np.zeros(0, np.int64)  # sorted X values of the heavy tree
        self.M = 1
        self.size = 0
        self._version = 0
        self.batches_applied = 0
        self.rebalances = {"major": 0, "minor_moves": 0}
        self.load()

    def _renamed(self, part: str, inputs, outputs) -> str:
        body = ", ".join(f"{a.relation}__{part}({','.join(a.variables)})"
                         if a.relation in self.column else str(a) for a in self.query.atoms)
        return f"Q({','.join(outputs)} | {','.join(inputs)}) = {body}"

    # ------------------------------------------------------------------ partition
    def _threshold(self) -> Thresholds:
        return Thresholds.of(self.M, self.epsilon)

    def _degrees(self, name: str, xs: np.ndarray) -> np.ndarray:
        """Distinct tuples of relation ``name`` with X value xs[i]."""
        col = f"c{self.column[name]}"
        keys = np.unique(xs).reshape(-1, 1)
        left = ZRel((col,), keys, np.ones(keys.shape[0], np.int64))
        rows = self.base[name].join_from(left, support=True).marginalize((col,))
        deg = np.zeros(keys.shape[0], np.int64)
        pos = np.searchsorted(keys[:, 0], rows.keys[:, 0])
        deg[pos] = rows.mult
        return deg[np.searchsorted(keys[:, 0], xs)]

    def _max_degree(self, xs: np.ndarray) -> np.ndarray:
        return np.max([self._degrees(r, xs) for r in self.parted], axis=0) if xs.shape[0] \
            else np.zeros(0, np.int64)

    def _split(self, name: str, rel: ZRel) -> tuple[ZRel, ZRel]:
        """(light part, heavy part) of a relation's tuples by their X values."""
        x = rel.keys[:, self.column[name]]
        if self._threshold().all_heavy:  # ε = 0: every X value is heavy, new ones too
            hv = np.ones(x.shape[0], bool)
        else:  # a value not seen yet is light (TRANSIENTHLS)
            hv = np.isin(x, self.heavy_keys)
        return (ZRel(rel.vars, rel.keys[~hv], rel.mult[~hv]),
                ZRel(rel.vars, rel.keys[hv], rel.mult[hv]))

    def _route(self, name: str, rel: ZRel, light: dict, heavy: dict) -> None:
        """Add relation ``name``'s tuples ``rel`` to the two trees' tables: split by X value
        for a partitioned relation, whole to both otherwise."""
        if name in self.column:
            lz, hz = self._split(name, rel)
            light[f"{name}__L"], heavy[f"{name}__H"] = self._table(lz), self._table(hz)
        else:
            light[name] = heavy[name] = self._table(rel)

    @staticmethod
    def _table(rel: ZRel) -> dict:
        t = {f"c{j}": rel.keys[:, j] for j in range(rel.keys.shape[1])}
        t["mult"] = rel.mult
        return t

    def _rebuild(self) -> None:
        """Strict partition with the current M and both trees loaded (major rebalancing)."""
        n = self.size
        self.M = max(2 * n + 1, 1)
        th = self._threshold()
        xs = np.unique(np.concatenate([self.base[r].zrel().keys[:, self.column[r]]
                                       for r in self.parted])) if self.parted else \
            np.zeros(0, np.int64)
        deg = self._max_degree(xs)
        self.heavy_keys = xs[deg >= th.strict] if not th.all_heavy else xs
        self._load_trees()

    def _load_trees(self) -> None:
        """Both trees built from the base relations split by ``heavy_keys``."""
        light, heavy = {}, {}
        for name, rel in self.base.items():
            self._route(name, rel.zrel(), light, heavy)
        self.light.load(**light)
        self.heavy.load(**heavy)

    # ------------------------------------------------------------------ loading, batches
    def load(self, **tables) -> None:
        """As :meth:`Engine.load`; partitions strictly and builds both trees."""
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
        changes (the two trees and the partition are restored)."""
        if not isinstance(batch, Mapping):
            raise InputError("a batch is a mapping {relation name: table}")
        deltas = {name: self._reader._read(name, table, need_mult=True)
                  for name, table in batch.items()}
        grow = 0
        for name, d in deltas.items():
            if len(d):
                old = self.base[name].get(d)
                after = checked_add(old, d.mult)
                self._reader._refuse_negative(name, d.keys, after)
                grow += int(((after != 0) & (old == 0)).sum() - ((after == 0) & (old != 0)).sum())
        saved = [self.light._save(), self.heavy._save(),
                 [(rel, rel.state()) for rel in self.base.values()]]
        saved_part = (self.heavy_keys, self.M, self.size)
        try:
            light, heavy = {}, {}
            for name, d in deltas.items():
                if not len(d):
                    continue
                self.base[name].merge(d)
                self._route(name, d, light, heavy)
            self.light.apply(light)
            self.heavy.apply(heavy)
            self.size += grow
            if not self.M // 4 <= self.size < self.M:
                self.rebalances["major"] += 1
                self._rebuild()
            else:
                self._minor(deltas)
        except BaseException:
            for part in saved:
                Engine._restore(part)
            self.heavy_keys, self.M, self.size = saved_part
            raise
        self._version += 1
        self.batches_applied += 1

    def _minor(self, deltas: dict) -> None:
        """Move the X values the batch touched whose degree crossed the thresholds."""
        th = self._threshold()
        touched = [d.keys[:, self.column[n]] for n, d in deltas.items()
                   if n in self.column and len(d)]
        if not touched:
            return
        xs = np.unique(np.concatenate(touched))
        deg = self._max_degree(xs)
        if th.all_heavy:  # ε = 0: the heavy tree holds every value; keep its list exact
            self.heavy_keys = np.union1d(np.setdiff1d(self.heavy_keys, xs[deg == 0]),
                                         xs[deg > 0])
            return
        is_heavy = np.isin(xs, self.heavy_keys)
        up = xs[~is_heavy & (deg >= th.up)]
        down = xs[is_heavy & (deg < th.down)]
        if not up.shape[0] and not down.shape[0]:
            return
        self.rebalances["minor_moves"] += int(up.shape[0] + down.shape[0])
        light, heavy = {}, {}
        for name in self.parted:
            col = f"c{self.column[name]}"
            moved = []
            for keys, sign in ((up, 1), (down, -1)):  # +: light -> heavy
                if keys.shape[0]:
                    left = ZRel((col,), keys.reshape(-1, 1), np.ones(keys.shape[0], np.int64))
                    rows = self.base[name].join_from(left).reorder(self.base[name].vars)
                    moved.append((rows, sign))
            lk = [r.keys for r, _ in moved]
            if not sum(len(r) for r, _ in moved):
                continue
            to_light = consolidate(self.base[name].vars, np.concatenate(lk),
                                   np.concatenate([-s * r.mult for r, s in moved]))
            light[f"{name}__L"] = self._table(to_light)
            heavy[f"{name}__H"] = self._table(ZRel(to_light.vars, to_light.keys, -to_light.mult))
        self.light.apply(light)
        self.heavy.apply(heavy)
        self.heavy_keys = np.union1d(np.setdiff1d(self.heavy_keys, down), up)

    # ------------------------------------------------------------------ reading
    def count(self, inputs=None):
        """As :meth:`Engine.count`: the light tree's plus the heavy tree's."""
        if inputs is None:
            total = self.light.count() + self.heavy.count()
            _exact_check([total])
            return total
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "count": totals})

    def exists(self, inputs=None) -> pa.Table:
        """As :meth:`Engine.exists`."""
        totals, n = self._request_totals(inputs)
        return pa.table({"request": np.arange(n, dtype=np.int64), "exists": totals != 0})

    def _request_totals(self, inputs) -> tuple[np.ndarray, int]:
        totals, n = self.light._request_totals(inputs)
        totals = totals.copy()
        req, _ = self._heavy_requests(inputs)
        if len(req[REQ]):
            h = self.heavy.count({v: req[v] for v in (*self.query.inputs, self.fork)})
            per = consolidate((REQ,), req[REQ][h.column("request").to_numpy()].reshape(-1, 1),
                              h.column("count").to_numpy())  # summed per request, checked
            at = per.keys[:, 0]
            totals[at] = checked_add(totals[at], per.mult)
        return totals, n

    def _heavy_requests(self, inputs) -> tuple[dict, int]:
        """The heavy tree's requests: every request once per heavy X value (k·N^{1−ε})."""
        requests, n = self._reader._requests(inputs)
        h = self.heavy_keys
        rows = np.repeat(np.arange(n, dtype=np.int64), h.shape[0])
        out = {REQ: rows}
        for j, v in enumerate(self.query.inputs, 1):
            out[v] = requests.keys[rows, j]
        out[self.fork] = np.tile(h, n)
        return out, n

    def _answers(self, inputs) -> tuple[pa.Table, int]:
        q = self.query
        light = self.light.request(inputs)
        req, n = self._heavy_requests(inputs)
        cols = [light.column("request").to_numpy()] + [light.column(v).to_numpy()
                                                       for v in q.outputs]
        mults = [light.column("mult").to_numpy()]
        keys = [np.stack(cols, axis=1) if cols[0].shape[0] else np.zeros((0, 1 + len(
            q.outputs)), np.int64)]
        if len(req[REQ]):
            hin = {v: req[v] for v in (*q.inputs, self.fork)}
            ans = self.heavy.request(hin)
            at = ans.column("request").to_numpy()
            hcols = [req[REQ][at]] + [req[self.fork][at] if v == self.fork
                                      else ans.column(v).to_numpy() for v in q.outputs]
            keys.append(np.stack(hcols, axis=1))
            mults.append(ans.column("mult").to_numpy())
        z = consolidate((REQ, *q.outputs), np.concatenate(keys).astype(np.int64),
                        np.concatenate(mults))
        data = {"request": z.keys[:, 0]}
        for k, v in enumerate(q.outputs, 1):
            data[v] = z.keys[:, k]
        data["mult"] = z.mult
        return pa.table(data), n

    def request(self, inputs=None, *, limit: int | None = None) -> pa.Table:
        """As :meth:`Engine.request`."""
        if limit is not None:
            return self.cursor(inputs, limit=limit).next()
        return self._answers(inputs)[0]

    def cursor(self, inputs=None, *, limit: int) -> RequestCursor:
        """As :meth:`Engine.cursor`."""
        check_limit(limit)
        answers, n = self._answers(inputs)
        return RequestCursor(answers, n, limit, self, self._version)

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
        """Write the query, ε, the base relations and the partition (the heavy X values, M)
        to folder ``path`` atomically (see :mod:`gpu_ivm.cq.snapshot`); returns the
        manifest."""
        from .snapshot import save

        return save(self, path, metadata=metadata)

    @classmethod
    def restore(cls, path) -> TradeoffEngine:
        """An engine restored from a snapshot folder of a trade-off engine: both trees
        rebuilt from the relations with the saved partition (so rebalancing goes on as it
        would have), checked against the manifest's checksums and count."""
        from .snapshot import load

        return load(path, cls)

    def _restore_state(self, base: dict, heavy_keys: np.ndarray, M: int,
                       rebalances: dict) -> None:
        """Install restored relations and partition and build both trees; ValueError when
        the partition does not fit the relations."""
        size = sum(len(rel) for rel in base.values())
        if not M // 4 <= size < M:
            raise ValueError(f"M = {M} does not bound the {size} tuples (M/4 <= N < M)")
        if heavy_keys.ndim != 1 or (np.diff(heavy_keys) <= 0).any():
            raise ValueError("the heavy values are not sorted and unique")
        self.base = {name: LsmRel(rel) for name, rel in base.items()}
        self.size, self.M, self.heavy_keys = size, int(M), heavy_keys
        self.rebalances = {"major": int(rebalances.get("major", 0)),
                           "minor_moves": int(rebalances.get("minor_moves", 0))}
        self._load_trees()
        self._version += 1

    def explain(self) -> str:
        th = self._threshold()
        return (f"{self._reader.explain()}\n"
                f"heavy/light at eps = {self.epsilon}: fork at {self.fork} over "
                f"{', '.join(self.parted)}; M = {self.M}, theta cut-offs strict {th.strict}, "
                f"up {th.up}, down {th.down}; {self.heavy_keys.shape[0]} heavy values\n"
                f"light tree: {self.light.query}\nheavy tree: {self.heavy.query}")


def engine(query: str | Query, relations=None, *, epsilon=1):
    """:class:`TradeoffEngine` for ε < 1 when the query forks; otherwise ``Engine`` (ε = 1, or
    a query that never forks, such as a CQAP_0 query, for which ε = 1 is the thesis's
    choice at every ε)."""
    if parse_epsilon(epsilon) == 1 or find_fork(query) is None:
        return Engine(query, relations)
    return TradeoffEngine(query, relations, epsilon=epsilon)

