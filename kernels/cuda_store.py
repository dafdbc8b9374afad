"""CUDA kernels of the sorted-run store: the ``store`` part of the cuda kernel set.

Same functions, signatures and results as :mod:`gpu_ivm.kernels.store_kernels`; each is a
host-side launcher (checks, empty inputs handled before any launch, launch shape) around one or
more ``@cuda.jit`` kernels that call the ``njit`` inner loops of :mod:`gpu_ivm.kernels.lsm`
(``find``, ``get``, ``lower_bound``) and :mod:`gpu_ivm.kernels.elements`.

The store tuple ``st = (keys, vals, bounds, dirptr, dirlen, dirs, runmask, live, ioff, imask,
itab, boff, bits)`` is passed to
kernels as it is (a tuple of arrays, see :mod:`gpu_ivm.kernels.cuda_launch`). Sequential CPU
loops get parallel forms: in-place updates of distinct keys with atomics on the per-first-key
counters, merges by rank (own index + binary search in the other run) and stream compaction.
"""

from __future__ import annotations

import os

import numpy as np
from numba import cuda

from .cuda_fast_launch import Bundle
from .cuda_launch import (
    array_module,
    check_1d,
    counters,
    device_view,
    empty,
    exclusive_scan,
    grid,
    host_ints,
    launch,
    result,
    scalar,
    zeros,
)
from .elements import compact_key, count_row, fill_row
from .jit import helper
from .lsm import LO_MASK, PAD_KEY, SENTINEL, find, get, lower_bound
from .row_bits import BITS_BARRED, apply_group, fill_one
from .row_index import fill_row_table, upsert_group

#: convert the store's arrays for launches once per structure change (see device_bundle)
CACHE_VIEWS = os.environ.get("GPU_IVM_CACHE_VIEWS", "1").strip() != "0"

# ----------------------------------------------------------------------------- kernels


@cuda.jit(cache=True)
def _apply_kernel(st, io, n, counter):
    """In-place update of stored keys; flags for new keys; live/tomb by atomics.

    Launch config: 1-D grid-stride, one thread per update key. ``keys_in`` is unique, so the
    writes to ``vals[p]`` never collide; ``live[x]``/``tomb[x]`` are shared by keys with the
    same first key, hence ``atomic.add``. Each thread adds its count of new keys to
    ``counter[0]`` and its change of the number of nonzero keys to ``counter[1]`` once (two
    atomics per thread, not per key).
    """
    keys_in, deltas, old_out, is_new, live, tomb = io
    vals = st[1]
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    mine = 0
    grown = 0
    while i < n:
        key = keys_in[i]
        d = deltas[i]
        x = key >> 32
        p = find(st, key)
        if p >= 0:
            old = vals[p]
            new = old + d
            vals[p] = new
            old_out[i] = old
            is_new[i] = False
            if old == 0 and new != 0:
                cuda.atomic.add(live, x, 1)
                cuda.atomic.add(tomb, x, -1)
                grown += 1
            elif old != 0 and new == 0:
                cuda.atomic.add(live, x, -1)
                cuda.atomic.add(tomb, x, 1)
                grown -= 1
        else:
            old_out[i] = 0
            if d != 0:
                is_new[i] = True
                cuda.atomic.add(live, x, 1)
                mine += 1
                grown += 1
            else:
                is_new[i] = False
        i += stride
    if mine:
        cuda.atomic.add(counter, 0, mine)
    if grown:
        cuda.atomic.add(counter, 1, grown)


@cuda.jit(cache=True)
def _probe_kernel(st, io, n):
    """out[i] = st(keys_in[i]). Launch config: 1-D grid-stride, one thread per key."""
    keys_in, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = get(st, keys_in[i])
        i += stride


@cuda.jit(cache=True)
def _run_bits_kernel(io, s, e, bit):
    """runmask[x] |= bit at the first position of each first key x in the sorted run [s, e).

    Launch config: 1-D grid-stride, one thread per position. Only the first position of x
    writes ``runmask[x]``, so no two threads touch the same word (no atomics needed).
    """
    keys, runmask = io
    p = s + cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < e:
        x = keys[p] >> 32
        if (p == s or (keys[p - 1] >> 32) != x) and x < runmask.shape[0]:  # not PAD_ROW
            runmask[x] |= bit
        p += stride


