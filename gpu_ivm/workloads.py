"""Deterministic workloads: R-MAT graphs, mixed insert/delete streams, celebrity churn,
sliding windows.

Everything here is vectorized numpy (no Python loop over edges) and fully determined by its
arguments and ``seed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from gpu_ivm.errors import InputError

__all__ = ["rmat_edges", "MixedStream", "mixed_stream", "CelebrityChurn", "celebrity_churn",
           "sliding_window_stream"]


def _dedup_sorted(keys: np.ndarray) -> np.ndarray:
    """Distinct values of an already sorted array."""
    if keys.shape[0] == 0:
        return keys
    keep = np.empty(keys.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def rmat_edges(scale: int, edge_factor: int = 16, *, seed: int = 0, a: float = 0.57,
               b: float = 0.19, c: float = 0.19,
               noise: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Graph500-style R-MAT graph as a simple undirected edge set.

    ``edge_factor * 2**scale`` edges are drawn by choosing, for each of the ``scale`` bits, a
    quadrant with probabilities ``a, b, c, d = 1 - a - b - c`` (``b``: column bit set, ``c``:
    row bit set, ``d``: both). Vertex labels are then randomly permuted (so hubs are not the
    low ids), self-loops and duplicates are dropped, and the order is shuffled.

    Parameters
    ----------
    scale : int
        ``log2`` of the number of vertex labels (ids are in ``[0, 2**scale)``).
    edge_factor : int, default 16
        Edges generated per vertex label, before removing self-loops and duplicates.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    a, b, c : float
        Quadrant probabilities (Graph500 defaults 0.57, 0.19, 0.19).
    noise : float, default 0.0
        Optional Graph500/SKG-style noise: if positive, at every bit level the probabilities
        are perturbed by a factor ``1 +- noise * u`` (``u`` uniform in [0, 1), one draw per
        level) and renormalized, which smooths the degree distribution. Off by default.

    Returns
    -------
    src, dst : numpy.ndarray of int64
        Each undirected edge once, ``src < dst``, in random order.

    Examples
    --------
    >>> s, d = rmat_edges(8, seed=1)
    >>> bool((s < d).all()), len(s) == len(set(zip(s.tolist(), d.tolist())))
    (True, True)
    >>> s2, d2 = rmat_edges(8, seed=1)
    >>> bool((s == s2).all() and (d == d2).all())
    True
    """
    scale = int(scale)
    if scale < 1 or scale > 31:
        raise InputError("scale must be in [1, 31]")
    d_ = 1.0 - a - b - c
    if min(a, b, c, d_) < 0:
        raise InputError("R-MAT probabilities must be non-negative and sum to at most 1")
    m = int(edge_factor) << scale
    rng = np.random.default_rng(seed)
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    r = np.empty(m, dtype=np.float32)
    row = np.empty(m, dtype=bool)
    col = np.empty(m, dtype=bool)
    tmp = np.empty(m, dtype=bool)
    for _ in range(scale):
        pa, pb, pc, pd = a, b, c, d_
        if noise > 0:
            u = rng.random()
            sign = 1.0 if rng.random() < 0.5 else -1.0
            pa *= 1 - sign * noise * u
            pd *= 1 - sign * noise * u
            pb *= 1 + sign * noise * u
            pc *= 1 + sign * noise * u
            tot = pa + pb + pc + pd
            pa, pb, pc = pa / tot, pb / tot, pc / tot
        rng.random(dtype=np.float32, out=r)
        # quadrants: [0, a) -> (0,0), [a, a+b) -> (0,1), [a+b, a+b+c) -> (1,0), rest -> (1,1)
        np.greater_equal(r, np.float32(pa + pb), out=row)
        np.greater_equal(r, np.float32(pa), out=col)
        np.less(r, np.float32(pa + pb), out=tmp)
        np.logical_and(col, tmp, out=col)
        np.greater_equal(r, np.float32(pa + pb + pc), out=tmp)
        np.logical_or(col, tmp, out=col)
        src <<= 1
        dst <<= 1
        src |= row
        dst |= col
    del r, row, col, tmp
    perm = rng.permutation(1 << scale).astype(np.int64)
    src = perm[src]
    dst = perm[dst]
    lo = np.minimum(src, dst)
    hi = np.maximum(src, dst)
    keep = lo != hi
    keys = (lo[keep] << scale) | hi[keep]
    del src, dst, lo, hi, keep
    keys.sort()
    keys = _dedup_sorted(keys)
    rng.shuffle(keys)
    mask = (1 << scale) - 1
    return keys >> scale, keys & mask


