"""The query engine's expand-join kernel (kernels/lex_expand.py), the int64 product test it uses,
and the operator sets (gpu_ivm.cq.ops), against brute force: random runs with a hub key,
empty sides, multiplicities > 1, every output mode, fenced runs, and products that leave
int64."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gpu_ivm.kernels.int64_checks import mul_overflows
from gpu_ivm.kernels.lex_expand import LEFT, PRODUCT, RIGHT, expand_join
from gpu_ivm.kernels.lex_search import fences

from gpu_ivm.cq import ops
from gpu_ivm.errors import IntegerOverflowError

I64 = (-(2 ** 63), 2 ** 63 - 1)


def brute(left_keys, left_mult, probes, keys, mult, skip, how):
    """The expand-join by nested loops over Python ints."""
    rows, ms = [], []
    p = probes.shape[1]
    for q in range(left_keys.shape[0]):
        for r in range(keys.shape[0]):
            if keys[r, :p].tolist() == probes[q].tolist():
                rows.append(left_keys[q].tolist() + keys[r, skip:].tolist())
                lm, rm = int(left_mult[q]), int(mult[r])
                ms.append(lm * rm if how == PRODUCT else lm if how == LEFT else rm)
    return rows, ms


def sorted_run(rng, n: int, cols: int, hub: bool = True):
    keys = rng.integers(0, 6, (n, cols))
    if hub and n:
        keys[rng.random(n) < 0.5, 0] = 0  # a hub key: half the rows start with 0
    keys = np.unique(keys, axis=0) if n else keys.astype(np.int64)
    mult = rng.integers(1, 4, keys.shape[0]) * rng.choice([-1, 1], keys.shape[0])
    return np.ascontiguousarray(keys, dtype=np.int64), mult.astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_expand_join_against_nested_loops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for n_left, n_run, cols, p in itertools.product((0, 1, 40), (0, 1, 60), (1, 2, 3),
                                                     (0, 1, 2)):
        if p > cols:
            continue
        keys, mult = sorted_run(rng, n_run, cols)
        left = np.ascontiguousarray(rng.integers(0, 6, (n_left, 2)), dtype=np.int64)
        left_mult = rng.integers(-3, 4, n_left).astype(np.int64)
        probes = np.ascontiguousarray(rng.integers(0, 6, (n_left, p)), dtype=np.int64)
        probes[rng.random(n_left) < 0.5] = 0  # probes of the hub
        for skip, how in ((p, PRODUCT), (0, LEFT), (min(cols, 1), RIGHT)):
            k, m = expand_join(left, left_mult, probes, keys, mult, skip, how)
            rows, ms = brute(left, left_mult, probes, keys, mult, skip, how)
            assert k.shape == (len(rows), 2 + cols - skip)
            assert k.tolist() == rows and m.tolist() == ms


def test_expand_join_with_fences_and_a_hub() -> None:
    """A run large enough for fences; one probe matches 30,000 rows."""
    rng = np.random.default_rng(3)
    keys = np.stack([np.r_[np.zeros(30000, np.int64), rng.integers(1, 500, 10000)],
                     rng.integers(0, 10 ** 6, 40000)], axis=1)
    keys = np.unique(keys, axis=0)
    mult = rng.integers(1, 5, keys.shape[0]).astype(np.int64)
    probes = np.array([[0], [7], [1000], [0]], np.int64)
    left = np.array([[1], [2], [3], [4]], np.int64)
    k, m = expand_join(left, np.array([2, 1, 1, -1]), probes, keys, mult, 1, PRODUCT,
                       fences(keys))
    k2, m2 = expand_join(left, np.array([2, 1, 1, -1]), probes, keys, mult, 1, PRODUCT)
    assert np.array_equal(k, k2) and np.array_equal(m, m2)
    hub = keys[:, 0] == 0
    sevens = keys[:, 0] == 7
    assert k.shape[0] == 2 * hub.sum() + sevens.sum()
    assert m.tolist() == (2 * mult[hub]).tolist() + mult[sevens].tolist() + (-mult[hub]).tolist()


def test_expand_join_refuses_products_outside_int64() -> None:
    big = 2 ** 62
    keys = np.array([[1, 5], [1, 6], [2, 7]], np.int64)
    left = np.array([[1], [2]], np.int64)
    k, m = expand_join(left, np.array([2, -2]), left, keys, np.array([1, -1, big]), 1)
    assert m.tolist() == [2, -2, -(2 ** 63)]  # -2 · 2^62 = -2^63 fits
    with pytest.raises(IntegerOverflowError, match=r"\[2\]"):
        expand_join(left, np.array([2, 2]), left, keys, np.array([1, -1, big]), 1)
    with pytest.raises(IntegerOverflowError):
        expand_join(left, np.array([-2, 1]), left, keys, np.array([-big, 1, 1]), 1)
    k, m = expand_join(left, np.array([-2, 1]), left, keys, np.array([-big, 1, 1]), 1, LEFT)
    assert m.tolist() == [-2, -2, 1]  # LEFT and RIGHT multiply nothing


def test_expand_join_refuses_shapes() -> None:
    keys = np.zeros((2, 2), np.int64)
    with pytest.raises(ValueError):
        expand_join(keys, np.zeros(2), np.zeros((2, 3)), keys, np.zeros(2), 0)
    with pytest.raises(ValueError):
        expand_join(keys, np.zeros(2), np.zeros((1, 1)), keys, np.zeros(2), 0)
    with pytest.raises(ValueError):
        expand_join(keys, np.zeros(2), np.zeros((2, 1)), keys, np.zeros(2), 3)


def test_mul_overflows_against_python_ints() -> None:
    import numba as nb

    @nb.njit
    def all_pairs(a, b):
        out = np.empty(a.shape[0], np.bool_)
        for i in range(a.shape[0]):
            out[i] = mul_overflows(a[i], b[i])
        return out

    lo, hi = I64
    edge = [0, 1, -1, 2, -2, 3, -3, hi, lo, hi // 2, lo // 2, hi // 2 + 1, lo // 2 - 1,
            2 ** 31, 2 ** 32, -(2 ** 31), -(2 ** 32), 3037000499, 3037000500, -3037000499,
            -3037000500, hi // 3, lo // 3, lo // 3 - 1, hi // 3 + 1]
    rng = np.random.default_rng(0)
    vals = edge + rng.integers(lo, hi, 60, dtype=np.int64).tolist() + \
        rng.integers(-2 ** 33, 2 ** 33, 60).tolist()
    a, b = zip(*itertools.product(vals, vals))
    want = [not lo <= x * y <= hi for x, y in zip(a, b)]
    got = all_pairs(np.array(a, np.int64), np.array(b, np.int64))
    assert got.tolist() == want and 0 < sum(want) < len(want)


def test_operator_sets_switch_by_context() -> None:
    assert ops.current() is ops.cpu_ops()
    fake = ops.Ops("fake", *([lambda *a, **k: None] * 6))
    with ops.using(fake):
        assert ops.current().name == "fake"
        with ops.using(ops.cpu_ops()):
            assert ops.current().name == "cpu"
        assert ops.current().name == "fake"
    assert ops.current().name == "cpu"
    assert ops.for_backend("cpu") is ops.cpu_ops()