@cuda.jit(cache=True)
def _merge_rank_kernel(io, s1, s2, s3, keep_low):
    """Scatter both runs to their merged positions in ``tk``/``tv``; flag live entries.

    Launch config: 1-D grid-stride, one thread per entry of ``[s1, s3)``. Merge by rank::

        run A = keys[s1:s2]   a_i -> rank i + #{b in B : b <  a_i}
        run B = keys[s2:s3]   b_i -> rank i + #{a in A : a <= b_i}

    (binary searches in the other run; keys are unique across runs and padding repeats only
    within a run, so ranks are a permutation of ``[0, n)``). Tombstones decrement ``tomb`` and
    every first key met loses its bits of runs j and younger (``atomic.and_``: several threads
    may share x; the new bit is set after compaction). A run's closing padding (``PAD_KEY``)
    is dropped like compaction padding.
    """
    keys, vals, tk, tv, flags, tomb, runmask = io
    n = s3 - s1
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < n:
        p = s1 + q
        k = keys[p]
        v = vals[p]
        if p < s2:
            r = (p - s1) + lower_bound(keys, s2, s3, k) - s2
        else:
            r = (p - s2) + lower_bound(keys, s1, s2, k + 1) - s1
        tk[r] = k
        tv[r] = v
        flags[r] = 1 if v != 0 else 0
        x = k >> 32
        if x < runmask.shape[0]:  # not PAD_ROW
            cuda.atomic.and_(runmask, x, keep_low)
        if v == 0 and (k & LO_MASK) != SENTINEL:
            cuda.atomic.add(tomb, x, -1)
        q += stride


@cuda.jit(cache=True)
def _compact_pairs_kernel(io, n, dst0):
    """dst_keys[dst0 + offs[r]] = src_keys[r] (and values) where ``flags[r]``.

    Launch config: 1-D grid-stride, one thread per source entry; reads and writes coalesced.
    """
    src_k, src_v, flags, offs, dst_k, dst_v = io
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    while r < n:
        if flags[r]:
            w = dst0 + offs[r]
            dst_k[w] = src_k[r]
            dst_v[w] = src_v[r]
        r += stride


@cuda.jit(cache=True)
def _merge_place_kernel(io, n, s1, bit, pad, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5):
    """The merge's second pass: entry r of the merged order goes to ``keys[s1 + incl[r] - 1]``
    where ``flags[r]`` (``incl`` the inclusive prefix sum of the flags) and sets its first
    key's bit of the merged run. With ``pad``, every dropped entry writes ``PAD_KEY`` (value
    0) behind the kept ones instead, so the merged run fills exactly ``[s1, s1 + n)`` and the
    host knows its end without reading the kept count back. Thread 0 also writes up to six
    entries of the store's metadata (``meta``, the last array of ``io``; :func:`_put6`).
    Launch config: 1-D grid-stride, one thread per merged entry. The bit is set by each kept
    entry that does not follow a kept entry of the same first key: several threads may
    write one word, but all set the same bit of it and nothing else changes it here."""
    tk, tv, flags, incl, keys, vals, runmask, meta = io
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    if r == 0:
        _put6(meta, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5)
    kept = incl[n - 1]
    pad_to = n if pad else 0
    while r < n:
        if _place(r, tk, tv, flags, incl, keys, vals, s1, kept, pad_to):
            x = tk[r] >> 32
            if r == 0 or not flags[r - 1] or (tk[r - 1] >> 32) != x:
                runmask[x] |= bit
        r += stride


@helper
def _place(r, src_k, src_v, flags, incl, dst_k, dst_v, dst0, total, pad_to):
    """Entry r of a flagged copy: to ``dst0 + incl[r] - 1`` where ``flags[r]`` (returns True),
    else ``PAD_KEY`` (value 0) at ``dst0 + total`` plus the unflagged entries before it, when
    that is below ``dst0 + pad_to`` (``total``: the flags' count, ``incl[n - 1]``)."""
    if flags[r]:
        w = dst0 + incl[r] - 1
        dst_k[w] = src_k[r]
        dst_v[w] = src_v[r]
        return True
    if total + r - incl[r] < pad_to:
        w = dst0 + total + r - incl[r]
        dst_k[w] = PAD_KEY
        dst_v[w] = 0
    return False


