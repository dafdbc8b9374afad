"""Runs one system over one workload: load, batches in order, time cap, oracle checks.

Every scenario goes through :func:`run_system`, so every record has the same fields:
``status`` (ok | timed out | out of memory | failed | unavailable | skipped) and ``detail``
(why, in words), the timing summary of :func:`bench.stats.summarize`, the per-batch times,
``checks`` (count after sampled batches vs the oracle) and ``ok`` (True: every check passed
and the run finished; False: a count was wrong; None: the run did not finish and no check
failed).
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from dataclasses import dataclass, field

from bench import machine, systems
from bench.context import RunContext
from bench.peers import Watchdog
from bench.stats import evenly_spaced, summarize


@dataclass
class Workload:
    """A base graph, its batches (generated up front, untimed) and the oracle's counts."""

    key: str  # e.g. "rmat-16", "CollegeMsg/day"
    base_src: object
    base_dst: object
    batches: list[dict]
    expected: dict[int, int]  # batch index (-1: base) -> oracle count after it
    size_edges: int  # edges of the base graph (or of the largest window)
    batch_size: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def updates(self) -> int:
        return sum(int(len(b["src"])) for b in self.batches)


#: failures seen in this process: system -> (size in edges, status, detail); a system that
#: failed on a graph is not run again on a larger one in the same run
FAILED: dict[str, tuple[int, str, str]] = {}


def _base_record(name: str, wl: Workload, sys_cls) -> dict:
    return {"kind": "result", "system": name,
            "label": getattr(sys_cls, "label", name), "family": getattr(sys_cls, "family", ""),
            "workload": wl.key, "batch_size": wl.batch_size, "n_batches": len(wl.batches),
            "size_edges": wl.size_edges, "total_updates": wl.updates, **wl.meta}


def not_run(name: str, wl: Workload, status: str, detail: str) -> dict:
    rec = _base_record(name, wl, systems.system_class(name))
    rec.update(status=status, detail=detail, ok=None, n=0, timed_batches=0)
    return rec


def _precheck(name: str, wl: Workload) -> dict | None:
    cls = systems.system_class(name)
    why = cls.unavailable()
    if why:
        return not_run(name, wl, "unavailable", why)
    prev = FAILED.get(name)
    if prev and prev[0] <= wl.size_edges:
        return not_run(name, wl, "skipped",
                       f"not run: {prev[1]} at {prev[0]:,} edges earlier in this run "
                       f"({prev[2]})")
    return None


def _finish(rec: dict, wl: Workload) -> dict:
    checks = rec.get("checks", {})
    bad = [k for k, (got, want) in checks.items() if got != want]
    complete = rec["status"] == "ok"
    rec["checks_ok"] = not bad
    rec["ok"] = False if bad else (True if complete and checks else None)
    last = len(wl.batches) - 1
    if str(last) in checks or last in checks:
        got, want = checks.get(last, checks.get(str(last)))
        rec["final_count"], rec["expected_count"] = got, want
    if rec["status"] not in ("ok", "unavailable", "skipped"):
        FAILED.setdefault(rec["system"], (wl.size_edges, rec["status"], rec.get("detail", "")))
    return rec


def _timings(secs: list[float], upd: list[int], idx: list[int], paths: list) -> dict:
    """A record's timing fields: the summary of the timed batches' seconds, their times
    (6 significant digits), their indexes, and how many batches took each path."""
    return {**summarize(secs, upd), "timed_batches": len(secs),
            "batch_seconds": [float(f"{s:.6g}") for s in secs], "timed_index": idx,
            "paths": dict(Counter(p for p in paths if p is not None))}


