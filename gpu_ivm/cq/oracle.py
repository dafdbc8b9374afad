"""Brute-force evaluation of a CQAP over Z-relations: the test oracle.

Nested loops over the atoms with Python dicts, independent of the view-tree engine. A
database maps each relation name to ``{tuple: multiplicity}``; tuples with multiplicity 0
are ignored. The result maps every input tuple that has answers to
``{output tuple: multiplicity}`` (Python ints, no overflow).

>>> db = {"R": {("a1", "b1"): 1, ("a1", "b2"): 2}, "S": {("b1", "c1"): 2, ("b2", "c1"): 2}}
>>> evaluate("Q(A,C | ) = R(A,B), S(B,C)", db)            # thesis Ex. 2.1
{(): {('a1', 'c1'): 6}}
>>> access("Q(C | A) = R(A,B), S(B,C)", db, ("a1",))
{('c1',): 6}
>>> total("Q(C | A) = R(A,B), S(B,C)", db)
6
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from .syntax import Query, parse_query

__all__ = ["access", "evaluate", "total"]

Database = Mapping[str, Mapping[tuple, int]]


def _full(query: Query, db: Database) -> dict[tuple, int]:
    """(inputs + outputs) tuple -> multiplicity, summed over the bound variables."""
    free = query.inputs + query.outputs
    out: dict[tuple, int] = defaultdict(int)

    def rec(i: int, asg: dict, m: int) -> None:
        if i == len(query.atoms):
            out[tuple(asg[v] for v in free)] += m
            return
        atom = query.atoms[i]
        for t, mu in db.get(atom.relation, {}).items():
            if mu == 0:
                continue
            if len(t) != len(atom.variables):
                raise ValueError(f"tuple {t} does not fit {atom}")
            new = dict(asg)
            if all(new.setdefault(v, x) == x for v, x in zip(atom.variables, t)):
                rec(i + 1, new, m * int(mu))

    rec(0, {}, 1)
    return {k: v for k, v in out.items() if v != 0}


def evaluate(query: str | Query, db: Database) -> dict[tuple, dict[tuple, int]]:
    """Every input tuple with a non-empty answer -> {output tuple: multiplicity}."""
    q = parse_query(query)
    k = len(q.inputs)
    res: dict[tuple, dict[tuple, int]] = defaultdict(dict)
    for t, m in _full(q, db).items():
        res[t[:k]][t[k:]] = m
    return dict(res)


def access(query: str | Query, db: Database, inputs: tuple) -> dict[tuple, int]:
    """The answer ``Q(O | inputs)``: {output tuple: multiplicity}."""
    return evaluate(query, db).get(tuple(inputs), {})


def total(query: str | Query, db: Database) -> int:
    """The result multiplicity summed over all input and output tuples."""
    return sum(m for ans in evaluate(query, db).values() for m in ans.values())
