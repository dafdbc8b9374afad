"""Overflow tests for int64 arithmetic inside compiled kernels (CPU and CUDA alike).

A test on the wrapped result of a signed addition (``s = a + b`` then "the signs of a and b
agree and s's differs") is undefined behaviour to LLVM, which may assume that signed additions
do not wrap and fold the test away: one such check in this project never fired. These tests
compare *before* the operation, with no intermediate value outside int64.

>>> add_overflows(np.int64(2 ** 62), np.int64(2 ** 62)), add_overflows(np.int64(-5), np.int64(3))
(True, False)
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["I64_MAX", "I64_MIN", "add_overflows"]

I64_MAX = np.int64(np.iinfo(np.int64).max)
I64_MIN = np.int64(np.iinfo(np.int64).min)


@nb.njit(cache=True, inline="always")
def add_overflows(a, b):
    """Whether ``a + b`` leaves the int64 range (tested before adding)."""
    return (b > 0 and a > I64_MAX - b) or (b < 0 and a < I64_MIN - b)