def run_system(ctx: RunContext, name: str, wl: Workload, *, n_timed: int | None = None,
               cap_s: float = 300.0, mem_cap_bytes: int | None = None,
               desc: str = "") -> dict:
    """Run ``name`` over ``wl``; return its record (not yet emitted)."""
    pre = _precheck(name, wl)
    if pre is not None:
        return pre
    sys_ = systems.make(name)
    rec = _base_record(name, wl, sys_)
    check_at = sorted(i for i in wl.expected if i >= 0)
    if mem_cap_bytes is None:
        avail = machine.meminfo_bytes("MemAvailable") or (16 << 30)
        mem_cap_bytes = int(avail * 0.7)
    rec.update(cap_s=cap_s)
    if getattr(sys_, "external", False):
        la0 = machine.loadavg()
        r = sys_.run_stream(wl.base_src, wl.base_dst, wl.batches, cap_s=cap_s,
                            mem_cap_bytes=mem_cap_bytes, log=ctx.log)
        secs = r.get("batch_seconds", [])
        upd = [int(len(b["src"])) for b in wl.batches[:len(secs)]]
        counts = {int(k): v for k, v in r.get("counts", {}).items()}
        rec.update(status=r["status"], detail=r.get("detail", ""), load_s=r.get("load_s"),
                   **summarize(secs, upd),
                   timed_batches=len(secs), batch_seconds=[float(f"{s:.6g}") for s in secs],
                   checks={i: [counts[i], wl.expected[i]] for i in check_at if i in counts},
                   peak_rss_bytes=r.get("peak_rss_bytes"), peak_rss_scoped="subprocess",
                   loadavg_start=la0, loadavg_end=machine.loadavg(), wall_s=r.get("wall_s"),
                   version=r.get("pathway"))
        if -1 in wl.expected and r.get("base_count") is not None:
            rec["checks"][-1] = [r["base_count"], wl.expected[-1]]
        return _finish(rec, wl)

    timed = (evenly_spaced(len(wl.batches), n_timed) if sys_.sampled
             else set(range(len(wl.batches))))
    secs, upd, paths, idx, extra = [], [], [], [], []
    checks: dict[int, list] = {}
    status, detail = "ok", ""
    la0 = machine.loadavg()
    t_wall = time.perf_counter()
    load_s = None
    with machine.PeakRSS() as mem, Watchdog(sys_, cap_s) as dog:
        try:
            load_s = sys_.load(wl.base_src, wl.base_dst)
            if -1 in wl.expected:
                checks[-1] = [sys_.count(), wl.expected[-1]]
            it = ctx.bar(enumerate(wl.batches), desc=desc or f"{wl.key} {name}",
                         total=len(wl.batches))
            for i, b in it:
                if time.perf_counter() - t_wall > cap_s:
                    status = "timed out"
                    detail = (f"timed out after {cap_s:.0f} s ({i} of {len(wl.batches)} "
                              f"batches applied, {len(secs)} timed)")
                    break
                if i in timed:
                    secs.append(sys_.apply(b))
                    upd.append(int(len(b["src"])))
                    inf = sys_.info()
                    paths.append(inf.get("path"))
                    extra.append({k: inf[k] for k in ("engine_s", "handoff_s") if k in inf})
                    idx.append(i)
                else:
                    sys_.skip(b)
                if i in wl.expected:
                    checks[i] = [sys_.count(), wl.expected[i]]
        except MemoryError:
            status, detail = "out of memory", "MemoryError"
        except Exception as e:  # noqa: BLE001 - a peer failing is a result, not a crash
            if dog.fired:
                status = "timed out"
                detail = (f"timed out after {cap_s:.0f} s (interrupted during "
                          f"{'load' if load_s is None else f'batch {len(secs)}'})")
            else:
                status = "failed"
                detail = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        if status == "ok" and dog.fired and time.perf_counter() - t_wall > cap_s * 1.5:
            status, detail = "timed out", f"timed out after {cap_s:.0f} s"
    wall = time.perf_counter() - t_wall
    rec.update(status=status, detail=detail, load_s=load_s, **_timings(secs, upd, idx, paths),
               checks=checks,
               path_per_batch=paths if any(p is not None for p in paths) else None,
               peak_rss_bytes=mem.peak_bytes, peak_rss_scoped=mem.scoped,
               process_maxrss_bytes=machine.process_maxrss_bytes(),
               loadavg_start=la0, loadavg_end=machine.loadavg(), wall_s=wall,
               **sys_.describe() if status != "failed" else {})
    if extra and any(extra):
        for k in ("engine_s", "handoff_s"):
            vals = [e[k] for e in extra if k in e]
            if vals:
                rec[k.replace("_s", "_seconds")] = [float(f"{v:.6g}") for v in vals]
    sys_.close()
    del sys_
    gc.collect()
    return _finish(rec, wl)


