"""Tests for the reference enumeration primitives in gpu_ivm.queries.hop (digest §3, §14.1-2)."""

from __future__ import annotations

import copy
import doctest
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_ivm.queries import hop
from gpu_ivm.queries.hop import (
    BOF,
    EOF,
    HopIterator,
    ListCollection,
    SetIterator,
    UnionOfSets,
    union_iter,
    union_next,
)

# Example 12 / Figure 6: V(a_i, B) in successor order.
EXAMPLE12 = [
    ("a1", ["b1", "b2", "b3"]),
    ("a2", ["b4", "b1", "b5"]),
    ("a3", ["b2", "b5", "b3"]),
    ("a4", ["b6", "b4"]),
]


def exact_candidates(buckets):
    """CandidateBuckets returning exactly the ids of the buckets that contain t (all positions)."""
    index: dict = {}
    for bucket_id, items in buckets:
        for x in items:
            index.setdefault(x, []).append(bucket_id)
    return lambda t: index.get(t, [])


def reference_union_order(buckets):
    """S_1, then S_2 - S_1, then S_3 - S_2 - S_1, ... each in its bucket's order."""
    seen: set = set()
    out = []
    for _, items in buckets:
        for x in items:
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


def drain(union: UnionOfSets) -> list:
    out = []
    while (t := union.next()) is not EOF:
        out.append(t)
    return out


# --- sentinels and collections ------------------------------------------------------------------


def test_sentinels():
    assert repr(EOF) == "EOF" and repr(BOF) == "BOF"
    assert EOF is not BOF and EOF != BOF
    assert copy.deepcopy(EOF) is EOF and copy.copy(BOF) is BOF
    assert pickle.loads(pickle.dumps(EOF)) is EOF
    assert pickle.loads(pickle.dumps({"b3": EOF}))["b3"] is EOF


def test_list_collection():
    c = ListCollection(["b4", "b1", "b5"])
    assert c.next(BOF) == "b4" and c.next("b4") == "b1" and c.next("b1") == "b5"
    assert c.next("b5") is EOF and c.next(EOF) is EOF
    assert c.contains("b1") and not c.contains("b2")
    assert not c.contains(BOF) and not c.contains(EOF)
    assert list(c) == ["b4", "b1", "b5"] and len(c) == 3
    assert ListCollection([]).next(BOF) is EOF
    with pytest.raises(ValueError):
        ListCollection([1, 2, 1])
    with pytest.raises(ValueError):
        ListCollection([1, EOF])
    with pytest.raises(KeyError):
        c.next("b2")


def test_module_doctests():
    result = doctest.testmod(hop)
    assert result.attempted > 0 and result.failed == 0


# --- Example 12 (digest §14.1) ------------------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
def test_example12_states(exact):
    cands = exact_candidates(EXAMPLE12) if exact else None
    u = UnionOfSets(EXAMPLE12, candidate_buckets=cands)
    u.open()
    assert u.current == "a1" and u.opened == ["a1"]

    # Stage 1: b1, b2, b3 from V(a1, B).
    assert [u.next() for _ in range(3)] == ["b1", "b2", "b3"]
    assert u.current == "a1"
    assert u.buckets["a2"].skip_to == {"b1": "b5"}
    assert u.buckets["a2"].skipped_from == {"b5": "b1"}
    assert u.buckets["a3"].skip_to == {"b2": "b5", "b3": EOF}
    assert u.buckets["a3"].skipped_from == {"b5": "b2", EOF: "b3"}
    assert u.buckets["a4"].skip_to == {} and u.buckets["a4"].skipped_from == {}
    assert u.buckets["a1"].skip_to == {}  # never exclude from the current bucket
    assert u.ibuckets.skip_to == {} and u.ibuckets.skipped_from == {}

    # Stage 2: b4, b5 from V(a2, B) - V(a1, B); b1 is hopped over.
    assert [u.next() for _ in range(2)] == ["b4", "b5"]
    assert u.current == "a2"
    a3 = u.buckets["a3"]
    assert a3.skip_to["b2"] is EOF and a3.skipped_from[EOF] == "b2"
    assert a3.skip_to == {"b2": EOF, "b3": EOF}
    assert a3.is_empty()
    assert u.buckets["a4"].skip_to == {"b4": EOF}
    assert u.buckets["a4"].skipped_from == {EOF: "b4"}
    assert u.ibuckets.skip_to == {"a3": "a4"}
    assert u.ibuckets.skipped_from == {"a4": "a3"}
    assert u.buckets["a2"].skip_to == {"b1": "b5"}  # unchanged while it is current

    # Stage 3: b6 from V(a4, B), b4 skipped; then EOF. a3 is never opened.
    assert u.next() == "b6"
    assert u.current == "a4"
    assert u.next() is EOF
    assert u.next() is EOF
    assert u.opened == ["a1", "a2", "a4"]
    assert u.buckets["a3"].curr is BOF  # never opened or advanced


