"""Tests for gpu_ivm.io: every source kind and every validation rule."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_ivm.errors import InputError, InputNote
from gpu_ivm.io import (
    EdgeList,
    GraphUpdates,
    RelationUpdates,
    list_batch_files,
    read_edges,
    read_graph_updates,
    read_relation,
    read_relation_updates,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def check_error(excinfo: pytest.ExceptionInfo[InputError], column: str | None, row: int | None):
    """The error carries column and row, and its message names both."""
    err = excinfo.value
    assert isinstance(err, InputError)
    assert err.column == column
    assert err.row == row
    msg = str(err)
    if column is not None:
        assert repr(column) in msg
    if row is not None:
        assert f"row {row}" in msg


def write_gz(path: Path, text: bytes) -> Path:
    path.write_bytes(gzip.compress(text))
    return path


def write_ipc(path: Path, table: pa.Table, *, stream: bool) -> Path:
    with pa.OSFile(str(path), "wb") as sink:
        opener = pa.ipc.new_stream if stream else pa.ipc.new_file
        with opener(sink, table.schema) as writer:
            writer.write_table(table)
    return path


# --------------------------------------------------------------------------------------
# Text (SNAP) files
# --------------------------------------------------------------------------------------


def test_text_gz_with_comments_tabs_crlf(tmp_path: Path) -> None:
    text = (
        b"# Directed graph\r\n"
        b"# FromNodeId\tToNodeId\r\n"
        b"1\t2\r\n"
        b"\r\n"
        b"2\t3\r\n"
        b"# a comment in the middle\r\n"
        b"% another\r\n"
        b"3\t1\r\n"
    )
    edges = read_edges(write_gz(tmp_path / "g.txt.gz", text))
    assert isinstance(edges, EdgeList)
    assert edges.src.dtype == np.int64 and edges.dst.dtype == np.int64
    assert edges.src.tolist() == [1, 2, 3]
    assert edges.dst.tolist() == [2, 3, 1]
    assert edges.time is None
    assert not edges.keys_are_strings
    assert len(edges) == 3


@pytest.mark.parametrize("suffix", [".txt", ".tsv", ".edges", ".el", ".dat"])
def test_text_irregular_whitespace(tmp_path: Path, suffix: str) -> None:
    text = b"% konect header\n  1   2 \n\t2\t 3\n   \n3 4\t\n  # indented comment\n4 5\n"
    path = tmp_path / f"g{suffix}"
    path.write_bytes(text)
    edges = read_edges(path)
    assert edges.src.tolist() == [1, 2, 3, 4]
    assert edges.dst.tolist() == [2, 3, 4, 5]


def test_text_trailing_blank_on_every_line(tmp_path: Path) -> None:
    path = tmp_path / "trail.txt"
    path.write_text("1 2 3 \n4 5 6 \n")
    edges = read_edges(path)
    assert edges.src.tolist() == [1, 4] and edges.time.tolist() == [3, 6]
    rel = tmp_path / "trail_rel.txt"
    rel.write_text("R 1 2 3 \n% mid-file comment\nS 4 5 6 \n")
    upd = read_relation_updates(rel)
    assert upd.rel.tolist() == [0, 1] and upd.mult.tolist() == [3, 6]


def test_text_with_time_column(tmp_path: Path) -> None:
    path = tmp_path / "stream.txt"
    path.write_text("1 2 1082040961\n3 4 1082155839\n5 2 1082414391\n")
    edges = read_edges(path)
    assert edges.time is not None
    assert edges.time.dtype == np.int64
    assert edges.time.tolist() == [1082040961, 1082155839, 1082414391]


def test_text_string_keys(tmp_path: Path) -> None:
    path = tmp_path / "names.txt"
    path.write_text("# people\nalice bob\nbob 7\n007 alice\n")
    # ids mixing integers and strings, over a first row that could be a header: both are
    # refused unless the caller says (issue 13)
    with pytest.raises(InputError, match="header"):
        read_edges(path)
    with pytest.raises(InputError, match="ids='str'") as excinfo:
        read_edges(path, header=False)
    check_error(excinfo, "dst", 1)
    assert excinfo.value.line == 3
    edges = read_edges(path, header=False, ids="str")
    assert edges.keys_are_strings
    assert edges.src.dtype == object and edges.dst.dtype == object
    # Every id is kept as its original text once any id is not an integer.
    assert edges.src.tolist() == ["alice", "bob", "007"]
    assert edges.dst.tolist() == ["bob", "7", "alice"]
    assert all(type(v) is str for v in edges.dst)


def test_text_one_column_string_other_int(tmp_path: Path) -> None:
    path = tmp_path / "half.txt"
    path.write_text("1 a\n2 b\n")
    with pytest.raises(InputError, match="all integers or all strings") as excinfo:
        read_edges(path)  # a mix of integer and string ids is refused (issue 13)
    check_error(excinfo, "dst", 0)
    edges = read_edges(path, ids="str")
    assert edges.src.tolist() == ["1", "2"]
    assert edges.dst.tolist() == ["a", "b"]


def test_text_too_few_fields_names_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("# header\n1 2\n# mid comment\n2 3\n\n4\n5 6\n")
    with pytest.raises(InputError, match="fewer than the 2 required") as excinfo:
        read_edges(path)
    check_error(excinfo, "dst", 2)


def test_text_single_column_file(tmp_path: Path) -> None:
    path = tmp_path / "one.txt"
    path.write_text("1\n2\n")
    with pytest.raises(InputError, match="fields") as excinfo:
        read_edges(path)
    check_error(excinfo, "dst", 0)


def test_text_inconsistent_field_count(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_text("1 2\n2 3\n3 4 99\n")
    with pytest.raises(InputError, match="first data row has 2") as excinfo:
        read_edges(path)
    check_error(excinfo, "time", 2)


def test_text_extra_fields_ignored_with_a_note(tmp_path: Path) -> None:
    # extra columns are ignored with a note, not refused (issue 13)
    path = tmp_path / "wide.txt"
    path.write_text("1 2 3 4\n")
    with pytest.warns(InputNote, match="position 3"):
        edges = read_edges(path)
    assert edges.src.tolist() == [1] and edges.dst.tolist() == [2] and edges.time.tolist() == [3]


def test_text_bad_time_value(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("1 2 10\n2 3 11\n3 4 noon\n")
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_edges(path)
    check_error(excinfo, "time", 2)


def test_text_custom_names_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("1\n")
    with pytest.raises(InputError) as excinfo:
        read_edges(path, src="u", dst="v")
    check_error(excinfo, "v", 0)


def test_text_empty_and_comment_only(tmp_path: Path) -> None:
    for name, text in [("e.txt", b""), ("c.txt", b"# only\n% comments\n\n"), ("w.txt", b"  \n")]:
        path = tmp_path / name
        path.write_bytes(text)
        edges = read_edges(path)
        assert len(edges) == 0
        assert edges.src.dtype == np.int64 and edges.dst.dtype == np.int64
        assert edges.time is None


def test_text_graph_updates(tmp_path: Path) -> None:
    path = write_gz(tmp_path / "u.txt.gz", b"# src dst sign\n1 2 1\n2 3 -1\n")
    upd = read_graph_updates(path)
    assert isinstance(upd, GraphUpdates)
    assert upd.src.tolist() == [1, 2] and upd.sign.tolist() == [1, -1]
    plus = tmp_path / "plus.txt"
    plus.write_text("1 2 +1\n2 3 -1\n")
    assert read_graph_updates(plus).sign.tolist() == [1, -1]
    path2 = tmp_path / "u2.txt"
    path2.write_text("1 2 1\n2 3 0\n")
    with pytest.raises(InputError, match=r"\+1 or -1") as excinfo:
        read_graph_updates(path2)
    check_error(excinfo, "sign", 1)
    path3 = tmp_path / "u3.txt"
    path3.write_text("1 2 1\n2 3\n")
    with pytest.raises(InputError) as excinfo:
        read_graph_updates(path3)
    check_error(excinfo, "sign", 1)


def test_text_relation_updates_and_relation(tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    path.write_text("# rel src dst mult\nR 1 2 1\ns 2 3 -2\n2 3 1 0\n")
    upd = read_relation_updates(path)
    assert upd.rel.tolist() == [0, 1, 2]
    assert upd.mult.tolist() == [1, -2, 0]
    rel_path = tmp_path / "rel.txt"
    rel_path.write_text("1 2\n2 3\n")
    src, dst, mult = read_relation(rel_path)
    assert src.tolist() == [1, 2] and dst.tolist() == [2, 3] and mult.tolist() == [1, 1]
    rel_path.write_text("1 2 5\n2 3 7\n")
    assert read_relation(rel_path)[2].tolist() == [5, 7]


# --------------------------------------------------------------------------------------
# Files: errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nope.txt", "nope.csv", "nope.parquet", "nope.arrow"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match="does not exist") as excinfo:
        read_edges(tmp_path / name)
    assert name in str(excinfo.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    blob = gzip.compress(b"".join(b"%d %d\n" % (i, i + 1) for i in range(5000)))
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError, match="gzip") as excinfo:
        read_edges(path)
    assert "cut.txt.gz" in str(excinfo.value)
    assert excinfo.value.__cause__ is not None


def test_truncated_parquet(tmp_path: Path) -> None:
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"src": np.arange(1000), "dst": np.arange(1000) + 1}), path)
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError, match="Parquet") as excinfo:
        read_edges(path)
    assert "cut.parquet" in str(excinfo.value)


def test_corrupt_arrow(tmp_path: Path) -> None:
    path = tmp_path / "junk.arrow"
    path.write_bytes(b"this is not arrow at all")
    with pytest.raises(InputError, match="Arrow") as excinfo:
        read_edges(path)
    assert "junk.arrow" in str(excinfo.value)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory"):
        read_edges(tmp_path)


# --------------------------------------------------------------------------------------
# CSV, Parquet, Arrow
# --------------------------------------------------------------------------------------


def test_csv_named_columns_extra_ignored(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text("weight,dst,src,t\n0.5,2,1,100\n0.7,3,2,200\n")
    edges = read_edges(path)
    assert edges.src.tolist() == [1, 2] and edges.dst.tolist() == [2, 3]
    assert edges.time is not None and edges.time.tolist() == [100, 200]


def test_csv_gz_positional(tmp_path: Path) -> None:
    path = write_gz(tmp_path / "e.csv.gz", b"u,v\r\n1,2\r\n2,3\r\n")
    edges = read_edges(path)
    assert edges.src.tolist() == [1, 2] and edges.dst.tolist() == [2, 3]
    assert edges.time is None
    path3 = tmp_path / "e3.csv"
    path3.write_text("u,v,when\n1,2,5\n")
    assert read_edges(path3).time.tolist() == [5]


def test_csv_type_changes_after_first_block(tmp_path: Path) -> None:
    # The odd value sits far beyond pyarrow's first 1 MiB parse block.
    n = 120_000
    body = "".join(f"{i},{i + 1},{i}\n" for i in range(n))
    path = tmp_path / "late.csv"
    path.write_text("src,dst,time\n" + body + "1,2,noon\n")
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_edges(path)
    check_error(excinfo, "time", n)
    path.write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in range(n)) + "alice,bob\n")
    # integer ids then a string id: refused, naming the line (issue 13); ids="str" reads text
    with pytest.raises(InputError, match="ids='str'") as excinfo:
        read_edges(path)
    check_error(excinfo, "src", n)
    assert excinfo.value.line == n + 2
    edges = read_edges(path, ids="str")
    assert edges.keys_are_strings and edges.src[0] == "0" and edges.dst[-1] == "bob"


def test_csv_string_keys_and_custom_names(tmp_path: Path) -> None:
    path = tmp_path / "names.csv"
    path.write_text("from,to\nalice,bob\nbob,carol\n")
    edges = read_edges(path, src="from", dst="to")
    assert edges.keys_are_strings
    assert edges.src.tolist() == ["alice", "bob"]


def test_csv_missing_column_lists_found(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("a,b,c,d\n1,2,3,4\n")
    with pytest.raises(InputError, match="missing column") as excinfo:
        read_edges(path)
    check_error(excinfo, "src", None)
    assert "'a', 'b', 'c', 'd'" in str(excinfo.value)


def test_csv_null_and_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("src,dst\n1,2\n2,\n3,4\n")
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(path)
    check_error(excinfo, "dst", 1)
    path.write_text("src,dst\nalice,bob\n,carol\n")
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(path)
    check_error(excinfo, "src", 1)
    path.write_text("src,dst\n1,2\n2,3\n3,4,5\n")
    with pytest.raises(InputError, match="fields") as excinfo:
        read_edges(path)
    check_error(excinfo, None, 2)


def test_csv_empty_and_header_only(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("src,dst,sign\n")
    upd = read_graph_updates(path)
    assert len(upd) == 0 and upd.sign.dtype == np.int64
    path.write_text("")
    assert len(read_edges(path)) == 0


def test_csv_relation_updates(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("rel,src,dst,mult\nR,1,2,1\nt,1,3,-1\nQ,1,1,1\n")
    with pytest.raises(InputError, match="invalid relation") as excinfo:
        read_relation_updates(path)
    check_error(excinfo, "rel", 2)


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    pq.write_table(
        pa.table({"src": [1, 2], "dst": [2, 3], "time": [10, 20], "x": ["a", "b"]}), path
    )
    edges = read_edges(path)
    assert edges.src.tolist() == [1, 2] and edges.time.tolist() == [10, 20]
    pq_path = tmp_path / "u.pq"
    pq.write_table(
        pa.table({"src": ["a"], "dst": ["b"], "sign": pa.array([-1], pa.int8())}), pq_path
    )
    upd = read_graph_updates(pq_path)
    assert upd.src.tolist() == ["a"] and upd.sign.dtype == np.int64 and upd.sign.tolist() == [-1]


def test_parquet_empty_and_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())}), path
    )
    edges = read_edges(path)
    assert len(edges) == 0 and edges.src.dtype == np.int64
    with pytest.raises(InputError, match="missing column 'sign'") as excinfo:
        read_graph_updates(path)
    check_error(excinfo, "sign", None)
    assert "['src', 'dst']" in str(excinfo.value)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("suffix", [".arrow", ".feather", ".ipc"])
def test_arrow_ipc_file_and_stream(tmp_path: Path, stream: bool, suffix: str) -> None:
    table = pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, -1]})
    path = write_ipc(tmp_path / f"b{suffix}", table, stream=stream)
    upd = read_graph_updates(path)
    assert upd.src.tolist() == [1, 2, 3] and upd.sign.tolist() == [1, 1, -1]


# --------------------------------------------------------------------------------------
# In-memory sources
# --------------------------------------------------------------------------------------


def test_numpy_arrays() -> None:
    edges = read_edges(np.array([[1, 2], [2, 3]], dtype=np.int32))
    assert edges.src.dtype == np.int64 and edges.src.tolist() == [1, 2]
    edges3 = read_edges(np.array([[1, 2, 7], [2, 3, 8]]))
    assert edges3.time.tolist() == [7, 8]
    with pytest.raises(InputError, match="at least 2 columns") as excinfo:
        read_edges(np.arange(4).reshape(4, 1))
    check_error(excinfo, "dst", None)
    with pytest.raises(InputError, match="shape"):
        read_edges(np.arange(4))
    strs = read_edges(np.array([["a", "b"], ["b", "c"]]))
    assert strs.keys_are_strings and strs.dst.tolist() == ["b", "c"]


def test_numpy_result_does_not_alias_input() -> None:
    src = np.array([1, 2, 3])
    edges = read_edges((src, np.array([2, 3, 1])))
    edges.src[0] = 99
    assert src[0] == 1


def test_numpy_structured_updates() -> None:
    arr = np.array([(1, 2, 1), (2, 3, -1)], dtype=[("src", "i8"), ("dst", "i4"), ("sign", "i1")])
    upd = read_graph_updates(arr)
    assert upd.dst.dtype == np.int64 and upd.sign.tolist() == [1, -1]
    rel = np.array(
        [("R", 1, 2, 3), ("S", 2, 3, -1)],
        dtype=[("rel", "U1"), ("src", "i8"), ("dst", "i8"), ("mult", "i8")],
    )
    assert read_relation_updates(rel).rel.tolist() == [0, 1]
    assert read_relation_updates(np.array([[0, 1, 2, 5], [2, 2, 3, -5]])).mult.tolist() == [5, -5]


def test_dict_tuple_and_lists() -> None:
    edges = read_edges({"src": [1, 2], "dst": (2, 3), "other": ["x", "y"]})
    assert edges.src.tolist() == [1, 2] and edges.dst.tolist() == [2, 3]
    edges2 = read_edges((["a", "b"], ["b", "c"]))
    assert edges2.keys_are_strings
    upd = read_graph_updates(([1], [2], [-1]))
    assert upd.sign.tolist() == [-1]
    with pytest.raises(InputError, match="tuple must have at least 3 columns") as excinfo:
        read_graph_updates(([1], [2]))
    check_error(excinfo, "sign", None)


def test_arrow_table_and_record_batch() -> None:
    table = pa.table({"src": pa.array([1, 2], pa.uint32()), "dst": [2, 3], "t": [5, 6]})
    edges = read_edges(table)
    assert edges.src.dtype == np.int64 and edges.time.tolist() == [5, 6]
    chunked = pa.concat_tables([table, table])
    assert read_edges(chunked).src.tolist() == [1, 2, 1, 2]
    batch = pa.RecordBatch.from_pydict({"src": ["a", "b"], "dst": ["b", "c"]})
    assert read_edges(batch).src.tolist() == ["a", "b"]
    sliced = pa.table(
        {
            "src": pa.array([9, 8, 7, 6], pa.int16()),
            "dst": pa.array([1.0, 2.0, 3.0, 4.0], pa.float32()),
        }
    ).slice(1, 2)
    edges = read_edges(sliced)
    assert edges.src.tolist() == [8, 7] and edges.dst.tolist() == [2, 3]
    assert edges.src.flags.writeable and edges.dst.dtype == np.int64
    dict_col = pa.table({"src": pa.array(["x", "y", "x"]).dictionary_encode(), "dst": ["y"] * 3})
    assert read_edges(dict_col).src.tolist() == ["x", "y", "x"]


def test_pandas_dataframes() -> None:
    df = pd.DataFrame({"src": [1, 2], "dst": [2, 3], "sign": [1, -1], "extra": [0.1, 0.2]})
    upd = read_graph_updates(df)
    assert upd.src.tolist() == [1, 2] and upd.sign.tolist() == [1, -1]
    df2 = pd.DataFrame(
        {"src": pd.array([1, 2], dtype="Int64"), "dst": pd.Categorical(["a", "b"]), "t": [1, 2]}
    )
    with pytest.raises(InputError, match="same key kind"):
        read_edges(df2)
    df3 = pd.DataFrame({"src": pd.array(["a", "b"], dtype="string"), "dst": ["b", "c"]})
    assert read_edges(df3).keys_are_strings


class _ArrowFrame:
    """Duck type of a cuDF / Polars DataFrame: converts itself with ``to_arrow()``."""

    def __init__(self, table):
        self.table = table

    def to_arrow(self):
        return self.table


def test_frames_with_to_arrow() -> None:
    t = pa.table({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, -1]})
    upd = read_graph_updates(_ArrowFrame(t))
    direct = read_graph_updates(t)
    assert upd.src.tolist() == direct.src.tolist() == [1, 2, 3]
    assert upd.sign.tolist() == [1, 1, -1]
    with pytest.raises(InputError, match="to_arrow"):
        read_edges(_ArrowFrame([1, 2]))
    with pytest.raises(InputError, match="'dst'"):
        read_edges(_ArrowFrame(pa.table({"src": [1]})))


def test_unsupported_source() -> None:
    # a list of rows is a source now (issue 13); a set or a plain list of ids is not
    with pytest.raises(InputError, match="unsupported source type"):
        read_edges({(1, 2), (2, 3)})
    with pytest.raises(InputError, match="unsupported source type"):
        read_edges([1, 2, 3])


# --------------------------------------------------------------------------------------
# Validation rules
# --------------------------------------------------------------------------------------


def test_missing_column_in_memory() -> None:
    with pytest.raises(InputError, match="missing column 'dst'") as excinfo:
        read_edges({"src": [1], "to": [2]})
    check_error(excinfo, "dst", None)
    assert "['src', 'to']" in str(excinfo.value)
    with pytest.raises(InputError, match="missing column 'mult'") as excinfo:
        read_relation_updates(pa.table({"rel": ["R"], "src": [1], "dst": [2]}))
    check_error(excinfo, "mult", None)


def test_column_length_mismatch() -> None:
    with pytest.raises(InputError, match="rows") as excinfo:
        read_edges({"src": [1, 2], "dst": [2]})
    check_error(excinfo, "dst", None)


def test_nulls_arrow() -> None:
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(pa.table({"src": [1, 2, 3], "dst": [2, None, None]}))
    check_error(excinfo, "dst", 1)
    with pytest.raises(InputError, match="null") as excinfo:
        read_graph_updates(pa.table({"src": [1, 2], "dst": [2, 3], "sign": [1, None]}))
    check_error(excinfo, "sign", 1)


def test_nulls_pandas() -> None:
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(pd.DataFrame({"src": pd.array([1, pd.NA, 3], dtype="Int64"), "dst": [1, 2, 3]}))
    check_error(excinfo, "src", 1)
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(pd.DataFrame({"src": ["a", "b", None], "dst": ["b", "c", "d"]}))
    check_error(excinfo, "src", 2)
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges(pd.DataFrame({"src": [1.0, 2.0], "dst": [np.nan, 1.0]}))
    check_error(excinfo, "dst", 0)


def test_nulls_object_and_float_numpy() -> None:
    with pytest.raises(InputError, match="null") as excinfo:
        read_edges({"src": ["a", "b", "c"], "dst": ["b", None, "a"]})
    check_error(excinfo, "dst", 1)
    with pytest.raises(InputError, match="NaN") as excinfo:
        read_edges({"src": np.array([1.0, 2.0, np.nan]), "dst": [1, 2, 3]})
    check_error(excinfo, "src", 2)
    with pytest.raises(InputError, match="null") as excinfo:
        read_relation_updates({"rel": [0, 1], "src": [1, 2], "dst": [2, 3], "mult": [1, None]})
    check_error(excinfo, "mult", 1)


def test_float_ids() -> None:
    edges = read_edges({"src": np.array([1.0, 2.0]), "dst": np.array([3.0, -4.0], np.float32)})
    assert edges.src.dtype == np.int64 and edges.dst.tolist() == [3, -4]
    with pytest.raises(InputError, match="non-integral value 1.5") as excinfo:
        read_edges({"src": [1.0, 1.5, 2.5], "dst": [1, 2, 3]})
    check_error(excinfo, "src", 1)
    with pytest.raises(InputError, match="non-finite") as excinfo:
        read_edges({"src": np.array([1.0, 2.0]), "dst": np.array([1.0, np.inf])})
    check_error(excinfo, "dst", 1)
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_edges({"src": np.array([1.0, 1e19]), "dst": np.array([1.0, 2.0])})
    check_error(excinfo, "src", 1)
    with pytest.raises(InputError, match="non-integral") as excinfo:
        read_edges(pa.table({"src": [1.0, 2.25], "dst": [1, 2]}))
    check_error(excinfo, "src", 1)


def test_booleans_are_not_ids() -> None:
    with pytest.raises(InputError, match="booleans") as excinfo:
        read_edges({"src": np.array([True, False]), "dst": [1, 2]})
    check_error(excinfo, "src", 0)
    with pytest.raises(InputError, match="boolean") as excinfo:
        read_edges({"src": [1, 2, True], "dst": [1, 2, 3]})
    check_error(excinfo, "src", 2)
    with pytest.raises(InputError, match="booleans") as excinfo:
        read_graph_updates({"src": [1], "dst": [2], "sign": pa.array([True])})
    check_error(excinfo, "sign", 0)


def test_uint64_overflow() -> None:
    big = np.array([1, 2**63, 2**64 - 1], dtype=np.uint64)
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_edges({"src": big, "dst": np.arange(3)})
    check_error(excinfo, "src", 1)
    ok = read_edges({"src": np.array([0, 2**63 - 1], np.uint64), "dst": [1, 2]})
    assert ok.src.tolist() == [0, 2**63 - 1]
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_edges(pa.table({"src": pa.array([5, 2**64 - 1], pa.uint64()), "dst": [1, 2]}))
    check_error(excinfo, "src", 1)


def test_mixed_types_in_object_column() -> None:
    with pytest.raises(InputError, match="mixed value types") as excinfo:
        read_edges({"src": np.array(["a", "b", 3, "d"], dtype=object), "dst": ["x"] * 4})
    check_error(excinfo, "src", 2)
    with pytest.raises(InputError, match="mixed value types") as excinfo:
        read_edges(pd.DataFrame({"src": [1, 2, 3], "dst": [1, "b", 3]}))
    check_error(excinfo, "dst", 1)
    # ints and integral floats mix fine
    assert read_edges({"src": [1, 2.0], "dst": [3, 4]}).src.tolist() == [1, 2]


def test_key_kind_mismatch() -> None:
    with pytest.raises(InputError, match="same key kind") as excinfo:
        read_edges({"src": [1, 2], "dst": ["a", "b"]})
    check_error(excinfo, "dst", 0)
    with pytest.raises(InputError, match="same key kind") as excinfo:
        read_graph_updates(pa.table({"src": ["a"], "dst": [1], "sign": [1]}))
    check_error(excinfo, "dst", 0)


@pytest.mark.parametrize(
    ("signs", "row", "pattern"),
    [([1, -1, 0], 2, r"\+1 or -1"), ([2, 1], 0, r"\+1 or -1"), ([1, 1.5], 1, "non-integral")],
)
def test_sign_values(signs: list[float], row: int, pattern: str) -> None:
    n = len(signs)
    with pytest.raises(InputError, match=pattern) as excinfo:
        read_graph_updates({"src": list(range(n)), "dst": list(range(n)), "sign": signs})
    check_error(excinfo, "sign", row)


def test_sign_integral_float_and_strings_ok() -> None:
    upd = read_graph_updates({"src": [1, 2], "dst": [2, 3], "sign": np.array([1.0, -1.0])})
    assert upd.sign.dtype == np.int64 and upd.sign.tolist() == [1, -1]
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_graph_updates({"src": [1, 2], "dst": [2, 3], "sign": ["1", "minus"]})
    check_error(excinfo, "sign", 1)


def test_mult_validation() -> None:
    base = {"rel": ["R", "S", "T"], "src": [1, 2, 3], "dst": [2, 3, 1]}
    upd = read_relation_updates({**base, "mult": [3, 0, -(2**63)]})
    assert isinstance(upd, RelationUpdates)
    assert upd.mult.dtype == np.int64 and upd.mult.tolist() == [3, 0, -(2**63)]
    assert len(upd) == 3
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_relation_updates({**base, "mult": [1, 2**63, 1]})
    check_error(excinfo, "mult", 1)
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_relation_updates({**base, "mult": np.array([1, 1, 2**64 - 1], np.uint64)})
    check_error(excinfo, "mult", 2)
    with pytest.raises(InputError, match="non-integral") as excinfo:
        read_relation_updates({**base, "mult": [1.0, 0.5, 1.0]})
    check_error(excinfo, "mult", 1)
    with pytest.raises(InputError, match="int64 overflow") as excinfo:
        read_relation({"src": [1], "dst": [2], "mult": [-(2**63) - 1]})
    check_error(excinfo, "mult", 0)


def test_rel_codes() -> None:
    upd = read_relation_updates(
        {"rel": ["R", "s", "t", "T"], "src": [1] * 4, "dst": [2] * 4, "mult": [1] * 4}
    )
    assert upd.rel.dtype == np.int8 and upd.rel.tolist() == [0, 1, 2, 2]
    ints = read_relation_updates(
        pa.table({"rel": [2, 0, 1], "src": [1] * 3, "dst": [2] * 3, "mult": [1] * 3})
    )
    assert ints.rel.tolist() == [2, 0, 1]
    with pytest.raises(InputError, match="invalid relation 'U'") as excinfo:
        read_relation_updates({"rel": ["R", "U"], "src": [1, 2], "dst": [2, 3], "mult": [1, 1]})
    check_error(excinfo, "rel", 1)
    with pytest.raises(InputError, match="invalid relation 3") as excinfo:
        read_relation_updates({"rel": [0, 3, 1], "src": [1] * 3, "dst": [2] * 3, "mult": [1] * 3})
    check_error(excinfo, "rel", 1)
    with pytest.raises(InputError, match="mixed value types") as excinfo:
        read_relation_updates({"rel": ["R", 1], "src": [1, 2], "dst": [2, 3], "mult": [1, 1]})
    check_error(excinfo, "rel", 1)


def test_read_relation_string_keys() -> None:
    src, dst, mult = read_relation(pa.table({"src": ["a"], "dst": ["b"], "mult": [4]}))
    assert src.dtype == object and dst.tolist() == ["b"] and mult.tolist() == [4]


# --------------------------------------------------------------------------------------
# Empty inputs
# --------------------------------------------------------------------------------------


def test_empty_in_memory_inputs() -> None:
    edges = read_edges(np.empty((0, 2), dtype=np.int64))
    assert len(edges) == 0 and edges.src.dtype == np.int64 and edges.time is None
    upd = read_graph_updates({"src": [], "dst": [], "sign": []})
    assert len(upd) == 0 and upd.sign.dtype == np.int64
    rel = read_relation_updates(
        pa.table(
            {
                "rel": pa.array([], pa.string()),
                "src": pa.array([], pa.string()),
                "dst": pa.array([], pa.string()),
                "mult": pa.array([], pa.int64()),
            }
        )
    )
    assert len(rel) == 0 and rel.rel.dtype == np.int8 and rel.mult.dtype == np.int64
    assert rel.src.dtype == object
    src, dst, mult = read_relation(pd.DataFrame({"src": [], "dst": []}))
    assert len(src) == len(dst) == len(mult) == 0 and mult.dtype == np.int64
    text = read_graph_updates(np.empty((0, 3), dtype=np.int64))
    assert len(text) == 0


# --------------------------------------------------------------------------------------
# Batch folders
# --------------------------------------------------------------------------------------


def test_list_batch_files(tmp_path: Path) -> None:
    for name in [
        "b002.parquet",
        "b001.csv",
        "b003.csv.gz",
        "b004.arrow",
        "c.feather",
        "d.ipc",
        "e.pq",
        "readme.txt",
        "f.json",
    ]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.parquet").mkdir()
    names = [p.name for p in list_batch_files(tmp_path)]
    assert names == [
        "b001.csv",
        "b002.parquet",
        "b003.csv.gz",
        "b004.arrow",
        "c.feather",
        "d.ipc",
        "e.pq",
    ]
    assert all(isinstance(p, Path) for p in list_batch_files(str(tmp_path)))


def test_list_batch_files_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        list_batch_files(tmp_path / "nope")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="no batch files"):
        list_batch_files(tmp_path)


# --------------------------------------------------------------------------------------
# Real SNAP data
# --------------------------------------------------------------------------------------


def test_snap_ca_grqc() -> None:
    path = DATA / "ca-GrQc.txt.gz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    edges = read_edges(path)
    assert len(edges) == 28_980
    assert edges.src.dtype == np.int64 and edges.dst.dtype == np.int64
    assert not edges.keys_are_strings and edges.time is None
    assert edges.src[0] == 3466 and edges.dst[0] == 937


def test_ids_int_keeps_src_and_dst_in_place() -> None:
    # ids="int" on a typed source whose columns differ in kind: each column is parsed in its
    # own place (an earlier version swapped src and dst when only dst held strings)
    for src, dst in (([1, 2], ["3", "4"]), (["1", "2"], [3, 4]), (["5", "6"], ["7", "8"])):
        edges = read_edges({"src": src, "dst": dst}, ids="int")
        assert edges.src.tolist() == [int(v) for v in src]
        assert edges.dst.tolist() == [int(v) for v in dst]
    with pytest.raises(InputError, match="not an integer") as excinfo:
        read_edges({"src": [1, 2], "dst": ["3", "x"]}, ids="int")
    check_error(excinfo, "dst", 1)


def _split_like_snap(text: str) -> list[list[str]]:
    """Oracle: the data rows of SNAP text split with Python's re (blank and #/% lines out)."""
    lines = (ln.strip(" \t") for ln in re.split(r"\r\n|\r|\n", text))
    return [re.split(r"[ \t]+", ln) for ln in lines if ln and ln[0] not in "#%"]


