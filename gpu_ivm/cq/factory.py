"""The planner's engine choice for a query: ``cq.engine(query, epsilon=..., strategy=...)``.

>>> type(engine("Q(C | A) = R(A,B), S(B,C)")).__name__
'Engine'
>>> type(engine("Q(C | A) = R(A,B), S(B,C)", epsilon="1/2")).__name__
'TradeoffEngine'
"""

from __future__ import annotations

from ..errors import InputError
from ..rational import parse_epsilon
from .engine import Engine
from .forks import find_fork
from .syntax import Query
from .tradeoff import TradeoffEngine

__all__ = ["STRATEGIES", "engine"]

STRATEGIES = ("auto", "view_trees")


def engine(query: str | Query, relations=None, *, epsilon=1, backend: str = "cpu",
           mode: str = "general", strategy: str = "auto"):
    """The engine the planner picks for ``query``:

    - a triangle query, ``R(A,B), S(B,C), T(C,A)`` (up to renaming, atom order and argument
      order; self-joins included) with any head: the count ``Q( | )``, ``Q(A | )``,
      ``Q(A,B | )``, ``Q(A,B,C | )`` and their access patterns (``Q( | A)``, ``Q(B | A)``,
      ``Q(B,C | A)``, ``Q(C | A,B)``), at ``epsilon`` 1 (the default):
      :class:`~gpu_ivm.cq.triangle_strategy.TriangleQueryEngine`, IVM^ε's triangle engine
      (which picks its own ε per relation, ``"auto"``, and keeps Δ1, Δ2 or Δ3 as the head
      needs), unless ``strategy="view_trees"``; the pure lookups ``Q( | A,B)`` and
      ``Q( | A,B,C)`` the view trees maintain for less (measured; see
      ``prefers_triangle_engine`` in
      :mod:`~gpu_ivm.cq.triangle_strategy`); (below 1, ``epsilon`` is the CQAP trade-off's,
      which refuses the non-hierarchical triangle as before);
    - :class:`TradeoffEngine` for ε < 1 when the query forks;
    - otherwise ``Engine`` (ε = 1, or a query that never forks, such as a CQAP_0 query, for
      which ε = 1 is the thesis's choice at every ε).

    ``backend`` as for :class:`Engine`; ``mode`` (as for ``Engine``) needs ε = 1 except for
    the triangle engine, which takes both.
    """
    from .triangle_strategy import TriangleQueryEngine, prefers_triangle_engine

    strategy = str(strategy).replace("-", "_")
    if strategy not in STRATEGIES:
        raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}",
                         column="strategy")
    eps = parse_epsilon(epsilon)
    if strategy == "auto" and eps == 1 and prefers_triangle_engine(query):
        return TriangleQueryEngine(query, relations, mode=mode, backend=backend)
    if eps == 1 or find_fork(query) is None:
        return Engine(query, relations, mode=mode, backend=backend)
    if mode not in ("general",):
        raise InputError("mode insert_only / auto runs at epsilon 1", column="mode")
    return TradeoffEngine(query, relations, epsilon=epsilon, backend=backend)
