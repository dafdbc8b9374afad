"""The compiled batch bookkeeping (kernels/phase_kernels.py, store_kernels.rows_to_compact,
batch_prep.symmetric_delta) against the NumPy formulas they replace, on random inputs; the
same formulas remain the device path of ``PartRel.track_lights`` and
``AdaptivePolicy.units``."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import batch_prep, phase_kernels, store_kernels, view_kernels

from gpu_ivm.encoding import pack, transpose


def _random_phase(rng, ids: int, n: int):
    keys = np.unique(pack(rng.integers(0, ids, n), rng.integers(0, ids, n)))
    old = rng.integers(0, 3, keys.shape[0])
    deltas = rng.integers(-2, 3, keys.shape[0])
    live_h = rng.integers(0, 6, ids)
    live_l = rng.integers(0, 6, ids)
    heavy = rng.random(ids) < 0.4
    return keys, old, deltas, live_h, live_l, heavy


def _numpy_phase(keys, old, deltas, live_h, live_l, heavy, up, down):
    """The engine's NumPy formulas (engine._phase's before the compiled passes; a device now
    runs kernels/cuda_phase.py, checked against phase_degrees in tests/cuda_sim_cases.py)."""
    firsts = keys >> 32
    sc = ((old + deltas) != 0).astype(np.int64) - (old != 0)
    starts = np.flatnonzero(np.r_[True, firsts[1:] != firsts[:-1]])
    ux = firsts[starts]
    deg = live_h[ux] + live_l[ux] + np.add.reduceat(sc, starts)
    hv = heavy[ux]
    return (ux, deg, ux[~hv & (deg >= up)], ux[hv & (deg < down) & (deg > 0)],
            ux[hv & (deg == 0)])


@pytest.mark.parametrize("seed", range(6))
def test_phase_degrees_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    ids = int(rng.integers(2, 40))
    args = _random_phase(rng, ids, int(rng.integers(1, 200)))
    up, down = int(rng.integers(1, 12)), int(rng.integers(1, 8))
    got = phase_kernels.phase_degrees(*args, up, down)
    want = _numpy_phase(*args, up, down)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    ih, il = phase_kernels.split_heavy(args[0], args[5])
    hm = args[5][args[0] >> 32]
    np.testing.assert_array_equal(ih, np.flatnonzero(hm))
    np.testing.assert_array_equal(il, np.flatnonzero(~hm))


def test_thresholds_beyond_int64_are_clipped():
    assert phase_kernels.clip_threshold(1 << 70) == (1 << 63) - 1
    assert phase_kernels.clip_threshold(5) == 5
    keys = pack(np.array([0]), np.array([1]))
    _, _, up, _, _ = phase_kernels.phase_degrees(
        keys, np.zeros(1, np.int64), np.ones(1, np.int64), np.zeros(2, np.int64),
        np.zeros(2, np.int64), np.zeros(2, np.bool_), phase_kernels.clip_threshold(1 << 70), 1)
    assert up.shape[0] == 0


@pytest.mark.parametrize("seed", range(4))
def test_rows_to_compact_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    ids = 30
    keys = np.unique(pack(rng.integers(0, ids, 80), rng.integers(0, ids, 80)))
    tomb = rng.integers(0, 80, ids)
    live = rng.integers(0, 40, ids)
    fx = keys >> 32
    first = np.r_[True, fx[1:] != fx[:-1]]
    want = fx[first & (tomb[fx] > live[fx] + 32)]
    np.testing.assert_array_equal(store_kernels.rows_to_compact(keys, tomb, live, 32), want)


@pytest.mark.parametrize("ids", [50, 5000, 2**31 - 1])  # counting sort; argsort; 32-bit ids
@pytest.mark.parametrize("seed", range(4))
def test_symmetric_delta_equals_both_orientations(seed, ids):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, ids, 120)
    b = rng.integers(0, ids, 120)
    keep = a < b
    gkey = np.unique(pack(a[keep], b[keep]))
    net = rng.integers(-1, 2, gkey.shape[0])
    keys, vals = batch_prep.symmetric_delta(gkey, net)
    tkey = transpose(gkey)
    want = np.r_[gkey, tkey]
    order = np.argsort(want)
    np.testing.assert_array_equal(keys, want[order])
    np.testing.assert_array_equal(vals, np.r_[net, net][order])
    counted = batch_prep.transpose_order(gkey)
    assert (counted is not None) == (ids == 50)  # which branch this case exercised
    if counted is not None:
        np.testing.assert_array_equal(tkey[counted], np.sort(tkey))


@pytest.mark.parametrize("seed", range(6))
def test_watch_lights_equals_numpy(seed):
    """The auto-ε watch in one pass against PartRel.track_lights' NumPy formula."""
    rng = np.random.default_rng(100 + seed)
    ids = int(rng.integers(2, 60))
    ux = np.unique(rng.integers(0, ids, int(rng.integers(0, 40))))
    deg = rng.integers(0, 12, ux.shape[0])
    heavy = rng.random(ids) < 0.3
    over0 = rng.random(ids) < 0.3
    watch = int(rng.integers(0, 10))
    want = over0.copy()
    new = ~heavy[ux] & (deg > watch)
    change = int(new.sum() - want[ux].sum())
    want[ux] = new
    got = over0.copy()
    assert phase_kernels.watch_lights(ux, deg, heavy, got, watch) == change
    assert np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(6))