def test_irregular_text_with_control_and_foreign_bytes(tmp_path: Path) -> None:
    # irregular blanks send the file down the whole-line path: fields may hold the control
    # characters that path splits lines at, and a column that is not read may hold bytes
    # that are not UTF-8
    raw = b"# c\n a\x1fb  d\x1e\r\n\n\tc\te \n"
    path = tmp_path / "ctl.txt"
    path.write_bytes(raw)
    rows = _split_like_snap(raw.decode())
    edges = read_edges(path, ids="str", header=False)
    assert edges.src.tolist() == [r[0] for r in rows]
    assert edges.dst.tolist() == [r[1] for r in rows]
    raw = b"1  2 caf\xe9\n% c\n3 4\tx\n"
    path = tmp_path / "latin.txt"
    path.write_bytes(raw)
    rows = _split_like_snap(raw.decode("latin-1"))
    with pytest.warns(InputNote, match="position 2"):
        edges = read_edges(path)
    assert edges.src.tolist() == [int(r[0]) for r in rows]
    assert edges.dst.tolist() == [int(r[1]) for r in rows] and edges.time is None


def _read_both(fn, source, monkeypatch):
    """(result or error) of ``fn(source)`` through the plain-dict shortcut and through the
    general gathering (shortcut turned off)."""
    from gpu_ivm.io import readers

    def run():
        try:
            r = fn(source)
        except InputError as e:
            return "error", str(e), e.column, e.row
        cols = ("src", "dst", "time") if fn is read_edges else ("src", "dst", "sign")
        return "ok", {c: None if getattr(r, c) is None else
                      (getattr(r, c).dtype.str, getattr(r, c).tolist()) for c in cols}

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(readers, "_plain_columns", lambda *a, **k: None)
        slow = run()
    return fast, slow


