"""File-level fuzzing of the readers (issue 13): CSV, SNAP text, Parquet and Arrow inputs with
and without headers, extra columns, bad tokens, blank and comment lines, CRLF and
compression. What :func:`read_edges` / :func:`read_graph_updates` return must equal what
pandas (text, CSV) or pyarrow (Parquet, Arrow) read from the same file under explicit
options, and the generator's own rows; the only other allowed outcome is an
:class:`InputError` (never another exception, never a dropped or changed row).

``GPU_IVM_IO_FUZZ_EXAMPLES`` sets the number of cases (default 100; ``make soak`` runs 10^4).
"""

from __future__ import annotations

import csv
import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_ivm.errors import InputError, InputNote
from gpu_ivm.io import read_edges, read_graph_updates

EXAMPLES = int(os.environ.get("GPU_IVM_IO_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
CODECS = {None: "", "gzip": ".gz", "bz2": ".bz2", "zstd": ".zst"}
INT64 = st.integers(-(2**63), 2**63 - 1)
# string ids that never parse as integers nor as a header word (all start with "k")
TEXT_ID = st.text("abcXYZ_é-.", min_size=0, max_size=5).map(lambda s: "k" + s)
CSV_ID = st.text("abcXYZ_é-., \"'", min_size=0, max_size=5).map(lambda s: "k" + s)


@dataclass
class Case:
    """One generated input: the truth, the file's text, and the reader options to use."""

    fmt: str
    updates: bool
    columns: list[list[str]]  # every column as written, in file order
    names: list[str]
    roles: dict[str, int]  # src/dst/sign -> position in the file
    kinds: list[str]  # per column: id, sign, int, float, word
    header: bool = False
    pass_header: bool | None = None
    ids: str = "auto"
    picks: dict[str, object] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)  # 1-based line of each data row
    bad_row: int | None = None
    string_ids: bool = False


@st.composite
def cases(draw) -> tuple[Case, bytes | pa.Table, str, str | None]:
    fmt = draw(st.sampled_from(["csv", "text", "parquet", "arrow", "arrows"]))
    updates = draw(st.booleans())
    n = draw(st.integers(0, 12))
    string_ids = draw(st.booleans())
    idgen = (CSV_ID if fmt == "csv" else TEXT_ID) if string_ids else INT64.map(str)
    cols = [draw(st.lists(idgen, min_size=n, max_size=n)) for _ in range(2)]
    kinds, names = ["id", "id"], ["src", "dst"]
    if updates:
        cols.append([str(s) for s in draw(st.lists(st.sampled_from([1, -1]), min_size=n,
                                                   max_size=n))])
        kinds.append("sign")
        names.append("sign")
    for j in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["int", "float", "word"]))
        gen = {"int": INT64.map(str),
               "float": st.builds(lambda i, f: repr(i + f), st.integers(-10**6, 10**6),
                                  st.sampled_from([0.5, 0.25, -0.125, 1e-3])),
               "word": TEXT_ID}[kind]
        cols.append(draw(st.lists(gen, min_size=n, max_size=n)))
        kinds.append(kind)
        names.append(f"w{j}")
    order = draw(st.permutations(range(len(cols)))) if draw(st.booleans()) else range(len(cols))
    order = list(order)
    cols, kinds, names = [cols[i] for i in order], [kinds[i] for i in order], [
        names[i] for i in order]
    roles = {name: names.index(name) for name in ("src", "dst", "sign") if name in names}
    case = Case(fmt, updates, cols, names, roles, kinds, string_ids=string_ids)
    case.ids = draw(st.sampled_from(["auto", "str"]))
    if fmt in ("parquet", "arrow", "arrows"):
        table = pa.table({nm: _typed(col, kind, string_ids) for nm, col, kind in
                          zip(names, cols, kinds)})
        return case, table, fmt, None
    case.header = draw(st.booleans())
    case.pass_header = draw(st.sampled_from([None, case.header]))
    if order != sorted(order) or not case.header:
        # columns out of the usual order, or no names: pick them
        case.picks = {k: (v if not case.header else names[v]) for k, v in roles.items()
                      if order != sorted(order) or draw(st.booleans())}
    if not string_ids and n and draw(st.booleans()):
        case.bad_row = draw(st.integers(0, n - 1))
        which = roles[draw(st.sampled_from(["src", "dst"]))]
        cols[which][case.bad_row] = draw(st.sampled_from(["x", "1.5", "1e3", "0x1f", "--1"]))
    newline = "\r\n" if draw(st.booleans()) else "\n"
    codec = draw(st.sampled_from(list(CODECS)))
    if fmt == "csv":
        text, case.lines = _csv_text(case, newline, draw(st.integers(0, 1)))
    else:
        sep = draw(st.sampled_from([" ", "\t"]))
        comments = draw(st.integers(0, 2))
        blank_at = draw(st.sets(st.integers(0, n), max_size=2))
        text, case.lines = _snap_text(case, sep, newline, comments, blank_at)
    return case, text.encode(), fmt, codec


