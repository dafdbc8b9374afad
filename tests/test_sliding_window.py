"""Sliding windows with known lifespans (gpu_ivm.sliding_window, gpu_ivm.window_offline).

Oracle: for every step k, the window's edge set is recomputed from the raw arrivals by a plain
filter (end_k - window <= t < end_k, self-loops dropped, undirected, deduplicated) and its
triangles counted by brute force (small streams) or gpu_ivm.static / networkx (SNAP streams).
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from gpu_ivm import InputError
from gpu_ivm.io import read_edges
from gpu_ivm.lifespans import parse_span
from gpu_ivm.sliding_window import SlidingWindow
from gpu_ivm.static import count_triangles_arrays

DAY = 86_400


def window_edges(src, dst, t, lo, hi) -> set:
    m = (t >= lo) & (t < hi) & (src != dst)
    return {(min(a, b), max(a, b)) for a, b in zip(src[m].tolist(), dst[m].tolist())}


def brute(edges: set) -> int:
    adj: dict = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return sum(1 for a, b, c in itertools.combinations(sorted(adj), 3)
               if b in adj[a] and c in adj[a] and c in adj[b])


def oracle_counts(src, dst, t, t0, window, step, counter=brute):
    """Per step k = 1..K: (triangles, edges) of the window recomputed from the arrivals."""
    K = (int(t.max()) - t0) // step + 1
    out = []
    for k in range(1, K + 1):
        end = t0 + k * step
        e = window_edges(src, dst, t, end - window, end)
        out.append((counter(e), len(e)))
    return out


def run_online(src, dst, t, window, step, chunks=1, start=None):
    sw = SlidingWindow(window=window, step=step, start=start)
    reps = []
    order = np.argsort(t, kind="stable")
    for part in np.array_split(order, chunks):
        reps += sw.push({"src": src[part], "dst": dst[part], "time": t[part]})
    reps += sw.close()
    return sw, reps


@pytest.mark.parametrize("seed", range(8))
def test_random_streams_every_step(seed, monkeypatch):
    from gpu_ivm import sliding_window

    if seed % 2:  # rebuild the store from the live edges whenever expired ones dominate
        monkeypatch.setattr(sliding_window, "COMPACT_MIN", 1)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 120))
    nv = int(rng.integers(4, 10))
    src = rng.integers(0, nv, n)
    dst = rng.integers(0, nv, n)
    t = rng.integers(0, 200, n)
    step = int(rng.integers(1, 25))
    window = int(rng.integers(1, 80))
    sw, reps = run_online(src, dst, t, window, step, chunks=int(rng.integers(1, 5)))
    exp = oracle_counts(src, dst, t, int(t.min()), window, step)
    assert [(r.triangles, r.edges) for r in reps] == exp
    assert [r.step for r in reps] == list(range(1, len(exp) + 1))
    assert sum(r.arrivals for r in reps) == n
    from gpu_ivm.window_offline import offline_counts

    off = offline_counts(src, dst, t, window=window, step=step)
    assert off.triangles.tolist() == [c for c, _ in exp]
    assert off.edges.tolist() == [e for _, e in exp]


def test_window_semantics_edge_cases():
    # window 10, step 5, t0 = 0: step k ends at 5k and holds arrivals with 5k-10 <= t < 5k
    src = np.array([1, 2, 3, 3, 1, 7, 1, 2])
    dst = np.array([2, 3, 1, 1, 1, 7, 2, 3])
    t = np.array([0, 0, 5, 5, 5, 9, 10, 40])  # dup 3-1, self-loops 1-1 / 7-7, 1-2 again at 10
    sw, reps = run_online(src, dst, t, 10, 5, start=0)
    got = [(r.step, r.end, r.triangles, r.edges) for r in reps]
    # step 1 [-5,5): 1-2, 2-3; step 2 [0,10): + 3-1 (t = 5 is exactly end_1: it belongs to
    # step 2) -> triangle; step 3 [5,15): 2-3 (t = 0) gone, 1-2 re-arrived at 10 is kept;
    # steps 4..8: nothing arrives (steps with no change still report) until 2-3 at 40
    assert got[:4] == [(1, 5, 0, 2), (2, 10, 1, 3), (3, 15, 0, 2), (4, 20, 0, 1)]
    assert [g[2:] for g in got[4:]] == [(0, 0), (0, 0), (0, 0), (0, 0), (0, 1)]
    assert got[-1][:2] == (9, 45)  # the last step is the first whose end exceeds t_max = 40
    assert [r.delta for r in reps] == [0, 1, -1, 0, 0, 0, 0, 0, 0]
    assert reps[1].arrivals == 4 and reps[1].births == 1  # dup + loops arrive, 1 edge born
    # 1-2 (t = 0) was alive through step 2 only: its arrival at 10 is a re-birth at step 3
    assert (reps[2].births, reps[2].extensions, reps[2].expired) == (1, 0, 2)
    assert got == [(k, 5 * k, c, e) for k, (c, e) in
                   enumerate(oracle_counts(src, dst, t, 0, 10, 5), start=1)]


def test_extension_keeps_triangle_alive():
    # triangle at t = 0; 1-2 and 2-3 re-arrive at 8 and 12, 3-1 does not
    src, dst = np.array([1, 2, 3, 1, 2]), np.array([2, 3, 1, 2, 3])
    t = np.array([0, 0, 0, 8, 12])
    sw, reps = run_online(src, dst, t, 10, 2, start=0)
    exp = oracle_counts(src, dst, t, 0, 10, 2)
    assert [(r.triangles, r.edges) for r in reps] == exp
    assert [c for c, _ in exp][:5] == [1, 1, 1, 1, 1] and exp[5][0] == 0
    # 1-2 at t = 8 extends a live edge; 2-3 at t = 12 comes after it expired (a re-birth)
    assert [(r.extensions, r.births) for r in reps][4:] == [(1, 0), (0, 0), (0, 1)]


def test_late_arrival_refused_state_unchanged():
    sw = SlidingWindow(window="2h", step="1h")
    sw.push({"src": [1, 2, 3], "dst": [2, 3, 1], "time": [0, 10, 3700]})  # closes step 1
    before = (sw.count(), sw.steps_closed, sw.num_edges)
    with pytest.raises(InputError) as ei:
        sw.push({"src": [5, 4], "dst": [6, 1], "time": [3700, 3599]})
    assert ei.value.row == 1 and ei.value.column == "time"
    assert (sw.count(), sw.steps_closed, sw.num_edges) == before
    with pytest.raises(InputError):
        sw.push({"src": [1], "dst": [2]})  # no time column
    reps = sw.close()
    assert [r.triangles for r in reps] == [1]
    early = SlidingWindow(window=10, step=5, start=100)
    with pytest.raises(InputError, match="before the window's start 100") as ei:
        early.push({"src": [1, 2], "dst": [2, 3], "time": [100, 99]})
    assert ei.value.row == 1 and early.close() == []


def test_parse_span():
    assert parse_span("30d") == 30 * DAY and parse_span(" 12h ") == 43_200
    assert parse_span("3600") == 3600 and parse_span("2w") == 14 * DAY
    for bad in ("0", "-3d", "1.5h", "3y", "", "d"):
        with pytest.raises(InputError):
            parse_span(bad)


SNAP = [("CollegeMsg.txt.gz", None), ("email-Eu-core-temporal.txt.gz", 120_000),
        ("sx-mathoverflow.txt.gz", 80_000)]


@pytest.mark.parametrize("name,rows", SNAP)
def test_snap_30_day_window_every_step(data_dir, name, rows):
    el = read_edges(data_dir / name)
    s, d, t = el.src[:rows], el.dst[:rows], el.time[:rows]
    sw, reps = run_online(s, d, t, "30d", "1d", chunks=7)
    t0 = int(t.min())

    def count(edges):
        if not edges:
            return 0
        a, b = map(np.array, zip(*edges))
        return count_triangles_arrays(a, b)

    K = (int(t.max()) - t0) // DAY + 1
    assert len(reps) == K
    for k in range(1, K + 1):
        e = window_edges(s, d, t, t0 + k * DAY - 30 * DAY, t0 + k * DAY)
        assert (reps[k - 1].triangles, reps[k - 1].edges) == (count(e), len(e)), (name, k)
    # networkx on a few steps (an oracle independent of gpu_ivm)
    for k in (K // 3, 2 * K // 3, K):
        g = nx.Graph(list(window_edges(s, d, t, t0 + k * DAY - 30 * DAY, t0 + k * DAY)))
        assert reps[k - 1].triangles == sum(nx.triangles(g).values()) // 3
    from gpu_ivm.window_offline import offline_counts

    off = offline_counts(s, d, t, window="30d", step="1d")
    assert off.triangles.tolist() == [r.triangles for r in reps]


@pytest.mark.parametrize("seed", range(4))
def test_snapshot_restore_mid_stream(tmp_path, seed):
    from gpu_ivm.snapshot import SnapshotError

    rng = np.random.default_rng(100 + seed)
    n = 200
    keys = np.array([f"v{i}" for i in range(9)], dtype=object) if seed % 2 else np.arange(9)
    src, dst = keys[rng.integers(0, 9, n)], keys[rng.integers(0, 9, n)]
    t = np.sort(rng.integers(0, 300, n))
    window, step = int(rng.integers(5, 60)), int(rng.integers(1, 20))
    cut = int(rng.integers(10, n - 10))
    sw = SlidingWindow(window=window, step=step)
    first = sw.push({"src": src[:cut], "dst": dst[:cut], "time": t[:cut]})
    sw.snapshot(tmp_path / "w")
    r = SlidingWindow.restore(tmp_path / "w")
    assert (r.count(), r.steps_closed, r.num_edges) == (sw.count(), sw.steps_closed,
                                                          sw.num_edges)
    rest = {"src": src[cut:], "dst": dst[cut:], "time": t[cut:]}
    a = [(x.step, x.triangles, x.edges) for x in sw.push(rest) + sw.close()]
    b = [(x.step, x.triangles, x.edges) for x in r.push(rest) + r.close()]
    assert a == b
    exp = oracle_counts(src, dst, t, int(t.min()), window, step)
    assert [(x.triangles, x.edges) for x in first] + [x[1:] for x in a] == exp
    p = tmp_path / "w" / "edges.arrow"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(SnapshotError):
        SlidingWindow.restore(tmp_path / "w")


def test_adjacency_appends_and_common_pairs_match_sets():
    """kernels/window_adj: rows after random appends (with the row moves that room() sizes
    exactly) equal a dict-of-sets model, and common_pairs lists, for each edge, the edge ids
    of its triangles' other two edges, as the model's set intersection does."""
    from gpu_ivm.kernels import window_adj as wa

    rng = np.random.default_rng(11)
    nv = 40
    off, ln, cap = (np.zeros(nv, np.int64) for _ in range(3))
    nbr = np.zeros(0, np.int64)
    val = np.zeros(0, np.int64)
    used, garbage, eid = 0, 0, 0
    model: dict = {}  # vertex -> {neighbour: edge id}
    ends: dict = {}
    for _ in range(25):
        cand = rng.integers(0, nv, size=(int(rng.integers(1, 30)), 2))
        us, vs, ids = [], [], []
        for a, b in cand.tolist():
            a, b = min(a, b), max(a, b)
            if a == b or (a, b) in ends:
                continue
            ends[(a, b)] = eid
            us.append(a)
            vs.append(b)
            ids.append(eid)
            model.setdefault(a, {})[b] = eid
            model.setdefault(b, {})[a] = eid
            eid += 1
        us, vs, ids = (np.array(x, np.int64) for x in (us, vs, ids))
        need = wa.room(ln, cap, us, vs)
        grown = np.zeros(used + need, np.int64), np.zeros(used + need, np.int64)
        grown[0][:used], grown[1][:used] = nbr[:used], val[:used]
        nbr, val = grown
        before = used
        used, g = wa.append(off, ln, cap, nbr, val, used, us, vs, ids)
        garbage += g
        assert used - before == need  # room() is exact
        for x in range(nv):
            row = dict(zip(nbr[off[x]:off[x] + ln[x]].tolist(),
                           (val[off[x]:off[x] + ln[x]] - 1).tolist()))
            assert row == model.get(x, {}) and ln[x] <= cap[x]
    assert garbage > 0  # rows moved
    eu = np.array([a for a, _ in ends], np.int64)  # edge i = (eu[i], ev[i]): ids in order
    ev = np.array([b for _, b in ends], np.int64)
    assert list(ends.values()) == list(range(len(ends)))
    marks = np.zeros(nv, np.int64)
    boff, bln, _, bnbr, bval, _ = wa.build(nv, eu, ev)
    for adj in ((off, ln, nbr, val), (boff, bln, bnbr, bval)):
        o, c, y, z = wa.common_pairs(*adj, eu, ev, marks)
        assert not marks.any()
        for j, (a, b) in enumerate(zip(eu.tolist(), ev.tolist())):
            got = sorted(tuple(sorted((int(p) - 1, int(q) - 1)))
                         for p, q in zip(y[o[j]:o[j] + c[j]], z[o[j]:o[j] + c[j]]))
            want = sorted(tuple(sorted((model[a][w], model[b][w])))
                          for w in set(model[a]) & set(model[b]))
            assert got == want


@pytest.mark.parametrize("seed", range(3))
def test_compaction_rebuilds_keep_counts(seed, monkeypatch):
    """A window whose expired edges are dropped (new ids, table and adjacency rebuilt) as
    soon as they outnumber the live ones still matches the oracle at every step (a hub
    makes its row move in the slab between rebuilds)."""
    from gpu_ivm import sliding_window

    calls = []
    orig = SlidingWindow._rebuild_adjacency

    def counting(self):
        calls.append(1)
        orig(self)

    monkeypatch.setattr(SlidingWindow, "_rebuild_adjacency", counting)
    monkeypatch.setattr(sliding_window, "COMPACT_MIN", 1)
    rng = np.random.default_rng(100 + seed)
    n = 400
    src = rng.integers(0, 12, n)
    dst = np.where(rng.random(n) < 0.5, 0, rng.integers(0, 12, n))  # vertex 0 is a hub
    t = rng.integers(0, 300, n)
    sw, reps = run_online(src, dst, t, 40, 7, chunks=6)
    assert calls
    exp = oracle_counts(src, dst, t, int(t.min()), 40, 7)
    assert [(r.triangles, r.edges) for r in reps] == exp


def test_lifespan_segments_equal_the_sorted_merge():
    """The offline evaluator's linear-time lifespan extraction gives, edge by edge, the
    segments of gpu_ivm.lifespans.merge_lifespans (one sort and an adjacent compare)."""
    from gpu_ivm.kernels.stamp_kernels import lifespan_segments

    from gpu_ivm.lifespans import merge_lifespans

    rng = np.random.default_rng(5)
    for n, K in ((0, 3), (1, 1), (50, 6), (2000, 40)):
        a = rng.integers(0, 9, n)
        b = a + rng.integers(1, 5, n)
        first = rng.integers(1, K + 1, n)
        last = np.minimum(first + rng.integers(0, 4, n), K)
        keys, ptr, ss, se, ediff = lifespan_segments(a, b, first, last, K)
        got = sorted((int(keys[e]), int(ss[p]), int(se[p]))
                     for e in range(keys.shape[0]) for p in range(ptr[e], ptr[e + 1]))
        for e in range(keys.shape[0]):  # each edge's segments by start, disjoint
            assert (np.diff(ss[ptr[e]:ptr[e + 1]]) > 0).all()
            assert (ss[ptr[e] + 1:ptr[e + 1]] > se[ptr[e]:ptr[e + 1] - 1] + 1).all()
        mk, ms, me = merge_lifespans((a << 32) | b, first, last)
        assert got == list(zip(mk.tolist(), ms.tolist(), me.tolist()))
        alive = np.cumsum(ediff)[1:K + 1]
        assert alive.tolist() == [sum(1 for _, s, e in got if s <= k <= e)
                                  for k in range(1, K + 1)]


@pytest.mark.parametrize("seed", range(4))
def test_results_on_request_match_networkx(seed):
    """triangles(), vertex_counts() and edge_counts() after every push, against networkx on
    the window's edges recomputed from the arrivals (string keys on odd seeds)."""
    rng = np.random.default_rng(seed)
    n = 150
    names = np.array([f"v{i}" for i in range(9)], dtype=object)
    src, dst = rng.integers(0, 9, n), rng.integers(0, 9, n)
    t = np.sort(rng.integers(0, 300, n))
    window, step = int(rng.integers(20, 90)), int(rng.integers(3, 30))
    if seed % 2:
        src, dst = names[src], names[dst]
    sw = SlidingWindow(window=window, step=step, start=0)
    for part in np.array_split(np.arange(n), 7):
        sw.push({"src": src[part], "dst": dst[part], "time": t[part]})
        end = sw.steps_closed * step
        g = nx.Graph()
        g.add_edges_from(window_edges(src, dst, t, end - window, end))
        tri = {tuple(sorted(c)) for c in nx.enumerate_all_cliques(g) if len(c) == 3}
        got = sw.triangles().to_pydict()
        assert sorted(zip(got["a"], got["b"], got["c"])) == sorted(tri)
        assert len(tri) == sw.count()
        vc = sw.vertex_counts().to_pydict()
        assert dict(zip(vc["vertex"], vc["triangles"])) == nx.triangles(g)
        ec = sw.edge_counts().to_pydict()
        support = {(min(a, b), max(a, b)): len(set(g[a]) & set(g[b])) for a, b in g.edges}
        assert dict(zip(zip(ec["src"], ec["dst"]), ec["triangles"])) == \
            {e: c for e, c in support.items() if c}


