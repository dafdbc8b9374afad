"""The fast launch's argument words (kernels/cuda_fast_launch.py) on the host: what it writes
for arrays, tuples and scalars, and which arguments it leaves to numba-cuda's own launch.

The launch itself needs a GPU (``bench.gpu_latency`` and ``bench.gpu_run`` with
``GPU_IVM_FAST_LAUNCH=1`` exercise it there); the words are checked here against the layout
numba-cuda's ``_Kernel._prepare_args`` documents: per array meminfo 0, parent 0, element
count, item size, data pointer, shape, strides in bytes; per scalar a ctypes value of the
compiled type."""

from __future__ import annotations

import ctypes

import numpy as np
from gpu_ivm.kernels import cuda_fast_launch as fl
from numba.core import types


class Dev:
    """An array exposing only ``__cuda_array_interface__`` (over host memory here)."""

    def __init__(self, a: np.ndarray, strides=None, readonly: bool = False) -> None:
        self.a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, readonly),
            "strides": strides, "version": 3, "stream": None}


def _no_sync(cai) -> bool:
    return False


def _words(ty, val) -> list:
    """The words of ``val`` (compiled as ``ty``), its interfaces read by ``_scan``."""
    f = fl.FastLauncher.__new__(fl.FastLauncher)
    f._types = types
    cais: list = []
    assert fl._scan(val, cais, _no_sync) is not None
    out: list = []
    f._words(ty, val, out, iter(cais))
    return [w.value if isinstance(w, ctypes._SimpleCData) else w for w in out]


def test_array_words_match_numba_layout() -> None:
    a = np.arange(7, dtype=np.int64)
    d = Dev(a)
    ty = types.Array(types.int64, 1, "C")
    assert _words(ty, d) == [0, 0, 7, 8, a.ctypes.data, 7, 8]
    m = np.zeros((3, 5), np.int32)
    assert _words(types.Array(types.int32, 2, "C"), Dev(m)) == \
        [0, 0, 15, 4, m.ctypes.data, 3, 5, 20, 4]
    # explicit strides are passed as given
    assert _words(types.Array(types.int32, 2, "A"), Dev(m, strides=(4, 12))) == \
        [0, 0, 15, 4, m.ctypes.data, 3, 5, 4, 12]


def test_tuple_and_scalar_words() -> None:
    a, b = np.arange(3, dtype=np.int64), np.zeros(2, np.bool_)
    arr64, arrb = types.Array(types.int64, 1, "C"), types.Array(types.boolean, 1, "C")
    words = _words(types.Tuple((arr64, arrb)), (Dev(a), Dev(b)))
    assert words == [0, 0, 3, 8, a.ctypes.data, 3, 8, 0, 0, 2, 1, b.ctypes.data, 2, 1]
    assert _words(types.int64, np.int64(-5)) == [-5]
    assert _words(types.int32, 7) == [7]
    assert _words(types.boolean, True) == [True]
    assert _words(types.float64, 0.5) == [0.5]
    w = []
    f = fl.FastLauncher.__new__(fl.FastLauncher)
    f._types = types
    f._words(types.int64, 3, w, iter(()))
    assert isinstance(w[0], ctypes.c_int64)


def test_kinds_separate_what_numba_types_differently() -> None:
    a = np.arange(4, dtype=np.int64)

    def k(x):
        return fl._scan(x, [], _no_sync)

    assert k(Dev(a)) == k(Dev(np.zeros(9, np.int64)))  # same type, other size
    assert k(Dev(a)) != k(Dev(a.astype(np.int32)))  # dtype
    assert k(Dev(a)) != k(Dev(a.reshape(2, 2)))  # dimensions
    assert k(Dev(a)) != k(Dev(a, readonly=True))  # mutability
    assert k(Dev(a, strides=(8,))) == k(Dev(a))  # contiguous strides written out
    assert k(Dev(a[:2], strides=(16,))) != k(Dev(a))  # not contiguous
    m = np.zeros((2, 3), np.int64)
    c, f, s = Dev(m), Dev(m, strides=(8, 16)), Dev(m, strides=(48, 8 * 2))
    assert len({k(c), k(f), k(s)}) == 3  # layouts "C", "F", "A"
    assert k(3) == k(np.int64(3)) != k(np.int32(3))
    assert k(True) == k(np.bool_(True)) != k(1)
    assert k((Dev(a), 2)) == ("T", (k(Dev(a)), k(2)))
    # left to numba-cuda: host arrays, unknown objects, tuples holding them, ints numba
    # does not type int64, arrays produced on another stream
    assert k(a) is None and k("x") is None and k((Dev(a), a)) is None
    assert k((1 << 63) - 1) == k(-(1 << 63)) == "i" and k(1 << 63) is None
    assert fl._scan((Dev(a), 1), [], lambda cai: True) is None


