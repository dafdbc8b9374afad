"""Z-relations kept as sorted runs, indexed by the variable orders their lookups need.

The query engine's base relations and views change by small deltas and are read by lookups:
a delta tuple joins a view on the variables they share, a request joins the views on its
inputs. Packing a whole view per batch (what :meth:`ZRel.merge` does) costs O(|view|) per
batch; here a relation is a log-structured set of sorted runs instead:

- :meth:`LsmRel.merge` appends the delta as a run (sorted, consolidated) and merges the newest
  runs while the older is at most ``MERGE_RATIO`` times the newer (one linear pass,
  :func:`~gpu_ivm.kernels.lex_search.merge_sorted`), so there are O(log N) runs and each
  tuple is merged O(log N) times over its life: O(|δ| log N) amortized per batch, plus the
  sort of the delta, independent of the relation's size;
- :meth:`LsmRel.join_from` answers ``left ⋈ self`` by looking each left row up in an index of
  ``self`` sorted by the shared variables first and expanding it through its range
  (:mod:`gpu_ivm.kernels.lex_expand`: a binary search and a gallop per run, then the two-pass
  expand): O(|left| · #runs · log N + |output|);
- an index per needed order (shared variables first) is built from the relation the first
  time a lookup asks for it and is maintained with every merge after that.

A key may sit in several runs (an insert in one, its delete in a newer one); lookups sum the
runs and drop keys whose total is zero, so a lookup sees exactly the consolidated relation.

>>> from gpu_ivm.cq.zrel import consolidate
>>> v = LsmRel(consolidate(("A", "B"), [[1, 10], [2, 20], [2, 21]], [1, 1, 3]))
>>> v.merge(consolidate(("A", "B"), [[2, 20], [3, 30]], [-1, 5]))
>>> left = consolidate(("B", "C"), [[20, 7], [21, 8], [30, 9]], [1, 1, 2])
>>> j = v.join_from(left)
>>> j.vars, j.keys.tolist(), j.mult.tolist()
(('B', 'C', 'A'), [[21, 8, 2], [30, 9, 3]], [3, 10])
>>> v.zrel().to_dict()
{(1, 10): 1, (2, 21): 3, (3, 30): 5}
"""

from __future__ import annotations

import numpy as np

from ..kernels.lex_expand import RIGHT
from ..kernels.lex_search import fences
from . import ops
from .zrel import ZRel, checked_add, join_sorted

__all__ = ["LsmRel", "MERGE_RATIO"]

MERGE_RATIO = 2  # a run merges into the one before it while that one is at most this much larger

# (keys sorted lexicographically, unique; non-zero mults; fences of a large run or None)
Run = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


def _run(keys: np.ndarray, mult: np.ndarray) -> Run:
    return keys, mult, fences(keys)


