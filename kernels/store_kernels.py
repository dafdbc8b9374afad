"""CPU kernels that maintain the sorted-run store (see :mod:`gpu_ivm.kernels.lsm`)."""

from __future__ import annotations

import numba as nb
import numpy as np

from .elements import compact_key, count_row, fill_row
from .jit import helper
from .lsm import (
    LO_MASK,
    PAD_KEY,
    SENTINEL,
    find,
    first_key_starts,
    gallop,
    lower_bound,
    row_cuts,
    run_range_a,
)
from .prefetch import prefetch
from .row_bits import bit_at, bits_apply, bits_fill, has_bits  # noqa: F401  (the store's row-bitmap kernels)
from .row_index import index_fill, index_upsert  # noqa: F401  (the store's row-table kernels)
from .row_prefetch import _row_runs, _row_words


@helper
def _locate_range(keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits, keys_in, i0, i1,
                  pos, tomb):
    """pos[t] for the keys keys_in[i0:i1], group by group of equal first key x: in each run
    that may hold x, x's range (from the run's directory; a run without one is searched
    whole, one binary search where finding the range first took two more) is searched for
    the group's first key and walked forward with galloping searches for the next ones, so
    a group of clustered keys (as view deltas are) costs little more than a merge. The
    store's arrays are passed one by one (see :func:`_arrays`); the groups are found in this
    loop (the group search in a function of its own called per group, or the group bounds in
    an array, took 74 keys 11-12 us instead of 2-3 us on one thread: one-off script on the
    insert-only store of CollegeMsg).

    ``tomb``: per-row tombstone counts (or an empty array). Where row x has a bitmap and no
    tombstone, a key whose bit is clear is stored nowhere and is not searched for."""
    i = i0
    while i < i1:
        x = keys_in[i] >> 32
        g = i + 1
        while g < i1 and (keys_in[g] >> 32) == x:
            g += 1
        for t in range(i, g):
            pos[t] = -1
        known = (x < tomb.shape[0] and tomb[x] == 0 and x >= 0 and x < boff.shape[0]
                 and boff[x] >= 0)
        slot = boff[x] if known else 0
        m = runmask[x] if x >= 0 and x < runmask.shape[0] else 0
        j = 0
        while m != 0:
            if m & 1:
                if dirptr[j] >= 0:  # the row's range from the directory
                    lo, hi = run_range_a(keys, bounds, dirptr, dirlen, dirs, j, x)
                else:  # search the keys in the whole run: one binary search, not three
                    lo, hi = bounds[j], bounds[j + 1]
                p = lo
                first = True
                for t in range(i, g):
                    if pos[t] >= 0:
                        continue
                    if known and bit_at(bits, slot, keys_in[t] & LO_MASK) == 0:
                        continue
                    if first:  # one binary search: a gallop from lo takes twice the loads
                        p = lower_bound(keys, p, hi, keys_in[t])
                        first = False
                    else:
                        p = gallop(keys, p, hi, keys_in[t])
                    if p >= hi:
                        break
                    if keys[p] == keys_in[t]:
                        pos[t] = p
            m >>= 1
            j += 1
        i = g


@nb.njit(cache=True, inline="always")
def _arrays(st):
    """The arrays of store ``st`` that :func:`_locate_range` reads, taken once per kernel and
    passed one by one (taken from a tuple inside the loop, they would be reference-counted
    there: see :func:`~gpu_ivm.kernels.lsm.run_range_a`)."""
    return st[0], st[2], st[3], st[4], st[5], st[6], st[11], st[12]


PAR_LOCATE_MIN = 256  # below this many keys the location runs on one thread
_NO_TOMB = np.zeros(0, np.int64)  # _locate_sorted without the bitmap shortcut


@nb.njit(cache=True, parallel=True)
def _locate_groups_par(st, keys_in, starts, pos, tomb):
    keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits = _arrays(st)
    for gi in nb.prange(starts.shape[0] - 1):
        _locate_range(keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits, keys_in,
                      starts[gi], starts[gi + 1], pos, tomb)


#: keys per chunk of :func:`_locate_lanes_par`: their searches advance in lock step
LOCATE_LANES = 32
#: batches whose groups of equal first key hold this many keys or fewer on average are
#: located key by key in lock step (larger groups gallop along their rows)
LANES_GROUP_MAX = 4


