"""Issue 13, first contact: every input is read right or refused.

Oracles: pandas / pyarrow reads under explicit options, networkx triangle counts, Python's
own sort of the parsed batch numbers.
"""

from __future__ import annotations

import bz2
import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_ivm
from gpu_ivm.errors import InputError, InputNote
from gpu_ivm.graph_engine import GraphEngine
from gpu_ivm.io import (
    BATCH_EXTENSIONS,
    list_batch_files,
    read_edges,
    read_graph_updates,
    read_relation,
)

TRIANGLE = "1,2\n2,3\n3,1\n"


def nx_triangles(src, dst) -> int:
    g = nx.Graph()
    g.add_edges_from((a, b) for a, b in zip(src, dst) if a != b)
    return sum(nx.triangles(g).values()) // 3


def pandas_csv(path: Path, **kw) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, **kw)


# --------------------------------------------------------------------------------------
# Bug 1: a CSV without a header lost its first row
# --------------------------------------------------------------------------------------


def test_headerless_csv_keeps_its_first_row(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(TRIANGLE)
    edges = read_edges(path)
    want = pandas_csv(path, header=None).astype(np.int64)
    assert edges.src.tolist() == want[0].tolist()
    assert edges.dst.tolist() == want[1].tolist()
    assert gpu_ivm.count_triangles(path) == nx_triangles(want[0], want[1]) == 1


def test_headerless_csv_batch_keeps_its_first_row(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("1,2,1\n2,3,1\n3,1,-1\n")
    upd = read_graph_updates(path)
    want = pandas_csv(path, header=None).astype(np.int64)
    assert upd.src.tolist() == want[0].tolist() and upd.sign.tolist() == want[2].tolist()


def test_cli_count_headerless_csv(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(TRIANGLE)
    out = subprocess.run([sys.executable, "-m", "gpu_ivm", "count", str(path)],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert (got["edges"], got["triangles"]) == (3, nx_triangles([1, 2, 3], [2, 3, 1]))


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ("src,dst\n1,2\n", True),  # names over integers
        ("a,b\n1,2\n2,3\n", True),  # non-integers over integers
        ("source,target\nalice,bob\n", True),  # recognised names over string ids
        ("From,To,Weight\nalice,bob,0.5\n", True),
        ("1,2\n", False),  # a single integer row is data
        ("7,8\n1,2\n", False),
    ],
)
def test_header_rule(tmp_path: Path, text: str, header: bool) -> None:
    path = tmp_path / "h.csv"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputNote)
        edges = read_edges(path)
    want = pandas_csv(path, header=0 if header else None)
    assert edges.src.astype(str).tolist() == want.iloc[:, 0].tolist()
    assert edges.dst.astype(str).tolist() == want.iloc[:, 1].tolist()


@pytest.mark.parametrize("text", ["alice,bob\nbob,carol\n", "src,2\n1,2\n3,4\n"])
def test_unclear_first_row_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "u.csv"
    path.write_text(text)
    with pytest.raises(InputError, match="header=True or header=False") as excinfo:
        read_edges(path)
    assert "--header or --no-header" in str(excinfo.value)
    assert "line 1 (1-based)" in str(excinfo.value)
    no_header = read_edges(path, header=False, ids="str")
    want = pandas_csv(path, header=None)
    assert no_header.src.tolist() == want[0].tolist()
    with_header = read_edges(path, header=True, ids="str", src=0, dst=1)
    assert with_header.dst.tolist() == pandas_csv(path, header=0).iloc[:, 1].tolist()


# --------------------------------------------------------------------------------------
# Bug 2: one bad token turned every id of a SNAP file into a string
# --------------------------------------------------------------------------------------


def test_bad_token_in_integer_text_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("# c\n1 2\n2 3\n3 x\n")
    with pytest.raises(InputError, match="ids='str'") as excinfo:
        read_edges(path)
    err = excinfo.value
    assert err.line == 4 and "line 4 (1-based)" in str(err) and "'x'" in str(err)
    assert err.column == "dst" and err.row == 2
    edges = read_edges(path, ids="str")
    want = pd.read_csv(path, sep=" ", header=None, comment="#", dtype=str)
    assert edges.src.tolist() == want[0].tolist() and edges.dst.tolist() == want[1].tolist()


def test_cli_bad_token_exit_2_and_string_ids(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 3\n3 x\n")
    run = [sys.executable, "-m", "gpu_ivm", "count", str(path)]
    bad = subprocess.run(run, capture_output=True, text=True)
    assert bad.returncode == 2 and "line 3 (1-based)" in bad.stderr
    assert "--string-ids" in bad.stderr
    ok = subprocess.run(run + ["--string-ids"], capture_output=True, text=True, check=True)
    assert json.loads(ok.stdout)["edges"] == 3


def test_all_string_ids_are_read_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("u v\nalice bob\nbob carol\n")
    edges = read_edges(path)
    want = pd.read_csv(path, sep=" ", dtype=str)
    assert edges.keys_are_strings and edges.src.tolist() == want["u"].tolist()


def test_integer_ids_stay_integers(tmp_path: Path) -> None:
    path = tmp_path / "i.txt"
    path.write_text("1 2\n2 3\n")
    edges = read_edges(path)
    assert edges.src.dtype == np.int64
    assert read_edges(path, ids="str").src.tolist() == ["1", "2"]
    names = tmp_path / "n.txt"
    names.write_text("alice bob\nbob carol\n")
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_edges(names, header=False, ids="int")
    assert excinfo.value.line == 1
    with pytest.raises(InputError, match="ids= must be one of"):
        read_edges(path, ids="strings")


# --------------------------------------------------------------------------------------
# Bug 3: batch files in natural order
# --------------------------------------------------------------------------------------


def test_batch_files_in_natural_order(tmp_path: Path) -> None:
    numbers = [10, 2, 1, 33, 3, 100, 20]
    for k in numbers:
        (tmp_path / f"batch-{k}.csv").write_text("src,dst,sign\n")
    got = [int(p.stem.split("-")[1]) for p in list_batch_files(tmp_path)]
    assert got == sorted(numbers)


# --------------------------------------------------------------------------------------
# Inputs people have
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "text"), [
    ("w.txt", "1 2 0.5\n2 3 0.25\n3 1 2.5\n"),
    ("w.csv", "u,v,weight\n1,2,0.5\n2,3,0.25\n3,1,2.5\n"),
    ("w2.csv", "1,2,0.5\n2,3,0.25\n3,1,2.5\n"),
])
def test_weighted_edge_lists(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.warns(InputNote, match="ignored extra column"):
        edges = read_edges(path)
    assert edges.time is None
    assert edges.src.tolist() == [1, 2, 3] and edges.dst.tolist() == [2, 3, 1]


def test_text_third_integer_column_is_time(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("1 2 100\n2 3 200\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputNote)
        edges = read_edges(path)
    assert edges.time.tolist() == [100, 200]


def test_column_options(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,a,b,flag\n0,1,2,1\n1,2,3,-1\n")
    upd = read_graph_updates(path, src="a", dst="b", sign="flag")
    want = pandas_csv(path).astype(np.int64)
    assert upd.src.tolist() == want["a"].tolist() and upd.sign.tolist() == want["flag"].tolist()
    text = tmp_path / "c.txt"
    text.write_text("x 1 2\ny 2 3\n")
    with pytest.warns(InputNote, match="position 0"):
        edges = read_edges(text, src=1, dst=2)
    assert edges.src.tolist() == [1, 2] and edges.dst.tolist() == [2, 3]
    with pytest.raises(InputError, match="missing column 'nope'") as excinfo:
        read_edges(path, src="nope")
    assert str(excinfo.value).count("'nope'") == 1  # named once
    assert excinfo.value.column == "nope"
    with pytest.raises(InputError, match="out of range"):
        read_edges(text, src=5)


def test_engine_and_static_entry_points_take_column_options(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("weight,from,to\n0.5,1,2\n0.5,2,3\n0.5,3,1\n0.5,3,4\n")
    want = nx_triangles([1, 2, 3, 3], [2, 3, 1, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputNote)
        assert gpu_ivm.count_triangles(path, src="from", dst="to") == want
        eng = GraphEngine()
        eng.load(path, src="from", dst="to")
        assert eng.count() == want
        batch = tmp_path / "b.csv"
        batch.write_text("s,a,b\n-1,1,2\n")
        eng.apply(batch, src="a", dst="b", sign="s")
    assert eng.count() == nx_triangles([2, 3, 3], [3, 1, 4])
    counts = gpu_ivm.vertex_triangle_counts(path, src=1, dst=2).to_pydict()
    g = nx.Graph([(1, 2), (2, 3), (3, 1), (3, 4)])
    assert dict(zip(counts["vertex"], counts["triangles"])) == nx.triangles(g)


def test_networkx_rows_and_frames() -> None:
    g = nx.karate_club_graph()
    edges = read_edges(g)
    assert sorted(zip(edges.src.tolist(), edges.dst.tolist())) == sorted(g.edges())
    assert gpu_ivm.count_triangles(g) == sum(nx.triangles(g).values()) // 3
    frame = nx.to_pandas_edgelist(g)
    with pytest.warns(InputNote, match="weight"):
        from_frame = read_edges(frame)
    assert from_frame.src.tolist() == frame["source"].tolist()
    rows = read_graph_updates([(1, 2, 1), (2, 3, -1)])
    assert rows.sign.tolist() == [1, -1] and rows.dst.tolist() == [2, 3]
    assert read_edges([("a", "b")]).src.tolist() == ["a"]
    with pytest.raises(InputError, match="row 1 has 3 fields"):
        read_edges([(1, 2), (1, 2, 3)])


def test_arrows_stream_files_and_compression(tmp_path: Path) -> None:
    assert ".arrows" in BATCH_EXTENSIONS
    table = pa.table({"src": [1, 2], "dst": [2, 3], "sign": [1, -1]})
    path = tmp_path / "b.arrows"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    assert [p.name for p in list_batch_files(tmp_path)] == ["b.arrows"]
    assert read_graph_updates(path).sign.tolist() == table["sign"].to_pylist()
    text = b"# c\n1 2\n2 3\n3 1\n"
    for name, blob in [("g.txt.bz2", bz2.compress(text)), ("g.gzipped", gzip.compress(text))]:
        (tmp_path / name).write_bytes(blob)
        assert read_edges(tmp_path / name).dst.tolist() == [2, 3, 1]
    zst = tmp_path / "g.txt.zst"
    with pa.CompressedOutputStream(str(zst), "zstd") as out:
        out.write(text)
    assert read_edges(zst).src.tolist() == [1, 2, 3]
    pq.write_table(pa.table({"src": [1], "dst": [2]}), tmp_path / "p.parquet")
    with pytest.raises(InputError, match="header="):
        read_edges(tmp_path / "p.parquet", header=True)


def test_relation_reader_columns(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("a,b,m\n1,2,3\n")
    src, dst, mult = read_relation(path, src="a", dst="b", mult="m")
    assert (src.tolist(), dst.tolist(), mult.tolist()) == ([1], [2], [3])


def test_cli_notes_and_column_flags(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("x 1 2\ny 2 3\nz 3 1\n")
    run = [sys.executable, "-m", "gpu_ivm", "count", str(path), "--src-col", "1",
           "--dst-col", "2"]
    out = subprocess.run(run, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["triangles"] == nx_triangles([1, 2, 3], [2, 3, 1])
    assert "gpu-ivm: note: w.txt: ignored extra column(s) at position 0" in out.stderr


# --------------------------------------------------------------------------------------
# Beyond the first block: what the fast path cannot see must still be read right
# --------------------------------------------------------------------------------------

N_BIG = 20_000  # about 200 KB: past the first block the readers look at before parsing


def big_text(tail: str) -> str:
    return "# big\n" + "".join(f"{i} {i + 1}\n" for i in range(N_BIG)) + tail


@pytest.mark.parametrize(("tail", "want_tail"), [
    ("# a late comment\n5 6\n", [(5, 6)]),
    ("7  8 \n\t9\t10\n", [(7, 8), (9, 10)]),
    ("\n\n11 12\n", [(11, 12)]),
])
def test_late_irregular_lines(tmp_path: Path, tail: str, want_tail: list) -> None:
    path = tmp_path / "big.txt.gz"
    path.write_bytes(gzip.compress(big_text(tail).encode()))
    edges = read_edges(path)
    want = [(i, i + 1) for i in range(N_BIG)] + want_tail
    assert list(zip(edges.src.tolist(), edges.dst.tolist())) == want


def test_late_bad_token_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text(big_text("1 2\n\n3 x\n"))
    with pytest.raises(InputError, match="ids='str'") as excinfo:
        read_edges(path)
    lines = path.read_text().splitlines()
    assert lines[excinfo.value.line - 1] == "3 x"
    assert excinfo.value.row == N_BIG + 1
    late_time = tmp_path / "t.txt"
    late_time.write_text("".join(f"{i} {i + 1} {i}\n" for i in range(N_BIG)) + "1 2 noon\n")
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_edges(late_time)
    assert excinfo.value.column == "time" and excinfo.value.line == N_BIG + 1


def test_late_field_count_error_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in range(N_BIG)) + "1,2,3\n")
    with pytest.raises(InputError, match="fields") as excinfo:
        read_edges(path)
    assert excinfo.value.line == N_BIG + 2 and excinfo.value.row == N_BIG


def test_cli_replay_natural_order_headerless_batches(tmp_path: Path) -> None:
    # batch-2 inserts the edge that batch-10 deletes: applied in plain name order, batch-10
    # would delete an absent edge and fail
    base = tmp_path / "base.txt"
    base.write_text("1 2\n2 3\n")
    batches = tmp_path / "b"
    batches.mkdir()
    (batches / "batch-2.csv").write_text("3,1,1\n")
    (batches / "batch-10.csv").write_text("1,2,-1\n")
    out = subprocess.run([sys.executable, "-m", "gpu_ivm", "replay", "--base", str(base),
                          "--batches", str(batches), "--json"],
                         capture_output=True, text=True, check=True)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert [x["triangles"] for x in lines[-2:]] == [
        nx_triangles([1, 2, 3], [2, 3, 1]), nx_triangles([2, 3], [3, 1])]


def test_cli_input_flags_on_every_reader_command() -> None:
    from gpu_ivm.cli import build_parser
    from gpu_ivm.cli_input import input_options

    p = build_parser()
    flags = ["--no-header", "--src-col", "a", "--dst-col", "2", "--sign-col", "3",
             "--string-ids"]
    for argv in (["count", "g.txt"], ["replay", "--base", "g", "--batches", "d"],
                 ["spark-replay", "--base", "g", "--batches", "d"]):
        args = p.parse_args(argv + flags)
        assert input_options(args, sign=True) == {
            "src": "a", "dst": 2, "sign": 3, "header": False, "ids": "str"}
        assert "sign" not in input_options(args)


def test_long_comment_header(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("".join(f"# comment line {i}\n" for i in range(5000)) + "1 2\n2 3\n")
    edges = read_edges(path)
    want = pd.read_csv(path, sep=" ", header=None, comment="#")
    assert edges.src.tolist() == want[0].tolist() and edges.dst.tolist() == want[1].tolist()


def test_a_mix_of_ids_names_the_minority_kind(tmp_path: Path) -> None:
    """The error names the id of the minority kind; on a tie the non-integer (found by the
    fuzzer: a batch row ``nan,0,1`` was blamed on the integer 0 in ``dst``)."""
    tie = tmp_path / "tie.csv"
    tie.write_text("src,dst,sign\nnan,0,1\n")
    with pytest.raises(InputError) as ei:
        read_graph_updates(tie)
    assert (ei.value.column, ei.value.row, ei.value.line) == ("src", 0, 2)
    few_strings = tmp_path / "ints.txt"
    few_strings.write_text("1 2\n2 3\n3 x\n")
    with pytest.raises(InputError) as ei:
        read_edges(few_strings)
    assert (ei.value.column, ei.value.row, ei.value.line) == ("dst", 2, 3)
    few_ints = tmp_path / "names.txt"
    few_ints.write_text("ann bob\nbob 7\ncy ann\n")
    with pytest.raises(InputError) as ei:
        read_edges(few_ints, header=False)
    assert (ei.value.column, ei.value.row, ei.value.line) == ("dst", 1, 2)
