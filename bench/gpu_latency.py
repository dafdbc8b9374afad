"""The host's cost of one launch, one CuPy call, one read and one upload, on this device.

    python -m bench.gpu_latency [--repeat 2000] [--out FILE.json]

docs/gpu.md's cost model prices a batch as (launches + CuPy calls) × L + reads × R + uploads
+ device work. This script measures L and R directly, with nothing else running, so the
model's constants are readings rather than assumptions:

- ``sync``: ``cuda.synchronize()`` on an idle device;
- ``launch_numba``: an empty ``@cuda.jit`` kernel with one numba device array argument;
- ``launch_cupy6`` / ``launch_tuple6``: the same kernel shape with six CuPy arrays, top level
  and as a bundle, through the package's launch without the fast launch (each array
  converted by ``device_view``, then numba-cuda's launch; on 2026-11-28's second H200 call
  these two items went through the fast launch, which ``launch`` takes by default now);
- ``launch_views6``: six arrays converted once beforehand (what ``device_bundle`` caches);
- ``launch_raw_cupy6`` / ``launch_raw_tuple6``: the six CuPy arrays handed to numba-cuda as
  they are (numba-cuda >= 0.30 types them), top level and as a tuple;
- ``launch_fast6`` / ``launch_fast_tuple6``: the six through
  :class:`gpu_ivm.kernels.cuda_fast_launch.FastLauncher` (argument words written from the
  arrays' interfaces);
- ``cupy_add``, ``cupy_cumsum``, ``cupy_sum``: one CuPy call on 1,000 int64 elements;
- ``read``: ``int()`` of one element of a device array (the round trip, with its sync);
- ``upload_72kB`` / ``upload_7MB``: ``cupy.asarray`` of a host array of that size (a B = 10³
  and a B = 10⁵ batch's upload);
- ``sort_200k``: ``cupy.sort`` of 2·10⁵ int64 keys, synchronized (a B = 10⁵ batch's sort).

Per item the host time per call in µs, the median of 5 rounds of ``--repeat`` calls (async
calls are queued ``--repeat`` times and synchronized once, so the figure is the host's cost,
not the device's). Needs a CUDA device; ``--simulator`` accepts Numba's simulator (for
testing this script; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import cuda


def _kernels():
    @cuda.jit
    def one(a):
        i = cuda.grid(1)
        if i < 0:  # never: the launch is what is timed
            a[0] = 1

    @cuda.jit
    def six(a, b, c, d, e, f):
        i = cuda.grid(1)
        if i < 0:
            a[0] = b[0] + c[0] + d[0] + e[0] + f[0]

    @cuda.jit
    def bundle(t):
        i = cuda.grid(1)
        if i < 0:
            t[0][0] = t[1][0] + t[2][0] + t[3][0] + t[4][0] + t[5][0]

    return one, six, bundle


def measure(repeat: int, rounds: int = 5) -> dict[str, float]:
    """µs per call of each item (see the module docstring)."""
    import cupy as cp
    from gpu_ivm.kernels import cuda_launch
    from gpu_ivm.kernels.cuda_fast_launch import FastLauncher
    from gpu_ivm.kernels.cuda_launch import device_view

    one, six, bundle = _kernels()
    try:
        fast = FastLauncher()
    except Exception as exc:  # reported in the items below
        fast = exc

    def ordinary(kernel, args):  # numba-cuda's launch after device_view, as before the fast one
        cuda_launch._ordinary_launch(kernel, 1, 32, args, 0)

    def fast_launch(kernel, args):
        if isinstance(fast, Exception):
            raise fast
        fast.launch(kernel, 1, 32, args, 0, cuda_launch._ordinary_launch,
                    cuda_launch.needs_stream_sync)

    arrs = [cp.arange(1000, dtype=cp.int64) for _ in range(6)]
    views = [device_view(a) for a in arrs]
    nb_arr = cuda.to_device(np.zeros(8, np.int64))
    host_small = np.arange(9000, dtype=np.int64)     # 72 kB
    host_big = np.arange(900_000, dtype=np.int64)    # 7.2 MB
    keys = cp.asarray(np.random.default_rng(0).integers(0, 1 << 40, 200_000))
    x = arrs[0]

    items = {
        "sync": (lambda: cuda.synchronize(), True),
        "launch_numba": (lambda: one[1, 32](nb_arr), False),
        "launch_cupy6": (lambda: ordinary(six, tuple(arrs)), False),
        "launch_tuple6": (lambda: ordinary(bundle, (tuple(arrs),)), False),
        "launch_views6": (lambda: six[1, 32](*views), False),
        "launch_raw_cupy6": (lambda: six[1, 32](*arrs), False),
        "launch_raw_tuple6": (lambda: bundle[1, 32](tuple(arrs)), False),
        "launch_fast6": (lambda: fast_launch(six, tuple(arrs)), False),
        "launch_fast_tuple6": (lambda: fast_launch(bundle, (tuple(arrs),)), False),
        "cupy_add": (lambda: x + 1, False),
        "cupy_cumsum": (lambda: cp.cumsum(x), False),
        "cupy_sum": (lambda: x.sum(), False),
        "read": (lambda: int(x[5]), True),
        "upload_72kB": (lambda: cp.asarray(host_small), True),
        "upload_7MB": (lambda: cp.asarray(host_big), True),
        "sort_200k": (lambda: cp.sort(keys), True),
    }
    out = {}
    for name, (fn, sync_each) in items.items():
        n = repeat if name not in ("upload_7MB", "sort_200k") else max(20, repeat // 50)
        try:
            for _ in range(3):  # compile, allocate, warm
                fn()
            cuda.synchronize()
            per = []
            for _ in range(rounds):
                t = time.perf_counter()
                for _ in range(n):
                    fn()
                    if sync_each:
                        cuda.synchronize()
                cuda.synchronize()
                per.append((time.perf_counter() - t) / n * 1e6)
            out[name] = round(statistics.median(per), 2)
        except Exception as exc:  # one item failing does not lose the others
            out[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=2000)
    p.add_argument("--out", default=None)
    p.add_argument("--simulator", action="store_true")
    a = p.parse_args(argv)
    from gpu_ivm.backend import _device_problem

    problem = _device_problem()
    if problem and not a.simulator:
        print(f"no usable CUDA device, nothing was run: {problem}")
        return 2
    res = measure(a.repeat)
    if a.simulator:
        res["device"] = "simulator"
    else:
        name = cuda.get_current_device().name
        res["device"] = name.decode() if isinstance(name, bytes) else str(name)
    for k, v in res.items():
        print(f"{k:>14}  {v}" + (" µs" if isinstance(v, float) else ""))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