@dataclass
class MixedStream:
    """A deterministic stream of valid insert/delete batches over a pool of candidate edges.

    The pool is an R-MAT edge set (``pool_src < pool_dst``, shuffled). The base graph is the
    first ``n_base`` pool edges; :meth:`batches` yields ``n_batches`` batches of exactly
    ``batch_size`` rows: about ``delete_fraction`` deletes, drawn uniformly among the edges
    present at that moment, and inserts of absent edges (never-inserted pool edges first, in
    pool order, then uniformly among previously deleted ones). Applied in order under set
    semantics every batch is valid: no insert of a present edge, no delete of an absent one,
    no edge twice in one batch.

    Attributes
    ----------
    pool_src, pool_dst : numpy.ndarray of int64
        Every edge the stream can touch.
    n_base : int
        Number of pool edges in the base graph.
    batch_size, n_batches : int
        Shape of the stream.
    delete_fraction : float
        Target share of deletes per batch.
    seed : int
        Seed of the batch generator.

    Examples
    --------
    >>> st = mixed_stream(8, batch_size=50, n_batches=3, seed=2)
    >>> [len(bt["src"]) for bt in st.batches()]
    [50, 50, 50]
    >>> fs, fd = st.final_edges()
    >>> len(fs) == len(st.base_src)  # half of each batch inserts, half deletes
    True
    """

    pool_src: np.ndarray
    pool_dst: np.ndarray
    n_base: int
    batch_size: int
    n_batches: int
    delete_fraction: float = 0.5
    seed: int = 0
    _final: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def base_src(self) -> np.ndarray:
        """Sources of the base graph (a view into the pool)."""
        return self.pool_src[: self.n_base]

    @property
    def base_dst(self) -> np.ndarray:
        """Destinations of the base graph (a view into the pool)."""
        return self.pool_dst[: self.n_base]

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self) -> Iterator[dict]:
        return self.batches()

    def _index_batches(self, present: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(delete_idx, insert_idx)`` pool indices per batch, updating ``present``."""
        pool = present.shape[0]
        rng = np.random.default_rng([int(self.seed), 0x5EED])
        ever = present.copy()  # ever present: absent & ever => previously deleted
        next_cand = self.n_base  # never-present candidates are pool[next_cand:]
        n_present = int(self.n_base)
        bs = int(self.batch_size)
        for _ in range(self.n_batches):
            n_del = min(int(round(bs * self.delete_fraction)), n_present)
            n_ins = bs - n_del
            if n_ins > pool - n_present:
                n_ins = pool - n_present
                n_del = bs - n_ins
            present_idx = np.flatnonzero(present)
            del_idx = present_idx[rng.choice(present_idx.shape[0], n_del, replace=False)]
            n_new = min(n_ins, pool - next_cand)
            ins_idx = np.arange(next_cand, next_cand + n_new, dtype=np.int64)
            next_cand += n_new
            if n_new < n_ins:
                old_idx = np.flatnonzero(~present & ever)
                pick = rng.choice(old_idx.shape[0], n_ins - n_new, replace=False)
                ins_idx = np.concatenate([ins_idx, old_idx[pick]])
            present[del_idx] = False
            present[ins_idx] = True
            ever[ins_idx] = True
            n_present += n_ins - n_del
            yield del_idx, ins_idx

    def batches(self) -> Iterator[dict]:
        """Yield the batches: dicts of int64 arrays ``src``, ``dst``, ``sign`` (+1 / -1).

        Every call replays the same deterministic sequence. Rows are in random order.
        """
        pool = self.pool_src.shape[0]
        if self.batch_size > pool:
            raise InputError(f"batch_size {self.batch_size} exceeds the pool size {pool}")
        present = np.zeros(pool, dtype=bool)
        present[: self.n_base] = True
        rng = np.random.default_rng([int(self.seed), 0x0BA7])
        for del_idx, ins_idx in self._index_batches(present):
            idx = np.concatenate([del_idx, ins_idx])
            sign = np.concatenate([np.full(del_idx.shape[0], -1, dtype=np.int64),
                                   np.ones(ins_idx.shape[0], dtype=np.int64)])
            order = rng.permutation(idx.shape[0])
            idx = idx[order]
            yield {"src": self.pool_src[idx], "dst": self.pool_dst[idx], "sign": sign[order]}
        self._final = present

    def final_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edge set after applying every batch in order (pool order)."""
        if self._final is None:
            pool = self.pool_src.shape[0]
            if self.batch_size > pool:
                raise InputError(f"batch_size {self.batch_size} exceeds the pool size {pool}")
            present = np.zeros(pool, dtype=bool)
            present[: self.n_base] = True
            for _ in self._index_batches(present):
                pass
            self._final = present
        return self.pool_src[self._final], self.pool_dst[self._final]


def mixed_stream(scale: int, *, edge_factor: int = 16, batch_size: int, n_batches: int,
                 delete_fraction: float = 0.5, base_fraction: float = 0.9,
                 seed: int = 0) -> MixedStream:
    """Mixed insert/delete stream over an R-MAT graph.

    Parameters
    ----------
    scale, edge_factor : int
        Passed to :func:`rmat_edges` to build the pool of candidate edges.
    batch_size, n_batches : int
        Rows per batch and number of batches.
    delete_fraction : float, default 0.5
        Share of deletes in each batch (rounded; fewer if too few edges are present).
    base_fraction : float, default 0.9
        Share of the pool in the base graph; the rest are insert candidates.
    seed : int, default 0
        Seeds both the R-MAT pool and the batch choices.

    Returns
    -------
    MixedStream

    Examples
    --------
    >>> st = mixed_stream(6, batch_size=10, n_batches=2, seed=0)
    >>> b = next(st.batches())
    >>> sorted(b), int((b["sign"] == -1).sum())
    (['dst', 'sign', 'src'], 5)
    """
    if not 0.0 <= delete_fraction <= 1.0:
        raise InputError("delete_fraction must be in [0, 1]")
    if not 0.0 <= base_fraction <= 1.0:
        raise InputError("base_fraction must be in [0, 1]")
    if batch_size < 0 or n_batches < 0:
        raise InputError("batch_size and n_batches must be non-negative")
    src, dst = rmat_edges(scale, edge_factor, seed=seed)
    n_base = int(base_fraction * src.shape[0])
    return MixedStream(src, dst, n_base, int(batch_size), int(n_batches),
                       float(delete_fraction), int(seed))


@dataclass
class CelebrityChurn:
    """An R-MAT graph plus a few "celebrity" vertices of very high degree, and a stream of
    batches that toggle edges among the celebrities (the adversarial case of first-order IVM:
    every update joins two vertices of degree far above √N).

    The base graph is the R-MAT edge set on ids ``[0, 2**scale)``, each celebrity (ids
    ``2**scale + i``) joined to ``celebrity_degree`` distinct R-MAT vertices, and each pair of
    celebrities joined with probability 1/2. Every batch toggles ``batch_size`` distinct
    celebrity pairs drawn uniformly: a present edge is deleted, an absent one inserted, so
    every batch is valid under set semantics when applied in order.

    Attributes
    ----------
    base_src, base_dst : numpy.ndarray of int64
        The base graph, each undirected edge once (``src < dst``).
    celebrities : numpy.ndarray of int64
        The celebrity ids.
    pair_src, pair_dst : numpy.ndarray of int64
        Every celebrity pair (``src < dst``), the edges the batches toggle.
    pair_present : numpy.ndarray of bool
        Which pairs the base graph holds.
    batch_size, n_batches, seed : int
        Shape of the stream and seed of the toggles.

    Examples
    --------
    >>> st = celebrity_churn(8, n_celebrities=6, celebrity_degree=40, batch_size=5,
    ...                      n_batches=3, seed=1)
    >>> [len(b["src"]) for b in st.batches()]
    [5, 5, 5]
    >>> deg = np.bincount(np.r_[st.base_src, st.base_dst])
    >>> bool((deg[st.celebrities] >= 40).all())
    True
    """

    base_src: np.ndarray
    base_dst: np.ndarray
    celebrities: np.ndarray
    pair_src: np.ndarray
    pair_dst: np.ndarray
    pair_present: np.ndarray
    batch_size: int
    n_batches: int
    seed: int = 0

    @property
    def n_base(self) -> int:
        """Edges of the base graph."""
        return int(self.base_src.shape[0])

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self) -> Iterator[dict]:
        return self.batches()

    def _toggles(self) -> Iterator[np.ndarray]:
        rng = np.random.default_rng([int(self.seed), 0xCE1E])
        for _ in range(self.n_batches):
            yield rng.choice(self.pair_src.shape[0], self.batch_size, replace=False)

    def batches(self) -> Iterator[dict]:
        """Yield the batches: dicts of int64 arrays ``src``, ``dst``, ``sign`` (+1 / -1);
        every call replays the same sequence."""
        present = self.pair_present.copy()
        for idx in self._toggles():
            sign = np.where(present[idx], -1, 1).astype(np.int64)
            present[idx] = ~present[idx]
            yield {"src": self.pair_src[idx], "dst": self.pair_dst[idx], "sign": sign}

    def final_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edge set after every batch: the base graph with the celebrity pairs toggled."""
        present = self.pair_present.copy()
        for idx in self._toggles():
            present[idx] = ~present[idx]
        other = ~self._is_pair(self.base_src, self.base_dst)
        return (np.concatenate([self.base_src[other], self.pair_src[present]]),
                np.concatenate([self.base_dst[other], self.pair_dst[present]]))

    def _is_pair(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        first = int(self.celebrities[0]) if self.celebrities.shape[0] else 0
        return (src >= first) & (dst >= first) if self.celebrities.shape[0] else \
            np.zeros(src.shape[0], bool)


def celebrity_churn(scale: int, *, n_celebrities: int = 64, celebrity_degree: int = 40_000,
                    batch_size: int = 1000, n_batches: int = 30, edge_factor: int = 16,
                    seed: int = 0) -> CelebrityChurn:
    """Celebrity churn over an R-MAT graph (see :class:`CelebrityChurn`).

    Parameters
    ----------
    scale, edge_factor : int
        The R-MAT graph (:func:`rmat_edges`, same ``seed``).
    n_celebrities : int, default 64
        Vertices added with very high degree (at least 2).
    celebrity_degree : int, default 40,000
        R-MAT vertices each celebrity is joined to (at most ``2**scale``); its degree is this
        plus its celebrity neighbours.
    batch_size, n_batches : int
        Toggles per batch (at most the number of pairs, n·(n-1)/2) and number of batches.
    seed : int, default 0
        Seeds the graph, the celebrities' neighbours, the base pairs and the toggles.

    Examples
    --------
    >>> st = celebrity_churn(6, n_celebrities=4, celebrity_degree=10, batch_size=6,
    ...                      n_batches=2, seed=3)
    >>> st.pair_src.shape[0], st.celebrities.tolist()
    (6, [64, 65, 66, 67])
    """
    n_cel, deg = int(n_celebrities), int(celebrity_degree)
    n_pairs = n_cel * (n_cel - 1) // 2
    if n_cel < 2:
        raise InputError("n_celebrities must be at least 2")
    if not 0 <= deg <= (1 << int(scale)):
        raise InputError(f"celebrity_degree must be in [0, 2**scale = {1 << int(scale)}]")
    if not 0 <= batch_size <= n_pairs or n_batches < 0:
        raise InputError(f"batch_size must be in [0, {n_pairs}] (the celebrity pairs) and "
                         "n_batches non-negative")
    src, dst = rmat_edges(scale, edge_factor, seed=seed)
    rng = np.random.default_rng([int(seed), 0xCE1EB])
    n = 1 << int(scale)
    cel = n + np.arange(n_cel, dtype=np.int64)
    # each celebrity's neighbours: deg distinct R-MAT vertices (the first deg of a permutation)
    fans = np.argsort(rng.random((n_cel, n)), axis=1)[:, :deg].astype(np.int64) if deg else \
        np.zeros((n_cel, 0), np.int64)
    iu, ju = np.triu_indices(n_cel, k=1)
    pair_src, pair_dst = cel[iu], cel[ju]
    present = rng.random(n_pairs) < 0.5
    base_src = np.concatenate([src, fans.ravel(), pair_src[present]])
    base_dst = np.concatenate([dst, np.repeat(cel, deg), pair_dst[present]])
    return CelebrityChurn(base_src, base_dst, cel, pair_src, pair_dst, present,
                          int(batch_size), int(n_batches), int(seed))


def sliding_window_stream(src: np.ndarray, dst: np.ndarray, t: np.ndarray, *, window: int,
                          step: int, drain: bool = False) -> Iterator[dict]:
    """Replay a temporal edge list (SNAP ``u v t``) as a sliding window of undirected edges.

    Rows are stable-sorted by ``t`` and self-loops dropped. An undirected edge is present at
    time ``now`` while at least one of its occurrences has a time in ``(now - window, now]``
    (multiset semantics). The clock starts at the first time stamp and advances by ``step``;
    each step yields one batch of the edges that became present (``sign`` +1) or absent
    (``sign`` -1) during the step. Each edge appears at most once per batch and every batch is
    valid under set semantics when applied in order. Empty batches are yielded too.

    Parameters
    ----------
    src, dst : array_like of int
        Endpoints (vertex keys).
    t : array_like of int or float
        Time stamps.
    window : int
        Window length (same unit as ``t``), positive.
    step : int
        Clock advance per batch, positive.
    drain : bool, default False
        If True, keep stepping after the last time stamp until the window is empty.

    Yields
    ------
    dict
        ``{"src", "dst", "sign"}`` int64 arrays, ``src < dst``, sorted by ``(src, dst)``.

    Examples
    --------
    >>> import numpy as np
    >>> batches = sliding_window_stream(np.array([1, 2, 1]), np.array([2, 1, 3]),
    ...                                 np.array([0, 1, 5]), window=3, step=2)
    >>> [(b["src"].tolist(), b["dst"].tolist(), b["sign"].tolist()) for b in batches]
    [([1], [2], [1]), ([], [], []), ([1], [2], [-1]), ([1], [3], [1])]
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    t = np.asarray(t)
    if not src.shape == dst.shape == t.shape or src.ndim != 1:
        raise InputError("src, dst and t must be 1-d arrays of equal length")
    if window <= 0 or step <= 0:
        raise InputError("window and step must be positive")
    src = src.astype(np.int64, copy=False)
    dst = dst.astype(np.int64, copy=False)
    keep = src != dst
    order = np.argsort(t[keep], kind="stable")
    lo = np.minimum(src, dst)[keep][order]
    hi = np.maximum(src, dst)[keep][order]
    ts = t[keep][order]
    if ts.shape[0] == 0:
        return
    # dense edge ids for the undirected pairs
    verts = np.sort(np.concatenate([lo, hi]))
    verts = _dedup_sorted(verts)
    nv = verts.shape[0]
    pair = np.searchsorted(verts, lo) * nv + np.searchsorted(verts, hi)
    keys = _dedup_sorted(np.sort(pair))
    eid = np.searchsorted(keys, pair)
    e_src = verts[keys // nv]
    e_dst = verts[keys % nv]
    # clock ticks: now_k = t0 + k * step, until every event is in (and optionally drained)
    t0 = ts[0]
    t_last = ts[-1] + (window if drain else 0)
    n_steps = int(np.ceil((t_last - t0) / step)) + 1
    now = t0 + step * np.arange(n_steps)
    prev = np.concatenate([[now[0] - step], now[:-1]])
    # events entering: t in (prev, now]; events leaving: t in (prev - window, now - window]
    in_a = np.searchsorted(ts, prev, side="right")
    in_b = np.searchsorted(ts, now, side="right")
    out_a = np.searchsorted(ts, prev - window, side="right")
    out_b = np.searchsorted(ts, now - window, side="right")
    cnt = np.zeros(keys.shape[0], dtype=np.int64)
    for k in range(n_steps):
        ids_in = eid[in_a[k]:in_b[k]]
        ids_out = eid[out_a[k]:out_b[k]]
        if ids_in.shape[0] == 0 and ids_out.shape[0] == 0:
            empty = np.empty(0, dtype=np.int64)
            yield {"src": empty, "dst": empty.copy(), "sign": empty.copy()}
            continue
        touched = _dedup_sorted(np.sort(np.concatenate([ids_in, ids_out])))
        before = cnt[touched] > 0
        np.add.at(cnt, ids_in, 1)
        np.subtract.at(cnt, ids_out, 1)
        after = cnt[touched] > 0
        changed = before != after
        ch = touched[changed]
        yield {"src": e_src[ch], "dst": e_dst[ch],
               "sign": np.where(after[changed], 1, -1).astype(np.int64)}