def _typed(col: list[str], kind: str, string_ids: bool) -> pa.Array:
    if kind == "float":
        return pa.array([float(v) for v in col], pa.float64())
    if kind == "word" or (kind == "id" and string_ids):
        return pa.array(col, pa.string())
    return pa.array([int(v) for v in col], pa.int64())


def _csv_text(case: Case, newline: str, blank_lines: int) -> tuple[str, list[int]]:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=newline)
    lines, line = [], 1
    buf.write(newline * blank_lines)
    line += blank_lines
    if case.header:
        w.writerow(case.names)
        line += 1
    for row in zip(*case.columns):
        w.writerow(row)
        lines.append(line)
        line += 1
    return buf.getvalue(), lines


def _snap_text(case: Case, sep: str, newline: str, comments: int,
               blank_at: set[int]) -> tuple[str, list[int]]:
    out = [f"# comment {i}" for i in range(comments)]
    if case.header:
        out.append(sep.join(case.names))
    lines = []
    for r, row in enumerate(zip(*case.columns)):
        if r in blank_at:
            out.append("")
        out.append(sep.join(row))
        lines.append(len(out))
    return newline.join(out) + newline, lines


def _write(tmp: Path, content: bytes | pa.Table, fmt: str, codec: str | None) -> Path:
    if fmt == "parquet":
        path = tmp / "f.parquet"
        pq.write_table(content, path)
    elif fmt in ("arrow", "arrows"):
        path = tmp / f"f.{fmt}"
        with pa.OSFile(str(path), "wb") as sink:
            opener = pa.ipc.new_file if fmt == "arrow" else pa.ipc.new_stream
            with opener(sink, content.schema) as writer:
                writer.write_table(content)
    else:
        path = tmp / (("f.csv" if fmt == "csv" else "f.txt") + CODECS[codec])
        with pa.output_stream(str(path), compression=codec) as out:
            out.write(content)
    return path


def _oracle(path: Path, case: Case, fmt: str, codec: str | None) -> list[list[str]]:
    """Every column as text, read by pandas (text, CSV) or pyarrow (Parquet, Arrow)."""
    if fmt in ("parquet", "arrow", "arrows"):
        table = pq.read_table(path) if fmt == "parquet" else _read_ipc(path)
        return [[_text(v) for v in table.column(i).to_pylist()] for i in range(table.num_columns)]
    with pa.input_stream(str(path), compression=codec) as f:
        raw = f.read().decode()
    kw = {"sep": ","} if fmt == "csv" else {"sep": "[ \t]+", "comment": "#", "engine": "python"}
    if not case.columns[0]:
        return [[] for _ in case.columns]
    frame = pd.read_csv(io.StringIO(raw), header=0 if case.header else None, dtype=str,
                        keep_default_na=False, skip_blank_lines=True, **kw)
    return [frame.iloc[:, j].tolist() for j in range(frame.shape[1])]