@cuda.jit(cache=True)
def _meta_kernel(io, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5):
    """meta[i] = v for up to six (i, v) pairs (i < 0: none), ``io = (meta,)``: a store's run
    bounds and directory offsets, written in place on the device instead of uploaded. Launch
    config: one thread."""
    if cuda.grid(1) == 0:
        _put6(io[0], i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5)


@helper
def _put6(meta, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5):
    """The six (index, value) writes of :func:`_meta_kernel`, also made by the kernels that
    close a batch's runs (the store's metadata rides on them; see ``ZStore._carried``)."""
    _put(meta, i0, v0)
    _put(meta, i1, v1)
    _put(meta, i2, v2)
    _put(meta, i3, v3)
    _put(meta, i4, v4)
    _put(meta, i5, v5)


@helper
def _put(meta, i, v):
    """meta[i] = v unless i < 0 (an unused argument pair of :func:`_meta_kernel`)."""
    if i >= 0:
        meta[i] = v


@cuda.jit(cache=True)
def _live_flags_kernel(io, s, e):
    """flags[p - s] = vals[p] != 0. Launch config: 1-D grid-stride, one thread per entry."""
    vals, flags = io
    q = cuda.grid(1)
    stride = cuda.gridsize(1)
    while q < e - s:
        flags[q] = 1 if vals[s + q] != 0 else 0
        q += stride


@cuda.jit(cache=True)
def _directory_kernel(io, s, e, nkeys, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5):
    """out[x] = first position of the run [s, e) with first key >= x, for x in [0, nkeys];
    thread 0 also writes up to six entries of the store's metadata (``meta``, :func:`_put6`).

    Launch config: 1-D grid-stride, one thread per first key; a binary search each
    (O(log run) per key, writes coalesced; a directory is built only when the run has at
    least a quarter as many entries as first keys).
    """
    keys, out, meta = io
    x = cuda.grid(1)
    stride = cuda.gridsize(1)
    if x == 0:
        _put6(meta, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5)
    while x <= nkeys:
        out[x] = lower_bound(keys, s, e, x << 32)
        x += stride


@cuda.jit(cache=True)
def _compact_keys_kernel(st, io, n):
    """Per-key compaction. Launch config: 1-D grid-stride, one thread per (unique) first key;
    a key's ranges are disjoint from every other key's, so threads never collide."""
    tomb, xs = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        compact_key(st, tomb, xs[i])
        i += stride


@cuda.jit(cache=True)
def _copy_flagged_kernel(io, n, dst0, pad_to, bit, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5,
                         v5):
    """dst[dst0 + incl[r] - 1] = src[r] (keys and values) where ``flags[r]``; ``incl`` is the
    inclusive prefix sum of the flags. With ``pad_to >= 0`` the unflagged entries write
    ``PAD_KEY`` (value 0) behind the copied ones up to ``dst0 + pad_to``, so the copy fills
    exactly ``[dst0, dst0 + pad_to)`` (the caller's bound on the flags' count). With ``bit``
    nonzero, ``runmask[x] |= bit`` for the first key x of every copied entry (the new run's
    bit, where a run-bits kernel was a launch of its own): written by each copied entry
    whose source predecessor is not a copied entry of the same first key. Two threads may
    set the same word; they set the same bit and no thread changes any other bit in this
    launch, so the plain read-modify-writes cannot lose a bit. Thread 0 also writes up to
    six entries of the store's metadata (``meta``, the last array of ``io``; :func:`_put6`).
    Launch config: 1-D grid-stride, one thread per source entry."""
    src_k, src_v, flags, incl, dst_k, dst_v, runmask, meta = io
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    if r == 0:
        _put6(meta, i0, v0, i1, v1, i2, v2, i3, v3, i4, v4, i5, v5)
    total = incl[n - 1]
    while r < n:
        if _place(r, src_k, src_v, flags, incl, dst_k, dst_v, dst0, total, pad_to) and bit:
            x = src_k[r] >> 32
            if (r == 0 or not flags[r - 1] or (src_k[r - 1] >> 32) != x) \
                    and x < runmask.shape[0]:
                runmask[x] |= bit
        r += stride


