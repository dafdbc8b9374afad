"""CUDA twins of the insert-only engine's batch kernels (:mod:`gpu_ivm.kernels.insert_adj`).

- :func:`count_new`: the twin of :func:`~gpu_ivm.kernels.insert_adj.count_serial` /
  :func:`~gpu_ivm.kernels.insert_adj.count_par` (same arguments, less the marks / threads).
  After a batch is stored, the new triangles are counted by the ordered delta rule: new edge
  (u, v) with stamp s counts the common neighbours w whose edges (u, w) and (v, w) have stamps
  below s, so each triangle is counted once, by its youngest edge. The CPU groups the batch's
  edges by long endpoint and picks, per group, marks (a scratch of one slot per vertex) or
  probes of the edge table; a GPU thread cannot have such a scratch. Here one thread takes one
  new edge (grid-stride), and runs the CPU's own
  :func:`~gpu_ivm.kernels.insert_adj.older_probe` on the shorter of its two rows (each entry's
  other edge probed in the table with :func:`gpu_ivm.kernels.hashmap.probe`): O(min degree)
  per edge, no scratch, no allocation. The per-edge counts are summed with
  ``cuda.atomic.add`` into one scalar, read back once.
- :func:`insert_batch`: the twin of the CPU's ``insert_batch`` (same arguments and results).
  *Claim*, one thread per row: walk the key's chain; a stored entry of the key (value <= seq,
  written before the call) is a conflict (``atomic.min`` of the row index into one scalar);
  else claim the first free slot by ``atomic.cas`` on its **value** (EMPTY -> the row's
  stamp), then write the key. (The window's ``classify_arrivals`` claims by CAS on the key,
  free = key 0, so that repeats meet in one slot; the CPU's conflict undo here frees a slot by
  its value and leaves the key, so a key is trusted only under a live value.) *Repeats*: each
  row that claimed a slot walks its key's whole chain; an entry of its key with an earlier
  row's stamp makes it a repeat (``atomic.min`` again). The minimum is the CPU's ``bad`` (the
  first row, in row order, whose key is stored or held by an earlier row); on a conflict the
  claimed slots, free before the call, are freed again: the table is left as it was. Else
  every row is new, so row i gets id ``n_eids + i`` and stamp ``seq + 1 + i`` directly (no
  scan), the rows are appended by the window's append twin
  (:func:`gpu_ivm.kernels.cuda_window_step.append`, with ``marks`` as its per-vertex counter),
  the work is summed for the ``limit`` test and :func:`count_new` counts. Equal to the CPU's:
  ``bad``, the table as a map key -> stamp (slots of new keys may differ), the per-edge arrays,
  rows as per-vertex sets of (neighbour, stamp) with the CPU's lengths and rooms, the count.
- :func:`list_new`: the twin of the CPU's ``list_new``: a count pass of ``older_probe``, an
  exclusive scan, a fill pass (the CPU's ``_owned`` names the edge and puts the stamps in
  endpoint order); the same triangles as a set.

The state is :class:`gpu_ivm.insert_only_state.EdgeState`'s: rows ``(off, ln, nbr, val)``
(val = the edge's stamp), table ``(htk, htv)`` (packed key u < v -> stamp), per-edge ``eu``,
``ev``, ``stamp``. The insert-only engine runs on the cpu backend; these twins are tested
against its kernels on real states in the CUDA simulator
(``tests/cuda_sim_insert_adj_cases.py``) and have not run on a GPU.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import cuda_window_step as cws
from .cuda_launch import check_1d, empty, exclusive_scan, grid, launch, scalar, zeros
from .hashmap import EMPTY, home_slot
from .insert_adj import older_of_edge


@cuda.jit(cache=True)
def _count_kernel(adj, table, edge, total, first, n):
    """One thread per new edge ``first + j`` (j < n), grid-stride: its triangles
    (:func:`~gpu_ivm.kernels.insert_adj.older_of_edge`, counting) added to ``total[0]``. The
    arrays travel in tuples (the simulator then hands them to the ``njit`` body as plain
    arrays); ``edge`` is (eu, ev, stamp, none: the unused outputs of a count)."""
    off, ln, nbr, val = adj
    htk, htv = table
    eu, ev, stamp, none = edge
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        c = older_of_edge(off, ln, nbr, val, htk, htv, stamp, eu, ev, first + j, j, none, none,
                          none, none, 0, False)
        if c:
            cuda.atomic.add(total, 0, c)
        j += stride


def count_new(off, ln, nbr, val, htk, htv, stamp, eu, ev, first: int, n: int) -> int:
    """The triangles closed by the new edges ``first`` .. ``first + n - 1`` (stored, appended
    to the rows), each counted once, by its youngest edge: the CPU's ``count_serial``."""
    for name, a in (("off", off), ("ln", ln), ("nbr", nbr), ("val", val), ("htk", htk),
                    ("htv", htv), ("stamp", stamp), ("eu", eu), ("ev", ev)):
        check_1d(name, a, np.int64)
    if n <= 0:
        return 0
    total = zeros(1)
    blocks, tpb = grid(n)
    none = empty(0)
    launch(_count_kernel, blocks, tpb, (off, ln, nbr, val), (htk, htv), (eu, ev, stamp, none),
           total, np.int64(first), np.int64(n))
    return int(scalar(total, 0))


