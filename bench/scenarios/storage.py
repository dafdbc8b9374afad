"""``storage``: amortized cost of ZStore batches as the relation grows from ~1M to ~16M tuples.

A relation of N distinct random keys (first ids uniform over n = N/16 ids, second ids uniform
in [0, n)), values 1, is built with ``ZStore.from_sorted``. Then batches of B sorted unique
keys are applied with ``ZStore.add``: B/2 deletes (delta -1) of present base keys, taken in a
random order, and B/2 inserts (delta +1) of keys that were never present. Batches run until
more than N/2 keys have been inserted, so the youngest runs have cascaded into the base run
(``GROWTH`` = 4) and the amortized cost includes the big merges, or until the time budget runs
out (then the record says ``capped``). Generating and sorting a batch's keys is not timed; only
``store.add`` is.
"""

from __future__ import annotations

import gc
import time

import numpy as np

from bench import machine
from bench.context import RunContext
from bench.stats import summarize
from gpu_ivm.store import ZStore

NAME = "storage"
TITLE = "ZStore scaling (sorted-run LSM storage)"


def make_keys(rng: np.random.Generator, N: int, extra: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``N + extra`` distinct packed keys in random order over n = N/16 ids: the first N are
    the base relation, the rest the insert candidates. Returns (base, inserts, n)."""
    n = max(N // 16, 2)
    need = N + extra
    if need > n * n:
        raise ValueError("key space too small")
    got = np.zeros(0, np.int64)
    while got.shape[0] < need:
        m = int((need - got.shape[0]) * 1.05) + 64
        first = rng.integers(0, n, m, dtype=np.int64)
        second = rng.integers(0, n, m, dtype=np.int64)
        got = np.unique(np.concatenate([got, (first << 32) | second]))
    rng.shuffle(got)
    return got[:N], got[N:need], n


def _store_bytes(store: ZStore) -> int:
    total = 0
    for name in ("keys", "vals", "dirs", "runmask", "live", "tomb"):
        a = getattr(store, name, None)
        if isinstance(a, np.ndarray):
            total += a.nbytes
    return total


def _warmup(ctx: RunContext, batch: int) -> None:
    t = time.perf_counter()
    for N in (1 << 14, 1 << 16):
        measure(ctx, plan(N, batch, seed=11), time_budget=30.0, progress=False)
    ctx.log(f"[storage] warm-up (Numba compilation) {time.perf_counter() - t:.1f} s")


def plan(N: int, batch: int, seed: int) -> dict:
    """The keys of one storage run (deterministic in ``N``, ``batch``, ``seed``)."""
    rng = np.random.default_rng([seed, N])
    half = batch // 2
    n_ins = batch - half
    n_batches = N // (2 * n_ins) + 1  # inserted keys end up > N / 2
    t = time.perf_counter()
    base_random, fresh, n = make_keys(rng, N, n_batches * n_ins)
    return {"N": N, "batch": batch, "half": half, "n_ins": n_ins, "n_batches": n_batches,
            "base_random": base_random, "fresh": fresh, "n": n,
            "keygen_s": time.perf_counter() - t, "seed": seed}


def measure(ctx: RunContext, pl: dict, time_budget: float, progress: bool = True) -> dict:
    """One storage run (a fresh store) over the keys of :func:`plan`."""
    N, batch, half, n_ins = pl["N"], pl["batch"], pl["half"], pl["n_ins"]
    n_batches, n = pl["n_batches"], pl["n"]
    base_random, fresh = pl["base_random"], pl["fresh"]
    rng = np.random.default_rng([pl["seed"], N, 1])
    base_sorted = np.sort(base_random)
    gen_s = pl["keygen_s"]
    la0 = machine.loadavg()
    secs: list[float] = []
    merges = base_merges = 0
    merge_batches: list[int] = []
    ok = True
    capped = False
    with machine.PeakRSS() as mem:
        t = time.perf_counter()
        store = ZStore.from_sorted(base_sorted, np.ones(N, np.int64), id_capacity=n)
        build_s = time.perf_counter() - t
        del base_sorted
        bar = ctx.bar(range(n_batches), desc=f"storage N=2^{N.bit_length() - 1}",
                      total=n_batches) if progress else range(n_batches)
        t_loop = time.perf_counter()
        deltas_template = np.concatenate([np.full(half, -1, np.int64),
                                          np.ones(n_ins, np.int64)])
        for i in bar:
            # --- untimed: the batch's sorted unique keys and deltas
            keys = np.concatenate([base_random[i * half:(i + 1) * half],
                                   fresh[i * n_ins:(i + 1) * n_ins]])
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            deltas = deltas_template[order]
            runs_before = store.nruns
            # --- timed
            t0 = time.perf_counter()
            old = store.add(keys, deltas)
            secs.append(time.perf_counter() - t0)
            # --- untimed: checks and structure watching
            if not np.array_equal(old, (deltas < 0).astype(np.int64)):
                ok = False
            m = runs_before + 1 - store.nruns  # one run appended (all inserts are new keys)
            if m > 0:
                merges += m
                merge_batches.append(i)
                if store.nruns == 1:
                    base_merges += 1
            if time.perf_counter() - t_loop > time_budget and i + 1 < n_batches:
                capped = True
                break
        done = len(secs)
        # final checks: size, and a sample of each kind of key
        deleted = base_random[: done * half]
        inserted = fresh[: done * n_ins]
        kept = base_random[done * half:]
        ok &= len(store) == N - deleted.shape[0] + inserted.shape[0]
        for arr, want in ((deleted, 0), (inserted, 1), (kept, 1)):
            if arr.shape[0]:
                sample = np.sort(rng.choice(arr, min(2000, arr.shape[0]), replace=False))
                ok &= bool(np.all(store.get(sample) == want))
        info = {"nruns": store.nruns, "used": int(store.used), "size": len(store),
                "tombstones": int(store.tombstones()), "store_bytes": _store_bytes(store)}
    la1 = machine.loadavg()
    s = summarize(secs, [batch] * len(secs))
    rec = {
        "kind": "result", "scenario": NAME, "record": "size",
        "N": N, "n_first_ids": n, "batch_size": batch, "planned_batches": n_batches,
        "batches": len(secs), "inserted": int(len(secs) * n_ins),
        "deleted": int(len(secs) * half), "capped": capped, "time_budget_s": time_budget,
        "build_s": build_s, "keygen_s": gen_s, **s,
        "merges": merges, "base_merges": base_merges, "merge_batches": merge_batches,
        "final": info, "ok": bool(ok),
        "batch_seconds": [float(f"{x:.5g}") for x in secs],
        "peak_rss_bytes": mem.peak_bytes, "peak_rss_scoped": mem.scoped,
        "process_maxrss_bytes": machine.process_maxrss_bytes(),
        "loadavg_start": la0, "loadavg_end": la1,
    }
    del store
    gc.collect()
    return rec


def _median_repeat(reps: list[dict]) -> dict:
    """The repeat whose amortized mean is the median one; all repeats summarized inside."""
    order = sorted(range(len(reps)), key=lambda i: reps[i]["mean_s"])
    rec = dict(reps[order[(len(reps) - 1) // 2]])
    rec["repeat_chosen"] = order[(len(reps) - 1) // 2]
    rec["repeats"] = [{k: r[k] for k in ("mean_s", "median_s", "p99_s", "max_s", "batches",
                                         "capped", "ok", "loadavg_start", "loadavg_end")}
                      for r in reps]
    rec["ok"] = all(r["ok"] for r in reps)
    rec["capped"] = any(r["capped"] for r in reps)
    return rec


def run(ctx: RunContext) -> None:
    cfg = ctx.profile.storage
    if cfg.warmup:
        _warmup(ctx, cfg.batch)
    for N in cfg.sizes:
        pl = plan(N, cfg.batch, cfg.seed)
        reps = []
        for i in range(cfg.repeats):
            reps.append(measure(ctx, pl, cfg.time_budget))
            r = reps[-1]
            ctx.log(f"[storage] N={N:,} repeat {i + 1}/{cfg.repeats}: build {r['build_s']:.2f} s, "
                    f"{r['batches']} batches of {cfg.batch}: mean {r['mean_s'] * 1e3:.3f} ms, "
                    f"median {r['median_s'] * 1e3:.3f} ms, p99 {r['p99_s'] * 1e3:.3f} ms, max "
                    f"{r['max_s'] * 1e3:.1f} ms; {r['merges']} merges ({r['base_merges']} into "
                    f"the base){' CAPPED' if r['capped'] else ''} {'ok' if r['ok'] else 'WRONG'}"
                    f"; load average {r['loadavg_end']}")
        del pl
        gc.collect()
        ctx.emit(_median_repeat(reps))
