"""Sequential pure-Python reference of the IVM^eps enumeration primitives.

This module transcribes the enumeration primitives of "Maintaining Triangle Queries under Updates"
(doc §2.4, digest ``/work/shared/design/paper-triangle-queries.md`` §3):

* :func:`union_next` / :func:`union_iter`: UnionNext (Figure 3), the union of possibly
  overlapping sets given by iterators with ``next()`` and ``contains(x)``;
* :class:`HopIterator`: the hop iterator over a duplicate-free collection (Figure 4);
* :class:`UnionOfSets`: the union of sets enumerated with hop iterators, parameterised by
  ``CandidateBuckets`` (Figure 5, Example 12).

It is a test oracle and a bounded-delay CPU path, not a fast path: all state lives in Python
dicts and every operation is O(1) dict work (plus the candidate-bucket loop of Figure 5).

Elements and bucket ids must be hashable; they are compared with ``==`` and hashed like dict
keys. The sentinels :data:`BOF` and :data:`EOF` are unique objects, compared by identity; they
must not occur as elements.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BOF",
    "EOF",
    "ElementIterator",
    "HopIterator",
    "ListCollection",
    "SetIterator",
    "SuccessorCollection",
    "UnionOfSets",
    "union_iter",
    "union_next",
]


class _Sentinel:
    """A named singleton marker; copies and pickles resolve to the same module-level object."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name

    def __copy__(self) -> _Sentinel:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sentinel:
        return self


#: The position before the first value of a collection (``C.Next(BOF)`` is the first value).
BOF: Any = _Sentinel("BOF")
#: The position after the last value; also "no more elements" for every iterator here.
EOF: Any = _Sentinel("EOF")


@runtime_checkable
class SuccessorCollection(Protocol):
    """A duplicate-free collection C with ``C.Contains(x)`` and ``C.Next(x)`` (Figure 4)."""

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a value of the collection (never true for BOF/EOF)."""
        ...

    def next(self, x: Any) -> Any:
        """The successor of ``x``: ``next(BOF)`` is the first value, the last value's is EOF."""
        ...