def test_example12_iter_and_reopen():
    u = UnionOfSets(EXAMPLE12)
    assert list(u) == ["b1", "b2", "b3", "b4", "b5", "b6"]
    assert list(u) == ["b1", "b2", "b3", "b4", "b5", "b6"]  # __iter__ re-opens
    u.open()
    assert drain(u) == ["b1", "b2", "b3", "b4", "b5", "b6"]


def test_example12_lazy_buckets():
    u = UnionOfSets(EXAMPLE12, candidate_buckets=lambda t: [])
    u.open()
    assert u.buckets.initialised == {"a1"}
    assert u.next() == "b1"
    assert u.buckets.initialised == {"a1"}
    assert "a3" in u.buckets and len(u.buckets) == 4
    assert u.buckets.initialised == {"a1"}


def test_candidates_filtered_to_later_buckets():
    # Candidates that name the current and earlier buckets (and repeat ids) must not change the
    # run: only buckets after the current one are touched, each once.
    ids = [b for b, _ in EXAMPLE12]
    u = UnionOfSets(EXAMPLE12, candidate_buckets=lambda t: ids + ids[::-1])
    u.open()
    assert [u.next() for _ in range(3)] == ["b1", "b2", "b3"]
    assert u.buckets["a1"].skip_to == {}
    assert u.buckets["a3"].skip_to == {"b2": "b5", "b3": EOF}
    assert drain(u) == ["b4", "b5", "b6"]
    assert u.ibuckets.skip_to == {"a3": "a4"}


def test_next_before_open_and_edge_cases():
    u = UnionOfSets(EXAMPLE12)
    with pytest.raises(RuntimeError):
        u.next()
    assert list(UnionOfSets([])) == []
    assert list(UnionOfSets([("x", [])])) == []
    assert list(UnionOfSets([("x", []), ("y", [3, 1]), ("z", []), ("w", [1, 2])])) == [3, 1, 2]
    with pytest.raises(ValueError):
        UnionOfSets([("x", [1]), ("x", [2])])
    # Any SuccessorCollection works as a bucket.
    assert list(UnionOfSets([(0, ListCollection([2, 1])), (1, [1, 3])])) == [2, 1, 3]


def test_empty_bucket_excluded_once():
    # With the literal Figure 5 (IsEmpty after every candidate, default [n]) bucket "x" would be
    # re-excluded from Ibuckets after it had been merged into a run, corrupting the hops: the
    # enumeration then opens the emptied bucket "n" and stops before reporting t5.
    buckets = [
        ("a1", ["t1", "t2", "t3", "t4"]),
        ("p", ["t2"]),
        ("x", ["t1"]),
        ("n", ["t4"]),
        ("m", ["t5"]),
    ]
    u = UnionOfSets(buckets)
    assert list(u) == ["t1", "t2", "t3", "t4", "t5"]
    assert u.opened == ["a1", "m"]
    assert u.ibuckets.skip_to["p"] == "m" and u.ibuckets.hop("p") == "m"


# --- UnionNext (digest §14.2) -------------------------------------------------------------------


def test_union_next_examples():
    its = [SetIterator([1, 2, 3]), SetIterator([2, 3, 4])]
    assert [union_next(its) for _ in range(4)] == [1, 2, 3, 4]
    assert union_next(its) is EOF and union_next(its) is EOF

    its = [SetIterator([1, 2, 3]), SetIterator([4, 3, 2])]
    assert [union_next(its) for _ in range(4)] == [1, 4, 3, 2]
    assert union_next(its) is EOF

    assert list(union_iter([SetIterator([1, 2, 3]), SetIterator([4, 3, 2])])) == [1, 4, 3, 2]
    assert list(union_iter([SetIterator([5, 6])])) == [5, 6]
    assert list(union_iter([])) == []
    assert union_next([]) is EOF


