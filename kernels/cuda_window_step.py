"""CUDA twins of the sliding window's step bookkeeping (:mod:`gpu_ivm.kernels.window_step`,
:mod:`gpu_ivm.kernels.window_adj`, the due lists of :mod:`gpu_ivm.kernels.stamp_kernels`).

With these and the triangle twins of :mod:`gpu_ivm.kernels.cuda_window`, every part of a window
step has a device form, so a step can run with the window's state resident on the device
(:class:`gpu_ivm.window_device.DeviceSlidingWindow` drives them). Each twin takes the CPU
kernel's arrays (device arrays on hardware, NumPy arrays under the simulator) and leaves them
as the CPU kernel does, up to the orders noted below.

- :func:`classify_arrivals` (the CPU's ``classify_arrivals``). Three kernels around one scan:

  1. *claim*, one thread per arrival: find the edge's slot in the edge table (key
     ``(a << 32) | b``, the layout of :mod:`gpu_ivm.kernels.hashmap`, searched from its
     ``home_slot``), or claim a free one by ``atomic.cas`` on the slot's **key** (0 → key).
     An edge key has a < b, so b >= 1 and a key is never 0, and every writer of the table
     (``hashmap.insert`` / ``find_or_add``, ``cuda_hash.insert``) fills key and value
     together in a zeroed table: a slot is free exactly while its key is 0. Claiming the key
     (not the value, as ``cuda_hash`` does for distinct keys) lets two arrivals of the same
     new edge meet in one slot: the loser of the CAS reads back the winner's key and stops
     there. Then ``atomic.min`` of the arrival's index and ``atomic.max`` of its last alive
     step into two scratch arrays of one entry per table slot (``first``, ``top``).
  2. *lead*: the arrival with the smallest index of each edge (``first[slot] == i``) leads
     it and flags whether the edge is fresh (value still EMPTY: never stored) and whether it
     is born (fresh, or dead: ``end < k``). Both flags go into one int64 (fresh + born << 32)
     so a single exclusive scan ranks both.
  3. *settle*, per leader: a fresh edge takes id ``n_eids`` + its fresh rank (written into
     the slot's value, ``eu`` / ``ev``, ``fresh``); a born one stamp ``seq + 1`` + its birth
     rank, ``end`` = ``cend`` = the edge's largest last (``born``); a live one raises ``end``
     to that largest last and counts one extension (``mark``, ``atomic.add``). The leader
     puts ``first`` / ``top`` back (``NO_ARRIVAL``, -1) for the next step.

  **Ids and stamps are deterministic and equal to the CPU's**: the CPU numbers fresh edges
  and births in the order of their first arrival, and the scan ranks the leaders, which are
  the first arrivals, in that order. Taking each edge's largest last at once gives the CPU's
  arrival-by-arrival result: a born edge's end and calendar end are the largest last, a live
  edge's end rises to it and is counted extended iff it exceeds the old end, and an edge that
  arrives several times in a batch is born (and ranked) once. Only the table's *slots* of new
  edges may differ (two new keys with one probe chain claim slots in the order the threads
  reach them); the map key → id is the CPU's.
- :func:`due_push` (``stamp_kernels.due_push``): one thread per edge, pushed with
  ``atomic.exch`` on its slot's head (the old head becomes its ``nxt``). The lists hold the
  CPU's edges; their order within a slot is the order the threads got there.
- :func:`expire_due` (the CPU's ``expire_due``): one thread walks the slot's list (the CPU's
  ``due_pop``) and splits it into expiring and extended edges (the CPU's ``split_due``):
  walking a linked list is sequential by nature, O(edges due) on one thread (a
  list-ranking walk would parallelise it; the due lists are short: the edges filed one window
  ago). Then one thread per extended edge (the CPU's ``revisit``), the triangle twin
  :func:`gpu_ivm.kernels.cuda_window.extend_triangles`, and :func:`due_push`. Given the same
  lists, the outputs equal the CPU's, ``gone`` and the revisit order included.
- :func:`births`: :func:`due_push`, then :func:`gpu_ivm.kernels.cuda_window.birth_triangles`.
- :func:`append` (``window_adj.room`` + ``window_adj.append``): one thread per edge end takes
  its place in the row with ``atomic.add`` on a per-vertex counter ``add`` (zeros, left zero),
  the first end of each row sizes the row's move (the CPU's room doubling, ``next_room``,
  repeated up to the new length), an exclusive scan places the moved rows at the slab's end,
  and the moves, the new entries and the new lengths follow in three more kernels. **Rows are
  equal to the CPU's as sets** of (neighbour, edge id + 1), with the CPU's lengths and rooms;
  the order within a row and the rows' places differ: a row that outgrows its room several
  times in one step moves once, to its final room, where the CPU moves it at each doubling,
  so the twin takes at most the CPU's slab entries.

Launch shapes are those of :mod:`gpu_ivm.kernels.cuda_launch` (grid-stride loops), so any
shape gives the same result. The twins are tested against the CPU kernels step by step on real
window streams in the CUDA simulator (``tests/cuda_sim_window_step_cases.py``); nothing here
has run or been timed on a GPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import cuda

from . import cuda_window
from .cuda_launch import check_1d, empty, exclusive_scan, grid, host_ints, launch, scalar, zeros
from .hashmap import EMPTY, home_slot
from .stamp_kernels import due_pop
from .window_adj import next_room
from .window_step import revisit, split_due

FREE_KEY = 0  # the key of a free table slot (edge keys (a << 32) | b with a < b are never 0)
NO_ARRIVAL = np.iinfo(np.int64).max  # ``first`` of a table slot no arrival of the step holds
LOW = (1 << 32) - 1  # the fresh rank's half of a packed (fresh + born << 32) scan


@nb.njit(cache=True, inline="always")
def final_room(c, need):
    """The room of a row of room ``c`` once it holds ``need`` entries: ``next_room`` repeated,
    as the CPU's ``append`` does one entry at a time."""
    while c < need:
        c = next_room(c)
    return c


