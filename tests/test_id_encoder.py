"""IdEncoder: keys to dense ids in order of first appearance, planned then committed, against
a dict; integer keys that count from 0 take the direct table (``_dense``), and a key outside
its range (negative, or far past the ids) turns it off without changing any id."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import hashmap

from gpu_ivm.encoding import DENSE_FACTOR, DENSE_SLACK, IdEncoder


class DictEncoder:
    def __init__(self):
        self.ids: dict = {}

    def plan(self, keys):
        new: dict = {}
        out = []
        for k in keys:
            if k in self.ids:
                out.append(self.ids[k])
            else:
                out.append(len(self.ids) + new.setdefault(k, len(new)))
        return out, list(new)

    def commit(self, new):
        for k in new:
            self.ids[k] = len(self.ids)


@pytest.mark.parametrize("seed", range(6))
def test_plan_and_commit_against_a_dict(seed):
    rng = np.random.default_rng(seed)
    enc, ref = IdEncoder(), DictEncoder()
    far = [2**40 + 7, -5, 3 * DENSE_SLACK + 10**6]
    for step in range(40):
        keys = rng.integers(0, 50 + 40 * step, rng.integers(0, 300))
        if step in (25, 33) and seed % 2:
            keys = np.r_[keys, far[seed % 3]]  # turns the direct table off
        ids, new = enc.plan(keys)
        want, want_new = ref.plan(keys.tolist())
        assert ids.tolist() == want and new.tolist() == want_new
        if rng.random() < 0.2:
            continue  # a refused batch: planned, never committed
        enc.commit(new)
        ref.commit(want_new)
        assert len(enc) == len(ref.ids)
        probe = rng.integers(-3, 60 + 40 * step, 200)
        assert enc.lookup(probe).tolist() == [ref.ids.get(int(k), -1) for k in probe]
    all_ids = np.arange(len(enc))
    assert enc.decode(all_ids).tolist() == sorted(ref.ids, key=ref.ids.get)
    assert (enc._dense is None) == bool(seed % 2)


def test_the_direct_table_covers_keys_that_count_from_zero():
    enc = IdEncoder()
    ids, new = enc.plan(np.arange(1000)[::-1])
    enc.commit(new)
    assert enc._dense is not None and enc._dense.shape[0] <= DENSE_FACTOR * 1000 + DENSE_SLACK
    assert enc.lookup(np.array([999, 0, 1000, -1])).tolist() == [0, 999, -1, -1]
    ids, new = enc.plan(np.array([5, 10**12, 5]))
    assert ids.tolist() == [994, 1000, 994] and new.tolist() == [10**12]
    enc.commit(new)  # far past the ids: hash table only from here on
    assert enc._dense is None
    assert enc.lookup(np.array([10**12, 999, 7])).tolist() == [1000, 0, 992]


@pytest.mark.parametrize("keys", ["dense", "hashed"])
def test_new_keys_after_a_bulk_commit_keep_the_arrays(keys):
    """A bulk commit (a load numbering every vertex) leaves room for a quarter more keys:
    the next commits of a few keys copy no array and rebuild no table, and every key still
    decodes and looks up to its id (here 2**16 keys fill the hash table to its limit, as
    R-MAT's vertex counts do)."""
    rng = np.random.default_rng(1)
    n = 1 << 16
    bulk = (np.arange(n) if keys == "dense"
            else rng.choice(1 << 40, n, replace=False)).astype(np.int64)
    enc = IdEncoder()
    ids, new = enc.plan(bulk)
    enc.commit(new)
    held = (enc._ints, enc._tkeys, enc._dense)
    more = np.arange(n, n + n // 8, dtype=np.int64) * (1 if keys == "dense" else 1 << 41)
    for chunk in np.array_split(more, 8):
        _, new = enc.plan(chunk)
        enc.commit(new)
    assert enc._ints is held[0] and enc._tkeys is held[1] and enc._dense is held[2]
    every = np.concatenate([bulk, more])
    assert enc.lookup(every).tolist() == list(range(every.shape[0]))
    assert np.array_equal(enc.decode(np.arange(every.shape[0])), every)
    assert (enc._dense is None) == (keys == "hashed")


@pytest.mark.parametrize("unknown_share", [0.0, 0.004, 0.5, 1.0])
def test_plan_new_numbers_the_unknown_keys_of_a_large_batch(unknown_share):
    """``hashmap.plan_new`` sizes its table by the batch's unknown keys (a few hundred in a
    batch of 10⁵ after a load), not by the batch: ids and new keys as a dict numbers them,
    from batches with none, a few, half and only unknown keys, each repeated."""
    rng = np.random.default_rng(7)
    n = 200_000
    keys = rng.integers(0, 1 << 40, n)
    unknown = rng.random(n) < unknown_share
    keys[unknown] = rng.choice(keys[unknown], int(unknown.sum())) if unknown.any() else 0
    known = np.where(unknown, -1, rng.integers(0, 10**6, n)).astype(np.int64)
    ids, new = hashmap.plan_new(keys.astype(np.int64), known, 10**6)
    order: dict[int, int] = {}
    want = [int(k) if k >= 0 else 10**6 + order.setdefault(int(key), len(order))
            for key, k in zip(keys.tolist(), known.tolist())]
    assert ids.tolist() == want
    assert new.tolist() == list(order)
