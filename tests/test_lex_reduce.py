"""``kernels.lex_reduce.reduce_sorted`` (consolidate and marginalize of the query engine) against
a dictionary sum over Python ints, including sums at the edge of int64."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels.lex_reduce import reduce_sorted

from gpu_ivm.errors import IntegerOverflowError

BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def _oracle(keys: np.ndarray, mult: np.ndarray, p: int) -> list:
    sums: dict = {}
    for row, v in zip(keys[:, :p].tolist(), mult.tolist()):
        sums[tuple(row)] = sums.get(tuple(row), 0) + v
    return sorted((key, v) for key, v in sums.items() if v)


@pytest.mark.parametrize("seed", range(6))
def test_random_groups_every_prefix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    keys = rng.integers(-2, 3 + seed, (n, 3))
    keys = keys[np.lexsort(keys.T[::-1])]
    mult = rng.integers(-3, 4, n)
    for p in range(4):
        k, m = reduce_sorted(keys, mult, p)
        assert k.shape == (len(m), p) and k.dtype == m.dtype == np.int64
        assert [(tuple(r), v) for r, v in zip(k.tolist(), m.tolist())] == _oracle(keys, mult, p)


def test_int64_edges() -> None:
    one = np.zeros((3, 1), np.int64)
    # partial sums leave int64, the total does not: summed exactly
    assert reduce_sorted(one, np.array([BIG, 5, -10]), 1)[1].tolist() == [BIG - 5]
    assert reduce_sorted(one, np.array([SMALL, -5, 10]), 1)[1].tolist() == [SMALL + 5]
    assert reduce_sorted(one, np.array([BIG, BIG, -BIG]), 1)[1].tolist() == [BIG]
    for mult in ([BIG, 1, 0], [SMALL, -1, 0], [BIG, BIG, BIG]):
        with pytest.raises(IntegerOverflowError, match=r"key \[0\]"):
            reduce_sorted(one, np.array(mult), 1)
    # an overflowing group elsewhere does not hide behind exact ones
    keys = np.array([[1], [2], [2]])
    with pytest.raises(IntegerOverflowError, match=r"key \[2\]"):
        reduce_sorted(keys, np.array([1, BIG, 1]), 1)


def test_refuses_shapes_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        reduce_sorted(np.zeros((2, 2), np.int64), np.zeros(2, np.int64), 3)
    with pytest.raises(ValueError):
        reduce_sorted(np.zeros((2, 2), np.int64), np.zeros(3, np.int64), 1)
