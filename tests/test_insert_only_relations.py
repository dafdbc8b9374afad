"""RelationEngine(mode="insert_only" / "auto"): the three-relation form without partitions.

Oracles: ``tests.oracle.RelationsOracle`` (dicts and nested loops) for Q after every batch,
the general engine for the switched state, NumPy for the grouped intersection kernel.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gpu_ivm.kernels import delta_kernels as dk
from oracle import RelationsOracle

from gpu_ivm import InputError, IntegerOverflowError, RelationEngine
from gpu_ivm.cli import main
from gpu_ivm.encoding import pack
from gpu_ivm.insert_only_relations import InsertOnlyRelationEngine
from gpu_ivm.store import ZStore


def _rows(rel, a, b, m) -> dict:
    return {"rel": list(rel), "src": [int(x) for x in a], "dst": [int(x) for x in b],
            "mult": [int(x) for x in m]}


def _stream(rng, nv: int, n: int, max_m: int, hub_p: float):
    """n insert rows over nv values; with probability hub_p a column takes value 0 (a hub)."""
    rel = rng.choice(list("RST"), n)
    a, b = rng.integers(0, nv, n), rng.integers(0, nv, n)
    a[rng.random(n) < hub_p] = 0
    b[rng.random(n) < hub_p] = 0
    return rel, a, b, rng.integers(1, max_m + 1, n)


def _state(e):
    return e.count(), {r: tuple(map(np.ndarray.tolist, e.relation(r))) for r in "RST"}, \
        e.batches_applied, e.size


@pytest.mark.parametrize("seed", range(6))
def test_random_insert_streams_match_the_oracle(seed):
    """Random streams with hubs, repeated tuples and multiplicities beyond the int8 marks;
    batches from 1 row to beyond the parallel kernel's threshold."""
    rng = np.random.default_rng(seed)
    nv = int(rng.integers(3, 60))
    max_m = [1, 3, 300][seed % 3]
    hub_p = [0.0, 0.3, 0.7][seed % 3]
    o = RelationsOracle()
    e = RelationEngine(mode="insert_only")
    base = {}
    for r in "RST":
        _, a, b, m = _stream(rng, nv, int(rng.integers(0, 80)), max_m, hub_p)
        base[r] = {"src": a, "dst": b, "mult": m}
        for x, y, z in zip(a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
    e.load(**base)
    assert e.count() == o.count()
    for i in range(10):
        n = int(rng.choice([1, 7, 60, 700]))
        rel, a, b, m = _stream(rng, nv, n, max_m, hub_p)
        rep = e.apply(_rows(rel, a, b, m))
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert e.count() == o.count(), (seed, i)
        assert rep.path in ("insert_only", "insert_only_recount")
        if i % 3 == 0:
            e.check_invariants()
    assert e.epsilons == [0, 0, 0] and e.insert_only_active
    assert e._stats["moves"] == 0 and e._stats["major"] == 0


def test_both_paths_are_taken_and_agree():
    """A batch as large as the state is recounted, a small one intersected: same counts."""
    rng = np.random.default_rng(3)
    o = RelationsOracle()
    e = RelationEngine(mode="insert_only")
    e.load(R={"src": [0], "dst": [1]})
    o.add("R", 0, 1, 1)
    paths = set()
    for n in (400, 3, 5, 2000, 4):
        rel, a, b, m = _stream(rng, 25, n, 2, 0.2)
        paths.add(e.apply(_rows(rel, a, b, m)).path)
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert e.count() == o.count()
    assert paths == {"insert_only", "insert_only_recount"}
    e.check_invariants()


def test_matches_the_general_engine_on_string_keys():
    rng = np.random.default_rng(9)
    names = np.array([f"v{i}" for i in range(30)], dtype=object)
    g, i = RelationEngine(epsilon="1/2"), RelationEngine(mode="insert_only")
    for e in (g, i):
        e.load()
    for _ in range(6):
        rel, a, b, m = _stream(rng, 30, 150, 4, 0.4)
        batch = {"rel": list(rel), "src": names[a], "dst": names[b], "mult": m}
        assert g.apply(batch).delta == i.apply(batch).delta
    assert g.count() == i.count() > 0


def test_delete_refused_with_row_and_state_unchanged():
    e = RelationEngine(mode="insert_only")
    e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]}, T={"src": [3], "dst": [1]})
    e.apply(_rows("T", [3], [1], [2]), batch_id=4)
    before = _state(e)
    with pytest.raises(InputError) as ei:
        e.apply(_rows("RS", [5, 2], [6, 3], [1, -1]), batch_id=5)
    msg = str(ei.value)
    assert "row 1" in msg and "S(2, 3)" in msg and "insert_only" in msg
    assert _state(e) == before and e.last_batch_id == 4
    with pytest.raises(InputError, match="relation T: .*multiplicity -2"):
        RelationEngine(mode="insert_only").load(T={"src": [1, 2], "dst": [2, 3],
                                                   "mult": [1, -2]})
    e.check_invariants()