@nb.njit(cache=True, inline="always")
def lead_flags(e, end_e, k):
    """fresh + (born << 32) for an edge of value ``e`` in the table (EMPTY: never stored) and
    last alive step ``end_e``: the CPU's rule, an edge not alive at k (or new) is born."""
    fresh = 1 if e == EMPTY else 0
    born = 1 if fresh == 1 or end_e < k else 0
    return fresh + (born << 32)


# ----------------------------------------------------------------------------- arrivals
@cuda.jit(cache=True)
def _claim_kernel(arr, table, scratch, n):
    """Per arrival (grid-stride): its edge's table slot (found, or claimed by CAS on the
    key), ``first`` / ``top`` of the slot lowered / raised atomically."""
    a, b, last, slot = arr
    tkeys = table[0]
    first, top = scratch
    mask = tkeys.shape[0] - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        key = (a[i] << 32) | b[i]
        s = home_slot(key, mask)
        while True:
            kk = tkeys[s]
            if kk == key:
                break
            if kk == FREE_KEY:
                old = cuda.atomic.cas(tkeys, s, FREE_KEY, key)
                if old == FREE_KEY or old == key:
                    break
            s = (s + 1) & mask
        slot[i] = s
        cuda.atomic.min(first, s, i)
        cuda.atomic.max(top, s, last[i])
        i += stride


@cuda.jit(cache=True)
def _lead_kernel(arr, table, scratch, edge, flags, k, n):
    """Per arrival: ``lead_flags`` of its edge if it leads it (the first arrival), else 0."""
    slot = arr[3]
    tvals = table[1]
    first = scratch[0]
    end = edge[0]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        s = slot[i]
        f = 0
        if first[s] == i:
            e = tvals[s]
            f = lead_flags(e, end[e] if e >= 0 else -1, k)
        flags[i] = f
        i += stride


