"""``epsilon="auto"``: the engine picks ε from the degree distribution at each rebuild.

IVM^ε with threshold θ = N^ε bounds the work of one update by the larger of two quantities
(docs/design.md, "Choosing ε"): the degree of a light key that the update's delta iterates
over (light keys have degree < θ), and the number of heavy keys (the heavy keys a delta
iterates over instead). ε = 1/2 balances both at √N, but each heavy key also costs view
maintenance on every update next to it, so on a graph whose largest degrees are only a few
times √N (R-MAT) ε = 1 — no heavy keys, no views — is faster, while on a graph with keys of
degree far above √N (celebrities) an update between two of them costs their degree at ε = 1.

The rule: among the candidates ε = k/24 (k = 24 down to 12), take the largest — the fewest
heavy keys, the least view maintenance — whose modelled worst-case work per update,
``max(largest light degree an update can iterate over, number of heavy keys)``, stays within
``WORK_FACTOR``·⌈√N⌉; ε = 1/2 always qualifies (the fallback). In the undirected graph each
update is evaluated in its cheaper orientation, so the light degree that counts there is the
second largest (an update between the two largest light keys iterates over the smaller one);
elsewhere it is the largest. Everything is compared in integers: the degree cut-off of each
candidate is :meth:`Thresholds.of` ``(n, ε).strict`` (exact, see :mod:`gpu_ivm.rational`).

>>> import numpy as np
>>> n = 2 * 2 * 10_000 + 1                       # N of a graph with 10,000 edges
>>> flat = np.full(2_000, 10)                    # every degree far below √N = 201
>>> choose_epsilon(n, flat, symmetric=True)
Fraction(1, 1)
>>> stars = np.r_[flat, [5_000, 5_000]]          # two keys of degree 25·√N
>>> eps = choose_epsilon(n, stars, symmetric=True)
>>> eps < 1, heavy_keys(n, eps, stars)            # the two stars become heavy
(True, 2)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .rational import Thresholds

#: the modelled worst-case work per update may reach this multiple of ⌈√N⌉ (measured: on
#: R-MAT, whose largest degrees are 3-6·√N, ε = 1 beat ε = 1/2 by up to 3.7x; see
#: docs/benchmarks.md)
WORK_FACTOR = 4

#: the candidate exponents, largest first: k/24 for k = 24 .. 12
CANDIDATES: tuple[Fraction, ...] = tuple(Fraction(k, 24) for k in range(24, 11, -1))

AUTO = "auto"


def _host_degrees(degrees) -> np.ndarray:
    """``degrees`` as a host int64 array (a CuPy array is copied down)."""
    d = degrees.get() if hasattr(degrees, "get") else degrees
    return np.asarray(d, dtype=np.int64)


def _sorted_degrees(degrees) -> np.ndarray:
    d = _host_degrees(degrees)
    return np.sort(d[d > 0])


def heavy_keys(n: int, eps: Fraction, degrees) -> int:
    """How many keys a strict partition with threshold ``n``^``eps`` makes heavy."""
    d = _sorted_degrees(degrees)
    return int(d.shape[0] - np.searchsorted(d, Thresholds.of(n, eps).strict, "left"))


def worst_case_work(n: int, eps: Fraction, degrees, symmetric: bool) -> int:
    """The modelled worst-case work of one update at ``eps`` (see the module docstring)."""
    return _work(n, eps, _sorted_degrees(degrees), symmetric)


def _work(n: int, eps: Fraction, d: np.ndarray, symmetric: bool) -> int:
    cut = int(np.searchsorted(d, Thresholds.of(n, eps).strict, "left"))
    heavy = d.shape[0] - cut
    rank = 2 if symmetric else 1  # which largest light degree an update can be made to pay
    light = int(d[cut - rank]) if cut >= rank else 0
    return max(light, heavy)


def work_bound(n: int) -> int:
    """``WORK_FACTOR``·⌈√n⌉, the most modelled work per update the rule accepts."""
    return WORK_FACTOR * Thresholds.of(n, Fraction(1, 2)).strict


def _deciding_degrees(n: int, degrees) -> np.ndarray:
    """The sorted degrees that decide :func:`_work` for every candidate: those at or above
    ε = 1/2's cut-off (the smallest of the candidates'), and the two largest below it (an
    update's light degree below any cut-off is among them). :func:`_work` on these equals
    :func:`_work` on all the degrees, and costs a few linear passes instead of a sort of every
    key (28 ms for 2²⁰ keys here, at each major rebalancing of an automatic ε)."""
    d = _host_degrees(degrees)
    cut = max(Thresholds.of(n, Fraction(1, 2)).strict, 1)
    big = d[d >= cut]
    below = np.where(d < cut, d, 0)  # zeros and negatives never count (no key)
    top = []
    for _ in range(2):  # the two largest below the cut (np.partition: 9 ms for 2²⁰ keys)
        i = int(below.argmax()) if below.shape[0] else 0
        if not below.shape[0] or below[i] <= 0:
            break
        top.append(int(below[i]))
        below[i] = 0
    return np.sort(np.concatenate([np.array(top, np.int64), big]))


def choose_epsilon(n: int, degrees, symmetric: bool) -> Fraction:
    """ε for a strict partition with base ``n`` of keys with these degrees (any array; zeros
    are ignored): the largest candidate whose worst-case work fits the bound."""
    bound = work_bound(n)
    d = _deciding_degrees(n, degrees)
    for eps in CANDIDATES:
        if _work(n, eps, d, symmetric) <= bound:
            return eps
    return Fraction(1, 2)
