"""Parse conjunctive queries with free access patterns in the thesis notation.

``Q(outputs | inputs) = R(A,B), S(B,C), T(C,A)``: output variables before the bar, input
variables after it (Zhang's thesis writes ``Q(O | I)``). Grammar::

    query    := NAME "(" head ")" ("=" | ":-") atom ("," atom)* ["."]
    head     := varlist ["|" varlist]      # no bar: every head variable is an output
    varlist  := "" | "." | "·" | VAR ("," VAR)*
    atom     := NAME "(" [VAR ("," VAR)*] ")"

Errors are :class:`QuerySyntaxError` (an :class:`~gpu_ivm.errors.InputError`) whose message
ends with the query text and a caret under the offending character.

>>> q = parse_query("Q(B,C | A) = R(A,B), S(B,C), T(C,A)")
>>> q.outputs, q.inputs, q.bound
(('B', 'C'), ('A',), ())
>>> [str(a) for a in q.atoms]
['R(A,B)', 'S(B,C)', 'T(C,A)']
>>> q.schemas
{'R': 2, 'S': 2, 'T': 2}
>>> str(parse_query("Count(.|.) :- E(X,Y), E(Y,Z), E(Z,X)."))
'Count( | ) = E(X,Y), E(Y,Z), E(Z,X)'
>>> parse_query("Q(B | A) = R(A,B), S(B,C,D")
Traceback (most recent call last):
...
gpu_ivm.cq.syntax.QuerySyntaxError: expected ',' or ')' at position 26 (end of query)
  Q(B | A) = R(A,B), S(B,C,D
                            ^
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = ["Atom", "Query", "QuerySyntaxError", "parse_query"]


class QuerySyntaxError(InputError):
    """A query that does not parse or does not validate.

    ``position`` is the 0-based offset of the offending character in ``text``; the message
    shows the query with a caret under it.
    """

    def __init__(self, message: str, text: str, position: int):
        where = "end of query" if position >= len(text) else repr(text[position])
        line = text.replace("\n", " ")
        super().__init__(f"{message} at position {position} ({where})\n  {line}\n"
                         f"  {' ' * position}^")
        self.text = text
        self.position = position


@dataclass(frozen=True)
class Atom:
    """One body atom ``relation(variables...)``; ``position`` is its offset in the text."""

    relation: str
    variables: tuple[str, ...]
    position: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.relation}({','.join(self.variables)})"


@dataclass(frozen=True)
class Query:
    """A parsed, validated CQAP ``name(outputs | inputs) = atoms``."""

    name: str
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    atoms: tuple[Atom, ...]
    text: str = field(default="", compare=False)

    @property
    def variables(self) -> tuple[str, ...]:
        """All variables in order of first occurrence in the body."""
        seen: dict[str, None] = {}
        for a in self.atoms:
            for v in a.variables:
                seen.setdefault(v, None)
        return tuple(seen)

    @property
    def free(self) -> tuple[str, ...]:
        return self.inputs + self.outputs

    @property
    def bound(self) -> tuple[str, ...]:
        free = set(self.free)
        return tuple(v for v in self.variables if v not in free)

    @property
    def schemas(self) -> dict[str, int]:
        """Relation name -> arity, in order of first occurrence."""
        out: dict[str, int] = {}
        for a in self.atoms:
            out.setdefault(a.relation, len(a.variables))
        return out

    @property
    def self_joins(self) -> tuple[str, ...]:
        """Relations that occur in more than one atom."""
        names = [a.relation for a in self.atoms]
        return tuple(dict.fromkeys(n for n in names if names.count(n) > 1))

    def __str__(self) -> str:
        body = ", ".join(str(a) for a in self.atoms)
        return f"{self.name}({','.join(self.outputs)} | {','.join(self.inputs)}) = {body}"


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>:-|[(),|=.·]))")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position) triples; kind is 'name', 'punct' or 'end'."""
    out = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            out.append(("end", "", len(text)))
            return out
        m = _TOKEN.match(text, pos)
        if m is None:
            raise QuerySyntaxError("unexpected character", text, pos)
        kind = "name" if m.group("name") else "punct"
        start = m.start(kind)
        out.append((kind, m.group(kind), start))
        pos = m.end()


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def take(self) -> tuple[str, str, int]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def fail(self, message: str, tok=None):
        tok = tok or self.peek()
        raise QuerySyntaxError(message, self.text, tok[2])

    def expect(self, *values: str) -> tuple[str, str, int]:
        tok = self.peek()
        if tok[0] != "punct" or tok[1] not in values:
            self.fail("expected " + " or ".join(repr(v) for v in values))
        return self.take()

    def name(self, what: str) -> tuple[str, int]:
        tok = self.peek()
        if tok[0] != "name":
            self.fail(f"expected {what}")
        self.take()
        return tok[1], tok[2]

    def varlist(self, stop: tuple[str, ...]) -> list[tuple[str, int]]:
        tok = self.peek()
        if tok[0] == "punct" and tok[1] in stop:
            return []
        if tok[0] == "punct" and tok[1] in (".", "·"):
            self.take()
            return []
        out = [self.name("a variable")]
        while self.peek()[:2] == ("punct", ","):
            self.take()
            out.append(self.name("a variable"))
        return out

    def parse(self) -> Query:
        qname, _ = self.name("the query name")
        self.expect("(")
        first = self.varlist(("|", ")"))
        if self.peek()[:2] == ("punct", "|"):
            self.take()
            outputs, inputs = first, self.varlist((")",))
        else:
            outputs, inputs = first, []
        self.expect(")")
        self.expect("=", ":-")
        atoms = [self.atom()]
        while self.peek()[:2] == ("punct", ","):
            self.take()
            atoms.append(self.atom())
        if self.peek()[:2] == ("punct", "."):
            self.take()
        if self.peek()[0] != "end":
            self.fail("expected ',' between atoms or the end of the query")
        return _validate(self.text, qname, outputs, inputs, atoms)

    def atom(self) -> Atom:
        rel, pos = self.name("a relation name")
        self.expect("(")
        vs: list[str] = []
        if self.peek()[:2] != ("punct", ")"):
            vs.append(self.name("a variable")[0])
            while self.peek()[:2] == ("punct", ","):
                self.take()
                vs.append(self.name("a variable")[0])
        self.expect(",", ")")
        return Atom(rel, tuple(vs), pos)


