"""The sliding window's adjacency: one unsorted row per vertex in a slab, with room to grow.

Row ``x`` holds ``ln[x]`` entries at ``nbr[off[x]:off[x] + ln[x]]`` (the neighbours) and
``val[...]`` (edge id + 1), with room for ``cap[x]``. An edge is appended to both its rows; a
full row moves to the slab's end with twice the room (the old place becomes garbage, reclaimed
when the window rebuilds its state). Rows are not sorted: the window only ever intersects
them through marks (:func:`common_pairs`), so a row is located in O(1) and an edge stored in
O(1), where the sorted runs of :class:`gpu_ivm.store.ZStore` cost a search per run and a sort
and merge per step.

>>> import numpy as np
>>> off, ln, cap = (np.zeros(4, np.int64) for _ in range(3))
>>> nbr, val = np.zeros(64, np.int64), np.zeros(64, np.int64)
>>> us, vs, ids = np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([0, 1, 2])
>>> need = room(ln, cap, us, vs)
>>> used, garbage = append(off, ln, cap, nbr, val, 0, us, vs, ids)
>>> need == used, ln.tolist(), sorted(nbr[off[2]:off[2] + ln[2]].tolist())
(True, [2, 2, 2, 0], [0, 1])
>>> marks = np.zeros(5, np.int64)
>>> o, c, y, z = common_pairs(off, ln, nbr, val, np.array([0]), np.array([1]), marks)
>>> int(c[0]), sorted([int(y[0]), int(z[0])])   # triangle 0-1-2 through edge 0-1: edges 2, 3
(1, [2, 3])
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper
from .stamp_kernels import long_endpoint_groups

MIN_ROOM = 4  # room of a row when it gets its first entry


@nb.njit(cache=True, inline="always")
def next_room(c):
    """The room of a full row of room ``c`` after its move (shared with the CUDA twin,
    :mod:`gpu_ivm.kernels.cuda_window_step`)."""
    return max(MIN_ROOM, 2 * c)


@nb.njit(cache=True)
def room(ln, cap, us, vs):
    """Slab entries that :func:`append` of these edges will take (moves of full rows
    included); ``ln`` and ``cap`` are left as they were."""
    n = us.shape[0]
    sl = np.empty(2 * n, np.int64)
    sc = np.empty(2 * n, np.int64)
    need = 0
    for i in range(n):
        for side in range(2):
            x = us[i] if side == 0 else vs[i]
            sl[2 * i + side] = ln[x]
            sc[2 * i + side] = cap[x]
            if ln[x] == cap[x]:
                nc = next_room(cap[x])
                need += nc
                cap[x] = nc
            ln[x] += 1
    for j in range(2 * n - 1, -1, -1):  # undo, last change first
        x = us[j >> 1] if (j & 1) == 0 else vs[j >> 1]
        ln[x] = sl[j]
        cap[x] = sc[j]
    return need


@nb.njit(cache=True)
def append(off, ln, cap, nbr, val, used, us, vs, eids):
    """Append edge eids[i] = (us[i], vs[i]) to both rows (value id + 1); a full row moves to
    the slab's end (``used``) with twice the room. The slab needs :func:`room` entries free.
    Returns (slab entries used, entries left behind as garbage)."""
    garbage = 0
    for i in range(us.shape[0]):
        e1 = eids[i] + 1
        for side in range(2):
            x = us[i] if side == 0 else vs[i]
            y = vs[i] if side == 0 else us[i]
            if ln[x] == cap[x]:
                nc = next_room(cap[x])
                o = off[x]
                for p in range(ln[x]):
                    nbr[used + p] = nbr[o + p]
                    val[used + p] = val[o + p]
                garbage += cap[x]
                off[x] = used
                cap[x] = nc
                used += nc
            p = off[x] + ln[x]
            nbr[p] = y
            val[p] = e1
            ln[x] += 1
    return used, garbage


@nb.njit(cache=True)
def build(n_ids, us, vs):
    """The adjacency of edges i = (us[i], vs[i]) (ids i, both directions), each row with a
    quarter more room than it holds. Returns (off, ln, cap, nbr, val, used)."""
    ln = np.zeros(n_ids, np.int64)
    for i in range(us.shape[0]):
        ln[us[i]] += 1
        ln[vs[i]] += 1
    cap = np.zeros(n_ids, np.int64)
    off = np.zeros(n_ids, np.int64)
    used = 0
    for x in range(n_ids):
        if ln[x]:
            cap[x] = max(MIN_ROOM, ln[x] + ln[x] // 4)
        off[x] = used
        used += cap[x]
    size = max(2 * used, 1024)
    nbr = np.zeros(size, np.int64)
    val = np.zeros(size, np.int64)
    fill = np.zeros(n_ids, np.int64)
    for i in range(us.shape[0]):
        for side in range(2):
            x = us[i] if side == 0 else vs[i]
            p = off[x] + fill[x]
            nbr[p] = vs[i] if side == 0 else us[i]
            val[p] = i + 1
            fill[x] += 1
    return off, ln, cap, nbr, val, used


@helper
def _mark(nbr, val, lo, hi, marks, on):
    for p in range(lo, hi):
        marks[nbr[p]] = val[p] if on else 0


@nb.njit(cache=True)
def common_pairs(off, ln, nbr, val, us, vs, marks):
    """The triangles through each edge j = (us[j], vs[j]): for every common neighbour w, the
    values of the edges (us[j], w) and (vs[j], w), in some order (callers treat the two
    alike), at ``y[o[j]:o[j] + c[j]]`` and ``z[...]``. Returns (o, c, y, z).

    The edges are grouped by their endpoint of larger degree: a group of two or more writes
    that row's values into ``marks`` (zeros, indexed by vertex; zeros again on return) once
    and reads each edge's other row against it; a lone edge marks its shorter row and reads
    the longer one."""
    n = us.shape[0]
    o = np.empty(n, np.int64)
    c = np.zeros(n, np.int64)
    total = 0
    for j in range(n):
        o[j] = total
        total += max(min(ln[us[j]], ln[vs[j]]) - 1, 0)  # w is not the other endpoint
    y = np.empty(total + 1, np.int64)
    z = np.empty(total + 1, np.int64)
    longv, order, starts = long_endpoint_groups(ln, us, vs)
    for k in range(starts.shape[0] - 1):
        i = starts[k]
        g = starts[k + 1]
        big = longv[order[i]]
        lone = g - i == 1
        if not lone:
            _mark(nbr, val, off[big], off[big] + ln[big], marks, True)
        for t in range(i, g):
            e = order[t]
            small = vs[e] if us[e] == big else us[e]
            if min(ln[big], ln[small]) <= 1:
                continue
            a = small if lone else big  # the marked row
            b = big if lone else small  # the row read
            if lone:
                _mark(nbr, val, off[a], off[a] + ln[a], marks, True)
            q = o[e]
            for p in range(off[b], off[b] + ln[b]):
                w = marks[nbr[p]]
                if w != 0:
                    y[q] = w
                    z[q] = val[p]
                    q += 1
            c[e] = q - o[e]
            if lone:
                _mark(nbr, val, off[a], off[a] + ln[a], marks, False)
        if not lone:
            _mark(nbr, val, off[big], off[big] + ln[big], marks, False)
    return o, c, y, z
