"""The int64 overflow guard: a batch is refused, before any change, unless every value the
engine computes for it provably fits in int64.

The bound is Friedgut's weighted form of the triangle (AGM) bound: for nonnegative functions
f, g, h on pairs, Σ_{a,b,c} f(a,b)·g(b,c)·h(c,a) <= ‖f‖₂·‖g‖₂·‖h‖₂, and for two factors
(Cauchy–Schwarz) Σ_b f(a,b)·g(b,c) <= ‖f‖₂·‖g‖₂. Every int64 value of a batch — the count Q
before and after it, the count delta and each partial sum of it, the path weights, every entry
of the bilinear views and of the free-query views (per-vertex and per-edge counts, listed
triangles), before, during and after the batch — is a sum of such products of absolute
multiplicities taken from the old state K, the new state K + δ or the update δ, so with

    X_k = ‖K_k‖₂ + ‖δ_k‖₂  (>= ‖K_k + δ_k‖₂, >= ‖δ_k‖₂)

it is bounded by Π_k max(1, X_k) times the number of product terms it adds up (the graph form's
count delta 3·tr(Δ·E²) + 3·tr(Δ²·E) + tr(Δ³) has coefficients summing to 8). The guard refuses
a batch when ``SAFETY · Π_k max(1, X_k) >= 2**63`` with ``SAFETY = 16``, i.e. it accepts every
batch with Π_k max(1, X_k) < 2**59. The bound is tight for the count: R, S, T with one triangle
of multiplicities m_R, m_S, m_T (and nothing else) give Q = Π m_k = Π ‖K_k‖₂.

‖K_k‖₂² (the sum of squared multiplicities of relation k) is carried as an upper bound from
batch to batch (‖K + δ‖₂ <= ‖K‖₂ + ‖δ‖₂, so a batch reads no stored value); it is exact after a
rebuild, and whenever the bounds would refuse a batch they are first recounted exactly from the
stored tuples (one pass), so a batch is only ever refused on exact norms: deletes, and updates
that cancel, never make the guard stricter.

>>> sum_squares(np, np.array([3, -4, 1 << 40]))
1208925819614629174706201
>>> isqrt_ceil(10), isqrt_ceil(9)
(4, 3)
>>> refuses([2**20] * 3), refuses([2**20, 2**20, 2**19 - 1])
(True, False)
"""

from __future__ import annotations

import math

import numpy as np

SAFETY = 16  # product terms a checked value may add up (the graph form's ΔQ has 8)
LIMIT = (1 << 63) // SAFETY  # Π max(1, X_k) must stay below this (2**59)
VALUE_LIMIT = 1 << 62  # no single multiplicity may reach this
_SMALL = 1 << 31  # |v| below this: v² fits int64 and splits into two exact 31-bit sums


def isqrt_ceil(n: int) -> int:
    """⌈√n⌉ for an int n >= 0 (exact)."""
    r = math.isqrt(n)
    return r if r * r == n else r + 1


def sum_squares(xp, vals) -> int:
    """Σ v² over an int64 array (NumPy or CuPy ``xp``) as an exact Python int.

    Values below 2**31 in magnitude are squared in int64 and summed as two 31-bit halves (exact
    for fewer than 2**32 values); larger ones (rare: they are near the overflow limit anyway) are
    summed as Python ints."""
    if vals.shape[0] == 0:
        return 0
    a = xp.abs(xp.asarray(vals, dtype=np.int64))
    small = a < _SMALL
    s = a[small]
    sq = s * s
    total = (int((sq >> 31).sum()) << 31) + int((sq & (_SMALL - 1)).sum())
    big = a[~small]
    if big.shape[0]:
        host = big.get() if hasattr(big, "get") else big
        total += sum(int(v) * int(v) for v in host.tolist())
    return total


def max_abs(xp, vals) -> int:
    """max |v| of an int64 array as a Python int (0 when empty)."""
    return int(xp.abs(vals).max()) if vals.shape[0] else 0


def refuses(norm_bounds: list[int]) -> bool:
    """True when Π max(1, X_k) over the per-relation norm bounds X_k reaches ``LIMIT``."""
    p = 1
    for x in norm_bounds:
        p *= max(1, int(x))
    return p >= LIMIT
