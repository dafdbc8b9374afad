"""Batched kernels of the free-variable triangle queries (per-vertex, per-edge, listing).

One kernel family serves every skew-aware view of paper 001 (see ``gpu_ivm/queries/specs.py``):
a batch of updates δK(x, y) of one relation K, each with the heavy/light labels of its tuple,
is joined with the next relation N(y, z) and/or the previous relation P(z, x) of the triangle,
restricted by a label pattern. For each update the kernel walks the shortest of the candidate
lists for the third variable z — the row N(y, ·), the column P(·, x), or the list of z-values
that the pattern requires heavy in N or P — and probes the other atoms. That choice always
walks a list the paper bounds by N^ε or N^{1-ε} (digest §15.2 item 5).

Stores are the tuples of :meth:`gpu_ivm.store.ZStore.nt`; ``P`` is passed transposed (its rows
are keyed by the second variable, ``(x << 32) | z``). A pattern is an int64 array of six
entries ``[K.first, K.second, N.first, N.second, P.first, P.second]`` with -1 = any, 0 = light,
1 = heavy. Every kernel has a count pass (upper bound of the outputs per update), an emit pass
into CSR slots, and a sum pass (Σ over z, for views whose key does not contain z).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .jit import helper
from .lsm import gallop, get, lower_bound, real_end, run_mask, run_range

CHOICE_NONE = -1
CHOICE_NEXT_ROW = 0
CHOICE_PREV_ROW = 1
CHOICE_NEXT_HEAVY = 2
CHOICE_PREV_HEAVY = 3


@nb.njit(cache=True, inline="always")
def _ok(flag, want):
    return want < 0 or flag == want


@nb.njit(cache=True, inline="always")
def _flag(flags, v):
    if v < flags.shape[0]:
        return flags[v]
    return 0


@nb.njit(cache=True, inline="always")
def _deg(st, v):
    lv = st[7]
    if v < lv.shape[0]:
        return lv[v]
    return 0


@helper
def choose(x, y, fx, fy, pat, use_n, use_p, nst, n_fx, n_hl, pst, p_fy, p_hl):
    """(choice, length) of the list to walk for update (x, y) with labels (fx, fy)."""
    if not _ok(fx, pat[0]) or not _ok(fy, pat[1]):
        return CHOICE_NONE, 0
    best = CHOICE_NONE
    blen = 0
    if use_n:
        if not _ok(_flag(n_fx, y), pat[2]):
            return CHOICE_NONE, 0
        best = CHOICE_NEXT_ROW
        blen = _deg(nst, y)
    if use_p:
        if not _ok(_flag(p_fy, x), pat[5]):
            return CHOICE_NONE, 0
        d = _deg(pst, x)
        if best == CHOICE_NONE or d < blen:
            best = CHOICE_PREV_ROW
            blen = d
    if use_n and pat[3] == 1 and n_hl.shape[0] < blen:
        best = CHOICE_NEXT_HEAVY
        blen = n_hl.shape[0]
    if use_p and pat[4] == 1 and p_hl.shape[0] < blen:
        best = CHOICE_PREV_HEAVY
        blen = p_hl.shape[0]
    if blen == 0:
        return CHOICE_NONE, 0
    return best, blen


@nb.njit(cache=True, inline="always")
def _weight(x, y, z, wz, choice, use_n, use_p, pat, nst, n_fy, pst, p_fx):
    """Weight N(y,z)·P(z,x) for candidate z (``wz``: the value read from the walked row)."""
    w = 1
    if use_n:
        if not _ok(_flag(n_fy, z), pat[3]):
            return 0
        if choice == CHOICE_NEXT_ROW:
            wn = wz
        else:
            wn = get(nst, (y << 32) | z)
        if wn == 0:
            return 0
        w = wn
    if use_p:
        if not _ok(_flag(p_fx, z), pat[4]):
            return 0
        if choice == CHOICE_PREV_ROW:
            wp = wz
        else:
            wp = get(pst, (x << 32) | z)
        if wp == 0:
            return 0
        w = w * wp
    return w


@helper
def _merge(k1, v1, lo1, hi1, k2, v2, lo2, hi2, m, pat, n_fy, p_fx, emit, w_out, out_z, out_w):
    """Intersect two sorted single-row ranges on z (low 32 bits): merge when the lengths are
    comparable, else gallop the longer with the shorter's entries (O(min·log(max/min)));
    emit (z, m·v1·v2) from w_out on, or return the sum. Range 1 is N(y, ·), 2 is P(·, x)."""
    total = 0
    n1 = hi1 - lo1
    n2 = hi2 - lo2
    if n1 <= 0 or n2 <= 0:
        return w_out, 0
    if n1 * 8 < n2 or n2 * 8 < n1:
        swap = n2 < n1
        if swap:
            k1, v1, lo1, hi1, k2, v2, lo2, hi2 = k2, v2, lo2, hi2, k1, v1, lo1, hi1
        base = k2[lo2] & ~0xFFFFFFFF
        p = lo2
        for i in range(lo1, hi1):
            a = v1[i]
            if a == 0:
                continue
            t = base | (k1[i] & 0xFFFFFFFF)
            p = gallop(k2, p, hi2, t)
            if p >= hi2:
                break
            if k2[p] == t and v2[p] != 0:
                z = t & 0xFFFFFFFF
                if _ok(_flag(n_fy, z), pat[3]) and _ok(_flag(p_fx, z), pat[4]):
                    if emit:
                        out_z[w_out] = z
                        out_w[w_out] = m * a * v2[p]
                        w_out += 1
                    else:
                        total += a * v2[p]
        return w_out, total
    i = lo1
    j = lo2
    while i < hi1 and j < hi2:
        c1 = k1[i] & 0xFFFFFFFF
        c2 = k2[j] & 0xFFFFFFFF
        if c1 < c2:
            i += 1
        elif c2 < c1:
            j += 1
        else:
            a = v1[i]
            b = v2[j]
            if a != 0 and b != 0 and _ok(_flag(n_fy, c1), pat[3]) and \
                    _ok(_flag(p_fx, c1), pat[4]):
                if emit:
                    out_z[w_out] = c1
                    out_w[w_out] = m * a * b
                    w_out += 1
                else:
                    total += a * b
            i += 1
            j += 1
    return w_out, total


@helper
def _intersect(x, y, m, pat, nst, n_fy, pst, p_fx, emit, base, out_z, out_w):
    """Σ_z N(y,z)·P(z,x) (or the emitted terms) by merging the two rows over all run pairs."""
    w_out = base
    total = 0
    k1 = nst[0]
    v1 = nst[1]
    k2 = pst[0]
    v2 = pst[1]
    m1 = run_mask(nst, y)
    m2full = run_mask(pst, x)
    if m1 == 0 or m2full == 0:
        return 0
    j1 = 0
    while m1 != 0:
        if m1 & 1:
            lo1, hi1 = run_range(nst, j1, y)
            hi1 = real_end(k1, lo1, hi1, y)
            if hi1 > lo1:
                m2 = m2full
                j2 = 0
                while m2 != 0:
                    if m2 & 1:
                        lo2, hi2 = run_range(pst, j2, x)
                        hi2 = real_end(k2, lo2, hi2, x)
                        w_out, t = _merge(k1, v1, lo1, hi1, k2, v2, lo2, hi2, m, pat, n_fy,
                                          p_fx, emit, w_out, out_z, out_w)
                        total += t
                    m2 >>= 1
                    j2 += 1
        m1 >>= 1
        j1 += 1
    if emit:
        return w_out - base
    return total


@helper
def _walk(i, x, y, m, choice, use_n, use_p, pat, nst, n_fy, n_hl, pst, p_fx, p_hl,
          emit, base, out_z, out_w):
    """Walk the chosen list of update i; emit (z, m·w) at out[base...] or return the sum."""
    if use_n and use_p and (choice == CHOICE_NEXT_ROW or choice == CHOICE_PREV_ROW):
        return _intersect(x, y, m, pat, nst, n_fy, pst, p_fx, emit, base, out_z, out_w)
    w_out = base
    total = 0
    if choice == CHOICE_NEXT_HEAVY or choice == CHOICE_PREV_HEAVY:
        hl = n_hl if choice == CHOICE_NEXT_HEAVY else p_hl
        for t in range(hl.shape[0]):
            z = hl[t]
            w = _weight(x, y, z, 0, choice, use_n, use_p, pat, nst, n_fy, pst, p_fx)
            if w != 0:
                if emit:
                    out_z[w_out] = z
                    out_w[w_out] = m * w
                    w_out += 1
                else:
                    total += w
    else:
        st = nst if choice == CHOICE_NEXT_ROW else pst
        r = y if choice == CHOICE_NEXT_ROW else x
        keys = st[0]
        vals = st[1]
        mask = run_mask(st, r)
        j = 0
        while mask != 0:
            if mask & 1:
                lo, hi = run_range(st, j, r)
                hi = real_end(keys, lo, hi, r)
                for q in range(lo, hi):
                    v = vals[q]
                    if v == 0:
                        continue
                    z = keys[q] & 0xFFFFFFFF
                    w = _weight(x, y, z, v, choice, use_n, use_p, pat, nst, n_fy, pst, p_fx)
                    if w != 0:
                        if emit:
                            out_z[w_out] = z
                            out_w[w_out] = m * w
                            w_out += 1
                        else:
                            total += w
            mask >>= 1
            j += 1
    if emit:
        return w_out - base
    return total


@nb.njit(cache=True, parallel=True)
def plan(xs, ys, fxs, fys, pat, use_n, use_p, nst, n_fx, n_hl, pst, p_fy, p_hl,
         choice, length):
    """Count pass: the list each update walks and its length (an upper bound of its outputs)."""
    for i in nb.prange(xs.shape[0]):
        c, ln = choose(xs[i], ys[i], fxs[i], fys[i], pat, use_n, use_p, nst, n_fx, n_hl,
                       pst, p_fy, p_hl)
        choice[i] = c
        length[i] = ln


@nb.njit(cache=True, parallel=True)
def emit(xs, ys, ms, choice, ptr, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl,
         out_z, out_w, count):
    """Emit pass: (z, m·N(y,z)·P(z,x)) of update i into out[ptr[i]:ptr[i] + count[i]]."""
    for i in nb.prange(xs.shape[0]):
        c = choice[i]
        if c < 0:
            count[i] = 0
            continue
        count[i] = _walk(i, xs[i], ys[i], ms[i], c, use_n, use_p, pat, nst, n_fy, n_hl,
                         pst, p_fx, p_hl, True, ptr[i], out_z, out_w)


@nb.njit(cache=True, parallel=True)
def sums(xs, ys, choice, pat, use_n, use_p, nst, n_fy, n_hl, pst, p_fx, p_hl, out):
    """Sum pass: out[i] = Σ_z N(y,z)·P(z,x) over the pattern (the update's m not applied)."""
    dummy_z = np.empty(0, np.int64)
    dummy_w = np.empty(0, np.int64)
    for i in nb.prange(xs.shape[0]):
        c = choice[i]
        if c < 0:
            out[i] = 0
            continue
        out[i] = _walk(i, xs[i], ys[i], 1, c, use_n, use_p, pat, nst, n_fy, n_hl,
                       pst, p_fx, p_hl, False, 0, dummy_z, dummy_w)


@nb.njit(cache=True)
def compact(ptr, count, out_z, out_w, keep_idx, keep_z, keep_w):
    """Gather the emitted slots (CSR with actual counts) into dense arrays; returns n."""
    w = 0
    for i in range(count.shape[0]):
        base = ptr[i]
        for t in range(count[i]):
            keep_idx[w] = i
            keep_z[w] = out_z[base + t]
            keep_w[w] = out_w[base + t]
            w += 1
    return w


@helper
def pair_sum_one(x, rst, r_fy, r_want_y, tst, t_fx, t_want_x, sst):
    """Σ_{b,c} R(x,b)·S(b,c)·T(c,x) over b with R-flag r_fy[b] == r_want_y and c with
    T-flag t_fx[c] == t_want_x (``rst``: R rows by A; ``tst``: T transposed, rows by A)."""
    total = 0
    rk = rst[0]
    rv = rst[1]
    tk = tst[0]
    tv = tst[1]
    m1 = run_mask(rst, x)
    j1 = 0
    while m1 != 0:
        if m1 & 1:
            lo1, hi1 = run_range(rst, j1, x)
            hi1 = real_end(rk, lo1, hi1, x)
            for q1 in range(lo1, hi1):
                a = rv[q1]
                if a == 0:
                    continue
                b = rk[q1] & 0xFFFFFFFF
                if _flag(r_fy, b) != r_want_y:
                    continue
                m2 = run_mask(tst, x)
                j2 = 0
                while m2 != 0:
                    if m2 & 1:
                        lo2, hi2 = run_range(tst, j2, x)
                        hi2 = real_end(tk, lo2, hi2, x)
                        for q2 in range(lo2, hi2):
                            t = tv[q2]
                            if t == 0:
                                continue
                            c = tk[q2] & 0xFFFFFFFF
                            if _flag(t_fx, c) != t_want_x:
                                continue
                            s = get(sst, (b << 32) | c)
                            if s != 0:
                                total += a * s * t
                    m2 >>= 1
                    j2 += 1
        m1 >>= 1
        j1 += 1
    return total


@nb.njit(cache=True, parallel=True)
def pair_sums(xs, rst, r_fy, r_want_y, tst, t_fx, t_want_x, sst, out):
    """out[i] = :func:`pair_sum_one` of xs[i]: the (LH)∗(HL) part of Δ1(x) (both rows short:
    x is light)."""
    for i in nb.prange(xs.shape[0]):
        out[i] = pair_sum_one(xs[i], rst, r_fy, r_want_y, tst, t_fx, t_want_x, sst)


#: labels per group in :func:`label_masks`' packed ``care`` and ``want`` words
LABEL_BITS = 6
#: groups one packed word holds (six bits each in an int64)
LABEL_GROUPS_MAX = 10


@nb.njit(cache=True, inline="always")
def _label_ok(label, care, want, j):
    """Label j satisfies the pattern: not cared about (bit j of ``care`` clear), or equal to
    bit j of ``want``."""
    return (care >> j) & 1 == 0 or label == (want >> j) & 1


@helper
def label_match(i, tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, out):
    """out[g, i] for every group g: whether the six labels of triangle term i match group g's
    pattern. The labels are the update's (ofx[i], ofy[i]), N's flags of y and z and P's flags
    of z and x (``nf0[ty[i]]``, ``nf1[z[i]]``, ``pf0[z[i]]``, ``pf1[tx[i]]``; 0 beyond a flag
    array). Group g's six pattern entries are bits 6g .. 6g + 5 of ``care`` (a label it reads)
    and ``want`` (HEAVY where it reads one): ``label == pattern`` for every label it reads,
    the rule of ``FreeQueries._classify``."""
    x = tx[i]
    y = ty[i]
    c = z[i]
    l0 = ofx[i]
    l1 = ofy[i]
    l2 = _flag(nf0, y)
    l3 = _flag(nf1, c)
    l4 = _flag(pf0, c)
    l5 = _flag(pf1, x)
    for g in range(out.shape[0]):
        cg = (care >> (LABEL_BITS * g)) & 63
        wg = (want >> (LABEL_BITS * g)) & 63
        out[g, i] = (_label_ok(l0, cg, wg, 0) and _label_ok(l1, cg, wg, 1)
                     and _label_ok(l2, cg, wg, 2) and _label_ok(l3, cg, wg, 3)
                     and _label_ok(l4, cg, wg, 4) and _label_ok(l5, cg, wg, 5))


@nb.njit(cache=True, parallel=True)
def label_masks(tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, out):
    """Every group's mask of triangle terms in one pass (:func:`label_match` per term; ``out``
    is (groups, terms) of bool). Where the labels were gathered and compared group by group,
    ten to twenty array operations, on a device each a CuPy call."""
    for i in nb.prange(tx.shape[0]):
        label_match(i, tx, ty, z, ofx, ofy, nf0, nf1, pf0, pf1, care, want, out)


@helper
def new_flag_one(j, u, change, live, flags, default, up, down, flip, gone):
    """The heavy flag after a phase of the touched value ``u[j]`` (its degree changes by
    ``change[j]``), written into ``flags``; flip[j]: the flag changed on a value that had
    tuples, gone[j]: the value has none left. The rule of ``FreeQueries._phase``: a value
    without tuples before takes ``default``; a light value at degree ``up`` or more becomes
    heavy; a heavy one below ``down`` (and above 0) becomes light."""
    v = u[j]
    d_old = live[v] if v < live.shape[0] else 0
    d_new = d_old + change[j]
    cur = flags[v]
    f = default if d_old == 0 else cur
    if f == 0 and d_new >= up:
        f = 1
    if f == 1 and d_new < down and d_new > 0:
        f = 0
    flags[v] = f
    flip[j] = f != cur and d_old > 0
    gone[j] = d_new == 0


@nb.njit(cache=True)
def new_flags(u, vals, ins, rem, live, flags, default, up, down, flip, gone):
    """:func:`new_flag_one` for every value of ``u`` (sorted unique, the values of ``vals``),
    each value's degree change being Σ ins - Σ rem over its positions in ``vals``. One pass
    over ``vals`` and one over ``u``, where the array form took about twenty operations (on a
    device each a CuPy call)."""
    change = np.zeros(u.shape[0], np.int64)
    for i in range(vals.shape[0]):
        change[lower_bound(u, 0, u.shape[0], vals[i])] += ins[i] - rem[i]
    for j in range(u.shape[0]):
        new_flag_one(j, u, change, live, flags, default, up, down, flip, gone)
