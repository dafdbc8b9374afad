"""Timing of gpu_ivm.cq.Engine (docs/queries-cq.md, "Measured cost").

Loads N = 10^6 random tuples per relation (values in [0, 10^5)), applies three batches of 10^4
inserts into R (the fastest is printed), answers 10^4 requests and counts.
Run: ``.venv/bin/python bench/cq_engine_timing.py``.
"""

from __future__ import annotations

import time

import numpy as np

from gpu_ivm.cq import Engine

N, DOMAIN, BATCH = 1_000_000, 100_000, 10_000
QUERIES = ["Q(B,C | A) = R(A,B), S(A,C)", "Q(C | A) = R(A,B), S(B,C)"]


def main() -> None:
    rng = np.random.default_rng(0)
    for text in QUERIES:
        eng = Engine(text)
        first = {"a": rng.integers(0, DOMAIN, N), "b": rng.integers(0, DOMAIN, N)}
        second = {"x": rng.integers(0, DOMAIN, N), "c": rng.integers(0, DOMAIN, N)}
        t = time.perf_counter()
        eng.load(R=first, S=second)
        load_s = time.perf_counter() - t
        apply_s = []
        for _ in range(3):
            batch = {"a": rng.integers(0, DOMAIN, BATCH), "b": rng.integers(0, DOMAIN, BATCH),
                     "mult": np.ones(BATCH, dtype=np.int64)}
            t = time.perf_counter()
            eng.apply({"R": batch})
            apply_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = eng.request({"A": rng.integers(0, DOMAIN, BATCH)})
        request_s = time.perf_counter() - t
        print(f"{text}: {eng.plan.cls}; load {load_s:.2f} s; apply {min(apply_s):.3f} s; "
              f"request {request_s:.3f} s ({out.num_rows} answers); count {eng.count()}")


if __name__ == "__main__":
    main()