class _Index:
    """One sort order of a relation as a list of runs, oldest (largest) first."""

    __slots__ = ("order", "runs")

    def __init__(self, order: tuple[str, ...], runs: list[Run]) -> None:
        self.order = order
        self.runs = runs

    def add(self, delta: ZRel) -> None:
        d = delta.reorder(self.order)
        if not len(d):
            return
        runs = self.runs
        runs.append(_run(d.keys, d.mult))
        while len(runs) > 1 and runs[-2][1].shape[0] <= MERGE_RATIO * runs[-1][1].shape[0]:
            (k1, m1, _), (k2, m2, _) = runs[-2], runs[-1]
            keys, mult = ops.current().merge_sorted(k1, m1, k2, m2)  # one linear pass
            runs[-2:] = [_run(keys, mult)] if mult.shape[0] else []

    def lookup(self, probes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, mult)``: the consolidated rows whose first columns equal a probe row,
        each after its probe's number (``(probe, key...)``), sorted by probe, then key, with
        their multiplicities. Each run's matches are gathered by the expand kernel (the probe
        number as the left row), then the runs' matches merged run by run in linear passes,
        equal keys of different runs summed and zero totals dropped."""
        op = ops.current()
        n = probes.shape[0]
        ids = np.arange(n, dtype=np.int64).reshape(n, 1)
        rows = np.zeros((0, 1 + len(self.order)), np.int64)
        mult = np.zeros(0, np.int64)
        for r, (keys, m, fence) in enumerate(self.runs):
            k, km = op.expand_join(ids, ids[:, 0], probes, keys, m, 0, RIGHT, fence)
            rows, mult = (k, km) if r == 0 else op.merge_sorted(rows, mult, k, km)
        return rows, mult

    def consolidated(self) -> ZRel:
        """The relation in this order as one run (the runs are replaced by it)."""
        if len(self.runs) > 1:
            keys, mult, _ = self.runs[-1]
            merge = ops.current().merge_sorted
            for k, m, _ in reversed(self.runs[:-1]):  # the smallest first: O(n log #runs)
                keys, mult = merge(k, m, keys, mult)
            self.runs = [_run(keys, mult)] if mult.shape[0] else []
        if not self.runs:
            k = len(self.order)
            return ZRel(self.order, np.zeros((0, k), np.int64), np.zeros(0, np.int64))
        keys, mult, _ = self.runs[0]
        return ZRel(self.order, keys, mult)


class LsmRel:
    """A Z-relation over ``rel.vars`` kept as sorted runs (see the module docstring); it is
    changed in place by :meth:`merge` and read by :meth:`join_from`, :meth:`get` and
    :meth:`zrel`."""

    def __init__(self, rel: ZRel) -> None:
        self.vars = rel.vars
        runs = [_run(rel.keys, rel.mult)] if len(rel) else []
        self._indexes: dict[tuple[str, ...], _Index] = {rel.vars: _Index(rel.vars, runs)}

    def _index(self, first: tuple[str, ...]) -> _Index:
        """The index sorted by ``first``, then the other variables in ``vars`` order (built
        from the relation when first asked for)."""
        order = first + tuple(v for v in self.vars if v not in first)
        idx = self._indexes.get(order)
        if idx is None:
            z = self.zrel().reorder(order)
            idx = _Index(order, [_run(z.keys, z.mult)] if len(z) else [])
            self._indexes[order] = idx
        return idx

    def merge(self, delta: ZRel) -> None:
        """``self += delta`` (same variables, any column order), in every index."""
        if sorted(delta.vars) != sorted(self.vars):
            raise ValueError(f"cannot merge {delta.vars} into {self.vars}")
        for idx in self._indexes.values():
            idx.add(delta)

    def zrel(self) -> ZRel:
        """The consolidated relation as a :class:`ZRel` (columns in ``vars`` order)."""
        return self._indexes[self.vars].consolidated()

    def join_from(self, left: ZRel, *, support: bool = False) -> ZRel:
        """``left ⋈ self`` (``left ⋈ supp(self)`` with ``support``): the variables of ``left``,
        then those of ``self`` it lacks; each left row is looked up on the variables both
        have and expanded through its matches (one run: straight from the run; several: from
        their summed matches, :meth:`_Index.lookup`)."""
        shared = tuple(v for v in self.vars if v in left.vars)
        idx = self._index(shared)
        if len(idx.runs) == 1:  # left's rows are unique and so are a probe's matches
            keys, mult, fence = idx.runs[0]
            return join_sorted(left, ZRel(idx.order, keys, mult), len(shared),
                               support=support, fence=fence)
        probes = left.keys[:, [left.vars.index(v) for v in shared]]
        rows, mult = idx.lookup(probes)
        # left row q's matches are the rows that start with q: expanded by the same kernel
        n = len(left)
        numbered = ZRel(("#left", *left.vars),
                        np.concatenate([np.arange(n, dtype=np.int64).reshape(n, 1), left.keys],
                                       axis=1), left.mult)
        out = join_sorted(numbered, ZRel(("#left", *idx.order), rows, mult), 1 + len(shared),
                          support=support)
        return ZRel(left.vars + idx.order[len(shared):], np.ascontiguousarray(out.keys[:, 1:]),
                    out.mult)

    def expand_first(self, left: ZRel, cap: np.ndarray, seek: np.ndarray | None = None,
                     seek_value: np.ndarray | None = None,
                     strict: bool = False) -> ZRel | None:
        """``left ⋈ supp(self)`` where ``self`` has exactly one variable X that ``left`` lacks,
        keeping for left row q only its first ``cap[q]`` matches in X's order; rows where
        ``seek`` is True take only matches with X >= ``seek_value[q]`` (> with ``strict``),
        before the cap. None when ``self`` has more than one variable ``left`` lacks.

        This is the expand of a limited request (a prefix truncation per row, the batch
        analogue of constant delay): each run's range is cut at the seek and the cap before
        anything is gathered. A key inserted in one run and deleted in a newer one cancels
        only when summed, so a row whose cut runs hid a match is expanded again with twice
        its cap: the keys up to the smallest cut run's last key are exact, and a row is done
        when it has ``cap`` of them or no run was cut.

        >>> from gpu_ivm.cq.zrel import consolidate
        >>> v = LsmRel(consolidate(("A", "B"), [[1, 5], [1, 6], [1, 7], [2, 5]], [1, 1, 1, 1]))
        >>> v.merge(consolidate(("A", "B"), [[1, 5]], [-1]))   # a second run cancels (1, 5)
        >>> left = consolidate(("A",), [[1], [2]], [1, 1])
        >>> v.expand_first(left, np.array([2, 2])).keys.tolist()
        [[1, 6], [1, 7], [2, 5]]
        >>> v.expand_first(left, np.array([2, 2]), np.array([True, False]),
        ...                np.array([6, 0]), strict=True).keys.tolist()
        [[1, 7], [2, 5]]
        """
        shared = tuple(v for v in self.vars if v in left.vars)
        if len(self.vars) - len(shared) != 1:
            return None
        idx = self._index(shared)
        n = len(left)
        probes = np.ascontiguousarray(left.keys[:, [left.vars.index(v) for v in shared]],
                                      dtype=np.int64)
        cap = np.asarray(cap, dtype=np.int64)
        look = cap.copy()  # how far into each run's range a pass reads
        todo = np.arange(n, dtype=np.int64)
        done_ids, done_vals = [], []
        while todo.shape[0]:
            ids, vals, ok = self._first_matches(idx, probes[todo], cap[todo], look[todo],
                                                None if seek is None else seek[todo],
                                                None if seek_value is None else
                                                seek_value[todo], strict)
            fine = ok[ids]
            done_ids.append(todo[ids[fine]])
            done_vals.append(vals[fine])
            todo = todo[~ok]
            look[todo] *= 2
        ids = np.concatenate(done_ids) if done_ids else np.zeros(0, np.int64)
        vals = np.concatenate(done_vals) if done_vals else np.zeros(0, np.int64)
        order = np.argsort(ids, kind="stable")  # left order; each row's matches stay sorted
        ids, vals = ids[order], vals[order]
        keys = np.concatenate([left.keys[ids], vals.reshape(-1, 1)], axis=1)
        return ZRel(left.vars + idx.order[len(shared):], keys, left.mult[ids])

    @staticmethod
    def _first_matches(idx: _Index, probes: np.ndarray, cap: np.ndarray, look: np.ndarray,
                       seek, seek_value, strict: bool
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass of :meth:`expand_first` over probe rows, reading at most ``look`` rows
        of each run's range: ``(ids, vals, ok)``, the probe number and X value of each match
        kept (sorted by probe, then X; at most ``cap`` per probe) and, per probe, whether its
        matches are final (else ``look`` was too small to see past cancelled keys)."""
        op = ops.current()
        n, p = probes.shape
        ids0 = np.arange(n, dtype=np.int64).reshape(n, 1)
        sr = np.flatnonzero(seek) if seek is not None else np.zeros(0, np.int64)
        ext = np.ascontiguousarray(np.concatenate([probes[sr], seek_value[sr].reshape(-1, 1)],
                                                  axis=1)) if sr.shape[0] else None
        horizon = np.full(n, np.iinfo(np.int64).max, np.int64)
        cut = np.zeros(n, bool)
        rows = mult = None
        for keys, m, fence in idx.runs:
            lo, hi = op.prefix_ranges(keys, probes, fence)
            if ext is not None:
                lo2, hi2 = op.prefix_ranges(keys, ext, fence)
                lo[sr] = hi2 if strict else lo2
            top = np.minimum(hi, lo + look)
            short = top < hi
            if short.any():  # the keys past this run's last one taken are not all seen
                cut |= short
                last = keys[top[short] - 1, p]
                horizon[short] = np.minimum(horizon[short], last)
            k, km = op.expand_join(ids0, ids0[:, 0], probes, keys, m, p, RIGHT, fence,
                                   ranges=(lo, top))
            rows, mult = (k, km) if rows is None else op.merge_sorted(rows, mult, k, km)
        if rows is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.ones(n, bool)
        ids, vals = rows[:, 0], rows[:, 1]
        seen = vals <= horizon[ids]  # exact: every run holds all its keys up to here
        ids, vals = ids[seen], vals[seen]
        counts = np.bincount(ids, minlength=n)
        ok = ~cut | (counts >= cap)
        rank = np.arange(ids.shape[0]) - (np.cumsum(counts) - counts)[ids]
        keep = rank < cap[ids]
        return ids[keep], vals[keep], ok

    def count_from(self, left: ZRel) -> np.ndarray:
        """Per row of ``left``, how many rows of ``self`` agree with it on the variables
        both have, counted run by run: exact with one run, an upper bound with several (a
        key inserted in one run and deleted in a newer one counts twice). What a join
        through ``self`` would expand each row to, found by the searches of a lookup."""
        shared = tuple(v for v in self.vars if v in left.vars)
        idx = self._index(shared)
        probes = np.ascontiguousarray(left.keys[:, [left.vars.index(v) for v in shared]])
        out = np.zeros(len(left), np.int64)
        for keys, _, fence in idx.runs:
            lo, hi = ops.current().prefix_ranges(keys, probes, fence)
            out += hi - lo
        return out

    def get(self, rel: ZRel) -> np.ndarray:
        """The current multiplicity of each of ``rel``'s keys (0 where absent)."""
        r = rel.reorder(self.vars)
        probes = np.ascontiguousarray(r.keys)
        out = np.zeros(len(r), np.int64)
        for keys, mult, fence in self._indexes[self.vars].runs:  # at most one row per run
            lo, hi = ops.current().prefix_ranges(keys, probes, fence)
            hit = hi > lo
            out[hit] = checked_add(out[hit], mult[lo[hit]])
        return out if r is rel else out[_positions(rel, r)]

    def state(self) -> dict:
        """What :meth:`restore` needs to undo the merges made after this call (the runs are
        never changed in place, so this is a shallow copy)."""
        return {order: list(idx.runs) for order, idx in self._indexes.items()}

    def restore(self, state: dict) -> None:
        self._indexes = {order: _Index(order, list(runs)) for order, runs in state.items()}


def _positions(rel: ZRel, reordered: ZRel) -> np.ndarray:
    """For each row of ``rel``, its row in ``reordered`` (the same tuples, columns permuted)."""
    cols = [rel.vars.index(v) for v in reordered.vars]
    lo, _ = ops.current().prefix_ranges(reordered.keys, rel.keys[:, cols])
    return lo