@cuda.jit(cache=True)
def _compact_rows_of_kernel(st, io, n, slack):
    """Compact the rows of the sorted keys' first keys x with tomb[x] > live[x] + slack.
    Launch config: 1-D grid-stride over the keys; the thread of each first key's first key
    decides and compacts that row (rows are disjoint, so threads never collide)."""
    keys, tomb, live = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = keys[i] >> 32
        if (i == 0 or (keys[i - 1] >> 32) != x) and tomb[x] > live[x] + slack:
            compact_key(st, tomb, x)
        i += stride


@cuda.jit(cache=True)
def _count_rows_kernel(st, io, n):
    """counts[i] = live degree of xs[i]. Launch config: 1-D grid-stride, one thread per key."""
    xs, counts = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        counts[i] = count_row(st, xs[i])
        i += stride


@cuda.jit(cache=True)
def _fill_rows_kernel(st, io, n):
    """Row i's live tuples to out[ptr[i]:ptr[i+1]]. Launch config: 1-D grid-stride, one thread
    per key (each writes its own segment)."""
    xs, ptr, out_keys, out_vals = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        fill_row(st, xs[i], ptr[i], out_keys, out_vals)
        i += stride


@cuda.jit(cache=True)
def _index_fill_kernel(st, io, n):
    """Row tables of rows[i] by the CPU's ``fill_row_table``. Launch config: 1-D grid-stride,
    one thread per row (each writes its own slab region)."""
    rows, offs, masks, tab, iused, bad = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = rows[i]
        iused[x] = fill_row_table(st, x, offs[i], masks[i], tab, bad)
        i += stride


@cuda.jit(cache=True)
def _index_upsert_kernel(st, io, n):
    """A batch's deltas into the row tables by the CPU's ``upsert_group``. Launch config: 1-D
    grid-stride, one thread per first key's group (a table is written by one thread)."""
    keys_in, deltas, starts, iused, bad = io
    g = cuda.grid(1)
    stride = cuda.gridsize(1)
    while g < n:
        upsert_group(st, keys_in, deltas, starts[g], starts[g + 1], iused, bad)
        g += stride


@cuda.jit(cache=True)
def _bits_slots_kernel(io, n, n_free, k, n_out, fresh):
    """slots[i] for row i of a fill: bstack[n_free-1-i] for i < k (the stack's top first, as the
    CPU pops), n_out + i - k for the next ``fresh`` rows, -1 (none) for the rest. Launch
    config: 1-D grid-stride. Only reads the stack: pushes wait for the next kernel."""
    bstack, slots = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        if i < k:
            slots[i] = bstack[n_free - 1 - i]
        elif i < k + fresh:
            slots[i] = n_out + i - k
        else:
            slots[i] = -1
        i += stride


@cuda.jit(cache=True)
def _bits_fill_kernel(st, io, n):
    """Row bitmaps of rows[i] into slots[i] by the CPU's ``fill_one``. Launch config: 1-D
    grid-stride, one thread per row (each writes its own slot); a row that breaks the 0/1 rule
    is barred and its slot pushed back on the stack (``atomic.add`` on its height)."""
    rows, slots, boff, bits, bstack, bmeta = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = rows[i]
        slot = slots[i]
        if slot >= 0:
            if fill_one(st, x, bits, slot):
                boff[x] = slot
            else:
                boff[x] = BITS_BARRED
                bstack[cuda.atomic.add(bmeta, 0, 1)] = slot
        i += stride


@cuda.jit(cache=True)
def _bits_meta_kernel(bmeta, d_free, d_out):
    """The row bitmaps' slot counters: bmeta[0] += d_free, bmeta[1] += d_out. Launch config:
    one thread."""
    if cuda.grid(1) == 0:
        bmeta[0] += d_free
        bmeta[1] += d_out


@cuda.jit(cache=True)
def _bits_apply_kernel(io, n, lo_live, hi_live):
    """A batch's changes into the row bitmaps by the CPU's ``apply_group``. Launch config: 1-D
    grid-stride over the keys; the thread of the first key of each first key's group applies
    the group (a bitmap is written by one thread). Slots given back go on the stack
    (``atomic.add`` on bmeta[0]); rows that want a bitmap and the largest second id through
    ``counter[0]`` (``atomic.add``) and ``counter[1]`` (``atomic.max``)."""
    keys, old, deltas, live, boff, bits, bstack, bmeta, want, counter = io
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n:
        x = keys[p] >> 32
        if p == 0 or (keys[p - 1] >> 32) != x:
            j = p + 1
            while j < n and (keys[j] >> 32) == x:
                j += 1
            act, val, top = apply_group(keys, old, deltas, p, j, live, boff, bits, lo_live,
                                        hi_live)
            cuda.atomic.max(counter, 1, top)
            if act == 1:
                want[cuda.atomic.add(counter, 0, 1)] = val
            elif act == 2:
                bstack[cuda.atomic.add(bmeta, 0, 1)] = val
        p += stride


