"""Host kernels for the bookkeeping of one batch phase (``TriangleEngineBase._phase``).

A phase adds consolidated updates (sorted unique packed keys) to one relation. Around the
count kernels it needs each touched first key's degree after the batch, the keys that cross
the minor-rebalancing thresholds, and the updates split by the part (heavy or light) their
first key is in. Written with NumPy these are about fifteen array operations of a few
microseconds each, most of a small batch's host time next to its count kernels (a sliding
window's daily batch of ~150 updates takes about 0.3 ms in all); here they are two passes.
The engine calls them with NumPy arrays only (a device backend keeps its array-module code,
whose selections read their sizes in one transfer: :mod:`gpu_ivm.selection`).

>>> keys = np.array([(0 << 32) | 1, (0 << 32) | 2, (3 << 32) | 1])
>>> live_h, live_l = np.zeros(4, np.int64), np.array([2, 0, 0, 1])
>>> heavy = np.zeros(4, np.bool_)
>>> ux, deg, up, down, clear = phase_degrees(keys, np.array([1, 0, 1]), np.array([-1, 1, -1]),
...                                          live_h, live_l, heavy, 3, 1)
>>> ux.tolist(), deg.tolist(), up.tolist(), down.tolist(), clear.tolist()
([0, 3], [2, 0], [], [], [])
>>> [a.tolist() for a in split_heavy(keys, np.array([True, False, False, False]))]
[[0, 1], [2]]
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper

INT64_MAX = (1 << 63) - 1


@nb.njit(cache=True)
def phase_degrees(keys, old, deltas, live_h, live_l, heavy, up, down):
    """Per distinct first key x of ``keys`` (sorted): x, its degree after the phase (the
    stored live count plus the keys whose multiplicity leaves or reaches 0), and the
    minor-rebalancing selections: light keys whose new degree is at least ``up`` (to the heavy
    part), heavy keys whose new degree is in (0, ``down``) (to the light part), and heavy keys
    left with no tuple (their flag is cleared after the phase).

    ``old``: the keys' multiplicities before the phase; ``deltas``: their changes."""
    n = keys.shape[0]
    ux = np.empty(n, np.int64)
    deg = np.empty(n, np.int64)
    g = -1
    prev = -1
    for i in range(n):
        x = keys[i] >> 32
        if g < 0 or x != prev:
            g += 1
            ux[g] = x
            deg[g] = live_h[x] + live_l[x]
            prev = x
        o = old[i]
        deg[g] += (1 if o + deltas[i] != 0 else 0) - (1 if o != 0 else 0)
    ng = g + 1
    to_heavy = np.empty(ng, np.int64)
    to_light = np.empty(ng, np.int64)
    clear = np.empty(ng, np.int64)
    nh = 0
    nl = 0
    nc = 0
    for j in range(ng):
        x = ux[j]
        d = deg[j]
        if heavy[x]:
            if d == 0:
                clear[nc] = x
                nc += 1
            elif 0 < d < down:
                to_light[nl] = x
                nl += 1
        elif d >= up:
            to_heavy[nh] = x
            nh += 1
    return ux[:ng], deg[:ng], to_heavy[:nh], to_light[:nl], clear[:nc]


@nb.njit(cache=True)
def split_heavy(keys, heavy):
    """(indexes of the keys whose first key is heavy, indexes of the others), in order."""
    n = keys.shape[0]
    ih = np.empty(n, np.int64)
    il = np.empty(n, np.int64)
    a = 0
    b = 0
    for i in range(n):
        if heavy[keys[i] >> 32]:
            ih[a] = i
            a += 1
        else:
            il[b] = i
            b += 1
    return ih[:a], il[:b]


@nb.njit(cache=True)
def watch_lights(ux, deg, heavy, over, watch):
    """The auto-ε watch after a phase (``PartRel.track_lights``): ``over[x]`` = x light with
    degree above ``watch`` for the touched first keys ``ux`` of degrees ``deg``; returns the
    change of the number of flags set."""
    change = 0
    for j in range(ux.shape[0]):
        x = ux[j]
        now = (not heavy[x]) and deg[j] > watch
        if now != over[x]:
            change += 1 if now else -1
            over[x] = now
    return change


@nb.njit(cache=True)
def delta_units(dkeys, next_l_live, next_h_live, prev_ht_live):
    """The adaptive policy's work estimate of a phase's delta path (``AdaptivePolicy.units``):
    per update (x, y), 4 + the light row of y in Next + min(heavy row of y in Next, heavy
    column of x in Prev) + that column (:func:`update_units`; the CUDA twin,
    ``cuda_phase.delta_units``, sums the same terms on the device)."""
    total = 0
    for i in range(dkeys.shape[0]):
        total += update_units(dkeys, i, next_l_live, next_h_live, prev_ht_live)
    return total


@helper
def update_units(dkeys, i, next_l_live, next_h_live, prev_ht_live):
    """Update i's term of :func:`delta_units`."""
    x = dkeys[i] >> 32
    y = dkeys[i] & 0xFFFFFFFF
    hy = next_h_live[y]
    htx = prev_ht_live[x]
    return 4 + next_l_live[y] + min(hy, htx) + htx


def clip_threshold(t: int) -> int:
    """A degree threshold as an int64 argument (a threshold beyond int64 is never reached)."""
    return min(int(t), INT64_MAX)
