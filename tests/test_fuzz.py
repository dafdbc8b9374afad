"""Hostile input, fuzzed with hypothesis: wrong types, nulls, huge ids, NaN/inf, booleans,
empty and truncated files, wrong columns, duplicate rows, sign 0, inserts of present and
deletes of absent edges, through ``engine.apply`` (dicts, NumPy, Arrow tables, Parquet / CSV /
gzip files) and through the CLI.

The oracle is a Python model of the documented semantics: a batch is valid iff every value
is a proper int64 id / ±1 sign and every edge's net change over the batch leaves its
multiplicity in {0, 1} (self-loops dropped; the error names the row where a conflicting
edge first leaves {0, 1}). A valid batch (or any batch under ``on_conflict="ignore"``) must
give exactly the model's edge set, count and ``ignored`` figure; an invalid one must raise
:class:`InputError` naming the column (and row) and leave the state exactly as it was.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import GraphOracle, RelationsOracle

from gpu_ivm import (
    ConflictError,
    GraphEngine,
    InputError,
    IntegerOverflowError,
    RelationEngine,
)
from gpu_ivm.cli import main

BASE = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 0), (1, 3)]


def state(eng) -> tuple:
    """Everything observable about the engine's state."""
    parts = [eng.Q, eng.N, eng.size, len(eng.encoder), eng.batches_applied, eng.last_batch_id]
    for K in eng.rels:
        for s in (K.h, K.l, K.ht):
            k, v = s.items()
            parts.append((k.tolist(), v.tolist()))
        parts.append(np.flatnonzero(K.heavy).tolist())
    for v in eng.views:
        k, x = v.items()
        parts.append((k.tolist(), x.tolist()))
    return tuple(map(repr, parts))


# ------------------------------------------------------------------ strategies
IDS = st.one_of(st.integers(0, 7), st.integers(0, 7),
                st.sampled_from([2**40, 2**63 - 1, -(2**63), -5]))
ROWS = st.lists(st.tuples(IDS, IDS, st.sampled_from([1, -1])), max_size=20)
BAD_ID = st.sampled_from([None, float("nan"), float("inf"), 1.5, 2**63, 2**64, -(2**63) - 1,
                          True, "x"])
BAD_SIGN = st.sampled_from([0, 2, -2, None, float("nan"), 1.5, 2**63, True, "plus"])


@st.composite
def graph_batch(draw):
    """(rows, columns dict, corruption or None)."""
    rows = draw(ROWS)
    if rows and draw(st.booleans()):  # duplicate some rows: nets of 2 or 0
        rows = rows + draw(st.lists(st.sampled_from(rows), max_size=4))
    cols = {"src": [r[0] for r in rows], "dst": [r[1] for r in rows],
            "sign": [r[2] for r in rows]}
    bad = None
    kind = draw(st.sampled_from(["clean", "clean", "value", "missing", "length", "extra"]))
    if kind == "value" and rows:
        col = draw(st.sampled_from(["src", "dst", "sign"]))
        row = draw(st.integers(0, len(rows) - 1))
        val = draw(BAD_SIGN if col == "sign" else BAD_ID)
        cols[col][row] = val
        bad = ("value", col, row, val)
    elif kind == "missing":
        col = draw(st.sampled_from(["src", "dst", "sign"]))
        del cols[col]
        bad = ("missing", col, None, None)
    elif kind == "length" and rows:
        col = draw(st.sampled_from(["dst", "sign"]))
        cols[col] = cols[col][:-1]
        bad = ("length", None, None, None)
    elif kind == "extra":
        cols["weight"] = [1.5] * len(rows)  # an extra column is ignored
    return rows, cols, bad


