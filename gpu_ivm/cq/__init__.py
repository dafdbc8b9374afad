"""Conjunctive queries with free access patterns (CQAP), Zhang's thesis, batched.

``Q(outputs | inputs) = R(A,B), S(B,C)``: see docs/queries-cq.md. :class:`Engine` maintains
a query at ε = 1; :func:`engine` picks :class:`TradeoffEngine` (the heavy/light trade-off)
below it, and :class:`TriangleQueryEngine` (IVM^ε's triangle engine) for the triangle
queries (``R(A,B), S(B,C), T(C,A)`` with any head).

>>> from gpu_ivm import cq
>>> cq.plan("Q(B,C,D,E | A) = R(A,B,C), S(A,B,D), T(A,E)").cls
'CQAP_0'
"""

from __future__ import annotations

from .engine import Engine, UnsupportedQueryError
from .factory import engine
from .oracle import access, evaluate, total
from .planner import Plan, plan
from .syntax import Atom, Query, QuerySyntaxError, parse_query
from .tradeoff import TradeoffEngine
from .triangle_strategy import TriangleQueryEngine

__all__ = ["Atom", "Engine", "Plan", "Query", "QuerySyntaxError", "TradeoffEngine",
           "TriangleQueryEngine", "UnsupportedQueryError", "access", "engine", "evaluate",
           "parse_query", "plan", "total"]
