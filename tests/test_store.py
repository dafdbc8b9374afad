"""The sorted-run store and the view store against dicts, with tiny thresholds forcing every
structural path (directories, merges, tombstones, per-key compaction, dense view rows)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_row_index import _ref_add

from gpu_ivm import store as store_mod
from gpu_ivm import views as views_mod
from gpu_ivm.store import ZStore
from gpu_ivm.views import ViewStore


@pytest.fixture(params=["default", "tiny"])
def thresholds(request, monkeypatch):
    if request.param == "tiny":
        monkeypatch.setattr(store_mod, "DIR_MIN", 4)
        monkeypatch.setattr(store_mod, "DIR_RATIO", 64)
        monkeypatch.setattr(store_mod, "COMPACT_SLACK", 0)
        monkeypatch.setattr(views_mod, "DENSE_MIN", 2)
    return request.param


def check_store(s: ZStore, ref: dict, nkeys: int) -> None:
    keys, vals = s.items()
    assert dict(zip(keys.tolist(), vals.tolist())) == ref
    assert len(s) == len(ref)
    live = np.zeros(s.id_capacity, np.int64)
    for k in ref:
        live[k >> 32] += 1
    assert np.array_equal(live, s.live)
    assert (s.tomb >= 0).all()
    probe = np.array(sorted(set(ref) | {(a << 32) | b for a in range(3) for b in range(3)}),
                     np.int64)
    expect = [ref.get(k, 0) for k in probe.tolist()]
    assert s.get(probe).tolist() == expect
    assert s.get(probe, assume_sorted=True).tolist() == expect
    firsts = np.arange(nkeys, dtype=np.int64)
    ptr, rk, rv = s.rows(firsts)
    for i, x in enumerate(firsts.tolist()):
        got = dict(zip(rk[ptr[i]:ptr[i + 1]].tolist(), rv[ptr[i]:ptr[i + 1]].tolist()))
        assert got == {k: v for k, v in ref.items() if k >> 32 == x}


@given(seed=st.integers(0, 2**32 - 1), nkeys=st.integers(1, 40), base=st.integers(0, 300))
def test_zstore_random_ops(thresholds, seed, nkeys, base):
    rng = np.random.default_rng(seed)
    ref: dict[int, int] = {}
    f = rng.integers(0, nkeys, base)
    sc = rng.integers(0, nkeys, base)
    k0 = np.unique((f << 32) | sc)
    v0 = rng.integers(1, 4, k0.shape[0])
    s = ZStore.from_sorted(k0, v0, nkeys)
    ref.update(zip(k0.tolist(), v0.tolist()))
    for _ in range(30):
        n = int(rng.integers(1, 80))
        if ref and rng.random() < 0.5:  # mostly deletes: tombstones and compaction
            existing = np.array(sorted(ref), np.int64)
            k = np.unique(existing[rng.integers(0, existing.shape[0], n)])
            d = np.array([-ref[x] for x in k.tolist()], np.int64)
            d[rng.random(d.shape[0]) < 0.2] += 1
        else:
            k = np.unique((rng.integers(0, nkeys, n) << 32) | rng.integers(0, nkeys, n))
            d = rng.integers(-2, 3, k.shape[0])
        old = s.add(k, d)
        assert old.tolist() == [ref.get(x, 0) for x in k.tolist()]
        _ref_add(ref, k, d)
        assert s.nruns <= store_mod.MAX_RUNS
        check_store(s, ref, nkeys)


@given(seed=st.integers(0, 2**32 - 1), nkeys=st.integers(1, 30), base=st.integers(0, 200))
def test_zstore_sized_on_the_host(thresholds, monkeypatch, seed, nkeys, base):
    """A device store's way on the host (``padded=True``): set-semantics batches with their
    hints; new runs and merges keep the lengths the host fixed (``PAD_KEY`` behind), and the
    runs are rebuilt into one when dead entries pile up. Same content as a dict and as the
    exact store after every batch; the hint is checked against the counts."""
    monkeypatch.setattr(store_mod, "DEAD_SLACK", 8)
    rng = np.random.default_rng(seed)
    f = rng.integers(0, nkeys, base)
    k0 = np.unique((f << 32) | rng.integers(0, nkeys, base))
    s = ZStore.from_sorted(k0, np.ones(k0.shape[0], np.int64), nkeys)
    padded = ZStore(nkeys, padded=True)
    padded.add(k0, np.ones(k0.shape[0], np.int64), hint=(k0.shape[0], k0.shape[0]))
    ref = dict.fromkeys(k0.tolist(), 1)
    for step in range(30):
        n = int(rng.integers(1, 60))
        k = np.unique((rng.integers(0, nkeys, n) << 32) | rng.integers(0, nkeys, n))
        d = np.array([-1 if x in ref else 1 for x in k.tolist()], np.int64)
        if step % 2:  # delete-heavy: dead entries, merges that drop them, rebuilds
            k, d = k[d < 0], d[d < 0]
        ins = int((d > 0).sum())
        hint = (ins, 2 * ins - d.shape[0])
        assert padded.add(k, d, hint=hint).tolist() == s.add(k, d, hint=hint).tolist()
        _ref_add(ref, k, d)
        assert padded.used - len(padded) <= len(padded) + store_mod.DEAD_SLACK
        check_store(padded, ref, nkeys)
        check_store(s, ref, nkeys)
    k = np.array([(0 << 32) | nkeys], np.int64)  # absent: one new key, not the hint's zero
    with pytest.raises(RuntimeError, match="hint"):
        s.add(k, np.ones(1, np.int64), hint=(0, 1))


def test_zstore_growth_is_logarithmic_in_runs():
    s = ZStore(1 << 12)
    rng = np.random.default_rng(0)
    for _ in range(400):
        k = np.unique((rng.integers(0, 1 << 12, 100) << 32) | rng.integers(0, 1 << 20, 100))
        s.add(k, np.ones(k.shape[0], np.int64))
        sizes = np.diff(s.bounds)
        # every run is more than GROWTH times smaller than its elder (the merge policy)
        assert all(sizes[i + 1] * store_mod.GROWTH <= sizes[i] for i in range(len(sizes) - 1))
    assert s.nruns <= 12


@given(seed=st.integers(0, 2**32 - 1), nkeys=st.integers(2, 30))
def test_viewstore_random_adds(thresholds, seed, nkeys):
    rng = np.random.default_rng(seed)
    ref: dict[int, int] = {}
    v = ViewStore(nkeys)
    for _ in range(25):
        n = int(rng.integers(1, 120))
        a = rng.integers(0, nkeys, n)
        a[rng.random(n) < 0.5] = 0  # a large row, promoted to dense with tiny thresholds
        k = (a << 32) | rng.integers(0, nkeys, n)
        d = rng.integers(-2, 3, n)
        v.add(k, d)
        for x, dx in zip(k.tolist(), d.tolist()):
            val = ref.get(x, 0) + dx
            if val:
                ref[x] = val
            else:
                ref.pop(x, None)
        keys, vals = v.items()
        assert dict(zip(keys.tolist(), vals.tolist())) == ref
        probe = np.array(sorted(ref) + [(nkeys - 1) << 32], np.int64)
        assert v.get(probe).tolist() == [ref.get(x, 0) for x in probe.tolist()]
    if thresholds == "tiny":
        assert v.n_dense >= 1


@pytest.mark.parametrize("seed", range(4))
def test_dense_batches_are_located_by_merging_the_runs(seed, monkeypatch):
    """A batch with one key per ``LOCATE_MERGE_RATIO`` stored entries or more is located by
    walking the runs (``_locate_merge_par``): the old multiplicities ``add`` returns, the
    store after it, and every key's position equal the per-key search's on stores with
    several runs and tombstones (rows compacted as soon as their tombstones outnumber their
    live tuples)."""
    from gpu_ivm.kernels import store_kernels as sk

    monkeypatch.setattr(store_mod, "COMPACT_SLACK", 0)
    rng = np.random.default_rng(seed)
    nkeys = 64
    k0 = np.unique((rng.integers(0, nkeys, 1500) << 32) | rng.integers(0, nkeys, 1500))
    s = ZStore.from_sorted(k0, np.ones(k0.shape[0], np.int64), nkeys)
    ref = dict.fromkeys(k0.tolist(), 1)
    merged = tombs = 0
    for _ in range(12):
        k = np.unique((rng.integers(0, nkeys, 700) << 32) | rng.integers(0, nkeys, 700))
        d = rng.integers(-2, 3, k.shape[0])
        gone = rng.random(k.shape[0]) < 0.5  # exact deletes: tombstones, then compaction
        d[gone] = [-ref.get(x, 0) or 1 for x in k[gone].tolist()]
        st = s.nt()
        tombs = max(tombs, s.tombstones())
        by_merge = sk.locate_by_merge(k, st[2])
        merged += by_merge
        pos_m = np.empty(k.shape[0], np.int64)
        cuts = np.array([0, k.shape[0] // 3, k.shape[0]], np.int64)
        sk._locate_merge_par(st[0], st[2], st[6], k, cuts, pos_m)
        pos_s = np.empty(k.shape[0], np.int64)
        arrays = (st[0], st[2], st[3], st[4], st[5], st[6], st[11], st[12])
        sk._locate_range(*arrays, k, 0, k.shape[0], pos_s, sk._NO_TOMB)
        assert np.array_equal(pos_m, pos_s)
        found = pos_m >= 0
        assert np.array_equal(st[0][pos_m[found]], k[found])
        old = s.add(k, d)
        assert old.tolist() == [ref.get(x, 0) for x in k.tolist()]
        _ref_add(ref, k, d)
        check_store(s, ref, nkeys)
    assert merged >= 6 and tombs > 0  # the merge path and tombstones were exercised
    # keys grouped by first key, the groups out of order (as a view's promotion passes its
    # rows' keys): searched per key, with the same results
    k = np.array(sorted(ref, key=lambda x: (-(x >> 32), x)), np.int64)
    assert not sk.locate_by_merge(k, s.nt()[2]) and k.shape[0] >= sk.PAR_LOCATE_MIN
    d = -np.array([ref[x] for x in k.tolist()], np.int64)
    assert s.add(k, d).tolist() == [ref[x] for x in k.tolist()]
    assert len(s) == 0


@pytest.mark.parametrize("seed", range(3))
def test_keys_located_in_lock_step(seed, monkeypatch):
    """``_locate_lanes_par`` (a chunk's searches advanced together) gives every key the
    position that the group-by-group search gives it, on stores with several runs,
    directories, row bitmaps and tombstones: every live key found where it is stored, a
    key found but not live only at a tombstone, and absent keys, rows with no tuple and
    ids beyond the store not found; with the tombstone counts passed (the bitmap shortcut)
    and without. A graph-like batch (a key or two a row) takes that path in
    ``_locate_sorted``; clustered keys the galloping one."""
    from gpu_ivm.kernels import store_kernels as sk

    monkeypatch.setattr(store_mod, "DIR_MIN", 4)
    monkeypatch.setattr(store_mod, "BITS_FLOOR", 4)
    monkeypatch.setattr(store_mod, "COMPACT_SLACK", 1 << 20)  # tombstones stay
    rng = np.random.default_rng(seed)
    nkeys = 300
    k0 = np.unique((rng.integers(0, nkeys, 6000) << 32) | rng.integers(0, nkeys, 6000))
    s = ZStore.from_sorted(k0, np.ones(k0.shape[0], np.int64), nkeys, bits=True)
    ref = dict.fromkeys(k0.tolist(), 1)
    for m in (1400, 280, 60):  # more runs (each under a quarter of the one before), and
        # tombstones (exact deletes)
        k = np.unique((rng.integers(0, nkeys, m) << 32) | rng.integers(0, nkeys, m))
        d = np.where([x in ref for x in k.tolist()], -1, 1).astype(np.int64)
        s.add(k, d)
        _ref_add(ref, k, d)
    check_store(s, ref, nkeys)
    st = s.nt()
    assert s.nruns >= 3 and s.tombstones() > 0 and (st[11] >= 0).any() and max(st[3]) >= 0
    arrays = (st[0], st[2], st[3], st[4], st[5], st[6], st[11], st[12])
    live = np.array(sorted(ref), np.int64)
    stored = st[0][: st[2][-1]]
    dead = stored[(st[1][: st[2][-1]] == 0) & ((stored & sk.LO_MASK) != sk.SENTINEL)]
    for n, spread in ((37, True), (700, True), (2000, False)):
        if spread:  # a key or two a row: live keys, absent keys, ids beyond the store
            rows = rng.choice(nkeys + 40, n, replace=True)
            k = np.unique((rows << 32) | rng.integers(0, nkeys + 40, n))
            k[: k.shape[0] // 3] = rng.choice(live, k.shape[0] // 3, replace=False)
            k = np.unique(np.concatenate([k, dead[: n // 10]]))
        else:  # every stored key and more: groups of ~20 keys a row
            k = np.unique(np.concatenate([live, (rng.integers(0, nkeys, n) << 32)
                                          | rng.integers(0, nkeys, n)]))
        for tomb in (s.tomb, sk._NO_TOMB):
            pos_g = np.empty(k.shape[0], np.int64)
            sk._locate_range(*arrays, k, 0, k.shape[0], pos_g, tomb)
            pos_l = np.full(k.shape[0], -7, np.int64)
            sk._locate_lanes_par(st, k, pos_l, tomb)
            assert np.array_equal(pos_l, pos_g)
            found = pos_l >= 0
            assert np.array_equal(st[0][pos_l[found]], k[found])
            is_live = np.isin(k, live)
            assert found[is_live].all()
            assert (st[1][pos_l[found & ~is_live]] == 0).all()
            assert not found[(k >> 32) >= nkeys].any()
            pos_s = np.empty(k.shape[0], np.int64)
            sk._locate_sorted(st, k, pos_s, tomb)
            assert np.array_equal(pos_s, pos_g)
        assert (found & ~is_live).any()  # tombstones among the keys found
        groups = sk.first_key_starts(k).shape[0] - 1
        assert (sk.LANES_GROUP_MAX * groups >= k.shape[0]) == spread


@pytest.mark.parametrize("parts", [1, 2, 5, 16])
def test_row_cuts_split_no_row(parts):
    """``lsm.row_cuts``: ascending cuts from 0 to len(keys), each inner one at the start of
    a row (no row split between two chunks), near the even split where rows allow (a batch
    whose first row holds most keys, as R-MAT's small ids do, included)."""
    from gpu_ivm.kernels.lsm import row_cuts

    rng = np.random.default_rng(parts)
    for rows in (rng.integers(0, 50, 3000), np.concatenate([np.zeros(2500, np.int64),
                                                            rng.integers(1, 9, 500)]),
                 np.zeros(0, np.int64), np.arange(7)):
        k = np.unique((rows << 32) | rng.integers(0, 1000, rows.shape[0]))
        c = row_cuts(k, parts)
        assert c.shape[0] == parts + 1 and c[0] == 0 and c[-1] == k.shape[0]
        assert (np.diff(c) >= 0).all()
        first = k >> 32
        for p in c[1:-1]:
            assert p == k.shape[0] or p == 0 or first[p] != first[p - 1]
        # each cut is the first row start at or after its even share
        for i, p in enumerate(c[1:-1], 1):
            even = k.shape[0] * i // parts
            starts = [q for q in range(max(even, c[i - 1]), k.shape[0] + 1)
                      if q == k.shape[0] or q == 0 or first[q] != first[q - 1]]
            assert p == starts[0]