def test_auto_mode_switches_at_the_first_delete():
    rng = np.random.default_rng(4)
    o = RelationsOracle()
    a_eng = RelationEngine(mode="auto", epsilon="1/3")
    a_eng.load()
    for _ in range(4):
        rel, a, b, m = _stream(rng, 20, 200, 3, 0.3)
        rep = a_eng.apply(_rows(rel, a, b, m))
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert rep.path.startswith("insert_only") and a_eng.count() == o.count()
    # a batch that deletes and would overflow int64: refused, the engine stays insert-only
    before = _state(a_eng)
    with pytest.raises(IntegerOverflowError):
        a_eng.apply(_rows("RR", [0, 1], [1, 2], [-1, 2**62]))
    assert _state(a_eng) == before and a_eng.insert_only_active and a_eng.epsilons == [0] * 3
    r, (x, y), m = "S", next(iter(o.rels["S"])), -1
    rep = a_eng.apply(_rows(r, [x], [y], [m]))
    o.add(r, x, y, m)
    assert rep.path == "switched" and "first delete" in rep.extra["switched"]
    assert not a_eng.insert_only_active and a_eng.epsilons == [Fraction(1, 3)] * 3
    assert a_eng.count() == o.count()
    a_eng.check_invariants()
    for _ in range(3):  # then general batches with deletes
        rel, a, b, m = _stream(rng, 20, 50, 2, 0.3)
        m = m * rng.choice([-1, 1], m.shape[0])
        assert a_eng.apply(_rows(rel, a, b, m)).path != "switched"
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        assert a_eng.count() == o.count()
    a_eng.check_invariants()
    # a load with a negative multiplicity starts an auto engine in the general state
    b_eng = RelationEngine(mode="auto")
    b_eng.load(R={"src": [1], "dst": [2], "mult": [-1]})
    assert not b_eng.insert_only_active


@pytest.mark.parametrize("switched", [False, True])
def test_snapshot_restore_continues_exactly(tmp_path, switched):
    rng = np.random.default_rng(7)
    e = RelationEngine(mode="auto", epsilon={"R": "1/2", "S": "auto", "T": 0})
    twin = RelationEngine(mode="auto", epsilon={"R": "1/2", "S": "auto", "T": 0})
    batches = [_rows(*_stream(rng, 15, 80, 3, 0.3)) for _ in range(3)]
    if switched:
        batches.append(_rows("R", [batches[0]["src"][0]], [batches[0]["dst"][0]], [-1]))
    for x in (e, twin):
        x.load()
        for i, b in enumerate(batches):
            x.apply(b, batch_id=i)
    e.snapshot(tmp_path / "s")
    r = RelationEngine.restore(tmp_path / "s")
    assert type(r) is InsertOnlyRelationEngine and r.mode == "auto"
    assert r.insert_only_active == (not switched) == twin.insert_only_active
    assert r.count() == twin.count() and r.last_batch_id == twin.last_batch_id
    assert r.general_epsilons == twin.general_epsilons and r.epsilons == twin.epsilons
    later = [_rows(*_stream(rng, 15, 60, 3, 0.3)),
             _rows("T", [batches[1]["src"][0]], [batches[1]["dst"][0]], [-1])]
    for b in later:
        assert r.apply(b).delta == twin.apply(b).delta
    assert r.count() == twin.count() and not r.insert_only_active
    r.check_invariants()


def test_refused_configurations():
    for kw, what in (({"maintain": "triangles"}, "count only"),
                     ({"track_changes": True}, "count only"),
                     ({"epsilon": {"R": 1}}, "missing"),
                     ({"backend": "nope"}, "backend")):
        with pytest.raises(InputError, match=what):
            RelationEngine(mode="insert_only", **kw)
    with pytest.raises(InputError, match="mode must be one of"):
        RelationEngine(mode="append")