@nb.njit(cache=True, parallel=True)
def _locate_lanes_par(st, keys_in, pos, tomb):
    """:func:`_locate_range`'s ``pos`` for every key, each key searched for on its own, the
    searches of a chunk of ``LOCATE_LANES`` keys in lock step.

    Finding a key is a chain of dependent loads: its row's run mask, tombstones and bitmap
    slot, then the bitmap word and the row's directory entry in each run, then a binary
    search of the row. Key after key, each link waits on memory. Here a chunk's keys take
    each link together: one pass asks for every key's words (a prefetch), the next reads them
    and asks for the next link, and the binary searches (one per key and run that may hold
    it) advance one step per pass over the chunk, each step's probe asked for in the pass
    before, so the chunk's misses overlap. The answers are :func:`_locate_range`'s: a key
    whose row has a bitmap and no tombstone and whose bit is clear is stored nowhere, and a
    key counts in the oldest run that the row's run mask names and that holds it."""
    keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits = _arrays(st)
    n = keys_in.shape[0]
    nr = max(bounds.shape[0] - 1, 1)
    nch = (n + LOCATE_LANES - 1) // LOCATE_LANES
    # room for a search per key and run, chunk c's at [c·LOCATE_LANES·nr, ...): allocated
    # once, not per chunk
    tk = np.empty(n * nr, np.int64)
    tlo = np.empty(n * nr, np.int64)
    thi = np.empty(n * nr, np.int64)
    tend = np.empty(n * nr, np.int64)
    for c in nb.prange(nch):
        i0 = c * LOCATE_LANES
        i1 = min(n, i0 + LOCATE_LANES)
        a = i0 * nr
        b = i1 * nr
        _locate_lanes(keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits, keys_in, i0,
                      i1, pos, tomb, tk[a:b], tlo[a:b], thi[a:b], tend[a:b])


@helper
def _locate_lanes(keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits, keys_in, i0, i1,
                  pos, tomb, tk, tlo, thi, tend):
    """The chunk keys_in[i0:i1] of :func:`_locate_lanes_par` (``tk``, ``tlo``, ``thi``,
    ``tend``: room for a search per key and run)."""
    for t in range(i0, i1):  # the rows' words (the pair kernel's first prefetch stage)
        pos[t] = -1
        if keys_in[t] >= 0:
            _row_words(runmask, tomb, boff, keys_in[t] >> 32)
    for t in range(i0, i1):  # their bitmap words and directory entries
        x = keys_in[t] >> 32
        if (x >= 0 and x < tomb.shape[0] and tomb[x] == 0 and x < boff.shape[0]
                and boff[x] >= 0):
            ci = (keys_in[t] & LO_MASK) >> 6
            if ci < bits.shape[1]:
                prefetch(bits[boff[x]], ci)
        if x >= 0:
            _row_runs(keys, keys, runmask, dirptr, dirlen, dirs, x, False)
    k = 0
    for t in range(i0, i1):  # the searches: a key's runs, oldest first
        key = keys_in[t]
        x = key >> 32
        known = (x < tomb.shape[0] and tomb[x] == 0 and x >= 0 and x < boff.shape[0]
                 and boff[x] >= 0)
        if known and bit_at(bits, boff[x], key & LO_MASK) == 0:
            continue
        m = runmask[x] if x >= 0 and x < runmask.shape[0] else 0
        j = 0
        while m != 0:
            if m & 1:
                if dirptr[j] >= 0:
                    lo, hi = run_range_a(keys, bounds, dirptr, dirlen, dirs, j, x)
                else:
                    lo, hi = bounds[j], bounds[j + 1]
                if lo < hi:
                    tk[k] = t
                    tlo[k] = lo
                    thi[k] = hi
                    tend[k] = hi
                    prefetch(keys, (lo + hi) >> 1)
                    k += 1
            m >>= 1
            j += 1
    busy = k
    while busy > 0:  # one step of every open search a pass
        busy = 0
        for q in range(k):
            lo = tlo[q]
            hi = thi[q]
            if lo < hi:
                mid = (lo + hi) >> 1
                if keys[mid] < keys_in[tk[q]]:
                    lo = mid + 1
                else:
                    hi = mid
                tlo[q] = lo
                thi[q] = hi
                if lo < hi:
                    prefetch(keys, (lo + hi) >> 1)
                    busy += 1
    for q in range(k):  # in order: a key's oldest run that holds it
        t = tk[q]
        p = tlo[q]
        if pos[t] < 0 and p < tend[q] and keys[p] == keys_in[t]:
            pos[t] = p


