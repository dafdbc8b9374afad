"""Kernels of the bilinear views (V_RS, V_ST, V_TR; V = E_h·E_l in the graph form).

A view is three parts ``(sparse, vrow, vmat)``, passed separately (Numba's parallel
wrappers reject nested tuples): rows with large support live densely in ``vmat``
(``vrow[a]`` is a's dense row or -1), the others in the sparse sorted-run store. Heavy keys'
rows of V are often nearly dense (a hub's light neighbours reach most of the graph), and a
dense row turns each view update into one indexed add, with no sort and no search.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .lsm import LO_MASK, SENTINEL, get, run_mask, run_range


@nb.njit(cache=True, inline="always")
def vget(sparse, vrow, vmat, key):
    """V(key) for a packed key (0 if absent); the view given as its three parts."""
    a = key >> 32
    if a < vrow.shape[0]:
        r = vrow[a]
        if r >= 0:
            c = key & LO_MASK
            if c < vmat.shape[1]:
                return vmat[r, c]
            return 0
    return get(sparse, key)


@nb.njit(cache=True, inline="always")
def _emit_one(i, w, xs, ys, ms, st, left, vrow, vmat, out_keys, out_vals):
    """The view deltas of update i: dense rows updated in place, the rest written from w on;
    returns the next free output position."""
    keys = st[0]
    vals = st[1]
    nrow = vrow.shape[0]
    e = ys[i] if left else xs[i]
    mi = ms[i]
    xi = xs[i]
    yi = ys[i]
    dense_left = -1
    if left and xi < nrow:
        dense_left = vrow[xi]
    m = run_mask(st, e)
    j = 0
    while m != 0:
        if m & 1:
            lo, hi = run_range(st, j, e)
            for p in range(lo, hi):
                k = keys[p]
                z = k & LO_MASK
                if z == SENTINEL:
                    break
                v = vals[p]
                if v == 0:
                    continue
                if left:
                    if dense_left >= 0:
                        vmat[dense_left, z] += mi * v
                    else:
                        out_keys[w] = (xi << 32) | z
                        out_vals[w] = mi * v
                        w += 1
                else:
                    r = vrow[z] if z < nrow else -1
                    if r >= 0:
                        vmat[r, yi] += v * mi
                    else:
                        out_keys[w] = (z << 32) | yi
                        out_vals[w] = v * mi
                        w += 1
        m >>= 1
        j += 1
    return w


@nb.njit(cache=True)
def emit_view_deltas(xs, ys, ms, st, left, vrow, vmat, out_keys, out_vals):
    """Add the view deltas of a batch of factor updates; return the sparse remainder.

    left:  V(x, z) += m_i · st(y_i, z)   for updates (x, y, m) of the left factor
    right: V(z, y) += st(x_i, z) · m_i   for updates (x, y, m) of the right factor (st is the
           left factor transposed)
    Deltas for dense rows are added to ``vmat`` in place; the others are written to
    ``out_keys``/``out_vals`` (unsorted, possibly repeated) and their count returned.
    One thread (see ``emit_view_deltas_par`` for the partitioned parallel form).
    """
    w = 0
    for i in range(xs.shape[0]):
        w = _emit_one(i, w, xs, ys, ms, st, left, vrow, vmat, out_keys, out_vals)
    return w


@nb.njit(cache=True, parallel=True)
def emit_view_deltas_par(xs, ys, ms, st, left, vrow, vmat, ptr, out_keys, out_vals, nt):
    """``emit_view_deltas`` on all threads without atomics: thread t takes the updates whose
    target row (left: x) or target column (right: y) is congruent to t, so no two threads add
    into the same dense cell; update i writes its sparse deltas into [ptr[i], ptr[i+1]) and
    zero-fills the rest (zeros are dropped when the view is updated). ``nt``: the number of
    threads (``numba.get_num_threads()``)."""
    n = xs.shape[0]
    for t in nb.prange(nt):
        for i in range(n):
            owner = xs[i] if left else ys[i]
            if owner % nt != t:
                continue
            w = _emit_one(i, ptr[i], xs, ys, ms, st, left, vrow, vmat, out_keys, out_vals)
            while w < ptr[i + 1]:
                out_keys[w] = 0
                out_vals[w] = 0
                w += 1


@nb.njit(cache=True)
def rows_to_promote(fx, live, cap, dense_frac, dense_min):
    """The distinct first keys x of the sorted ``fx`` (repeats allowed) whose sparse rows
    grew large enough for a dense row: ``live[x] * dense_frac >= cap`` and
    ``live[x] >= dense_min``; in ascending order."""
    out = np.empty(fx.shape[0], np.int64)
    k = 0
    prev = -1
    for i in range(fx.shape[0]):
        x = fx[i]
        if x != prev:
            prev = x
            if live[x] * dense_frac >= cap and live[x] >= dense_min:
                out[k] = x
                k += 1
    return out[:k]


@nb.njit(cache=True)
def scatter_dense(keys, vals, vrow, vmat):
    """vmat[vrow[a], c] += v for packed keys (a, c) whose row is dense; returns a keep mask."""
    n = keys.shape[0]
    keep = np.ones(n, np.bool_)
    for i in range(n):
        a = keys[i] >> 32
        if a < vrow.shape[0] and vrow[a] >= 0:
            vmat[vrow[a], keys[i] & LO_MASK] += vals[i]
            keep[i] = False
    return keep





@nb.njit(cache=True)
def build_view_rows(rows, left, right, cap, dense_min, dense_frac):
    """V(a, c) = Σ_b left(a, b)·right(b, c) for the sorted first keys ``rows``, row by row.

    Gustavson's row-wise product with one dense accumulator: memory O(cap) beyond the output,
    never the (a, b, c) path list. A row whose support reaches ``dense_min`` and a
    ``1/dense_frac`` share of ``cap`` is returned dense, the others as sorted sparse entries.

    Returns ``(is_dense, dense_rows_matrix, sparse_keys, sparse_vals)``; the matrix's rows are
    the dense rows in the order of ``rows``.
    """
    lk = left[0]
    lv = left[1]
    rk = right[0]
    rv = right[1]
    acc = np.zeros(cap, np.int64)
    seen = np.zeros(cap, np.bool_)
    touched = np.empty(cap, np.int64)
    is_dense = np.zeros(rows.shape[0], np.bool_)
    dense = np.zeros((4, cap), np.int64)
    nd = 0
    sp_keys = np.empty(1024, np.int64)
    sp_vals = np.empty(1024, np.int64)
    ns = 0
    for ri in range(rows.shape[0]):
        a = rows[ri]
        nt = 0
        m1 = run_mask(left, a)
        j1 = 0
        while m1 != 0:
            if m1 & 1:
                lo1, hi1 = run_range(left, j1, a)
                for p in range(lo1, hi1):
                    b = lk[p] & LO_MASK
                    if b == SENTINEL:
                        break
                    v = lv[p]
                    if v == 0:
                        continue
                    m2 = run_mask(right, b)
                    j2 = 0
                    while m2 != 0:
                        if m2 & 1:
                            lo2, hi2 = run_range(right, j2, b)
                            for q in range(lo2, hi2):
                                c = rk[q] & LO_MASK
                                if c == SENTINEL:
                                    break
                                w = rv[q]
                                if w == 0:
                                    continue
                                if not seen[c]:
                                    seen[c] = True
                                    touched[nt] = c
                                    nt += 1
                                acc[c] += v * w
                        m2 >>= 1
                        j2 += 1
            m1 >>= 1
            j1 += 1
        nnz = 0
        for i in range(nt):
            if acc[touched[i]] != 0:
                nnz += 1
        if nnz >= dense_min and nnz * dense_frac >= cap:
            if nd == dense.shape[0]:
                grown = np.zeros((2 * nd, cap), np.int64)
                grown[:nd] = dense
                dense = grown
            for i in range(nt):
                dense[nd, touched[i]] = acc[touched[i]]
            is_dense[ri] = True
            nd += 1
        elif nnz:
            if ns + nnz > sp_keys.shape[0]:
                size = max(2 * sp_keys.shape[0], ns + nnz)
                k2 = np.empty(size, np.int64)
                v2 = np.empty(size, np.int64)
                k2[:ns] = sp_keys[:ns]
                v2[:ns] = sp_vals[:ns]
                sp_keys = k2
                sp_vals = v2
            cs = np.sort(touched[:nt])
            for i in range(nt):
                c = cs[i]
                if acc[c] != 0:
                    sp_keys[ns] = (a << 32) | c
                    sp_vals[ns] = acc[c]
                    ns += 1
        for i in range(nt):
            acc[touched[i]] = 0
            seen[touched[i]] = False
    return is_dense, dense[:nd], sp_keys[:ns], sp_vals[:ns]
