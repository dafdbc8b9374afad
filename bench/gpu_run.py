"""``make bench-gpu``: the count engine on the cuda backend against the cpu backend, one run.

    python -m bench.gpu_run [--scale 18] [--sizes 1000 10000 100000] [--batches 10]
                            [--celebrity-scale 16] [--epsilon auto] [--out FILE.jsonl]

Needs a CUDA device (CuPy and numba-cuda installed: ``pip install 'gpu_ivm[gpu-cu12]'`` or
``[gpu-cu13]``); without one it prints why and exits with status 2, having run nothing.

For each workload (the R-MAT mixed stream at every batch size, then celebrity churn) it loads
the base graph into a cuda engine and a cpu engine, applies the same batches to both, and
checks after every batch that the two counts agree (a mismatch is an error: exit status 1).
Per batch it records the wall time of each backend (the device synchronized before the clock
is read), the path the engine took (delta or recount), and on the cuda side the number of
Numba kernel launches (every launch of the package goes through
``gpu_ivm.kernels.cuda_launch.launch``, which this script counts; ``fast_launches_per_batch``:
those the fast launch took, None without it). The ``cuda-dev`` side gets
each batch as device arrays (uploaded before its clock starts), as a cuDF or CuPy caller hands
it over, and prepares it on the device (``device_batches``: the batches read that way, 0 under
the simulator, whose device arrays are NumPy arrays; ``prepared_on_host``: those that needed
the host's rules). The first batch of each
workload is applied untimed (it is where compilation would show). A table goes to stdout and
one JSON line per (workload, backend) to ``--out``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

RECORDS: list[dict] = []


class LaunchCounter:
    """Counts the package's Numba kernel launches (all go through ``cuda_launch.launch``)."""

    def __init__(self) -> None:
        from gpu_ivm.kernels import cuda_launch

        self.n = 0
        original = cuda_launch.launch

        def counted(*args, **kw):
            self.n += 1
            return original(*args, **kw)

        cuda_launch.launch = counted
        # modules that imported the name directly
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("gpu_ivm.kernels.") and \
                    getattr(mod, "launch", None) is original:
                mod.launch = counted


def _workloads(args):
    from gpu_ivm.workloads import celebrity_churn, mixed_stream

    n = args.batches + 1 + (3 if args.profile else 0)  # untimed first, timed, profiled
    for b in args.sizes:
        st = mixed_stream(args.scale, batch_size=b, n_batches=n, seed=1)
        yield f"rmat{args.scale} B={b}", (st.base_src, st.base_dst), st.batches()
    if args.celebrity_scale:
        st = celebrity_churn(args.celebrity_scale, batch_size=1000,
                             celebrity_degree=min(40_000, 1 << args.celebrity_scale),
                             n_batches=n, seed=0)
        yield f"celebrity{args.celebrity_scale} B=1000", (st.base_src, st.base_dst), \
            st.batches()


def _run(name, base, batches, args, counter, out) -> bool:
    """Load ``base`` into every engine, apply the batches to each in turn, check the counts;
    the first batch untimed, then ``args.batches`` timed, then (``--profile``) a few more
    under cProfile, kept out of the timings."""
    from gpu_ivm.kernels import cuda_launch

    from gpu_ivm import GraphEngine
    from gpu_ivm.backend import get_backend

    cuda = get_backend("cuda")
    sides = ["cuda"] + ([] if args.host_input_only else ["cuda-dev"]) + ["cpu"] + \
        (["cuda-sync"] if args.compare_sync else [])
    engines, load_s = {}, {}
    for side in sides:
        with _sync_mode(cuda_launch, side):
            t = time.perf_counter()
            engines[side] = GraphEngine(epsilon=args.epsilon,
                                        backend="cpu" if side == "cpu" else "cuda")
            engines[side].load(base)
            cuda.synchronize()
            load_s[side] = time.perf_counter() - t
    ok = len({e.count() for e in engines.values()}) == 1
    times = {s: [] for s in sides}
    launches = {s: [] for s in sides}
    fast = {s: [] for s in sides}  # launches per batch that took the fast launch
    fl = cuda_launch._fast_launcher()
    paths = []
    prof = cProfile.Profile() if args.profile else None
    n_prof = 0
    for i, b in enumerate(batches):
        counts = {}
        profiled = prof is not None and i > args.batches
        for side in sides:
            if profiled and side != "cuda":
                counts[side] = engines[side].apply(b).triangles
                continue
            given = b
            if side == "cuda-dev":  # handed over in device memory, uploaded before the clock
                given = {k: cuda.to_device(np.asarray(v)) for k, v in b.items()}
                cuda.synchronize()
            n0 = counter.n
            f0 = fl.fast if fl is not None else 0
            with _sync_mode(cuda_launch, side):
                if profiled:
                    prof.enable()
                t = time.perf_counter()
                rep = engines[side].apply(given)
                cuda.synchronize()
                dt = time.perf_counter() - t
                if profiled:
                    prof.disable()
            counts[side] = rep.triangles
            if i and not profiled:
                times[side].append(dt)
                if side != "cpu":
                    launches[side].append(counter.n - n0)
                    fast[side].append((fl.fast if fl is not None else 0) - f0)
                if side == "cuda":
                    paths.append(rep.path)
        n_prof += profiled
        if len(set(counts.values())) != 1:
            print(f"MISMATCH {name} batch {i}: {counts}")
            ok = False
    if prof is not None and n_prof:
        _print_profile(name, prof, n_prof, args.profile)
    bsize = int(name.split("B=")[1])
    for side in sides:
        t = times[side]
        med = statistics.median(t) if t else float("nan")
        rec = {"workload": name, "backend": side, "device": cuda.device if side != "cpu" else
               platform.processor() or platform.machine(), "load_s": round(load_s[side], 4),
               "median_batch_s": med, "updates_per_s": bsize / med if t else None,
               "batches": len(t), "agree": ok}
        if side != "cpu":
            rec["fast_launches_per_batch"] = (statistics.median(fast[side])
                                              if fl is not None and fast[side] else None)
            rec["launches_per_batch"] = (statistics.median(launches[side]) if launches[side]
                                         else None)
        if side == "cuda":
            rec["paths"] = sorted(set(paths))
        if side == "cuda-dev":  # batches read as device columns, and of those judged on the host
            rec["device_batches"] = engines[side].device_batches
            rec["prepared_on_host"] = engines[side].device_to_host
        print(json.dumps(rec))
        RECORDS.append(rec)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
    return ok


