"""Device batch preparation (gpu_ivm/device_batch.py) and device columns (gpu_ivm/io/device.py)
on the host: the CPU twins of the preparation kernels against the host's own batch path
(IdEncoder.plan, sum_groups, symmetric_delta) and an independent dict oracle. The CUDA kernels
run the same steps in tests/cuda_device_input_cases.py (simulator)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from gpu_ivm.kernels import batch_prep
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_ivm.backend import get_backend
from gpu_ivm.device_batch import DeviceKeyTable, number_new, prepare, prepare_load
from gpu_ivm.encoding import IdEncoder
from gpu_ivm.errors import InputError
from gpu_ivm.io.device import DeviceColumns, device_columns

CPU = get_backend("cpu")


class Interface:
    """A device column as a foreign library hands it over: ``__cuda_array_interface__`` over
    host memory (the host backend reads it as the simulator does), no NumPy conversion."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = np.ascontiguousarray(a)
        self.shape, self.dtype = self._a.shape, self._a.dtype
        self.__cuda_array_interface__ = {"shape": self._a.shape, "typestr": self._a.dtype.str,
                                         "data": (self._a.ctypes.data if self._a.size else 0,
                                                  False), "version": 3, "strides": None}

    def __array__(self, *args, **kwargs):
        raise TypeError("host conversion of a device column")


def _oracle(src, dst, sign, known: dict, directed: bool):
    """(new keys in first-appearance order, {(a, b): net} kept, loops) by plain Python."""
    ids = dict(known)
    new = []
    rows = [(int(a), int(b), int(s)) for a, b, s in zip(src, dst, sign)]
    for col in (0, 1):
        for r in rows:
            if r[0] == r[1]:
                continue
            k = r[col]
            if k not in ids:
                ids[k] = len(ids)
                new.append(k)
    net: Counter = Counter()
    loops = 0
    for a, b, s in rows:
        if a == b:
            loops += 1
            continue
        x, y = ids[a], ids[b]
        if not directed:
            x, y = min(x, y), max(x, y)
        net[(x, y)] += s
    return new, {e: v for e, v in net.items() if v}, loops


def _encoder(keys) -> IdEncoder:
    enc = IdEncoder()
    ids, new = enc.plan(np.asarray(keys, np.int64))
    enc.commit(new)
    return enc


rows_st = st.lists(st.tuples(st.integers(-5, 30), st.integers(-5, 30), st.sampled_from([1, -1])),
                   max_size=60)


@settings(max_examples=150, deadline=None)
@given(rows=rows_st, known=st.lists(st.integers(-5, 30), unique=True, max_size=20),
       directed=st.booleans(), packed=st.booleans())
def test_prepare_matches_the_oracle(rows, known, directed, packed) -> None:
    src = np.array([r[0] for r in rows], np.int64)
    dst = np.array([r[1] for r in rows], np.int64)
    sign = np.array([r[2] for r in rows], np.int64)
    enc = _encoder(known)
    n0 = len(enc)
    limit = batch_prep.PACKED_IDS
    batch_prep.PACKED_IDS = limit if packed else -1  # the sort of keys and signs apart
    try:
        p = prepare(CPU, DeviceKeyTable(CPU), enc, DeviceColumns(src, dst, sign), directed)
    finally:
        batch_prep.PACKED_IDS = limit
    new, net, loops = _oracle(src, dst, sign, {k: i for i, k in enumerate(known)}, directed)
    assert p.loops == loops and p.n0 == n0
    assert (p.new_keys.tolist() if p.new_keys is not None else []) == new
    big = any(abs(v) > 1 for v in net.values())
    new_delete = any(v < 0 and max(e) >= n0 for e, v in net.items())
    used = {x for e in net for x in e if x >= n0}
    assert p.host_rules == (big or new_delete or len(used) != len(new))
    # the kept edges: both orientations when undirected, sorted, with old = 1 for deletes
    want = dict(net)
    if not directed:
        want.update({(b, a): v for (a, b), v in net.items()})
    keys = sorted((a << 32 | b) for a, b in want)
    assert p.keys.tolist() == keys
    assert p.vals.tolist() == [want[(k >> 32, k & 0xFFFFFFFF)] for k in keys]
    assert p.old.tolist() == [int(v < 0) for v in p.vals.tolist()]
    assert p.n_deletes == sum(v < 0 for v in want.values())
    pairs = sorted(net)
    assert list(zip(p.pairs[0].tolist(), p.pairs[1].tolist())) == pairs
    assert p.pairs[2].tolist() == [net[e] for e in pairs]


@settings(max_examples=100, deadline=None)
@given(rows=rows_st, known=st.lists(st.integers(-5, 30), unique=True, max_size=20))
def test_numbering_is_the_host_encoders(rows, known) -> None:
    src = np.array([r[0] for r in rows], np.int64)
    dst = np.array([r[1] for r in rows], np.int64)
    enc = _encoder(known)
    loops = src == dst
    host_ids, host_new = enc.plan(np.concatenate([src[~loops], dst[~loops]]))
    ids = np.concatenate([enc.lookup(src), enc.lookup(dst)])
    new = number_new(np, src, dst, ids, len(enc))
    assert new.tolist() == host_new.tolist()
    keep = np.concatenate([~loops, ~loops])
    assert ids[keep].tolist() == host_ids.tolist()