def balanced_orders(n: int, budget: int = 500_000) -> list[list[int]]:
    """Orders of ``n`` systems for successive batches, repeated cyclically, in which each
    system runs right after each other system equally often and in each place of a batch
    equally often: run one after another and back to the first, the orders make each of the
    n·(n - 1) ordered pairs of distinct systems (x, then y) adjacent the same number of
    times, across the batches' boundaries too, and no system runs twice in a row.

    Both matter on this machine. A system's batch runs in the caches its predecessor left,
    and an engine that walks long rows (ε = 1 on celebrity churn: 22 ms a batch) leaves them
    cold: rotating the order by one a batch put the default right after it in two batches of
    three and ε = ½ in one, about 10 % on the default's mean. And the first system of a
    batch pays for the runner's work between batches: with the default always first, its
    mean on the SNAP windows' small batches was 6-17 % above the engines that ran later
    (docs/benchmarks.md, thirty-first session).

    Found by a depth-first search: n·(n - 1) orders for 3 and 4 systems; beyond ``budget``
    steps (5 or more), the n - 1 orders that balance the pairs only, then the rotations. Two
    systems alternate (each runs twice in a row once per two batches, the other likewise).

    >>> balanced_orders(3)
    [[0, 1, 2], [0, 2, 1], [2, 1, 0], [1, 0, 2], [1, 2, 0], [2, 0, 1]]
    """
    if n <= 1:
        return [list(range(n))]
    if n == 2:
        return [[0, 1], [1, 0]]
    for places in (True, False):
        found = _order_search(n, n * (n - 1) if places else n - 1, places, budget)
        if found is not None:
            return found
    return [list(range(k, n)) + list(range(k)) for k in range(n)]


def _order_search(n: int, m: int, places: bool, budget: int) -> list[list[int]] | None:
    """``m`` orders of ``n`` systems whose cyclic concatenation has each ordered pair of
    distinct systems ``m / (n - 1)`` times, no system twice in a row and (``places``) each
    system ``m / n`` times in each place; None when the search passes ``budget`` steps."""
    length = m * n
    per_pair, per_place = m // (n - 1), m // n
    pairs = [[0] * n for _ in range(n)]
    place = [[0] * n for _ in range(n)]
    seq = [0]
    place[0][0] = 1
    steps = 0

    def extend() -> bool:
        nonlocal steps
        i = len(seq)
        if i == length:  # and back to the first
            return seq[-1] != seq[0] and pairs[seq[-1]][seq[0]] < per_pair
        steps += 1
        if steps > budget:
            return False
        p = i % n
        ran = seq[i - p:i]  # this batch's systems so far
        prev = seq[-1]
        for x in range(n):
            if (x in ran or x == prev or pairs[prev][x] >= per_pair
                    or (places and place[p][x] >= per_place)):
                continue
            pairs[prev][x] += 1
            place[p][x] += 1
            seq.append(x)
            if extend():
                return True
            seq.pop()
            pairs[prev][x] -= 1
            place[p][x] -= 1
        return False

    if not extend():
        return None
    return [seq[j * n:(j + 1) * n] for j in range(m)]


