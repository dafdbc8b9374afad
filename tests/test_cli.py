"""The command line: count, replay (JSON lines, exit codes), demo, python -m gpu_ivm."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from itertools import combinations

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from oracle import GraphOracle, RelationsOracle
from streams import graph_batches

from gpu_ivm.cli import build_parser, main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_count_json(data_dir, capsys):
    code, out, _ = run(["count", str(data_dir / "ca-GrQc.txt.gz")], capsys)
    d = json.loads(out)
    assert code == 0
    assert (d["triangles"], d["vertices"], d["edges"]) == (48_260, 5_242, 14_484)
    assert d["seconds"] >= 0


@pytest.fixture
def replay_dir(tmp_path):
    rng = np.random.default_rng(4)
    oracle = GraphOracle(False)
    base_s = rng.integers(0, 50, 200)
    base_d = rng.integers(0, 50, 200)
    base = tmp_path / "base.txt"
    base.write_text("# a base graph\n" + "".join(f"{a}\t{b}\n" for a, b in zip(base_s, base_d)))
    for a, b in zip(base_s.tolist(), base_d.tolist()):
        if a != b:
            oracle.apply(a, b, 1)
    bdir = tmp_path / "batches"
    bdir.mkdir()
    counts = []
    for i, batch in enumerate(graph_batches(oracle, rng, n_batches=6, nv=60, max_batch=40,
                                            hub_p=0.3)):
        t = pa.table(batch)
        if i % 3 == 0:
            pq.write_table(t, bdir / f"b{i:02d}.parquet")
        elif i % 3 == 1:
            pacsv.write_csv(t, bdir / f"b{i:02d}.csv")
        else:
            with pa.OSFile(str(bdir / f"b{i:02d}.arrow"), "wb") as f, \
                    pa.ipc.new_file(f, t.schema) as w:
                w.write_table(t)
        counts.append(oracle.count())
    return base, bdir, counts


def test_replay_json_lines(replay_dir, capsys):
    base, bdir, counts = replay_dir
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json",
                          "--check"], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["kind"] == "base" and "batch" not in lines[0]
    assert lines[0]["file"] == str(base) and lines[0]["path"] == "load"
    rows = lines[1:]
    assert [r["kind"] for r in rows] == ["batch"] * 6
    assert [r["batch"] for r in rows] == list(range(6))
    assert [r["triangles"] for r in rows] == counts
    files = sorted(p for p in bdir.iterdir())
    assert [r["file"] for r in rows] == [str(p) for p in files]
    for r in rows:
        assert {"updates", "seconds", "path"} <= set(r)
    for r in lines:  # integers stay integers: only the timings are floats
        nums = {k for k, v in r.items() if isinstance(v, (int, float))}
        assert nums and all(isinstance(r[k], int) for k in nums if k != "seconds"), r
    # --check reports on stderr, leaving stdout pure JSON lines: one count compared, the
    # final one, which the oracle confirms
    assert err.strip().splitlines()[-1].startswith("check: ok, 1 count compared")
    assert f"{counts[-1]:,}" in err


@pytest.mark.parametrize("eps", ["0", "1/3", "1"])
def test_replay_epsilon_and_text_mode(replay_dir, capsys, eps):
    base, bdir, counts = replay_dir
    code, out, _ = run(["replay", "--base", str(base), "--batches", str(bdir), "--epsilon", eps],
                       capsys)
    assert code == 0
    assert f"final count {counts[-1]:,}" in out


def test_replay_bad_batch_exit_2(replay_dir, capsys):
    base, bdir, _ = replay_dir
    pq.write_table(pa.table({"src": [1], "dst": [2]}), bdir / "b99.parquet")
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json"],
                         capsys)
    assert code == 2
    assert "b99.parquet" in err and "sign" in err
    assert len(out.splitlines()) == 1 + 6  # the good batches were applied and reported


def test_replay_missing_inputs_exit_2(tmp_path, capsys):
    code, _, err = run(["replay", "--base", str(tmp_path / "nope.txt"), "--batches",
                        str(tmp_path)], capsys)
    assert code == 2 and "error" in err


def test_python_dash_m_and_demo(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpu_ivm", "demo", "--scale", "10", "--batches",
                        "3", "--batch-size", "100"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout.splitlines()[-1]


# ---------------------------------------------------------------- replay --emit / --out


RESULTS = ("vertex_counts", "edge_counts", "triangles")
EMIT_ALL = ["--emit", "vertex-counts", "edge-counts", "triangles"]


def graph_results(edges) -> dict:
    """Oracle of the three results of an undirected simple graph, as dicts key -> value:
    networkx.triangles per vertex, common neighbours per edge (smaller key first), and the
    triangles by brute force over all vertex triples (value 1)."""
    G = nx.Graph()
    G.add_edges_from(edges)
    vc = {v: c for v, c in nx.triangles(G).items() if c}
    ec = {}
    for u, v in G.edges():
        c = len(set(G[u]) & set(G[v]))
        if c:
            ec[tuple(sorted((u, v)))] = c
    tri = {t: 1 for t in combinations(sorted(G), 3)
           if G.has_edge(t[0], t[1]) and G.has_edge(t[1], t[2]) and G.has_edge(t[0], t[2])}
    return {"vertex_counts": vc, "edge_counts": ec, "triangles": tri}


def as_dict(name: str, rows: list[dict], value: str) -> dict:
    key = {"vertex_counts": lambda r: r["vertex"],
           "edge_counts": lambda r: (r["src"], r["dst"]),
           "triangles": lambda r: (r["a"], r["b"], r["c"])}[name]
    out = {key(r): r[value] if isinstance(value, str) else tuple(r[v] for v in value)
           for r in rows}
    assert len(out) == len(rows)  # each key once
    return out


def diff(before: dict, after: dict) -> dict:
    return {k: (before.get(k, 0), after.get(k, 0)) for k in before.keys() | after.keys()
            if before.get(k, 0) != after.get(k, 0)}


COLUMNS = {"vertex_counts": ["vertex", "triangles"], "edge_counts": ["src", "dst", "triangles"],
           "triangles": ["a", "b", "c"]}


def check_final(out, state: dict, key_type) -> None:
    for name in RESULTS:
        t = pq.read_table(out / f"{name}.parquet")
        assert t.column_names == COLUMNS[name]
        for col in t.column_names:
            want = pa.int64() if col == "triangles" else key_type
            assert t.schema.field(col).type == want, (name, col)
        value = "triangles" if name != "triangles" else None
        got = as_dict(name, t.to_pylist(), value) if value else \
            {k: 1 for k in as_dict(name, t.to_pylist(), ("a",))}
        assert got == state[name], name


def check_changes(out, states: list[dict], key_type) -> None:
    """states[0] before the first batch, states[i + 1] after batch i."""
    for name in RESULTS:
        files = sorted(p.name for p in (out / "changes" / name).iterdir())
        assert files == [f"batch-{i:06d}.parquet" for i in range(len(states) - 1)]
        for i in range(len(states) - 1):
            t = pq.read_table(out / "changes" / name / f"batch-{i:06d}.parquet")
            keys = COLUMNS[name] if name == "triangles" else COLUMNS[name][:-1]
            assert t.column_names == keys + ["old", "new"]
            assert t.schema.field(t.column_names[0]).type == key_type
            got = as_dict(name, t.to_pylist(), ("old", "new"))
            assert got == diff(states[i][name], states[i + 1][name]), (name, i)


@pytest.fixture(params=["int", "str"])
def emit_dir(request, tmp_path):
    """A base graph and 3 batch files (Parquet, CSV, Arrow IPC); with "str" the keys are
    strings like "n7" (their order differs from the numbers'). Returns (base, batch folder,
    oracle states before and after each batch, Arrow key type)."""
    strings = request.param == "str"

    def key(v):
        return f"n{v}" if strings else v

    rng = np.random.default_rng(11)
    oracle = GraphOracle(False)
    bs, bd = rng.integers(0, 22, 90), rng.integers(0, 22, 90)
    for a, b in zip(bs.tolist(), bd.tolist()):
        if a != b:
            oracle.apply(a, b, 1)
    base = tmp_path / "base.csv"
    pacsv.write_csv(pa.table({"src": [key(v) for v in bs.tolist()],
                              "dst": [key(v) for v in bd.tolist()]}), base)

    def state():
        return graph_results([(key(a), key(b)) for a, b in oracle.edges])

    states = [state()]
    bdir = tmp_path / "batches"
    bdir.mkdir()
    for i, batch in enumerate(graph_batches(oracle, rng, n_batches=3, nv=24, max_batch=30,
                                            hub_p=0.3)):
        t = pa.table({"src": [key(v) for v in batch["src"].tolist()],
                      "dst": [key(v) for v in batch["dst"].tolist()], "sign": batch["sign"]})
        if i == 0:
            pq.write_table(t, bdir / f"b{i:02d}.parquet")
        elif i == 1:
            pacsv.write_csv(t, bdir / f"b{i:02d}.csv")
        else:
            with pa.OSFile(str(bdir / f"b{i:02d}.arrow"), "wb") as f, \
                    pa.ipc.new_file(f, t.schema) as w:
                w.write_table(t)
        states.append(state())
    assert all(s["triangles"] for s in states)  # the workload has triangles throughout
    assert all(diff(x["triangles"], y["triangles"]) for x, y in zip(states, states[1:]))
    return base, bdir, states, pa.string() if strings else pa.int64()


def test_replay_emit_results_and_changes(emit_dir, tmp_path, capsys):
    base, bdir, states, key_type = emit_dir
    out = tmp_path / "out"
    common = ["replay", "--base", str(base), "--batches", str(bdir), "--json", "--check"]
    code, plain, err = run(common, capsys)
    assert code == 0, err
    code, emitted, err = run(common + EMIT_ALL + ["--out", str(out), "--emit-changes"], capsys)
    assert code == 0, err
    strip = [{k: v for k, v in json.loads(x).items() if k != "seconds"}
             for x in emitted.splitlines()]
    assert strip == [{k: v for k, v in json.loads(x).items() if k != "seconds"}
                     for x in plain.splitlines()]  # the JSON lines do not change
    assert [d["triangles"] for d in strip[1:]] == \
        [sum(s["triangles"].values()) for s in states[1:]]
    check_final(out, states[-1], key_type)
    check_changes(out, states, key_type)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("source", ["stores", "views"])
def test_replay_emit_results_from(emit_dir, tmp_path, capsys, source):
    """--results-from picks where the results come from (the count's stores or paper 001's
    views): the same results and change files either way."""
    base, bdir, states, key_type = emit_dir
    out = tmp_path / "out"
    code, _, err = run(["replay", "--base", str(base), "--batches", str(bdir)] + EMIT_ALL
                       + ["--out", str(out), "--results-from", source, "--emit-changes"], capsys)
    assert code == 0, err
    check_final(out, states[-1], key_type)
    check_changes(out, states, key_type)


def test_replay_emit_some_results_repeatable_flag(emit_dir, tmp_path, capsys):
    base, bdir, states, key_type = emit_dir
    out = tmp_path / "out"
    code, text, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--emit",
                           "triangles", "--out", str(out), "--emit", "vertex-counts"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["triangles.parquet",
                                                      "vertex_counts.parquet"]
    assert f"triangles: {len(states[-1]['triangles'])} rows" in text
    t = pq.read_table(out / "vertex_counts.parquet")
    assert as_dict("vertex_counts", t.to_pylist(), "triangles") == states[-1]["vertex_counts"]


def test_replay_emit_changes_with_resume(emit_dir, tmp_path, capsys):
    """A run that died after batch 1's snapshot (batch 2's change file half-written, a
    temporary left behind) resumes: the change files of batches 0 and 1 stay untouched,
    batch 2's is written again, the final results reflect the whole replay."""
    base, bdir, states, key_type = emit_dir
    out, snaps = tmp_path / "out", tmp_path / "snaps"
    common = ["replay", "--base", str(base), "--batches", str(bdir), "--json"] + EMIT_ALL + \
        ["--out", str(out), "--emit-changes"]
    code, _, err = run(common + ["--snapshot-dir", str(snaps)], capsys)
    assert code == 0, err
    # the crash: the newest snapshot and the final results are gone, batch 2's file is junk
    shutil.rmtree(snaps / "snapshot-000003")
    for name in RESULTS:
        (out / f"{name}.parquet").unlink()
        (out / "changes" / name / "batch-000002.parquet").write_bytes(b"junk")
        (out / "changes" / name / ".batch-000003.parquet.x1.tmp").write_bytes(b"half")
    kept = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns)
            for name in RESULTS for p in (out / "changes" / name).glob("batch-00000[01]*")}
    assert len(kept) == 6
    code, text, err = run(common + ["--resume", str(snaps), "--snapshot-dir", str(snaps)],
                          capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines[0]["kind"] == "resume" and lines[0]["applied"] == 2
    assert "batch" not in lines[0]
    assert [d["batch"] for d in lines[1:]] == [2]
    assert {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in kept} == kept
    check_final(out, states[-1], key_type)
    check_changes(out, states, key_type)  # exactly batch-000000..2, none junk or temporary
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    # resuming the finished run applies nothing, rewrites no change file, writes the results
    kept = {p: os.stat(p).st_mtime_ns for p in out.rglob("batch-*.parquet")}
    (out / "triangles.parquet").unlink()
    code, text, err = run(common + ["--resume", str(snaps)], capsys)
    assert code == 0, err
    assert [json.loads(x)["kind"] for x in text.splitlines()] == ["resume"]
    assert {p: os.stat(p).st_mtime_ns for p in out.rglob("batch-*.parquet")} == kept
    check_final(out, states[-1], key_type)
    # other --emit options than the snapshot's, or a fresh run over an existing change feed
    code, _, err = run(common[:-1] + ["--resume", str(snaps)], capsys)
    assert code == 2 and "--emit-changes" in err
    code, _, err = run(common, capsys)
    assert code == 2 and "already holds change files" in err


def test_replay_emit_batch_without_net_change(tmp_path, capsys):
    """A batch whose rows cancel out writes empty change files (not the previous batch's)."""
    base = tmp_path / "base.csv"
    pacsv.write_csv(pa.table({"src": [1, 2, 3], "dst": [2, 3, 4]}), base)
    bdir = tmp_path / "batches"
    bdir.mkdir()
    pq.write_table(pa.table({"src": [3], "dst": [1], "sign": [1]}), bdir / "b0.parquet")
    pq.write_table(pa.table({"src": [9, 9], "dst": [1, 1], "sign": [1, -1]}),
                   bdir / "b1.parquet")
    out = tmp_path / "out"
    code, _, err = run(["replay", "--base", str(base), "--batches", str(bdir)] + EMIT_ALL +
                       ["--out", str(out), "--emit-changes"], capsys)
    assert code == 0, err
    for name in RESULTS:
        assert pq.read_table(out / "changes" / name / "batch-000000.parquet").num_rows > 0
        t = pq.read_table(out / "changes" / name / "batch-000001.parquet")
        assert t.num_rows == 0 and t.column_names[-2:] == ["old", "new"]
    assert pq.read_table(out / "triangles.parquet").to_pydict() == {"a": [1], "b": [2],
                                                                    "c": [3]}


def test_replay_relations_emit(tmp_path, capsys):
    """--relations: base and batches are rel, src, dst, mult tables; the results carry the
    three-relation values (Δ1(a), Δ2(a, b), Δ3(a, b, c) with mult) and their changes."""
    rng = np.random.default_rng(5)
    o = RelationsOracle()

    def table(n, deletes):
        rows = []
        for _ in range(n):
            r = "RST"[int(rng.integers(3))]
            if deletes and o.rels[r] and rng.random() < 0.4:
                (a, b), m = list(o.rels[r].items())[int(rng.integers(len(o.rels[r])))]
                d = -int(rng.integers(1, m + 1))
            else:
                a, b, d = int(rng.integers(8)), int(rng.integers(8)), int(rng.integers(1, 3))
            o.add(r, a, b, d)
            rows.append((r, a, b, d))
        return pa.table({k: [x[i] for x in rows] for i, k in enumerate(["rel", "src", "dst",
                                                                          "mult"])})

    def state():
        R, S, T = (o.rels[n] for n in "RST")
        tri = {(a, b, c): r * S.get((b, c), 0) * T.get((c, a), 0)
               for (a, b), r in R.items() for c in range(8)}
        tri = {k: v for k, v in tri.items() if v}
        vc, ec = {}, {}
        for (a, b, _), m in tri.items():
            vc[a] = vc.get(a, 0) + m
            ec[(a, b)] = ec.get((a, b), 0) + m
        return {"vertex_counts": vc, "edge_counts": ec, "triangles": tri}

    base = tmp_path / "base.parquet"
    pq.write_table(table(60, False), base)
    states = [state()]
    bdir = tmp_path / "batches"
    bdir.mkdir()
    for i in range(3):
        pacsv.write_csv(table(15, True), bdir / f"b{i}.csv")
        states.append(state())
    assert all(diff(x[n], y[n]) for x, y in zip(states, states[1:]) for n in RESULTS)
    out = tmp_path / "out"
    code, text, err = run(["replay", "--relations", "--base", str(base), "--batches", str(bdir),
                           "--json", "--check"] + EMIT_ALL + ["--out", str(out),
                                                              "--emit-changes"], capsys)
    assert code == 0, err
    assert [json.loads(x)["triangles"] for x in text.splitlines()] == \
        [sum(s["triangles"].values()) for s in states]
    for name, value in (("vertex_counts", "triangles"), ("edge_counts", "triangles"),
                        ("triangles", "mult")):
        t = pq.read_table(out / f"{name}.parquet")
        assert t.column_names == COLUMNS[name] + (["mult"] if name == "triangles" else [])
        assert as_dict(name, t.to_pylist(), value) == states[-1][name]
        for i in range(3):
            t = pq.read_table(out / "changes" / name / f"batch-{i:06d}.parquet")
            assert as_dict(name, t.to_pylist(), ("old", "new")) == \
                diff(states[i][name], states[i + 1][name])


@pytest.mark.parametrize("extra, message", [
    (["--emit", "triangles"], "--emit needs --out"),
    (["--out", "OUT"], "--out needs --emit"),
    (["--emit-changes"], "--emit-changes needs --emit"),
    (["--emit", "triangle", "--out", "OUT"], "invalid choice"),
    (["--relations", "--directed"], "--relations"),
    (["--relations", "--results-from", "views"], "--results-from is for graphs"),
    (["--results-from", "view"], "invalid choice"),
])
def test_replay_emit_argument_errors(tmp_path, capsys, extra, message):
    extra = [str(tmp_path / "o") if x == "OUT" else x for x in extra]
    with pytest.raises(SystemExit) as e:
        main(["replay", "--base", str(tmp_path / "b.txt"), "--batches", str(tmp_path)] + extra)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "usage: gpu-ivm replay" in err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- first contact (issue 13)


def walk_parsers(parser, name="gpu-ivm"):
    """(name, parser) for the top-level parser and every subcommand's."""
    yield name, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub, sp in a.choices.items():
                yield from walk_parsers(sp, f"{name} {sub}")


def test_every_option_has_help_and_no_rst_markup():
    parsers = list(walk_parsers(build_parser()))
    assert {n for n, _ in parsers} == {"gpu-ivm", "gpu-ivm count", "gpu-ivm replay",
                                       "gpu-ivm demo", "gpu-ivm spark-replay", "gpu-ivm query"}
    for name, parser in parsers:
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                helps = [c.help for c in a._choices_actions]
                assert len(helps) == len(a.choices) and all(helps), name
                continue
            assert a.help and a.help.strip(), (name, a.option_strings or a.dest)
        text = parser.format_help()
        assert "``" not in text, name


def test_version_and_no_arguments(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    out, _ = capsys.readouterr()
    assert e.value.code == 0 and out == f"gpu-ivm {version('gpu_ivm')}\n"
    code, out, err = run([], capsys)
    assert code == 2 and out == ""
    assert err.startswith("usage: gpu-ivm") and "--version" in err
    for sub in ("count", "replay", "demo", "spark-replay"):
        assert sub in err


def run_usage(argv, capsys):
    """Like run, but a usage error (argparse's SystemExit) gives its exit code too."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "g.txt").write_text("1 2\n2 3\n3 1\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "b1.csv").write_text("src,dst,sign\n1,4,1\n")
    (tmp_path / "dup").mkdir()
    (tmp_path / "dup" / "b1.csv").write_text("src,dst,sign\n1,2,1\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


MALFORMED = [
    (["count"], "required: graph"),
    (["count", "T/nope.txt"], "does not exist"),
    (["count", "T/b"], "directory"),
    (["replay"], "required: --base, --batches"),
    (["replay", "--base", "T/g.txt"], "required: --batches"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b/b1.csv"], "not a directory"),
    (["replay", "--base", "T/g.txt", "--batches", "T/nope"], "does not exist"),
    (["replay", "--base", "T/g.txt", "--batches", "T/empty"], "holds no batch files"),
    (["replay", "--base", "T/nope", "--batches", "T/b"], "does not exist"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--epsilon", "2"],
     "argument --epsilon: '2' is not a fraction in [0, 1]"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--epsilon", "abc"],
     "argument --epsilon: 'abc'"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--snapshot-every", "-1"],
     "argument --snapshot-every: '-1' is not a whole number of at least 1"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--snapshot-every", "1.5"],
     "argument --snapshot-every"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--backend", "gpu"],
     "argument --backend: invalid choice"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--resume", "T/g.txt"],
     "(option --resume)"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--snapshot-dir", "T/g.txt"],
     "(option --snapshot-dir)"),
    (["replay", "--base", "T/g.txt", "--batches", "T/b", "--emit", "triangles", "--out",
      "T/g.txt"], "(option --out)"),
    (["replay", "--base", "T/g.txt", "--batches", "T/dup"], "pass --on-conflict ignore"),
    (["demo", "--scale", "0"], "argument --scale"),
    (["demo", "--batch-size", "x"], "argument --batch-size"),
    (["demo", "--epsilon", "3"], "argument --epsilon"),
    (["spark-replay", "--base", "T/g.txt", "--batches", "T/b", "--shards", "-1"],
     "argument --shards"),
    (["spark-replay", "--base", "T/g.txt", "--batches", "T/b", "--epsilon", "1.5"],
     "argument --epsilon"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize("argv, message", MALFORMED)
def test_malformed_invocations_exit_2_with_one_line(tiny, capsys, argv, message):
    argv = [a.replace("T/", f"{tiny}/") for a in argv]
    code, out, err = run_usage(argv, capsys)
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("gpu-ivm") and "error: " in last and message in last, err
    assert "column 'resume'" not in err and "column 'out'" not in err
    if "--batches" in argv and "dup" not in argv[argv.index("--batches") + 1]:
        assert out == ""  # refused before any work
    assert not (tiny / "g.txt").is_dir()


def test_count_directed_reports_triangles(tmp_path, capsys):
    rng = np.random.default_rng(8)
    edges = {(int(a), int(b)) for a, b in rng.integers(0, 14, (90, 2)) if a != b}
    f = tmp_path / "d.txt"
    f.write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    # brute force: ordered triples a -> b -> c -> a of distinct vertices, each cycle 3 times
    nodes = sorted({v for e in edges for v in e})
    cycles = sum((a, b) in edges and (b, c) in edges and (c, a) in edges
                 for a in nodes for b in nodes for c in nodes if len({a, b, c}) == 3) // 3
    assert cycles > 0
    code, out, _ = run(["count", "--directed", str(f)], capsys)
    d = json.loads(out)
    assert code == 0 and d["kind"] == "count" and d["directed"] is True
    assert d["triangles"] == d["directed_3_cycles"] == cycles
    assert d["edges"] == len(edges) and d["file"] == str(f)
    code, out, _ = run(["count", str(f)], capsys)
    G = nx.Graph(list(edges))
    d = json.loads(out)
    assert d["kind"] == "count" and d["directed"] is False and "directed_3_cycles" not in d
    assert d["triangles"] == sum(nx.triangles(G).values()) // 3


def test_slow_base_load_announced_on_stderr(replay_dir, capsys, monkeypatch):
    """With GPU_IVM_PROGRESS_AFTER=0 every base load counts as slow: stderr names it and the
    edges loaded (the distinct non-loop pairs of the file); stdout stays pure JSON."""
    base, bdir, counts = replay_dir
    monkeypatch.setenv("GPU_IVM_PROGRESS_AFTER", "0")
    pairs = {tuple(sorted(map(int, line.split()))) for line in base.read_text().splitlines()
             if not line.startswith("#")}
    n_edges = len({p for p in pairs if p[0] != p[1]})
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--json"],
                         capsys)
    assert code == 0, err
    assert f"gpu-ivm: loading base graph {base} ..." in err
    assert f"gpu-ivm: loaded {n_edges:,} edges in " in err
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["kind"] for x in lines] == ["base"] + ["batch"] * len(counts)
    assert lines[0]["edges"] == n_edges
    monkeypatch.setenv("GPU_IVM_PROGRESS_AFTER", "600")
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir)], capsys)
    assert code == 0 and "loading base" not in err


def test_check_text_mode_reports_on_stderr(replay_dir, capsys):
    base, bdir, counts = replay_dir
    code, out, err = run(["replay", "--base", str(base), "--batches", str(bdir), "--check"],
                         capsys)
    assert code == 0
    assert f"check: ok, 1 count compared (the final triangles count {counts[-1]:,} " in err
    assert "check" not in out


def test_input_error_names_options_and_columns():
    from gpu_ivm.errors import InputError

    assert str(InputError("bad", option="--resume")) == "bad (option --resume)"
    assert str(InputError("bad", column="sign", row=2)) == "bad (column 'sign', row 2)"
    e = InputError("bad", option="--out")
    assert e.option == "--out" and e.column is None


def test_sliding_window_example_reports_each_micro_batch():
    """examples/streaming_sliding_window.py prints one stderr line per micro-batch (its
    docstring example, run here: a DriverEngine without Spark, count checked by hand)."""
    import doctest
    import importlib.util
    from pathlib import Path

    pytest.importorskip("pyspark")
    path = Path(__file__).resolve().parents[1] / "examples" / "streaming_sliding_window.py"
    spec = importlib.util.spec_from_file_location("streaming_sliding_window", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = doctest.testmod(mod)
    assert res.attempted >= 4 and res.failed == 0


@pytest.mark.parametrize("strings", [False, True])
def test_replay_insert_only_emit_results_changes_and_resume(tmp_path, capsys, strings):
    """--mode insert-only with --emit and --emit-changes: the final results and each batch's
    changes equal the oracle's (networkx, brute force), every triangle carries the batch that
    closed it (-1: the base), and a run resumed from its snapshots ends with the same files."""
    def key(v):
        return f"n{v}" if strings else v

    rng = np.random.default_rng(4)
    edges: set = set()

    def fresh(n, nv):
        rows = []
        while len(rows) < n:
            a, b = (int(x) for x in rng.integers(0, nv, 2))
            e = (min(a, b), max(a, b))
            if a != b and e not in edges:
                edges.add(e)
                rows.append((a, b))
        return rows

    base = tmp_path / "base.csv"
    rows = fresh(45, 16)
    pacsv.write_csv(pa.table({"src": [key(a) for a, _ in rows],
                              "dst": [key(b) for _, b in rows]}), base)
    states = [graph_results([(key(a), key(b)) for a, b in edges])]
    bdir = tmp_path / "batches"
    bdir.mkdir()
    for i in range(3):
        rows = fresh(14, 22)
        pacsv.write_csv(pa.table({"src": [key(a) for a, _ in rows],
                                  "dst": [key(b) for _, b in rows], "sign": [1] * 14}),
                        bdir / f"b{i:02d}.csv")
        states.append(graph_results([(key(a), key(b)) for a, b in edges]))
    assert all(diff(x["triangles"], y["triangles"]) for x, y in zip(states, states[1:]))
    out, snaps = tmp_path / "out", tmp_path / "snaps"
    common = ["replay", "--base", str(base), "--batches", str(bdir), "--mode", "insert-only",
              "--json", "--check"] + EMIT_ALL + ["--out", str(out), "--emit-changes",
                                                  "--snapshot-dir", str(snaps)]
    born = {t: next(i - 1 for i, s in enumerate(states) if t in s["triangles"])
            for t in states[-1]["triangles"]}

    def check():
        for name in ("vertex_counts", "edge_counts"):
            t = pq.read_table(out / f"{name}.parquet")
            assert t.column_names == COLUMNS[name]
            assert as_dict(name, t.to_pylist(), "triangles") == states[-1][name]
        t = pq.read_table(out / "triangles.parquet")
        assert t.column_names == ["a", "b", "c", "birth"]
        assert as_dict("triangles", t.to_pylist(), "birth") == born
        for i in range(3):
            for name in RESULTS:
                t = pq.read_table(out / "changes" / name / f"batch-{i:06d}.parquet")
                keys = COLUMNS[name] if name == "triangles" else COLUMNS[name][:-1]
                extra = ["birth"] if name == "triangles" else []
                assert t.column_names == keys + ["old", "new"] + extra
                got = as_dict(name, t.to_pylist(), ("old", "new"))
                assert got == diff(states[i][name], states[i + 1][name]), (name, i)
                if extra:
                    assert set(t.column("birth").to_pylist()) <= {i}

    code, text, err = run(common, capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in text.splitlines()]
    assert [d["triangles"] for d in lines[1:]] == \
        [len(s["triangles"]) for s in states[1:]]
    check()
    shutil.rmtree(snaps / "snapshot-000003")  # resume from after batch 1
    for name in RESULTS:
        (out / f"{name}.parquet").unlink()
        (out / "changes" / name / "batch-000002.parquet").unlink()
    code, text, err = run(common + ["--resume", str(snaps)], capsys)
    assert code == 0, err
    assert json.loads(text.splitlines()[0])["applied"] == 2
    check()