#: a batch with one key per this many stored entries or more is located by walking the runs
LOCATE_MERGE_RATIO = 16
#: chunks of such a batch handed to the threads (a constant: a thread count read inside a
#: compiled function would keep it out of Numba's on-disk cache)
LOCATE_MERGE_CHUNKS = 16


@nb.njit(cache=True, parallel=True)
def _locate_merge_par(keys, bounds, runmask, keys_in, cuts, pos):
    """pos[t] for the sorted unique ``keys_in`` by a merge with every run: chunk c takes
    keys_in[cuts[c]:cuts[c + 1]] and walks each run from its first key's place (one binary
    search) to its last key, one entry at a time. A batch dense in the store reads the runs
    once, in order, where a search per key makes a chain of dependent loads for each. As in
    the search, a match counts only in a run that ``runmask`` names for the key's row, the
    oldest such run first."""
    nr = bounds.shape[0] - 1
    for c in nb.prange(cuts.shape[0] - 1):
        i0 = cuts[c]
        i1 = cuts[c + 1]
        for t in range(i0, i1):
            pos[t] = -1
        if i0 == i1:
            continue
        for j in range(nr):
            e = bounds[j + 1]
            p = lower_bound(keys, bounds[j], e, keys_in[i0])
            t = i0
            while t < i1 and p < e:
                k = keys_in[t]
                kp = keys[p]
                if kp < k:
                    p += 1
                else:
                    if kp == k:
                        x = k >> 32
                        if pos[t] < 0 and x < runmask.shape[0] and (runmask[x] >> j) & 1:
                            pos[t] = p
                        p += 1
                    t += 1


@nb.njit(cache=True)
def _ascending(keys):
    """Whether ``keys`` ascend strictly. The search needs the keys grouped by first key only
    (a view's promotion passes its rows' keys row after row, rows in any order); the merge
    needs them sorted."""
    for i in range(1, keys.shape[0]):
        if keys[i] <= keys[i - 1]:
            return False
    return True


def locate_by_merge(keys, bounds) -> bool:
    """Whether :func:`_locate_sorted` walks the runs for ``keys`` (for the tests)."""
    n = keys.shape[0]
    return (n >= PAR_LOCATE_MIN and n * LOCATE_MERGE_RATIO >= bounds[-1] - bounds[0]
            and bool(_ascending(keys)))


@nb.njit(cache=True)
def _locate_sorted(st, keys_in, pos, tomb):
    """pos[i] = position of keys_in[i] in the store, or -1 (the keys unique, grouped by
    first key and sorted within a group).

    A sorted batch with one key per ``LOCATE_MERGE_RATIO`` stored entries or more is merged
    with the runs (:func:`_locate_merge_par`: R-MAT 16, 2·10⁵ keys against 1.6M entries in
    three runs). Otherwise keys are located per first key (:func:`_locate_range`, which says
    what ``tomb`` is for); a batch of ``PAR_LOCATE_MIN`` keys or more is spread over the
    threads (each search is a chain of dependent loads, so one thread leaves the memory
    system idle): one whose groups hold ``LANES_GROUP_MAX`` keys or fewer on average (a graph
    batch's: mostly a key a row) key by key, the searches of a chunk in lock step
    (:func:`_locate_lanes_par`), one of larger groups group by group, a group's keys found by
    galloping along its row.
    """
    n = keys_in.shape[0]
    bounds = st[2]
    if (n >= PAR_LOCATE_MIN and n * LOCATE_MERGE_RATIO >= bounds[-1] - bounds[0]
            and _ascending(keys_in)):
        cuts = np.empty(LOCATE_MERGE_CHUNKS + 1, np.int64)
        for c in range(LOCATE_MERGE_CHUNKS + 1):
            cuts[c] = (n * c) // LOCATE_MERGE_CHUNKS
        _locate_merge_par(st[0], bounds, st[6], keys_in, cuts, pos)
        return
    if n >= PAR_LOCATE_MIN:
        starts = first_key_starts(keys_in)
        if LANES_GROUP_MAX * (starts.shape[0] - 1) >= n:
            _locate_lanes_par(st, keys_in, pos, tomb)
        else:
            _locate_groups_par(st, keys_in, starts, pos, tomb)
        return
    keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits = _arrays(st)
    _locate_range(keys, bounds, dirptr, dirlen, dirs, runmask, boff, bits, keys_in, 0,
                  keys_in.shape[0], pos, tomb)


