"""ε chosen by the engine vs fixed ε, on uniform R-MAT and on celebrity churn, in one process.

Each stream is generated once; then, round after round, every ε setting loads the base graph
from scratch and applies every batch (delta path forced, so only ε differs), the settings
alternating within a round so that a change in the machine's load hits all of them alike.
Prints one line per (stream, ε, round) and a summary per stream: updates/s (best round and
mean over rounds) and the ratio of the default (``auto``) to each fixed ε.

Run from the repository root::

    python -m bench.eps_compare --scale 18 --rounds 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpu_ivm import GraphEngine
from gpu_ivm.workloads import celebrity_churn, mixed_stream

SETTINGS = ("auto", "1/2", "1")


def measure(stream, epsilon: str) -> dict:
    """Load the base graph and apply every batch; updates/s over the batches only."""
    g = GraphEngine(epsilon=epsilon)
    g.policy.force = "delta"
    g.load((stream.base_src, stream.base_dst))
    secs, ups = [], 0
    for b in stream.batches():
        secs.append(g.apply(b).seconds)
        ups += int(len(b["src"]))
    return {"epsilon": str(g.epsilon), "heavy": int(np.count_nonzero(g.rels[0].heavy)),
            "updates_per_s": ups / sum(secs), "median_ms": float(np.median(secs)) * 1e3,
            "p99_ms": float(np.percentile(secs, 99)) * 1e3, "count": g.count()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=int, default=18)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--celebrities", type=int, default=64)
    p.add_argument("--celebrity-degree", type=int, default=40_000)
    p.add_argument("--only", choices=["uniform", "celebrity"], default=None)
    a = p.parse_args(argv)
    streams = {
        "uniform": lambda: mixed_stream(a.scale, batch_size=a.batch_size,
                                        n_batches=a.batches, seed=1),
        "celebrity": lambda: celebrity_churn(a.scale, n_celebrities=a.celebrities,
                                             celebrity_degree=a.celebrity_degree,
                                             batch_size=a.batch_size, n_batches=a.batches,
                                             seed=1),
    }
    for name, make in streams.items():
        if a.only and name != a.only:
            continue
        t = time.perf_counter()
        st = make()
        print(f"{name}: scale {a.scale}, {st.n_base:,} base edges, {a.batches} batches of "
              f"{a.batch_size:,} (generated in {time.perf_counter() - t:.1f} s)", flush=True)
        runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
        for rnd in range(a.rounds):
            order = SETTINGS if rnd % 2 == 0 else SETTINGS[::-1]
            for s in order:
                r = measure(st, s)
                runs[s].append(r)
                print(f"  round {rnd} epsilon={s:4s} (in use {r['epsilon']}, {r['heavy']} heavy)"
                      f" {r['updates_per_s']:>12,.0f} updates/s  median {r['median_ms']:7.2f} ms"
                      f"  p99 {r['p99_ms']:7.2f} ms", flush=True)
        counts = {r["count"] for rs in runs.values() for r in rs}
        assert len(counts) == 1, f"settings disagree on the count: {counts}"
        best = {s: max(r["updates_per_s"] for r in rs) for s, rs in runs.items()}
        mean = {s: float(np.mean([r["updates_per_s"] for r in rs])) for s, rs in runs.items()}
        print(f"  summary ({name}): " + ", ".join(
            f"{s}: best {best[s]:,.0f} / mean {mean[s]:,.0f} updates/s" for s in SETTINGS))
        print("  auto / fixed (best rounds): " + ", ".join(
            f"vs {s}: {best['auto'] / best[s]:.2f}x" for s in SETTINGS[1:]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