def test_the_host_path_agrees_with_the_device_steps() -> None:
    """The host's consolidation (sum_groups + symmetric_delta) gives the same edges."""
    rng = np.random.default_rng(4)
    enc = _encoder(np.arange(200))
    for _ in range(20):
        m = int(rng.integers(1, 400))
        src, dst = rng.integers(0, 200, m), rng.integers(0, 200, m)
        sign = rng.choice([-1, 1], m)
        keep = src != dst
        a, b, s = src[keep], dst[keep], sign[keep]
        key = batch_prep.pair_keys(np.concatenate([a, b]), a.shape[0], False)
        gkey, net, _, _ = batch_prep.sum_groups(key, np.argsort(key), s, 200)
        gkey, net = gkey[net != 0], net[net != 0]
        hk, hv = batch_prep.symmetric_delta(gkey, net)
        p = prepare(CPU, DeviceKeyTable(CPU), enc, DeviceColumns(src, dst, sign), False)
        assert np.array_equal(p.keys, hk) and np.array_equal(p.vals, hv)
        assert p.n_pairs == gkey.shape[0]


def test_bad_rows_go_to_the_host_rules() -> None:
    enc = _encoder([1, 2, 3])
    cols = DeviceColumns(np.array([1, 2]), np.array([2, 3]), np.array([1, 2]))
    assert prepare(CPU, DeviceKeyTable(CPU), enc, cols, False).host_rules
    big = np.array([0, 1 << 63], np.uint64).view(np.int64)
    cols = DeviceColumns(big, np.array([2, 3]), np.array([1, 1]), keys_u64=True)
    assert prepare(CPU, DeviceKeyTable(CPU), enc, cols, False).host_rules
    minus_one = np.array([2**64 - 1], np.uint64).view(np.int64)  # uint64: not a sign
    cols = DeviceColumns(np.array([1]), np.array([2]), minus_one, sign_u64=True)
    assert prepare(CPU, DeviceKeyTable(CPU), enc, cols, False).host_rules


def test_load_keys() -> None:
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 50, 300) * 7 - 20, rng.integers(0, 50, 300) * 7 - 20
    for directed in (False, True):
        enc = IdEncoder()
        keys, new, loops = prepare_load(CPU, DeviceKeyTable(CPU), enc,
                                        DeviceColumns(src, dst, None), directed)
        ids, want_new = IdEncoder().plan(np.concatenate([src[src != dst], dst[src != dst]]))
        assert new.tolist() == want_new.tolist() and loops == int((src == dst).sum())
        n = int((src != dst).sum())
        a, b = ids[:n], ids[n:]
        edges = {(int(x), int(y)) for x, y in zip(a, b)}
        if not directed:
            edges |= {(y, x) for x, y in edges}
        assert keys.tolist() == sorted(x << 32 | y for x, y in edges)


class FakeCudfFrame:
    """A cuDF DataFrame stand-in: device columns by name; every host conversion raises."""

    __module__ = "cudf.core.dataframe"

    def __init__(self, **cols) -> None:
        self._cols = {k: Interface(np.asarray(v)) for k, v in cols.items()}
        self.columns = list(self._cols)

    def __getitem__(self, k):
        return self._cols[k]

    def to_arrow(self):
        raise AssertionError("host copy: to_arrow")

    to_pandas = to_numpy = values_host = to_arrow


def test_device_columns_read_frames_mappings_and_tuples() -> None:
    f = FakeCudfFrame(source=[1, 2], target=[2, 3], sign=np.array([1, -1], np.int32))
    c = device_columns(f, np, updates=True, read_options={})
    assert c.src.tolist() == [1, 2] and c.dst.tolist() == [2, 3] and c.sign.dtype == np.int64
    c = device_columns({"a": Interface(np.array([5])), "b": Interface(np.array([6])),
                        "s": Interface(np.array([1]))}, np, updates=True,
                       read_options={"src": "b", "dst": 0, "sign": "s"})
    assert (c.src.tolist(), c.dst.tolist()) == ([6], [5])
    c = device_columns((Interface(np.array([1], np.uint64)), Interface(np.array([2]))), np,
                       updates=False, read_options={})
    assert c.keys_u64 and c.sign is None
    assert device_columns({"src": np.array([1]), "dst": np.array([2])}, np, updates=False,
                          read_options={}) is None


@pytest.mark.parametrize("source, options, message", [
    ({"src": Interface(np.array([1])), "dst": np.array([2]), "sign": Interface(np.array([1]))},
     {}, "host memory"),
    ({"src": Interface(np.array([1.0])), "dst": Interface(np.array([2])),
      "sign": Interface(np.array([1]))}, {}, "integers"),
    ({"src": Interface(np.array([1, 2])), "dst": Interface(np.array([2])),
      "sign": Interface(np.array([1]))}, {}, "unequal"),
    ({"src": Interface(np.array([1])), "dst": Interface(np.array([2]))}, {}, "sign"),
    ({"src": Interface(np.array([1])), "dst": Interface(np.array([2])),
      "sign": Interface(np.array([1]))}, {"header": True}, "header"),
    ({"src": Interface(np.array([1])), "dst": Interface(np.array([2])),
      "sign": Interface(np.array([1]))}, {"dst": "nope"}, "nope"),
])
def test_device_columns_refuse(source, options, message) -> None:
    with pytest.raises(InputError, match=message):
        device_columns(source, np, updates=True, read_options=options)


def test_nulls_are_refused() -> None:
    col = Interface(np.array([1, 2]))
    col.null_count = 1
    with pytest.raises(InputError, match="null"):
        device_columns({"src": col, "dst": Interface(np.array([2, 3])),
                        "sign": Interface(np.array([1, 1]))}, np, updates=True, read_options={})