def model(present: set, rows, directed: bool):
    """The documented semantics: (valid, error row, new edge set, ignored rows). An edge is in
    conflict when its net change over the batch takes it outside {0, 1}; the error names the
    earliest row at which, taking rows in order, a conflicting edge's multiplicity first
    leaves {0, 1}. Self-loops are dropped."""
    norm = (lambda u, v: (u, v)) if directed else (lambda u, v: (min(u, v), max(u, v)))
    groups = defaultdict(list)
    for i, (u, v, _) in enumerate(rows):
        if u != v:
            groups[norm(u, v)].append(i)
    new = set(present)
    ignored = 0
    first_bad = None
    for e, idx in groups.items():
        running = int(e in present)
        leave = None
        for i in idx:
            running += rows[i][2]
            if leave is None and running not in (0, 1):
                leave = i
        if running not in (0, 1):
            ignored += len(idx)
            first_bad = leave if first_bad is None else min(first_bad, leave)
        elif running:
            new.add(e)
        else:
            new.discard(e)
    return first_bad is None, first_bad, new, ignored


def as_source(cols: dict, form: str, tmp: Path):
    """The batch as a dict of lists, NumPy arrays, an Arrow table or a file."""
    if form == "lists":
        return cols
    if form == "numpy":
        return {k: np.array(v, dtype=object) if any(not isinstance(x, int) or isinstance(x, bool)
                                                    or not -(2**63) <= x < 2**63 for x in v)
                else np.array(v, dtype=np.int64) for k, v in cols.items()}
    try:
        table = pa.table(cols)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return cols  # Arrow cannot hold this mix: fall back to lists
    if form == "arrow":
        return table
    if form == "parquet":
        pq.write_table(table, tmp / "b.parquet")
        return tmp / "b.parquet"
    # CSV text written by hand, so any value can appear as its repr
    names = list(cols)
    n = max(len(v) for v in cols.values()) if cols else 0
    lines = [",".join(names)]
    for i in range(n):
        cells = []
        for k in names:
            v = cols[k][i] if i < len(cols[k]) else ""
            cells.append("" if v is None else str(v))
        lines.append(",".join(cells))
    data = ("\n".join(lines) + "\n").encode()
    if form == "csv.gz":
        (tmp / "b.csv.gz").write_bytes(gzip.compress(data))
        return tmp / "b.csv.gz"
    (tmp / "b.csv").write_bytes(data)
    return tmp / "b.csv"


def base_engine(directed: bool, on_conflict: str, eps: str) -> GraphEngine:
    g = GraphEngine(directed=directed, on_conflict=on_conflict, epsilon=eps)
    g.load({"src": [a for a, _ in BASE], "dst": [b for _, b in BASE]})
    return g


def base_set(directed: bool) -> set:
    return {(a, b) if directed else (min(a, b), max(a, b)) for a, b in BASE}


@settings(max_examples=150)
@given(batch=graph_batch(), directed=st.booleans(),
       on_conflict=st.sampled_from(["error", "ignore"]), eps=st.sampled_from(["0", "1/2", "1"]),
       form=st.sampled_from(["lists", "numpy", "arrow", "parquet", "csv", "csv.gz"]))
def test_graph_batches_fuzzed(batch, directed, on_conflict, eps, form):
    rows, cols, bad = batch
    g = base_engine(directed, on_conflict, eps)
    before = state(g)
    with tempfile.TemporaryDirectory() as tmp:
        src = as_source(cols, form, Path(tmp))
        if bad is not None and bad[0] != "extra":
            with pytest.raises(InputError) as ei:
                g.apply(src, batch_id=1)
            what, col, row, val = bad
            if what == "missing":
                assert ei.value.column == col
            elif what == "value" and not isinstance(val, str):
                assert ei.value.column == col, str(ei.value)
                assert ei.value.row in (row, None), str(ei.value)
            assert state(g) == before
            assert g.last_batch_id is None
            return
        valid, first_bad, new, ignored = model(base_set(directed), rows, directed)
        if not valid and on_conflict == "error":
            with pytest.raises(ConflictError) as ei:
                g.apply(src, batch_id=1)
            assert ei.value.row == first_bad and ei.value.column == "sign"
            assert state(g) == before
            return
        rep = g.apply(src, batch_id=1)
    assert rep.ignored == ignored and g.last_batch_id == 1
    s, d = g.edges()
    got = {(a, b) if directed else (min(a, b), max(a, b)) for a, b in zip(s.tolist(), d.tolist())}
    assert got == new
    oracle = GraphOracle(directed)
    oracle.edges = new
    assert g.count() == oracle.count()
    g.check_invariants()


