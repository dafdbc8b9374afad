"""The compiled batch bookkeeping (kernels/phase_kernels.py, store_kernels.rows_to_compact,
batch_prep.symmetric_delta) against the NumPy formulas they replace, on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import batch_prep, phase_kernels, store_kernels

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
    """The engine's NumPy formulas (engine._phase before the kernel, still its device path)."""
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
