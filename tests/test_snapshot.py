"""Snapshots: exact round trips for every engine configuration, atomic replacement, and clear
errors for missing, truncated, corrupted or mismatched snapshots (library and CLI)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EPSILONS, tiny_storage
from oracle import GraphOracle, RelationsOracle
from streams import graph_batches

from gpu_ivm import GraphEngine, RelationEngine, snapshot
from gpu_ivm.cli import main
from gpu_ivm.errors import BackendUnavailableError, InputError
from gpu_ivm.snapshot import SnapshotError


def state(eng) -> dict:
    """Everything observable about an engine's logical state (backend independent)."""
    out = {"Q": eng.Q, "N": eng.N, "size": eng.size, "count": eng.count(),
           "batches": eng.batches_applied, "last": eng.last_batch_id,
           "keys": eng.encoder.decode(np.arange(len(eng.encoder))).tolist(),
           "kind": eng.encoder.kind}
    for K in eng.rels:
        for part, st in (("h", K.h), ("l", K.l), ("ht", K.ht)):
            k, v = st.items()
            out[f"{K.name}.{part}"] = (k.tolist(), v.tolist())
        out[f"{K.name}.heavy"] = np.flatnonzero(K.heavy).tolist()
        out[f"{K.name}.th"] = K.th
    for i, v in enumerate(eng.views):
        k, x = v.items()
        out[f"view{i}"] = (k.tolist(), x.tolist())
    return out


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("eps", EPSILONS)
def test_graph_round_trip_and_continue(tmp_path, monkeypatch, directed, eps):
    tiny_storage(monkeypatch)
    rng = np.random.default_rng([int(directed), EPSILONS.index(eps)])
    oracle = GraphOracle(directed)
    eng = GraphEngine(directed=directed, epsilon=eps)
    batches = list(graph_batches(oracle, rng, n_batches=16, nv=40, max_batch=30, hub_p=0.4))
    # independent oracle counts after each batch, computed from scratch with Python sets
    counts, ref = [], GraphOracle(directed)
    for b in batches:
        for u, v, s in zip(b["src"].tolist(), b["dst"].tolist(), b["sign"].tolist()):
            ref.apply(u, v, s)
        counts.append(ref.count())
    for i, b in enumerate(batches[:8]):
        eng.apply(b, batch_id=i)
    path = tmp_path / "snap"
    man = snapshot.save(eng, path)
    assert man["count"] == counts[7] and man["last_batch_id"] == 7
    back = snapshot.load(path)
    assert state(back) == state(eng)
    assert (back.directed, back.epsilon, back.on_conflict) == (directed, eng.epsilon, "error")
    for i, b in enumerate(batches[8:], start=8):
        r1 = eng.apply(b, batch_id=i)
        r2 = back.apply(b, batch_id=i)
        assert r1.triangles == r2.triangles == counts[i]
    back.check_invariants()
    assert state(back) == state(eng)
    # a replayed batch id is skipped by the restored engine too
    assert back.apply(batches[3], batch_id=3).path == "skipped"


