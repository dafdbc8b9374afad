"""Per-row bitmaps of a sorted-run store: persistent marks for the long rows.

:mod:`~gpu_ivm.kernels.row_marks` writes a long row into a scratch array, probes the short row
against it and clears it again, for every intersection: ``2·long + short`` entries. A long row
that is intersected again and again (a hub, in batch after batch) can keep its marks instead:
a bitmap over the id space, set and cleared as the store's tuples change, so an intersection
with it walks the short row only and tests one bit per entry.

A store kept with bitmaps carries two more arrays in its kernel tuple (see
:mod:`gpu_ivm.kernels.lsm`)::

    st[11] boff: boff[x] = slot of row x's bitmap, or BITS_NONE / BITS_BARRED (empty where off)
    st[12] bits: uint64 array (slots, W); bit c of bits[slot] is set iff st(x, c) == 1

A row has a bitmap only while every one of its tuples has multiplicity 1 (the tuples of a
graph's edge set) and every second id is below ``64·W``; then ``st(x, c)`` is exactly the bit.
A multiplicity other than 0 or 1 gives the row's slot back and bars the row until the next
rebuild; an id beyond the bitmaps gives the slot back and has the store lay all bitmaps out
again, wider. Results never depend on a bitmap that could be wrong, only the speed does.

Exactly like reads of the mark scratch, bit tests are not counted as adjacency entries read by
the work counters: an intersection with a bitmap row reads the short row's entries only.

The inner functions are plain ``njit`` functions, called by the CPU kernels and the CUDA kernels
alike (:func:`~gpu_ivm.kernels.row_index.dot_rows_ix`); ``bits_apply`` and ``bits_fill``, which
keep the bitmaps, have CUDA twins in :mod:`gpu_ivm.kernels.cuda_store` around the same
per-row functions (:func:`apply_group`, :func:`fill_one`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper
from .lsm import LO_MASK, real_end, row_cuts, run_mask, run_range

BITS_NONE = -1  # the row has no bitmap (it may get one)
BITS_BARRED = -2  # the row broke the 0/1 rule: no bitmap until the store is rebuilt
_ONE = np.uint64(1)
_SIX = np.uint64(63)


@nb.njit(cache=True, inline="always")
def has_bits(st, x):
    """True if row ``x`` of store ``st`` has a bitmap."""
    boff = st[11]
    return x >= 0 and x < boff.shape[0] and boff[x] >= 0


@nb.njit(cache=True, inline="always")
def bit_at(bits, slot, c):
    """st(x, c) for the row whose bitmap is ``bits[slot]`` (0 for an id beyond the bitmap,
    which such a row cannot hold), with no branch on the data."""
    w = bits.shape[1]
    i = c >> 6
    inside = i < w
    word = bits[slot, min(i, w - 1)]
    return np.int64((word >> (np.uint64(c) & _SIX)) & _ONE) * inside


@helper
def probe_bits(st1, x1, st2, x2):
    """(Σ_c st1(x1,c)·st2(x2,c), entries read) for a row x2 that has a bitmap: one walk of row
    x1, one bit test per entry (deleted entries have value 0, padding is cut off per run)."""
    keys = st1[0]
    vals = st1[1]
    bits = st2[12]
    slot = st2[11][x2]
    s = 0
    t = 0
    m = run_mask(st1, x1)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st1, j, x1)
            hi = real_end(keys, lo, hi, x1)
            for p in range(lo, hi):
                s += vals[p] * bit_at(bits, slot, keys[p] & LO_MASK)
            t += hi - lo
        m >>= 1
        j += 1
    return s, t


@helper
def probe_range_bits(k1, v1, lo1, hi1, st, x):
    """Σ_p v1[p]·st(x, c_p) over a plain sorted range k1[lo1:hi1], for a row x that has a
    bitmap (entries read: hi1 - lo1)."""
    bits = st[12]
    slot = st[11][x]
    s = 0
    for p in range(lo1, hi1):
        s += v1[p] * bit_at(bits, slot, k1[p] & LO_MASK)
    return s


@helper
def _take_slot(bstack, bmeta):
    """A free slot (the stack of given-back slots first, then the next unused one), or -1."""
    if bmeta[0] > 0:
        bmeta[0] -= 1
        return bstack[bmeta[0]]
    if bmeta[1] < bstack.shape[0]:
        bmeta[1] += 1
        return bmeta[1] - 1
    return -1


@nb.njit(cache=True, inline="always")
def _give_slot(slot, bstack, bmeta):
    bstack[bmeta[0]] = slot
    bmeta[0] += 1


@helper
def fill_one(st, x, bits, slot):
    """Write row x's tuples into bits[slot]; False if one breaks the 0/1 rule."""
    keys = st[0]
    vals = st[1]
    w = bits.shape[1]
    for i in range(w):
        bits[slot, i] = 0
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            hi = real_end(keys, lo, hi, x)
            for p in range(lo, hi):
                v = vals[p]
                if v == 0:
                    continue
                c = keys[p] & LO_MASK
                if v != 1 or (c >> 6) >= w:
                    return False
                bits[slot, c >> 6] |= _ONE << (np.uint64(c) & _SIX)
        m >>= 1
        j += 1
    return True