# ----------------------------------------------------------------------------- a batch
@cuda.jit(cache=True)
def _claim_kernel(rows, table, out, seq, n):
    """Per row i (grid-stride): walk its key's chain from the home slot; a stored entry of
    the key (value <= seq: written before this call, key and all) is a conflict (``bad``
    lowered to i by ``atomic.min``, no slot); else claim the first free slot by
    ``atomic.cas`` on its **value** (EMPTY -> the row's stamp) and write the key. Entries of
    this batch (value > seq) are passed over, whatever their key: a key read there may not be
    written yet (repeated keys are found by :func:`_repeat_kernel`)."""
    a, b, slot = rows
    htk, htv = table
    bad = out[0]
    mask = htk.shape[0] - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = min(a[i], b[i])
        y = max(a[i], b[i])
        key = (x << 32) | y
        st = seq + 1 + i
        s = home_slot(key, mask)
        while True:
            v = htv[s]
            if v == EMPTY:
                v = cuda.atomic.cas(htv, s, EMPTY, st)
                if v == EMPTY:
                    htk[s] = key
                    slot[i] = s
                    break
            if v <= seq and htk[s] == key:
                slot[i] = -1
                cuda.atomic.min(bad, 0, i)
                break
            s = (s + 1) & mask
        i += stride


@cuda.jit(cache=True)
def _repeat_kernel(rows, table, out, seq, n):
    """Per row i that claimed a slot: walk the whole chain of its key (to the first free
    slot); an entry of the key claimed by an earlier row j < i (value seq + 1 + j) makes row
    i a repeat: ``bad`` lowered to i."""
    a, b, slot = rows
    htk, htv = table
    bad = out[0]
    mask = htk.shape[0] - 1
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if slot[i] >= 0:
            key = (min(a[i], b[i]) << 32) | max(a[i], b[i])
            s = home_slot(key, mask)
            while True:
                v = htv[s]
                if v == EMPTY:
                    break
                if v > seq and v - seq - 1 < i and htk[s] == key:
                    cuda.atomic.min(bad, 0, i)
                    break
                s = (s + 1) & mask
        i += stride


@cuda.jit(cache=True)
def _free_kernel(rows, table, n):
    """Per row that claimed a slot: free it again (the slot was free before the call)."""
    slot = rows[2]
    htv = table[1]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if slot[i] >= 0:
            htv[slot[i]] = EMPTY
        i += stride


@cuda.jit(cache=True)
def _edges_kernel(rows, edge, ids, n_eids, seq, n):
    """Per row i: edge id n_eids + i, endpoints in order, stamp seq + 1 + i; ``ids[i]`` =
    stamp - 1 (the row append writes id + 1: the stamp)."""
    a, b, _ = rows
    eu, ev, stamp = edge
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        e = n_eids + i
        eu[e] = min(a[i], b[i])
        ev[e] = max(a[i], b[i])
        stamp[e] = seq + 1 + i
        ids[i] = seq + i
        i += stride


@cuda.jit(cache=True)
def _work_kernel(adj, edge, total, first, n):
    """The batch's work: the sum of its edges' smaller degrees (``atomic.add``)."""
    ln = adj[1]
    eu, ev = edge
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        cuda.atomic.add(total, 0, min(ln[eu[first + j]], ln[ev[first + j]]))
        j += stride


