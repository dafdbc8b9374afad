"""Insert-only and known-lifespan modes against the general engine (docs/modes.md).

    python -m bench.modes                       # all three SNAP temporal streams, 3 repeats
    python -m bench.modes --streams CollegeMsg --repeats 5

Three measurements per stream (SNAP temporal text ``src dst time`` in ../shared/data):

1. **Growing graph** (insert-only): the first arrival of every undirected edge, one batch per
   day; ``GraphEngine(mode="insert_only")`` vs the general ``GraphEngine()`` (ε = 1/2,
   adaptive). Time = the sum of the ``apply`` wall times (batches prepared beforehand).
2. **Sliding window** (30 days, 1-day step): ``SlidingWindow`` fed one step at a time vs the
   general engine fed each step's births (+1) and expiries (−1) as one batch (computed
   beforehand from the lifespans) vs a static recount of each step's window (edge arrays
   prepared beforehand, the count alone timed) vs the offline evaluator (whole log at once).
3. **Three relations** (insert-only, bag semantics): every arrival (self-loops included) is a
   tuple of R, S or T in turn (arrival index mod 3; a repeated message adds to the tuple's
   multiplicity), one batch per day; ``RelationEngine(mode="insert_only")`` vs the general
   ``RelationEngine()`` (ε automatic, adaptive), checked against the static
   ``relation_triangle_sum`` of prefixes.

The systems alternate within each repeat (their order flips every repeat) and the medians of
the repeats are printed; every run's per-batch counts are compared with the others'. The
machine may be shared: the 1-minute load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from gpu_ivm import GraphEngine, RelationEngine, SlidingWindow
from gpu_ivm.io import read_edges
from gpu_ivm.lifespans import first_steps, last_steps, merge_lifespans, num_steps
from gpu_ivm.static import count_triangles_arrays, relation_triangle_sum
from gpu_ivm.window_offline import offline_counts

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
STREAMS = {"CollegeMsg": "CollegeMsg.txt.gz",
           "email-Eu-core-temporal": "email-Eu-core-temporal.txt.gz",
           "sx-mathoverflow": "sx-mathoverflow.txt.gz"}
DAY = 86_400


def load(name: str, data: Path = DATA):
    """(src, dst, time) of a SNAP temporal stream in ``data``, in time order."""
    el = read_edges(Path(data) / STREAMS[name])
    order = np.argsort(el.time, kind="stable")
    return el.src[order], el.dst[order], np.asarray(el.time, np.int64)[order]


def growing_batches(s, d, t, size: int = 0):
    keep = s != d
    s, d, t = s[keep], d[keep], t[keep]
    lo, hi = np.minimum(s, d), np.maximum(s, d)
    _, first = np.unique(np.stack([lo, hi]), axis=1, return_index=True)
    first = np.sort(first)
    s, d, t = s[first], d[first], t[first]
    if size:  # fixed-size batches instead of days
        cuts = np.r_[np.arange(0, s.shape[0], size), s.shape[0]]
    else:
        day = (t - t[0]) // DAY
        cuts = np.flatnonzero(np.r_[True, day[1:] != day[:-1], True])
    return [{"src": s[a:b], "dst": d[a:b], "sign": np.ones(b - a, np.int64)}
            for a, b in zip(cuts[:-1], cuts[1:])]


def run_batches(engine, batches) -> tuple[float, list[int]]:
    """(the summed ``apply`` wall time, the count after each batch) of ``engine``."""
    total, counts = 0.0, []
    for b in batches:
        t0 = time.perf_counter()
        engine.apply(b)
        total += time.perf_counter() - t0
        counts.append(engine.count())
    return total, counts


def run_growing(mode: str, batches) -> tuple[float, list[int]]:
    return run_batches(GraphEngine(mode=mode), batches)


def alternated(run, batches, repeats: int) -> tuple[dict[str, list[float]], list[int]]:
    """``run(mode, batches)`` for "insert_only" and "general", alternated ``repeats`` times
    (the order flipped every repeat): the seconds per mode, and the per-batch counts, which
    every run must repeat (else AssertionError)."""
    res: dict[str, list[float]] = {"insert_only": [], "general": []}
    ref = None
    for r in range(repeats):
        order = ["insert_only", "general"] if r % 2 == 0 else ["general", "insert_only"]
        for mode in order:
            sec, counts = run(mode, batches)
            ref = counts if ref is None else ref
            assert counts == ref, mode
            res[mode].append(sec)
    return res, ref


def relation_batches(s, d, t):
    """Daily batches of (rel, src, dst, mult): arrival i goes to relation i mod 3."""
    rel = np.array(["R", "S", "T"])[np.arange(s.shape[0]) % 3]
    day = (t - t[0]) // DAY
    cuts = np.flatnonzero(np.r_[True, day[1:] != day[:-1], True])
    return [{"rel": rel[a:b], "src": s[a:b], "dst": d[a:b], "mult": np.ones(b - a, np.int64)}
            for a, b in zip(cuts[:-1], cuts[1:])]


def run_relations(mode: str, batches) -> tuple[float, list[int]]:
    e = RelationEngine(mode=mode)
    e.load()
    return run_batches(e, batches)


def measure_relations(s, d, t, repeats: int = 3) -> dict:
    """Insert-only vs general three-relation engine on one stream's daily batches, alternated
    as in :func:`measure_growing`; counts compared run by run and, after a few batches, with
    the static ``relation_triangle_sum`` of the prefix (else AssertionError)."""
    batches = relation_batches(s, d, t)
    res, ref = alternated(run_relations, batches, repeats)
    ends = np.cumsum([b["src"].shape[0] for b in batches])
    _, ids = np.unique(np.concatenate([s, d]), return_inverse=True)
    a, b = ids[:s.shape[0]], ids[s.shape[0]:]
    rel = np.arange(s.shape[0]) % 3
    checks = sorted({len(batches) - 1, len(batches) // 2, len(batches) // 4})
    for i in checks:  # the independent oracle: a static evaluation of the prefix
        m = np.arange(s.shape[0]) < ends[i]
        parts = []
        for k in range(3):  # repeated tuples summed into their multiplicity
            pairs, mult = np.unique(np.stack([a[m & (rel == k)], b[m & (rel == k)]]), axis=1,
                                    return_counts=True)
            parts.append((pairs[0], pairs[1], mult.astype(np.int64)))
        assert relation_triangle_sum(*parts, int(ids.max()) + 1) == ref[i], i
    return {"batches": len(batches), "inserts": int(s.shape[0]), "final_q": int(ref[-1]),
            "insert_only_s": med(res["insert_only"]), "general_s": med(res["general"]),
            "runs": res, "checked_batches": checks}


def window_inputs(s, d, t, window: int, step: int):
    """Per step: the arrivals (online input), the +/- batch (general engine input) and the
    window's edge arrays (recount input)."""
    t0 = int(t[0])
    K = num_steps(t0, int(t[-1]), step)
    first = first_steps(t, t0, step)
    cuts = np.searchsorted(first, np.arange(1, K + 2))
    arrivals = [{"src": s[a:b], "dst": d[a:b], "time": t[a:b]}
                for a, b in zip(cuts[:-1], cuts[1:])]
    last = np.minimum(last_steps(t, t0, window, step), K)
    keep = (s != d) & (last >= first)
    lo, hi = np.minimum(s[keep], d[keep]), np.maximum(s[keep], d[keep])
    uniq, inv = np.unique(np.concatenate([lo, hi]), return_inverse=True)
    m = lo.shape[0]
    key = inv[:m].astype(np.int64) * len(uniq) + inv[m:]
    sk, ss, se = merge_lifespans(key, first[keep], last[keep])
    a, b = uniq[sk // len(uniq)], uniq[sk % len(uniq)]
    ev_step = np.concatenate([ss, se + 1])
    ev_sign = np.concatenate([np.ones_like(ss), -np.ones_like(se)])
    ev_a, ev_b = np.concatenate([a, a]), np.concatenate([b, b])
    o = np.argsort(ev_step, kind="stable")
    ev_step, ev_sign, ev_a, ev_b = ev_step[o], ev_sign[o], ev_a[o], ev_b[o]
    c = np.searchsorted(ev_step, np.arange(1, K + 2))
    plusminus = [{"src": ev_a[x:y], "dst": ev_b[x:y], "sign": ev_sign[x:y]}
                 for x, y in zip(c[:-1], c[1:])]
    windows = []
    for k in range(1, K + 1):
        alive = (ss <= k) & (se >= k)
        windows.append((a[alive], b[alive]))
    return K, arrivals, plusminus, windows


def run_online(arrivals, window, step, t0):
    sw = SlidingWindow(window=window, step=step, start=t0)
    total, counts = 0.0, []
    for batch in arrivals:
        t1 = time.perf_counter()
        reps = sw.push(batch) if batch["time"].shape[0] else []
        total += time.perf_counter() - t1
        counts += [r.triangles for r in reps]
    t1 = time.perf_counter()
    counts += [r.triangles for r in sw.close()]
    total += time.perf_counter() - t1
    return total, counts


def run_general_window(plusminus):
    g = GraphEngine()
    total, counts = 0.0, []
    for b in plusminus:
        t1 = time.perf_counter()
        g.apply(b)
        total += time.perf_counter() - t1
        counts.append(g.count())
    return total, counts


def run_recount(windows):
    total, counts = 0.0, []
    for a, b in windows:
        t1 = time.perf_counter()
        counts.append(count_triangles_arrays(a, b) if a.shape[0] else 0)
        total += time.perf_counter() - t1
    return total, counts


def warm_up() -> None:
    g = GraphEngine(mode="insert_only")
    g.apply({"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]})
    h = GraphEngine()
    h.load({"src": [1, 2], "dst": [2, 3]})
    h.apply({"src": [3, 1], "dst": [1, 2], "sign": [1, -1]})
    sw = SlidingWindow(window=4, step=2, start=0)
    sw.push({"src": [1, 2, 3, 1], "dst": [2, 3, 1, 2], "time": [0, 1, 1, 3]})
    sw.close()
    offline_counts([1, 2, 3], [2, 3, 1], [0, 1, 2], window=4, step=2)
    count_triangles_arrays(np.array([1, 2, 3]), np.array([2, 3, 1]))


def measure_growing(s, d, t, repeats: int = 3, size: int = 0) -> dict:
    """The growing-graph comparison of one stream: insert-only vs general engine, alternated
    ``repeats`` times (order flipped every repeat), medians of the summed ``apply`` times.
    Every run's per-batch counts must equal the first's, and the count after a few batches
    the static counter's on the prefix of edges (else AssertionError)."""
    batches = growing_batches(s, d, t, size)
    n_up = sum(b["src"].shape[0] for b in batches)
    res, ref = alternated(run_growing, batches, repeats)
    ends = np.cumsum([b["src"].shape[0] for b in batches])
    src = np.concatenate([b["src"] for b in batches])
    dst = np.concatenate([b["dst"] for b in batches])
    checks = sorted({len(batches) - 1, len(batches) // 2, len(batches) // 4})
    for i in checks:  # the independent oracle: a static count of the prefix
        assert count_triangles_arrays(src[:ends[i]], dst[:ends[i]]) == ref[i], i
    return {"batches": len(batches), "inserts": int(n_up), "final_triangles": int(ref[-1]),
            "batch": size or "day", "insert_only_s": med(res["insert_only"]),
            "general_s": med(res["general"]), "runs": res, "checked_batches": checks}


def measure_window(s, d, t, window: int, step: int, repeats: int = 3) -> dict:
    """The sliding-window comparison of one stream: the online window, the general engine,
    a static recount per step and the offline evaluator, alternated ``repeats`` times;
    medians of their times. Every run's per-step counts must equal the others' (the recount
    is the independent oracle; else AssertionError)."""
    K, arrivals, plusminus, windows = window_inputs(s, d, t, window, step)
    n_pm = sum(b["src"].shape[0] for b in plusminus)
    wres: dict[str, list[float]] = {"online": [], "general": [], "recount": [], "offline": []}
    ref = None
    for r in range(repeats):
        systems = ["online", "general", "recount", "offline"]
        if r % 2:
            systems.reverse()
        for sysname in systems:
            if sysname == "online":
                sec, counts = run_online(arrivals, window, step, int(t[0]))
            elif sysname == "general":
                sec, counts = run_general_window(plusminus)
            elif sysname == "recount":
                sec, counts = run_recount(windows)
            else:
                res_off = offline_counts(s, d, t, window=window, step=step)
                sec, counts = res_off.seconds, res_off.triangles.tolist()
            ref = counts if ref is None else ref
            assert counts == ref and len(counts) == K, sysname
            wres[sysname].append(sec)
    return {"steps": K, "arrivals": int(t.shape[0]), "changes": int(n_pm),
            "max_triangles": int(max(ref)), "window": window, "step": step,
            "live_edges_max": int(max(w[0].shape[0] for w in windows)),
            **{f"{k}_s": med(v) for k, v in wres.items()}, "runs": wres}


def med(xs):
    return statistics.median(xs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--streams", nargs="+", choices=list(STREAMS), default=list(STREAMS))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--window", default=30 * DAY, type=int)
    p.add_argument("--step", default=DAY, type=int)
    p.add_argument("--growing-batch", default=0, type=int, metavar="N",
                   help="growing graph in batches of N first arrivals (default: one per day)")
    p.add_argument("--skip-window", action="store_true", help="growing graph only")
    p.add_argument("--skip-growing", action="store_true", help="no growing graph")
    p.add_argument("--skip-relations", action="store_true", help="no three-relation stream")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    warm_up()
    for name in args.streams:
        s, d, t = load(name)
        if not args.skip_growing:
            g = measure_growing(s, d, t, args.repeats, args.growing_batch)
            what = f"batches of {args.growing_batch}" if args.growing_batch else "daily batches"
            io_s, gen_s = g["insert_only_s"], g["general_s"]
            print(f"{name} growing graph: {g['batches']} {what}, {g['inserts']:,} edge "
                  f"inserts, final {g['final_triangles']:,} triangles | insert_only "
                  f"{io_s:.3f} s ({g['inserts'] / io_s:,.0f} ins/s) | general {gen_s:.3f} s "
                  f"({g['inserts'] / gen_s:,.0f} ins/s) | speed-up {gen_s / io_s:.1f}x | runs "
                  f"io {g['runs']['insert_only']} gen {g['runs']['general']}", flush=True)
        if not args.skip_relations:
            q = measure_relations(s, d, t, args.repeats)
            io_s, gen_s = q["insert_only_s"], q["general_s"]
            print(f"{name} three relations: {q['batches']} daily batches, {q['inserts']:,} "
                  f"tuple inserts, final Q {q['final_q']:,} | insert_only {io_s:.3f} s "
                  f"({q['inserts'] / io_s:,.0f} ins/s) | general {gen_s:.3f} s "
                  f"({q['inserts'] / gen_s:,.0f} ins/s) | speed-up {gen_s / io_s:.1f}x | runs "
                  f"io {q['runs']['insert_only']} gen {q['runs']['general']}", flush=True)
        if args.skip_window:
            continue
        w = measure_window(s, d, t, args.window, args.step, args.repeats)
        K = w["steps"]
        m = {k: w[f"{k}_s"] for k in ("online", "general", "recount", "offline")}
        print(f"{name} window {args.window}/{args.step}: {K} steps, {w['arrivals']:,} "
              f"arrivals, {w['changes']:,} births+expiries for the general engine, max "
              f"{w['max_triangles']:,} triangles | "
              + " | ".join(f"{k} {v:.3f} s ({v / K * 1e3:.2f} ms/step)" for k, v in m.items())
              + f" | online vs general {m['general'] / m['online']:.1f}x, vs recount "
              f"{m['recount'] / m['online']:.1f}x | runs {w['runs']}", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