@cuda.jit(cache=True)
def _first_counts_kernel(io, n):
    """counts[x] += 1 per key. Launch config: 1-D grid-stride, one thread per key;
    ``atomic.add`` (keys of one first key are adjacent, so contention stays within a warp)."""
    keys, counts = io
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n:
        cuda.atomic.add(counts, keys[p] >> 32, 1)
        p += stride


@cuda.jit(cache=True)
def _first_starts_kernel(io, n):
    """flags[p] = 1 where keys[p] starts a new first key. Launch config: 1-D grid-stride."""
    keys, flags = io
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n:
        flags[p] = 1 if p == 0 or (keys[p] >> 32) != (keys[p - 1] >> 32) else 0
        p += stride


@cuda.jit(cache=True)
def _scatter_firsts_kernel(io, n):
    """out[offs[p]] = keys[p] >> 32 where ``flags[p]``. Launch config: 1-D grid-stride."""
    keys, flags, offs, out = io
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n:
        if flags[p]:
            out[offs[p]] = keys[p] >> 32
        p += stride


# ----------------------------------------------------------------------------- launchers


def device_bundle(st: tuple) -> tuple:
    """The store tuple with every array in the form launches take (:func:`device_view`),
    converted once per structure change (``ZStore.nt`` caches the result) instead of at every
    launch: on a device a CuPy array becomes a numba device array over the same memory once,
    not once per launch and argument. The result is a
    :class:`~gpu_ivm.kernels.cuda_fast_launch.Bundle`, on which the fast launch keeps the
    bundle's argument words after its first launch. ``GPU_IVM_CACHE_VIEWS=0`` turns this off
    (each launch converts again, as before), for measuring what it saves."""
    if not CACHE_VIEWS:
        return st
    return Bundle(device_view(a) for a in st)




def apply_updates(st, live, tomb, keys_in, deltas, old_out, is_new,
                  read: bool = True) -> tuple[int, int] | None:
    """Add ``deltas`` to stored keys in place; flag keys stored nowhere (see the CPU kernel).

    ``keys_in`` sorted and unique. Returns ``(n_new, size_change)``: the number of new keys
    with a nonzero delta (the caller sizes the new run with it) and the change in the number
    of nonzero keys, read back together (one 16-byte copy). ``read=False``: no read (the
    caller knows bounds on both, see ``ZStore.add``); returns None.
    """
    return _apply_updates(st, live, tomb, keys_in, deltas, old_out, is_new, read, None)


def apply_updates_then(st, live, tomb, keys_in, deltas, old_out, is_new, then):
    """:func:`apply_updates` (with its read) and ``then``: work that reads the updated
    ``live`` counts, launched right after the update into ``then.slots`` more counter slots
    (``then.launch(slots)``) that come back with the same read (``then.got(values)``; e.g.
    :class:`~gpu_ivm.kernels.cuda_phase.PromoteThen`). A device's own: no CPU twin."""
    return _apply_updates(st, live, tomb, keys_in, deltas, old_out, is_new, True, then)


def _apply_updates(st, live, tomb, keys_in, deltas, old_out, is_new, read: bool, then):
    check_1d("keys_in", keys_in)
    n = keys_in.shape[0]
    if n == 0:
        return (0, 0) if read else None
    extra = then.slots if then is not None else 0
    counter = counters(2 + extra)
    launch(_apply_kernel, *grid(n), st, (keys_in, deltas, old_out, is_new, live, tomb), n, counter)
    if extra:
        then.launch(counter[2:])
    if not read:
        return None
    n_new, size_change, *rest = host_ints(counter)
    if extra:
        then.got(rest)
    return n_new, size_change