REL_BAD = st.sampled_from([("rel", "X"), ("rel", 3), ("rel", None), ("mult", None),
                           ("mult", float("nan")), ("mult", 1.5), ("mult", 2**63),
                           ("src", None), ("dst", 2**64)])


@settings(max_examples=80)
@given(rows=st.lists(st.tuples(st.sampled_from(["R", "S", "T"]), st.integers(0, 6),
                               st.integers(0, 6), st.integers(-3, 3)), max_size=20),
       bad=st.one_of(st.none(), REL_BAD), huge=st.booleans(),
       eps=st.sampled_from(["1/2", "0", "1"]))
def test_relation_batches_fuzzed(rows, bad, huge, eps):
    e = RelationEngine(epsilon=eps)
    e.load(R={"src": [0, 1], "dst": [1, 2]}, S={"src": [1, 2], "dst": [2, 0]},
           T={"src": [2, 0], "dst": [0, 1], "mult": [3, -1]})
    oracle = RelationsOracle()
    for r, a, b, m in [("R", 0, 1, 1), ("R", 1, 2, 1), ("S", 1, 2, 1), ("S", 2, 0, 1),
                       ("T", 2, 0, 3), ("T", 0, 1, -1)]:
        oracle.add(r, a, b, m)
    cols = {"rel": [r[0] for r in rows], "src": [r[1] for r in rows],
            "dst": [r[2] for r in rows], "mult": [r[3] for r in rows]}
    before = state(e)
    if bad is not None and rows:
        col, val = bad
        cols[col][len(rows) // 2] = val
        with pytest.raises(InputError) as ei:
            e.apply(cols)
        assert ei.value.column == col and ei.value.row in (len(rows) // 2, None)
        assert state(e) == before
        return
    if huge and rows:  # multiplicities that could overflow int64: refused, nothing changes
        cols["mult"][0] = 2**62
        with pytest.raises(IntegerOverflowError):
            e.apply(cols)
        assert state(e) == before
        return
    e.apply(cols)
    for r, a, b, m in rows:
        oracle.add(r, a, b, m)
    assert e.count() == oracle.count()
    for nm in "RST":
        a, b, m = e.relation(nm)
        assert dict(zip(zip(a.tolist(), b.tolist()), m.tolist())) == oracle.rels[nm]
    e.check_invariants()


def _good_table():
    return pa.table({"src": [1, 5], "dst": [5, 6], "sign": [1, 1]})


def _truncated_parquet(p: Path) -> None:
    pq.write_table(_good_table(), p)
    p.write_bytes(p.read_bytes()[:-20])


HOSTILE_FILES = {
    "empty.parquet": lambda p: p.write_bytes(b""),
    "trunc.parquet": _truncated_parquet,
    "garbage.parquet": lambda p: p.write_bytes(b"PAR1 this is not parquet PAR1"),
    "trunc.csv.gz": lambda p: p.write_bytes(gzip.compress(b"src,dst,sign\n1,5,1\n" * 50)[:-15]),
    "wrongcols.csv": lambda p: p.write_text("src,x,sign\n1,5,1\n"),
    "nosign.parquet": lambda p: pq.write_table(pa.table({"src": [1], "dst": [5]}), p),
    "floats.csv": lambda p: p.write_text("src,dst,sign\n1,5.5,1\n"),
    "nan.csv": lambda p: p.write_text("src,dst,sign\n1,5,nan\n"),
    "null.csv": lambda p: p.write_text("src,dst,sign\n1,,1\n"),
    "sign0.csv": lambda p: p.write_text("src,dst,sign\n1,5,0\n"),
    "huge.csv": lambda p: p.write_text(f"src,dst,sign\n1,{2**64},1\n"),
    "present.csv": lambda p: p.write_text("src,dst,sign\n0,1,1\n"),
    "absent.csv": lambda p: p.write_text("src,dst,sign\n0,4,1\n0,3,-1\n"),
    "dup.csv": lambda p: p.write_text("src,dst,sign\n5,6,1\n6,5,1\n"),
    "garbage.arrow": lambda p: p.write_bytes(b"ARROW1\x00\x00garbage"),
    "strings.csv": lambda p: p.write_text("src,dst,sign\na,b,1\n"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_files_through_apply(tmp_path, name):
    f = tmp_path / name
    HOSTILE_FILES[name](f)
    g = base_engine(False, "error", "1/2")
    before = state(g)
    with pytest.raises(InputError) as ei:
        g.apply(f)
    assert str(ei.value)
    assert state(g) == before


def test_empty_and_header_only_files_are_no_ops(tmp_path):
    g = base_engine(False, "error", "1/2")
    before = state(g)
    for name, text in [("e.csv", ""), ("h.csv", "src,dst,sign\n")]:
        (tmp_path / name).write_text(text)
        try:
            rep = g.apply(tmp_path / name)
        except InputError:
            continue
        assert rep.updates == 0
    pq.write_table(pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64()),
                             "sign": pa.array([], pa.int64())}), tmp_path / "e.parquet")
    assert g.apply(tmp_path / "e.parquet").updates == 0
    assert state(g)[:4] == before[:4] and state(g)[6:] == before[6:]


# ------------------------------------------------------------------ CLI
def _replay_dir(tmp: Path, hostile: str | None, base_hostile: str | None = None):
    base = tmp / ("base-" + (base_hostile or "ok.txt"))
    if base_hostile:
        HOSTILE_FILES[base_hostile](base)
    else:
        base.write_text("".join(f"{a} {b}\n" for a, b in BASE))
    bdir = tmp / "batches"
    bdir.mkdir(exist_ok=True)
    pq.write_table(pa.table({"src": [0], "dst": [5], "sign": [1]}), bdir / "a0.parquet")
    if hostile:
        HOSTILE_FILES[hostile](bdir / ("a1-" + hostile))
    pq.write_table(pa.table({"src": [1], "dst": [5], "sign": [1]}), bdir / "a2.parquet")
    return base, bdir


@settings(max_examples=40)
@given(name=st.sampled_from(sorted(set(HOSTILE_FILES) - {"dup.csv"})),
       where=st.sampled_from(["batch", "base"]), snap=st.booleans())
def test_cli_hostile_files_exit_2(name, where, snap):
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if where == "base" and name in ("present.csv", "absent.csv", "sign0.csv", "nan.csv",
                                        "strings.csv", "nosign.parquet"):
            return  # valid as a base graph (edge lists ignore a third column / string keys)
        base, bdir = _replay_dir(tmp, name if where == "batch" else None,
                                 name if where == "base" else None)
        argv = ["replay", "--base", str(base), "--batches", str(bdir), "--json"]
        if snap:
            argv += ["--snapshot-dir", str(tmp / "snaps")]
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        assert code == 2, err.getvalue()
        assert name in err.getvalue() and "Traceback" not in err.getvalue()
        lines = [json.loads(x) for x in out.getvalue().splitlines()]
        if where == "batch":  # the base and the good batch before were applied and reported
            assert [x["kind"] for x in lines] == ["base", "batch"] and lines[1]["batch"] == 0
            if snap:  # and the snapshot series stops at the last good batch
                from gpu_ivm.snapshot import find_latest

                assert find_latest(tmp / "snaps").name == "snapshot-000001"


@pytest.mark.parametrize("name", ["trunc.parquet", "trunc.csv.gz", "nan.csv", "present.csv"])
def test_cli_subprocess_no_traceback(tmp_path, name):
    base, bdir = _replay_dir(tmp_path, name)
    r = subprocess.run([sys.executable, "-m", "gpu_ivm", "replay", "--base", str(base),
                        "--batches", str(bdir), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and name in r.stderr
    assert r.stderr.startswith("gpu-ivm: error:")
