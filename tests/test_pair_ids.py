"""The pair-id table of 3-ary views (gpu_ivm.queries.pair_ids) against a dict."""

from __future__ import annotations

import numpy as np

from gpu_ivm.encoding import pack
from gpu_ivm.queries.pair_ids import PairIds


def test_pair_ids_match_a_dict_through_rehashes() -> None:
    rng = np.random.default_rng(5)
    p, want = PairIds(), {}
    for step in range(40):  # ~2000 distinct pairs: the 64-slot table is rehashed several times
        n = int(rng.integers(0, 120))
        u = rng.integers(0, 60, n)
        v = rng.integers(0, 60, n) * (1 << 20)  # wide second ids: keys far apart
        keys = pack(u, v).tolist()
        if step % 3 == 2:  # lookups leave the table alone
            got = p.ids(u, v, create=False)
            assert got.tolist() == [want.get(k, -1) for k in keys]
            continue
        for k in sorted(set(keys) - want.keys()):  # new pairs: next ids in key order
            want[k] = len(want)
        got = p.ids(u, v, create=True)
        assert got.tolist() == [want[k] for k in keys]
        assert len(p) == len(want)
    ids = np.array(sorted(want.values()))
    a, b = p.decode(ids)
    inv = {i: k for k, i in want.items()}
    assert pack(a, b).tolist() == [inv[i] for i in ids.tolist()]
    assert p.tkeys.shape[0] >= 2 * len(p)  # load factor at most 1/2