@pytest.mark.parametrize("on_conflict", ["error", "ignore"])
def test_graph_string_keys_and_on_conflict(tmp_path, on_conflict):
    g = GraphEngine(on_conflict=on_conflict, epsilon="2/3")
    g.load({"src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "d"]})
    snapshot.save(g, tmp_path / "s")
    h = snapshot.load(tmp_path / "s")
    assert state(h) == state(g) and h.on_conflict == on_conflict
    batch = {"src": ["d", "a"], "dst": ["a", "b"], "sign": [1, 1]}  # (a, b) is present
    if on_conflict == "ignore":
        assert h.apply(batch).ignored == g.apply(batch).ignored == 1
        assert h.count() == g.count() == 2
    else:
        with pytest.raises(InputError):
            h.apply(batch)
        assert state(h) == state(snapshot.load(tmp_path / "s"))


@pytest.mark.parametrize("eps", ["1/2", "0", "1", {"R": "0", "S": "1/3", "T": "1"}])
def test_relation_round_trip_and_continue(tmp_path, monkeypatch, eps):
    tiny_storage(monkeypatch)
    rng = np.random.default_rng(5)
    oracle = RelationsOracle()
    eng = RelationEngine(epsilon=eps)
    batches = []
    for _ in range(12):
        n = int(rng.integers(1, 40))
        rel = rng.choice(["R", "S", "T"], n)
        a = np.where(rng.random(n) < 0.3, 0, rng.integers(0, 25, n))
        b = rng.integers(0, 25, n)
        m = rng.integers(-3, 4, n)
        batches.append({"rel": rel, "src": a, "dst": b, "mult": m})
    counts = []
    for bt in batches:
        for r, a, b, m in zip(*(bt[c].tolist() for c in ("rel", "src", "dst", "mult"))):
            oracle.add(r, a, b, m)
        counts.append(oracle.count())
    for i, bt in enumerate(batches[:6]):
        eng.apply(bt, batch_id=10 * i)
    snapshot.save(eng, tmp_path / "r")
    back = snapshot.load(tmp_path / "r")
    assert state(back) == state(eng) and back.epsilons == eng.epsilons
    assert back.last_batch_id == 50
    for i, bt in enumerate(batches[6:], start=6):
        assert back.apply(bt, batch_id=10 * i).triangles == eng.apply(bt).triangles == counts[i]
    back.check_invariants()


def test_empty_and_stale_engines(tmp_path):
    e = GraphEngine()
    snapshot.save(e, tmp_path / "empty")
    back = snapshot.load(tmp_path / "empty")
    assert back.count() == 0 and len(back.encoder) == 0 and back.last_batch_id is None
    assert back.apply({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]}).triangles == 1
    # a state left stale by the recompute path is freshened before saving
    g = GraphEngine()
    g.policy.force = "recompute"
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    g.apply({"src": [2, 3], "dst": [3, 0], "sign": [1, 1]})
    assert g.stale
    snapshot.save(g, tmp_path / "stale")
    assert not g.stale
    assert state(snapshot.load(tmp_path / "stale")) == state(g)
    assert snapshot.load(tmp_path / "stale").count() == 2


def test_replace_is_atomic_and_leaves_no_temporaries(tmp_path, monkeypatch):
    g = GraphEngine()
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    path = tmp_path / "s"
    snapshot.save(g, path)
    g.apply({"src": [2], "dst": [3], "sign": [1]}, batch_id=1)
    snapshot.save(g, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert snapshot.load(path).last_batch_id == 1
    # a failure half-way through writing the new snapshot leaves the old one in place
    calls = {"n": 0}
    real = snapshot._write_bytes

    def failing(p, data):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (simulated)")
        return real(p, data)

    monkeypatch.setattr(snapshot, "_write_bytes", failing)
    g.apply({"src": [3], "dst": [0], "sign": [1]}, batch_id=2)
    with pytest.raises(OSError, match="disk full"):
        snapshot.save(g, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    old = snapshot.load(path)
    assert old.last_batch_id == 1 and old.count() == 1


def test_expect_class(tmp_path):
    g = GraphEngine()
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    snapshot.save(g, tmp_path / "s")
    assert snapshot.load(tmp_path / "s", expect=GraphEngine).count() == 1
    with pytest.raises(SnapshotError, match="manifest.json.*not a RelationEngine"):
        snapshot.load(tmp_path / "s", expect=RelationEngine)


def test_backend_argument(tmp_path):
    g = GraphEngine()
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    snapshot.save(g, tmp_path / "s")
    back = snapshot.load(tmp_path / "s", backend="cpu")
    assert back.count() == 1 and back.backend.name == "cpu"
    # every restored store runs the restored engine's backend kernels
    assert all(st.sk is back.k.store for K in back.rels for st in (K.h, K.l, K.ht))
    assert all(v.kernels is back.k and v.sparse.sk is back.k.store for v in back.views)
    from gpu_ivm.backend import cuda_usable

    if not cuda_usable():
        with pytest.raises(BackendUnavailableError):
            snapshot.load(tmp_path / "s", backend="cuda")


def test_save_errors(tmp_path):
    g = GraphEngine()
    with pytest.raises(SnapshotError, match="parent folder"):
        snapshot.save(g, tmp_path / "no" / "such" / "s")
    with pytest.raises(InputError, match="cannot snapshot"):
        snapshot.save(object(), tmp_path / "s")
    with pytest.raises(InputError, match="JSON"):
        snapshot.save(g, tmp_path / "s", metadata={"x": object()})
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ damaged snapshots
@pytest.fixture
def saved(tmp_path):
    g = GraphEngine(epsilon="1/3")
    rng = np.random.default_rng(1)
    g.load({"src": rng.integers(0, 30, 150), "dst": rng.integers(0, 30, 150)})
    path = tmp_path / "s"
    snapshot.save(g, path)
    return g, path


FILES = ["encoder.arrow", "E.h.arrow", "E.l.arrow", "E.heavy.arrow", "view0.arrow"]


@pytest.mark.parametrize("name", FILES + ["manifest.json"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "empty"])
def test_damaged_file_is_named(saved, name, damage):
    _, path = saved
    f = path / name
    data = f.read_bytes()
    if damage == "truncate":
        f.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        i = len(data) // 2
        f.write_bytes(data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:])
    elif damage == "delete":
        f.unlink()
    else:
        f.write_bytes(b"")
    with pytest.raises(SnapshotError) as ei:
        snapshot.load(path)
    assert name in str(ei.value)
    assert ei.value.file is not None and ei.value.file.endswith(name)


def _rewrite(path, name, table=None, **changes):
    """Rewrite a snapshot file (or just the manifest) with consistent checksums, as a
    malicious or buggy writer would; only deeper checks can catch it."""
    man = json.loads((path / "manifest.json").read_text())
    if table is not None:
        data = snapshot._table_bytes(table)
        (path / name).write_bytes(data)
        man["files"][name].update(rows=table.num_rows, bytes=len(data),
                                  sha256=__import__("hashlib").sha256(data).hexdigest())
    man.update(changes)
    man["manifest_sha256"] = snapshot._manifest_digest(man)
    (path / "manifest.json").write_text(json.dumps(man))


def test_consistent_but_wrong_content_is_caught(saved):
    g, path = saved
    pristine = path.parent / "pristine"
    shutil.copytree(path, pristine)

    def fresh():
        shutil.rmtree(path)
        shutil.copytree(pristine, path)

    _rewrite(path, "manifest.json", Q=g.Q + 6)
    with pytest.raises(SnapshotError, match="recounted"):
        snapshot.load(path)
    fresh()
    vk, vv = g.views[0].items()
    _rewrite(path, "view0.arrow", snapshot._kv_table(vk, vv + 1))
    with pytest.raises(SnapshotError, match="invariant"):
        snapshot.load(path)
    fresh()
    lk, lv = g.rels[0].l.items()
    _rewrite(path, "E.l.arrow", snapshot._kv_table(lk[::-1], lv[::-1]))
    with pytest.raises(SnapshotError, match="E.l.arrow.*sorted"):
        snapshot.load(path)
    fresh()
    _rewrite(path, "E.l.arrow", pa.table({"key": pa.array(lk.astype(np.float64)),
                                          "val": pa.array(lv)}))
    with pytest.raises(SnapshotError, match="E.l.arrow.*type"):
        snapshot.load(path)
    fresh()
    _rewrite(path, "manifest.json", format_version=99)
    with pytest.raises(SnapshotError, match="version 99"):
        snapshot.load(path)
    fresh()
    man = json.loads((path / "manifest.json").read_text())
    man["last_batch_id"] = 5  # checksum left stale
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(SnapshotError, match="manifest checksum"):
        snapshot.load(path)
    fresh()
    assert state(snapshot.load(path)) == state(g)


def test_missing_folder_and_interrupted_replace(tmp_path, saved):
    _, path = saved
    with pytest.raises(SnapshotError, match="no snapshot folder"):
        snapshot.load(tmp_path / "nothing")
    # a crash between the two renames of a replace leaves <path>.old-XXXX: named in the error
    os.replace(path, path.parent / "s.old-1234")
    with pytest.raises(SnapshotError, match="s.old-1234"):
        snapshot.load(path)


def test_numbered_series(tmp_path):
    g = GraphEngine()
    g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    d = tmp_path / "series"
    for i in range(4):
        g.apply({"src": [10 + i], "dst": [0], "sign": [1]}, batch_id=i)
        snapshot.save_numbered(g, d, i + 1, keep=2)
    (d / "snapshot-000009.tmp-dead").mkdir()  # a crashed writer's leftover: ignored
    assert [n for n, _ in snapshot.list_snapshots(d)] == [3, 4]
    assert snapshot.find_latest(d).name == "snapshot-000004"
    (d / "snapshot-000004" / "manifest.json").write_text("{")
    with pytest.raises(SnapshotError, match="snapshot-000004.*manifest"):
        snapshot.find_latest(d)  # no silent fallback to snapshot-000003
    snapshot.save_numbered(g, d, 5, keep=2)
    assert sorted(p.name for p in d.iterdir()) == ["snapshot-000004", "snapshot-000005"]


# ------------------------------------------------------------------ CLI
@pytest.fixture
def replay_files(tmp_path):
    rng = np.random.default_rng(11)
    oracle = GraphOracle(False)
    base = tmp_path / "base.txt"
    s, d = rng.integers(0, 40, 120), rng.integers(0, 40, 120)
    base.write_text("".join(f"{a} {b}\n" for a, b in zip(s, d)))
    for a, b in zip(s.tolist(), d.tolist()):
        if a != b:
            oracle.apply(a, b, 1)
    bdir = tmp_path / "batches"
    bdir.mkdir()
    counts = []
    for i, bt in enumerate(graph_batches(oracle, rng, n_batches=7, nv=45, max_batch=30,
                                         hub_p=0.3)):
        pq.write_table(pa.table(bt), bdir / f"b{i:02d}.parquet")
        counts.append(oracle.count())
    return base, bdir, counts


def run(argv, capsys):
    """(exit code, stdout, stderr) of the CLI; usage errors (SystemExit) included."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_snapshots_then_resume(replay_files, tmp_path, capsys):
    base, bdir, counts = replay_files
    snaps = tmp_path / "snaps"
    common = ["replay", "--base", base, "--batches", bdir, "--json", "--check"]
    code, out, err = run(common + ["--snapshot-dir", snaps, "--snapshot-every", "3"], capsys)
    assert code == 0, err
    assert [r["triangles"] for r in map(json.loads, out.splitlines()[1:])] == counts
    assert [n for n, _ in snapshot.list_snapshots(snaps)] == [6, 7]
    man = snapshot.read_manifest(snaps / "snapshot-000006")
    assert man["last_batch_id"] == 5 and man["metadata"]["cli"]["applied"] == 6
    assert [f["file"] for f in man["metadata"]["cli"]["files"]] == \
        [f"b{i:02d}.parquet" for i in range(6)]
    # resume from snapshot-000006 (as if the run had died after it): only batch 6 runs
    shutil.rmtree(snaps / "snapshot-000007")
    code, out, err = run(common + ["--resume", snaps, "--snapshot-dir", snaps], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["kind"] == "resume" and lines[0]["applied"] == 6
    assert lines[0]["triangles"] == counts[5]
    assert [(r["batch"], r["triangles"]) for r in lines[1:]] == [(6, counts[6])]
    assert snapshot.find_latest(snaps).name == "snapshot-000007"
    # resuming a finished run applies nothing and reports the same final count
    code, out, err = run(common + ["--resume", snaps], capsys)
    assert code == 0 and json.loads(out.splitlines()[-1])["triangles"] == counts[-1]


def test_cli_resume_without_snapshot_starts_over(replay_files, tmp_path, capsys):
    base, bdir, counts = replay_files
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "snapshot-000003.tmp-abcd").mkdir()  # temporaries do not count
    code, out, err = run(["replay", "--base", base, "--batches", bdir, "--json",
                          "--resume", empty], capsys)
    assert code == 0 and "no complete snapshot" in err and "starting from the beginning" in err
    assert json.loads(out.splitlines()[0])["kind"] == "base"
    assert json.loads(out.splitlines()[-1])["triangles"] == counts[-1]


def test_cli_resume_errors_exit_2(replay_files, tmp_path, capsys):
    base, bdir, _ = replay_files
    snaps = tmp_path / "snaps"
    common = ["replay", "--base", base, "--batches", bdir, "--json"]
    assert run(common + ["--snapshot-dir", snaps], capsys)[0] == 0
    # a fresh run into a folder that holds another run's snapshots
    code, _, err = run(common + ["--snapshot-dir", snaps], capsys)
    assert code == 2 and "already holds snapshots" in err
    # other engine options than the snapshot's
    code, _, err = run(common + ["--resume", snaps, "--epsilon", "1/3"], capsys)
    assert code == 2 and "--epsilon" in err and "Traceback" not in err
    # a different batch list
    extra = bdir / "b00.parquet"
    pq.write_table(pa.table({"src": [1, 2], "dst": [3, 4], "sign": [1, 1]}), extra)
    code, _, err = run(common + ["--resume", snaps], capsys)
    assert code == 2 and "not the same batch list" in err
    # a corrupted newest snapshot: exit 2 naming the file, no fallback to the older one
    newest = snapshot.find_latest(snaps)
    f = newest / "E.l.arrow"
    f.write_bytes(f.read_bytes()[:-10])
    code, out, err = run(common + ["--resume", snaps], capsys)
    assert code == 2 and str(f) in err and out == "" and "Traceback" not in err
    code, _, err = run(common + ["--snapshot-every", "0"], capsys)
    assert code == 2 and "--snapshot-every" in err


# ------------------------------------------------------------------ first contact (issue 13)
def test_engine_snapshot_returns_info(tmp_path):
    import time

    g = GraphEngine(epsilon="1/3")
    g.load({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4]})
    g.apply({"src": [4], "dst": [1], "sign": [1]}, batch_id=7)
    t0 = time.time()
    info = g.snapshot(tmp_path / "s")
    on_disk = [p for p in (tmp_path / "s").iterdir() if p.is_file()]
    assert info.path == tmp_path / "s"
    assert info.batch_id == 7 and info.count == 2  # triangles 1-2-3 and 1-3-4
    assert info.files == len(on_disk)
    assert info.bytes == sum(p.stat().st_size for p in on_disk)
    assert t0 - 1 <= info.created <= time.time() + 1
    with pytest.raises(AttributeError):
        info.count = 3  # frozen


def test_fingerprint_file_and_folder(tmp_path):
    import hashlib

    from gpu_ivm.fingerprint import differences, fingerprint

    data = bytes(range(256)) * 9000  # > 2 chunks
    f = tmp_path / "a.bin"
    f.write_bytes(data)
    fp = fingerprint(f)
    assert fp == {"kind": "file", "bytes": len(data),
                  "blake2b": hashlib.blake2b(data, digest_size=32).hexdigest()}
    d = tmp_path / "dir"
    d.mkdir()
    (d / "x.csv").write_text("src,dst\n1,2\n")
    (d / "y.csv").write_text("src,dst\n2,3\n")
    one = fingerprint(d)
    assert one["kind"] == "folder" and one["files"] == 2 and one["bytes"] == 24
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    assert fingerprint(copy) == one  # the content, not the path
    (d / "y.csv").rename(d / "z.csv")
    assert differences(one, fingerprint(d)) and fingerprint(d)["bytes"] == 24
    (d / "z.csv").rename(d / "y.csv")
    assert fingerprint(d) == one
    (d / "y.csv").write_text("src,dst\n2,4\n")
    assert [x.startswith("content") for x in differences(one, fingerprint(d))] == [True]
    with pytest.raises(InputError, match="does not exist"):
        fingerprint(tmp_path / "nope")


def test_cli_resume_refuses_another_base(replay_files, tmp_path, capsys):
    base, bdir, counts = replay_files
    snaps = tmp_path / "snaps"
    common = ["replay", "--batches", bdir, "--json"]
    assert run(common + ["--base", base, "--snapshot-dir", snaps], capsys)[0] == 0
    shutil.rmtree(snaps / "snapshot-000007")
    other = tmp_path / "other.txt"
    other.write_text(base.read_text() + "0 39\n")
    code, out, err = run(common + ["--base", other, "--resume", snaps], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert "snapshot of another base" in err and str(base) in err and str(other) in err
    assert "(option --resume)" in err and "column" not in err
    # checked on the manifest, before the state is read: a damaged data file is not reached
    data = snaps / "snapshot-000006" / "E.h.arrow"
    good = data.read_bytes()
    data.write_bytes(good[:-5])
    code, _, err = run(common + ["--base", other, "--resume", snaps], capsys)
    assert code == 2 and "snapshot of another base" in err and str(data) not in err
    data.write_bytes(good)
    # the same file edited in place is another base too
    saved = base.read_bytes()
    base.write_bytes(saved.replace(b"\n", b"\n0 38\n", 1))
    code, _, err = run(common + ["--base", base, "--resume", snaps], capsys)
    assert code == 2 and "content (blake2b" in err
    base.write_bytes(saved)
    # the same content under another name resumes (the fingerprint is of the bytes)
    same = tmp_path / "same.txt"
    same.write_bytes(saved)
    code, out, err = run(common + ["--base", same, "--resume", snaps], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["kind"] == "resume" and lines[0]["applied"] == 6
    assert [(x["batch"], x["triangles"]) for x in lines[1:]] == [(6, counts[6])]


def test_cli_resume_names_the_differing_options(replay_files, tmp_path, capsys):
    base, bdir, _ = replay_files
    snaps = tmp_path / "snaps"
    common = ["replay", "--base", base, "--batches", bdir]
    # an explicit epsilon (the default, auto, is recorded as "auto")
    assert run(common + ["--snapshot-dir", snaps, "--epsilon", "1/2"], capsys)[0] == 0
    code, _, err = run(common + ["--resume", snaps, "--epsilon", "1/3"], capsys)
    assert code == 2
    assert "epsilon: '1/2' in the snapshot, '1/3' now" in err and "directed" not in \
        err.split("(epsilon")[1].split(")")[0]
    code, _, err = run(common + ["--resume", snaps, "--directed", "--epsilon", "1/2"], capsys)
    assert code == 2 and "directed: False in the snapshot, True now" in err


def test_cli_damaged_newest_snapshot_names_the_older_one(replay_files, tmp_path, capsys):
    """A damaged newest snapshot is refused (exit 2); the message names the newest valid
    older snapshot and the exact --resume option; running with it continues the series from
    there and ends with the oracle's counts."""
    base, bdir, counts = replay_files
    snaps = tmp_path / "snaps"
    common = ["replay", "--base", base, "--batches", bdir, "--json"]
    assert run(common + ["--snapshot-dir", snaps, "--snapshot-every", "2"], capsys)[0] == 0
    assert [n for n, _ in snapshot.list_snapshots(snaps)] == [6, 7]
    # the newest (7) is damaged; a run killed after batch 4 (snapshot 6 taken after 6 files)
    f = snaps / "snapshot-000007" / "E.h.arrow"
    f.write_bytes(f.read_bytes()[:-7])
    code, out, err = run(common + ["--resume", snaps, "--snapshot-dir", snaps], capsys)
    older = snaps / "snapshot-000006"
    assert code == 2 and out == "" and "Traceback" not in err
    assert str(f) in err and f"--resume {older}" in err
    fragment = err.split("resume from it with ")[1].split()[:2]
    assert fragment == ["--resume", str(older)]
    code, out, err = run(common + fragment + ["--snapshot-dir", snaps], capsys)
    assert code == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["kind"] == "resume" and lines[0]["applied"] == 6
    assert lines[0]["triangles"] == counts[5] and lines[0]["file"] == str(older)
    assert [(x["batch"], x["triangles"]) for x in lines[1:]] == [(6, counts[6])]
    assert "removed 1 snapshot(s) newer than snapshot-000006" in err
    latest = snapshot.find_latest(snaps)
    assert latest.name == "snapshot-000007" and snapshot.load(latest).count() == counts[6]
    # no valid snapshot at all: refused, saying so
    for _, p in snapshot.list_snapshots(snaps):
        (p / "manifest.json").write_text("{")
    code, _, err = run(common + ["--resume", snaps], capsys)
    assert code == 2 and "no older snapshot" in err and "Traceback" not in err


def test_cli_resume_of_another_series_folder_refused(replay_files, tmp_path, capsys):
    base, bdir, _ = replay_files
    a, b = tmp_path / "a", tmp_path / "b"
    common = ["replay", "--base", base, "--batches", bdir]
    assert run(common + ["--snapshot-dir", a], capsys)[0] == 0
    assert run(common + ["--snapshot-dir", b], capsys)[0] == 0
    code, _, err = run(common + ["--resume", a / "snapshot-000006", "--snapshot-dir", b],
                       capsys)
    assert code == 2 and "(option --snapshot-dir)" in err
    assert [n for n, _ in snapshot.list_snapshots(b)] == [6, 7]  # untouched
