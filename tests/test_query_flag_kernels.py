"""The free-query maintenance's fused passes (kernels/query_kernels.py) against the array
formulas they replaced in ``FreeQueries`` (gpu_ivm/queries/maintain.py), written out here in
NumPy as the independent oracle: ``label_masks`` (the six labels of triangle terms matched
against each group's pattern) and ``new_flags`` (heavy flags after a phase)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import query_kernels as qk

from gpu_ivm.queries import specs as sp


def _oracle_masks(tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, patterns):
    def flag(f, v):
        return np.where(v < f.shape[0], f[np.minimum(v, f.shape[0] - 1)], 0)

    labels = (ofx, ofy, flag(nf0, ty), flag(nf1, z), flag(pf0, z), flag(pf1, tx))
    out = []
    for pat in patterns:
        ok = np.ones(tx.shape[0], bool)
        for j in range(6):
            if pat[j] != sp.ANY:
                ok &= labels[j] == pat[j]
        out.append(ok)
    return np.array(out).reshape(len(patterns), tx.shape[0])


def _packed(patterns):
    care = want = 0
    for g, pat in enumerate(patterns):
        for j, p in enumerate(pat):
            bit = 1 << (qk.LABEL_BITS * g + j)
            care |= bit if p != sp.ANY else 0
            want |= bit if p == sp.HEAVY else 0
    return care, want


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_label_masks_match_the_label_comparisons(n: int) -> None:
    rng = np.random.default_rng(40 + n)
    ids = 20
    tx, ty, z = (rng.integers(0, ids + 3, n).astype(np.int64) for _ in range(3))  # some beyond
    ofx, ofy = (rng.integers(0, 2, n).astype(np.uint8) for _ in range(2))
    nf0, nf1, pf0, pf1 = (rng.integers(0, 2, ids).astype(np.uint8) for _ in range(4))
    choices = np.array([sp.ANY, sp.LIGHT, sp.HEAVY])
    patterns = [rng.choice(choices, 6).tolist() for _ in range(qk.LABEL_GROUPS_MAX)]
    patterns[0] = [sp.ANY] * 6  # matches every term
    care, want = _packed(patterns)
    got = np.full((len(patterns), n), True)
    got[:, ::2] = False  # every slot must be written
    qk.label_masks(tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, got)
    np.testing.assert_array_equal(got, _oracle_masks(tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1,
                                                     patterns))
    if n:
        assert got[0].all()


def _oracle_flags(u, vals, ins, rem, live, flags, default, up, down):
    """The array form of ``FreeQueries._new_flags`` before the fused pass."""
    idx = np.searchsorted(u, vals)
    change = (np.bincount(idx, ins, minlength=u.shape[0])
              - np.bincount(idx, rem, minlength=u.shape[0])).astype(np.int64)
    d_old = live[u]
    d_new = d_old + change
    cur = flags[u]
    nf = cur.copy()
    nf[d_old == 0] = default
    nf[(nf == 0) & (d_new >= up)] = 1
    nf[(nf == 1) & (d_new < down) & (d_new > 0)] = 0
    after = flags.copy()
    after[u] = nf
    return after, (nf != cur) & (d_old > 0), d_new == 0


@pytest.mark.parametrize("seed", range(6))
def test_new_flags_match_the_array_form(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids, m = 40, int(rng.integers(0, 200))
    vals = rng.integers(0, ids, m).astype(np.int64)
    old = rng.integers(0, 2, m)
    new = np.where(rng.random(m) < 0.5, 1 - old, old)
    ins = ((old == 0) & (new != 0)).astype(np.int64)
    rem = ((old != 0) & (new == 0)).astype(np.int64)
    u = np.unique(vals)
    live = rng.integers(0, 12, ids).astype(np.int64)
    live[u[: u.shape[0] // 4]] = 0  # values without tuples before the phase
    flags = rng.integers(0, 2, ids).astype(np.uint8)
    default, up, down = int(seed % 2), int(rng.integers(2, 9)), int(rng.integers(1, 4))
    want_flags, want_flip, want_gone = _oracle_flags(u, vals, ins, rem, live, flags, default,
                                                     up, down)
    flip = np.zeros(u.shape[0], bool)
    gone = np.zeros(u.shape[0], bool)
    qk.new_flags(u, vals, ins, rem, live, flags, default, up, down, flip, gone)
    np.testing.assert_array_equal(flags, want_flags)
    np.testing.assert_array_equal(flip, want_flip)
    np.testing.assert_array_equal(gone, want_gone)
