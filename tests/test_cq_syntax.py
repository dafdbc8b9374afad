"""The CQAP query language: parse results, schemas, and errors that point at the culprit."""

from __future__ import annotations

import pytest

from gpu_ivm.cq import QuerySyntaxError, parse_query
from gpu_ivm.errors import InputError


def test_thesis_notation_outputs_before_bar():
    q = parse_query("Q(B,C | A) = R(A,B), S(B,C), T(C,A)")
    assert q.name == "Q"
    assert q.outputs == ("B", "C") and q.inputs == ("A",) and q.bound == ()
    assert [(a.relation, a.variables) for a in q.atoms] == [
        ("R", ("A", "B")), ("S", ("B", "C")), ("T", ("C", "A"))]
    assert q.schemas == {"R": 2, "S": 2, "T": 2}


@pytest.mark.parametrize("text, outputs, inputs", [
    ("Q( | ) = R(A,B)", (), ()),
    ("Q(.|.) = R(A,B)", (), ()),
    ("Q(·|·) = R(A,B)", (), ()),
    ("Q(. | A,B) = R(A,B)", (), ("A", "B")),
    ("Q(A,B) = R(A,B)", ("A", "B"), ()),
    ("Q(A|) :- R(A,B).", ("A",), ()),
    ("Lookup(|A,B,C) = R(A,B), S(B,C), T(C,A)", (), ("A", "B", "C")),
])
def test_heads(text, outputs, inputs):
    q = parse_query(text)
    assert q.outputs == outputs and q.inputs == inputs
    assert parse_query(str(q)) == q  # str() round-trips


def test_self_joins_nullary_and_repeated_variables():
    q = parse_query("Q(X | ) = E(X,Y), E(Y,Z), E(Z,X), F(), G(X,X)")
    assert q.self_joins == ("E",)
    assert q.schemas == {"E": 2, "F": 0, "G": 2}
    assert q.bound == ("Y", "Z")


def caret_column(err: QuerySyntaxError) -> int:
    lines = str(err).split("\n")
    return lines[-1].index("^") - 2


@pytest.mark.parametrize("text, culprit, words", [
    ("Q(A | A) = R(A)", 6, "both an output and an input"),
    ("Q(A,A | ) = R(A)", 4, "listed twice"),
    ("Q(X | ) = R(A)", 2, "does not occur in the body"),
    ("Q( | ) = R(A), S(B), R(A,B)", 21, "relation R is used with 2 columns"),
    ("Q( | ) R(A)", 7, "expected '=' or ':-'"),
    ("Q( | ) = R(A) S(B)", 14, "expected ','"),
    ("Q( | ) = R(A,)", 13, "expected a variable"),
    ("Q( | ) = R(A)$", 13, "unexpected character"),
    ("Q(A B) = R(A,B)", 4, "expected ')'"),
    ("Q(B | A) = R(A,B), S(B,C,D", 26, "expected ',' or ')'"),
    ("(A) = R(A)", 0, "expected the query name"),
    ("Q(A | B | C) = R(A,B,C)", 8, "expected ')'"),
    ("Q(1 | ) = R(A)", 2, "unexpected character"),
])
def test_errors_point_at_the_offending_character(text, culprit, words):
    with pytest.raises(QuerySyntaxError) as ei:
        parse_query(text)
    err = ei.value
    assert isinstance(err, InputError)
    assert words in str(err)
    assert err.position == culprit
    assert caret_column(err) == culprit
    assert f"position {culprit}" in str(err)


def test_non_string_refused():
    with pytest.raises(InputError):
        parse_query(42)
