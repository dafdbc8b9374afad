"""ε chosen by the engine vs fixed ε, on uniform R-MAT and on celebrity churn, in one process.

Each stream is generated once; then, per round, one engine per ε setting loads the base graph
(delta path forced, so only ε differs) and every batch goes to all of them before the next
one, in a rotating order, so that a change in the machine's load (a shared machine) hits every
setting alike. Prints per stream and setting the updates/s over all rounds, the median and p99
batch time, and the ratios of each fixed ε's time to the default's (``auto``).

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


def load(stream, epsilon: str) -> GraphEngine:
    g = GraphEngine(epsilon=epsilon)
    g.policy.force = "delta"  # only ε differs between the engines
    g.load((stream.base_src, stream.base_dst))
    return g


def measure(stream, settings, rounds: int) -> dict[str, dict]:
    """Per setting, one engine per round; batch i goes to every engine of the round before batch
    i + 1, in a rotating order, so a change in the machine's load hits every setting alike.
    Returns per setting the per-batch seconds (all rounds) and the engine facts."""
    out = {s: {"seconds": [], "updates": 0} for s in settings}
    for rnd in range(rounds):
        engines = {s: load(stream, s) for s in settings}
        for i, b in enumerate(stream.batches()):
            k = (i + rnd) % len(settings)
            for s in settings[k:] + settings[:k]:
                out[s]["seconds"].append(engines[s].apply(b).seconds)
                out[s]["updates"] += int(len(b["src"]))
        counts = {g.count() for g in engines.values()}
        assert len(counts) == 1, f"settings disagree on the count: {counts}"
        for s, g in engines.items():
            out[s].update(epsilon=str(g.epsilon), count=g.count(),
                          heavy=int(np.count_nonzero(g.rels[0].heavy)),
                          revisions=g._stats["eps_revisions"])
        del engines
    return out


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
        res = measure(st, SETTINGS, a.rounds)
        for s in SETTINGS:
            r, sec = res[s], np.asarray(res[s]["seconds"])
            print(f"  epsilon={s:4s} (in use {r['epsilon']}, {r['heavy']} heavy, "
                  f"{r['revisions']} revisions) {r['updates'] / sec.sum():>12,.0f} updates/s  "
                  f"median {np.median(sec) * 1e3:7.2f} ms  p99 "
                  f"{np.percentile(sec, 99) * 1e3:7.2f} ms", flush=True)
        auto = np.asarray(res["auto"]["seconds"])
        print("  fixed / auto, total time: " + ", ".join(
            f"{s}: {np.sum(res[s]['seconds']) / auto.sum():.2f}x" for s in SETTINGS[1:])
            + "; median of per-batch ratios: " + ", ".join(
            f"{s}: {np.median(np.asarray(res[s]['seconds']) / auto):.2f}x"
            for s in SETTINGS[1:]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
