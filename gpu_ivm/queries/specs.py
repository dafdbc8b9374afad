"""The skew-aware views of paper 001 (Figures 10, 12 and 14), as data.

Relations are R(A, B) = 0, S(B, C) = 1, T(C, A) = 2 and variables A = 0, B = 1, C = 2, so
relation k has schema (k, k+1 mod 3). Every view of the paper is a product of two or three
relations restricted to heavy/light *parts* and summed over the variables not in its key. A
part is given by the heaviness of each of the relation's two variables (``"H"``, ``"L"`` or
``"*"`` for both; single partitioning leaves the second one ``"*"``), e.g. ``S^{LH}`` is
``"LH"`` and ``S^{H}`` on B is ``"H*"``.

A view's key lists its free variables in storage order: one variable (a dense per-vertex
array), two (a pair store with rows by the first) or three (rows by the first two: the paper's
"index on (X, Y)" of a 3-ary view). ``root`` views partition the triangles: each triangle
lies in exactly one of them, so their values sum to Δ0 and their projections sum to the query.

>>> [v.name for v in family("vertex_counts") if v.root]
['D1_HHH', 'D1_LLL', 'D1_(LL)*H', 'D1_(LH)*(HH)', 'V1^HL*', 'V1^*HL', 'V1^(LH)*(HL)']
"""

from __future__ import annotations

from dataclasses import dataclass

A, B, C = 0, 1, 2
R, S, T = 0, 1, 2
ANY, LIGHT, HEAVY = -1, 0, 1
_FLAG = {"*": ANY, "L": LIGHT, "H": HEAVY}

FAMILIES = ("vertex_counts", "edge_counts", "triangles")
QUERY_OF = {"vertex_counts": "Δ1", "edge_counts": "Δ2", "triangles": "Δ3"}


@dataclass(frozen=True)
class ViewSpec:
    """One materialized view: Σ_{vars not in key} Π_{k ∈ atoms} K_k^{pattern[k]}."""

    name: str
    atoms: tuple[int, ...]
    pattern: tuple[tuple[int, int], ...]  # per relation R, S, T: (first var, second var)
    key: tuple[int, ...]
    root: bool = False

    @property
    def signature(self) -> tuple:
        """Views with equal signatures hold the same data (shared between query families)."""
        pat = tuple(self.pattern[k] for k in sorted(self.atoms))
        return (tuple(sorted(self.atoms)), pat, self.key)


@dataclass(frozen=True)
class TreeSpec:
    """A view tree: for each key of ``root`` (two variables), the ``inner`` 3-ary view gives the
    third variable; the tuple's multiplicity is inner · ``lookup``-relation(its two variables)."""

    root: str
    inner: str
    lookup: int


def _view(name: str, parts: dict[int, str], key: str, root: bool = False) -> ViewSpec:
    pattern = []
    for k in (R, S, T):
        p = parts.get(k, "**")
        pattern.append((_FLAG[p[0]], _FLAG[p[1]]))
    return ViewSpec(name, tuple(sorted(parts)), tuple(pattern), tuple("ABC".index(v) for v in key),
                    root)


def _tri(name, r, s, t, key, root=False):
    return _view(name, {R: r, S: s, T: t}, key, root)


# Figure 10 — Δ3 (R on A, S on B, T on C; single partitions).
_TRIANGLES = (
    _tri("D3_HHH", "H*", "H*", "H*", "ABC", True),
    _tri("D3_LLL", "L*", "L*", "L*", "ABC", True),
    _view("V3_RS", {R: "H*", S: "L*"}, "ACB"),
    _view("V3_RS^", {R: "H*", S: "L*"}, "AC"),
    _tri("V3^HL*", "H*", "L*", "**", "AC", True),
    _view("V3_ST", {S: "H*", T: "L*"}, "BAC"),
    _view("V3_ST^", {S: "H*", T: "L*"}, "BA"),
    _tri("V3^*HL", "**", "H*", "L*", "AB", True),
    _view("V3_TR", {T: "H*", R: "L*"}, "CBA"),
    _view("V3_TR^", {T: "H*", R: "L*"}, "CB"),
    _tri("V3^L*H", "L*", "**", "H*", "BC", True),
)
_TRIANGLE_TREES = (
    TreeSpec("V3^HL*", "V3_RS", T),
    TreeSpec("V3^*HL", "V3_ST", R),
    TreeSpec("V3^L*H", "V3_TR", S),
)

