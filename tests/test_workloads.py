"""Deterministic workloads: R-MAT edge sets, mixed streams and sliding windows, each
checked against a plain-Python set-semantics oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu_ivm.errors import InputError
from gpu_ivm.workloads import (
    MixedStream,
    celebrity_churn,
    mixed_stream,
    rmat_edges,
    sliding_window_stream,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _pairs(src, dst) -> list[tuple[int, int]]:
    return list(zip(src.tolist(), dst.tolist(), strict=True))


def _apply(present: set, batch: dict) -> None:
    """Apply one batch under set semantics, asserting it is valid."""
    src, dst, sign = batch["src"], batch["dst"], batch["sign"]
    assert src.dtype == np.int64 and dst.dtype == np.int64 and sign.dtype == np.int64
    assert src.shape == dst.shape == sign.shape
    rows = _pairs(src, dst)
    assert len(set(rows)) == len(rows), "edge twice in one batch"
    assert set(sign.tolist()) <= {-1, 1}
    for e, s in zip(rows, sign.tolist(), strict=True):
        if s == 1:
            assert e not in present, f"insert of present edge {e}"
            present.add(e)
        else:
            assert e in present, f"delete of absent edge {e}"
            present.remove(e)


# --------------------------------------------------------------------------- R-MAT


def test_rmat_simple_and_deterministic():
    s, d = rmat_edges(10, seed=3)
    assert s.dtype == np.int64 and d.dtype == np.int64
    assert (s < d).all()
    assert s.min() >= 0 and d.max() < 2**10
    pairs = _pairs(s, d)
    assert len(set(pairs)) == len(pairs)
    assert 0.5 * 16 * 2**10 < len(pairs) <= 16 * 2**10
    s2, d2 = rmat_edges(10, seed=3)
    assert np.array_equal(s, s2) and np.array_equal(d, d2)
    s3, d3 = rmat_edges(10, seed=4)
    assert set(_pairs(s3, d3)) != set(pairs)


def test_rmat_skew_and_permutation():
    s, d = rmat_edges(12, seed=0)
    deg = np.bincount(np.concatenate([s, d]), minlength=2**12)
    # heavy-tailed degrees: the top vertex has far more than the mean degree
    assert deg.max() > 20 * deg.mean()
    # labels are permuted: the hub is not vertex 0, and hubs are spread over the id range
    top = np.argsort(deg)[-20:]
    assert top.max() - top.min() > 2**10
    # rows are shuffled, not sorted
    assert not (np.diff(s) >= 0).all()


def test_rmat_noise_and_params():
    s, d = rmat_edges(9, 8, seed=1, noise=0.1)
    assert (s < d).all() and len(set(_pairs(s, d))) == len(s)
    s2, d2 = rmat_edges(9, 8, seed=1, a=0.25, b=0.25, c=0.25)  # Erdos-Renyi-like
    assert len(s2) > len(s)
    with pytest.raises(InputError):
        rmat_edges(5, a=0.9, b=0.2, c=0.1)


# --------------------------------------------------------------------------- mixed stream


@pytest.mark.parametrize("delete_fraction,base_fraction",
                         [(0.5, 0.9), (0.3, 0.95), (1.0, 0.5), (0.0, 0.8)])
def test_mixed_stream_valid(delete_fraction, base_fraction):
    st = mixed_stream(9, edge_factor=8, batch_size=300, n_batches=25,
                      delete_fraction=delete_fraction, base_fraction=base_fraction, seed=5)
    assert isinstance(st, MixedStream)
    pool = set(_pairs(st.pool_src, st.pool_dst))
    present = set(_pairs(st.base_src, st.base_dst))
    assert len(present) == int(base_fraction * len(pool))
    n_batches = 0
    for batch in st.batches():
        assert batch["src"].shape[0] == 300
        n_del = int((batch["sign"] == -1).sum())
        n_absent = len(pool) - len(present)
        target = round(300 * delete_fraction)
        # the target share of deletes, unless too few edges are absent (or present)
        assert (n_del == target or (n_del > target and 300 - n_del == n_absent)
                or (n_del < target and n_del == len(present)))
        _apply(present, batch)
        assert present <= pool
        n_batches += 1
    assert n_batches == 25
    fs, fd = st.final_edges()
    assert set(_pairs(fs, fd)) == present
    assert len(_pairs(fs, fd)) == len(present)


def test_mixed_stream_reinserts_after_candidates_run_out():
    # 10% of the pool are candidates; 40 batches of 200 inserts exhaust them
    st = mixed_stream(8, edge_factor=8, batch_size=400, n_batches=40, seed=1)
    base = set(_pairs(st.base_src, st.base_dst))
    present = set(base)
    ever_deleted: set = set()
    reinserted = 0
    for batch in st.batches():
        for e, s in zip(_pairs(batch["src"], batch["dst"]), batch["sign"].tolist(),
                        strict=True):
            if s == 1 and e in ever_deleted:
                reinserted += 1
            if s == -1:
                ever_deleted.add(e)
        _apply(present, batch)
    assert reinserted > 0
    assert set(_pairs(*st.final_edges())) == present


def test_mixed_stream_deterministic_and_replayable():
    kw = dict(edge_factor=8, batch_size=250, n_batches=12, seed=9)
    a = mixed_stream(9, **kw)
    b = mixed_stream(9, **kw)
    c = mixed_stream(9, **{**kw, "seed": 10})
    ba, bb = list(a.batches()), list(b.batches())
    assert len(ba) == len(bb) == 12
    for x, y in zip(ba, bb, strict=True):
        for k in ("src", "dst", "sign"):
            assert np.array_equal(x[k], y[k])
    again = list(a.batches())  # replaying gives the same batches
    for x, y in zip(ba, again, strict=True):
        assert np.array_equal(x["src"], y["src"]) and np.array_equal(x["sign"], y["sign"])
    bc = list(c.batches())
    assert not np.array_equal(ba[0]["src"], bc[0]["src"])
    # final_edges without iterating first equals final_edges after iterating
    fresh = mixed_stream(9, **kw)
    assert np.array_equal(fresh.final_edges()[0], a.final_edges()[0])


def test_mixed_stream_batch_larger_than_pool():
    st = mixed_stream(4, edge_factor=1, batch_size=10**6, n_batches=1)
    with pytest.raises(InputError):
        next(st.batches())


# --------------------------------------------------------------------------- sliding window


def _load_temporal(name: str):
    pd = pytest.importorskip("pandas")
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    df = pd.read_csv(path, sep=r"\s+", comment="#", header=None)
    return df[0].to_numpy(np.int64), df[1].to_numpy(np.int64), df[2].to_numpy(np.int64)


def _window_oracle(src, dst, t, lo_t, hi_t) -> set:
    """Undirected non-loop pairs with an occurrence at a time in (lo_t, hi_t]."""
    m = (t > lo_t) & (t <= hi_t) & (src != dst)
    a = np.minimum(src[m], dst[m])
    b = np.maximum(src[m], dst[m])
    return set(_pairs(a, b))


@pytest.mark.parametrize("window_days,step_days", [(7, 1), (30, 3), (1, 2)])
def test_sliding_window_collegemsg(window_days, step_days):
    src, dst, t = _load_temporal("CollegeMsg.txt.gz")
    day = 86400
    window, step = window_days * day, step_days * day
    present: set = set()
    now = int(t.min())
    k = 0
    for batch in sliding_window_stream(src, dst, t, window=window, step=step):
        _apply(present, batch)
        assert (batch["src"] < batch["dst"]).all()
        if k % 7 == 0:
            assert present == _window_oracle(src, dst, t, now - window, now)
        now += step
        k += 1
    assert now - step >= t.max()  # the clock reached the last event
    assert present == _window_oracle(src, dst, t, now - step - window, now - step)


def test_sliding_window_unsorted_multiset_and_drain():
    # (1,2) occurs at t=0 and t=3 (reversed); unsorted input; self-loop dropped
    src = np.array([2, 1, 5, 1, 3], dtype=np.int64)
    dst = np.array([1, 2, 5, 3, 4], dtype=np.int64)
    t = np.array([3, 0, 1, 4, 9], dtype=np.int64)
    batches = list(sliding_window_stream(src, dst, t, window=4, step=2, drain=True))
    present: set = set()
    now = 0
    for b in batches:
        _apply(present, b)
        assert present == _window_oracle(src, dst, t, now - 4, now)
        now += 2
    assert present == set()
    with pytest.raises(InputError):
        next(sliding_window_stream(src, dst, t, window=0, step=1))


@pytest.mark.slow
def test_sliding_window_mathoverflow_final_state():
    src, dst, t = _load_temporal("sx-mathoverflow.txt.gz")
    day = 86400
    present: set = set()
    now = int(t.min())
    n = 0
    for batch in sliding_window_stream(src, dst, t, window=30 * day, step=day):
        # cheap validity checks per batch (the full set replay is done on CollegeMsg)
        rows = _pairs(batch["src"], batch["dst"])
        assert len(set(rows)) == len(rows)
        for e, s in zip(rows, batch["sign"].tolist(), strict=True):
            if s == 1:
                assert e not in present
                present.add(e)
            else:
                present.remove(e)
        now += day
        n += 1
    assert present == _window_oracle(src, dst, t, now - day - 30 * day, now - day)


# --------------------------------------------------------------------------- celebrity churn


def test_celebrity_churn_degrees():
    st = celebrity_churn(9, n_celebrities=7, celebrity_degree=120, batch_size=10, n_batches=2,
                         seed=4)
    n = 2**9
    base = _pairs(st.base_src, st.base_dst)
    assert len(set(base)) == len(base) and all(a < b for a, b in base)
    assert st.celebrities.tolist() == list(range(n, n + 7))
    rmat = set(_pairs(*rmat_edges(9, seed=4)))
    assert rmat <= set(base)  # the R-MAT graph of the same seed, untouched
    cel = set(st.celebrities.tolist())
    for c in cel:
        fans = {a for a, b in base if b == c and a not in cel}
        assert len(fans) == 120 and max(fans) < n  # distinct R-MAT vertices
        assert not any(a == c for a, b in base if b not in cel)
    pairs = {(a, b) for a, b in base if a in cel and b in cel}
    assert pairs == set(_pairs(st.pair_src[st.pair_present], st.pair_dst[st.pair_present]))
    assert len(_pairs(st.pair_src, st.pair_dst)) == 7 * 6 // 2
    assert len(base) == len(rmat) + 7 * 120 + len(pairs)


def test_celebrity_churn_toggles_valid_and_deterministic():
    kw = dict(n_celebrities=9, celebrity_degree=50, batch_size=20, n_batches=6)
    st = celebrity_churn(8, seed=2, **kw)
    present = set(_pairs(st.base_src, st.base_dst))
    cel = set(st.celebrities.tolist())
    batches = list(st.batches())
    assert len(batches) == 6
    for b in batches:
        assert len(b["src"]) == 20
        assert all(a in cel and c in cel and a < c for a, c in _pairs(b["src"], b["dst"]))
        _apply(present, b)  # every delete hits a present edge, every insert an absent one
    fs, fd = st.final_edges()
    final = _pairs(fs, fd)
    assert len(set(final)) == len(final) and set(final) == present
    again = list(celebrity_churn(8, seed=2, **kw).batches())
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(batches, again, strict=True)
               for k in ("src", "dst", "sign"))
    other = list(celebrity_churn(8, seed=3, **kw).batches())
    assert any(not np.array_equal(x["src"], y["src"]) for x, y in zip(batches, other,
                                                                      strict=True))


@pytest.mark.parametrize("kw", [dict(n_celebrities=1), dict(celebrity_degree=2**8 + 1),
                                dict(batch_size=4 * 3 // 2 + 1, n_celebrities=4),
                                dict(n_batches=-1)])
def test_celebrity_churn_refuses_bad_shapes(kw):
    args = dict(n_celebrities=4, celebrity_degree=10, batch_size=2, n_batches=1) | kw
    with pytest.raises(InputError):
        celebrity_churn(8, **args)
