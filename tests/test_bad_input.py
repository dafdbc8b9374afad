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


@pytest.mark.usefixtures("no_compact")  # the stores' machinery
@pytest.mark.parametrize("eps", ["1", "1/2"])
def test_conflict_found_ahead_changes_nothing(monkeypatch, eps):
    """A batch between known vertices is checked as it is applied (by the store's location
    pass at ε = 1, just before the first change otherwise; on a device in the phase's
    read): a conflict found there leaves the state as it was, and the batch is done again
    checked first, with the same error or the same rows skipped."""
    calls = []
    apply_groups = GraphEngine._apply_groups

    def spy(self, *args, ahead):
        calls.append(ahead)
        return apply_groups(self, *args, ahead=ahead)

    monkeypatch.setattr(GraphEngine, "_apply_groups", spy)
    rng = np.random.default_rng(4)
    base = rng.integers(0, 30, (160, 2))
    base = base[base[:, 0] != base[:, 1]]
    edges = {tuple(sorted(e)) for e in base.tolist()}
    absent = [(a, b) for a in range(30) for b in range(a + 1, 30) if (a, b) not in edges]
    present = sorted(edges)
    # row 3 inserts a present edge; the other rows are fine
    batch = {"src": [absent[0][0], present[0][0], absent[1][0], present[1][1]],
             "dst": [absent[0][1], present[0][1], absent[1][1], present[1][0]],
             "sign": [1, -1, 1, 1]}
    for mode in ("error", "ignore"):
        g = GraphEngine(epsilon=eps, on_conflict=mode)
        g.load({"src": base[:, 0], "dst": base[:, 1]})
        before = snapshot(g)
        calls.clear()
        if mode == "error":
            with pytest.raises(ConflictError, match="already present") as ei:
                g.apply(batch)
            assert ei.value.row == 3
            assert same(before, snapshot(g))
            # found ahead, then done again checked first (the error is raised by the check)
            assert calls == [True]
        else:
            rep = g.apply(batch)
            assert calls == [True, False]  # found ahead, then done again checked first
            assert rep.ignored == 1 and rep.updates == 3
            want = GraphEngine(epsilon=eps)
            want.load({"src": base[:, 0], "dst": base[:, 1]})
            want.apply({k: v[:3] for k, v in batch.items()})
            assert g.count() == want.count()
        g.check_invariants()
        ok = {k: v[:3] for k, v in batch.items()}
        calls.clear()
        if mode == "error":
            assert g.apply(ok).triangles == g.recount()
            assert calls == [True]  # a valid batch: applied ahead, once
        g.check_invariants()


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