def probe_many(st, keys_in, out) -> None:
    """out[i] = multiplicity of keys_in[i] (0 where absent); any order, repeats allowed."""
    check_1d("keys_in", keys_in)
    n = keys_in.shape[0]
    if n == 0:
        return
    launch(_probe_kernel, *grid(n), st, (keys_in, out), n)


# One thread per key on the GPU whatever the order: the CPU's galloping walk over sorted keys
# (probe_sorted) is inherently sequential, a binary search per key is not.
probe_many_par = probe_many
probe_sorted = probe_many


def set_run_bits(keys, s, e, runmask, j) -> None:
    """runmask[x] |= 1 << j for every first key x of the sorted run [s, e)."""
    if e <= s:
        return
    launch(_run_bits_kernel, *grid(e - s), (keys, runmask), s, e, np.int64(1) << np.int64(j))


def merge_runs(keys, vals, s1, s2, s3, tomb, runmask, j, padded: bool = False,
               meta=None) -> int:
    """Merge runs [s1, s2) and [s2, s3) (run indices j, j+1) into one run at s1.

    Tombstones and padding are dropped. Two kernels and a scan: rank scatter into a
    temporary, CuPy's scan of the live flags, placement back into ``keys``/``vals`` with the
    run bits of the result (where a scan, a read, a compaction and a run-bits kernel were).
    Returns the end of the merged run: the kept count is read back once (the caller updates
    its run bounds with it); ``padded``: no read, the merged run
    keeps its length ``s3 - s1`` with ``PAD_KEY`` entries behind the kept ones, and ``s3``
    is returned. ``meta``: ``(array, writes)``, metadata writes made by the placement
    (:func:`patch_meta`'s, without a launch of their own).
    """
    n = s3 - s1
    if n <= 0:
        if meta is not None:
            patch_meta(*meta)
        return s1
    tk = empty(n)
    tv = empty(n)
    flags = empty(n)
    keep_low = (np.int64(1) << np.int64(j)) - np.int64(1)
    launch(_merge_rank_kernel, *grid(n), (keys, vals, tk, tv, flags, tomb, runmask), s1, s2, s3,
           keep_low)
    incl = array_module(flags).cumsum(flags)
    kept = n if padded else scalar(incl, n - 1)
    if kept:
        marr, mw = _carried(meta, keys)
        launch(_merge_place_kernel, *grid(n), (tk, tv, flags, incl, keys, vals, runmask, marr),
               n, np.int64(s1), np.int64(1) << np.int64(j), padded, *mw)
    elif meta is not None:
        patch_meta(*meta)
    return s1 + kept


META_WRITES = 6  # (index, value) pairs per launch of _meta_kernel


#: the store's metadata writes can ride on its run-closing kernels (``ZStore._carried``)
META_RIDES = True


def _write_args(part) -> list:
    """Up to six (index, value) pairs as the twelve scalar arguments of the kernels that
    write the store's metadata (unused pairs have index -1)."""
    part = list(part) + [(-1, 0)] * (META_WRITES - len(part))
    return [np.int64(v) for iv in part for v in iv]


def patch_meta(meta, writes) -> None:
    """``meta[i] = v`` on the device for each ``(i, v)`` of ``writes``: six per launch, as
    scalar arguments (no upload)."""
    for c in range(0, len(writes), META_WRITES):
        launch(_meta_kernel, 1, 1, (meta,), *_write_args(writes[c : c + META_WRITES]))


def _carried(meta, like) -> tuple:
    """(array, scalar arguments) of the metadata writes a run-closing kernel makes: the last
    six of ``meta = (array, writes)`` (any before them by :func:`patch_meta`, which is then
    launched first), or none (``like`` stands in for the array, never written)."""
    if meta is None:
        return like, _write_args(())
    arr, writes = meta
    writes = list(writes)
    cut = max(len(writes) - META_WRITES, 0)
    if cut:
        patch_meta(arr, writes[:cut])
    return arr, _write_args(writes[cut:])


def build_directory(keys, s, e, nkeys, out, meta=None) -> None:
    """out[x] = start of first key x in run [s, e); out[nkeys] = e. len(out) == nkeys + 1.
    ``meta``: metadata writes made by the same launch (see :func:`merge_runs`)."""
    marr, mw = _carried(meta, out)
    launch(_directory_kernel, *grid(nkeys + 1), (keys, out, marr), s, e, nkeys, *mw)