def run_interleaved(ctx: RunContext, names: list[str], wl: Workload, *,
                    cap_s: float = 300.0) -> list[dict]:
    """Run the in-process systems ``names`` over ``wl`` together: each loads the base graph,
    then every batch goes to each system before the next batch, so a drift in the machine's
    speed (a shared machine) hits every system alike, in orders that give each system each
    other one as its predecessor equally often (:func:`balanced_orders`). Every batch is
    timed; counts are checked at ``wl.expected``'s points. Returns one record per system
    (not yet emitted) with the fields of :func:`run_system`'s, less the peak memory (the
    systems are resident together), plus ``order = "interleaved"``."""
    recs, live = {}, {}
    for name in names:
        pre = _precheck(name, wl)
        if pre is not None:
            recs[name] = pre
            continue
        sys_ = systems.make(name)
        if getattr(sys_, "external", False):
            recs[name] = not_run(name, wl, "skipped", "an external process: not interleaved")
            continue
        live[name] = sys_
        recs[name] = _base_record(name, wl, sys_)
    state = {n: {"secs": [], "upd": [], "paths": [], "checks": {}, "status": "ok",
                 "detail": "", "load_s": None} for n in live}
    la0 = machine.loadavg()
    t_wall = time.perf_counter()
    for name, sys_ in list(live.items()):
        try:
            state[name]["load_s"] = sys_.load(wl.base_src, wl.base_dst)
            if -1 in wl.expected:
                state[name]["checks"][-1] = [sys_.count(), wl.expected[-1]]
        except Exception as e:  # noqa: BLE001 - a system failing is a result
            state[name].update(status="failed", detail=f"load: {type(e).__name__}: {e}")
            del live[name]
    order = list(live)
    cycle = balanced_orders(len(order))
    it = ctx.bar(enumerate(wl.batches), desc=f"{wl.key} interleaved", total=len(wl.batches))
    for i, b in it:
        if time.perf_counter() - t_wall > cap_s:
            for name in live:
                state[name].update(status="timed out",
                                   detail=f"timed out after {cap_s:.0f} s ({i} of "
                                          f"{len(wl.batches)} batches applied)")
            break
        for name in [order[j] for j in cycle[i % len(cycle)]]:
            if name not in live:
                continue
            st = state[name]
            try:
                st["secs"].append(live[name].apply(b))
                st["upd"].append(int(len(b["src"])))
                st["paths"].append(live[name].info().get("path"))
                if i in wl.expected:
                    st["checks"][i] = [live[name].count(), wl.expected[i]]
            except Exception as e:  # noqa: BLE001
                st.update(status="failed", detail=f"batch {i}: {type(e).__name__}: {e}")
                del live[name]
    wall = time.perf_counter() - t_wall
    out = []
    for name in names:
        rec = recs[name]
        if name in state:
            st = state[name]
            described = live[name].describe() if name in live else {}
            rec.update(status=st["status"], detail=st["detail"], load_s=st["load_s"],
                       **_timings(st["secs"], st["upd"], list(range(len(st["secs"]))),
                                  st["paths"]),
                       checks=st["checks"], peak_rss_bytes=None, loadavg_start=la0,
                       loadavg_end=machine.loadavg(), wall_s=wall, order="interleaved",
                       **described)
            rec = _finish(rec, wl)
        out.append(rec)
    for sys_ in live.values():
        sys_.close()
    live.clear()
    gc.collect()
    return out


def log_line(ctx: RunContext, tag: str, rec: dict) -> None:
    if rec.get("status") != "ok":
        ctx.log(f"[{tag}] {rec['workload']} B={rec.get('batch_size')} {rec['system']:24s} "
                f"{rec['status'].upper()}: {rec.get('detail', '')}")
        return
    chk = "ok" if rec.get("ok") else ("WRONG COUNT" if rec.get("ok") is False else "?")
    ctx.log(f"[{tag}] {rec['workload']} B={rec.get('batch_size')} {rec['system']:24s} "
            f"load {rec.get('load_s') or 0:6.1f} s {rec.get('updates_per_s', 0):12,.0f} upd/s "
            f"median {rec.get('median_s', 0) * 1e3:8.2f} ms p99 {rec.get('p99_s', 0) * 1e3:8.2f}"
            f" ms  {rec.get('paths') or ''} {chk}")
