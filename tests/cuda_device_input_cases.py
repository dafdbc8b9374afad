"""Batches and edge lists handed over in device memory, prepared on the device
(gpu_ivm/device_batch.py, kernels/cuda_batch_prep.py), in Numba's CUDA simulator (or on a
device with ``GPU_IVM_TEST_DEVICE=1``).

Run by ``tests/test_cuda_sim_device_input.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``;
directly::

    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python -m pytest -q tests/cuda_device_input_cases.py

Columns reach the engine only through ``__cuda_array_interface__``
(:class:`device_arrays.InterfaceOnly`, whose ``__array__`` raises) or as a cuDF DataFrame
stand-in whose every host conversion raises, so a host copy of the input fails the test.
Every count, report and maintained result is compared with the CPU engine fed the same rows
as NumPy arrays (itself checked against independent oracles elsewhere) and with a
set-semantics oracle.
"""

from __future__ import annotations

import os

import numba
import numpy as np
import pyarrow as pa
import pytest
from device_arrays import InterfaceOnly
from oracle import GraphOracle

# on a real device (GPU_IVM_TEST_DEVICE=1, bench/device_check.sh) the interface-only columns
# are CuPy copies in device memory (device_arrays.InterfaceOnly)
if not numba.config.ENABLE_CUDASIM and os.environ.get("GPU_IVM_TEST_DEVICE") != "1":
    pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 before numba is imported", allow_module_level=True)

from gpu_ivm import GraphEngine  # noqa: E402
from gpu_ivm.errors import ConflictError, InputError  # noqa: E402


class FakeCudfFrame:
    """A cuDF DataFrame stand-in: columns in (simulated) device memory, read by name; every
    host conversion raises."""

    __module__ = "cudf.core.dataframe"

    def __init__(self, cols: dict) -> None:
        self._cols = {k: InterfaceOnly(np.ascontiguousarray(v)) for k, v in cols.items()}
        self.columns = list(self._cols)

    def __getitem__(self, k):
        return self._cols[k]

    def _host_copy(self, *args, **kwargs):
        raise AssertionError("the engine copied a device DataFrame to the host")

    to_arrow = to_pandas = to_numpy = to_dict = __array__ = _host_copy


def on_device(cols: dict, frame: bool = False):
    """``cols`` as a cuDF stand-in or a mapping of interface-only columns."""
    if frame:
        return FakeCudfFrame(cols)
    return {k: InterfaceOnly(np.ascontiguousarray(v)) for k, v in cols.items()}


def table(batches) -> list:
    t = pa.Table.from_batches(list(batches))
    return sorted(zip(*(c.to_pylist() for c in t.columns)))


