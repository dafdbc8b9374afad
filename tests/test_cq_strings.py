"""String values in the query engine (gpu_ivm.cq.values): dictionary-encoded columns, joined
with equal strings in other relations, decoded in the answers; kinds checked per variable;
a refused batch leaves no string and no kind behind; snapshots keep the dictionary.

The oracle is the brute-force evaluator on the same stream with every string replaced by an
integer of its own (a bijection), so the answers must be the same up to that renaming."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_ivm.cq import evaluate, parse_query
from gpu_ivm.cq.engine import Engine
from gpu_ivm.cq.factory import engine as make_engine
from gpu_ivm.cq.tradeoff import TradeoffEngine
from gpu_ivm.errors import InputError
from gpu_ivm.snapshot import SnapshotError

WORDS = ["apple", "pear", "fig", "kiwi", "lime", "plum", "date", "", "Ω-ünï", "a b"]


def _name(v: int) -> str:
    return WORDS[v] if v < len(WORDS) else f"w{v}"


def _tables(db: dict, q, strings: set[str]) -> dict:
    """The oracle's relations as tables whose columns bound to a variable in ``strings``
    hold strings."""
    out = {}
    for r, rel in db.items():
        rows = sorted(rel.items())
        cols = {}
        for j in range(q.schemas[r]):
            vals = [k[j] for k, _ in rows]
            var = next(a.variables[j] for a in q.atoms if a.relation == r)
            cols[f"c{j}"] = [_name(v) for v in vals] if var in strings else vals
        cols["mult"] = [m for _, m in rows]
        out[r] = cols
    return out


def _answers(eng, q, reqs, strings):
    cols = {v: [_name(r[j]) if v in strings else r[j] for r in reqs]
            for j, v in enumerate(q.inputs)} if q.inputs else None
    out = eng.request(cols).to_pylist()
    got: dict = {}
    for x in out:
        req = reqs[x["request"]]
        key = tuple(x[v] for v in q.outputs)
        got.setdefault(req, {})[key] = x["mult"]
    return got, out, cols


def _want(q, db, reqs, strings):
    full = evaluate(q, db)
    return {r: {tuple(_name(v) if o in strings else v for v, o in zip(out, q.outputs)): m
                for out, m in full[r].items()} for r in reqs if r in full}


QUERIES = [
    ("Q(C | A) = R(A,B), S(B,C)", {"A", "B", "C"}, None),
    ("Q(C | A) = R(A,B), S(B,C)", {"A", "C"}, None),          # B stays an integer
    ("Q(B,C | A) = R(A,B), S(A,C)", {"B"}, None),
    ("Q(A,C | ) = R(A,B), S(B,C)", {"A", "B", "C"}, "1/2"),    # the trade-off engine
    ("Q(A,B,C | ) = R(A,B), S(B,C), T(C,A)", {"A", "B", "C"}, None),  # the triangle engine
    ("Q(B | A) = E(A,B), E(B,C)", {"A", "B", "C"}, None),      # a self-join
]


@pytest.mark.parametrize("query,strings,eps", QUERIES)
def test_string_streams_match_the_oracle(query, strings, eps):
    rng = random.Random(len(query) + len(strings))
    q = parse_query(query)
    domain = list(range(12))
    db = {r: {} for r in q.schemas}
    for r, a in q.schemas.items():
        for _ in range(25):
            t = tuple(rng.choice(domain) for _ in range(a))
            db[r][t] = db[r].get(t, 0) + 1
    eng = make_engine(query, epsilon=eps) if eps else make_engine(query)
    eng.load(**_tables(db, q, strings))
    for step in range(4):
        if step:
            batch = {}
            for r, a in q.schemas.items():
                d: dict = {}
                for t in rng.sample(sorted(db[r]), 3):
                    d[t] = -db[r][t]
                for _ in range(4):
                    t = tuple(rng.choice(domain + [20 + step]) for _ in range(a))
                    d[t] = d.get(t, 0) + 1
                batch[r] = {t: m for t, m in d.items() if m}
                for t, m in batch[r].items():
                    db[r][t] = db[r].get(t, 0) + m
                db[r] = {t: m for t, m in db[r].items() if m}
            eng.apply(_tables(batch, q, strings))
        reqs = [tuple(rng.choice(domain + [99]) for _ in q.inputs) for _ in range(6)] \
            if q.inputs else [()]
        got, rows, cols = _answers(eng, q, reqs, strings)
        assert got == _want(q, db, reqs, strings)
        assert eng.count() == sum(sum(v.values()) for v in evaluate(q, db).values()) \
            or q.inputs
        # pages in the order of the whole answer
        pages = [x for p in eng.cursor(cols, limit=2) for x in p.to_pylist()]
        assert sorted(pages, key=lambda x: x["request"]) == sorted(
            rows, key=lambda x: x["request"])
        for v in q.outputs:
            if v in strings and rows:
                assert all(isinstance(x[v], str) for x in rows)


def test_kinds_are_checked_per_variable():
    eng = Engine("Q(C | A) = R(A,B), S(B,C)")
    eng.load(R={"a": ["x"], "b": ["u"]})
    with pytest.raises(InputError, match="variable B is bound to strings"):
        eng.apply({"S": {"b": [1], "c": [2], "mult": [1]}})
    with pytest.raises(InputError, match="mixes strings"):
        eng.apply({"R": {"a": np.array(["x", 3], dtype=object), "b": ["u", "v"],
                         "mult": [1, 1]}})
    with pytest.raises(InputError, match="'mult' must hold integers"):
        eng.apply({"R": {"a": ["x"], "b": ["u"], "mult": ["1"]}})
    with pytest.raises(InputError, match="holds integers but variable A holds strings"):
        eng.request({"A": [1]})
    with pytest.raises(InputError, match="must hold integers or strings"):
        eng.apply({"R": {"a": [1.5], "b": ["u"], "mult": [1]}})
    eng.apply({"S": {"b": ["u"], "c": [7], "mult": [1]}})  # C holds integers
    assert eng.request({"A": ["x", "nobody"]}).to_pydict() == {
        "request": [0], "C": [7], "mult": [1]}
    views = [eng.view(v) for v in ("A", "B", "C")]  # inspection decodes the strings too
    assert {k for view in views for t in view for k in t} >= {"x", "u", 7}


def test_a_refused_batch_leaves_no_string_and_no_kind():
    eng = Engine("Q(C | A) = R(A,B), S(B,C)")
    eng.load(R={"a": ["x"], "b": ["u"]}, S={"b": ["u"], "c": ["p"]})
    before = eng._values.values
    with pytest.raises(InputError, match="multiplicity -1"):
        eng.apply({"R": {"a": ["new1", "x"], "b": ["new2", "zzz"], "mult": [1, -1]}})
    assert eng._values.values == before
    eng.apply({"R": {"a": ["y"], "b": ["u"], "mult": [1]}})
    assert eng._values.values == before + ["y"]  # ids stay dense: no hole for new1, new2
    fresh = Engine("Q(C | A) = R(A,B), S(B,C)")
    with pytest.raises(InputError):  # S's first rows are refused: B's kind is not fixed
        fresh.load(R={"a": [1], "b": ["u"]}, S={"b": [1], "c": [2]})
    fresh.load(R={"a": [1], "b": [5]}, S={"b": [5], "c": [2]})
    assert fresh.request({"A": [1]}).to_pydict()["C"] == [2]


def test_arrow_pandas_and_dictionary_columns():
    eng = Engine("Q(C | A) = R(A,B), S(B,C)")
    r = pa.table({"a": pa.array(["x", "y"]).dictionary_encode(),
                  "b": pa.array(["u", "v"], pa.large_string())})
    s = pd.DataFrame({"b": pd.Series(["u", "v"], dtype="string"), "c": ["p", "q"]})
    eng.load(R=r, S=s)
    got = eng.request(pa.table({"A": ["y", "x"]})).to_pydict()
    assert got == {"request": [0, 1], "C": ["q", "p"], "mult": [1, 1]}


@pytest.mark.parametrize("cls,kw", [(Engine, {}), (TradeoffEngine, {"epsilon": "1/2"})])
def test_snapshots_keep_the_strings(tmp_path, cls, kw):
    eng = cls("Q(C | A) = R(A,B), S(B,C)", **kw)
    eng.load(R={"a": ["x", "y"], "b": [1, 2]}, S={"b": [1, 2], "c": ["p", "q"]})
    eng.snapshot(tmp_path / "s")
    back = cls.restore(tmp_path / "s")
    assert back.request({"A": ["x", "y"]}) == eng.request({"A": ["x", "y"]})
    for e in (eng, back):  # a new string gets the same id in both
        e.apply({"R": {"a": ["z"], "b": [2], "mult": [1]}})
    assert back.request({"A": ["z"]}) == eng.request({"A": ["z"]})
    assert getattr(back, "_reader", back)._values.values == \
        getattr(eng, "_reader", eng)._values.values


def test_a_snapshot_with_an_id_past_its_strings_is_refused(tmp_path):
    import json

    from gpu_ivm import snapshot as sn

    eng = Engine("Q(B | A) = R(A,B)")
    eng.load(R={"a": ["x", "y"], "b": [1, 2]})
    eng.snapshot(tmp_path / "s")
    vals = tmp_path / "s" / "values.arrow"
    t = pa.table({"value": pa.array(["x"], pa.string())})  # one string where two are used
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    data = sink.getvalue().to_pybytes()
    vals.write_bytes(data)
    man = json.loads((tmp_path / "s" / sn.MANIFEST).read_text())
    import hashlib

    man["files"]["values.arrow"].update(rows=1, bytes=len(data),
                                        sha256=hashlib.sha256(data).hexdigest())
    man["manifest_sha256"] = sn._manifest_digest(man)
    (tmp_path / "s" / sn.MANIFEST).write_text(json.dumps(man))
    with pytest.raises(SnapshotError, match="string id outside"):
        Engine.restore(tmp_path / "s")


def test_cli_reads_string_parquet(tmp_path, capsys):
    from gpu_ivm.cli import main

    rel, bat = tmp_path / "rel", tmp_path / "bat"
    rel.mkdir()
    (bat / "b1").mkdir(parents=True)
    pq.write_table(pa.table({"a": ["x", "y"], "b": ["u", "v"]}), rel / "R.parquet")
    pq.write_table(pa.table({"b": ["u", "v"], "c": ["p", "q"]}), rel / "S.parquet")
    pq.write_table(pa.table({"a": ["y"], "b": ["u"], "mult": [1]}), bat / "b1" / "R.parquet")
    req = tmp_path / "req.parquet"
    pq.write_table(pa.table({"A": ["y"]}), req)
    out = tmp_path / "out"
    assert main(["query", "Q(C | A) = R(A,B), S(B,C)", "--relations", str(rel),
                 "--batches", str(bat), "--requests", str(req), "--out", str(out),
                 "--json"]) == 0
    last = pq.read_table(sorted(out.glob("answers-*.parquet"))[-1]).to_pydict()
    assert sorted(zip(last["C"], last["mult"])) == [("p", 1), ("q", 1)]
