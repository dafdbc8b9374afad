"""Insert-only and auto modes of the graph engine (gpu_ivm.insert_only).

Oracles: the static counter on the edges inserted so far (gpu_ivm.static), a brute-force count
over vertex triples, and the general IVM^ε engine on the same batches.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpu_ivm import ConflictError, GraphEngine, InputError
from gpu_ivm.insert_only import InsertOnlyGraphEngine
from gpu_ivm.io import read_edges
from gpu_ivm.static import count_triangles_arrays

TEMPORAL = ["CollegeMsg.txt.gz", "email-Eu-core-temporal.txt.gz", "sx-mathoverflow.txt.gz"]
DAY = 86_400


def brute_count(edges: set) -> int:
    vs = sorted({v for e in edges for v in e})
    adj = {v: set() for v in vs}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    return sum(1 for a, b, c in itertools.combinations(vs, 3)
               if b in adj[a] and c in adj[a] and c in adj[b])


def first_arrivals(src, dst, t):
    """Rows (time order) of the first arrival of each undirected non-loop edge."""
    order = np.argsort(t, kind="stable")
    s, d, t = src[order], dst[order], t[order]
    keep = s != d
    s, d, t = s[keep], d[keep], t[keep]
    lo, hi = np.minimum(s, d), np.maximum(s, d)
    _, first = np.unique(np.stack([lo, hi]), axis=1, return_index=True)
    first = np.sort(first)
    return s[first], d[first], t[first]


@pytest.mark.parametrize("name,rows", [(TEMPORAL[0], 60_000), (TEMPORAL[1], 200_000),
                                       (TEMPORAL[2], 100_000)])
def test_snap_temporal_daily_batches(data_dir, name, rows):
    """The growing graph of a SNAP temporal stream (prefix), one batch per day: the
    insert-only count after every batch equals the static count of the prefix."""
    el = read_edges(data_dir / name)
    s, d, t = el.src[:rows], el.dst[:rows], el.time[:rows]
    s, d, t = first_arrivals(s, d, t)
    day = (t - t.min()) // DAY
    cuts = np.flatnonzero(np.r_[True, day[1:] != day[:-1], True])
    g = GraphEngine(mode="insert_only")
    checked = 0
    paths = []
    for i in range(cuts.shape[0] - 1):
        lo, hi = cuts[i], cuts[i + 1]
        rep = g.apply({"src": s[lo:hi], "dst": d[lo:hi], "sign": np.ones(hi - lo, np.int64)})
        paths.append(rep.path)
        if i % 3 == 0 or i == cuts.shape[0] - 2:  # the static recount dominates the test
            assert g.count() == count_triangles_arrays(s[:hi], d[:hi]), (name, i)
            checked += 1
    assert g.num_edges == s.shape[0]
    assert checked > 10
    # the row-merge path for most days, a static recount while the graph is tiny
    assert set(paths) <= {"insert_only", "insert_only_recount"}
    assert paths.count("insert_only") > len(paths) // 2
    g.check_invariants()


@pytest.mark.parametrize("path", ["serial", "parallel", "recount"])
def test_random_batches_brute_force_and_general_engine(path, monkeypatch):
    from gpu_ivm.kernels import stamp_kernels

    from gpu_ivm import insert_only

    monkeypatch.setattr(stamp_kernels, "PAR_MIN", 0 if path == "parallel" else 1 << 62)
    monkeypatch.setattr(insert_only, "RECOUNT_RATIO", -1 if path == "recount" else 1 << 62)
    rng = np.random.default_rng(3)
    g = GraphEngine(mode="insert_only")
    h = GraphEngine()  # general engine, same batches
    edges: set = set()
    for _ in range(30):
        size = int(rng.integers(1, 12))
        cand = rng.integers(0, 14, size=(size, 2))
        batch = []
        for a, b in cand.tolist():
            e = (min(a, b), max(a, b))
            if a == b or e in edges or e in {(min(x, y), max(x, y)) for x, y in batch}:
                continue
            batch.append((a, b))
        if not batch:
            continue
        ub = {"src": [a for a, _ in batch], "dst": [b for _, b in batch],
              "sign": [1] * len(batch)}
        r1, r2 = g.apply(ub), h.apply(ub)
        assert r1.path == ("insert_only_recount" if path == "recount" else "insert_only")
        edges |= {(min(a, b), max(a, b)) for a, b in batch}
        assert g.count() == brute_count(edges) == h.count()
        assert r1.delta == r2.delta
    g.check_invariants()
    assert sorted((min(a, b), max(a, b)) for a, b in zip(*[x.tolist() for x in g.edges()])) \
        == sorted(edges)


def test_batch_closing_triangles_only_among_new_edges():
    """Triangles made of 1, 2 or 3 new edges are each counted once (ordered delta rule)."""
    g = GraphEngine(mode="insert_only")
    g.load({"src": [0, 1], "dst": [1, 2]})  # a wedge 0-1-2
    # closes {0,1,2} (1 new edge), {1,2,3} (2 new: 1-3, 2-3), {4,5,6} (3 new edges)
    rep = g.apply({"src": [0, 1, 2, 4, 5, 6], "dst": [2, 3, 3, 5, 6, 4], "sign": [1] * 6})
    assert rep.delta == 3 and g.count() == 3
    assert g.count() == brute_count({(0, 1), (1, 2), (0, 2), (1, 3), (2, 3), (4, 5), (5, 6),
                                     (4, 6)})


def state(g):
    pairs = zip(*[x.tolist() for x in g.edges()])
    return (g.count(), g.num_edges, g.num_vertices, g.last_batch_id, g.batches_applied,
            sorted((min(a, b), max(a, b)) for a, b in pairs))


def test_delete_refused_with_row_and_state_unchanged():
    g = GraphEngine(mode="insert_only")
    g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    g.apply({"src": [3], "dst": [4], "sign": [1]}, batch_id=5)
    before = state(g)
    with pytest.raises(InputError) as ei:
        g.apply({"src": [7, 1, 4], "dst": [8, 2, 1], "sign": [1, -1, 1]}, batch_id=6)
    assert ei.value.row == 1 and ei.value.column == "sign"
    assert "insert_only" in str(ei.value) and "(1, 2)" in str(ei.value)
    assert state(g) == before
    g.check_invariants()
    # the engine goes on normally
    assert g.apply({"src": [4], "dst": [1], "sign": [1]}, batch_id=6).delta == 1


def test_conflicts_match_general_engine():
    base = {"src": [1, 2, 3], "dst": [2, 3, 1]}
    g = GraphEngine(mode="insert_only")
    g.load(base)
    before = state(g)
    with pytest.raises(ConflictError) as ei:
        g.apply({"src": [5, 2, 4], "dst": [6, 1, 1], "sign": [1, 1, 1]})
    assert ei.value.row == 1 and "already present" in str(ei.value)
    with pytest.raises(ConflictError) as ei:
        g.apply({"src": [5, 4, 1], "dst": [6, 1, 4], "sign": [1, 1, 1]})
    assert ei.value.row == 2 and "twice" in str(ei.value)
    assert state(g) == before
    # on_conflict="ignore": the same rows skipped as by the general engine
    batch = {"src": [5, 2, 4, 1, 4, 9], "dst": [6, 1, 1, 4, 2, 9], "sign": [1] * 6}
    gi = GraphEngine(mode="insert_only", on_conflict="ignore")
    hi = GraphEngine(on_conflict="ignore")
    gi.load(base)
    hi.load(base)
    r1, r2 = gi.apply(batch), hi.apply(batch)
    assert (r1.ignored, r1.self_loops, r1.triangles) == (r2.ignored, r2.self_loops,
                                                          r2.triangles)
    assert state(gi)[:3] == state(hi)[:3]


def test_auto_mode_switches_at_first_delete():
    rng = np.random.default_rng(11)
    a = GraphEngine(mode="auto")
    h = GraphEngine()
    for eng in (a, h):
        eng.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
    ins = {"src": [0, 3, 3, 4], "dst": [3, 1, 2, 0], "sign": [1, 1, 1, 1]}
    assert a.apply(ins).path == "insert_only"
    h.apply(ins)
    bad = {"src": [0, 2], "dst": [1, 5], "sign": [-1, -1]}  # the last one deletes an absent edge
    with pytest.raises(ConflictError) as ei:
        a.apply(bad)
    assert ei.value.row == 1
    assert a.count() == h.count() and state(a) == state(h)
    mixed = {"src": [0, 4], "dst": [1, 2], "sign": [-1, 1]}
    rep = a.apply(mixed)
    h.apply(mixed)
    assert rep.path == "switched" and "first delete" in rep.to_dict()["switched"]
    assert not a.insert_only_active and a.mode == "auto"
    assert a.count() == h.count()
    # then a general engine: random inserts and deletes agree with the general engine
    for _ in range(10):
        cur = set(state(h)[-1])
        src, dst, sign = [], [], []
        for x, y in rng.integers(0, 9, size=(6, 2)).tolist():
            e = (min(x, y), max(x, y))
            if x == y or e in {(min(p, q), max(p, q)) for p, q in zip(src, dst)}:
                continue
            src.append(x)
            dst.append(y)
            sign.append(-1 if e in cur else 1)
        b = {"src": src, "dst": dst, "sign": sign}
        assert a.apply(b).triangles == h.apply(b).triangles
    a.check_invariants()


def test_snapshot_restore_insert_only_and_auto(tmp_path):
    from gpu_ivm import snapshot

    g = GraphEngine(mode="insert_only")
    g.load({"src": ["a", "b"], "dst": ["b", "c"]})
    g.apply({"src": ["c", "d", "d"], "dst": ["a", "a", "b"], "sign": [1, 1, 1]}, batch_id=3)
    g.snapshot(tmp_path / "s1")
    r = GraphEngine.restore(tmp_path / "s1")
    assert isinstance(r, InsertOnlyGraphEngine) and r.mode == "insert_only"
    assert state(r) == state(g)
    more = {"src": ["d", "e", "e"], "dst": ["c", "c", "d"], "sign": [1, 1, 1]}
    assert r.apply(more, batch_id=4).triangles == g.apply(more, batch_id=4).triangles
    assert r.apply(more, batch_id=4).path == "skipped"  # replay protection restored
    with pytest.raises(InputError):
        r.apply({"src": ["a"], "dst": ["b"], "sign": [-1]})
    # a corrupted stamp file is refused
    man = snapshot.read_manifest(tmp_path / "s1")
    assert man["mode"] == "insert_only" and man["insert_only_active"]
    p = tmp_path / "s1" / "edges.arrow"
    data = bytearray(p.read_bytes())
    data[-40] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(snapshot.SnapshotError):
        GraphEngine.restore(tmp_path / "s1")
    # auto mode: before and after the switch
    a = GraphEngine(mode="auto")
    a.load({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4]})
    a.snapshot(tmp_path / "a1")
    ra = GraphEngine.restore(tmp_path / "a1")
    assert ra.mode == "auto" and ra.insert_only_active and ra.count() == 1
    a.apply({"src": [4, 1], "dst": [1, 2], "sign": [1, -1]})
    a.snapshot(tmp_path / "a2")
    ra = GraphEngine.restore(tmp_path / "a2")
    assert ra.mode == "auto" and not ra.insert_only_active
    assert state(ra) == state(a)
    b = {"src": [2, 1], "dst": [4, 2], "sign": [1, 1]}
    assert ra.apply(b).triangles == a.apply(b).triangles == 4  # all four triples of 1..4


def test_refused_configurations():
    for kw in ({"directed": True}, {"maintain": ["vertex_counts"]}, {"mode": "sometimes"}):
        with pytest.raises(InputError):
            GraphEngine(**{"mode": "insert_only", **kw})
    assert type(GraphEngine(mode="general")) is GraphEngine
    assert type(GraphEngine(mode="insert-only")) is InsertOnlyGraphEngine


def test_store_add_absent_equals_add():
    """The insert-only path stores its new edges with ZStore.add_absent (no probe): the store
    it builds batch by batch must hold what ZStore.add builds and what a dict holds."""
    from gpu_ivm.store import ZStore

    rng = np.random.default_rng(4)
    fast, ref, oracle = ZStore(0), ZStore(0), {}
    for _ in range(60):
        cand = (rng.integers(0, 40, 30) << 32) | rng.integers(0, 40, 30)
        keys = np.unique([k for k in cand.tolist() if k not in oracle]).astype(np.int64)
        vals = rng.integers(1, 1000, keys.shape[0])
        fast.add_absent(keys, vals)
        ref.add(keys, vals)
        oracle.update(zip(keys.tolist(), vals.tolist()))
        fk, fv = fast.items()
        rk, rv = ref.items()
        assert fk.tolist() == rk.tolist() == sorted(oracle)
        assert fv.tolist() == rv.tolist() == [oracle[k] for k in sorted(oracle)]
        assert len(fast) == len(ref) == len(oracle)
        firsts = np.bincount(np.array(sorted(oracle)) >> 32, minlength=40)
        assert fast.live[:40].tolist() == ref.live[:40].tolist() == firsts.tolist()


def brute_triangles(edges: set) -> set:
    adj: dict = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return {t for t in itertools.combinations(sorted(adj), 3)
            if t[1] in adj[t[0]] and t[2] in adj[t[0]] and t[2] in adj[t[1]]}


def _vcounts(tris: set) -> dict:
    out: dict = {}
    for t in tris:
        for x in t:
            out[x] = out.get(x, 0) + 1
    return out


def _ecounts(tris: set) -> dict:
    out: dict = {}
    for a, b, c in tris:
        for e in ((a, b), (a, c), (b, c)):
            out[e] = out.get(e, 0) + 1
    return out


def _user_tris(rows) -> set:
    return {tuple(sorted((r["a"], r["b"], r["c"]))) for r in rows}


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_track_changes_lists_births_and_count_changes(path, monkeypatch):
    """track_changes in insert-only mode: each batch's new triangles (with its birth), the
    vertices and edges whose counts changed (old and new), and the result as of any earlier
    batch, against brute force on the edge sets."""
    from gpu_ivm.kernels import stamp_kernels

    monkeypatch.setattr(stamp_kernels, "PAR_MIN", 0 if path == "parallel" else 1 << 62)
    rng = np.random.default_rng(21)
    g = GraphEngine(mode="insert_only", track_changes=True)
    base = {(int(a), int(b)) for a, b in rng.integers(100, 112, size=(30, 2)) if a != b}
    base = {(min(e), max(e)) for e in base}
    g.load({"src": [a for a, _ in base], "dst": [b for _, b in base]})
    edges = set(base)
    history = [brute_triangles(edges)]  # history[i + 1]: after batch i
    assert _user_tris(r for b in g.triangles() for r in b.to_pylist()) == history[0]
    assert {r["birth"] for b in g.triangles() for r in b.to_pylist()} <= {-1}
    for i in range(25):
        cand = rng.integers(100, 118, size=(int(rng.integers(1, 14)), 2)).tolist()
        batch = []
        for a, b in cand:
            e = (min(a, b), max(a, b))
            if a != b and e not in edges and e not in {(min(x), max(x)) for x in batch}:
                batch.append((a, b))
        g.apply({"src": [a for a, _ in batch], "dst": [b for _, b in batch],
                 "sign": [1] * len(batch)})
        before = history[-1]
        edges |= {(min(e), max(e)) for e in batch}
        after = brute_triangles(edges)
        history.append(after)
        ch = g.last_changes()
        new = ch["triangles"].to_pylist()
        assert _user_tris(new) == after - before and len(new) == len(after - before)
        assert {r["birth"] for r in new} <= {i}
        vb, va = _vcounts(before), _vcounts(after)
        got_v = {r["vertex"]: (r["old"], r["new"]) for r in ch["vertex_counts"].to_pylist()}
        assert got_v == {x: (vb.get(x, 0), va[x]) for x in va if va[x] != vb.get(x, 0)}
        eb, ea = _ecounts(before), _ecounts(after)
        got_e = {(min(r["src"], r["dst"]), max(r["src"], r["dst"])): (r["old"], r["new"])
                 for r in ch["edge_counts"].to_pylist()}
        assert got_e == {e: (eb.get(e, 0), ea[e]) for e in ea if ea[e] != eb.get(e, 0)}
        assert g.count() == len(after)
    for b in (-1, 0, 7, 24):
        rows = [r for batch in g.triangles(as_of=b, chunk_size=7) for r in batch.to_pylist()]
        assert _user_tris(rows) == history[b + 1] and len(rows) == len(history[b + 1])
        assert all(r["birth"] <= b for r in rows)


def test_track_changes_survives_a_snapshot(tmp_path):
    """The triangle log of an insert-only engine with track_changes is restored from its
    snapshot: the same result as of every batch, and the next batch's changes right."""
    from gpu_ivm import snapshot

    rng = np.random.default_rng(8)
    g = GraphEngine(mode="insert_only", track_changes=True)
    edges: set = set()
    for _ in range(6):
        batch = {(min(a, b), max(a, b)) for a, b in rng.integers(0, 10, size=(8, 2)).tolist()
                 if a != b} - edges
        g.apply({"src": [a for a, _ in batch], "dst": [b for _, b in batch],
                 "sign": [1] * len(batch)})
        edges |= batch
    g.snapshot(tmp_path / "s")
    h = snapshot.load(tmp_path / "s")
    for b in range(-1, 6):
        assert sorted(_user_tris(r for x in h.triangles(as_of=b) for r in x.to_pylist())) \
            == sorted(_user_tris(r for x in g.triangles(as_of=b) for r in x.to_pylist()))
    extra = {(0, 10), (1, 10), (2, 10)} - edges
    upd = {"src": [a for a, _ in extra], "dst": [b for _, b in extra], "sign": [1] * 3}
    g.apply(upd)
    h.apply(upd)
    for k in ("triangles", "vertex_counts", "edge_counts"):
        assert g.last_changes()[k].to_pylist() == h.last_changes()[k].to_pylist()
    plain = GraphEngine(mode="insert_only")
    with pytest.raises(InputError, match="track_changes"):
        plain.last_changes()