def _read_ipc(path: Path) -> pa.Table:
    try:
        return pa.ipc.open_file(str(path)).read_all()
    except pa.ArrowInvalid:
        return pa.ipc.open_stream(pa.OSFile(str(path))).read_all()


def _text(v: object) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _ids_as_text(values: np.ndarray) -> list[str]:
    return [str(v) for v in values.tolist()]


def _expected_time(case: Case) -> list[str] | None:
    """The SNAP convention: a headerless file's first free column is the time when the first
    data row holds an integer there."""
    if case.updates or case.header or case.fmt not in ("csv", "text") or not case.columns[0]:
        return None
    used = {v for k, v in case.roles.items()}
    free = [i for i in range(len(case.columns)) if i not in used]
    if free and case.kinds[free[0]] == "int":
        return case.columns[free[0]]
    return None


def check_case(tmp: Path, drawn: tuple[Case, bytes | pa.Table, str, str | None]) -> str:
    """Read one generated file; returns "read" or "refused" (asserts on anything else)."""
    case, content, fmt, codec = drawn
    path = _write(tmp, content, fmt, codec)
    oracle = _oracle(path, case, fmt, codec)
    assert oracle == case.columns or case.bad_row is not None or fmt not in ("csv", "text")
    reader = read_graph_updates if case.updates else read_edges
    kw: dict[str, object] = dict(case.picks, ids=case.ids)
    if fmt in ("csv", "text"):
        kw["header"] = case.pass_header
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", InputNote)
        try:
            got = reader(path, **kw)
        except InputError as err:
            _check_refusal(case, err)
            return "refused"
    assert case.bad_row is None or case.ids == "str", "a bad token was read"
    src, dst = oracle[case.roles["src"]], oracle[case.roles["dst"]]
    assert len(got) == len(src)
    if got.src.dtype == np.int64 and src:
        assert not case.string_ids and case.ids == "auto"
        assert got.src.tolist() == [int(v) for v in src]
        assert got.dst.tolist() == [int(v) for v in dst]
    else:
        assert case.string_ids or case.ids == "str" or not src
        assert _ids_as_text(got.src) == src and _ids_as_text(got.dst) == dst
    if case.updates:
        assert got.sign.tolist() == [int(v) for v in oracle[case.roles["sign"]]]
    else:
        want_time = _expected_time(case)
        if fmt in ("csv", "text"):
            assert (got.time is None) == (want_time is None)
            if want_time is not None:
                assert got.time.tolist() == [int(v) for v in want_time]
    extra = len(case.columns) - len(case.roles) - (_expected_time(case) is not None)
    if extra and case.columns[0] or (extra and fmt not in ("csv", "text")):
        assert any(issubclass(w.category, InputNote) for w in notes), "no note for extras"
    return "read"


def _check_refusal(case: Case, err: InputError) -> None:
    """A refusal is fine only for a bad token or an unclear header, and names the line."""
    msg = str(err)
    if "is a header or data" in msg:
        assert case.pass_header is None and case.fmt in ("csv", "text")
        return
    assert case.bad_row is not None and case.ids == "auto", f"refused a good file: {msg}"
    assert err.row is not None and err.line == case.lines[err.row], msg
    assert f"line {err.line} (1-based)" in msg


@FUZZ
@given(drawn=cases())
def test_files_read_like_pandas_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                           drawn) -> None:
    check_case(tmp_path_factory.mktemp("fz"), drawn)


@FUZZ
@given(blob=st.binary(max_size=200), name=st.sampled_from(["f.txt", "f.csv", "f.txt.gz",
                                                            "f.parquet", "f.arrows"]))
def test_junk_bytes_never_raise_anything_but_input_error(
        tmp_path_factory: pytest.TempPathFactory, blob: bytes, name: str) -> None:
    path = tmp_path_factory.mktemp("junk") / name
    path.write_bytes(blob)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputNote)
        for reader in (read_edges, read_graph_updates):
            try:
                reader(path)
            except InputError:
                pass