@nb.njit(cache=True)
def bits_fill(st, rows, boff, bits, bstack, bmeta):
    """Give each of ``rows`` (rows without a bitmap) one, from the store's tuples; a row that
    breaks the 0/1 rule is barred. Returns the number of rows left without a slot (the slab is
    full: the caller grows it and calls again with them)."""
    short = 0
    for r in range(rows.shape[0]):
        x = rows[r]
        if boff[x] != BITS_NONE:
            continue
        slot = _take_slot(bstack, bmeta)
        if slot < 0:
            short += 1
            continue
        if fill_one(st, x, bits, slot):
            boff[x] = slot
        else:
            boff[x] = BITS_BARRED
            _give_slot(slot, bstack, bmeta)
    return short


@helper
def apply_group(keys, old, deltas, i, j, live, boff, bits, lo_live, hi_live):
    """The changes keys[i:j] of one row x (sorted unique packed keys, their multiplicities
    before, ``old``, and the ``deltas``; ``live``: live tuples after the batch) into x's bitmap.

    Returns ``(action, value, top)``, ``top`` the group's largest second id:

    - ``(1, x, top)``: x has no bitmap and now holds ``hi_live`` or more tuples (it wants one);
    - ``(2, slot, top)``: x gave its bitmap's slot back: barred, for a new multiplicity other
      than 0 or 1; or without a bitmap for now, for an id beyond the bitmaps or fewer than
      ``lo_live`` live tuples;
    - ``(0, 0, top)``: nothing for the caller to do (changes applied in place, or none).
    """
    x = keys[i] >> 32
    top = 0
    for p in range(i, j):
        top = max(top, keys[p] & LO_MASK)
    if x >= boff.shape[0]:
        return 0, 0, top
    slot = boff[x]
    if slot == BITS_NONE and live[x] >= hi_live:
        return 1, x, top
    if slot < 0:
        return 0, 0, top
    w = bits.shape[1]
    for p in range(i, j):
        v = old[p] + deltas[p]
        c = keys[p] & LO_MASK
        if v != 0 and v != 1:
            boff[x] = BITS_BARRED
            return 2, slot, top
        if (c >> 6) >= w:
            boff[x] = BITS_NONE
            return 2, slot, top
        bit = _ONE << (np.uint64(c) & _SIX)
        if v == 1:
            bits[slot, c >> 6] |= bit
        else:
            bits[slot, c >> 6] &= ~bit
    if live[x] < lo_live:
        boff[x] = BITS_NONE
        return 2, slot, top
    return 0, 0, top


#: keys from which :func:`bits_apply` spreads the rows over the threads, in this many
#: chunks of about as many keys each (cut at rows' boundaries: R-MAT's long rows have the
#: small ids, so chunks of as many rows left one thread most of the work)
BITS_PAR_MIN = 8192
BITS_CHUNKS = 16


@nb.njit(cache=True)
def bits_apply(keys, old, deltas, live, boff, bits, bstack, bmeta, lo_live, hi_live, want):
    """Bring the bitmaps up to date with a batch just added to the store, row by row
    (:func:`apply_group`): given-back slots go on the stack, rows that want a bitmap to
    ``want`` (for :func:`bits_fill`). Returns ``(how many rows want one, the batch's largest
    second id)``: the caller widens the bitmaps if that id is beyond them. A batch of
    ``BITS_PAR_MIN`` keys or more has its rows spread over the threads
    (:func:`_bits_apply_par`; each group writes only its own row's bitmap and slot)."""
    n = keys.shape[0]
    if n >= BITS_PAR_MIN:
        return _bits_apply_par(keys, old, deltas, live, boff, bits, bstack, bmeta, lo_live,
                               hi_live, want, row_cuts(keys, BITS_CHUNKS))
    nw = 0
    top = 0
    i = 0
    while i < n:
        x = keys[i] >> 32
        j = i
        while j < n and (keys[j] >> 32) == x:
            j += 1
        act, val, t = apply_group(keys, old, deltas, i, j, live, boff, bits, lo_live, hi_live)
        top = max(top, t)
        if act == 1:
            want[nw] = val
            nw += 1
        elif act == 2:
            _give_slot(val, bstack, bmeta)
        i = j
    return nw, top


@nb.njit(cache=True, parallel=True)
def _bits_apply_par(keys, old, deltas, live, boff, bits, bstack, bmeta, lo_live, hi_live, want,
                    cuts):
    """:func:`bits_apply` with the chunks keys[cuts[c]:cuts[c + 1]] (whole rows each) on
    the threads, each row's action noted at its first key, then taken in order on the
    calling thread (the same ``want`` and stack as the serial loop's)."""
    n = keys.shape[0]
    act = np.zeros(n, np.int8)
    val = np.empty(n, np.int64)
    tops = np.zeros(cuts.shape[0] - 1, np.int64)
    for c in nb.prange(cuts.shape[0] - 1):
        i = cuts[c]
        e = cuts[c + 1]
        while i < e:
            x = keys[i] >> 32
            j = i + 1
            while j < e and (keys[j] >> 32) == x:
                j += 1
            a, v, t = apply_group(keys, old, deltas, i, j, live, boff, bits, lo_live, hi_live)
            act[i] = a
            val[i] = v
            tops[c] = max(tops[c], t)
            i = j
    nw = 0
    for i in range(n):
        if act[i] == 1:
            want[nw] = val[i]
            nw += 1
        elif act[i] == 2:
            _give_slot(val[i], bstack, bmeta)
    return nw, tops.max()
