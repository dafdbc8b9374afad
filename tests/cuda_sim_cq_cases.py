"""The query engine's CUDA twins (kernels/cuda_lex_join.py) in Numba's CUDA simulator, against
their CPU kernels, and ``gpu_ivm.cq.Engine(backend="cuda")`` against the brute-force oracle.

Run by ``tests/test_cuda_sim_cq.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``; to run it
directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_sim_cq_cases.py

The twins run with 32 threads per block and 2 blocks, so inputs of more than 64 rows cross the
grid-stride loop. Inputs are random with a hub key (half the rows through one value),
multiplicities > 1 of both signs, empty sides; the CPU kernels are themselves tested against
brute force (tests/test_cq_kernels.py, tests/test_cq_wcoj.py).
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator

import numba
import numpy as np
import pytest

if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from gpu_ivm.kernels import cuda_launch, cuda_lex_join  # noqa: E402
from gpu_ivm.kernels import lex_expand as cpu_expand  # noqa: E402
from gpu_ivm.kernels import lex_join as cpu_join  # noqa: E402
from gpu_ivm.kernels import lex_reduce as cpu_reduce  # noqa: E402
from gpu_ivm.kernels import lex_search as cpu_search  # noqa: E402
from test_cq_engine import answers, fold, random_batch, random_db, table  # noqa: E402

from gpu_ivm.cq import evaluate, ops, parse_query, total  # noqa: E402
from gpu_ivm.cq.engine import Engine  # noqa: E402
from gpu_ivm.cq.lex_order import host_lex_order  # noqa: E402
from gpu_ivm.errors import IntegerOverflowError  # noqa: E402


@pytest.fixture(autouse=True)
def _small_launch() -> Iterator[None]:
    cfg = cuda_launch.CONFIG
    saved = (cfg.tpb, cfg.max_blocks, cfg.scan_tpb)
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = 32, 2, 32
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = saved


def sorted_run(rng, n: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted rows, half through the hub value 0 in the first column, with
    multiplicities in ±1..3."""
    keys = rng.integers(0, 5, (n, cols))
    if n:
        keys[rng.random(n) < 0.5, 0] = 0
    keys = np.unique(keys, axis=0) if n else keys
    mult = rng.integers(1, 4, keys.shape[0]) * rng.choice([-1, 1], keys.shape[0])
    return np.ascontiguousarray(keys, dtype=np.int64), mult.astype(np.int64)


@pytest.mark.parametrize("seed", range(2))
def test_expand_join_twin(seed: int) -> None:
    """Every output mode, probes of 0 to 2 columns, empty left sides and runs, a hub probe
    that expands to many rows: the twin's rows equal the CPU kernel's."""
    rng = np.random.default_rng(seed)
    for n_left, n_run, p in ((0, 30, 1), (25, 0, 1), (70, 50, 1), (9, 40, 0), (40, 60, 2)):
        keys, mult = sorted_run(rng, n_run, 2)
        left = np.ascontiguousarray(rng.integers(0, 5, (n_left, 2)), dtype=np.int64)
        left_mult = rng.integers(-3, 4, n_left).astype(np.int64)
        probes = np.ascontiguousarray(rng.integers(0, 5, (n_left, p)), dtype=np.int64)
        probes[rng.random(n_left) < 0.5] = 0
        for skip, how in ((p, cpu_expand.PRODUCT), (0, cpu_expand.LEFT),
                          (1, cpu_expand.RIGHT)):
            args = (left, left_mult, probes, keys, mult, skip, how)
            k, m = cuda_lex_join.expand_join(*args)
            ck, cm = cpu_expand.expand_join(*args)
            assert k.tolist() == ck.tolist() and m.tolist() == cm.tolist(), (n_left, n_run, p)
            assert k.shape == ck.shape


@pytest.mark.parametrize("seed", range(2))
def test_expand_join_twin_with_ranges(seed: int) -> None:
    """Ranges narrowed by the caller (a seek and a cap, as a limited request's expand cuts
    them): the twin takes them instead of its search and writes the CPU kernel's rows;
    ranges outside the run are refused by both."""
    rng = np.random.default_rng(10 + seed)
    keys, mult = sorted_run(rng, 60, 2)
    left = np.ascontiguousarray(rng.integers(0, 5, (30, 2)), dtype=np.int64)
    probes = np.ascontiguousarray(left[:, :1])
    lo, hi = cpu_search.prefix_ranges(keys, probes)
    lo = np.minimum(hi, lo + rng.integers(0, 3, 30))
    hi = np.minimum(hi, lo + rng.integers(0, 4, 30))
    for how in (cpu_expand.PRODUCT, cpu_expand.LEFT, cpu_expand.RIGHT):
        args = (left, np.ones(30, np.int64), probes, keys, mult, 1, how)
        k, m = cuda_lex_join.expand_join(*args, ranges=(lo, hi))
        ck, cm = cpu_expand.expand_join(*args, ranges=(lo, hi))
        assert k.tolist() == ck.tolist() and m.tolist() == cm.tolist()
        assert ck.shape[0] == int((hi - lo).sum()) > 0
    for bad in ((hi, lo), (lo, hi + keys.shape[0]), (lo[:3], hi[:3])):
        if (bad[0] <= bad[1]).all() and bad[0].shape == lo.shape and \
                (bad[1] <= keys.shape[0]).all():
            continue
        for f in (cuda_lex_join.expand_join, cpu_expand.expand_join):
            with pytest.raises(ValueError, match="ranges"):
                f(left, np.ones(30, np.int64), probes, keys, mult, 1, cpu_expand.LEFT,
                  ranges=bad)


