"""Exact rational ε and integer heavy/light thresholds.

Thresholds N^ε are never computed in floating point (``27 ** (1/3)`` is ``3.0000000000000004``
in Python): with ε = p/q, ``deg >= c·N^ε`` is decided as ``(deg/c)^q >= N^p`` in integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from numbers import Rational

from .errors import InputError

EpsilonLike = str | Fraction | int | float
"""What ``epsilon=`` accepts: ``"1/2"``, ``Fraction(1, 2)``, ``0``, ``1``, ``0.5`` (in [0, 1])."""


def parse_epsilon(value: object) -> Fraction:
    """Return ε as an exact :class:`~fractions.Fraction` in [0, 1].

    Accepts a Fraction, an int (0 or 1), a string such as ``"1/2"`` or ``"0.5"``, or a float
    that is within 1e-12 of a fraction with denominator at most 1000 (so ``1/3`` works).

    Examples
    --------
    >>> parse_epsilon("1/3")
    Fraction(1, 3)
    >>> parse_epsilon(0.5)
    Fraction(1, 2)
    """
    if isinstance(value, bool):
        raise InputError(f"epsilon must be a number in [0, 1], got {value!r}", column="epsilon")
    try:
        if isinstance(value, Rational):
            eps = Fraction(value)
        elif isinstance(value, float):
            eps = Fraction(value).limit_denominator(1000)
            if abs(float(eps) - value) > 1e-12:
                raise InputError(
                    f"epsilon {value!r} is not a simple fraction; pass a string such as '3/7'",
                    column="epsilon",
                )
        elif isinstance(value, str):
            eps = Fraction(value.strip())
        else:
            raise TypeError
    except (ValueError, TypeError, ZeroDivisionError):
        raise InputError(f"epsilon must be a number in [0, 1], got {value!r}",
                         column="epsilon") from None
    if not 0 <= eps <= 1:
        raise InputError(f"epsilon must lie in [0, 1], got {eps}", column="epsilon")
    return eps


def parse_epsilon_setting(value: object) -> Fraction | None:
    """Like :func:`parse_epsilon`, but ``"auto"`` (the engines' default) gives None: the engine
    then picks ε itself at each rebuild (:mod:`gpu_ivm.eps_policy`).

    >>> parse_epsilon_setting("auto") is None, parse_epsilon_setting("1/3")
    (True, Fraction(1, 3))
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    return parse_epsilon(value)


def _iroot_floor(k: int, q: int) -> int:
    """floor(k ** (1/q)) for integers k >= 0, q >= 1, exactly."""
    if k < 2 or q == 1:
        return k
    x = 1 << ((k.bit_length() + q - 1) // q)  # an upper bound
    while True:
        y = ((q - 1) * x + k // x ** (q - 1)) // q
        if y >= x:
            break
        x = y
    while x**q > k:
        x -= 1
    while (x + 1) ** q <= k:
        x += 1
    return x


def _smallest_at_least(num: int, den: int, n: int, eps: Fraction) -> int:
    """Smallest integer d >= 0 with d >= (num/den)·n^eps, exactly."""
    p, q = eps.numerator, eps.denominator
    # d >= (num/den)·n^(p/q)  <=>  (d·den)^q >= num^q · n^p
    rhs = num**q * n**p
    d = _iroot_floor(rhs, q) // den
    while (d * den) ** q < rhs:
        d += 1
    while d > 0 and ((d - 1) * den) ** q >= rhs:
        d -= 1
    return d


@dataclass(frozen=True)
class Thresholds:
    """Integer degree cut-offs for threshold θ = N^ε.

    Attributes
    ----------
    strict : int
        heavy iff degree >= strict (strict partition: θ); used at preprocessing and major
        rebalancing.
    up : int
        a light key with degree >= up (= ⌈3/2·θ⌉) moves to the heavy part.
    down : int
        a heavy key with degree < down (= ⌈1/2·θ⌉) moves to the light part.
    all_heavy : bool
        ε = 0: every key is heavy (the paper's special case).
    """

    n: int
    eps: Fraction
    strict: int
    up: int
    down: int
    all_heavy: bool

    @classmethod
    def of(cls, n: int, eps: Fraction) -> Thresholds:
        """Cut-offs for base N = ``n`` and exponent ``eps``.

        >>> t = Thresholds.of(27, Fraction(1, 3))
        >>> (t.strict, t.up, t.down)
        (3, 5, 2)
        """
        return _thresholds(int(n), eps.numerator, eps.denominator)


@lru_cache(maxsize=1024)
def _thresholds(n: int, p: int, q: int) -> Thresholds:
    """:meth:`Thresholds.of`, remembered: the value is immutable, and the same few (N, ε)
    come back at every major rebalancing and every choice of ε (three exact integer roots a
    call: 3–13 µs here, and ``choose_epsilon`` asks for two or more per rebalancing)."""
    eps = Fraction(p, q)
    return Thresholds(n=n, eps=eps, strict=_smallest_at_least(1, 1, n, eps),
                      up=_smallest_at_least(3, 2, n, eps), down=_smallest_at_least(1, 2, n, eps),
                      all_heavy=eps == 0)
