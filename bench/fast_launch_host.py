"""The fast launch's host work per launch, without a GPU (the driver call stubbed).

    python -m bench.fast_launch_host [--arrays 20] [--module PATH] [--bundle]

:class:`gpu_ivm.kernels.cuda_fast_launch.FastLauncher` spends host time per launch on reading
each array's ``__cuda_array_interface__``, deriving the arguments' kinds and writing the
argument words; the driver call itself is cheap next to it on a device
(docs/gpu.md, "Measured on an H200"). This times that Python work on any machine: a kernel
whose kind is already recorded, launched with a bundle of ``--arrays`` int64 arrays (plus a
second bundle of 6 and two scalars), the interfaces built at every read as CuPy's and numba's
are, ``cuda.core.launch`` replaced by a no-op. ``--module`` times another version of the
module (a file), for before/after comparisons. ``--bundle`` passes the first bundle as a
``Bundle`` (what ``device_bundle`` makes of a store's arrays), whose words the launcher keeps
after its first launch. Prints µs per launch, five rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np
from numba.core import types


class _Array:
    """A device array stand-in whose interface is a fresh dict at each read (host memory)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.a.shape, "typestr": self.a.dtype.str,
                "data": (self.a.ctypes.data, False), "strides": None, "version": 3,
                "stream": None}


def _load(path: str | None):
    if path is None:
        from gpu_ivm.kernels import cuda_fast_launch

        return cuda_fast_launch
    spec = importlib.util.spec_from_file_location("fast_launch_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(mod, n_arrays: int, n: int = 20_000, rounds: int = 5,
            bundle: bool = False) -> list[float]:
    """µs per launch of each round (see the module docstring)."""
    f = mod.FastLauncher.__new__(mod.FastLauncher)
    f._types, f._stream, f._coop_kw = types, 0, "is_cooperative"
    f._launch = lambda *a: None
    f._Config = lambda **kw: kw
    f._device = lambda: 0
    f._kernels, f._configs, f.fast, f.slow = {}, {}, 0, 0
    arrays = [_Array(np.zeros(100, np.int64)) for _ in range(n_arrays + 6)]
    first = mod.Bundle(arrays[:n_arrays]) if bundle else tuple(arrays[:n_arrays])
    args = (first, tuple(arrays[n_arrays:]), np.int64(5), 7)
    arr = types.Array(types.int64, 1, "C")
    argtypes = (types.UniTuple(arr, n_arrays), types.UniTuple(arr, 6), types.int64,
                types.int64)

    def no_sync(cai) -> bool:
        return False

    def ordinary(*a):
        raise RuntimeError("the recorded kind was not found")

    dispatcher = object()
    if hasattr(mod, "_scan"):
        kinds = tuple(mod._scan(a, [], no_sync) for a in args)
    else:  # the version before the one-pass scan
        kinds = tuple(mod._leaf_kind(a) for a in args)
    f._kernels[(id(dispatcher), 0, kinds)] = (dispatcher, "compiled", argtypes)
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            f.launch(dispatcher, 4, 256, args, 0, ordinary, no_sync)
        out.append(round((time.perf_counter() - t) / n * 1e6, 2))
    assert f.fast == n * rounds and f.slow == 0
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fast_launch_host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arrays", type=int, default=20)
    p.add_argument("--module", default=None)
    p.add_argument("--bundle", action="store_true")
    a = p.parse_args(argv)
    res = measure(_load(a.module), a.arrays, bundle=a.bundle)
    form = "a Bundle of " if a.bundle else ""
    print(f"host work per launch of {form}{a.arrays} + 6 arrays and 2 scalars (µs): {res}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
