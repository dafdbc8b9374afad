"""Results handed back as the backend's arrays (``as_="device"``) or a cuDF DataFrame
(``as_="cudf"``): the same rows, in the same order, as the Arrow results, on the host backend
here (tests/cuda_strict_cases.py runs them on the device stand-in, with no host copy)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pyarrow as pa
import pytest

from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm.errors import InputError

FAMILIES = ("vertex_counts", "edge_counts", "triangles")


def arrow_rows(engine, family: str) -> dict:
    t = pa.Table.from_batches(list(getattr(engine, family)(7)))
    return {name: t.column(name).to_pylist() for name in t.column_names}


def device_rows(engine, family: str) -> dict:
    cols = getattr(engine, family)(as_="device")
    return {k: np.asarray(v).tolist() for k, v in cols.items()}


@pytest.mark.parametrize("directed", [False, True])
def test_graph_results_on_device_are_the_arrow_rows(directed) -> None:
    rng = np.random.default_rng(5)
    keys = rng.permutation(1000)[:40] * 13 - 200  # keys whose order is not the ids'
    e = GraphEngine(maintain=list(FAMILIES), directed=directed, epsilon="1/2")
    e.load({"src": keys[rng.integers(0, 40, 300)], "dst": keys[rng.integers(0, 40, 300)]})
    for fam in FAMILIES:
        got, want = device_rows(e, fam), arrow_rows(e, fam)
        assert got == want, fam
        assert len(next(iter(want.values()))) > 0, fam


def test_relation_results_on_device() -> None:
    rng = np.random.default_rng(6)
    e = RelationEngine(maintain=list(FAMILIES))
    e.load(*({"src": rng.integers(0, 12, 60), "dst": rng.integers(0, 12, 60)} for _ in "RST"))
    for fam in FAMILIES:
        assert device_rows(e, fam) == arrow_rows(e, fam), fam


def test_cudf_form_and_refusals(monkeypatch) -> None:
    e = GraphEngine(maintain=["vertex_counts"])
    e.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    with pytest.raises(InputError, match="as_"):
        e.vertex_counts(as_="pandas")
    monkeypatch.setitem(sys.modules, "cudf", None)  # not installed
    with pytest.raises(InputError, match="cuDF"):
        e.vertex_counts(as_="cudf")
    fake = types.ModuleType("cudf")
    fake.DataFrame = lambda cols: ("frame", cols)
    monkeypatch.setitem(sys.modules, "cudf", fake)
    kind, cols = e.vertex_counts(as_="cudf")
    assert kind == "frame" and np.asarray(cols["triangles"]).tolist() == [1, 1, 1]
    s = GraphEngine(maintain=["vertex_counts"])
    s.load({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]})
    with pytest.raises(InputError, match="strings"):
        s.vertex_counts(as_="device")