@cuda.jit(cache=True)
def _settle_kernel(arr, table, scratch, edge, out, k, n_eids, seq, n):
    """Per leading arrival: new id, birth or extension of its edge (see the module
    docstring); puts the slot's scratch back."""
    a, b, last, slot = arr
    tvals = table[1]
    first, top = scratch
    end, cend, stamp, mark, eu, ev = edge
    ranks, born, fresh, count = out
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        s = slot[i]
        if first[s] == i:
            t = top[s]
            e = tvals[s]
            r = ranks[i]
            if e == EMPTY:
                e = n_eids + (r & LOW)
                tvals[s] = e
                eu[e] = a[i]
                ev[e] = b[i]
                fresh[r & LOW] = e
                end[e] = -1
            if end[e] < k:
                j = r >> 32
                stamp[e] = seq + 1 + j
                end[e] = t
                cend[e] = t
                born[j] = e
            elif t > end[e]:
                end[e] = t
                if mark[e] != k:
                    mark[e] = k
                    cuda.atomic.add(count, 0, 1)
            first[s] = NO_ARRIVAL
            top[s] = -1
        i += stride


def arrival_scratch(n: int, xp=np) -> tuple:
    """The scratch of :func:`classify_arrivals` for a table of ``n`` slots: (``first``,
    ``top``) = (NO_ARRIVAL, -1) per slot, in arrays of ``xp`` (NumPy or CuPy)."""
    return xp.full(n, NO_ARRIVAL, np.int64), xp.full(n, -1, np.int64)


def classify_arrivals(a, b, last, k: int, htk, htv, n_eids: int, seq: int, end, cend, stamp,
                      mark, eu, ev, born, fresh, first, top) -> tuple[int, int, int, int]:
    """Arrivals of step k on edges (a[i], b[i]), a < b, alive through step last[i] >= k: the
    CPU's ``classify_arrivals`` with its arguments and results (births, fresh, extended, the
    new id count), ``born`` / ``fresh`` / ids / stamps equal to the CPU's (module docstring).
    ``first`` / ``top``: :func:`arrival_scratch` of the table's size, left so. The table must
    have room for every arrival. Reads back two scalars."""
    for name, x in (("a", a), ("b", b), ("last", last), ("table keys", htk),
                    ("table values", htv), ("end", end), ("cend", cend), ("stamp", stamp),
                    ("mark", mark), ("eu", eu), ("ev", ev), ("born", born), ("fresh", fresh),
                    ("first", first), ("top", top)):
        check_1d(name, x)
    n = a.shape[0]
    if n == 0:
        return 0, 0, 0, n_eids
    slot = empty(n)
    flags = empty(n)
    count = zeros(1)
    blocks, tpb = grid(n)
    arr = (a, b, last, slot)
    table = (htk, htv)
    scratch = (first, top)
    edge = (end, cend, stamp, mark, eu, ev)
    launch(_claim_kernel, blocks, tpb, arr, table, scratch, n)
    launch(_lead_kernel, blocks, tpb, arr, table, scratch, edge, flags, np.int64(k), n)
    ranks = exclusive_scan(flags)
    launch(_settle_kernel, blocks, tpb, arr, table, scratch, edge, (ranks, born, fresh, count),
           np.int64(k), np.int64(n_eids), np.int64(seq), n)
    tot = scalar(ranks, n)
    nf, nb_ = tot & LOW, tot >> 32
    return nb_, nf, scalar(count, 0), n_eids + nf


