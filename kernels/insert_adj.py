"""Kernels of the insert-only graph engine on the sliding window's layout.

The state (:class:`gpu_ivm.insert_only_state.EdgeState`) is laid out as the sliding window
keeps its stored edges: an edge hash table (:mod:`gpu_ivm.kernels.hashmap`), per-edge arrays
(endpoints ``eu`` < ``ev``, ``stamp``: the arrival order, 1 ..) and one unsorted row per vertex
in a slab (:mod:`gpu_ivm.kernels.window_adj`), whose lengths are the degrees. Where the window
stores edge ids (its edges' ends and stamps change), the insert-only state stores the stamp
itself, which never changes: the table maps a packed key u < v to the edge's stamp and a row
entry is (neighbour, stamp), so the stamp tests read no per-edge array (an edge id per entry
would need a stamp looked up per entry read, in an array as big as the graph: mostly a cache
miss). A batch is one compiled call, :func:`insert_batch`:

1. each row's key is found or added in the table: a key found (stored before, or an earlier
   row of the batch) stops the call, the keys added are taken out again and the row is
   returned (the caller reports the conflict; nothing changed);
2. the new edges get the next ids and stamps (in row order) and are appended to both rows;
3. the new triangles are counted by the ordered delta rule: new edge (u, v) with stamp s
   counts the common neighbours w whose edges (u, w) and (v, w) have stamps below s, so each
   new triangle is counted once, by its youngest edge.

Step 3 groups the batch's edges by their endpoint of larger degree
(:func:`gpu_ivm.kernels.stamp_kernels.long_endpoint_groups`). A group either marks that long
row once (the stamp per neighbour, :func:`gpu_ivm.kernels.window_adj._mark`) and reads each
edge's short row against the marks (a lone edge: marks its short row and reads the long
one), or reads each short row and probes the table for the long endpoint's edges
(:func:`older_probe`), whichever costs less: a probe (a hash and a slot of a table as big as
the graph, mostly a cache miss) is counted as ``PROBE_COST`` entries read, marking a row as
twice its length. So a lone edge from a hub to a small vertex costs at most ``PROBE_COST``
times its small degree, not the hub's. Batches whose work (the sum of the smaller degrees)
reaches ``par_min`` run on all threads (:func:`count_par`: one range of groups per thread,
each with marks of its own). :func:`list_new` lists the triangles instead of counting them
(``track_changes``), by the same intersections.

>>> import numpy as np
>>> from gpu_ivm.kernels import window_step as wk
>>> htk, htv = wk.empty_table(8)
>>> z = lambda n: np.zeros(n, np.int64)
>>> eu, ev, stamp, off, ln, cap = z(8), z(8), z(8), z(4), z(4), z(4)
>>> bad, nbr, val, used, garbage, delta = insert_batch(
...     np.array([0, 1, 2]), np.array([1, 2, 0]), htk, htv, 0, 0, eu, ev, stamp, off, ln, cap,
...     z(0), z(0), 0, z(5), 0, 1, 1 << 62, True)
>>> int(bad), int(delta), stamp[:3].tolist(), ln.tolist()
(-1, 1, [1, 2, 3], [2, 2, 2, 0])
>>> insert_batch(np.array([3, 1]), np.array([0, 0]), htk, htv, 3, 3, eu, ev, stamp, off, ln,
...              cap, nbr, val, used, z(5), 0, 1, 1 << 62, True)[0]   # row 1: (1, 0) is stored
1
>>> ln.tolist()   # nothing changed
[2, 2, 2, 0]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .hashmap import EMPTY, find_or_add, home_slot, probe
from .jit import helper
from .stamp_kernels import long_endpoint_groups
from .window_adj import _mark, append, room

#: cost of probing the edge table for one short-row entry, in entries read by marks (a
#: probe hashes the key and reads a slot of the table, a mark lookup one vertex's slot)
PROBE_COST = 16


@nb.njit(cache=True, inline="always")
def _key(x, y):
    """The packed key of the undirected edge {x, y} (smaller id first)."""
    return (min(x, y) << 32) | max(x, y)


@nb.njit(cache=True)
def _take_out(htk, htv, a, b, n):
    """Take the keys of rows 0 .. n - 1 out of the table, the last ones it stored (nothing was
    stored after them): their slots were free before, so freeing them again (all at once,
    after every one is found) leaves the table as it was."""
    mask = htk.shape[0] - 1
    slots = np.empty(n, np.int64)
    for i in range(n):
        k = _key(a[i], b[i])
        s = home_slot(k, mask)
        while htv[s] == EMPTY or htk[s] != k:
            s = (s + 1) & mask
        slots[i] = s
    for i in range(n):
        htv[slots[i]] = EMPTY


@helper
def older_probe(off, ln, nbr, val, htk, htv, x, y, s, ow, o1, o2, q, emit):
    """The common neighbours w of x and y whose edges (x, w) and (y, w) both have stamps
    below s, found by reading x's row and probing the table for (y, w): returns q plus their
    number; with ``emit`` each is also written at ow / o1 / o2[q ...] (w, the stamp of (x, w),
    the stamp of (y, w))."""
    mask = htk.shape[0] - 1
    for p in range(off[x], off[x] + ln[x]):
        w = nbr[p]
        sx = val[p]
        if w == y or sx >= s:
            continue
        sy = probe(htk, htv, _key(y, w), mask)
        if sy >= 0 and sy < s:
            if emit:
                ow[q] = w
                o1[q] = sx
                o2[q] = sy
            q += 1
    return q


@helper
def _older_marked(off, ln, nbr, val, marks, x, s, ow, o1, o2, q, emit):
    """:func:`older_probe` against marks: the other row's stamps are in ``marks`` (by
    neighbour, zero elsewhere) instead of the table."""
    for p in range(off[x], off[x] + ln[x]):
        w = nbr[p]
        m = marks[w]
        if m != 0 and m < s and val[p] < s:
            if emit:
                ow[q] = w
                o1[q] = val[p]
                o2[q] = m
            q += 1
    return q


@helper
def _owned(oe, o1, o2, q0, q, e, swap):
    """Name edge e as the closing edge of the triangles at [q0, q); ``swap``: their stamps
    came as (the other endpoint's, e's first endpoint's) and are put back in endpoint
    order."""
    for t in range(q0, q):
        oe[t] = e
        if swap:
            o1[t], o2[t] = o2[t], o1[t]


@helper
def older_of_edge(off, ln, nbr, val, htk, htv, stamp, eu, ev, e, j, oe, ow, o1, o2, q, emit):
    """The triangles that the stored edge e closes with older edges, by :func:`older_probe` on
    its shorter row: returns q plus their number; with ``emit`` each is written at oe / ow /
    o1 / o2[q ...] (``j``, w, the stamps of (eu[e], w) and (ev[e], w)). The per-edge body of
    the CUDA twins' count and listing (:mod:`gpu_ivm.kernels.cuda_insert_adj`)."""
    x = eu[e]
    y = ev[e]
    if ln[y] < ln[x]:
        x, y = y, x
    q1 = older_probe(off, ln, nbr, val, htk, htv, x, y, stamp[e], ow, o1, o2, q, emit)
    if emit:
        _owned(oe, o1, o2, q, q1, j, x != eu[e])
    return q1


@helper
def _older_range(off, ln, nbr, val, htk, htv, stamp, us, vs, first, longv, order, lo, hi,
                 marks, oe, ow, o1, o2, q, emit):
    """The triangles that the new edges order[lo:hi] (indices into us / vs, ids from
    ``first``; sorted by long endpoint ``longv``) close, each by its youngest edge: returns q
    plus their number; with ``emit`` each is written at oe / ow / o1 / o2[q ...] (the edge's
    index, the third vertex w, the stamps of (us[e], w) and (vs[e], w)). A run of edges with
    the same long endpoint is one group (see the module docstring for the three ways to
    intersect it). ``marks``: zeros, one per vertex id (zeros again on return)."""
    t = lo
    while t < hi:
        big = longv[order[t]]
        g = t
        short = 0
        while g < hi and longv[order[g]] == big:
            e = order[g]
            short += ln[vs[e] if us[e] == big else us[e]]
            g += 1
        lone = g - t == 1
        if PROBE_COST * short <= (2 * short + ln[big] if lone else 2 * ln[big] + short):
            for r in range(t, g):
                e = order[r]
                small = vs[e] if us[e] == big else us[e]
                q0 = q
                q = older_probe(off, ln, nbr, val, htk, htv, small, big, stamp[first + e], ow,
                                o1, o2, q, emit)
                if emit:
                    _owned(oe, o1, o2, q0, q, e, small != us[e])
        elif lone:  # mark the short row, read the long one
            e = order[t]
            small = vs[e] if us[e] == big else us[e]
            _mark(nbr, val, off[small], off[small] + ln[small], marks, True)
            q0 = q
            q = _older_marked(off, ln, nbr, val, marks, big, stamp[first + e], ow, o1, o2, q,
                              emit)
            if emit:
                _owned(oe, o1, o2, q0, q, e, big != us[e])
            _mark(nbr, val, off[small], off[small] + ln[small], marks, False)
        else:  # mark the long row once, read each short one
            _mark(nbr, val, off[big], off[big] + ln[big], marks, True)
            for r in range(t, g):
                e = order[r]
                small = vs[e] if us[e] == big else us[e]
                q0 = q
                q = _older_marked(off, ln, nbr, val, marks, small, stamp[first + e], ow, o1,
                                  o2, q, emit)
                if emit:
                    _owned(oe, o1, o2, q0, q, e, small != us[e])
            _mark(nbr, val, off[big], off[big] + ln[big], marks, False)
        t = g
    return q


@nb.njit(cache=True)
def count_serial(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, marks):
    """Triangles closed by the new edges ``first`` .. ``first + n - 1`` (stored, appended to
    the rows), each counted once, by its youngest edge; one thread, grouped by long endpoint
    (see the module docstring). ``marks``: zeros, one per vertex id (zeros again on return)."""
    us = eu[first:first + n]
    vs = ev[first:first + n]
    longv, order, _ = long_endpoint_groups(ln, us, vs)
    z = np.empty(0, np.int64)
    return _older_range(off, ln, nbr, val, htk, htv, stamp, us, vs, first, longv, order, 0, n,
                        marks, z, z, z, z, 0, False)


@nb.njit(cache=True, parallel=True)
def count_par(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, threads):
    """:func:`count_serial` on ``threads`` threads: the edges, sorted by long endpoint, are cut
    into one range per thread of about equal work (a group cut in two is marked by both threads),
    each with marks of its own (zeroed here: one entry per vertex id per thread, which the
    caller's threshold pays for)."""
    us = eu[first:first + n]
    vs = ev[first:first + n]
    longv, order, _ = long_endpoint_groups(ln, us, vs)
    cum = np.empty(n + 1, np.int64)
    cum[0] = 0
    for t in range(n):
        e = order[t]
        big = longv[e]
        c = ln[vs[e] if us[e] == big else us[e]] + 1
        if t == 0 or longv[order[t - 1]] != big:
            c += 2 * ln[big]
        cum[t + 1] = cum[t] + c
    parts = max(1, min(threads, n))
    cuts = np.searchsorted(cum, (np.arange(parts + 1) * cum[n]) // parts)
    cuts[0] = 0
    cuts[parts] = n
    out = np.zeros(parts, np.int64)
    z = np.empty(0, np.int64)
    for c in nb.prange(parts):
        marks = np.zeros(off.shape[0], np.int64)
        out[c] = _older_range(off, ln, nbr, val, htk, htv, stamp, us, vs, first, longv, order,
                              cuts[c], cuts[c + 1], marks, z, z, z, z, 0, False)
    return out.sum()


@nb.njit(cache=True)
def insert_batch(a, b, htk, htv, n_eids, seq, eu, ev, stamp, off, ln, cap, nbr, val, used,
                 marks, par_min, threads, limit, count):
    """Store the batch's edges {a[i], b[i]} (no self-loops) and count the triangles they close.

    Row i's edge gets id ``n_eids + i`` and stamp ``seq + 1 + i`` (the value of its table
    entry and of its two row entries). The table needs room for
    every row, the per-edge arrays ids up to ``n_eids + len(a)``, the row arrays (``off``,
    ``ln``, ``cap``, ``marks``) every vertex id; the slab (``nbr``, ``val``, ``used`` entries
    in use) grows here when it must. Returns (bad, nbr, val, used, garbage, delta):

    - ``bad`` >= 0: row ``bad`` holds an edge that is stored, or that an earlier row holds;
      nothing changed (the other outputs are the inputs, delta 0);
    - else ``delta``: the new triangles; -1 when not ``count`` or when the batch's work (the
      sum of its edges' smaller endpoint degrees, after the batch) exceeds ``limit`` (the
      caller recounts). ``threads`` threads count when the work reaches ``par_min``.
    """
    m = a.shape[0]
    mask = htk.shape[0] - 1
    for i in range(m):
        x = min(a[i], b[i])
        y = max(a[i], b[i])
        _, added = find_or_add(htk, htv, (x << 32) | y, mask, seq + 1 + i)
        if not added:
            _take_out(htk, htv, a, b, i)
            return i, nbr, val, used, 0, 0
        e = n_eids + i
        eu[e] = x
        ev[e] = y
        stamp[e] = seq + 1 + i
    us = eu[n_eids:n_eids + m]
    vs = ev[n_eids:n_eids + m]
    need = used + room(ln, cap, us, vs)
    if need > nbr.shape[0]:
        size = max(need, 2 * nbr.shape[0], 1024)
        nbr2 = np.zeros(size, np.int64)
        val2 = np.zeros(size, np.int64)
        nbr2[:used] = nbr[:used]
        val2[:used] = val[:used]
        nbr = nbr2
        val = val2
    used, garbage = append(off, ln, cap, nbr, val, used, us, vs,
                           stamp[n_eids:n_eids + m] - 1)  # values: the stamps
    if not count or m == 0:
        return -1, nbr, val, used, garbage, -1 if m else 0
    work = 0
    for j in range(m):
        work += min(ln[us[j]], ln[vs[j]])
    if work > limit:
        return -1, nbr, val, used, garbage, -1
    if work >= par_min:
        delta = count_par(off, ln, nbr, val, htk, htv, stamp, eu, ev, n_eids, m, threads)
    else:
        delta = count_serial(off, ln, nbr, val, htk, htv, stamp, eu, ev, n_eids, m, marks)
    return -1, nbr, val, used, garbage, delta


@nb.njit(cache=True)
def list_new(off, ln, nbr, val, htk, htv, stamp, eu, ev, first, n, marks):
    """The triangles that the new edges ``first`` .. ``first + n - 1`` close (those
    :func:`insert_batch` counts): for the k-th, ``edge[k]`` (0 .. n - 1) the new edge that
    closed it (its youngest edge), ``w[k]`` the third vertex, ``s1[k]`` / ``s2[k]`` the stamps
    of (eu, w) and (ev, w). Grouped by long endpoint as the count is (``marks``: zeros, one
    per vertex id)."""
    us = eu[first:first + n]
    vs = ev[first:first + n]
    total = 0
    for j in range(n):
        total += max(min(ln[us[j]], ln[vs[j]]) - 1, 0)  # w is not the other endpoint
    edge = np.empty(total + 1, np.int64)
    w = np.empty(total + 1, np.int64)
    s1 = np.empty(total + 1, np.int64)
    s2 = np.empty(total + 1, np.int64)
    longv, order, _ = long_endpoint_groups(ln, us, vs)
    q = _older_range(off, ln, nbr, val, htk, htv, stamp, us, vs, first, longv, order, 0, n,
                     marks, edge, w, s1, s2, 0, True)
    return edge[:q], w[:q], s1[:q], s2[:q]
