"""Paging through the answers of a batch of access requests (:meth:`Engine.cursor`).

The answers of a request batch are sorted by request, then by the output values. Two cursors
hand them out ``limit`` rows per request at a time:

- :class:`SeekCursor` (the view-tree :class:`~gpu_ivm.cq.engine.Engine`) keeps each
  request's position: its last answer handed out (:class:`Bound`). A page expands every
  request from there, at most ``limit + 1`` answers each (the one more says whether the
  request has answers left), so a page costs about its own rows where the variable order
  lets the outputs be expanded in the answers' order (the thesis's constant delay, a batch at
  a time) and the answers before it are never enumerated again;
- :class:`RequestCursor` (engines that answer a request table at once: the trade-off engine,
  the triangle strategy) materializes the answers when opened and pages through them.

The answers are those of the state when the cursor was opened: a cursor refuses to go on once
the engine has applied another batch (open a new one), so a page never mixes two states.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InputError
from .zrel import ZRel


def check_limit(limit) -> int:
    """``limit`` as a positive int, or InputError."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise InputError(f"limit must be a positive integer, got {limit!r}", column="limit")
    return int(limit)


def first_per_request(rel, cap: np.ndarray):
    """The rows of ``rel`` (a ZRel whose first column is the request number, rows sorted by
    it) that are among the first ``cap[request]`` of their request.

    >>> from gpu_ivm.cq.zrel import ZRel
    >>> r = ZRel(("#request", "B"), np.array([[0, 5], [0, 6], [0, 7], [2, 1]]), np.ones(4, int))
    >>> first_per_request(r, np.array([2, 2, 2])).keys.tolist()
    [[0, 5], [0, 6], [2, 1]]
    """
    req = rel.keys[:, 0]
    if not req.shape[0]:
        return rel
    starts = np.flatnonzero(np.r_[True, req[1:] != req[:-1]])
    sizes = np.diff(np.r_[starts, req.shape[0]])
    rank = np.arange(req.shape[0]) - np.repeat(starts, sizes)
    keep = rank < cap[req]
    if keep.all():
        return rel
    return ZRel(rel.vars, np.ascontiguousarray(rel.keys[keep]), rel.mult[keep])


class Bound:
    """Per request, the last answer handed out (``values[r]``, over ``outputs`` in order),
    where ``has[r]``: a cursor's position. The next answers of request r are those after
    ``values[r]`` in the outputs' lexicographic order."""

    def __init__(self, outputs: tuple[str, ...], n: int) -> None:
        self.outputs = tuple(outputs)
        self.values = np.zeros((n, len(self.outputs)), np.int64)
        self.has = np.zeros(n, bool)

    def compare(self, rel, req: np.ndarray, prefix) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``rel`` (of request ``req``): whether its values of the first outputs
        ``prefix`` (which must be ``outputs[:j]``) come after its request's bound on them,
        and whether they equal it (lexicographically; meaningless where ``has`` is False)."""
        gt = np.zeros(req.shape[0], bool)
        eq = np.ones(req.shape[0], bool)
        for j, v in enumerate(prefix):
            x, b = rel.column(v), self.values[req, j]
            gt |= eq & (x > b)
            eq &= x == b
        return gt, eq

    def tight(self, rel, req: np.ndarray, prefix) -> np.ndarray:
        """Per row, whether its request has a bound and the row equals it on ``prefix``."""
        return self.has[req] & self.compare(rel, req, prefix)[1]

    def not_before(self, rel, req: np.ndarray, prefix) -> np.ndarray:
        """Per row, whether it can lead to an answer after its request's bound: no bound, or
        at or after it on ``prefix``."""
        gt, eq = self.compare(rel, req, prefix)
        return ~self.has[req] | gt | eq

    def after(self, rel):
        """The rows of ``rel`` (over the request number, then ``outputs``) that come after
        their request's bound (all of a request's rows where it has none)."""
        req = rel.keys[:, 0]
        gt, _ = self.compare(rel, req, self.outputs)
        keep = gt | ~self.has[req]
        return rel if keep.all() else ZRel(rel.vars, np.ascontiguousarray(rel.keys[keep]),
                                           rel.mult[keep])

    def advance(self, page) -> np.ndarray:
        """Move each request of ``page`` (rows over the request number, then ``outputs``,
        sorted) to its last row there; returns the rows per request number."""
        req = page.keys[:, 0]
        counts = np.bincount(req, minlength=self.has.shape[0])
        if req.shape[0]:
            last = np.flatnonzero(np.r_[req[1:] != req[:-1], True])
            self.values[req[last]] = page.keys[last, 1:]
            self.has[req[last]] = True
        return counts


class SeekCursor:
    """The answers of one request batch, ``limit`` rows per request per page, each page
    resuming every request after its last answer handed out (see the module docstring).

    Made by :meth:`gpu_ivm.cq.engine.Engine.cursor`. :meth:`next` returns the next page
    (an Arrow table ``request, outputs..., mult``; empty once every request is exhausted);
    iterating yields the non-empty pages; :attr:`done` says whether any request has answers
    left.

    >>> from gpu_ivm.cq.engine import Engine
    >>> eng = Engine("Q(B | A) = R(A,B)")
    >>> eng.load(R={"a": [1, 1, 1, 2], "b": [5, 6, 7, 5]})
    >>> cur = eng.cursor({"A": [1, 2]}, limit=2)
    >>> [page.to_pydict()["B"] for page in cur]
    [[5, 6, 5], [7]]
    >>> cur.done
    True
    """

    def __init__(self, engine, requests, n_requests: int, limit: int, version: int):
        self._engine = engine
        self._requests = requests
        self._limit = check_limit(limit)
        self._version = version
        self._bound = Bound(engine.query.outputs, n_requests)
        self._given = np.zeros(n_requests, np.int64)
        self._alive = np.ones(n_requests, bool)

    @property
    def done(self) -> bool:
        """True once every request's answers have been handed out."""
        return not self._alive.any()

    def next(self) -> pa.Table:
        """The next page: for every request with answers left, up to ``limit`` of them, in
        order of request, then of the output values."""
        eng = self._engine
        if eng._version != self._version:
            raise InputError("the engine applied a batch after this cursor was opened; its "
                             "answers would mix two states: open a new cursor")
        r = self._requests
        live = self._alive[r.keys[:, 0]]
        if not live.all():
            r = ZRel(r.vars, r.keys[live], r.mult[live])
        page = eng._seek_page(r, self._limit + 1, self._bound, self._given)
        n = self._alive.shape[0]
        counts = np.bincount(page.keys[:, 0], minlength=n)
        page = first_per_request(page, np.full(n, self._limit, np.int64))
        self._given += self._bound.advance(page)
        self._alive = counts > self._limit
        return eng._table(page)

    def __iter__(self):
        while not self.done:
            page = self.next()
            if page.num_rows:
                yield page