# ----------------------------------------------------------------------------- due lists
@cuda.jit(cache=True)
def _due_push_kernel(lists, ids, n):
    """Per edge: push it on the list of ring slot (cend + 1) mod len(head) by atomic
    exchange of the slot's head."""
    head, nxt, cend = lists
    eids = ids[0]
    r = head.shape[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        e = eids[j]
        nxt[e] = cuda.atomic.exch(head, (cend[e] + 1) % r, e)
        j += stride


@cuda.jit(cache=True)
def _due_pop_kernel(lists, ends, out, slot):
    """One thread: pop ``slot``'s list into ``scratch`` (``due_pop``) and split it
    (``split_due``); counts = (popped, extended)."""
    head, nxt, cend = lists
    scratch, gone, counts = out
    if cuda.grid(1) == 0:
        n = due_pop(head, nxt, slot, scratch)
        counts[0] = n
        counts[1] = split_due(scratch, n, ends[0], cend, gone)


@cuda.jit(cache=True)
def _revisit_kernel(edge, ids, ext_base, n):
    """Per extended edge j: ``revisit`` (previous and new calendar end, revisit order)."""
    end, cend, prev, ext = edge
    xs = ids[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        revisit(xs[j], j, ext_base, end, cend, prev, ext)
        j += stride


def due_push(head, nxt, cend, eids) -> None:
    """File each edge of ``eids`` under ring slot (cend[e] + 1) mod len(head), as
    ``stamp_kernels.due_push`` (the order within a slot's list may differ)."""
    for name, x in (("head", head), ("nxt", nxt), ("cend", cend), ("eids", eids)):
        check_1d(name, x)
    n = eids.shape[0]
    if n == 0:
        return
    launch(_due_push_kernel, *grid(n), (head, nxt, cend), (eids,), n)


def expire_due(adj, table, head, nxt, slot: int, k: int, end, cend, prev, ext, ext_base: int,
               eu, ev, cal, scratch, gone) -> tuple[int, int]:
    """Step k's revisits, as the CPU's ``expire_due`` (``adj`` = (off, ln, nbr, val), ``table``
    = (keys, values) of the edge table, the triangle twin's arguments): the edges filed under
    ring ``slot`` expire (listed in ``gone``) or, extended since, get ``prev`` / ``cend`` /
    ``ext``, their triangles' removals moved in ``cal``, and are filed again. ``scratch`` and
    ``gone`` need room for every filed edge. Returns (expired, extended); reads back two
    scalars."""
    for name, x in (("head", head), ("nxt", nxt), ("end", end), ("cend", cend),
                    ("prev", prev), ("ext", ext), ("scratch", scratch), ("gone", gone)):
        check_1d(name, x)
    counts = zeros(2)
    launch(_due_pop_kernel, 1, 1, (head, nxt, cend), (end,), (scratch, gone, counts),
           np.int64(slot))
    n, nx = host_ints(counts)
    if nx:
        xs = scratch[:nx]
        launch(_revisit_kernel, *grid(nx), (end, cend, prev, ext), (xs,), np.int64(ext_base),
               nx)
        cuda_window.extend_triangles(adj, table, eu, ev, xs, k, cend, prev, ext, ext_base, cal)
        due_push(head, nxt, cend, xs)
    return n - nx, nx


def births(adj, table, head, nxt, born, k: int, cend, stamp, eu, ev, cal) -> int:
    """The CPU's ``births``: file the edges ``born`` at step k under their expiry check and
    count the triangles alive at k that they close (each once, by its youngest edge),
    scheduling their removals in ``cal``. Returns the new triangles."""
    due_push(head, nxt, cend, born)
    return cuda_window.birth_triangles(adj, table, eu, ev, born, k, cend, stamp, cal)


# ----------------------------------------------------------------------------- adjacency
@cuda.jit(device=True)
def _end_of(us, vs, j):
    """Edge end j of the batch: (the row, the neighbour written there)."""
    if (j & 1) == 0:
        return us[j >> 1], vs[j >> 1]
    return vs[j >> 1], us[j >> 1]


@cuda.jit(cache=True)
def _rows_count_kernel(rows, ends, work, n2):
    """Per edge end: its place among the row's new entries (``atomic.add`` on ``add``)."""
    add = rows[3]
    us, vs = ends
    pos = work[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n2:
        x, _ = _end_of(us, vs, j)
        pos[j] = cuda.atomic.add(add, x, 1)
        j += stride


@cuda.jit(cache=True)
def _rows_room_kernel(rows, ends, work, n2):
    """Per edge end: the room of its row's move if it is the row's first new entry and the
    row outgrows its room (``final_room``), else 0."""
    _, ln, cap, add = rows
    us, vs = ends
    pos, size = work[0], work[1]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n2:
        size[j] = 0
        if pos[j] == 0:
            x, _ = _end_of(us, vs, j)
            need = ln[x] + add[x]
            if need > cap[x]:
                size[j] = final_room(cap[x], need)
        j += stride


@cuda.jit(cache=True)
def _rows_move_kernel(rows, slab, ends, work, used, n2):
    """Per moving row (its first new end): copy it to ``used`` + its scanned offset, with its
    final room; the room left behind is added to the garbage counter."""
    off, ln, cap, _ = rows
    nbr, val = slab
    us, vs = ends
    _, size, soff, garbage = work
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n2:
        if size[j] > 0:
            x, _ = _end_of(us, vs, j)
            o = off[x]
            p0 = used + soff[j]
            for p in range(ln[x]):
                nbr[p0 + p] = nbr[o + p]
                val[p0 + p] = val[o + p]
            cuda.atomic.add(garbage, 0, cap[x])
            off[x] = p0
            cap[x] = size[j]
        j += stride


@cuda.jit(cache=True)
def _rows_fill_kernel(rows, slab, ends, work, n2):
    """Per edge end: write (neighbour, edge id + 1) at its place after the row's entries."""
    off, ln, _, _ = rows
    nbr, val = slab
    us, vs, eids = ends
    pos = work[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n2:
        x, y = _end_of(us, vs, j)
        p = off[x] + ln[x] + pos[j]
        nbr[p] = y
        val[p] = eids[j >> 1] + 1
        j += stride


@cuda.jit(cache=True)
def _rows_close_kernel(rows, ends, work, n2):
    """Per row (its first new end): the new length; the counter back to zero."""
    _, ln, _, add = rows
    us, vs = ends
    pos = work[0]
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n2:
        if pos[j] == 0:
            x, _ = _end_of(us, vs, j)
            ln[x] += add[x]
            add[x] = 0
        j += stride


def append(off, ln, cap, add, nbr, val, used: int, us, vs, eids) -> tuple:
    """Append edge eids[i] = (us[i], vs[i]) to both rows (value id + 1), as the CPU's
    ``room`` + ``append``: rows that outgrow their room move to the slab's end with the CPU's
    final room. ``add``: zeros, one per vertex (left zero). The slab (``nbr``, ``val``) is
    replaced by a larger one (``cuda_launch.zeros``: the CPU window's growth rule) when it is
    short. Returns (nbr, val, slab entries used, entries left behind as garbage); reads back
    two scalars."""
    for name, x in (("off", off), ("ln", ln), ("cap", cap), ("add", add), ("nbr", nbr),
                    ("val", val), ("us", us), ("vs", vs), ("eids", eids)):
        check_1d(name, x)
    n2 = 2 * us.shape[0]
    if n2 == 0:
        return nbr, val, used, 0
    rows = (off, ln, cap, add)
    pos = empty(n2)
    size = empty(n2)
    blocks, tpb = grid(n2)
    launch(_rows_count_kernel, blocks, tpb, rows, (us, vs), (pos,), n2)
    launch(_rows_room_kernel, blocks, tpb, rows, (us, vs), (pos, size), n2)
    soff = exclusive_scan(size)
    need = scalar(soff, n2)
    garbage = zeros(1)
    if used + need > nbr.shape[0]:
        grown = max(used + need, 2 * nbr.shape[0], 1024)
        nbr2, val2 = zeros(grown), zeros(grown)
        nbr2[:used] = nbr[:used]
        val2[:used] = val[:used]
        nbr, val = nbr2, val2
    work = (pos, size, soff, garbage)
    if need:
        launch(_rows_move_kernel, blocks, tpb, rows, (nbr, val), (us, vs), work,
               np.int64(used), n2)
    launch(_rows_fill_kernel, blocks, tpb, rows, (nbr, val), (us, vs, eids), (pos,), n2)
    launch(_rows_close_kernel, blocks, tpb, rows, (us, vs), (pos,), n2)
    return nbr, val, used + need, scalar(garbage, 0)


__all__ = ["append", "arrival_scratch", "births", "classify_arrivals", "due_push",
           "expire_due", "final_room", "lead_flags"]
