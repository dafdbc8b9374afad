"""Exact thresholds N^ε (gpu_ivm/rational.py), checked against their definition in integers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gpu_ivm.rational import Thresholds


def _smallest(num: int, den: int, n: int, eps: Fraction) -> int:
    """The smallest d >= 0 with d >= (num/den)·n^eps, by its definition: (d·den)^q >= num^q·n^p,
    searched from 0 (an oracle for small n only)."""
    p, q = eps.numerator, eps.denominator
    d = 0
    while (d * den) ** q < num**q * n**p:
        d += 1
    return d


@pytest.mark.parametrize("eps", [Fraction(0), Fraction(1, 3), Fraction(1, 2), Fraction(7, 12),
                                 Fraction(2, 3), Fraction(1)])
def test_thresholds_match_their_definition(eps: Fraction) -> None:
    rng = np.random.default_rng(7)
    for n in [1, 2, 3, 26, 27, 28, 1000, *rng.integers(1, 5000, 20).tolist()]:
        t = Thresholds.of(n, eps)
        assert (t.n, t.eps) == (n, eps)
        assert t.strict == _smallest(1, 1, n, eps), (n, eps)
        assert t.up == _smallest(3, 2, n, eps), (n, eps)
        assert t.down == _smallest(1, 2, n, eps), (n, eps)
        assert t.all_heavy == (eps == 0)


def test_remembered_thresholds_do_not_depend_on_the_argument_types() -> None:
    """The cut-offs are remembered per (N, ε): a NumPy integer N, or ε given as the int 1,
    gets the same value with N an int and ε a Fraction, whatever was asked first."""
    a = Thresholds.of(np.int64(40_001), 1)
    b = Thresholds.of(40_001, Fraction(1))
    assert a == b and type(a.n) is int and isinstance(a.eps, Fraction)
    c = Thresholds.of(np.int64(40_003), Fraction(1, 2))
    assert c.strict == _smallest(1, 1, 40_003, Fraction(1, 2)) == 201
    assert type(c.n) is int