def test_scan_reads_each_interface_once_in_launch_order() -> None:
    a, b, c = (np.arange(3, dtype=np.int64) + i for i in range(3))
    cais: list = []
    fl._scan(((Dev(a), 4, Dev(b)), Dev(c)), cais, _no_sync)
    assert [x["data"][0] for x in cais] == [a.ctypes.data, b.ctypes.data, c.ctypes.data]


def test_switch_and_no_launcher_without_a_driver(monkeypatch) -> None:
    """On by default, off with ``GPU_IVM_FAST_LAUNCH=0``; without numba-cuda's driver (here)
    no launcher is made, so every launch is numba-cuda's."""
    import importlib

    for value, want in (("0", False), ("1", True), (None, True)):
        if value is None:
            monkeypatch.delenv("GPU_IVM_FAST_LAUNCH", raising=False)
        else:
            monkeypatch.setenv("GPU_IVM_FAST_LAUNCH", value)
        assert importlib.reload(fl).ENABLED is want
    monkeypatch.setattr(fl, "_TRIED", False)
    assert fl.launcher(simulator=False) is None  # no cuda.core here
    monkeypatch.setattr(fl, "_TRIED", False)
    assert fl.launcher(simulator=True) is None


def test_launch_writes_the_recorded_kinds_words() -> None:
    """A launch of a recorded kind goes through ``FastLauncher.launch`` end to end (the
    driver call stubbed): one launch with the grid, block and words of its arguments; an
    unrecorded kind and a host array go to the ordinary launch instead."""
    f = fl.FastLauncher.__new__(fl.FastLauncher)
    f._types, f._stream, f._coop_kw = types, "stream", "is_cooperative"
    calls, ordinary = [], []
    f._launch = lambda stream, cfg, kern, *words: calls.append((stream, cfg, kern, words))
    f._Config = lambda **kw: kw
    f._device = lambda: 0
    f._kernels, f._configs, f.fast, f.slow = {}, {}, 0, 0
    a, b = np.arange(3, dtype=np.int64), np.zeros(2, np.bool_)
    args = ((Dev(a), Dev(b)), np.int64(9))
    arr64, arrb = types.Array(types.int64, 1, "C"), types.Array(types.boolean, 1, "C")
    disp = object()
    kinds = tuple(fl._scan(x, [], _no_sync) for x in args)
    f._kernels[(id(disp), 0, kinds)] = (disp, "K", (types.Tuple((arr64, arrb)), types.int64))

    def fallback(*x):
        ordinary.append(x)

    f.launch(disp, 5, 64, args, 16, fallback, _no_sync)
    assert not ordinary and f.fast == 1
    (stream, cfg, kern, words), = calls
    assert stream == "stream" and kern == "K"
    assert cfg == {"grid": (5, 1, 1), "block": (64, 1, 1), "shmem_size": 16,
                   "is_cooperative": False}
    assert [w.value if isinstance(w, ctypes._SimpleCData) else w for w in words] == \
        [0, 0, 3, 8, a.ctypes.data, 3, 8, 0, 0, 2, 1, b.ctypes.data, 2, 1, 9]
    f._record = lambda *x: None
    f.launch(disp, 5, 64, (Dev(a), np.int64(9)), 0, fallback, _no_sync)  # another kind
    f.launch(disp, 5, 64, ((a, Dev(b)), np.int64(9)), 0, fallback, _no_sync)  # host array
    assert len(ordinary) == 2 and f.slow == 2 and len(calls) == 1


def test_host_benchmark_takes_the_fast_path() -> None:
    """``python -m bench.fast_launch_host`` times launches of a recorded kind (its own check
    fails if any launch fell back)."""
    from bench.fast_launch_host import measure

    assert all(t > 0 for t in measure(fl, 3, n=10, rounds=1))
    assert all(t > 0 for t in measure(fl, 3, n=10, rounds=1, bundle=True))


class CountingDev(Dev):
    """A :class:`Dev` that counts the reads of its interface."""

    reads = 0

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    @property
    def __cuda_array_interface__(self) -> dict:
        CountingDev.reads += 1
        a = self.a
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
                "strides": None, "version": 3, "stream": None}


