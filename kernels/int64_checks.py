"""Overflow tests for int64 arithmetic inside compiled kernels (CPU and CUDA alike).

A test on the wrapped result of a signed addition (``s = a + b`` then "the signs of a and b
agree and s's differs") is undefined behaviour to LLVM, which may assume that signed additions
do not wrap and fold the test away: one such check in this project never fired. These tests
compare *before* the operation, with no intermediate value outside int64.

>>> add_overflows(np.int64(2 ** 62), np.int64(2 ** 62)), add_overflows(np.int64(-5), np.int64(3))
(True, False)
>>> mul_overflows(np.int64(2 ** 32), np.int64(2 ** 31)), mul_overflows(np.int64(-4), np.int64(5))
(True, False)
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["I64_MAX", "I64_MIN", "add_overflows", "mul_overflows"]

I64_MAX = np.int64(np.iinfo(np.int64).max)
I64_MIN = np.int64(np.iinfo(np.int64).min)


@nb.njit(cache=True, inline="always")
def add_overflows(a, b):
    """Whether ``a + b`` leaves the int64 range (tested before adding)."""
    return (b > 0 and a > I64_MAX - b) or (b < 0 and a < I64_MIN - b)


@nb.njit(cache=True, inline="always")
def mul_overflows(a, b):
    """Whether ``a * b`` leaves the int64 range (tested before multiplying, by floor
    divisions that cannot overflow: ``x > y / z`` for an integer x is ``x > y // z``)."""
    if a == 0 or b == 0:
        return False
    if a > 0:
        if b > 0:
            return a > I64_MAX // b
        return b != -1 and a > I64_MIN // b  # a·b < MIN  <=>  a > MIN / b
    if b > 0:
        return a != -1 and b > I64_MIN // a
    if a == I64_MIN or b == I64_MIN:  # the other factor is <= -1: the product is >= 2^63
        return True
    return -a > I64_MAX // -b
