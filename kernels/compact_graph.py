"""One compiled pass per batch for a small undirected graph kept as one sorted array.

Below :data:`gpu_ivm.compact.COMPACT_MAX` stored tuples (see :mod:`gpu_ivm.compact`) the graph
engine keeps E as the sorted packed keys ``x << 32 | y`` of both orientations of every edge,
and a batch Δ (sorted unique keys of both orientations, net signs ±1) is applied by
:func:`compact_step`, which in one call

1. merges Δ into a new sorted array (one linear pass: the array is rewritten anyway),
   checking set semantics on the way (a delete of an absent edge or an insert of a present
   one is counted, and nothing is kept then);
2. finds, on the way, where the row of every vertex that Δ touches lies in E;
3. computes the count's delta against E before the batch, each triangle six times::

       6·Σ_{x<y} Δ(x,y)·|N(x) ∩ N(y)|  +  Σ_{(a,b)} Δ(a,b)·Σ_c Δ(b,c)·(3·E(c,a) + Δ(c,a))

   the pair term and the wedge term of :mod:`gpu_ivm.kernels.light_delta`.

The pair term visits each unordered pair of Δ once, at the endpoint with the longer row
(ties: the larger id): that row is marked once for all its pairs and the shorter row of the
other endpoint is walked, so a batch reads Σ min(deg x, deg y) entries plus each marked row
once. The wedge term is grouped by the middle vertex b: Δ's row b is marked once and each
a of it either walks its rows of E and Δ (deg_E(a) + |Δ_a| entries) or, when that is longer,
walks Δ's row b and looks each c up in a's rows by binary search; so a star in the batch does
not cost the square of its size.

The work is O(|E| + |Δ| log |Δ| + Σ min-degree), with no id-indexed pass: the vertex → Δ row
map (``slot``) and the marks are scratch arrays the caller keeps zeroed (-1 and 0) between
calls, and only the entries a batch touched are reset.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lsm import LO_MASK, lower_bound

#: in the wedge term, a's rows are walked when deg_E(a) + |Δ_a| is at most this many times
#: |Δ_b| (else Δ's row b is walked, each entry looked up in a's rows by binary search: two
#: searches of dependent loads per entry, where a walk reads on; 8 was 13 % slower on the
#: 1,000-change SNAP windows, one-off script over their captured batches)
WALK_RATIO = 32


@nb.njit(cache=True, inline="always")
def _find(keys, lo, hi, key) -> int:
    """The position of ``key`` in the sorted ``keys[lo:hi]``, or -1."""
    p = lower_bound(keys, lo, hi, key)
    return p if p < hi and keys[p] == key else -1


@nb.njit(cache=True)
def compact_step(keys, dk, dv, slot, marks, walk_ratio=WALK_RATIO):
    """Apply the symmetric batch ``dk`` / ``dv`` to the sorted keys ``keys`` of E (module
    docstring). Returns ``(delta, bad, new_keys)``: the count's delta (six per triangle), the
    number of keys whose multiplicity would leave {0, 1} (``new_keys`` is then ``keys``
    itself, unchanged), and the sorted keys after the batch.

    ``slot`` (int64, all -1) and ``marks`` (int8, all 0) cover every id of ``dk`` and
    ``keys``; both are left as they were given. ``walk_ratio``: :data:`WALK_RATIO` (the
    tests pass 0 and a large value to take either way of the wedge term everywhere).

    >>> import numpy as np
    >>> def sym(pairs):
    ...     k = [(a << 32) | b for a, b in pairs] + [(b << 32) | a for a, b in pairs]
    ...     return np.array(sorted(k), np.int64)
    >>> E = sym([(0, 1), (1, 2)])  # the path 0 - 1 - 2
    >>> slot, marks = np.full(4, -1, np.int64), np.zeros(4, np.int8)
    >>> d, bad, E2 = compact_step(E, sym([(0, 2)]), np.ones(2, np.int64), slot, marks)
    >>> int(d), int(bad), E2.shape[0]  # one triangle closed, counted six times
    (6, 0, 6)
    >>> compact_step(E, sym([(0, 1)]), np.ones(2, np.int64), slot, marks)[1]  # present
    2
    """
    n_e = keys.shape[0]
    n = dk.shape[0]
    # Δ's rows: vertex, [start, end) in dk, and E's row [elo, ehi)
    gv = np.empty(n, np.int64)
    dlo = np.empty(n + 1, np.int64)
    elo = np.empty(n, np.int64)
    ehi = np.empty(n, np.int64)
    out = np.empty(n_e + n, np.int64)
    groups = 0
    bad = 0
    w = 0
    p = 0
    t = 0
    while t < n:  # a linear merge: every entry of E is copied anyway
        x = dk[t] >> 32
        gv[groups] = x
        dlo[groups] = t
        slot[x] = groups
        row = x << 32
        while p < n_e and keys[p] < row:
            out[w] = keys[p]
            w += 1
            p += 1
        elo[groups] = p
        while t < n and (dk[t] >> 32) == x:
            k = dk[t]
            while p < n_e and keys[p] < k:
                out[w] = keys[p]
                w += 1
                p += 1
            present = 1 if p < n_e and keys[p] == k else 0
            after = present + dv[t]
            if after < 0 or after > 1:
                bad += 1
            p += present
            if after == 1:
                out[w] = k
                w += 1
            t += 1
        nxt = (x + 1) << 32
        while p < n_e and keys[p] < nxt:
            out[w] = keys[p]
            w += 1
            p += 1
        ehi[groups] = p
        groups += 1
    dlo[groups] = n
    while p < n_e:
        out[w] = keys[p]
        w += 1
        p += 1
    if bad:
        for g in range(groups):
            slot[gv[g]] = -1
        return 0, bad, keys

    # the pair term: each unordered pair at its endpoint with the longer row of E
    pairs = 0
    for g in range(groups):
        x = gv[g]
        dx = ehi[g] - elo[g]
        if dx == 0:
            continue
        marked = False
        for t in range(dlo[g], dlo[g + 1]):
            y = dk[t] & LO_MASK
            h = slot[y]
            dy = ehi[h] - elo[h]
            if dy == 0 or dy > dx or (dy == dx and y > x):
                continue
            if not marked:
                for e in range(elo[g], ehi[g]):
                    marks[keys[e] & LO_MASK] = 1
                marked = True
            s = 0
            for e in range(elo[h], ehi[h]):
                s += marks[keys[e] & LO_MASK]
            pairs += dv[t] * s
        if marked:
            for e in range(elo[g], ehi[g]):
                marks[keys[e] & LO_MASK] = 0

    # the wedge term, by middle vertex b: marks[c] = Δ(b, c)
    wedges = 0
    for g in range(groups):
        s0 = dlo[g]
        s1 = dlo[g + 1]
        kb = s1 - s0
        if kb < 2:
            continue  # a wedge needs two edges of Δ at b (c = a adds 0)
        for t in range(s0, s1):
            marks[dk[t] & LO_MASK] = dv[t]
        for t in range(s0, s1):
            a = dk[t] & LO_MASK
            h = slot[a]
            ea, eb = elo[h], ehi[h]
            da, db = dlo[h], dlo[h + 1]
            inner = 0
            if (eb - ea) + (db - da) <= walk_ratio * kb:
                for e in range(ea, eb):
                    inner += 3 * marks[keys[e] & LO_MASK]
                for u in range(da, db):
                    inner += dv[u] * marks[dk[u] & LO_MASK]
            else:
                ahi = a << 32
                for u in range(s0, s1):
                    c = dk[u] & LO_MASK
                    if c == a:
                        continue
                    k = ahi | c
                    e_ac = 3 if _find(keys, ea, eb, k) >= 0 else 0
                    pd = _find(dk, da, db, k)
                    inner += dv[u] * (e_ac + (dv[pd] if pd >= 0 else 0))
            wedges += dv[t] * inner
        for t in range(s0, s1):
            marks[dk[t] & LO_MASK] = 0
    for g in range(groups):
        slot[gv[g]] = -1
    return 6 * pairs + wedges, 0, out[:w]