def _stub_launcher():
    f = fl.FastLauncher.__new__(fl.FastLauncher)
    f._types, f._stream, f._coop_kw = types, "stream", "is_cooperative"
    calls: list = []
    f._launch = lambda stream, cfg, kern, *words: calls.append(words)
    f._Config = lambda **kw: kw
    f._device = lambda: 0
    f._kernels, f._configs, f.fast, f.slow = {}, {}, 0, 0
    return f, calls


def _plain(words) -> list:
    return [w.value if isinstance(w, ctypes._SimpleCData) else w for w in words]


def test_bundle_words_are_kept_on_the_bundle() -> None:
    """A :class:`~gpu_ivm.kernels.cuda_fast_launch.Bundle` (a store's arrays as
    ``device_bundle`` returns them) is scanned at its first fast launch only: later launches
    write the same words as a plain tuple of the same arrays without reading an interface,
    its kind equals the plain tuple's (one recorded kernel serves both), and a bundle whose
    member needs numba-cuda's launch keeps nothing and falls back every time."""
    a, b = np.arange(4, dtype=np.int64), np.zeros(3, np.bool_)
    arr64, arrb = types.Array(types.int64, 1, "C"), types.Array(types.boolean, 1, "C")
    plain = (CountingDev(a), CountingDev(b))
    bundle = fl.Bundle(plain)
    assert bundle == plain and isinstance(bundle, tuple)
    assert fl._scan(bundle, [], _no_sync) == fl._scan(plain, [], _no_sync)
    f, calls = _stub_launcher()
    disp = object()
    kinds = (fl._scan(plain, [], _no_sync), "i")
    f._kernels[(id(disp), 0, kinds)] = (disp, "K", (types.Tuple((arr64, arrb)), types.int64))

    def fallback(*x):
        raise AssertionError("fell back")

    f.launch(disp, 1, 32, (plain, np.int64(3)), 0, fallback, _no_sync)
    CountingDev.reads = 0
    for _ in range(3):
        f.launch(disp, 1, 32, (fl.Bundle(plain), np.int64(3)), 0, fallback, _no_sync)
    assert CountingDev.reads == 6  # three fresh bundles: two interfaces each, once
    CountingDev.reads = 0
    for _ in range(4):
        f.launch(disp, 1, 32, (bundle, np.int64(3)), 0, fallback, _no_sync)
    assert CountingDev.reads == 0  # scanned by the equality check above, kept since
    assert f.fast == 8 and f.slow == 0
    want = [0, 0, 4, 8, a.ctypes.data, 4, 8, 0, 0, 3, 1, b.ctypes.data, 3, 1, 3]
    assert all(_plain(w) == want for w in calls)

    synced = fl.Bundle(plain)
    assert fl._scan(synced, [], lambda cai: True) is None
    assert "fast" not in synced.__dict__
    ordinary: list = []
    f.launch(disp, 1, 32, (synced, np.int64(3)), 0, lambda *x: ordinary.append(x),
             lambda cai: True)
    assert len(ordinary) == 1 and f.slow == 1


def test_bundle_words_switch(monkeypatch) -> None:
    """``GPU_IVM_BUNDLE_WORDS=0`` (``KEEP_BUNDLE_WORDS`` False): a bundle is scanned at every
    launch as a plain tuple is, and writes the same words."""
    a = np.arange(4, dtype=np.int64)
    arr64 = types.Array(types.int64, 1, "C")
    plain = (CountingDev(a),)
    monkeypatch.setattr(fl, "KEEP_BUNDLE_WORDS", False)
    f, calls = _stub_launcher()
    disp = object()
    f._kernels[(id(disp), 0, (fl._scan(plain, [], _no_sync),))] = (
        disp, "K", (types.UniTuple(arr64, 1),))
    bundle = fl.Bundle(plain)
    CountingDev.reads = 0
    for _ in range(3):
        f.launch(disp, 1, 32, (bundle,), 0, None, _no_sync)
    assert CountingDev.reads == 3 and "fast" not in bundle.__dict__ and f.fast == 3
    assert all(_plain(w) == [0, 0, 4, 8, a.ctypes.data, 4, 8] for w in calls)


def test_store_bundle_is_a_bundle() -> None:
    """``device_bundle`` (the cuda backend's form of ``ZStore.nt``) returns a Bundle whose
    members are the store's arrays in launch form (host arrays pass through unchanged)."""
    import importlib

    cuda_store = importlib.import_module("gpu_ivm.kernels.cuda_store")
    st = tuple(np.arange(3, dtype=np.int64) + i for i in range(13))
    got = cuda_store.device_bundle(st)
    assert type(got) is (fl.Bundle if cuda_store.CACHE_VIEWS else tuple)
    assert all(x is y for x, y in zip(got, st))