@pytest.mark.filterwarnings("ignore::gpu_ivm.errors.InputNote")
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint32, np.float64])
def test_plain_dict_shortcut_reads_as_the_general_path(dtype, monkeypatch) -> None:
    # the shortcut for dicts of integer arrays must give what the general reader gives, and
    # leave every other dict (and every error) to it
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    for n in (0, 1, 7):
        a = rng.integers(0, 100, n).astype(dtype)
        b = rng.integers(0, 100, n).astype(dtype)
        s = rng.choice([-1, 1], n).astype(dtype) if dtype != np.uint32 else np.ones(n, dtype)
        for src in ({"src": a, "dst": b}, {"src": a, "dst": b, "time": b},
                    {"dst": b, "src": a, "sign": s}, {"src": a, "dst": b, "sign": 2 * s},
                    {"src": a, "dst": b[:-1], "sign": s}, {"src": a, "dst": b, "weight": s},
                    {"src": a, "sign": s}, {"src": a.tolist(), "dst": b, "sign": s}):
            for fn in (read_edges, read_graph_updates):
                fast, slow = _read_both(fn, src, monkeypatch)
                assert fast == slow, (fn.__name__, src)
    # the columns read are the reader's own arrays: a caller that reuses its buffers after
    # the call changes nothing the engine holds
    a = np.arange(6, dtype=dtype)[::2]
    r = read_graph_updates({"src": a, "dst": a + 1, "sign": np.ones(3, dtype)})
    assert not np.shares_memory(r.src, a) and r.src.flags.c_contiguous
