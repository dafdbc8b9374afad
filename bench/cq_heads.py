"""The triangle queries' heads: the triangle engine against the view trees, side by side.

    python -m bench.cq_heads [--tuples 50000] [--values 3000] [--batch 1000] [--batches 8]
                             [--requests 200] [--seed 5]

For each head over ``R(A,B), S(B,C), T(C,A)`` (the count, per-value and per-pair counts, the
listing, and their access patterns), build a
:class:`~gpu_ivm.cq.triangle_strategy.TriangleQueryEngine` and a view-tree
:class:`~gpu_ivm.cq.engine.Engine` on the same uniform relations (``--tuples`` distinct pairs
over ``--values`` values each), apply the same batches to both (a third of ``--batch`` rows
per relation, half deletes of present tuples, half inserts of absent ones; the first batch
untimed) and time one request table of ``--requests`` random input values (after one
untimed request). Prints the median batch time of each engine, their ratio and the request
times; the answers of the two engines are compared and a difference is an error. This is
what :func:`gpu_ivm.cq.triangle_strategy.prefers_triangle_engine` was decided from
(docs/queries-cq.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

HEADS = ["Q( | )", "Q(A | )", "Q( | A)", "Q(A,B | )", "Q(B | A)", "Q( | A,B)", "Q(A,B,C | )",
         "Q(B,C | A)", "Q(C | A,B)", "Q( | A,B,C)"]
BODY = "R(A,B), S(B,C), T(C,A)"
COLS = {"R": ("a", "b"), "S": ("b", "c"), "T": ("c", "a")}


def _stream(args):
    rng = np.random.default_rng(args.seed)
    base = {n: np.unique(rng.integers(0, args.values, (args.tuples, 2)), axis=0) for n in COLS}
    present = {n: {tuple(x) for x in base[n].tolist()} for n in COLS}
    per = args.batch // 6
    batches = []
    for _ in range(args.batches + 1):
        bt = {}
        for n in COLS:
            pres = sorted(present[n])
            dels = [pres[i] for i in rng.choice(len(pres), min(per, len(pres)), replace=False)]
            ins: list[tuple] = []
            while len(ins) < per:
                t = tuple(rng.integers(0, args.values, 2).tolist())
                if t not in present[n] and t not in ins:
                    ins.append(t)
            present[n].difference_update(dels)
            present[n].update(ins)
            k = np.array(dels + ins, np.int64).reshape(-1, 2)
            m = np.r_[-np.ones(len(dels), np.int64), np.ones(len(ins), np.int64)]
            bt[n] = {COLS[n][0]: k[:, 0], COLS[n][1]: k[:, 1], "mult": m}
        batches.append(bt)
    return base, batches


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cq_heads", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tuples", type=int, default=50_000)
    p.add_argument("--values", type=int, default=3000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(argv)
    from gpu_ivm.cq.engine import Engine
    from gpu_ivm.cq.triangle_strategy import TriangleQueryEngine

    base, batches = _stream(args)
    req_rng = np.random.default_rng(args.seed + 1)
    print(f"{'head':<14} {'tri ms/batch':>12} {'view ms/batch':>13} {'view/tri':>9} "
          f"{'tri request ms':>15} {'view request ms':>16} {'rows':>7}")
    ok = True
    for head in HEADS:
        q = f"{head} = {BODY}"
        inputs = [v for v in "ABC" if v in head.split("|")[1]]
        reqs = {v: req_rng.integers(0, args.values, args.requests) for v in inputs} or None
        res = {}
        for name, cls in (("tri", TriangleQueryEngine), ("view", Engine)):
            eng = cls(q)
            eng.load(**{n: {COLS[n][0]: base[n][:, 0], COLS[n][1]: base[n][:, 1]}
                        for n in COLS})
            times = []
            for i, bt in enumerate(batches):
                t = time.perf_counter()
                eng.apply(bt)
                if i:
                    times.append(time.perf_counter() - t)
            eng.request(reqs)
            t = time.perf_counter()
            out = eng.request(reqs)
            res[name] = (statistics.median(times) * 1e3, (time.perf_counter() - t) * 1e3, out)
        tri, view = res["tri"], res["view"]
        if not tri[2].equals(view[2]):
            print(f"MISMATCH {head}: the engines' answers differ")
            ok = False
        print(f"{head:<14} {tri[0]:12.2f} {view[0]:13.2f} {view[0] / tri[0]:9.2f} "
              f"{tri[1]:15.2f} {view[1]:16.2f} {tri[2].num_rows:7d}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
