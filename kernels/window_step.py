"""One sliding-window step in three compiled calls (see :mod:`gpu_ivm.sliding_window`).

A step of the known-lifespan method used to be some eighty NumPy operations around the
counting kernels; with a few hundred arrivals per step their fixed cost (about a microsecond
each) was most of the step. Here the step is:

1. :func:`expire_due`: pop the edges whose calendar end has run out, expire them or (extended
   meanwhile) move their triangles' scheduled removals (:func:`extend_triangles`), and file
   them again;
2. :func:`classify_arrivals`: one pass over the step's arrivals with an edge hash table
   (packed key → edge id, :mod:`gpu_ivm.kernels.hashmap`): an arrival on a live edge moves its
   true end, an arrival on a dead or unseen edge is a birth (new ids for unseen edges);
3. (the caller appends the unseen edges to the adjacency, :mod:`gpu_ivm.kernels.window_adj`)
   :func:`births`: file the births under their expiry check and count the triangles they
   close (:func:`birth_triangles`).

The triangles through a list of edges come from
:func:`gpu_ivm.kernels.window_adj.common_pairs` (``adj`` below is the adjacency's ``off``,
``ln``, ``nbr``, ``val``; ``ln`` is also each vertex's stored degree, expired edges included).

The per-edge arrays are those of :class:`~gpu_ivm.sliding_window.SlidingWindow`: ``end`` (true
last alive step), ``cend`` (calendar end), ``prev`` (calendar end before this step's
revisit), ``ext`` (revisit order), ``stamp`` (birth order), ``eu`` / ``ev`` (endpoints, u < v),
``nxt`` (the due lists' links) and ``mark`` (the last step that counted the edge as extended).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import EMPTY, find_or_add
from .jit import helper
from .stamp_kernels import due_pop, due_push
from .window_adj import common_pairs


@nb.njit(cache=True, inline="always")
def extend_move(x, y, z, k, end, prev_end, ext_seq, seq_base):
    """The rule of :func:`extend_triangles` for one triangle of extended edge x with other
    edges y, z: (old, new), the last alive steps its removal was and is to be scheduled
    after, or (-1, -1) when the triangle is not alive at k or is moved by another extended
    edge (the one with the largest ext_seq). Shared with the CUDA twin
    (:mod:`gpu_ivm.kernels.cuda_window`)."""
    if end[y] < k or end[z] < k:
        return -1, -1
    sx = ext_seq[x]
    ey = ext_seq[y] > seq_base
    ez = ext_seq[z] > seq_base
    if (ey and ext_seq[y] > sx) or (ez and ext_seq[z] > sx):
        return -1, -1
    oy = prev_end[y] if ey else end[y]
    oz = prev_end[z] if ez else end[z]
    return min(prev_end[x], min(oy, oz)), min(end[x], min(end[y], end[z]))


@nb.njit(cache=True, inline="always")
def birth_slot(x, y, z, k, end, stamp, r):
    """The rule of :func:`birth_triangles` for one triangle of born edge x with other edges
    y, z: the ring slot (of ``r``) of its scheduled removal, or -1 when it is not alive at k
    or is counted by a younger edge. Shared with the CUDA twin."""
    if end[y] < k or end[z] < k or stamp[y] >= stamp[x] or stamp[z] >= stamp[x]:
        return -1
    return (min(end[x], min(end[y], end[z])) + 1) % r


@helper
def split_due(scratch, n, end, cend, gone):
    """Split the ``n`` edges popped into ``scratch``: those extended since they were filed
    (``end > cend``) move to the front of ``scratch``, the others (they expire) go to
    ``gone``, both in popped order. Returns the number extended. Shared with the CUDA twin
    (:mod:`gpu_ivm.kernels.cuda_window_step`)."""
    nx = 0
    for i in range(n):
        e = scratch[i]
        if end[e] > cend[e]:
            scratch[nx] = e
            nx += 1
        else:
            gone[i - nx] = e
    return nx


@nb.njit(cache=True, inline="always")
def revisit(x, j, ext_base, end, cend, prev, ext):
    """The revisit of extended edge x, the j-th of its step: its calendar end before
    (``prev``) and now (``cend`` = ``end``), its revisit order. Shared with the CUDA twin."""
    prev[x] = cend[x]
    cend[x] = end[x]
    ext[x] = ext_base + 1 + j


@helper
def extend_triangles(off, cnt, ya, za, eids, k, end, prev_end, ext_seq, seq_base, cal):
    """Extensions of step k: edge eids[j], alive at k, had its last alive step moved from
    prev_end[e] to end[e] (ext_seq[e] = seq_base + j + 1); its triangles' other two edges'
    values (id + 1) are ya / za[off[j]:off[j] + cnt[j]]. For each triangle alive at k that
    holds an extended edge (counted once, by its extended edge with the largest ext_seq) the
    scheduled removal moves from min(old ends) + 1 to min(new ends) + 1 in the ring calendar
    ``cal`` (index mod len)."""
    r = cal.shape[0]
    for j in range(eids.shape[0]):
        x = eids[j]
        for i in range(off[j], off[j] + cnt[j]):
            old, new = extend_move(x, ya[i] - 1, za[i] - 1, k, end, prev_end, ext_seq,
                                   seq_base)
            if old != new:
                cal[(old + 1) % r] += 1
                cal[(new + 1) % r] -= 1


@nb.njit(cache=True)
def birth_triangles(off, cnt, ya, za, eids, k, end, stamp, cal):
    """Births of step k: edge eids[j] became alive at k with stamp stamp[e]; its triangles'
    other two edges are as in :func:`extend_triangles`. Each triangle alive at k closed by the
    births is counted once (by its edge with the largest stamp), and its removal is scheduled
    at min(ends) + 1. Returns the number of new triangles."""
    r = cal.shape[0]
    total = 0
    for j in range(eids.shape[0]):
        x = eids[j]
        for i in range(off[j], off[j] + cnt[j]):
            q = birth_slot(x, ya[i] - 1, za[i] - 1, k, end, stamp, r)
            if q >= 0:
                total += 1
                cal[q] -= 1
    return total


@nb.njit(cache=True)
def expire_due(aoff, aln, anbr, aval, head, nxt, slot, k, end, cend, prev, ext, ext_base, eu,
               ev, cal, scratch, marks, gone):
    """Step k's revisits: the edges filed under ring ``slot`` (their calendar end was k − 1).
    An edge not extended since expires (listed in ``gone``); an extended one gets ``prev`` =
    old calendar end, ``cend`` = ``end``, ``ext`` = ``ext_base`` + its rank, its triangles'
    removals moved in ``cal``, and is filed again. ``scratch`` and ``gone`` need room for every
    filed edge; ``marks``: zeros, one per vertex. Returns (expired, extended)."""
    n = due_pop(head, nxt, slot, scratch)
    nx = split_due(scratch, n, end, cend, gone)
    if nx == 0:
        return n, 0
    xs = scratch[:nx].copy()
    for j in range(nx):
        revisit(xs[j], j, ext_base, end, cend, prev, ext)
    o, c, ya, za = common_pairs(aoff, aln, anbr, aval, eu[xs], ev[xs], marks)
    extend_triangles(o, c, ya, za, xs, k, cend, prev, ext, ext_base, cal)
    due_push(head, nxt, cend, xs)
    return n - nx, nx


@nb.njit(cache=True)
def classify_arrivals(a, b, last, k, htk, htv, n_eids, seq, end, cend, stamp, mark, eu, ev,
                      born, fresh):
    """Arrivals of step k on edges (a[i], b[i]), a < b, alive through step last[i] >= k.

    An edge alive before the step (``end >= k``, born earlier) has its true end raised to the
    largest ``last`` (counted once in ``extended``, via ``mark``); any other edge is born: it
    gets the next stamp after ``seq``, ``end`` = ``cend`` = its largest ``last``, and is listed
    in ``born``; an edge not in the hash table also gets the next id ``n_eids``, ``eu`` /
    ``ev``, a table entry, and is listed in ``fresh``. The table must have room for every
    arrival. Returns (births, fresh, extended, the new id count)."""
    mask = htk.shape[0] - 1
    nb_ = 0
    nf = 0
    nx = 0
    for i in range(a.shape[0]):
        e, added = find_or_add(htk, htv, (a[i] << 32) | b[i], mask, n_eids)
        t = last[i]
        if added:  # never stored: a new id, born now
            n_eids += 1
            eu[e] = a[i]
            ev[e] = b[i]
            fresh[nf] = e
            nf += 1
            end[e] = -1
        if end[e] < k:  # dead (or new): born at this step
            nb_ += 1
            stamp[e] = seq + nb_
            end[e] = t
            cend[e] = t
            born[nb_ - 1] = e
        elif stamp[e] > seq:  # born earlier in this step: its calendar end moves too
            if t > end[e]:
                end[e] = t
                cend[e] = t
        elif t > end[e]:  # alive before the step: only the true end moves
            end[e] = t
            if mark[e] != k:
                mark[e] = k
                nx += 1
    return nb_, nf, nx, n_eids


@nb.njit(cache=True)
def births(aoff, aln, anbr, aval, head, nxt, born, k, cend, stamp, eu, ev, cal, marks):
    """File the edges ``born`` at step k under their expiry check and count the triangles
    alive at k that they close (each once, by its youngest edge), scheduling each one's
    removal in ``cal``. Returns the new triangles."""
    due_push(head, nxt, cend, born)
    o, c, ya, za = common_pairs(aoff, aln, anbr, aval, eu[born], ev[born], marks)
    return birth_triangles(o, c, ya, za, born, k, cend, stamp, cal)


def empty_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty edge table (the layout of :mod:`gpu_ivm.kernels.hashmap`; fill it with
    :func:`~gpu_ivm.kernels.hashmap.insert`) with room for ``n`` keys at load factor at most
    one half."""
    cap = 1024
    while cap < 2 * n:
        cap *= 2
    return np.zeros(cap, np.int64), np.full(cap, EMPTY, np.int64)
