"""The query engine's sorted-run relations (gpu_ivm.cq.lsm) against dictionaries, and the
engine over long streams (many runs, cancellations across runs, lazily built indexes) against
the brute-force evaluator."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
from gpu_ivm.kernels import lex_search
from test_cq_engine import FIXED, random_query, run_checked

from gpu_ivm.cq.engine import Engine
from gpu_ivm.cq.lsm import MERGE_RATIO, LsmRel
from gpu_ivm.cq.zrel import consolidate
from gpu_ivm.errors import IntegerOverflowError


def zrel(vars, d: dict[tuple, int]):
    return consolidate(vars, np.array(list(d), np.int64).reshape(len(d), len(vars)),
                       list(d.values()))


def random_delta(rng: np.random.Generator, held: dict[tuple, int], k: int, n: int) -> dict:
    """n random changes: inserts of new or held keys, deletes of held ones (to 0 or below)."""
    out: dict[tuple, int] = {}
    keys = list(held)
    for _ in range(n):
        if keys and rng.random() < 0.4:
            t = keys[int(rng.integers(len(keys)))]
            out[t] = out.get(t, 0) - int(rng.integers(1, abs(held[t]) + 1))  # Z: may go < 0
        else:
            t = tuple(int(x) for x in rng.integers(-3, 5, k))
            out[t] = out.get(t, 0) + int(rng.integers(1, 3))
    return {t: m for t, m in out.items() if m}


@pytest.mark.parametrize("seed", range(6))
def test_lsm_rel_matches_a_dictionary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vars = ("A", "B", "C")
    held = {t: int(rng.integers(1, 3)) for t in map(tuple, rng.integers(-3, 5, (40, 3)).tolist())}
    rel = LsmRel(zrel(vars, held))
    for _ in range(40):
        d = random_delta(rng, held, 3, int(rng.integers(1, 12)))
        order = tuple(rng.permutation(vars))  # a delta may come in any column order
        cols = [vars.index(v) for v in order]
        rel.merge(zrel(order, {tuple(t[c] for c in cols): m for t, m in d.items()}))
        for t, m in d.items():
            held[t] = held.get(t, 0) + m
        held = {t: m for t, m in held.items() if m}
        runs = rel._indexes[vars].runs
        sizes = [r[1].shape[0] for r in runs]
        assert all(a > MERGE_RATIO * b for a, b in zip(sizes, sizes[1:]))  # geometric runs
        # a lookup on every prefix order, including one built now from the runs
        shared = tuple(rng.choice(vars, int(rng.integers(0, 4)), replace=False))
        left_vars = (*shared, "Z")
        left = {tuple(int(x) for x in rng.integers(-3, 5, len(shared))) + (z,): z + 1
                for z in range(6)}
        got = rel.join_from(zrel(left_vars, left))
        want: dict[tuple, int] = {}
        for lk, lm in left.items():
            for t, m in held.items():
                if all(t[vars.index(v)] == lk[i] for i, v in enumerate(shared)):
                    key = lk + tuple(t[vars.index(v)] for v in vars if v not in shared)
                    want[key] = want.get(key, 0) + lm * m
        assert got.vars == left_vars + tuple(v for v in vars if v not in shared)
        assert got.to_dict() == want
        sup = rel.join_from(zrel(left_vars, left), support=True)
        assert sup.to_dict() == {k: left[k[:len(left_vars)]] for k in want}
        probe = zrel(("C", "A", "B"), {(t[2], t[0], t[1]): 1 for t in list(held)[:5]}
                     | {(9, 9, 9): 1})
        assert rel.get(probe).tolist() == [held.get((a, b, c), 0) for c, a, b in
                                           probe.keys.tolist()]
        assert rel.zrel().to_dict() == held


def test_lsm_rel_state_restores_every_index() -> None:
    rel = LsmRel(zrel(("A", "B"), {(1, 2): 1, (2, 3): 2}))
    rel.join_from(zrel(("B",), {(3,): 1}))  # builds the (B, A) index
    before = rel.state()
    rel.merge(zrel(("A", "B"), {(1, 2): -1, (5, 5): 4}))
    rel.join_from(zrel(("A", "C"), {(5, 0): 1}))
    rel.restore(before)
    assert rel.zrel().to_dict() == {(1, 2): 1, (2, 3): 2}
    assert rel.join_from(zrel(("B",), {(2,): 1, (5,): 1})).to_dict() == {(2, 1): 1}


@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("kind", ["cqap0", "hierarchical", "cyclic"])
def test_long_streams_against_the_oracle(kind: str, fenced: bool, monkeypatch) -> None:
    """40 batches per query: the views grow into several runs, deletes cancel tuples held in
    older runs, and indexes are built part-way; every batch is checked. ``fenced``: every
    run of 4 rows or more gets fences every 3 rows (large runs only, by default)."""
    if fenced:
        monkeypatch.setattr(lex_search, "FENCE_MIN", 4)
        monkeypatch.setattr(lex_search, "FENCE_STEP", 3)
    rng = random.Random(zlib.crc32(kind.encode()))  # the same in every run
    for k in range(3):
        query = FIXED[k] if kind == "cqap0" and k == 0 else random_query(rng, kind)
        run_checked(rng, query, list(range(6)), 20, 40)


def test_overflow_half_way_leaves_every_view_as_it_was() -> None:
    """The overflow is found after the base relation and some views changed; the batch is
    undone in every index, and the next batch is exact."""
    q = "Q(B | ) = R(A,B), S(A)"
    eng = Engine(q)
    big = 2 ** 62
    eng.load(R={"a": [1, 2], "b": [5, 6]}, S={"a": [1, 2], "mult": [big, 1]})
    def state():
        return (eng.request().to_pydict(), eng.count(),
                {k: v.zrel().to_dict() for k, v in (*eng.views.items(), *eng.base.items())})

    before = state()
    with pytest.raises(IntegerOverflowError):
        eng.apply({"R": {"a": [2, 1], "b": [7, 7], "mult": [1, 3]}})
    assert state() == before
    eng.apply({"R": {"a": [2], "b": [7], "mult": [1]}})
    assert eng.request().to_pydict() == {"request": [0, 0, 0], "B": [5, 6, 7],
                                         "mult": [big, 1, 1]}
    assert eng.count() == big + 2


@pytest.mark.parametrize("seed", range(4))
def test_merge_sorted_equals_consolidate(seed: int) -> None:
    """The runs' one-pass merge against sorting the union (kernels/lex_search.py): keys in
    one run only, in both, sums to zero, an empty run."""
    from gpu_ivm.kernels.lex_search import merge_sorted

    rng = np.random.default_rng(seed)
    for cols in (1, 2, 3):
        names = ("x", "y", "z")[:cols]
        a = consolidate(names, rng.integers(0, 4, (30, cols)), rng.integers(-2, 3, 30))
        n = int(rng.integers(0, 2)) * 25  # 0: the second run is empty
        b = consolidate(names, rng.integers(0, 4, (n, cols)), rng.integers(-2, 3, n))
        for x, y in ((a, b), (b, a)):
            keys, mult = merge_sorted(x.keys, x.mult, y.keys, y.mult)
            want = consolidate(names, np.concatenate([x.keys, y.keys]),
                               np.concatenate([x.mult, y.mult]))
            assert keys.tolist() == want.keys.tolist()
            assert mult.tolist() == want.mult.tolist()
    big = np.array([2 ** 62], np.int64)
    with pytest.raises(IntegerOverflowError):
        merge_sorted(np.array([[1]]), big, np.array([[1]]), big)


@pytest.mark.parametrize("step", [1, 2, 64])
def test_fenced_ranges_equal_plain_ranges(step: int, monkeypatch) -> None:
    """A large run searched through its fences gives the plain search's ranges, for probes
    below, inside, between and above the rows, on every prefix width."""
    monkeypatch.setattr(lex_search, "FENCE_STEP", step)
    rng = np.random.default_rng(step)
    keys = rng.integers(0, 3000, (40_000, 3))
    keys = keys[np.lexsort(keys.T[::-1])]
    fence = lex_search.fences(keys)
    assert fence is not None and fence.shape[0] == -(-keys.shape[0] // step)
    for p in range(4):
        probes = np.concatenate([rng.integers(-1, 3002, (300, p)), keys[:200, :p],
                                 keys[-5:, :p]])
        got = lex_search.prefix_ranges(keys, probes, fence)
        want = lex_search.prefix_ranges(keys, probes)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert lex_search.fences(keys[:100]) is None


def test_inserts_that_would_overflow_a_base_multiplicity_are_refused() -> None:
    """Inserts are not looked up while the multiplicities ever inserted stay far below 2^63;
    past that bound every tuple is checked again, so a base multiplicity that would leave
    int64 is refused at apply, with nothing changed."""
    eng = Engine("Q(A | ) = R(A)")
    eng.load(R={"a": [1, 2]})
    eng.apply({"R": {"a": [1], "mult": [2 ** 62]}})
    before = eng.request().to_pydict()
    with pytest.raises(IntegerOverflowError):
        eng.apply({"R": {"a": [3, 1], "mult": [1, 2 ** 62]}})
    assert eng.request().to_pydict() == before
    eng.apply({"R": {"a": [1], "mult": [-(2 ** 62)]}})
    assert eng.request().to_pydict() == {"request": [0, 0], "A": [1, 2], "mult": [1, 1]}