def test_set_iterator():
    it = SetIterator([3, 1])
    assert it.contains(1) and not it.contains(2)
    assert it.next() == 3 and it.next() == 1 and it.next() is EOF and it.next() is EOF
    assert it.contains(3)  # membership in the whole set, whatever the position
    with pytest.raises(ValueError):
        SetIterator([1, 1])


# --- property tests -----------------------------------------------------------------------------

DOMAIN = 12
bucket_lists = st.lists(
    st.lists(st.integers(0, DOMAIN - 1), unique=True, max_size=DOMAIN), max_size=8
)


@given(bucket_lists)
def test_union_of_sets_default_candidates(sets):
    buckets = [(f"a{i}", s) for i, s in enumerate(sets)]
    out = list(UnionOfSets(buckets))
    assert out == reference_union_order(buckets)
    assert len(out) == len(set(out)) == len(set().union(*map(set, sets)))


@given(bucket_lists)
def test_union_of_sets_exact_candidates(sets):
    buckets = list(enumerate(sets))
    u = UnionOfSets(buckets, candidate_buckets=exact_candidates(buckets))
    u.open()
    out = drain(u)
    assert out == reference_union_order(buckets)
    assert set(out) == set().union(*map(set, sets))
    # No bucket is opened twice.
    assert all(u.opened.count(b) == 1 for b in u.opened)


@given(bucket_lists, st.data())
def test_union_of_sets_superset_candidates(sets, data):
    buckets = list(enumerate(sets))
    exact = exact_candidates(buckets)
    ids = [b for b, _ in buckets]
    extra = data.draw(st.lists(st.sampled_from(ids), max_size=4)) if ids else []
    out = list(UnionOfSets(buckets, candidate_buckets=lambda t: [*exact(t), *extra]))
    assert out == reference_union_order(buckets)


@given(st.lists(st.lists(st.integers(0, DOMAIN - 1), unique=True, max_size=DOMAIN), max_size=6))
def test_union_next_random(sets):
    its = [SetIterator(s) for s in sets]
    out = list(union_iter(its))
    assert len(out) == len(set(out))
    assert set(out) == set().union(*map(set, sets))
    assert union_next(its) is EOF


@given(st.data())
def test_hop_iterator_exclude_then_enumerate(data):
    items = data.draw(st.lists(st.integers(0, 30), unique=True, max_size=15))
    order = data.draw(st.permutations(items))
    excluded = order[: data.draw(st.integers(0, len(order)))]
    it = HopIterator(ListCollection(items))
    assert it.is_empty() == (not items)
    for i, x in enumerate(excluded):
        assert it.exclude(x)
        rest = [y for y in items if y not in excluded[: i + 1]]
        assert it.is_empty() == (not rest)
    assert not it.exclude(-1)  # not in C: no-op
    remaining = [y for y in items if y not in excluded]
    assert list(it) == remaining
    it.open_hop()
    assert [it.next_hop() for _ in remaining] == remaining
    assert it.next_hop() is EOF and it.next_hop() is EOF
    # Every key of skip_to was excluded (interior keys may be stale, as in Figure 4), and one hop
    # from the successor of BOF or of any valid value reaches a valid value or EOF.
    assert set(it.skip_to) <= set(excluded)
    for v in [BOF, *remaining]:
        to = it.hop(it.collection.next(v))
        assert to is EOF or to in remaining


@given(st.data())
def test_hop_iterator_exclude_ahead_while_enumerating(data):
    # The usage pattern of Ibuckets: values strictly after curr are excluded mid-enumeration.
    items = data.draw(st.lists(st.integers(0, 30), unique=True, max_size=15))
    it = HopIterator(ListCollection(items))
    it.open_hop()
    excluded: set = set()
    out = []
    pos = -1  # index of curr in items
    while True:
        ahead = [x for x in items[pos + 1 :] if x not in excluded]
        if ahead and data.draw(st.booleans()):
            x = data.draw(st.sampled_from(ahead))
            assert it.exclude(x)
            excluded.add(x)
            continue
        x = it.next_hop()
        if x is EOF:
            break
        out.append(x)
        pos = items.index(x)
    assert out == [x for x in items if x not in excluded]
    assert it.is_empty() == (len(excluded) == len(items))