@cuda.jit(cache=True)
def _transpose_kernel(io, n):
    """out[i] = keys[i] with its halves swapped (x << 32 | y -> y << 32 | x). Launch config:
    1-D grid-stride."""
    keys, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        k = keys[i]
        out[i] = ((k & LO_MASK) << 32) | (k >> 32)
        i += stride


@cuda.jit(cache=True)
def _gather_pairs_kernel(io, n):
    """out_keys[i], out_vals[i] = keys[order[i]], vals[order[i]]. Launch config: 1-D
    grid-stride."""
    order, keys, vals, out_keys, out_vals = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        j = order[i]
        out_keys[i] = keys[j]
        out_vals[i] = vals[j]
        i += stride


def transposed_sorted(keys, vals):
    """``(tk, tv)``: the unique packed ``keys`` with their halves swapped, sorted, and
    ``vals`` in the same order: what ``sort_pairs(transpose(keys), vals)`` computes on the
    host (the heavy part's transpose of a batch). A kernel, then :func:`sorted_by_key`:
    three calls where the array module's operators took seven."""
    check_1d("keys", keys)
    n = keys.shape[0]
    tk = empty(n)
    if n:
        launch(_transpose_kernel, *grid(n), (keys, tk), n)
    return sorted_by_key(result(tk, keys), vals)


def sorted_by_key(keys, vals):
    """``keys`` sorted and ``vals`` in the same order (equal keys in the order ``argsort``
    leaves them): an ``argsort`` and one kernel gathering both arrays (two calls, not
    three)."""
    check_1d("keys", keys)
    check_1d("vals", vals)
    n = keys.shape[0]
    ok = empty(n)
    ov = empty(n)
    if n:
        order = array_module(keys).argsort(keys)
        launch(_gather_pairs_kernel, *grid(n), (order, keys, vals, ok, ov), n)
    return result(ok, keys), result(ov, keys)


