"""One sliding-window step in three compiled calls (see :mod:`gpu_ivm.sliding_window`).

A step of the known-lifespan method used to be some eighty NumPy operations around the
counting kernels; with a few hundred arrivals per step their fixed cost (about a microsecond
each) was most of the step. Here the step is:

1. :func:`expire_due`: pop the edges whose calendar end has run out, expire them or (extended
   meanwhile) move their triangles' scheduled removals (:func:`stamp_kernels.window_extend`),
   and file them again;
2. :func:`classify_arrivals`: one pass over the step's arrivals with an edge hash table
   (packed key → edge id, :mod:`gpu_ivm.kernels.hashmap`): an arrival on a live edge moves its
   true end, an arrival on a dead or unseen edge is a birth (new ids for unseen edges);
3. (the caller stores the unseen edges in the sorted runs) :func:`births`: file the births
   under their expiry check and count the triangles they close
   (:func:`stamp_kernels.window_insert`).

The per-edge arrays are those of :class:`~gpu_ivm.sliding_window.SlidingWindow`: ``end`` (true
last alive step), ``cend`` (calendar end), ``prev`` (calendar end before this step's
revisit), ``ext`` (revisit order), ``stamp`` (birth order), ``eu`` / ``ev`` (endpoints, u < v),
``nxt`` (the due lists' links) and ``mark`` (the last step that counted the edge as extended).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import EMPTY, home_slot
from .stamp_kernels import due_push, window_extend, window_insert


@nb.njit(cache=True)
def expire_due(st, deg, head, nxt, slot, k, end, cend, prev, ext, ext_base, eu, ev, cal,
               scratch, marks):
    """Step k's revisits: the edges filed under ring ``slot`` (their calendar end was k − 1).
    An edge not extended since expires; an extended one gets ``prev`` = old calendar end,
    ``cend`` = ``end``, ``ext`` = ``ext_base`` + its rank, its triangles' removals moved in
    ``cal``, and is filed again. ``scratch`` needs room for every filed edge; ``marks``: see
    :func:`stamp_kernels.common_values_mk`. Returns (expired, extended)."""
    n = 0
    e = head[slot]
    while e >= 0:
        scratch[n] = e
        n += 1
        e = nxt[e]
    head[slot] = -1
    nx = 0
    for i in range(n):
        e = scratch[i]
        if end[e] > cend[e]:
            scratch[nx] = e
            nx += 1
    if nx == 0:
        return n, 0
    xs = scratch[:nx].copy()
    for j in range(nx):
        x = xs[j]
        prev[x] = cend[x]
        cend[x] = end[x]
        ext[x] = ext_base + 1 + j
    window_extend(st, deg, eu[xs], ev[xs], xs, k, cend, prev, ext, ext_base, cal, marks)
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
        key = (a[i] << 32) | b[i]
        s = home_slot(key, mask)
        e = -1
        while True:
            v = htv[s]
            if v == EMPTY:
                break
            if htk[s] == key:
                e = v
                break
            s = (s + 1) & mask
        t = last[i]
        if e < 0:  # never stored: a new id, born now
            e = n_eids
            n_eids += 1
            htk[s] = key
            htv[s] = e
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
def births(st, deg, head, nxt, born, k, cend, stamp, eu, ev, cal, marks):
    """File the edges ``born`` at step k under their expiry check and count the triangles
    alive at k that they close (each once, by its youngest edge), scheduling each one's
    removal in ``cal``. Returns the new triangles."""
    due_push(head, nxt, cend, born)
    return window_insert(st, deg, eu[born], ev[born], born, k, cend, stamp, cal, marks)


@nb.njit(cache=True)
def table_insert(htk, htv, keys, vals):
    """Insert absent ``keys`` with ``vals`` (ids >= 0) into the edge table (room needed)."""
    mask = htk.shape[0] - 1
    for i in range(keys.shape[0]):
        s = home_slot(keys[i], mask)
        while htv[s] != EMPTY:
            s = (s + 1) & mask
        htk[s] = keys[i]
        htv[s] = vals[i]


def empty_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """An empty edge table with room for ``n`` keys at load factor at most one half."""
    cap = 1024
    while cap < 2 * n:
        cap *= 2
    return np.zeros(cap, np.int64), np.full(cap, EMPTY, np.int64)