# Figure 12 — Δ2 (R on A; S on (B, C); T on (C, A)).
_EDGES = (
    _tri("D2_HHH", "H*", "H*", "H*", "AB", True),
    _tri("D2_LLL", "L*", "L*", "L*", "AB", True),
    _tri("D2_H(LL)*", "H*", "LL", "**", "AB", True),
    _tri("D2_L*(HH)", "L*", "**", "HH", "AB", True),
    _view("V2_RS", {R: "H*", S: "LH"}, "ACB"),
    _view("V2_RS^", {R: "H*", S: "LH"}, "AC"),
    _tri("V2^H(LH)*", "H*", "LH", "**", "CA", True),
    _tri("V2^H(LH)*^", "H*", "LH", "**", "C"),
    _view("V2_ST", {S: "H*", T: "L*"}, "BA"),
    _tri("V2^*HL", "**", "H*", "L*", "AB", True),
    _view("V2_TR", {T: "HL", R: "L*"}, "CBA"),
    _view("V2_TR^", {T: "HL", R: "L*"}, "CB"),
    _tri("V2^L*(HL)", "L*", "**", "HL", "CB", True),
    _tri("V2^L*(HL)^", "L*", "**", "HL", "C"),
)
_EDGE_TREES = (
    TreeSpec("V2^H(LH)*", "V2_RS", T),
    TreeSpec("V2^L*(HL)", "V2_TR", S),
)

# Figure 14 — Δ1 (R on (A, B); S on B; T on (C, A)).
_VERTICES = (
    _tri("D1_HHH", "H*", "H*", "H*", "A", True),
    _tri("D1_LLL", "L*", "L*", "L*", "A", True),
    _tri("D1_(LL)*H", "LL", "**", "H*", "A", True),
    _tri("D1_(LH)*(HH)", "LH", "**", "HH", "A", True),
    _view("V1_RS", {R: "H*", S: "L*"}, "AC"),
    _tri("V1^HL*", "H*", "L*", "**", "A", True),
    _view("V1_ST", {S: "H*", T: "L*"}, "BA"),
    _tri("V1^*HL", "**", "H*", "L*", "A", True),
    _view("V1_TR", {T: "HL", R: "LH"}, "CBA"),
    _view("V1_TR^", {T: "HL", R: "LH"}, "CB"),
    _tri("V1^(LH)*(HL)", "LH", "**", "HL", "BC", True),
)
_VERTEX_TREES = (TreeSpec("V1^(LH)*(HL)", "V1_TR", S),)

_SPECS = {"triangles": _TRIANGLES, "edge_counts": _EDGES, "vertex_counts": _VERTICES}
_TREES = {"triangles": _TRIANGLE_TREES, "edge_counts": _EDGE_TREES,
          "vertex_counts": _VERTEX_TREES}


def family(name: str) -> tuple[ViewSpec, ...]:
    """The views the paper maintains for one query family."""
    return _SPECS[name]


def trees(name: str) -> tuple[TreeSpec, ...]:
    """The view trees of one query family (enumerated root key by root key)."""
    return _TREES[name]


def views_for(families) -> list[ViewSpec]:
    """The views of several families, each distinct view (by signature) once."""
    seen: dict[tuple, ViewSpec] = {}
    for f in FAMILIES:
        if f in families:
            for v in _SPECS[f]:
                seen.setdefault(v.signature, v)
    return list(seen.values())
