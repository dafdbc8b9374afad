"""Bad input gets a clear error naming column and row, and changes nothing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_ivm import (
    ConflictError,
    GraphEngine,
    InputError,
    IntegerOverflowError,
    RelationEngine,
)


def snapshot(eng):
    """Everything observable about an engine's state."""
    parts = []
    for K in eng.rels:
        for st in (K.h, K.l, K.ht):
            parts.append(st.items())
        parts.append(K.heavy.copy())
    for v in eng.views:
        parts.append(v.items())
    return (eng.Q, eng.N, eng.size, len(eng.encoder), eng.batches_applied, parts)


def same(a, b) -> bool:
    if a[:5] != b[:5]:
        return False
    for x, y in zip(a[5], b[5]):
        if isinstance(x, tuple):
            if not all(np.array_equal(p, q) for p, q in zip(x, y)):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


@pytest.fixture
def graph():
    g = GraphEngine()
    g.load({"src": [1, 2, 3, 1], "dst": [2, 3, 1, 4]})
    g.apply({"src": [4], "dst": [2], "sign": [1]})
    return g


BAD_GRAPH_BATCHES = [
    ({"src": [1, 2], "dst": [5, 6]}, "sign", None),  # missing column
    ({"src": [1, None], "dst": [5, 6], "sign": [1, 1]}, "src", 1),  # null
    ({"src": [1, 2], "dst": [5.5, 6], "sign": [1, 1]}, "dst", 0),  # non-integer id
    ({"src": [1, 2], "dst": [5, 6], "sign": [1, 0]}, "sign", 1),  # sign not ±1
    ({"src": [1, 2], "dst": [5, 6], "sign": [1, 2]}, "sign", 1),
    ({"src": [1, 2, 3], "dst": [5, 6, 7], "sign": [1, 1, float("nan")]}, "sign", 2),
    ({"src": ["a", "b"], "dst": ["c", "d"], "sign": [1, 1]}, "src", 0),  # key kind changes
    ({"src": np.array([1, 2], np.uint64), "dst": np.array([3, 2**63], np.uint64),
      "sign": [1, 1]}, "dst", 1),  # int64 overflow of an id
]


@pytest.mark.parametrize("batch,column,row", BAD_GRAPH_BATCHES)
def test_bad_graph_batches_change_nothing(graph, batch, column, row):
    before = snapshot(graph)
    with pytest.raises(InputError) as ei:
        graph.apply(batch)
    assert ei.value.column == column
    if row is not None:
        assert ei.value.row == row
        assert f"row {row}" in str(ei.value)
    assert column in str(ei.value)
    assert same(before, snapshot(graph))
    graph.check_invariants()


@pytest.mark.parametrize("batch,row", [
    ({"src": [5, 1], "dst": [6, 2], "sign": [1, 1]}, 1),     # insert of a present edge
    ({"src": [5, 7], "dst": [6, 8], "sign": [1, -1]}, 1),    # delete of an absent edge
    ({"src": [2, 5, 1], "dst": [3, 6, 2], "sign": [-1, 1, -1]}, 2),  # (2,3) ok, (1,2) ok...
])
def test_conflicts_name_the_row_and_change_nothing(graph, batch, row):
    before = snapshot(graph)
    if row == 2:  # deleting (2,3) and (1,2) is fine; make the third row a double delete
        batch = {"src": [2, 5, 3], "dst": [3, 6, 2], "sign": [-1, 1, -1]}
    with pytest.raises(ConflictError) as ei:
        graph.apply(batch)
    assert ei.value.row == row and ei.value.column == "sign"
    assert same(before, snapshot(graph))


def test_ignore_policy_counts_and_applies_the_rest(graph):
    g = GraphEngine(on_conflict="ignore")
    g.load({"src": [1, 2, 3, 1], "dst": [2, 3, 1, 4]})
    rep = g.apply({"src": [1, 5, 9, 4], "dst": [2, 6, 9, 2], "sign": [1, -1, 1, 1]})
    assert rep.ignored == 2 and rep.self_loops == 1 and rep.updates == 1
    assert g.count() == 2
    g.check_invariants()


def test_errors_from_arrow_and_pandas_sources(graph):
    pd = pytest.importorskip("pandas")
    t = pa.table({"src": pa.array([1, None], pa.int64()), "dst": [2, 3], "sign": [1, 1]})
    with pytest.raises(InputError, match="row 1"):
        graph.apply(t)
    df = pd.DataFrame({"src": [1, 2], "dst": [2, 3], "sign": [1, 3]})
    with pytest.raises(InputError, match="sign"):
        graph.apply(df)


def test_load_twice_and_bad_parameters():
    g = GraphEngine()
    g.load({"src": [1], "dst": [2]})
    with pytest.raises(InputError, match="empty engine"):
        g.load({"src": [3], "dst": [4]})
    for bad in ["2", "-1/2", "x", 1.5, True]:
        with pytest.raises(InputError, match="epsilon"):
            GraphEngine(epsilon=bad)
    with pytest.raises(InputError, match="on_conflict"):
        GraphEngine(on_conflict="skip")
    with pytest.raises(InputError, match="backend"):
        GraphEngine(backend="tpu")
    with pytest.raises(InputError, match="epsilon"):
        RelationEngine(epsilon={"R": 0, "S": 0})


def test_relation_batches():
    e = RelationEngine()
    e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]}, T={"src": [3], "dst": [1]})
    before = snapshot(e)
    for batch, column in [
        ({"rel": ["R", "Q"], "src": [1, 2], "dst": [2, 3], "mult": [1, 1]}, "rel"),
        ({"rel": ["R"], "src": [1], "dst": [2]}, "mult"),
        ({"rel": ["R", "S"], "src": [1, 2], "dst": [2, 3], "mult": [1, 2.5]}, "mult"),
        ({"rel": ["R"], "src": [1], "dst": [2], "mult": [2**64]}, "mult"),
    ]:
        with pytest.raises(InputError) as ei:
            e.apply(batch)
        assert ei.value.column == column
        assert same(before, snapshot(e))


def test_int64_overflow_is_refused_before_any_change():
    e = RelationEngine()
    big = 2**20
    e.load(R={"src": [1], "dst": [2], "mult": [big]}, S={"src": [2], "dst": [3], "mult": [big]})
    before = snapshot(e)
    with pytest.raises(IntegerOverflowError):
        e.apply({"rel": ["T"], "src": [3], "dst": [1], "mult": [2**30]})
    assert same(before, snapshot(e))
    e.apply({"rel": ["T"], "src": [3], "dst": [1], "mult": [3]})
    assert e.count() == big * big * 3
