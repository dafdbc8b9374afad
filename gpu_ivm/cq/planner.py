"""Plan a CQAP: fracture, hierarchy, variable orders, widths, class and strategy.

Follows Zhang's thesis (digest: design/paper-cqap-thesis.md): the fracture (Def. 3.1), the
canonical variable order of a hierarchical component, ACC-TOP (Fig. 5.1), the static width w
and dynamic width δ by the closed forms of Lemma 5.11 (integral covers, Lemma 5.13), and the
class: CQAP_0 iff δ = 0, CQAP_1 iff δ = 1 (Prop. 5.30), "other" otherwise.

>>> p = plan("Q(B | A) = S(A,B), T(B)")
>>> p.cls, p.w, p.delta
('CQAP_1', 1, 1)
>>> plan("Q(A | B) = S(A,B), T(B)").cls
'CQAP_0'
>>> [str(c) for c in plan("Q(A,C | B,D) = R(A,B), S(B,C), T(C,D), U(A,D)").components]
['R(A,B), U(A,D)', 'S(B,C), T(C,D)']
>>> plan("Q(A,B | ) = R(A), S(A,B), T(B)").cls
'other'
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction

from .syntax import Atom, Query, parse_query
from .variable_order import VONode, dep_sets

__all__ = ["Component", "Plan", "VONode", "acc_top", "canonical_vo", "fracture",
           "is_hierarchical", "plan", "rho"]


@dataclass
class Component:
    """One connected component of the fracture: atom indices into ``query.atoms``."""

    query: Query
    atom_ids: tuple[int, ...]

    @property
    def atoms(self) -> list[Atom]:
        return [self.query.atoms[i] for i in self.atom_ids]

    @property
    def variables(self) -> list[str]:
        return list(dict.fromkeys(v for a in self.atoms for v in a.variables))

    @property
    def inputs(self) -> list[str]:
        return [v for v in self.variables if v in self.query.inputs]

    @property
    def outputs(self) -> list[str]:
        return [v for v in self.variables if v in self.query.outputs]

    def role(self, v: str) -> str:
        return "input" if v in self.query.inputs else (
            "output" if v in self.query.outputs else "bound")

    def atoms_of(self, v: str) -> frozenset[int]:
        return frozenset(i for i in self.atom_ids if v in self.query.atoms[i].variables)

    def __str__(self) -> str:
        return ", ".join(str(a) for a in self.atoms)


def fracture(query: Query) -> list[Component]:
    """Connected components of the atoms, where only non-input variables connect atoms.

    Copies of an input variable are merged back within a component, so a component keeps
    the query's variable names (Def. 3.1, step 3).
    """
    n = len(query.atoms)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, a in enumerate(query.atoms):
        for v in a.variables:
            if v in query.inputs:
                continue
            if v in first:
                parent[find(i)] = find(first[v])
            else:
                first[v] = i
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return [Component(query, tuple(g)) for g in groups.values()]


def is_hierarchical(comp: Component) -> bool:
    """atoms(X), atoms(Y) nested or disjoint for every pair of variables."""
    sets = [comp.atoms_of(v) for v in comp.variables]
    return all(a <= b or b <= a or not (a & b) for a, b in itertools.combinations(sets, 2))


def dominance_ok(comp: Component, lower: set[str], upper: set[str]) -> bool:
    """True when every variable that dominates one in ``lower`` lies in ``upper``."""
    for a in comp.variables:
        if a not in lower:
            continue
        for b in comp.variables:
            if comp.atoms_of(a) < comp.atoms_of(b) and b not in upper:
                return False
    return True


_RANK = {"input": 0, "output": 1, "bound": 2}


def canonical_vo(comp: Component) -> list[VONode]:
    """The canonical variable order (a forest) of a hierarchical component.

    Variables sorted by (more atoms first, input < output < bound, name); each hangs under
    the most recently placed variable whose atom set contains its own; each atom under its
    deepest variable. Raises ValueError for a non-hierarchical component.
    """
    if not is_hierarchical(comp):
        raise ValueError(f"component {comp} is not hierarchical")
    order = sorted(comp.variables,
                   key=lambda v: (-len(comp.atoms_of(v)), _RANK[comp.role(v)], v))
    nodes: dict[str, VONode] = {}
    roots: list[VONode] = []
    placed: list[str] = []
    for v in order:
        node = nodes[v] = VONode(v)
        up = [u for u in placed if comp.atoms_of(v) <= comp.atoms_of(u)]
        (nodes[up[-1]].children if up else roots).append(node)
        placed.append(v)
    for i in comp.atom_ids:
        vs = comp.query.atoms[i].variables
        if not vs:
            continue
        deepest = max(vs, key=order.index)
        nodes[deepest].atoms.append(i)
    return roots


def _delete(node: VONode, drop: set[str]) -> VONode:
    """Δ (Fig. 5.2): remove ``drop`` below ``node``; their children move up to the parent."""
    kids: list[VONode] = []
    atoms = list(node.atoms)
    for c in node.children:
        c2 = _delete(c, drop)
        if c2.var in drop:
            kids += c2.children
            atoms += c2.atoms
        else:
            kids.append(c2)
    return VONode(node.var, kids, atoms)


def acc_top(node: VONode, comp: Component) -> VONode:
    """ACC-TOP (Fig. 5.1, reconstructed): pull inputs above outputs above bound variables."""
    role = comp.role(node.var)
    below = set(node.subtree_vars()) - {node.var}
    if role == "input":
        pull = set()
    elif role == "output":
        pull = below & set(comp.query.inputs)
    else:
        pull = below & (set(comp.query.inputs) | set(comp.query.outputs))
    trimmed = _delete(node, pull)
    top = VONode(node.var, [acc_top(c, comp) for c in trimmed.children], trimmed.atoms)
    order = sorted(pull, key=lambda v: (_RANK[comp.role(v)], -len(comp.atoms_of(v)), v))
    for v in reversed(order):
        top = VONode(v, [top])
    return top


def rho(varset, edges: list[set[str]]) -> int:
    """Integral edge cover number of ``varset`` by ``edges`` (brute force; small queries)."""
    target = set(varset)
    if not target:
        return 0
    useful = [e & target for e in edges if e & target]
    for k in range(1, len(useful) + 1):
        for combo in itertools.combinations(useful, k):
            if set().union(*combo) >= target:
                return k
    raise ValueError(f"variables {sorted(target)} cannot be covered")


def closed_form_widths(roots: list[VONode], comp: Component) -> tuple[int, int]:
    """(w, δ) of a hierarchical component from its canonical VO (Lemma 5.11)."""
    edges = [set(a.variables) for a in comp.atoms]
    ins, outs = set(comp.query.inputs), set(comp.query.outputs)
    xi = kappa = 0
    for r in roots:
        for node, _ in r.walk():
            role = comp.role(node.var)
            if role == "input":
                continue
            sub = set(node.subtree_vars())
            target = sub & (ins | outs) if role == "bound" else sub & ins
            xi = max(xi, rho(target, edges))
            for i in node.subtree_atoms():
                kappa = max(kappa, rho(target - set(comp.query.atoms[i].variables), edges))
    return max(1, xi), kappa


def vo_widths(roots: list[VONode], comp: Component) -> tuple[int, int]:
    """(w, δ) of a variable order by the definitions: max ρ(bag), max ρ(bag minus atom)."""
    edges = [set(a.variables) for a in comp.atoms]
    dep = dep_sets(roots, comp)
    w = d = 0
    for r in roots:
        for node, _ in r.walk():
            bag = {node.var, *dep[node.var]}
            w = max(w, rho(bag, edges))
            for i in node.subtree_atoms():
                d = max(d, rho(bag - set(comp.query.atoms[i].variables), edges))
    return max(w, 1), d


def is_access_top(roots: list[VONode], comp: Component) -> bool:
    """No bound variable above a free one, no output above an input."""
    for r in roots:
        for node, anc in r.walk():
            rk = _RANK[comp.role(node.var)]
            if any(_RANK[comp.role(a)] > rk for a in anc):
                return False
    return True


def is_alpha_acyclic(edges: list[set[str]]) -> bool:
    """GYO reduction: drop variables in one edge only and edges inside another; acyclic iff
    nothing is left."""
    edges = [set(e) for e in edges]
    changed = True
    while changed:
        changed = False
        for e in edges:
            lonely = {v for v in e if sum(v in f for f in edges) == 1}
            if lonely:
                e -= lonely
                changed = True
        for i, e in enumerate(edges):
            if any(j != i and e <= f for j, f in enumerate(edges)):
                del edges[i]
                changed = True
                break
    return all(not e for e in edges)


def is_free_connex(comp: Component) -> bool:
    """α-acyclic, and still α-acyclic with one more hyperedge of all free variables."""
    edges = [set(a.variables) for a in comp.atoms]
    return is_alpha_acyclic(edges) and is_alpha_acyclic(
        edges + [set(comp.inputs + comp.outputs)])


def render_vo(node: VONode, comp: Component) -> str:
    """``A[B[C[R(A,B,C)], D[S(A,B,D)]], E[T(A,E)]]``."""
    parts = [str(comp.query.atoms[i]) for i in node.atoms]
    parts += [render_vo(c, comp) for c in node.children]
    return f"{node.var}[{', '.join(parts)}]"


@dataclass
class ComponentPlan:
    comp: Component
    hierarchical: bool
    free_dominant: bool | None = None
    input_dominant: bool | None = None
    free_connex: bool | None = None
    canonical: list[VONode] | None = None
    access: list[VONode] | None = None
    canonical_access_top: bool | None = None
    w: int | Fraction | None = None     # for a non-hierarchical component: by VO search
    update_width: Fraction | None = None  # of that VO (widths.update_width): breaks w's ties
    delta: int | None = None
    # non-hierarchical: {variable: [(atom index, Z)]}, the indicator projections I_Z under it
    indicators: dict[str, list[tuple[int, tuple[str, ...]]]] = field(default_factory=dict)


@dataclass
class Plan:
    """The plan of a query; ``explain()`` renders it."""

    query: Query
    components: list[Component]
    parts: list[ComponentPlan]
    cls: str
    w: int | None
    delta: int | None
    strategy: str

    def exponents(self, eps: Fraction | int = 1) -> dict[str, Fraction] | None:
        """Predicted exponents of N (Thm 3.5; ε=1 gives Thm 3.4): None if not hierarchical."""
        if self.w is None:
            return None
        e = Fraction(eps)
        return {"preprocessing": 1 + (self.w - 1) * e, "update": self.delta * e,
                "delay": 1 - e}

    def explain(self) -> str:
        q = self.query
        lines = [f"query     {q}",
                 f"inputs    {', '.join(q.inputs) or '-'}; outputs {', '.join(q.outputs) or '-'};"
                 f" bound {', '.join(q.bound) or '-'}"]
        if q.self_joins:
            lines.append(f"self-joins {', '.join(q.self_joins)} (repeated atoms; the dichotomy's "
                         "lower bound assumes none)")
        lines.append(f"fracture  {len(self.parts)} component(s)")
        for k, p in enumerate(self.parts, 1):
            c = p.comp
            lines.append(f"  [{k}] {c}   inputs {{{', '.join(c.inputs)}}} outputs "
                         f"{{{', '.join(c.outputs)}}}")
            if not p.hierarchical:
                ws = "more than 6 variables" if p.w is None else f"w = {p.w}"
                uw = ("" if p.update_width is None else
                      f"; update width {p.update_width} (ties of w broken by it)")
                lines.append(f"      not hierarchical; free-connex {p.free_connex}; {ws} (min "
                             f"over access-top VOs){uw}; delta not computed")
                if p.access is None:
                    continue
                lines.append("      access-top VO  " + "; ".join(render_vo(r, c)
                                                             for r in p.access))
                n_ind = sum(len(v) for v in p.indicators.values())
                lines.append(f"      view tree (eps = 1, {n_ind} indicator projection(s) by "
                             "GYO*):")
                lines += ["        " + s for s in view_tree_lines(p.access, c, p.indicators)]
                continue
            lines.append(f"      hierarchical; free-dominant {p.free_dominant}; input-dominant "
                         f"{p.input_dominant}; free-connex {p.free_connex}; canonical VO "
                         f"access-top {p.canonical_access_top}")
            lines.append(f"      w = {p.w}, delta = {p.delta}")
            lines.append("      canonical VO   " + "; ".join(render_vo(r, c) for r in p.canonical))
            lines.append("      access-top VO  " + "; ".join(render_vo(r, c) for r in p.access))
            lines.append("      view tree (eps = 1):")
            lines += ["        " + s for s in view_tree_lines(p.access, c)]
        lines.append(f"class     {self.cls}" + (f" (w = {self.w}, delta = {self.delta})"
                                                if self.w is not None else ""))
        ex = self.exponents()
        if ex is not None:
            lines.append(f"eps = 1   preprocessing O(N^{ex['preprocessing']}), update "
                         f"O(N^{ex['update']}), delay O(1)")
            lines.append(f"trade-off preprocessing O(N^(1+{self.w - 1}eps)), update "
                         f"O(N^({self.delta}eps)), delay O(N^(1-eps))")
        lines.append(f"strategy  {self.strategy}")
        return "\n".join(lines)


def view_tree_lines(roots: list[VONode], comp: Component,
                    indicators: dict | None = None) -> list[str]:
    """One line per view of the τ view tree of an access-top VO (Fig. 4.2), with the
    indicator projections ``I_{Z} R(...)`` under the variables of ``indicators``."""
    dep = dep_sets(roots, comp)
    out: list[str] = []

    def rec(node: VONode, depth: int) -> None:
        bag = [*dep[node.var], node.var]
        kids = [str(comp.query.atoms[i]) for i in node.atoms]
        kids += [f"V'_{c.var}({','.join(dep[c.var])})" for c in node.children]
        kids += [f"I_{{{','.join(z)}}} {comp.query.atoms[j]}"
                 for j, z in (indicators or {}).get(node.var, [])]
        pad = "  " * depth
        out.append(f"{pad}V_{node.var}({','.join(bag)}) = {' * '.join(kids)}")
        for c in node.children:
            out.append(f"{pad}  V'_{c.var}({','.join(dep[c.var])}) = sum_{c.var} "
                       f"V_{c.var}({','.join([*dep[c.var], c.var])})")
            rec(c, depth + 2)

    for r in roots:
        rec(r, 0)
    return out


def plan(query: str | Query) -> Plan:
    """Fracture, classify and choose a strategy for ``query``."""
    q = parse_query(query)
    comps = fracture(q)
    parts = []
    for c in comps:
        p = ComponentPlan(c, is_hierarchical(c), free_connex=is_free_connex(c))
        if not p.hierarchical:
            from .widths import best_order, order_to_vo

            best = best_order(c)
            if best is not None:
                from .indicators import indicators
                from .widths import update_width

                p.w, parent = best
                p.update_width = update_width(parent, c)
                p.access = order_to_vo(parent, c)
                p.indicators = indicators(p.access, c)
        else:
            free = set(q.inputs) | set(q.outputs)
            p.free_dominant = dominance_ok(c, free, free)
            p.input_dominant = dominance_ok(c, set(q.inputs), set(q.inputs))
            p.canonical = canonical_vo(c)
            p.access = [acc_top(r, c) for r in p.canonical]
            p.canonical_access_top = is_access_top(p.canonical, c)
            p.w, p.delta = closed_form_widths(p.canonical, c)
        parts.append(p)
    if all(p.hierarchical for p in parts):
        w = max(p.w for p in parts)
        delta = max(p.delta for p in parts)
        cls = {0: "CQAP_0", 1: "CQAP_1"}.get(delta, "other")
        strategy = ("view trees over the access-top VO, eps = 1: O(N) preprocessing, O(1) "
                    "update and delay" if delta == 0 else
                    f"view trees over the access-top VO, eps = 1 (this engine): O(N^{w}) "
                    f"preprocessing, O(N^{delta}) update, O(1) delay; heavy/light trade-offs "
                    "(eps < 1): cq.tradeoff")
    else:
        w = delta = None
        cls = "other"
        if all(p.access is not None for p in parts):
            strategy = ("view trees over access-top VOs of least static width, eps = 1, "
                        "with the indicator projections GYO* keeps (Chapter 4); views are "
                        "built by binary joins in a greedy order, not a worst-case optimal "
                        "join")
        else:
            strategy = ("not hierarchical with a component of more than 6 variables: no "
                        "variable order searched; the Engine refuses this query")
    return Plan(q, comps, parts, cls, w, delta, strategy)