@nb.njit(cache=True)
def apply_updates(st, live, tomb, keys_in, deltas, old_out, is_new, read=True):
    """Add ``deltas`` to existing keys in place; flag the keys that are not stored anywhere.

    ``keys_in`` is sorted and unique. ``live[x]`` / ``tomb[x]`` count live tuples / tombstones
    of first key ``x``. Returns ``(n_new, size_change)``: the number of new keys (with a
    nonzero delta) and the change in the number of nonzero keys (``read`` is for the device
    kernel, which can skip reading them back; here they are always returned).
    """
    pos = np.empty(keys_in.shape[0], np.int64)
    _locate_sorted(st, keys_in, pos, tomb)
    return _apply_at(st[1], live, tomb, keys_in, deltas, old_out, is_new, pos)


#: keys from which :func:`apply_updates_sets` checks and writes on every thread
APPLY_PAR_MIN = 8192
#: chunks (cut at rows' boundaries) of such a batch
APPLY_CHUNKS = 16


@nb.njit(cache=True)
def apply_updates_sets(st, live, tomb, keys_in, deltas, old_out, is_new):
    """:func:`apply_updates` for a batch under set semantics that was not checked yet: the
    keys are located once, and where some multiplicity plus its delta would leave {0, 1}
    nothing is written. Returns ``(n_new, size_change, violations)`` (``(0, 0, v)`` then).
    A batch of ``APPLY_PAR_MIN`` keys or more is checked and written in chunks cut at its
    rows' boundaries, on every thread (:func:`_check_apply_par`)."""
    vals = st[1]
    n = keys_in.shape[0]
    pos = np.empty(n, np.int64)
    _locate_sorted(st, keys_in, pos, tomb)
    if n >= APPLY_PAR_MIN:
        return _check_apply_par(vals, live, tomb, keys_in, deltas, old_out, is_new, pos,
                                row_cuts(keys_in, APPLY_CHUNKS))
    bad = 0
    for i in range(n):
        after = (vals[pos[i]] if pos[i] >= 0 else 0) + deltas[i]
        if after < 0 or after > 1:
            bad += 1
    if bad:
        return 0, 0, bad
    n_new, size_change = _apply_at(vals, live, tomb, keys_in, deltas, old_out, is_new, pos)
    return n_new, size_change, 0


@nb.njit(cache=True, parallel=True)
def _check_apply_par(vals, live, tomb, keys_in, deltas, old_out, is_new, pos, cuts):
    """The set check and the writes of :func:`apply_updates_sets`, chunk by chunk (``cuts``
    at rows' boundaries: a row's ``live`` and ``tomb`` are one chunk's)."""
    nc = cuts.shape[0] - 1
    bad = np.zeros(nc, np.int64)
    for c in nb.prange(nc):
        for i in range(cuts[c], cuts[c + 1]):
            after = (vals[pos[i]] if pos[i] >= 0 else 0) + deltas[i]
            if after < 0 or after > 1:
                bad[c] += 1
    n_bad = bad.sum()
    if n_bad:
        return 0, 0, n_bad
    new = np.zeros(nc, np.int64)
    size = np.zeros(nc, np.int64)
    for c in nb.prange(nc):
        new[c], size[c] = _apply_range(vals, live, tomb, keys_in, deltas, old_out, is_new,
                                       pos, cuts[c], cuts[c + 1])
    return new.sum(), new.sum() + size.sum(), 0


@nb.njit(cache=True)
def _apply_at(vals, live, tomb, keys_in, deltas, old_out, is_new, pos):
    """The writes of :func:`apply_updates`, the keys' positions given (-1: stored nowhere)."""
    n_new, size_change = _apply_range(vals, live, tomb, keys_in, deltas, old_out, is_new, pos,
                                      0, keys_in.shape[0])
    return n_new, n_new + size_change


@helper
def _apply_range(vals, live, tomb, keys_in, deltas, old_out, is_new, pos, i0, i1):
    """:func:`_apply_at`'s writes for the keys [i0, i1): ``(new keys, change in nonzero
    keys among the stored ones)``."""
    n_new = 0
    size_change = 0
    for i in range(i0, i1):
        key = keys_in[i]
        d = deltas[i]
        x = key >> 32
        p = pos[i]
        if p >= 0:
            old = vals[p]
            new = old + d
            vals[p] = new
            old_out[i] = old
            is_new[i] = False
            if old == 0 and new != 0:
                live[x] += 1
                tomb[x] -= 1
                size_change += 1
            elif old != 0 and new == 0:
                live[x] -= 1
                tomb[x] += 1
                size_change -= 1
        else:
            old_out[i] = 0
            if d != 0:
                is_new[i] = True
                live[x] += 1
                n_new += 1
            else:
                is_new[i] = False
    return n_new, size_change