@pytest.mark.filterwarnings("ignore:overflow encountered")  # the simulator's int64 arithmetic
def test_expand_join_twin_refuses_overflow() -> None:
    big = 2 ** 62
    keys = np.array([[1, 5], [1, 6], [2, 7]], np.int64)
    left = np.array([[1], [2]], np.int64)
    ok = (left, np.array([2, -2], np.int64), left, keys, np.array([1, -1, big], np.int64), 1)
    assert cuda_lex_join.expand_join(*ok)[1].tolist() == cpu_expand.expand_join(*ok)[1].tolist()
    for lm, rm in (([2, 2], [1, -1, big]), ([-2, 1], [-big, 1, 1]), ([3, 1], [-big, 1, 1])):
        bad = (left, np.array(lm, np.int64), left, keys, np.array(rm, np.int64), 1)
        with pytest.raises(IntegerOverflowError):
            cpu_expand.expand_join(*bad)
        with pytest.raises(IntegerOverflowError):
            cuda_lex_join.expand_join(*bad)


def level_input(rng, k: int, tuples: int, n: int):
    """``k`` sorted columns of about ``n`` values each (a hub value 0 repeated), concatenated,
    and ``tuples`` partial tuples with a random sub-range of each column."""
    cols = []
    for _ in range(k):
        c = rng.integers(0, 12, n)
        c[rng.random(n) < 0.4] = 0
        cols.append(np.sort(c))
    offs = np.cumsum([0] + [len(c) for c in cols[:-1]])
    lo = np.empty((k, tuples), np.int64)
    hi = np.empty((k, tuples), np.int64)
    for j in range(k):
        a = rng.integers(0, n + 1, tuples)
        b = rng.integers(0, n + 1, tuples)
        lo[j], hi[j] = np.minimum(a, b) + offs[j], np.maximum(a, b) + offs[j]
    return np.concatenate(cols).astype(np.int64), lo, hi


@pytest.mark.parametrize("k,tuples", [(1, 5), (2, 70), (3, 40), (2, 0)])
def test_extend_level_twin(k: int, tuples: int) -> None:
    """One Generic Join level on the device equals the CPU's: parents, values, sub-ranges and
    the candidates visited; empty ranges and no partial tuples included."""
    rng = np.random.default_rng(k * 100 + tuples)
    vals, lo, hi = level_input(rng, k, tuples, 30)
    parent, val, nlo, nhi, n, work = cuda_lex_join.extend_level(vals, lo, hi)
    cp, cv, clo, chi, cn, cwork = cpu_join.extend_level(vals, lo, hi)
    assert n == cn and work == cwork
    assert parent.tolist() == cp[:n].tolist() and val.tolist() == cv[:n].tolist()
    assert nlo.tolist() == clo[:, :n].tolist() and nhi.tolist() == chi[:, :n].tolist()
    assert parent.shape == (n,) and nlo.shape == (k, n)
    if tuples and k > 1:
        assert n > 0  # the hub value meets in some ranges: the test compares extensions


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_consolidate_on_the_device() -> None:
    """Sort (the array module's lexsort) and group-and-sum: equal to the CPU's consolidate
    (NumPy sort, CPU reduce), zero sums dropped, zero columns, empty input; an overflowing
    sum is refused."""
    rng = np.random.default_rng(5)
    for n, cols in ((0, 2), (1, 1), (90, 3), (40, 0)):
        keys = np.ascontiguousarray(rng.integers(-2, 3, (n, cols)), dtype=np.int64)
        mult = rng.integers(-2, 3, n).astype(np.int64)
        k, m = cuda_lex_join.consolidate(keys, mult)
        order = host_lex_order(keys)
        ck, cm = cpu_reduce.reduce_sorted(keys[order], mult[order], cols)
        assert k.tolist() == ck.tolist() and m.tolist() == cm.tolist()
    big = np.iinfo(np.int64).max
    with pytest.raises(IntegerOverflowError):
        cuda_lex_join.consolidate(np.array([[3], [1], [3]], np.int64),
                                  np.array([big, 1, 1], np.int64))


QUERIES = [
    "Q(B,C | A) = R(A,B), S(B,C)",          # hierarchical with expand-joins
    "Q(B,C | A) = R(A,B), S(B,C), T(C,A)",  # the triangle: Generic Join views, indicators
]