class _sync_mode:
    """``cuda-sync``: numba-cuda's stream sync for every launched array (the old behaviour,
    ``GPU_IVM_CAI_SYNC=always``), for the side-by-side timing; other sides: as configured."""

    def __init__(self, cuda_launch, side: str) -> None:
        self.mod, self.on = cuda_launch, side == "cuda-sync"

    def __enter__(self):
        self.saved = self.mod._ALWAYS_SYNC
        if self.on:
            self.mod._ALWAYS_SYNC = True

    def __exit__(self, *exc) -> None:
        self.mod._ALWAYS_SYNC = self.saved


def _print_profile(name: str, prof: cProfile.Profile, n: int, top: int) -> None:
    """The cuda batches' host-side profile: own time per batch of the ``top`` functions."""
    rows = []
    for (file, line, fn), (_, ncalls, tottime, cumtime, _) in pstats.Stats(prof).stats.items():
        where = "/".join(file.rsplit("/", 2)[-2:])
        rows.append((tottime / n, ncalls / n, cumtime / n, f"{where}:{line}:{fn}"))
    rows.sort(reverse=True)
    buf = io.StringIO()
    buf.write(f"-- host profile of the cuda batches of {name} (per batch; {n} batches)\n")
    buf.write(f"{'own ms':>9} {'calls':>8} {'cum ms':>9}  function\n")
    for own, calls, cum, where in rows[:top]:
        buf.write(f"{own * 1e3:9.3f} {calls:8.1f} {cum * 1e3:9.3f}  {where}\n")
    print(buf.getvalue(), end="")


def _table(records: list[dict]) -> str:
    """The run's summary: one line per workload, cuda and cpu side by side, then the batches
    handed over on the device (cuda-dev) and numba-cuda's stream syncs (cuda-sync) where run."""
    by = {}
    for r in records:
        by.setdefault(r["workload"], {})[r["backend"]] = r
    lines = [f"{'workload':<22} {'cuda upd/s':>12} {'cpu upd/s':>12} {'cuda/cpu':>9} "
             f"{'launches':>9} {'paths':<18} agree  cuda-dev upd/s  cuda-sync upd/s"]
    for w, d in by.items():
        c, h = d.get("cuda", {}), d.get("cpu", {})
        cu, cp = c.get("updates_per_s") or 0.0, h.get("updates_per_s") or 0.0
        extra = "".join(f"  {s}={d[s]['updates_per_s']:,.0f}" for s in ("cuda-dev", "cuda-sync")
                        if d.get(s, {}).get("updates_per_s"))
        lines.append(f"{w:<22} {cu:12,.0f} {cp:12,.0f} {cu / cp if cp else 0:9.2f} "
                     f"{c.get('launches_per_batch') or 0:9.0f} "
                     f"{','.join(c.get('paths', [])):<18} {c.get('agree')}" + extra)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=18)
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--celebrity-scale", type=int, default=16)
    p.add_argument("--epsilon", default="auto")
    p.add_argument("--out", default=None)
    p.add_argument("--profile", type=int, default=0, metavar="TOP",
                   help="cProfile 3 more cuda batches (after the timed ones) and print the "
                        "TOP functions by own time")
    p.add_argument("--compare-sync", action="store_true",
                   help="also run a cuda engine with numba-cuda's stream sync for every "
                        "launched array (GPU_IVM_CAI_SYNC=always), side by side")
    p.add_argument("--host-input-only", action="store_true",
                   help="leave out the cuda-dev side (each batch handed over as device arrays, "
                        "uploaded before the clock starts, prepared on the device)")
    p.add_argument("--simulator", action="store_true",
                   help="accept Numba's CUDA simulator as the device (NUMBA_ENABLE_CUDASIM=1; "
                        "for testing this script with tiny sizes)")
    args = p.parse_args(argv)
    from gpu_ivm.backend import _device_problem, simulator_enabled

    problem = None if args.simulator and simulator_enabled() else _device_problem()
    if problem is not None:
        print(f"bench-gpu: no usable CUDA device, nothing was run ({problem}).")
        return 2
    counter = LaunchCounter()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    out = open(args.out, "a") if args.out else None
    ok = True
    for name, base, batches in _workloads(args):
        print(f"== {name}", flush=True)
        try:
            ok &= _run(name, base, batches, args, counter, out)
        except Exception:
            traceback.print_exc()
            ok = False
    print(_table(RECORDS))
    if not ok:
        print("bench-gpu: FAILED (a count disagreed or a workload raised; see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