@nb.njit(cache=True)
def rows_to_compact(keys, tomb, live, slack):
    """The distinct first keys x of the sorted ``keys`` whose tombstones outnumber their live
    tuples by more than ``slack`` (``tomb[x] > live[x] + slack``), in order."""
    out = np.empty(keys.shape[0], np.int64)
    k = 0
    prev = -1
    for i in range(keys.shape[0]):
        x = keys[i] >> 32
        if x != prev:
            prev = x
            if tomb[x] > live[x] + slack:
                out[k] = x
                k += 1
    return out[:k]


def copy_flagged(src_k, src_v, flags, dst_k, dst_v, dst0, pad_to=-1, runmask=None, bit=0,
                 meta=None):
    """:func:`_copy_flagged`, then ``meta``'s metadata writes (:func:`patch_meta`; the
    device makes them in the same launch)."""
    _copy_flagged(src_k, src_v, flags, dst_k, dst_v, dst0, pad_to, runmask, bit)
    if meta is not None:
        patch_meta(*meta)


@nb.njit(cache=True)
def _copy_flagged(src_k, src_v, flags, dst_k, dst_v, dst0, pad_to=-1, runmask=None, bit=0):
    """Copy the entries of ``src_k`` / ``src_v`` that ``flags`` marks, in order, to
    ``dst_k`` / ``dst_v`` from ``dst0`` on; ``pad_to >= 0``: ``PAD_KEY`` entries (value 0)
    follow up to ``dst0 + pad_to``. ``runmask``, ``bit``: ``runmask[x] |= bit`` for every
    first key x copied (a new run's bit, :func:`set_run_bits` of the copied entries)."""
    w = dst0
    prev = -1
    for r in range(src_k.shape[0]):
        if flags[r]:
            dst_k[w] = src_k[r]
            dst_v[w] = src_v[r]
            w += 1
            if runmask is not None and bit != 0:
                x = src_k[r] >> 32
                if x != prev and x < runmask.shape[0]:
                    runmask[x] |= bit
                    prev = x
    while w < dst0 + pad_to:
        dst_k[w] = PAD_KEY
        dst_v[w] = 0
        w += 1


def compact_rows_of(st, tomb, live, keys, slack) -> None:
    """Compact the rows of the sorted ``keys``' first keys whose tombstones outnumber their
    live tuples by more than ``slack`` (:func:`rows_to_compact`, then :func:`compact_keys`)."""
    bad = rows_to_compact(keys, tomb, live, slack)
    if bad.shape[0]:
        compact_keys(st, tomb, bad)


@nb.njit(cache=True)
def probe_sorted(st, keys_in, out):
    """out[i] = multiplicity of keys_in[i] (sorted unique keys; 0 where absent)."""
    bits = st[12]
    boff = st[11]
    rest = np.empty(keys_in.shape[0], np.int64)  # the keys of rows without a bitmap
    k = 0
    for i in range(keys_in.shape[0]):  # a row with a bitmap holds st(x, c) in bit c
        x = keys_in[i] >> 32
        if has_bits(st, x):
            out[i] = bit_at(bits, boff[x], keys_in[i] & LO_MASK)
        else:
            rest[k] = i
            k += 1
    if k == 0:
        return
    rest = rest[:k]
    pos = np.empty(k, np.int64)
    _locate_sorted(st, keys_in[rest], pos, _NO_TOMB)
    vals = st[1]
    for t in range(k):
        out[rest[t]] = vals[pos[t]] if pos[t] >= 0 else 0


@nb.njit(cache=True)
def set_run_bits(keys, s, e, runmask, j):
    bit = np.int64(1) << j
    prev = -1
    for p in range(s, e):
        x = keys[p] >> 32
        if x != prev and x < runmask.shape[0]:  # not PAD_ROW
            runmask[x] |= bit
            prev = x


def merge_runs(keys, vals, s1, s2, s3, tomb, runmask, j, padded=False, meta=None):
    """:func:`_merge_runs`, then ``meta``'s metadata writes (:func:`patch_meta`; the device
    makes them in the merge's last launch)."""
    end = _merge_runs(keys, vals, s1, s2, s3, tomb, runmask, j, padded)
    if meta is not None:
        patch_meta(*meta)
    return end


