"""Row intersections by marks: write the long row into a scratch array, look the short one up.

The inner product Σ_c st1(x1, c)·st2(x2, c) of two store rows is the count kernel's unit of
work. A merge reads both rows in step, one comparison per entry of either; a gallop reads
O(short · log(long/short)) entries but each one waits for the previous load. Marking does
neither: it writes the long row's multiplicities into a zeroed per-thread ``int8`` array
indexed by the second id (sequential reads, independent stores), reads the short row and adds
``v · marks[c]`` (independent loads, no branch on the data), then writes the zeros back.

Measured with a one-off script on one batch of the R-MAT 18 stream (1,000 updates, one
thread, the store's base run): merge and gallop 6.7 ms, merge only 4.5 ms, marks 2.1 ms,
although marks read ``2·long + short`` entries where a gallop reads
O(short·log(long/short)); in the engine, ``python -m bench.profile_batch`` shows the gain.
The marks are used when the long row is at most ``MARK_RATIO`` times the short one, so an
intersection still costs O(min degree) (at most ``2·MARK_RATIO + 1`` entries per entry of
the short row), as the IVM^ε bounds need; longer rows are probed through their hash table or
galloped (:func:`gpu_ivm.kernels.row_index.dot_rows_ix`). A long row that keeps a bitmap in
the store (:mod:`gpu_ivm.kernels.row_bits`) is not marked: its bits are tested instead. Rows
both shorter than ``MARK_MIN`` are merged (writing and clearing the marks cost more there).

Exactness: a row holding a multiplicity outside [-127, 127], or a second id outside the scratch,
is not marked (the marks written so far are cleared and the row is intersected the old way).

``marks`` of length 0 turns marking off: the CUDA kernels pass one (a per-thread array of one
byte per vertex does not fit a GPU's threads) and run the merge / gallop / table probe.
"""

from __future__ import annotations

import numpy as np

from .jit import helper
from .lsm import LO_MASK, real_end, run_mask, run_range
from .row_bits import has_bits
from .row_index import dot_rows_ix, row_live

MARK_RATIO = 32  # mark the long row only if it is at most this many times the short one
MARK_MAX = 127  # multiplicities in [-MARK_MAX, MARK_MAX] fit an int8 mark
MARK_MIN = 64  # rows shorter than this are merged: writing and clearing the marks costs more


@helper
def mark_row(st, x, marks):
    """marks[c] = st(x, c) for the live tuples of row x; returns (ok, entries read).
    (:func:`mark_row_scaled` with scale 1.)"""
    return mark_row_scaled(st, x, marks, 1)


@helper
def mark_row_scaled(st, x, marks, scale):
    """marks[c] = scale·st(x, c) for the live tuples of row x; returns (ok, entries read).

    ``marks`` has one slot more than there are ids: the last is a bin that ids beyond the
    scratch are written to (and found 0 in by :func:`probe_marks`), so the loop has no branch.
    ok is False if a multiplicity leaves the int8 range or an id the scratch: the row is then
    left unmarked (every mark written is cleared). ``scale`` >= 1."""
    keys = st[0]
    vals = st[1]
    cap = marks.shape[0] - 1
    lim = MARK_MAX // scale  # |v·scale| <= MARK_MAX iff |v| <= lim
    t = 0
    bad = False
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            hi = real_end(keys, lo, hi, x)
            for p in range(lo, hi):
                c = keys[p] & LO_MASK
                v = vals[p]
                # range tested before the product (a test of the product missed wraps)
                bad |= (c >= cap) | (v > lim) | (v < -lim)
                marks[min(c, cap)] = v * scale
            t += hi - lo
        m >>= 1
        j += 1
    marks[cap] = 0
    if bad:
        clear_row(st, x, marks)
        return False, t
    return True, t


@helper
def clear_row(st, x, marks):
    """marks[c] = 0 for every second id c of row x (ids beyond the scratch go to the bin)."""
    keys = st[0]
    cap = marks.shape[0] - 1
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            for p in range(lo, hi):
                marks[min(keys[p] & LO_MASK, cap)] = 0
        m >>= 1
        j += 1


@helper
def mark_range_add(keys, vals, lo, hi, marks):
    """marks[c] += vals[p] for a plain sorted single-first-key range keys[lo:hi]; returns
    False (nothing changed) if an id leaves the scratch or a sum the int8 range."""
    cap = marks.shape[0] - 1
    for p in range(lo, hi):
        c = keys[p] & LO_MASK
        if c >= cap:
            return False
        v = np.int64(marks[c]) + vals[p]
        if v > MARK_MAX or v < -MARK_MAX:
            return False
    for p in range(lo, hi):
        c = keys[p] & LO_MASK
        marks[c] = np.int64(marks[c]) + vals[p]
    return True


@helper
def clear_range(keys, lo, hi, marks):
    """marks[c] = 0 for the second ids of keys[lo:hi] (ids beyond the scratch go to the bin)."""
    cap = marks.shape[0] - 1
    for p in range(lo, hi):
        marks[min(keys[p] & LO_MASK, cap)] = 0


@helper
def probe_range(keys, vals, lo, hi, marks):
    """Σ_p vals[p]·marks[c_p] over a plain sorted range keys[lo:hi]."""
    cap = marks.shape[0] - 1
    s = 0
    for p in range(lo, hi):
        s += vals[p] * np.int64(marks[min(keys[p] & LO_MASK, cap)])
    return s


@helper
def probe_marks(st, x, marks):
    """(Σ_c st(x, c)·marks[c], entries read) over row x; an id beyond the scratch (padding
    included) reads the bin, which is 0."""
    keys = st[0]
    vals = st[1]
    cap = marks.shape[0] - 1
    s = 0
    t = 0
    m = run_mask(st, x)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, x)
            for p in range(lo, hi):
                s += vals[p] * np.int64(marks[min(keys[p] & LO_MASK, cap)])
            t += hi - lo
        m >>= 1
        j += 1
    return s, t


@helper
def dot_rows_mk(st1, x1, st2, x2, marks):
    """(Σ_c st1(x1,c)·st2(x2,c), entries read): by marks when the rows' lengths are within
    ``MARK_RATIO`` of each other and ``marks`` is not empty, else by
    :func:`~gpu_ivm.kernels.row_index.dot_rows_ix` (table probe, merge or gallop)."""
    a = row_live(st1, x1)
    b = row_live(st2, x2)
    if a == 0 or b == 0:
        return 0, 0
    if marks.shape[0] <= 1 or max(a, b) > MARK_RATIO * min(a, b) or max(a, b) < MARK_MIN:
        return dot_rows_ix(st1, x1, st2, x2)
    if has_bits(st1, x1) if a > b else has_bits(st2, x2):  # the long row's marks are kept
        return dot_rows_ix(st1, x1, st2, x2)
    if a > b:  # mark the longer row
        ok, tm = mark_row(st1, x1, marks)
        if not ok:
            return dot_rows_ix(st1, x1, st2, x2)
        s, tp = probe_marks(st2, x2, marks)
        clear_row(st1, x1, marks)
    else:
        ok, tm = mark_row(st2, x2, marks)
        if not ok:
            return dot_rows_ix(st1, x1, st2, x2)
        s, tp = probe_marks(st1, x1, marks)
        clear_row(st2, x2, marks)
    return s, tm + tp


