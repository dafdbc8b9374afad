"""Z-relation operators against Python dict arithmetic (both the packed and the wide-key path)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from gpu_ivm.cq.lex_order import pack
from gpu_ivm.cq.zrel import consolidate
from gpu_ivm.errors import IntegerOverflowError


def rand_rel(rng, vars, n, values):
    keys = rng.choice(values, size=(n, len(vars)))
    mult = rng.integers(-3, 4, n)
    return consolidate(vars, keys, mult), keys, mult


def as_dict(keys, mult):
    d = defaultdict(int)
    for k, m in zip(keys.tolist(), mult.tolist()):
        d[tuple(k)] += m
    return {k: v for k, v in d.items() if v}


VALUES = {"small": np.arange(5), "wide": np.array([-(2 ** 62), -1, 0, 7, 2 ** 62])}


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_consolidate_merge_join_marginalize(kind):
    rng = np.random.default_rng(3)
    values = VALUES[kind]
    for _ in range(60):
        r, rk, rm = rand_rel(rng, ("A", "B"), int(rng.integers(0, 120)), values)
        d, dk, dm = rand_rel(rng, ("B", "A"), int(rng.integers(0, 12)), values)
        s, sk, sm = rand_rel(rng, ("B", "C"), int(rng.integers(0, 40)), values)
        assert r.to_dict() == as_dict(rk, rm)
        keys = r.keys.tolist()
        assert keys == sorted(keys) and len(set(map(tuple, keys))) == len(keys)
        merged = as_dict(np.concatenate([rk, dk[:, ::-1]]), np.concatenate([rm, dm]))
        assert r.merge(d).to_dict() == merged
        mk = r.merge(d).keys.tolist()
        assert mk == sorted(mk)
        want = defaultdict(int)
        for (a, b), m in r.to_dict().items():
            for (b2, c), m2 in s.to_dict().items():
                if b == b2:
                    want[(a, b, c)] += m * m2
        assert r.join(s).to_dict() == {k: v for k, v in want.items() if v}
        assert s.join(r).reorder(("A", "B", "C")).to_dict() == r.join(s).to_dict()
        marg = defaultdict(int)
        for (a, _b), m in r.to_dict().items():
            marg[(a,)] += m
        assert r.marginalize(("A",)).to_dict() == {k: v for k, v in marg.items() if v}


def test_pack_refuses_wide_ranges_and_preserves_order():
    wide = np.array([[-(2 ** 62), 0], [2 ** 62, 1]])
    assert pack(wide) is None
    rng = np.random.default_rng(1)
    keys = rng.integers(-1000, 1000, size=(200, 3))
    (p,) = pack(keys)
    lex = np.lexsort(keys.T[::-1])
    assert np.all(np.diff(p[lex]) >= 0)


def test_overflow_checked():
    with pytest.raises(IntegerOverflowError):
        consolidate(("A",), [[1], [1]], [2 ** 62, 2 ** 62])       # a sum leaves int64
    r = consolidate(("A",), [[1]], [2 ** 40])
    with pytest.raises(IntegerOverflowError):
        r.join(consolidate(("A",), [[1]], [2 ** 30]))                # a product leaves int64
    base = consolidate(("A",), np.arange(100).reshape(-1, 1), np.full(100, 2 ** 62))
    with pytest.raises(IntegerOverflowError):
        base.merge(consolidate(("A",), [[5]], [2 ** 62]))            # the in-place add path
    assert base.merge(consolidate(("A",), [[5]], [-(2 ** 62)])).to_dict().get((5,)) is None
