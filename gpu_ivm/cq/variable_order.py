"""Variable orders: the :class:`VONode` forest shared by the planner, the width search and the
engine (a module of its own so that the planner and the width search need not import each
other).

>>> root = VONode("A", [VONode("B", atoms=[0])], atoms=[1])
>>> [(n.var, anc) for n, anc in root.walk()], root.subtree_atoms(), root.subtree_vars()
([('A', []), ('B', ['A'])], [1, 0], ['A', 'B'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["VONode", "dep_sets"]


@dataclass
class VONode:
    """A variable of a variable order; ``atoms`` are the atom indices hanging under it."""

    var: str
    children: list[VONode] = field(default_factory=list)
    atoms: list[int] = field(default_factory=list)

    def walk(self):
        """Pre-order: (node, ancestors list)."""
        stack = [(self, [])]
        while stack:
            node, anc = stack.pop()
            yield node, anc
            for c in reversed(node.children):
                stack.append((c, anc + [node.var]))

    def subtree_atoms(self) -> list[int]:
        out = list(self.atoms)
        for c in self.children:
            out += c.subtree_atoms()
        return out

    def subtree_vars(self) -> list[str]:
        return [n.var for n, _ in self.walk()]


def dep_sets(roots: list[VONode], comp) -> dict[str, list[str]]:
    """dep(X): ancestors of X that share an atom with X's subtree, in root-to-X order."""
    out = {}
    for r in roots:
        for node, anc in r.walk():
            vs = {v for i in node.subtree_atoms() for v in comp.query.atoms[i].variables}
            out[node.var] = [a for a in anc if a in vs]
    return out