def _tri_set(edges: set) -> set:
    adj: dict = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return {(a, b, c) for a, b, c in itertools.combinations(sorted(adj), 3)
            if b in adj[a] and c in adj[a] and c in adj[b]}


def _counts(tris: set) -> tuple[dict, dict]:
    v: dict = {}
    e: dict = {}
    for t in tris:
        for x in t:
            v[x] = v.get(x, 0) + 1
        for p in ((t[0], t[1]), (t[0], t[2]), (t[1], t[2])):
            e[p] = e.get(p, 0) + 1
    return v, e


def _diff(old: dict, new: dict) -> set:
    return {(k, old.get(k, 0), new.get(k, 0)) for k in set(old) | set(new)
            if old.get(k, 0) != new.get(k, 0)}


@pytest.mark.parametrize("seed", range(8))
def test_track_changes_equal_the_diffs_of_consecutive_windows(seed, monkeypatch):
    """last_changes() after every push: the triangles that entered and left each closed step's
    window and the per-vertex and per-edge counts that changed, against brute force on the
    windows recomputed from the arrivals (compactions forced on odd seeds, string keys on
    seeds 2 and 3 mod 4)."""
    from gpu_ivm import sliding_window

    if seed % 2:
        monkeypatch.setattr(sliding_window, "COMPACT_MIN", 1)
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(80, 260))
    nv = int(rng.integers(5, 12))
    src, dst = rng.integers(0, nv, n), rng.integers(0, nv, n)
    t = rng.integers(0, 300, n)
    if seed % 4 >= 2:
        names = np.array([f"n{i:02d}" for i in range(nv)], dtype=object)
        src, dst = names[src], names[dst]
    window, step = int(rng.integers(10, 80)), int(rng.integers(2, 20))
    sw = SlidingWindow(window=window, step=step, start=0, track_changes=True)
    order = np.argsort(t, kind="stable")
    seen = 0
    pushes = [{"src": src[p], "dst": dst[p], "time": t[p]}
              for p in np.array_split(order, int(rng.integers(2, 9)))]
    for ev in pushes + [None]:
        reps = sw.push(ev) if ev is not None else sw.close()
        ch = sw.last_changes()
        assert set(ch["triangles"].column("step").to_pylist()) <= {r.step for r in reps}
        for r in reps:
            k = r.step
            prev = _tri_set(window_edges(src, dst, t, (k - 1) * step - window,
                                         (k - 1) * step)) if k > 1 else set()
            cur = _tri_set(window_edges(src, dst, t, k * step - window, k * step))
            assert len(cur) == r.triangles
            rows = [x for x in ch["triangles"].to_pylist() if x["step"] == k]
            got = {(x["a"], x["b"], x["c"], x["old"], x["new"]) for x in rows}
            assert len(got) == len(rows)
            assert got == {(*x, 0, 1) for x in cur - prev} | {(*x, 1, 0) for x in prev - cur}
            vp, ep = _counts(prev)
            vc, ec = _counts(cur)
            rows = [x for x in ch["vertex_counts"].to_pylist() if x["step"] == k]
            assert {(x["vertex"], x["old"], x["new"]) for x in rows} == _diff(vp, vc)
            rows = [x for x in ch["edge_counts"].to_pylist() if x["step"] == k]
            assert {((x["src"], x["dst"]), x["old"], x["new"]) for x in rows} == _diff(ep, ec)
            seen += len(got)
    assert seen > 0
    with pytest.raises(InputError, match="track_changes"):
        SlidingWindow(window=10, step=5).last_changes()


def test_track_changes_survive_a_snapshot(tmp_path):
    rng = np.random.default_rng(8)
    n = 300
    src, dst = rng.integers(0, 9, n), rng.integers(0, 9, n)
    t = np.sort(rng.integers(0, 400, n))
    parts = np.array_split(np.arange(n), 6)
    a = SlidingWindow(window=60, step=7, start=0, track_changes=True)
    for p in parts[:3]:
        a.push({"src": src[p], "dst": dst[p], "time": t[p]})
    a.snapshot(tmp_path / "w")
    b = SlidingWindow.restore(tmp_path / "w")
    assert b.track_changes
    for p in parts[3:]:
        ev = {"src": src[p], "dst": dst[p], "time": t[p]}
        assert [r.triangles for r in a.push(ev)] == [r.triangles for r in b.push(ev)]
        ca, cb = a.last_changes(), b.last_changes()
        for name in ("triangles", "vertex_counts", "edge_counts"):
            assert sorted(ca[name].to_pylist(), key=str) == sorted(cb[name].to_pylist(), key=str)