def test_delta_units_equals_numpy(seed):
    """The adaptive policy's work estimate in one pass against its NumPy formula."""
    rng = np.random.default_rng(200 + seed)
    ids = int(rng.integers(2, 60))
    keys = np.unique(pack(rng.integers(0, ids, 80), rng.integers(0, ids, 80)))
    nl, nh, pht = (rng.integers(0, 50, ids) for _ in range(3))
    x, y = keys >> 32, keys & 0xFFFFFFFF
    want = 4 * keys.shape[0] + nl[y].sum() + np.minimum(nh[y], pht[x]).sum() + pht[x].sum()
    assert phase_kernels.delta_units(keys, nl, nh, pht) == want


@pytest.mark.parametrize("seed", range(6))
def test_rows_to_promote_equals_numpy(seed):
    """The view's dense-row promotion check in one pass against its NumPy formula."""
    rng = np.random.default_rng(300 + seed)
    ids = int(rng.integers(2, 60))
    fx = np.sort(rng.integers(0, ids, int(rng.integers(0, 80))))
    live = rng.integers(0, 40, ids)
    cap, frac, dmin = int(rng.integers(1, 100)), 4, int(rng.integers(1, 30))
    first = np.r_[True, fx[1:] != fx[:-1]] if fx.shape[0] else np.zeros(0, bool)
    want = fx[first & (live[fx] * frac >= cap) & (live[fx] >= dmin)]
    assert np.array_equal(view_kernels.rows_to_promote(fx, live, cap, frac, dmin), want)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 2_000, 30_000])
def test_packed_order_is_the_stable_sort(seed, n):
    """The radix order of packed keys equals NumPy's stable argsort: duplicates (a batch's
    rows of one edge) in row order, ids from a few to the largest a key holds."""
    rng = np.random.default_rng(seed)
    for a_hi, b_hi in ((8, 8), (3_000, 70_000), (1 << 31, (1 << 32) - 1), (1, 1 << 20)):
        keys = pack(rng.integers(0, a_hi, n), rng.integers(0, b_hi, n))
        if n > 4:  # repeated keys, as a batch's rows of one edge
            keys[rng.integers(0, n, n // 4)] = keys[0]
        assert np.array_equal(batch_prep.packed_order(keys), np.argsort(keys, kind="stable"))


def test_packed_order_sorts_any_int64_by_comparison():
    """A key below 0 (not a packed pair) is still sorted, stably, by comparison."""
    keys = np.array([5, -3, 7, -3, 0] * 40, np.int64)
    assert np.array_equal(batch_prep.packed_order(keys), np.argsort(keys, kind="stable"))