def messy_batches(rng, nv: int, count: int, rows: int, new_from: int):
    """Random rows over ``nv`` known-ish vertices plus new ones from ``new_from``, with
    self-loops, repeated rows and rows that cancel (conflicts included)."""
    for _ in range(count):
        m = int(rng.integers(1, rows))
        src = rng.integers(0, nv, m)
        dst = rng.integers(0, nv, m)
        fresh = rng.random(m) < 0.1
        src[fresh] = new_from + rng.integers(0, 40, int(fresh.sum()))
        sign = rng.choice([-1, 1], m)
        loop = rng.random(m) < 0.03
        dst[loop] = src[loop]
        rep = rng.integers(0, m, m // 5)  # repeated rows, some with the other sign
        src, dst = np.r_[src, src[rep]], np.r_[dst, dst[rep]]
        sign = np.r_[sign, np.where(rng.random(rep.shape[0]) < 0.5, -sign[rep], sign[rep])]
        yield {"src": src, "dst": dst, "sign": sign.astype(np.int64)}


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("eps", ["1/2", "1"])
def test_device_batches_match_the_cpu(directed, eps) -> None:
    rng = np.random.default_rng(11 if directed else 7)
    nv = 60
    base_src, base_dst = rng.integers(0, nv, 300), rng.integers(0, nv, 300)
    kw = dict(directed=directed, epsilon=eps, on_conflict="ignore", adaptive=False)
    dev = GraphEngine(backend="cuda", **kw)
    cpu = GraphEngine(backend="cpu", **kw)
    rd = dev.load(on_device({"src": base_src, "dst": base_dst}))
    rc = cpu.load({"src": base_src, "dst": base_dst})
    assert (rd.triangles, rd.updates, rd.self_loops) == (rc.triangles, rc.updates, rc.self_loops)
    for i, b in enumerate(messy_batches(rng, nv, 8, 80, 1000)):
        rd = dev.apply(on_device(b, frame=i % 2 == 1), batch_id=i)
        rc = cpu.apply(b, batch_id=i)
        assert (rd.triangles, rd.delta, rd.updates, rd.ignored, rd.self_loops, rd.rows) == \
            (rc.triangles, rc.delta, rc.updates, rc.ignored, rc.self_loops, rc.rows), i
        n = len(cpu.encoder)
        assert len(dev.encoder) == n
        assert np.array_equal(dev.encoder.decode(np.arange(n)), cpu.encoder.decode(np.arange(n)))
    assert dev.device_batches == 8
    assert dev.recount() == cpu.count()


@pytest.mark.parametrize("fams", [["vertex_counts", "edge_counts", "triangles"],
                                  ["vertex_counts", "edge_counts"]])  # the latter off the stores
def test_valid_streams_stay_on_the_device_and_keep_results(fams) -> None:
    """Set-semantics batches (oracle-made, hubs, new vertices): no batch needs the host, and
    the maintained families equal the CPU's (all three in the general free-query state, or
    the per-vertex and per-edge counts, kept off the count engine's stores)."""
    rng = np.random.default_rng(3)
    oracle = GraphOracle()
    dev = GraphEngine(backend="cuda", maintain=fams, epsilon="1/2")
    cpu = GraphEngine(backend="cpu", maintain=fams, epsilon="1/2")
    base = {"src": np.array([0, 1, 2, 0]), "dst": np.array([1, 2, 0, 3])}
    for u, v in zip(base["src"], base["dst"]):
        oracle.apply(int(u), int(v), 1)
    dev.load(on_device(base, frame=True))
    cpu.load(base)
    for i in range(10):
        m = int(rng.integers(1, 60))
        rows = {}
        for _ in range(m):
            u = int(rng.integers(0, 3)) if rng.random() < 0.3 else int(rng.integers(0, 40 + 5 * i))
            v = int(rng.integers(0, 40 + 5 * i))
            if u == v or oracle.norm(u, v) in rows:
                continue
            rows[oracle.norm(u, v)] = -1 if oracle.present(u, v) else 1
        for (u, v), s in rows.items():
            oracle.apply(u, v, s)
        b = {"src": np.array([e[0] for e in rows], np.int64),
             "dst": np.array([e[1] for e in rows], np.int64),
             "sign": np.array(list(rows.values()), np.int64)}
        assert dev.apply(on_device(b)).triangles == cpu.apply(b).triangles == oracle.count()
    assert dev.device_to_host == 0 and dev.device_batches == 10
    for fam in fams:
        assert table(getattr(dev, fam)()) == table(getattr(cpu, fam)()), fam


def test_errors_are_the_hosts() -> None:
    """A bad sign and a conflict raise what the host raises, with the same row; nothing
    changes."""
    base = {"src": np.array([1, 2, 3]), "dst": np.array([2, 3, 1])}
    dev = GraphEngine(backend="cuda")
    cpu = GraphEngine(backend="cpu")
    dev.load(on_device(base))
    cpu.load(base)
    bad_sign = {"src": np.array([1, 4]), "dst": np.array([4, 5]), "sign": np.array([1, 3])}
    conflict = {"src": np.array([4, 1]), "dst": np.array([5, 2]), "sign": np.array([1, 1])}
    for b, err in ((bad_sign, InputError), (conflict, ConflictError)):
        with pytest.raises(err) as want:
            cpu.apply(b)
        with pytest.raises(err) as got:
            dev.apply(on_device(b))
        assert str(got.value) == str(want.value)
        assert (dev.count(), len(dev.encoder)) == (cpu.count(), len(cpu.encoder)) == (1, 3)
    big = {"src": np.array([1, 2**63], np.uint64), "dst": np.array([2, 3], np.uint64),
           "sign": np.array([1, 1])}
    with pytest.raises(InputError) as want:
        cpu.apply(big)
    with pytest.raises(InputError) as got:
        dev.apply(on_device(big))
    assert str(got.value) == str(want.value)
    assert dev.device_to_host == 3
    rep = dev.apply(on_device({"src": np.array([1]), "dst": np.array([2]),
                               "sign": np.array([-1])}))
    assert rep.triangles == 0 and dev.device_to_host == 3
    # an edge list with a uint64 key above int64: the host's reader judges it in both
    edges = {"src": np.array([1, 2**63 + 5], np.uint64), "dst": np.array([2, 3], np.uint64)}
    outcome = []
    for e, given in ((GraphEngine(backend="cpu"), edges),
                     (GraphEngine(backend="cuda"), on_device(edges))):
        try:
            outcome.append(("loaded", e.load(given).updates, e.count()))
        except InputError as err:
            outcome.append(("refused", str(err)))
    assert outcome[0] == outcome[1], outcome


def test_string_engines_and_restored_engines(tmp_path) -> None:
    s = GraphEngine(backend="cuda")
    s.load({"src": np.array(["a", "b"], object), "dst": np.array(["b", "c"], object)})
    with pytest.raises(InputError, match="strings"):
        s.apply(on_device({"src": np.array([1]), "dst": np.array([2]),
                           "sign": np.array([1])}))
    g = GraphEngine(backend="cuda")
    g.load(on_device({"src": np.array([10, 20, 30]), "dst": np.array([20, 30, 40])}))
    g.apply(on_device({"src": np.array([10, 50]), "dst": np.array([30, 10]),
                       "sign": np.array([1, 1])}))  # a new key through the device table
    g.snapshot(tmp_path / "snap")
    r = GraphEngine.restore(tmp_path / "snap", backend="cuda")
    r.apply(on_device({"src": np.array([40, 50]), "dst": np.array([10, 30]),
                       "sign": np.array([1, 1])}))
    assert r.count() == 3 and r.device_to_host == 0
    assert sorted(r.encoder.decode(np.arange(len(r.encoder))).tolist()) == [10, 20, 30, 40, 50]


def test_large_host_batches_are_prepared_on_the_device(monkeypatch) -> None:
    """A batch given on the host with at least DEVICE_PREP_MIN rows goes up once and is
    prepared on the device (the cut set to 40 rows here); smaller ones, and string keys,
    are prepared on the host. Conflicts still get the host's rules and words."""
    from gpu_ivm import graph_engine

    monkeypatch.setattr(graph_engine, "DEVICE_PREP_MIN", 40)
    rng = np.random.default_rng(17)
    base_src, base_dst = rng.integers(0, 50, 200), rng.integers(0, 50, 200)
    dev = GraphEngine(backend="cuda", on_conflict="ignore")
    cpu = GraphEngine(backend="cpu", on_conflict="ignore")
    dev.load({"src": base_src, "dst": base_dst})
    cpu.load({"src": base_src, "dst": base_dst})
    sizes = []
    for i, b in enumerate(messy_batches(rng, 50, 6, 90, 500)):
        before = dev.device_batches
        rd, rc = dev.apply(b), cpu.apply(b)
        sizes.append((len(b["src"]), dev.device_batches - before))
        assert (rd.triangles, rd.updates, rd.ignored, rd.self_loops) == \
            (rc.triangles, rc.updates, rc.ignored, rc.self_loops), i
    assert all(went == (m >= 40) for m, went in sizes), sizes
    assert any(went for _, went in sizes) and not all(went for _, went in sizes), sizes
    strict = GraphEngine(backend="cuda")
    strict.load({"src": base_src, "dst": base_dst})
    bad = {"src": np.r_[base_src[:50], 7], "dst": np.r_[base_dst[:50], 8],
           "sign": np.r_[np.ones(50, np.int64), 2]}
    with pytest.raises(InputError, match="sign"):
        strict.apply(bad)
    s = GraphEngine(backend="cuda")
    keys = np.array([f"v{i}" for i in range(60)], object)
    s.apply({"src": keys[:-1], "dst": keys[1:], "sign": np.ones(59, np.int64)})
    assert s.device_batches == 0 and s.num_edges == 59