def light_check(eng: Engine, query: str, db: dict, domain: list) -> None:
    """count() and one batch of requests (every input value, and one absent) against the
    brute-force evaluator (gpu_ivm.cq.oracle): few engine calls, since every simulated
    kernel launch costs milliseconds."""
    q = parse_query(query)
    assert eng.count() == total(q, db)
    reqs = [(v,) for v in domain + [99]]
    expect = evaluate(q, db)
    assert answers(eng, q, reqs) == {r: expect[r] for r in reqs if r in expect}
    # a cursor's pages (the capped, seeking expand on the twins) are the whole answer
    want = sorted((i, out, m) for i, r in enumerate(reqs)
                  for out, m in expect.get(r, {}).items())
    got = [(x["request"], tuple(x[v] for v in q.outputs), x["mult"])
           for page in eng.cursor({q.inputs[0]: [r[0] for r in reqs]}, limit=2)
           for x in page.to_pylist()]
    assert sorted(got) == want


@pytest.mark.parametrize("query", QUERIES)
def test_engine_on_the_cuda_backend(query: str, monkeypatch) -> None:
    """``Engine(backend="cuda")`` on a small random stream of inserts and deletes: after the
    load and every batch its count and answers equal the brute-force oracle's, and only the
    CUDA operator set runs (a CPU kernel called inside it fails the test)."""
    from gpu_ivm.kernels import lex_expand, lex_join, lex_reduce, lex_search

    def refuse(*args, **kwargs):
        raise AssertionError("a CPU kernel ran inside Engine(backend='cuda')")

    for mod, names in ((lex_search, ("prefix_ranges", "merge_sorted")),
                       (lex_reduce, ("reduce_sorted",)), (lex_expand, ("expand_join",)),
                       (lex_join, ("extend_level",))):
        for name in names:
            monkeypatch.setattr(mod, name, refuse)
    monkeypatch.setattr(ops, "_CPU", ops.Ops("refused", *([refuse] * 6)))
    used: list[str] = []
    real = ops.cuda_ops()
    spy = ops.Ops("cuda", *(_counted(getattr(real, f), f, used) for f in (
        "prefix_ranges", "merge_sorted", "reduce_sorted", "expand_join", "extend_level",
        "lex_order")))
    monkeypatch.setattr(ops, "_CUDA", spy)
    cfg = cuda_launch.CONFIG  # a few threads per launch: the simulator's cost is per launch
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = 4, 2, 4
    rng = random.Random(7)
    q = parse_query(query)
    domain = [0, 1, 2, 3]
    db = random_db(rng, q.schemas, domain, 10)
    eng = Engine(query, backend="cuda")
    eng.load(**{r: table(rel, q.schemas[r]) for r, rel in db.items()})
    light_check(eng, query, db, domain)
    for _ in range(2):
        batch = random_batch(rng, db, q.schemas, domain)
        eng.apply({r: table(d, q.schemas[r]) for r, d in batch.items() if d})
        fold(db, batch)
        light_check(eng, query, db, domain)
    assert eng.backend.name == "cuda" and eng.count() > 0
    assert {"expand_join", "merge_sorted", "reduce_sorted", "lex_order"} <= set(used)
    if "T(" in query:
        assert "extend_level" in used and eng.build_stats.get("wcoj_views", 0) > 0


def _counted(f, name: str, used: list):
    def call(*args, **kwargs):
        used.append(name)
        return f(*args, **kwargs)

    return call


def test_tradeoff_engine_on_the_cuda_backend(tmp_path) -> None:
    """``TradeoffEngine(epsilon=1/4, backend="cuda")``: its heavy and light ε = 1 engines run
    on the cuda operator set; after the load and a batch of a skewed stream (an A value with
    every B) its count and answers equal the brute-force oracle's, with B values in both
    parts. Its snapshot restores on the cpu backend and on the cuda backend, both equal to
    the oracle."""
    from gpu_ivm.cq.tradeoff import TradeoffEngine

    cfg = cuda_launch.CONFIG
    cfg.tpb, cfg.max_blocks, cfg.scan_tpb = 4, 2, 4
    query = "Q(C | A) = R(A,B), S(B,C)"
    q = parse_query(query)
    rng = random.Random(12)
    domain = [0, 1, 2, 3, 4, 5]
    db = random_db(rng, q.schemas, domain, 8)
    for b in domain:
        db["R"][(0, b)] = db["R"].get((0, b), 0) + 1
    eng = TradeoffEngine(query, epsilon="1/4", backend="cuda")
    assert eng.backend.name == "cuda"
    assert all(s.engine.backend.name == "cuda" for f in eng.factors for s in f.strategies)
    eng.load(**{r: table(rel, q.schemas[r]) for r, rel in db.items()})
    heavy = eng.heavy_sets[0].shape[0]
    assert 0 < heavy < len({b for (_, b) in db["R"]})  # both parts hold B values
    light_check(eng, query, db, domain)
    batch = random_batch(rng, db, q.schemas, domain)
    eng.apply({r: table(d, q.schemas[r]) for r, d in batch.items() if d})
    fold(db, batch)
    light_check(eng, query, db, domain)
    eng.snapshot(tmp_path / "snap")
    for backend in ("cpu", "cuda"):
        back = TradeoffEngine.restore(tmp_path / "snap", backend=backend)
        assert back.backend.name == backend
        light_check(back, query, db, domain)
