"""Row bitmaps (kernels/row_bits.py) against independent oracles.

The bitmaps are checked against the store's tuples (``invariants.check_row_bits``, plain NumPy)
after every batch of random inserts, deletes and multiplicity changes (values other than 1 bar
a row); the intersections that use them against a dict model (brute force) and the sorted-run
merge; the triangle count with bitmaps against scipy's count of an oracle edge set on skewed
graphs (stars, cliques, R-MAT) at every ε and batch size, and against the count without them.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels.lsm import dot_rows_n
from gpu_ivm.kernels.row_bits import BITS_BARRED, probe_range_bits
from gpu_ivm.kernels.row_index import dot_rows_ix
from gpu_ivm.kernels.row_marks import dot_rows_mk
from streams import graph_batches
from test_row_index import (
    _dict_dot,
    _oracle_of,
    _ref_add,
    _row_dicts,
    _scipy_triangles,
    _skewed_graph,
)

from gpu_ivm import GraphEngine, store
from gpu_ivm.errors import InvariantError
from gpu_ivm.invariants import check_row_bits
from gpu_ivm.partition import PartRel
from gpu_ivm.store import ZStore

LO = (1 << 32) - 1


def _fail(msg: str) -> None:
    raise InvariantError(msg)


def _check(s: ZStore) -> None:
    ks, vs = s.items()
    check_row_bits(s, np.asarray, ks, vs, _fail, "store")


def _set_batch(rng, ref: dict, nv: int, p_other: float):
    """Sorted unique keys and deltas of a random batch: inserts of absent tuples with
    multiplicity 1 (half of them in hub rows 0-2), deletes of present ones, and with
    probability ``p_other`` per tuple a change to a multiplicity other than 0 or 1."""
    out: dict[int, int] = {}
    present = list(ref)
    for _ in range(int(rng.integers(1, 80))):
        if present and rng.random() < 0.35:
            k = present[int(rng.integers(len(present)))]
            d = -ref[k]
        else:
            x = int(rng.integers(3)) if rng.random() < 0.5 else int(rng.integers(nv))
            k = (x << 32) | int(rng.integers(nv))
            d = 1 - ref.get(k, 0)
        if rng.random() < p_other:
            d += int(rng.choice([-2, 1, 2]))
        out[k] = d
    out = {k: d for k, d in out.items() if d}
    keys = np.array(sorted(out), np.int64)
    return keys, np.array([out[int(k)] for k in keys], np.int64)


def _check_lookups(s: ZStore, ref: dict, rng, nv: int) -> None:
    """The store's tuples are the model's, each key stored once over all runs (a tombstone is
    revived in place, never shadowed by a second copy), and sorted probes (which read bitmaps
    where rows have them) and unsorted ones both read the model's multiplicities, for stored
    keys, tombstones and absent keys alike."""
    ks, vs = s.items()
    assert dict(zip(ks.tolist(), vs.tolist())) == {k: v for k, v in ref.items() if v}
    phys = s.keys[: s.bounds[-1]]
    phys = phys[(phys & LO) != LO]  # compaction padding
    assert np.unique(phys).shape[0] == phys.shape[0]
    q = np.unique(np.concatenate([phys, rng.integers(0, nv, 200) << 32 | rng.integers(0, nv, 200)]))
    want = [ref.get(int(k), 0) for k in q]
    assert s.get(q, assume_sorted=True).tolist() == want
    assert s.get(q[::-1].copy())[::-1].tolist() == want


def _bitmap_store(monkeypatch, seed: int, nv: int, floor: int, dir_min: int):
    """A random generator, an empty dict model and an empty store of ``nv`` ids with row
    bitmaps from ``floor`` tuples and directories from ``dir_min`` entries."""
    monkeypatch.setattr(store, "BITS_FLOOR", floor)
    monkeypatch.setattr(store, "DIR_MIN", dir_min)
    return np.random.default_rng(seed), {}, ZStore(nv, bits=True)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("p_other", [0.0, 0.02])
def test_bitmaps_follow_random_batches(seed, p_other, monkeypatch):
    """Batch after batch (inserts, deletes, multiplicity changes; several runs, small
    directories, compaction padding), every bitmap equals its row, and the intersections
    (bitmap probe, marks, table-free walk) equal the dict model and the merge for every row
    pair. Rows get bitmaps; with multiplicities other than 0 and 1, rows are barred."""
    monkeypatch.setattr(store, "COMPACT_SLACK", 0)
    nv = 40
    rng, ref, s = _bitmap_store(monkeypatch, seed, nv, floor=4, dir_min=4)
    marks = np.zeros(nv + 1, np.int8)
    had_bits = barred = 0
    for _ in range(14):
        keys, deltas = _set_batch(rng, ref, nv, p_other)
        if keys.shape[0] == 0:
            continue
        known = s.get(keys, assume_sorted=True)
        old = s.add(keys, deltas)
        assert old.tolist() == known.tolist() == [ref.get(int(k), 0) for k in keys]
        _ref_add(ref, keys, deltas)
        _check(s)
        _check_lookups(s, ref, rng, nv)
        had_bits = max(had_bits, s.bits_rows())
        barred += int((s.boff == BITS_BARRED).sum())
        rows = _row_dicts(ref)
        st = s.nt()
        for x1 in range(nv):
            for x2 in range(nv):
                want = _dict_dot(rows, x1, x2)
                assert dot_rows_ix(st, x1, st, x2)[0] == want
                assert dot_rows_mk(st, x1, st, x2, marks)[0] == want
                assert dot_rows_n(st, x1, st, x2)[0] == want
        assert not marks.any()
    assert had_bits > 0
    assert (barred > 0) == (p_other > 0)


@pytest.mark.parametrize("seed", range(2))
def test_large_batches_on_every_thread(seed, monkeypatch):
    """Batches of 10⁴ keys and more take the parallel forms of the set check and writes
    (``store_kernels._check_apply_par``, chunks cut at rows' boundaries) and of the bitmaps'
    upkeep (``row_bits._bits_apply_par``): the old multiplicities, the tuples, the lookups
    and every bitmap match the dict model batch after batch (hub rows whose groups span a
    chunk's length included), long rows get bitmaps; a batch that breaks set semantics
    raises with nothing changed; multiplicities other than 0 and 1 (without the check) bar
    their rows, whose slots go back to the stack; the store's size is its tuples'."""
    from gpu_ivm.kernels import row_bits, store_kernels

    from gpu_ivm.errors import SetViolation

    nv = 4000
    rng, ref, s = _bitmap_store(monkeypatch, seed, nv, floor=8, dir_min=64)
    sizes = []
    got = gave_back = 0
    for step in range(8):
        out: dict[int, int] = {}
        present = np.array(list(ref), np.int64)
        if present.shape[0]:  # deletes, a third of the stored tuples
            for k in rng.choice(present, present.shape[0] // 3, replace=False).tolist():
                out[k] = -ref[k]
        hubs = rng.integers(0, 6, 4000)  # rows of thousands of tuples
        rows = np.concatenate([hubs, rng.integers(0, nv, 9000)])
        seconds = rng.integers(0, nv, rows.shape[0])
        if step == 5:  # ids beyond the bitmaps' width in hub rows: wider bitmaps
            seconds[:40] = nv + rng.integers(0, 300, 40)
        for k in ((rows << 32) | seconds).tolist():
            out.setdefault(k, 1 - ref.get(k, 0))
        if step == 6:  # multiplicities other than 0 and 1, without the set check
            for k in rng.choice(np.array(sorted(out), np.int64), 50).tolist():
                out[k] += 1
        out = {k: d for k, d in out.items() if d}
        keys = np.array(sorted(out), np.int64)
        deltas = np.array([out[k] for k in keys.tolist()], np.int64)
        sizes.append(keys.shape[0])
        bits_before = s.bits_rows()
        if step == 6:
            old = s.add(keys, deltas)
        else:
            if step == 3:  # one tuple made invalid: refused whole, nothing changed
                bad = deltas.copy()
                bad[keys.shape[0] // 2] = 2 if bad[keys.shape[0] // 2] > 0 else -2
                snap = (s.items(), s.live.copy(), s.tomb.copy(), s.boff.copy())
                with pytest.raises(SetViolation):
                    s.add(keys, bad, sets_check=True)
                after = s.items()
                assert all(np.array_equal(a, b) for a, b in zip(snap[0], after))
                assert np.array_equal(snap[1], s.live) and np.array_equal(snap[2], s.tomb)
                assert np.array_equal(snap[3], s.boff)
            old = s.add(keys, deltas, sets_check=True)
        assert old.tolist() == [ref.get(k, 0) for k in keys.tolist()]
        _ref_add(ref, keys, deltas)
        _check(s)
        _check_lookups(s, ref, rng, nv)
        live = np.zeros(nv, np.int64)
        for k, v in ref.items():
            live[k >> 32] += v != 0
        assert np.array_equal(s.live[:nv], live)
        # rows at bits_min or more have a bitmap, unless barred
        long_rows = np.flatnonzero(live >= s.bits_min)
        assert (s.boff[long_rows] != -1).all()
        got += s.bits_rows() > bits_before
        assert len(s) == sum(v != 0 for v in ref.values())
        # every slot handed out is a row's or back on the stack (none leaked)
        assert s.bmeta[1] == s.bits_rows() + s.bmeta[0]
        gave_back += step == 6 and s.bmeta[0] > 0
    assert min(sizes) >= max(store_kernels.APPLY_PAR_MIN, row_bits.BITS_PAR_MIN)
    assert got and gave_back and (s.boff == BITS_BARRED).any()


def test_bitmap_probe_reads_the_short_row_only(monkeypatch):
    """An intersection with a bitmap row reads the other row's entries only; a range probe
    equals the dict model."""
    monkeypatch.setattr(store, "BITS_FLOOR", 8)
    hub = np.arange(1, 501, dtype=np.int64)
    short = np.arange(2, 60, 3, dtype=np.int64)
    keys = np.sort(np.concatenate([hub, (1 << 32) | short]))
    s = ZStore.from_sorted(keys, np.ones(keys.shape[0], np.int64), 600, bits=True)
    assert s.boff[0] >= 0 and s.boff[1] >= 0
    st = s.nt()
    assert dot_rows_ix(st, 1, st, 0) == (short.shape[0], short.shape[0])
    assert dot_rows_ix(st, 0, st, 1) == (short.shape[0], short.shape[0])
    vals = np.arange(1, short.shape[0] + 1, dtype=np.int64)
    assert probe_range_bits(short, vals, 0, short.shape[0], st, 0) == int(vals.sum())
    assert probe_range_bits(short + 1000, vals, 0, short.shape[0], st, 0) == 0  # beyond


def test_bitmaps_through_id_growth_slab_growth_and_shrinking(monkeypatch):
    """Ids beyond the bitmaps lay them out again (wider); many rows crossing the
    threshold in one batch grow the slab; rows that fall below half the threshold give their
    slot back and it is used again; a row barred by a multiplicity of 2 stays barred."""
    monkeypatch.setattr(store, "BITS_FLOOR", 10)
    s = ZStore(4, bits=True)
    ref: dict[int, int] = {}
    rng, nv = np.random.default_rng(0), 5100  # random lookups over the ids used below

    def add(keys, deltas):
        keys = np.asarray(keys, np.int64)
        order = np.argsort(keys)
        keys, deltas = keys[order], np.asarray(deltas, np.int64)[order]
        known = s.get(keys, assume_sorted=True)
        old = s.add(keys, deltas)
        assert old.tolist() == known.tolist() == [ref.get(int(k), 0) for k in keys]
        _ref_add(ref, keys, deltas)
        _check(s)
        _check_lookups(s, ref, rng, nv)

    rows = np.repeat(np.arange(30, dtype=np.int64), 40)
    cols = np.tile(np.arange(100, 140, dtype=np.int64), 30)
    add((rows << 32) | cols, np.ones(rows.shape[0]))  # 30 rows of 40 > 10, ids up to 139
    assert s.bits_rows() == 30 and 140 <= s.bits_ids == 64 * s.bits.shape[1]
    add([(40 << 32) | 5000], [1])  # an id beyond the bitmaps: laid out again, wider
    assert s.bits_min == 20  # ceil(79 words / 4): bitmap bytes <= 2 x the row's bytes
    assert s.bits_rows() == 30 and 5000 < s.bits_ids == 64 * s.bits.shape[1]
    add([(50 << 32) | 5, (1000 << 32) | 6], [1, 1])  # first ids grow past the bitmaps
    assert s.bits_ids >= s.id_capacity and s.bits_rows() == 30
    drop = np.arange(100, 131, dtype=np.int64)
    add((3 << 32) | drop, -np.ones(drop.shape[0]))  # row 3 keeps 9 < 20 / 2 tuples
    assert s.boff[3] == -1 and s.bits_rows() == 29 and int(s.bmeta[0]) == 1  # slot given back
    add([(5 << 32) | 100], [1])  # multiplicity 2: row 5 barred
    assert s.boff[5] == BITS_BARRED
    add([(5 << 32) | 100], [-1])  # back to 1: still barred until a rebuild
    assert s.boff[5] == BITS_BARRED
    new = np.repeat(np.arange(50, 100, dtype=np.int64), 25)
    add((new << 32) | np.tile(np.arange(200, 225, dtype=np.int64), 50), np.ones(new.shape[0]))
    assert s.bits_rows() == 28 + 50 and int(s.bmeta[0]) == 0  # given-back slots used again
    ks, vs = s.items()
    r = ZStore.from_sorted(ks, vs, s.id_capacity, bits=True)  # a rebuild lifts the bar
    assert r.boff[5] >= 0
    _check(r)


@pytest.mark.parametrize("kind", ["star", "clique", "rmat"])
@pytest.mark.parametrize("eps", ["0", "1/2", "1", "auto"])
@pytest.mark.parametrize("max_batch", [1, 60, 3000])
def test_graph_counts_with_bitmaps(kind, eps, max_batch, monkeypatch):
    """Triangle counts with bitmaps on every row of 4+ tuples equal scipy's count of the
    oracle's edge set after every batch, and the count of an engine without bitmaps; the
    engine's invariants (bitmaps included) hold at the end."""
    monkeypatch.setattr(store, "BITS_FLOOR", 4)
    rng = np.random.default_rng(len(kind) * 13 + max_batch)
    src, dst = _skewed_graph(kind, rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon=eps, adaptive=False)
    g.load((src, dst))
    monkeypatch.setattr(PartRel, "row_bits", False)
    plain = GraphEngine(epsilon=eps, adaptive=False)
    plain.load((src, dst))
    E = g.rels[0]
    assert sum(p.bits_rows() for p in (E.h, E.l, E.ht)) > 0
    assert sum(p.bits_rows() for p in (plain.rels[0].h, plain.rels[0].l)) == 0
    nv = int(max(src.max(), dst.max())) + 5
    for batch in graph_batches(o, rng, n_batches=4, nv=nv, max_batch=max_batch, hub_p=0.4,
                               shrink_from=2):
        assert g.apply(batch).path == "delta"
        plain.apply(batch)
        assert g.count() == _scipy_triangles(o.edges) == plain.count()
    g.check_invariants()


def test_snapshot_restore_rebuilds_bitmaps(tmp_path, monkeypatch):
    """Bitmaps are derived state: a restored engine has them again, equal to its rows, and
    counts on exactly."""
    monkeypatch.setattr(store, "BITS_FLOOR", 4)
    rng = np.random.default_rng(3)
    src, dst = _skewed_graph("star", rng)
    o = _oracle_of(src, dst)
    g = GraphEngine(epsilon="1/2", adaptive=False)
    g.load((src, dst))
    g.snapshot(tmp_path / "s")
    r = GraphEngine.restore(tmp_path / "s")
    E = r.rels[0]
    assert sum(p.bits_rows() for p in (E.h, E.l, E.ht)) > 0
    r.check_invariants()
    nv = int(max(src.max(), dst.max())) + 5
    for batch in graph_batches(o, rng, n_batches=3, nv=nv, max_batch=200, hub_p=0.4):
        r.apply(batch)
        assert r.count() == _scipy_triangles(o.edges)
    r.check_invariants()
