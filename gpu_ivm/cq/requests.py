"""Paging through the answers of a batch of access requests (:meth:`Engine.cursor`).

The engine materializes the answers of a request batch once, sorted by request and then by
the output values; a :class:`RequestCursor` hands them out ``limit`` rows per request at a
time. The answers are those of the state when the cursor was opened: a cursor refuses to go
on once the engine has applied another batch (open a new one), so a page never mixes two
states. (The thesis's constant-delay enumeration would produce the answers lazily; here each
request batch costs the size of its whole answer once, and each page its own rows.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InputError


def check_limit(limit) -> int:
    """``limit`` as a positive int, or InputError."""
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise InputError(f"limit must be a positive integer, got {limit!r}", column="limit")
    return int(limit)


class RequestCursor:
    """The answers of one request batch, ``limit`` rows per request per page.

    Made by :meth:`gpu_ivm.cq.engine.Engine.cursor`. :meth:`next` returns the next page
    (an Arrow table ``request, outputs..., mult``; empty once every request is exhausted);
    iterating yields the non-empty pages.

    >>> from gpu_ivm.cq.engine import Engine
    >>> eng = Engine("Q(B | A) = R(A,B)")
    >>> eng.load(R={"a": [1, 1, 1, 2], "b": [5, 6, 7, 5]})
    >>> cur = eng.cursor({"A": [1, 2]}, limit=2)
    >>> [page.to_pydict()["B"] for page in cur]
    [[5, 6, 5], [7]]
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