def _store(rows: dict, ids: int) -> ZStore:
    keys = np.array(sorted(rows), np.int64)
    vals = np.array([rows[k] for k in sorted(rows)], np.int64)
    return ZStore.from_sorted(keys, vals, ids, None, None, True)


@pytest.mark.parametrize("seed", range(4))
def test_first_grouped_weights_equals_dense_products(seed):
    """w[i] = Σ_c X(x_i, c)·Y(y_i, c), with long rows (marked once per group), short ones,
    unit rows (bitmaps kept by the store) and multiplicities outside the int8 marks."""
    rng = np.random.default_rng(seed)
    ids = 400
    X = np.zeros((ids, ids), np.int64)
    Y = np.zeros((ids, ids), np.int64)
    for M, p in ((X, 0.05), (Y, 0.3)):
        mask = rng.random((ids, ids)) < p
        mask[:3] = rng.random((3, ids)) < 0.9  # three long rows
        M[mask] = rng.choice([1, 1, 1, 2, 500], int(mask.sum())) if seed % 2 else 1
    sx = _store({int(pack(np.int64(a), np.int64(c))): int(X[a, c])
                 for a, c in zip(*np.nonzero(X))}, ids)
    sy = _store({int(pack(np.int64(a), np.int64(c))): int(Y[a, c])
                 for a, c in zip(*np.nonzero(Y))}, ids)
    n = [5, 3000][seed // 2]
    x = np.where(rng.random(n) < 0.5, rng.integers(0, 3, n), rng.integers(0, ids, n))
    y = rng.integers(0, ids, n)
    keys = np.unique(pack(x.astype(np.int64), y.astype(np.int64)))
    w, work = dk.first_grouped_weights(keys, sx.nt(), sy.nt(), ids)
    xs, ys = keys >> 32, keys & 0xFFFFFFFF
    assert np.array_equal(w, (X[xs] * Y[ys]).sum(axis=1))
    assert (work >= 0).all()


def test_cli_replay_relations_insert_only_and_resume(tmp_path, capsys):
    rng = np.random.default_rng(12)
    o = RelationsOracle()
    base = tmp_path / "base.txt"
    rel, a, b, m = _stream(rng, 12, 40, 2, 0.3)
    base.write_text("".join(f"{r} {x} {y} {z}\n" for r, x, y, z in zip(rel, a, b, m)))
    for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
        o.add(r, x, y, z)
    bdir = tmp_path / "batches"
    bdir.mkdir()
    counts = []
    for i in range(4):
        rel, a, b, m = _stream(rng, 12, 30, 2, 0.3)
        pq.write_table(pa.table({"rel": rel, "src": a, "dst": b, "mult": m}),
                       bdir / f"b{i}.parquet")
        for r, x, y, z in zip(rel.tolist(), a.tolist(), b.tolist(), m.tolist()):
            o.add(r, x, y, z)
        counts.append(o.count())
    snaps = tmp_path / "snaps"
    argv = ["replay", "--relations", "--base", str(base), "--batches", str(bdir), "--json",
            "--mode", "insert-only", "--snapshot-dir", str(snaps), "--check"]
    assert main(argv) == 0
    got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [d["triangles"] for d in got if d["kind"] == "batch"] == counts
    assert {d["path"] for d in got if d["kind"] == "batch"} <= {"insert_only",
                                                                 "insert_only_recount"}
    import shutil

    shutil.rmtree(snaps / "snapshot-000004")
    assert main(argv + ["--resume", str(snaps)]) == 0
    got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert got[0]["kind"] == "resume" and got[0]["triangles"] == counts[2]
    assert [d["triangles"] for d in got if d["kind"] == "batch"] == counts[3:]
    # a delete: refused in insert-only mode (exit 2, the file and row named)
    pq.write_table(pa.table({"rel": ["R", "S"], "src": [1, 2], "dst": [2, 3],
                             "mult": [1, -1]}), bdir / "b9.parquet")
    assert main(argv[:-3]) == 2
    err = capsys.readouterr().err
    assert "b9.parquet" in err and "row 1" in err and "insert_only" in err
    with pytest.raises(SystemExit):
        main(argv[:-3] + ["--emit", "triangles", "--out", str(tmp_path / "o")])
    assert "count only" in capsys.readouterr().err
