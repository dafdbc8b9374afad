"""CUDA kernels of a batch's bookkeeping: the ``phase`` part of the cuda kernel set.

:func:`check_sets` validates a batch under set semantics before anything changes (one launch,
one read of the number of violations); :func:`batch_total` adds up the count delta's terms
(one launch, one read; :func:`batch_total_into` without the read, so that the count comes
back with :func:`phase_scan`'s counts). :func:`phase_scan` is the rest of this docstring.

The device twin of :func:`gpu_ivm.kernels.phase_kernels.phase_degrees` plus the auto-ε watch
of :meth:`gpu_ivm.partition.PartRel.track_lights`, in one launch and one host read. A phase
(``TriangleEngineBase._phase``) needs, per distinct first key x of its sorted keys, x's degree
after the phase, the keys that cross the minor-rebalancing thresholds, and how many of its
keys have a heavy first key (to split them by part). Written with CuPy calls that was about 45
calls and two host reads per phase (each selection's size must reach the host); here the
thread that owns the first key of a group walks the group, classifies x and appends it to
its selection with an atomic slot, and the four counts come back in one 40-byte read. In the
steady state every selection is empty, so nothing else runs.

The selections are appended in no particular order; the launcher sorts the (rare) non-empty
ones, so they come out as the CPU kernel returns them (ascending first keys).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .cuda_launch import (
    array_module,
    check_1d,
    counters,
    empty,
    grid,
    host_ints,
    launch,
    nothing,
    spare_counters,
)
from .jit import helper
from .lsm import get
from .phase_kernels import update_units

#: slots of the counts the launcher reads back
N_TO_HEAVY, N_TO_LIGHT, N_CLEAR, N_HEAVY_KEYS, D_OVER, N_HEAVY_INS, N_BAD, N_THEN = range(8)


@cuda.jit(cache=True)
def _phase_kernel(io, spare, n, up, down, watch):
    """Per group of equal first key (its first thread walks it, :func:`_phase_group`): the
    degree after the phase, the minor-rebalancing class, the heavy-key count and, with
    ``watch >= 0``, the auto-ε flag ``over[x]`` (light after the phase and degree above
    ``watch``) with its change to ``n_over``, and the heavy keys' inserts (positive deltas).
    ``spare``: the next batch's counters, zeroed here (``cuda_launch.spare_counters``).
    Launch config: 1-D grid-stride, one thread per key."""
    keys, old, deltas, live_h, live_l, heavy, over, to_heavy, to_light, clear, counts, hflags = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    _zero(spare, i, stride)
    while i < n:
        _phase_group(i, n, keys, old, deltas, live_h, live_l, heavy, over, to_heavy, to_light,
                     clear, counts, hflags, up, down, watch)
        i += stride


@cuda.jit(cache=True)
def _check_phase_kernel(sth, stl, io, spare, lim, n, up, down, watch):
    """:func:`_check_kernel` and :func:`_phase_kernel` in one launch, for a batch run ahead
    of its set check: each thread checks its key (violations counted in
    ``counts[N_BAD]``) and, at the first key of a group, does the phase's bookkeeping. The
    phase cannot wait for the verdict here, so a flip of ``over[x]`` is marked in
    ``flips`` at the group's first key; a batch found bad is undone by
    :func:`_unflip_kernel` (rare). ``lim``: the keys' count on the device (:func:`bounded`).
    Launch config: 1-D grid-stride, one thread per key."""
    (keys, old, deltas, live_h, live_l, heavy, over, to_heavy, to_light, clear, counts, hflags,
     flips) = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    _zero(spare, i, stride)
    n = bounded(n, lim)
    bad = 0
    while i < n:
        if _violates(sth, stl, heavy, keys[i], deltas[i]) >= 0:
            bad += 1
        flips[i] = _phase_group(i, n, keys, old, deltas, live_h, live_l, heavy, over,
                                to_heavy, to_light, clear, counts, hflags, up, down, watch)
        i += stride
    if bad:
        cuda.atomic.add(counts, N_BAD, bad)


@cuda.jit(cache=True)
def _unflip_kernel(io, lim, n):
    """Undo the ``over`` flips that :func:`_check_phase_kernel` marked (a batch its check
    found bad, or a phase run ahead and not used, changes nothing). Launch config: 1-D
    grid-stride, one thread per key."""
    keys, over, flips = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = bounded(n, lim)
    while i < n:
        if flips[i]:
            x = keys[i] >> 32
            over[x] = not over[x]
        i += stride


@cuda.jit(device=True)
def bounded(n, lim):
    """The length a kernel walks: ``n`` (its launch's length), or ``lim[0]`` when ``lim`` has
    a slot (a count known on the device only, at most ``n``: a batch whose preparation has
    not been read back yet, ``GraphEngine._apply_device``)."""
    if lim.shape[0] and lim[0] < n:
        return lim[0]
    return n


@cuda.jit(device=True)
def _zero(a, i, stride):
    """a[:] = 0, grid-stride from thread i."""
    while i < a.shape[0]:
        a[i] = 0
        i += stride


@cuda.jit(device=True)
def _phase_group(i, n, keys, old, deltas, live_h, live_l, heavy, over, to_heavy, to_light,
                 clear, counts, hflags, up, down, watch):
    """The phase's work of key i (see :func:`_phase_kernel`): its heavy flag, and at the
    first key of a group the group's bookkeeping; returns 1 where it flipped ``over[x]``."""
    x = keys[i] >> 32
    hflags[i] = 1 if heavy[x] else 0
    if i != 0 and (keys[i - 1] >> 32) == x:
        return 0
    d = live_h[x] + live_l[x]
    ins = 0
    j = i
    while j < n and (keys[j] >> 32) == x:
        o = old[j]
        if o + deltas[j] != 0:
            d += 1
        if o != 0:
            d -= 1
        if deltas[j] > 0:
            ins += 1
        j += 1
    hv = heavy[x]
    after = hv
    if hv:
        cuda.atomic.add(counts, N_HEAVY_KEYS, j - i)
        if ins:
            cuda.atomic.add(counts, N_HEAVY_INS, ins)
        if d == 0:
            clear[cuda.atomic.add(counts, N_CLEAR, 1)] = x
            after = False
        elif 0 < d < down:
            to_light[cuda.atomic.add(counts, N_TO_LIGHT, 1)] = x
            after = False
    elif d >= up:
        to_heavy[cuda.atomic.add(counts, N_TO_HEAVY, 1)] = x
        after = True
    if watch >= 0:
        now = (not after) and d > watch
        if now != over[x]:
            cuda.atomic.add(counts, D_OVER, 1 if now else -1)
            over[x] = now
            return 1
    return 0


def phase_scan(keys, old, deltas, live_h, live_l, heavy, over, up: int, down: int,
               watch: int, then=None, check=None):
    """The phase's bookkeeping on the device (see the module docstring).

    ``keys`` sorted unique packed keys, ``old`` their multiplicities before the phase,
    ``deltas`` their changes; ``live_h`` / ``live_l`` the parts' live counts per first key,
    ``heavy`` the part flags, ``over`` the auto-ε flags (updated in place when ``watch >= 0``).
    Returns ``(counts, to_heavy, to_light, clear, hflags)``: ``counts`` a host list indexed
    by :data:`N_TO_HEAVY`, :data:`N_TO_LIGHT`, :data:`N_CLEAR`, :data:`N_HEAVY_KEYS` (keys
    whose first key is heavy before the phase), :data:`D_OVER` (the change of ``n_over``),
    :data:`N_HEAVY_INS` (their positive deltas) and :data:`N_BAD`; the three selections of
    first keys in ascending order, as the CPU kernel gives them; per key, 1 where its first
    key is heavy before the phase (for :func:`split_parts`).

    ``then``: called after the launch and before the read with a zeroed device slot that the
    kernels it launches may add into (:func:`batch_total_into`); the slot's value comes back
    with the counts, as ``counts[N_THEN]``, in the same read.

    ``check``: ``(sth, stl)``, the relation's parts, to check ``(keys, deltas)`` in the same
    launch (set semantics, ``old`` presumed; :func:`_check_phase_kernel`): its violations
    come back as ``counts[N_BAD]`` in the same read, and where there are any the phase has
    changed nothing (``over`` as it was, every selection empty).
    """
    return phase_launch(keys, old, deltas, live_h, live_l, heavy, over, up, down, watch,
                        then, check).result()


def phase_launch(keys, old, deltas, live_h, live_l, heavy, over, up: int, down: int,
                 watch: int, then=None, check=None, counts=None, lim=None) -> PhaseRun:
    """:func:`phase_scan`'s launches without its read: the :class:`PhaseRun` reads (or is
    given) the counts later. ``counts``: ``N_THEN + 1`` zeroed slots to count in (e.g. next
    to a batch preparation's, for one read of both); ``lim``: a device slot with the keys'
    count, at most ``len(keys)`` (``keys``, ``old``, ``deltas`` padded behind it), for a phase
    launched before that count is read back (it needs ``check``)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:  # nothing to count (no counters taken)
        return PhaseRun(keys, over, counts, 0, watch, lim)
    if counts is None:
        counts = counters(N_THEN + 1)
    run = PhaseRun(keys, over, counts, n, watch, lim)
    run.sel = empty(n), empty(n), empty(n)
    run.hflags = empty(n)
    io = (keys, old, deltas, live_h, live_l, heavy, over, *run.sel, counts, run.hflags)
    bounds = (np.int64(up), np.int64(down), np.int64(watch))
    with spare_counters() as spare:  # the next batch's counters zeroed by this launch
        if check is not None:
            run.flips = empty(n)
            launch(_check_phase_kernel, *grid(n), *check, io + (run.flips,), spare,
                   _limit(lim), n, *bounds)
        elif lim is not None:
            raise ValueError("a phase launched before its keys' count is read needs check=")
        else:
            launch(_phase_kernel, *grid(n), io, spare, n, *bounds)
    if then is not None:
        then(counts[N_THEN:])
    return run


class PhaseRun:
    """A launched phase (:func:`phase_launch`): :meth:`result` is :func:`phase_scan`'s
    return; :meth:`undo` takes back what it changed (the auto-ε flips), for a phase run
    ahead of a batch that then goes another way."""

    def __init__(self, keys, over, counts, n: int, watch: int, lim) -> None:
        self.keys, self.over, self.counts, self.n, self.watch, self.lim = \
            keys, over, counts, n, watch, lim
        self.sel = self.hflags = self.flips = None
        self.open = True  # its flips stand until result() accepts them or undo()

    def result(self, c: list[int] | None = None) -> tuple:
        """(counts, to_heavy, to_light, clear, hflags); ``c``: the counts already read."""
        if self.n == 0:
            e = empty(0)
            return [0] * (N_THEN + 1) if c is None else list(c), e, e, e, e
        c = list(host_ints(self.counts) if c is None else c)
        if c[N_BAD]:  # nothing of the phase may stand
            self.undo()
            c[:N_BAD] = [0] * N_BAD
        self.open = False
        sel = [s[: c[slot]] for s, slot in zip(self.sel, (N_TO_HEAVY, N_TO_LIGHT, N_CLEAR))]
        xp = array_module(self.keys)
        return c, *(xp.sort(s) if s.shape[0] > 1 else s for s in sel), self.hflags

    def undo(self) -> None:
        """Restore the ``over`` flags the launch flipped (nothing else of the state changed)."""
        if self.open and self.flips is not None and self.watch >= 0:
            launch(_unflip_kernel, *grid(self.n), (self.keys, self.over, self.flips),
                   _limit(self.lim), self.n)
        self.open = False


def _limit(lim):
    """The kernels' ``lim`` argument: the device slot, or an empty array (no limit)."""
    return lim if lim is not None else nothing()


@cuda.jit(cache=True)
def _split_kernel(io, n):
    """Keys and deltas to their part, in order: key i with ``hflags[i]`` to the heavy arrays
    at ``incl[i] - 1`` (``incl`` the inclusive prefix sum of the flags), the others to the
    light arrays at ``i - incl[i]``. Launch config: 1-D grid-stride, one thread per key."""
    keys, deltas, hflags, incl, hk, hv, lk, lv = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        h = incl[i]
        if hflags[i]:
            hk[h - 1] = keys[i]
            hv[h - 1] = deltas[i]
        else:
            lk[i - h] = keys[i]
            lv[i - h] = deltas[i]
        i += stride


def split_parts(keys, deltas, hflags, n_heavy: int):
    """``(keys, deltas)`` of the heavy part (``hflags`` 1) and of the light part, each in
    the keys' order, when the host knows how many are heavy (``n_heavy``): one scan (CuPy's
    ``cumsum``) and one scatter."""
    n = keys.shape[0]
    hk, hv = empty(n_heavy), empty(n_heavy)
    lk, lv = empty(n - n_heavy), empty(n - n_heavy)
    if n:
        incl = array_module(hflags).cumsum(hflags)
        launch(_split_kernel, *grid(n), (keys, deltas, hflags, incl, hk, hv, lk, lv), n)
    return hk, hv, lk, lv



@cuda.jit(cache=True)
def _check_kernel(sth, stl, io, n, counter):
    """out[i] = the multiplicity of keys[i] in its part (``sth`` where its first key is
    heavy, else ``stl``); ``counter[0]`` counts the keys whose multiplicity plus net[i] leaves
    {0, 1}. Launch config: 1-D grid-stride, one thread per key."""
    keys, net, heavy, out = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        v = _violates(sth, stl, heavy, keys[i], net[i])
        out[i] = v if v >= 0 else -1 - v
        if v >= 0:
            cuda.atomic.add(counter, 0, 1)
        i += stride


@cuda.jit(device=True)
def _violates(sth, stl, heavy, key, net):
    """The stored multiplicity m of ``key`` in its part (``sth`` where its first key is
    heavy, else ``stl``) when m + net leaves {0, 1}, else -1 - m (negative)."""
    x = key >> 32
    if x < heavy.shape[0] and heavy[x]:
        m = get(sth, key)
    else:
        m = get(stl, key)
    after = m + net
    if after < 0 or after > 1:
        return m
    return -1 - m


def check_sets(sth, stl, heavy, keys, net, out) -> int:
    """Set-semantics check of a batch before it is applied: ``out[i]`` = the stored
    multiplicity of ``keys[i]`` (in the heavy part ``sth`` where ``heavy`` flags its first
    key, else in the light part ``stl``, as ``PartRel.get`` reads it); returns the number of
    keys whose multiplicity plus ``net[i]`` would leave {0, 1} (one 8-byte read)."""
    check_1d("keys", keys)
    n = keys.shape[0]
    if n == 0:
        return 0
    counter = counters(1)
    launch(_check_kernel, *grid(n), sth, stl, (keys, net, heavy, out), n, counter)
    return host_ints(counter)[0]


@helper
def strided_dot(ms, ws, i, stride, n):
    """Σ ms[j]·ws[j] over j = i, i + stride, ... below n: one thread's share of a
    grid-stride dot product (the count delta's first term)."""
    s = 0
    j = i
    while j < n:
        s += ms[j] * ws[j]
        j += stride
    return s


@cuda.jit(cache=True)
def _total_kernel(io, n, m, coef):
    """acc[0] += coef·Σ ms[i]·ws[i] + Σ vs[j]. Launch config: 1-D grid-stride over the longer
    of the two; one atomic per thread."""
    ms, ws, vs, acc = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    s = coef * strided_dot(ms, ws, i, stride, n)
    j = i
    while j < m:
        s += vs[j]
        j += stride
    if s != 0:
        cuda.atomic.add(acc, 0, s)


def batch_total(ms, ws, coef: int, vs) -> int:
    """``coef·Σ ms[i]·ws[i] + Σ vs[j]`` in int64 (the count delta of a batch: its pairs'
    multiplicities times their path weights, plus the wedge terms), read back once."""
    acc = counters(1)
    batch_total_into(ms, ws, coef, vs, acc)
    return host_ints(acc)[0]


def batch_total_into(ms, ws, coef: int, vs, acc) -> None:
    """:func:`batch_total` added into the zeroed device slot ``acc[0]``, not read back."""
    n, m = ms.shape[0], vs.shape[0]
    if n or m:
        launch(_total_kernel, *grid(max(n, m)), (ms, ws, vs, acc), n, m, np.int64(coef))


@cuda.jit(cache=True)
def _units_kernel(io, n):
    """acc[0] += Σ update_units over the updates. Launch config: 1-D grid-stride; one atomic
    per thread."""
    dkeys, l_live, h_live, ht_live, acc = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    s = 0
    while i < n:
        s += update_units(dkeys, i, l_live, h_live, ht_live)
        i += stride
    if s != 0:
        cuda.atomic.add(acc, 0, s)


def delta_units(dkeys, next_l_live, next_h_live, prev_ht_live) -> int:
    """The adaptive policy's work estimate of a phase's delta path (the CPU's
    ``phase_kernels.delta_units``): one launch and one read, where the NumPy formulas took
    12 CuPy calls and a read (strict stand-in)."""
    check_1d("dkeys", dkeys)
    acc = counters(1)
    n = dkeys.shape[0]
    if n:
        launch(_units_kernel, *grid(n), (dkeys, next_l_live, next_h_live, prev_ht_live, acc), n)
    return host_ints(acc)[0]


@cuda.jit(cache=True)
def _promote_kernel(io, n, cap, dense_frac, dense_min, shift):
    """The first thread of each first key's group appends the key when its row qualifies
    (see :func:`rows_to_promote`); the first keys are ``fx >> shift`` (``shift`` 32: ``fx``
    holds packed keys, unpacked here). Launch config: 1-D grid-stride, one thread per key."""
    fx, live, out, counter = io
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        x = fx[i] >> shift
        if (i == 0 or (fx[i - 1] >> shift) != x) and live[x] * dense_frac >= cap and \
                live[x] >= dense_min:
            out[cuda.atomic.add(counter, 0, 1)] = x
        i += stride


class PromoteThen:
    """:func:`rows_to_promote` of a view's sparse store for the sorted packed keys ``keys``
    just added to it (their first ids are the rows; unpacked by the kernel), launched by the
    store's update (``cuda_store.apply_updates_then``) right after the update and read back
    with its counts: a view update reads once where it read twice. The live counts it reads
    are final then (the rest of the add moves entries, not counts). ``done`` tells whether
    it ran; ``rows`` are the rows found, sorted."""

    slots = 1

    def __init__(self, keys, store, dense_frac: int, dense_min: int) -> None:
        self.fx, self.store = keys, store
        self.dense_frac, self.dense_min = dense_frac, dense_min
        self.out = self.rows = None
        self.done = False

    def launch(self, counter) -> None:
        self.out = _launch_promote(self.fx, self.store.live, counter, self.store.id_capacity,
                                   self.dense_frac, self.dense_min, shift=32)

    def got(self, values: list[int]) -> None:
        self.rows = _promoted(self.fx, self.out, values[0])
        self.done = True


def _launch_promote(fx, live, counter, cap: int, dense_frac: int, dense_min: int,
                    shift: int = 0):
    """Launch :func:`_promote_kernel` (its count into ``counter[0]``); returns its output."""
    n = fx.shape[0]
    out = empty(n)
    launch(_promote_kernel, *grid(n), (fx, live, out, counter), n, np.int64(cap),
           np.int64(dense_frac), np.int64(dense_min), np.int64(shift))
    return out


def _promoted(fx, out, k: int):
    """The ``k`` rows the promotion kernel found, sorted."""
    return array_module(fx).sort(out[:k]) if k > 1 else out[:k]


def rows_to_promote(fx, live, cap: int, dense_frac: int, dense_min: int):
    """The view part's ``rows_to_promote`` (as :func:`gpu_ivm.kernels.view_kernels.
    rows_to_promote`): one launch and one 8-byte read; the (rare) rows found are sorted."""
    if fx.shape[0] == 0:
        return empty(0)
    counter = counters(1)
    out = _launch_promote(fx, live, counter, cap, dense_frac, dense_min)
    return _promoted(fx, out, host_ints(counter)[0])
