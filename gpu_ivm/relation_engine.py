"""The three-relation form: Q = Σ_{a,b,c} R(a,b)·S(b,c)·T(c,a) over Z-relations.

Multiplicities are arbitrary nonzero int64 (bag / Z semantics: a delete is a negative
multiplicity, a relation may hold negative multiplicities). ε may be one exact rational for all
three relations or one per relation (factorized IVM, e.g. ε_R = ε_S = 0, ε_T = 1). A batch is
applied relation by relation, R, then S, then T (paper digest §11.2): each phase's count delta
is linear in that relation's updates and uses the current state of the two others, which
captures every cross term of the batch exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from . import io, snapshot, warmup
from .backend import Backend
from .encoding import pack, unpack
from .engine import BatchReport, TriangleEngineBase, group_starts, sum_products
from .errors import InputError, IntegerOverflowError
from .overflow import VALUE_LIMIT, max_abs
from .queries.api import FreeQueryResults
from .rational import EpsilonLike, parse_epsilon_setting
from .recompute import AdaptivePolicy
from .warmup import warm_up

REL_NAMES = ("R", "S", "T")


def _epsilons(epsilon) -> list:
    if isinstance(epsilon, Mapping):
        unknown = set(epsilon) - set(REL_NAMES)
        if unknown:
            raise InputError(f"per-relation epsilon for unknown relations {sorted(unknown)}; "
                             "use keys 'R', 'S', 'T'", column="epsilon")
        missing = [r for r in REL_NAMES if r not in epsilon]
        if missing:
            raise InputError(f"per-relation epsilon is missing {missing}", column="epsilon")
        return [parse_epsilon_setting(epsilon[r]) for r in REL_NAMES]
    e = parse_epsilon_setting(epsilon)
    return [e, e, e]


class RelationEngine(FreeQueryResults, TriangleEngineBase):
    """Maintain Q = Σ R(a,b)·S(b,c)·T(c,a) under batches of updates to R, S and T.

    Parameters
    ----------
    epsilon : "auto", str, Fraction, float or mapping
        One ε in [0, 1] for all relations, ``"auto"`` (default: each relation's ε is picked
        from its degree distribution at load and at every major rebalancing, see
        :mod:`gpu_ivm.eps_policy`), or ``{"R": .., "S": .., "T": ..}`` (values may be "auto").
    backend : str, optional
        ``"cpu"``, ``"cuda"`` or ``"auto"`` (default from ``GPU_IVM_BACKEND``, else cpu).
    adaptive : bool
        Recompute from scratch when a batch is so large that this is cheaper.
    maintain : str or list of str
        Results kept fresh besides Q: ``"vertex_counts"`` (Δ1(a)), ``"edge_counts"``
        (Δ2(a, b)), ``"triangles"`` (Δ3(a, b, c) with multiplicities); these need
        multiplicities >= 0 (a delete beyond a tuple's multiplicity is rejected).
    track_changes : bool
        Keep each batch's result changes for :meth:`last_changes`.
    mode : {"general", "insert_only", "auto"}
        ``"insert_only"``: positive multiplicities only, kept without partitions or views
        (a delete is refused), ``"auto"``: insert-only until the first delete, then general;
        see :mod:`gpu_ivm.insert_only_relations` and docs/modes.md.

    Examples
    --------
    >>> e = RelationEngine()
    >>> _ = e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]},
    ...            T={"src": [3], "dst": [1], "mult": [2]})
    >>> e.count()
    2
    >>> e.apply({"rel": ["R", "T"], "src": [1, 3], "dst": [2, 1], "mult": [-1, 5]}).triangles
    0
    """

    names = REL_NAMES

    def __init__(self, *, epsilon: EpsilonLike | Mapping[str, EpsilonLike] = "auto",
                 backend: str | Backend | None = None, adaptive: bool = True,
                 maintain: str | Iterable[str] | None = None, track_changes: bool = False,
                 mode: str = "general"):
        eps = _epsilons(epsilon)
        super().__init__(eps, backend)
        self.policy = AdaptivePolicy(enabled=adaptive)
        # the free-query structures keep a fixed ε (1/2 where it is "auto")
        self._init_queries(maintain, [Fraction(1, 2) if e is None else e for e in eps],
                           track_changes)

    @property
    def epsilons(self) -> list[Fraction]:
        """The ε of R, S and T in use (automatic ones: chosen at the last rebuild)."""
        return [r.eps for r in self.rels]

    def count(self) -> int:
        """The current value of Q."""
        return self.Q

    def __len__(self) -> int:
        """The number of stored tuples over R, S and T (tuples with a nonzero multiplicity)."""
        return self.size

    def __bool__(self) -> bool:
        return True  # an engine is truthy even while it holds no tuple

    def __repr__(self) -> str:
        """ε per relation, stored tuples per relation, Q and backend, from maintained counters.

        >>> e = RelationEngine(epsilon={"R": 0, "S": "1/2", "T": 1})
        >>> _ = e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]},
        ...            T={"src": [3], "dst": [1], "mult": [2]})
        >>> e
        RelationEngine(epsilon={'R': '0', 'S': '1/2', 'T': '1'}, tuples={'R': 1, 'S': 1, 'T': 1},
                       count=2, backend='cpu')

        An ε chosen by the engine (``"auto"``) shows as e.g. ``'1 (auto)'``.
        """
        eps = {K.name: str(K.eps) + (" (auto)" if K.auto else "") for K in self.rels}
        sizes = {K.name: len(K) for K in self.rels}
        extra = f", maintain={list(self.maintain[1:])}" if self.fq is not None else ""
        return (f"RelationEngine(epsilon={eps}, tuples={sizes}, count={self.Q}, "
                f"backend={self.backend.name!r}{extra})")

    @property
    def num_keys(self) -> int:
        """Distinct attribute values seen so far (one domain shared by A, B and C)."""
        return len(self.encoder)

    def relation(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first, second, multiplicity) of relation ``"R"``, ``"S"`` or ``"T"``, user keys."""
        if name not in REL_NAMES:
            raise InputError(f"unknown relation {name!r}; use 'R', 'S' or 'T'", column="rel")
        keys, vals = map(self.backend.to_host, self.rels[REL_NAMES.index(name)].items())
        a, b = unpack(keys)
        return self.encoder.decode(a), self.encoder.decode(b), vals

    # ------------------------------------------------------------------ loading
    def load(self, R: Any = None, S: Any = None, T: Any = None,
             **read_options: Any) -> BatchReport:
        """Load the initial relations (each anything :func:`gpu_ivm.io.read_relation` reads,
        with columns ``src``, ``dst`` and optional ``mult``; ``read_options`` such as ``src=``,
        ``mult=``, ``header=``, ``ids=`` go to it); the engine must be empty."""
        t0 = self._clock()
        if self.size or self.batches_applied:
            raise InputError("load() needs an empty engine; apply batches instead")
        # kernels loaded (or compiled, cold cache) once per process before any timed batch
        warm_up(self.backend, self.maintain, self.track_changes)
        parts = []
        for src in (R, S, T):
            if src is None:
                parts.append((np.zeros(0, np.int64),) * 3)
            else:
                parts.append(io.read_relation(src, **read_options))
        self._check_load(parts)
        allkeys = [p[0] for p in parts] + [p[1] for p in parts]
        kinds = {("str" if a.dtype == object else "int") for a in allkeys if a.shape[0]}
        if len(kinds) > 1:
            raise InputError("relations mix string and integer keys", column="src")
        ids, new = self.encoder.plan(np.concatenate(allkeys) if kinds else
                                     np.zeros(0, np.int64), "src")
        rows = sum(p[0].shape[0] for p in parts)
        sizes = [p[0].shape[0] for p in parts]
        offs = np.cumsum([0] + sizes + sizes)
        consolidated = []
        for k in range(3):
            a = ids[offs[k]:offs[k + 1]]
            b = ids[offs[3 + k]:offs[4 + k]]
            consolidated.append(self._consolidate(pack(a, b), parts[k][2]))
        self._check_overflow({k: v for k, (_, v) in enumerate(consolidated)})
        if self.fq is not None and any(v.shape[0] and int(v.min()) < 0 for _, v in consolidated):
            raise InputError("maintaining vertex_counts, edge_counts or triangles needs "
                             "positive multiplicities (paper 001, footnote 2)", column="mult")
        self.encoder.commit(new)
        be = self.backend
        consolidated = [(be.to_device(k), be.to_device(v)) for k, v in consolidated]
        self._build(consolidated)
        self._queries_build([(k >> 32, k & 0xFFFFFFFF, v) for k, v in consolidated])
        return self._report(t0, batch=-1, rows=rows, updates=self.size, triangles=self.Q,
                            delta=self.Q, path="load")

    def _check_load(self, parts: list) -> None:
        """The relations a load read, (first, second, mult) each, before anything changes:
        the insert-only mode refuses a negative multiplicity here."""

    @staticmethod
    def _consolidate(keys: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys)  # summed per key: any order of equal keys
        skeys = keys[order]
        starts = group_starts(skeys)
        if skeys.shape[0] == 0:
            return skeys, mult[:0].astype(np.int64)
        mult = np.asarray(mult, np.int64)[order]
        if max_abs(np, mult) * mult.shape[0] >= VALUE_LIMIT:  # a row sum could wrap around
            reach = np.add.reduceat(np.abs(mult).astype(np.float64), starts)
            if (reach >= float(VALUE_LIMIT)).any():
                raise IntegerOverflowError("this batch could overflow int64: rows of one tuple "
                                           "add up to 2**62 or more; nothing was changed")
        sums = np.add.reduceat(mult, starts)
        uk = skeys[starts]
        nz = sums != 0
        return uk[nz], sums[nz]

    def _build(self, consolidated) -> None:
        t0 = self._clock()
        self._grow_ids(max(len(self.encoder), 1))
        total = sum(k.shape[0] for k, _ in consolidated)
        self.N = 2 * total + 1
        for K, (keys, vals) in zip(self.rels, consolidated):
            K.rebuild(self.N, keys, vals)
        self._rebuild_views()
        t1 = self._clock()
        self.Q = self._static_q(consolidated)
        t2 = self._clock()
        self.stale = False
        self._calibrate_delta()
        self.policy.observe_rebuild(t2 - t0, total)
        self.policy.observe_recompute(t2 - t1, total)
        if self.policy.recompute_sec_per_tuple is not None:
            self._recompute_calibrated_at = total

    def _static_q(self, consolidated) -> int:
        from .static import relation_triangle_sum_backend

        return relation_triangle_sum_backend(list(consolidated), max(len(self.encoder), 1),
                                             self.backend)

    def _count_from_stores(self) -> int:
        return self._static_q([K.items() for K in self.rels])

    def recount(self) -> int:
        """Q recomputed with the IVM^ε kernels, Σ_{(a,b) ∈ R} R(a,b)·(S·T)(b,a); a state left
        stale by the recompute path is brought up to date first."""
        self._freshen()
        keys, vals = self.rels[0].items()
        a, b = unpack(keys)
        return sum_products(vals, self._path_weights(0, a, b, False))

    # ------------------------------------------------------------------ batches
    def apply(self, updates: Any, *, batch_id: int | None = None,
              **read_options: Any) -> BatchReport:
        """Apply one batch (columns ``rel``, ``src``, ``dst``, ``mult``) atomically.

        ``updates`` is anything :func:`gpu_ivm.io.read_relation_updates` reads;
        ``read_options`` (``rel=``, ``src=``, ``dst=``, ``mult=``, ``header=``, ``ids=``) go
        to it.

        Rows for the same tuple are summed; zero sums are dropped. Validation happens before any
        change; a bad batch raises :class:`~gpu_ivm.errors.InputError` and changes nothing.

        ``batch_id`` (optional, increasing): the caller's id of this batch, kept as
        ``last_batch_id``; a batch whose id is not above it is a replay and is skipped.
        """
        # an engine that starts empty never calls load(): its first batch warms up, untimed
        warm_up(self.backend, self.maintain, self.track_changes)
        t0 = self._start_clock()
        skipped = self._skip_replayed(batch_id, t0)
        if skipped is not None:
            return skipped
        u = io.read_relation_updates(updates, **read_options)
        rows = len(u)
        phases, norms, new = self._prepare(u)
        n0 = len(self.encoder)
        self._queries_check(phases, lambda i: new[i - n0] if i >= n0 else
                            self.encoder.decode(np.array([i]))[0])
        self.encoder.commit(new)
        self._grow_ids(max(len(self.encoder), 1))
        be = self.backend  # the validated batch goes to the backend's memory once
        phases = [(k, be.to_device(keys), be.to_device(d)) for k, keys, d in phases]
        q_before = self.Q
        stats0 = dict(self._stats)
        path = self._run_phases(phases, self._q_delta_for)
        self._commit_norms(norms)
        self._queries_apply(phases)
        rep = self._report(
            t0, batch=self.batches_applied, rows=rows,
            updates=sum(p[1].shape[0] for p in phases), triangles=self.Q,
            delta=self.Q - q_before, path=path,
            major_rebalances=self._stats["major"] - stats0["major"],
            minor_moves=self._stats["moves"] - stats0["moves"])
        return self._done(rep, batch_id)

    def _prepare(self, u) -> tuple[list, dict, np.ndarray]:
        """A read batch as (phases [(relation, sorted unique keys, nonzero deltas)], the norm
        bounds to commit, the new user keys): ids planned (not committed), rows consolidated
        per tuple, the int64 bound checked (nothing changes before this returns)."""
        m = len(u)
        ids, new = self.encoder.plan(np.concatenate([u.src, u.dst]), "src")
        a, b = ids[:m], ids[m:]
        phases = []
        for k in range(3):
            sel = u.rel == k
            keys, deltas = self._consolidate(pack(a[sel], b[sel]), u.mult[sel])
            if keys.shape[0]:
                phases.append((k, keys, deltas))
        return phases, self._check_overflow({k: d for k, _, d in phases}), new

    def _q_delta_for(self, k: int):
        def q_delta(keys: np.ndarray, deltas: np.ndarray) -> int:
            xs, ys = unpack(keys)
            return sum_products(deltas, self._path_weights(k, xs, ys, False))

        return q_delta


# the snapshot reader and the warm-up workload build engines of this class (see their modules)
snapshot.register_form("relations", RelationEngine)
warmup.register_engine("relations", RelationEngine)