def _validate(text, qname, outputs, inputs, atoms) -> Query:
    body_vars = {v for a in atoms for v in a.variables}
    seen: dict[str, str] = {}
    for role, vs in (("output", outputs), ("input", inputs)):
        for v, pos in vs:
            if v in seen:
                what = (f"variable {v} is listed twice" if seen[v] == role else
                        f"variable {v} is both an output and an input")
                raise QuerySyntaxError(what, text, pos)
            seen[v] = role
            if v not in body_vars:
                raise QuerySyntaxError(f"head variable {v} does not occur in the body",
                                       text, pos)
    arity: dict[str, tuple[int, int]] = {}
    for a in atoms:
        if a.relation in arity and arity[a.relation][0] != len(a.variables):
            n, _ = arity[a.relation]
            raise QuerySyntaxError(
                f"relation {a.relation} is used with {len(a.variables)} columns here but "
                f"with {n} before", text, a.position)
        arity.setdefault(a.relation, (len(a.variables), a.position))
    return Query(qname, tuple(v for v, _ in outputs), tuple(v for v, _ in inputs),
                 tuple(atoms), text)


def parse_query(text: str | Query) -> Query:
    """Parse and validate ``text``; a :class:`Query` is returned unchanged.

    Raises :class:`QuerySyntaxError` with the position of the offending character.
    """
    if isinstance(text, Query):
        return text
    if not isinstance(text, str):
        raise InputError(f"a query must be a string, not {type(text).__name__}")
    return _Parser(text).parse()