@nb.njit(cache=True)
def _merge_runs(keys, vals, s1, s2, s3, tomb, runmask, j, padded=False):
    """Merge runs [s1, s2) and [s2, s3) (run indices j and j+1) into one run at s1.

    Tombstones and compaction padding are dropped. Returns the end of the merged run;
    ``padded``: the run keeps its length, ``PAD_KEY`` entries (value 0) behind the kept
    ones, and ``s3`` is returned (as a device store merges without a read).
    """
    n = s3 - s1
    tk = keys[s1:s3].copy()
    tv = vals[s1:s3].copy()
    keep_low = (np.int64(1) << j) - 1  # bits of runs older than j survive
    for p in range(n):
        x = tk[p] >> 32
        if x < runmask.shape[0]:  # not PAD_ROW
            runmask[x] &= keep_low
    a = 0
    b = s2 - s1
    ea = s2 - s1
    eb = n
    w = s1
    bit = np.int64(1) << j
    while a < ea or b < eb:
        if b >= eb or (a < ea and tk[a] < tk[b]):
            k = tk[a]
            v = tv[a]
            a += 1
        else:
            k = tk[b]
            v = tv[b]
            b += 1
        if v == 0:
            if (k & LO_MASK) != SENTINEL:
                tomb[k >> 32] -= 1
            continue
        keys[w] = k
        vals[w] = v
        runmask[k >> 32] |= bit
        w += 1
    if padded:
        while w < s3:
            keys[w] = PAD_KEY
            vals[w] = 0
            w += 1
    return w


def patch_meta(meta, writes) -> None:
    """``meta[i] = v`` for each ``(i, v)`` of ``writes`` (a store's run metadata; the device
    kernel takes the values as launch arguments)."""
    for i, v in writes:
        meta[i] = v


def build_directory(keys, s, e, nkeys, out, meta=None):
    """:func:`_build_directory`, then ``meta``'s metadata writes (:func:`patch_meta`; the
    device makes them in the same launch)."""
    _build_directory(keys, s, e, nkeys, out)
    if meta is not None:
        patch_meta(*meta)


@nb.njit(cache=True)
def _build_directory(keys, s, e, nkeys, out):
    """out[x] = start of first key x in run [s, e); out[nkeys] = e. len(out) == nkeys + 1."""
    p = s
    for x in range(nkeys + 1):
        while p < e and (keys[p] >> 32) < x:
            p += 1
        out[x] = p


@nb.njit(cache=True)
def compact_keys(st, tomb, xs):
    """Squeeze the tombstones of first keys ``xs`` out of their ranges (padding at the end)."""
    for i in range(xs.shape[0]):
        compact_key(st, tomb, xs[i])


@nb.njit(cache=True)
def probe_many(st, keys_in, out):
    vals = st[1]
    for i in range(keys_in.shape[0]):
        p = find(st, keys_in[i])
        out[i] = vals[p] if p >= 0 else 0


@nb.njit(cache=True, parallel=True)
def probe_many_par(st, keys_in, out):
    vals = st[1]
    for i in nb.prange(keys_in.shape[0]):
        p = find(st, keys_in[i])
        out[i] = vals[p] if p >= 0 else 0


@nb.njit(cache=True)
def count_rows(st, xs, counts):
    """counts[i] = number of live tuples with first key xs[i]."""
    for i in range(xs.shape[0]):
        counts[i] = count_row(st, xs[i])


@nb.njit(cache=True)
def fill_rows(st, xs, ptr, out_keys, out_vals):
    """Write the live tuples of first keys xs[i] to out[ptr[i]:ptr[i+1]] (packed keys)."""
    for i in range(xs.shape[0]):
        fill_row(st, xs[i], ptr[i], out_keys, out_vals)


@nb.njit(cache=True)
def collect_live(keys, vals, s, e, out_keys, out_vals):
    w = 0
    for p in range(s, e):
        if vals[p] != 0:
            out_keys[w] = keys[p]
            out_vals[w] = vals[p]
            w += 1
    return w


@nb.njit(cache=True)
def first_key_counts(keys, n, counts):
    """counts[x] += number of keys with first key x among keys[:n]."""
    for p in range(n):
        counts[keys[p] >> 32] += 1


@nb.njit(cache=True)
def sorted_unique_firsts(keys):
    n = keys.shape[0]
    out = np.empty(n, np.int64)
    w = 0
    prev = -1
    for p in range(n):
        x = keys[p] >> 32
        if x != prev:
            out[w] = x
            w += 1
            prev = x
    return out[:w]