def insert_batch(a, b, htk, htv, n_eids: int, seq: int, eu, ev, stamp, off, ln, cap, nbr, val,
                 used: int, marks, par_min: int = 0, threads: int = 1, limit: int = 1 << 62,
                 count: bool = True) -> tuple:
    """The CPU's ``insert_batch`` (same arguments and results: (bad, nbr, val, used, garbage,
    delta)); ``par_min`` / ``threads`` are not used and ``marks`` (zeros, one per vertex id,
    left zero) is the row append's per-vertex counter. Equal to the CPU's: ``bad`` (the first
    row, in row order, whose key is stored or held by an earlier row), the table as a map key
    -> stamp (slots of new keys may differ), the per-edge arrays, the rows as sets of
    (neighbour, stamp) with the CPU's lengths and rooms, the count. On a conflict the keys
    this call added are freed again: the table is left as it was."""
    for name, x in (("a", a), ("b", b), ("htk", htk), ("htv", htv), ("eu", eu), ("ev", ev),
                    ("stamp", stamp), ("off", off), ("ln", ln), ("cap", cap), ("nbr", nbr),
                    ("val", val), ("marks", marks)):
        check_1d(name, x, np.int64)
    m = a.shape[0]
    if m == 0:
        return -1, nbr, val, used, 0, 0
    slot = empty(m)
    bad = zeros(1)
    bad[0] = m
    blocks, tpb = grid(m)
    rows = (a, b, slot)
    table = (htk, htv)
    launch(_claim_kernel, blocks, tpb, rows, table, (bad,), np.int64(seq), np.int64(m))
    launch(_repeat_kernel, blocks, tpb, rows, table, (bad,), np.int64(seq), np.int64(m))
    i = scalar(bad, 0)
    if i < m:
        launch(_free_kernel, blocks, tpb, rows, table, np.int64(m))
        return i, nbr, val, used, 0, 0
    ids = empty(m)
    launch(_edges_kernel, blocks, tpb, rows, (eu, ev, stamp), ids, np.int64(n_eids),
           np.int64(seq), np.int64(m))
    us = eu[n_eids:n_eids + m]
    vs = ev[n_eids:n_eids + m]
    nbr, val, used, garbage = cws.append(off, ln, cap, marks, nbr, val, used, us, vs, ids)
    if not count:
        return -1, nbr, val, used, garbage, -1
    work = zeros(1)
    launch(_work_kernel, blocks, tpb, (off, ln), (eu, ev), work, np.int64(n_eids),
           np.int64(m))
    if scalar(work, 0) > limit:
        return -1, nbr, val, used, garbage, -1
    delta = count_new(off, ln, nbr, val, htk, htv, stamp, eu, ev, n_eids, m)
    return -1, nbr, val, used, garbage, delta


# ----------------------------------------------------------------------------- listing
@cuda.jit(cache=True)
def _list_kernel(adj, table, edge, out, first, n, emit):
    """Per new edge j: :func:`~gpu_ivm.kernels.insert_adj.older_of_edge` (``older_probe`` on
    its shorter row); without ``emit`` write the number of its triangles at ``cnt[j]``, with it
    write them from ``at[j]`` on (edge j, w, the stamps in endpoint order: ``_owned``)."""
    off, ln, nbr, val = adj
    htk, htv = table
    eu, ev, stamp = edge
    cnt, at, oe, ow, o1, o2 = out
    j = cuda.grid(1)
    stride = cuda.gridsize(1)
    while j < n:
        q0 = at[j] if emit else 0
        q = older_of_edge(off, ln, nbr, val, htk, htv, stamp, eu, ev, first + j, j, oe, ow, o1,
                          o2, q0, emit)
        if not emit:
            cnt[j] = q
        j += stride


def list_new(off, ln, nbr, val, htk, htv, stamp, eu, ev, first: int, n: int,
             marks=None) -> tuple:
    """The CPU's ``list_new`` (``marks`` not used): (edge, w, s1, s2) of the triangles that
    the new edges ``first`` .. ``first + n - 1`` close, the same set as the CPU's (edge by
    edge in edge order; within an edge in row order). A count pass, an exclusive scan of the
    counts, a fill pass; reads back one scalar."""
    for name, x in (("off", off), ("ln", ln), ("nbr", nbr), ("val", val), ("htk", htk),
                    ("htv", htv), ("stamp", stamp), ("eu", eu), ("ev", ev)):
        check_1d(name, x, np.int64)
    if n <= 0:
        return tuple(empty(0) for _ in range(4))
    cnt = empty(n)
    none = empty(0)
    blocks, tpb = grid(n)
    adj, table, edge = (off, ln, nbr, val), (htk, htv), (eu, ev, stamp)
    launch(_list_kernel, blocks, tpb, adj, table, edge, (cnt, none, none, none, none, none),
           np.int64(first), np.int64(n), False)
    at = exclusive_scan(cnt)
    total = scalar(at, n)
    oe, ow, o1, o2 = (empty(max(total, 1)) for _ in range(4))
    launch(_list_kernel, blocks, tpb, adj, table, edge, (cnt, at, oe, ow, o1, o2),
           np.int64(first), np.int64(n), True)
    return oe[:total], ow[:total], o1[:total], o2[:total]