def compact_keys(st, tomb, xs) -> None:
    """Squeeze the tombstones of the (unique) first keys ``xs`` out of their ranges."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_compact_keys_kernel, *grid(n), st, (tomb, xs), n)


def copy_flagged(src_k, src_v, flags, dst_k, dst_v, dst0, pad_to: int = -1, runmask=None,
                 bit: int = 0, meta=None) -> None:
    """Copy the entries of ``src_k`` / ``src_v`` that ``flags`` marks, in order, to
    ``dst_k`` / ``dst_v`` from ``dst0`` on: one scan (CuPy's ``cumsum``) and one scatter.
    ``pad_to >= 0``: ``PAD_KEY`` entries (value 0) follow the copied ones up to
    ``dst0 + pad_to`` (a bound on the marked count that the caller knows). ``runmask``,
    ``bit``: ``runmask[x] |= bit`` for every first key x copied, in the same launch (a new
    run's bit; :func:`set_run_bits` of the copied entries). ``meta``: metadata writes made
    by the same launch (see :func:`merge_runs`)."""
    check_1d("src_k", src_k)
    n = src_k.shape[0]
    if n == 0:
        if meta is not None:
            patch_meta(*meta)
        return
    incl = array_module(flags).cumsum(flags, dtype=np.int64)
    if runmask is None:  # a stand-in of the right type, never written with bit 0
        runmask, bit = dst_k, 0
    marr, mw = _carried(meta, dst_k)
    launch(_copy_flagged_kernel, *grid(n),
           (src_k, src_v, flags, incl, dst_k, dst_v, runmask, marr),
           n, np.int64(dst0), np.int64(pad_to), np.int64(bit), *mw)


def compact_rows_of(st, tomb, live, keys, slack) -> None:
    """Compact the rows of the sorted ``keys``' first keys whose tombstones outnumber their
    live tuples by more than ``slack``: one launch, decided on the device (no host read)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        return
    launch(_compact_rows_of_kernel, *grid(n), st, (keys, tomb, live), n, np.int64(slack))


def count_rows(st, xs, counts) -> None:
    """counts[i] = number of live tuples with first key xs[i]."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_count_rows_kernel, *grid(n), st, (xs, counts), n)


def fill_rows(st, xs, ptr, out_keys, out_vals) -> None:
    """Write the live tuples of first keys xs[i] to out[ptr[i]:ptr[i+1]] (packed keys)."""
    check_1d("xs", xs)
    n = xs.shape[0]
    if n == 0:
        return
    launch(_fill_rows_kernel, *grid(n), st, (xs, ptr, out_keys, out_vals), n)


def index_fill(st, rows, offs, masks, tab, iused, bad) -> None:
    """Build the row tables of ``rows`` (distinct first keys) at ``offs`` with ``masks``
    (``bad[0]`` set if a multiplicity does not fit a slot)."""
    check_1d("rows", rows)
    n = rows.shape[0]
    if n == 0:
        return
    launch(_index_fill_kernel, *grid(n), st, (rows, offs, masks, tab, iused, bad), n)


def index_upsert(st, keys_in, deltas, starts, iused, bad) -> None:
    """Add a batch (sorted unique keys, group ``starts`` then len(keys_in)) to the row tables
    of the rows that have one (``bad[0]`` set if a multiplicity leaves int32)."""
    check_1d("keys_in", keys_in)
    n = starts.shape[0] - 1
    if n <= 0:
        return
    launch(_index_upsert_kernel, *grid(n), st, (keys_in, deltas, starts, iused, bad), n)


def bits_fill(st, rows, boff, bits, bstack, bmeta) -> int:
    """Bitmaps for ``rows`` (distinct rows without one), slots from the stack of given-back
    ones first, then fresh ones; returns the number of rows left without a slot (the slab is
    full). Three launches: slots (reads of the stack), counters, fills (pushes of the slots of
    barred rows); the counters are read back once (fills are rare: rows crossing the length
    threshold)."""
    check_1d("rows", rows)
    n = rows.shape[0]
    if n == 0:
        return 0
    n_free, n_out = host_ints(bmeta)
    k = min(n_free, n)
    fresh = min(n - k, bits.shape[0] - n_out)
    slots = empty(n)
    launch(_bits_slots_kernel, *grid(n), (bstack, slots), n, n_free, k, n_out, fresh)
    launch(_bits_meta_kernel, 1, 1, bmeta, -k, fresh)
    launch(_bits_fill_kernel, *grid(n), st, (rows, slots, boff, bits, bstack, bmeta), n)
    return n - k - fresh


def bits_apply(keys, old, deltas, live, boff, bits, bstack, bmeta, lo_live, hi_live,
               want) -> tuple[int, int]:
    """A batch's changes (sorted unique keys) into the row bitmaps, one thread per first key's
    group: see :func:`gpu_ivm.kernels.row_bits.bits_apply`. One launch and one 16-byte read
    back: (rows that want a bitmap, largest second id)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        return 0, 0
    counter = zeros(2)
    launch(_bits_apply_kernel, *grid(n),
           (keys, old, deltas, live, boff, bits, bstack, bmeta, want, counter),
           n, lo_live, hi_live)
    nw, top = host_ints(counter)
    return nw, top


def collect_live(keys, vals, s, e, out_keys, out_vals) -> int:
    """Copy the live entries of [s, e) to the front of out; return their number (read back
    once: the caller concatenates runs with it)."""
    n = e - s
    if n <= 0:
        return 0
    flags = empty(n)
    launch(_live_flags_kernel, *grid(n), (vals, flags), s, e)
    offs = exclusive_scan(flags)
    w = scalar(offs, n)
    if w:
        launch(_compact_pairs_kernel, *grid(n),
               (keys[s:e], vals[s:e], flags, offs, out_keys, out_vals), n, 0)
    return w


def first_key_counts(keys, n, counts) -> None:
    """counts[x] += number of keys with first key x among keys[:n]."""
    if n <= 0:
        return
    launch(_first_counts_kernel, *grid(n), (keys, counts), n)


def sorted_unique_firsts(keys):
    """The distinct first keys of sorted packed keys, in order. The output length is read
    back once (it sizes the result)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        return np.zeros(0, np.int64) if isinstance(keys, np.ndarray) else empty(0)
    flags = empty(n)
    launch(_first_starts_kernel, *grid(n), (keys, flags), n)
    offs = exclusive_scan(flags)
    m = scalar(offs, n)
    out = empty(m)
    launch(_scatter_firsts_kernel, *grid(n), (keys, flags, offs, out), n)
    return result(out, keys)