class RequestCursor:
    """The answers of one request batch, ``limit`` rows per request per page.

    Made by :meth:`gpu_ivm.cq.engine.Engine.cursor`. :meth:`next` returns the next page
    (an Arrow table ``request, outputs..., mult``; empty once every request is exhausted);
    iterating yields the non-empty pages.

    >>> from gpu_ivm.cq.tradeoff import TradeoffEngine
    >>> eng = TradeoffEngine("Q(C | A) = R(A,B), S(B,C)", epsilon="1/2")
    >>> eng.load(R={"a": [1, 1, 2], "b": [5, 6, 5]}, S={"b": [5, 5, 6], "c": [7, 8, 9]})
    >>> [page.to_pydict()["C"] for page in eng.cursor({"A": [1, 2]}, limit=2)]
    [[7, 8, 7, 8], [9]]
    """

    def __init__(self, answers: pa.Table, n_requests: int, limit: int, engine, version: int):
        self._answers = answers
        self._limit = check_limit(limit)
        self._engine = engine
        self._version = version
        req = answers.column("request").to_numpy() if answers.num_rows else np.zeros(0, np.int64)
        self._counts = np.bincount(req, minlength=n_requests).astype(np.int64)
        self._starts = np.cumsum(self._counts) - self._counts
        self._taken = np.zeros(n_requests, np.int64)

    @property
    def done(self) -> bool:
        """True once every request's answers have been handed out."""
        return bool((self._taken >= self._counts).all())

    def next(self) -> pa.Table:
        """The next page: for every request with answers left, up to ``limit`` of them, in
        order of request, then of the output values."""
        if self._engine._version != self._version:
            raise InputError("the engine applied a batch after this cursor was opened; its "
                             "answers would mix two states: open a new cursor")
        take = np.minimum(self._counts - self._taken, self._limit)
        first = self._starts + self._taken
        n = int(take.sum())
        ends = np.cumsum(take)
        idx = np.repeat(first - (ends - take), take) + np.arange(n, dtype=np.int64)
        self._taken += take
        return self._answers.take(pa.array(idx))

    def __iter__(self):
        while not self.done:
            yield self.next()


class RequestPaging:
    """``request`` and ``cursor`` for an engine that answers a request table at once with
    ``_answers(inputs) -> (answers table, number of requests)`` and counts its changes in
    ``_version`` (the trade-off engine and the triangle strategy; :class:`Engine` has its
    own, which also sets its backend's operators)."""

    def request(self, inputs=None, *, limit: int | None = None) -> pa.Table:
        """As :meth:`gpu_ivm.cq.Engine.request`."""
        if limit is not None:
            return self.cursor(inputs, limit=limit).next()
        return self._answers(inputs)[0]

    def cursor(self, inputs=None, *, limit: int) -> RequestCursor:
        """As :meth:`gpu_ivm.cq.Engine.cursor`."""
        check_limit(limit)
        answers, n = self._answers(inputs)
        return RequestCursor(answers, n, limit, self, self._version)