@runtime_checkable
class ElementIterator(Protocol):
    """An iterator over a set S as used by UnionNext (Figure 3 / doc §2.4.1)."""

    def next(self) -> Any:
        """Advance and return the next element of S, or EOF when S is exhausted."""
        ...

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is in the *whole* set S; does not move the iterator."""
        ...


class ListCollection:
    """A :class:`SuccessorCollection` over a duplicate-free sequence, in the sequence's order.

    ``contains`` and ``next`` are O(1) dict lookups; construction is O(len(items)).
    ``next(EOF)`` is EOF, so calling ``next`` past the end is harmless; ``next`` of a value that
    is not in the collection raises ``KeyError``.

    >>> c = ListCollection(["b4", "b1", "b5"])
    >>> c.next(BOF), c.next("b4"), c.next("b5")
    ('b4', 'b1', EOF)
    >>> c.contains("b1"), c.contains("b2")
    (True, False)
    >>> ListCollection([]).next(BOF)
    EOF
    """

    __slots__ = ("_items", "_succ")

    def __init__(self, items: Iterable[Hashable]) -> None:
        self._items: tuple[Hashable, ...] = tuple(items)
        succ: dict[Any, Any] = {}
        prev: Any = BOF
        for x in self._items:
            if x is BOF or x is EOF:
                raise ValueError("BOF/EOF cannot be elements of a collection")
            if x in succ:
                raise ValueError(f"duplicate element {x!r} in a ListCollection")
            succ[prev] = x
            prev = x
        succ[prev] = EOF
        succ[EOF] = EOF
        self._succ = succ

    def contains(self, x: Any) -> bool:
        return x is not BOF and x is not EOF and x in self._succ

    def next(self, x: Any) -> Any:
        return self._succ[x]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"ListCollection({list(self._items)!r})"


class SetIterator:
    """An :class:`ElementIterator` over a duplicate-free sequence, for UnionNext.

    ``next()`` walks the sequence in order and returns EOF once exhausted (and on every later
    call); ``contains(x)`` tests membership in the whole set, independent of the position.

    >>> it = SetIterator([4, 3, 2])
    >>> it.next(), it.contains(4), it.next(), it.next(), it.next()
    (4, True, 3, 2, EOF)
    """

    __slots__ = ("_items", "_members", "_pos")

    def __init__(self, seq: Iterable[Hashable]) -> None:
        self._items: tuple[Hashable, ...] = tuple(seq)
        self._members = frozenset(self._items)
        if len(self._members) != len(self._items):
            raise ValueError("SetIterator needs a duplicate-free sequence")
        self._pos = 0

    def next(self) -> Any:
        if self._pos >= len(self._items):
            return EOF
        x = self._items[self._pos]
        self._pos += 1
        return x

    def contains(self, x: Any) -> bool:
        return x in self._members

    def __repr__(self) -> str:
        return f"SetIterator({list(self._items)!r}, pos={self._pos})"


def _union_next(iterators: Sequence[ElementIterator], n: int) -> Any:
    """UnionNext(I_1, ..., I_n) of Figure 3 over the first ``n`` iterators (n >= 1)."""
    last = iterators[n - 1]
    if n == 1:  # line 1
        return last.next()
    t = _union_next(iterators, n - 1)  # line 2
    if t is not EOF:
        if last.contains(t):  # line 3
            return last.next()  # line 4: t is reported later via I_n
        return t  # line 6
    return last.next()  # line 7: the left side is exhausted, drain S_n


def union_next(iterators: Sequence[ElementIterator]) -> Any:
    """One step of UnionNext (Figure 3): the next distinct element of S_1 ∪ ... ∪ S_n, or EOF.

    Literal recursive transcription: the union of the first n-1 sets is treated as the first set
    of a binary union with S_n. An element of S_1..S_{n-1} that is also in S_n is not emitted from
    the left side; S_n's next element is emitted in its place, so the output order is not the
    concatenation order. Delay O(n·l + n·d) (Lemma 9). The iterators are advanced in place; an
    empty list of iterators gives EOF.

    >>> its = [SetIterator([1, 2, 3]), SetIterator([4, 3, 2])]
    >>> [union_next(its) for _ in range(5)]
    [1, 4, 3, 2, EOF]
    """
    if not iterators:
        return EOF
    return _union_next(iterators, len(iterators))


def union_iter(iterators: Sequence[ElementIterator]) -> Iterator[Any]:
    """Yield :func:`union_next` over ``iterators`` until it returns EOF.

    >>> list(union_iter([SetIterator([1, 2, 3]), SetIterator([2, 3, 4])]))
    [1, 2, 3, 4]
    """
    while (t := union_next(iterators)) is not EOF:
        yield t


class HopIterator:
    """Hop iterator over a duplicate-free :class:`SuccessorCollection` (Figure 4, Lemma 10).

    State: ``curr`` (the last reported value, BOF after :meth:`open_hop`) and the dictionaries
    ``skip_to`` / ``skipped_from``. ``skip_to[x] = y`` means that x starts a run of excluded
    values whose next valid value is y (possibly EOF); ``skipped_from`` is the inverse map (it
    may keep stale entries for run ends that were later merged into longer runs, exactly as in
    the figure). :meth:`exclude` merges adjacent runs, so one hop from a run start always lands
    on a valid value or EOF.

    Preconditions of the figure, not checked here (see digest §3.4 pitfalls):

    * each value is excluded at most once (Exclude is not idempotent on run interiors);
    * a value is never excluded while ``curr`` lies in or right before its run, i.e. only values
      strictly after ``curr`` are excluded during an enumeration. Otherwise ``C.Next(curr)``
      can land on a run interior, which :meth:`hop` does not skip.

    >>> it = HopIterator(ListCollection(["b2", "b5", "b3"]))
    >>> it.exclude("b2"); it.exclude("b3")
    True
    True
    >>> it.skip_to, it.skipped_from
    ({'b2': 'b5', 'b3': EOF}, {'b5': 'b2', EOF: 'b3'})
    >>> it.open_hop(); it.next_hop(), it.next_hop(), it.is_empty()
    ('b5', EOF, False)
    >>> it.exclude("b5"); it.skip_to["b2"], it.is_empty()
    True
    (EOF, True)
    """

    __slots__ = ("collection", "curr", "skip_to", "skipped_from")

    def __init__(self, collection: SuccessorCollection) -> None:
        self.collection = collection
        self.curr: Any = BOF
        self.skip_to: dict[Any, Any] = {}
        self.skipped_from: dict[Any, Any] = {}

    def open_hop(self) -> None:
        """OpenHop(): position before the first value; the exclusions are kept."""
        self.curr = BOF

    def next_hop(self) -> Any:
        """NextHop(): advance to the next non-excluded value and return it, or EOF."""
        self.curr = self.hop(self.collection.next(self.curr))
        return self.curr

    def is_empty(self) -> bool:
        """IsEmpty(): whether every value of the collection has been excluded."""
        first = self.collection.next(BOF)
        return self.hop(first) is EOF

    def hop(self, x: Any) -> Any:
        """Hop(x): the valid value that the run starting at x skips to, or x itself."""
        return self.skip_to.get(x, x)

    def hop_back(self, x: Any) -> Any:
        """HopBack(x): the start of the run that skips to x, or x itself."""
        return self.skipped_from.get(x, x)

    def exclude(self, x: Any) -> bool:
        """Exclude(x): invalidate x, merging it with the adjacent skipped runs.

        Returns whether x is in the collection, i.e. whether the call did anything (the figure's
        line 1 returns early otherwise); :class:`UnionOfSets` uses this to test emptiness only
        after a real exclusion.
        """
        if not self.collection.contains(x):  # line 1
            return False
        to = self.hop(self.collection.next(x))  # line 2
        frm = self.hop_back(x)  # line 3
        self.skip_to[frm] = to  # line 4
        self.skipped_from[to] = frm  # line 5
        return True

    def __iter__(self) -> Iterator[Any]:
        """Open the iterator and yield the non-excluded values until EOF."""
        self.open_hop()
        while (x := self.next_hop()) is not EOF:
            yield x

    def __repr__(self) -> str:
        return (
            f"HopIterator(curr={self.curr!r}, skip_to={self.skip_to!r}, "
            f"skipped_from={self.skipped_from!r})"
        )


def _as_collection(obj: Any) -> SuccessorCollection:
    if isinstance(obj, SuccessorCollection):
        return obj
    return ListCollection(obj)


class _LazyBuckets(Mapping[Hashable, HopIterator]):
    """``buckets[i]`` of Figure 5: bucket id -> hop iterator, created on first access."""

    def __init__(self, sources: Mapping[Hashable, Any]) -> None:
        self._sources = sources
        self._iters: dict[Hashable, HopIterator] = {}

    def __getitem__(self, bucket_id: Hashable) -> HopIterator:
        it = self._iters.get(bucket_id)
        if it is None:
            it = HopIterator(_as_collection(self._sources[bucket_id]))
            self._iters[bucket_id] = it
        return it

    def __contains__(self, bucket_id: object) -> bool:
        return bucket_id in self._sources

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    @property
    def initialised(self) -> frozenset[Hashable]:
        """The ids whose hop iterator has been created so far."""
        return frozenset(self._iters)

    def __repr__(self) -> str:
        return f"_LazyBuckets({self._iters!r})"


class UnionOfSets:
    """Distinct elements of S_1 ∪ ... ∪ S_n via hop iterators (Figure 5, Lemma 11, Example 12).

    ``buckets`` lists ``(bucket_id, collection)`` pairs in bucket order; a collection is a
    :class:`SuccessorCollection` or a duplicate-free sequence (wrapped in :class:`ListCollection`
    on first access). The output is S_1 in S_1's order, then S_2 − S_1 in S_2's order, then
    S_3 − S_2 − S_1, and so on: every reported t is excluded from the later buckets that hold it,
    and a bucket left without valid values is excluded from ``ibuckets`` and never opened.

    ``candidate_buckets(t)`` is the CandidateBuckets parameter: it returns the ids of buckets
    that may contain t (a superset is fine). It defaults to all buckets.

    **Exclusion scope (digest §3.4, pitfall 1).** Exclude is applied only to candidate buckets
    strictly AFTER the current bucket: the candidates are filtered by position, so returning
    the current or earlier buckets is harmless. Excluding from the current bucket (or excluding
    the current bucket from ``ibuckets``) would place ``curr`` inside a skipped run, after which
    ``Hop(C.Next(curr))`` can return excluded values. Example 12 excludes only from later
    buckets, and the default "[n]" is read the same way.

    Two further deviations from the literal figure, both inert on Example 12:

    * Line 9 tests ``IsEmpty`` only if line 8 actually removed t from the bucket. The literal
      figure re-excludes an already empty bucket from ``ibuckets`` whenever a later candidate t
      is not in it; Exclude is not idempotent, so with the default candidates this can corrupt
      ``ibuckets`` (a bucket emptied earlier is then opened again, and line 6 returns EOF
      before the union is exhausted). With the guard, each bucket is excluded at most once.
    * Lines 2-6 loop while the freshly opened bucket is empty, so initially empty buckets are
      skipped instead of ending the enumeration early (digest §3.4, pitfall 3). With
      non-empty buckets the loop runs at most once, as in the figure.

    Inspection: ``buckets`` (lazy mapping id -> :class:`HopIterator`; indexing it creates the
    iterator), ``ibuckets`` (hop iterator over the bucket ids), ``current`` (current bucket id,
    EOF at the end) and ``opened`` (ids opened as Icurrent, in order). :meth:`open` resets all.

    >>> u = UnionOfSets([("a1", ["b1", "b2", "b3"]), ("a2", ["b4", "b1", "b5"]),
    ...                  ("a3", ["b2", "b5", "b3"]), ("a4", ["b6", "b4"])])
    >>> list(u)
    ['b1', 'b2', 'b3', 'b4', 'b5', 'b6']
    >>> u.opened, u.ibuckets.skip_to
    (['a1', 'a2', 'a4'], {'a3': 'a4'})
    """

    def __init__(
        self,
        buckets: Iterable[tuple[Hashable, Any]],
        candidate_buckets: Callable[[Any], Iterable[Hashable]] | None = None,
    ) -> None:
        sources: dict[Hashable, Any] = {}
        for bucket_id, coll in buckets:
            if bucket_id in sources:
                raise ValueError(f"duplicate bucket id {bucket_id!r}")
            sources[bucket_id] = coll
        self._sources = sources
        self.bucket_ids: tuple[Hashable, ...] = tuple(sources)
        self._position = {b: i for i, b in enumerate(self.bucket_ids)}
        self._bucket_order = ListCollection(self.bucket_ids)
        self.candidate_buckets = candidate_buckets
        self.buckets = _LazyBuckets(sources)
        self.ibuckets: HopIterator | None = None
        self.current: Any = None
        self._icurrent: HopIterator | None = None
        self.opened: list[Hashable] = []

    def open(self) -> None:
        """Open(): allocate (lazy) bucket iterators, open Ibuckets, open the first bucket."""
        self.buckets = _LazyBuckets(self._sources)  # line 1
        self.ibuckets = HopIterator(self._bucket_order)  # line 2
        self.ibuckets.open_hop()  # line 3
        self.opened = []
        self._enter(self.ibuckets.next_hop())  # lines 4-5

    def _enter(self, bucket_id: Any) -> None:
        self.current = bucket_id
        if bucket_id is EOF:
            self._icurrent = None
            return
        self._icurrent = self.buckets[bucket_id]
        self._icurrent.open_hop()
        self.opened.append(bucket_id)

    def _later_candidates(self, t: Any) -> Iterator[Hashable]:
        here = self._position[self.current]
        if self.candidate_buckets is None:
            yield from self.bucket_ids[here + 1 :]
            return
        seen: set[Hashable] = set()
        for b in self.candidate_buckets(t):
            if self._position[b] > here and b not in seen:
                seen.add(b)
                yield b

    def next(self) -> Any:
        """Next(): the next distinct element of the union, or EOF (then EOF forever)."""
        if self.ibuckets is None:
            raise RuntimeError("UnionOfSets.next() called before open()")
        if self._icurrent is None:
            return EOF
        t = self._icurrent.next_hop()  # line 1
        while t is EOF:  # line 2 (a loop only for initially empty buckets)
            self._enter(self.ibuckets.next_hop())  # lines 3, 5
            if self._icurrent is None:
                return EOF  # line 4
            t = self._icurrent.next_hop()  # line 6
        for b in self._later_candidates(t):  # line 7
            bucket = self.buckets[b]
            if bucket.exclude(t) and bucket.is_empty():  # lines 8-9
                self.ibuckets.exclude(b)  # line 10
        return t  # line 11

    def __iter__(self) -> Iterator[Any]:
        """Open a fresh enumeration and yield elements until EOF."""
        self.open()
        while (t := self.next()) is not EOF:
            yield t
