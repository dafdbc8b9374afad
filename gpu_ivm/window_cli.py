"""``gpu-ivm replay --events FILE --window SPAN --step SPAN``: a sliding window over an event log.

The events file holds timestamped edges (SNAP temporal text ``src dst time``, or CSV /
Parquet / Arrow with columns ``src``, ``dst`` and ``time``, or the column named by
``--time-col``). Step k ends at ``t_min + k·step``; the last step is the first whose end
exceeds the latest time. After step k the graph holds every undirected edge (self-loops
dropped) with an arrival at t, ``end_k − window ≤ t < end_k``. One line per step (with
``--json``: ``kind: "batch"``, ``batch`` = k − 1, ``step`` = k, ``end``, ``triangles``,
``delta``, ``edges``, ``arrivals``, ``births``, ``extensions``, ``expired``, ``seconds``),
preceded by one ``kind: "window"`` line describing the run. Online by default
(:class:`gpu_ivm.sliding_window.SlidingWindow`, fed step by step); ``--offline`` evaluates
the whole log at once (:mod:`gpu_ivm.window_offline`), its step lines carry ``seconds: 0``
and the evaluation time is on the ``window`` line. Online runs take ``--snapshot-dir DIR
[--snapshot-every K]`` (``DIR/snapshot-<k>``, k = steps closed, with a fingerprint of the
events file and the window options) and ``--resume DIR`` (a ``kind: "resume"`` line, then the
step lines after the snapshot's), with the batch replay's checks and messages
(:mod:`gpu_ivm.cli`). ``--backend cuda`` (or ``$GPU_IVM_BACKEND``) runs the online window
on the device (:class:`gpu_ivm.window_device.DeviceSlidingWindow`; its snapshots are the
cpu window's format, so a run resumes on either backend); ``--offline`` runs on the cpu
backend only. The ``window`` line names the backend.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .errors import InputError

CHUNK = 1 << 16  # events pushed to the online window at a time


def read_events(path: str, time_col: str | None):
    """(src, dst, time) of an events file, time as int64; a file without the time column is
    refused."""
    from .io import read_edges

    source: object = path
    name = time_col or "time"
    if name not in ("time", "t"):
        p = Path(path)
        suffixes = "".join(p.suffixes).lower()
        import pyarrow as pa

        try:
            if suffixes.endswith((".parquet", ".pq")):
                import pyarrow.parquet as pq

                table = pq.read_table(p)
            elif ".csv" in suffixes:
                import pyarrow.csv as pcsv

                table = pcsv.read_csv(p)
            else:
                raise InputError(f"--time-col {name} needs a CSV or Parquet file with named "
                                 "columns (text files are src dst time by position)",
                                 option="--time-col")
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"{path}: cannot read: {e}") from None
        if name not in table.column_names:
            raise InputError(f"{path} has no column {name!r} (columns: "
                             f"{', '.join(table.column_names)})", option="--time-col")
        table = table.drop_columns([c for c in ("time", "t") if c in table.column_names])
        source = table.rename_columns(["time" if c == name else c for c in table.column_names])
    el = read_edges(source)
    if el.time is None:
        raise InputError(f"{path} has no time column (expected src dst time, or a 'time' "
                         "column; --time-col names another)", column=name)
    if len(el) == 0:
        raise InputError(f"{path} holds no events")
    return el.src, el.dst, np.asarray(el.time, np.int64)


def _line(args, rep: dict, what: str = "triangles") -> None:
    if args.json:
        print(json.dumps({"kind": "batch", **rep}), flush=True)
    else:
        print(f"step {rep['step']} (end {rep['end']}): {rep['triangles']:,} {what} "
              f"({rep['delta']:+,}), {rep['edges']:,} edges, {rep['arrivals']:,} arrivals "
              f"[{rep['seconds'] * 1e3:.2f} ms]", flush=True)


def replay_events(args) -> int:
    from .lifespans import num_steps, parse_span

    if args.offline and args.backend not in (None, "cpu"):
        raise InputError("--offline runs on the cpu backend only (the online window runs on "
                         "cpu or cuda)", option="--backend")
    backend = None if args.offline else _online_backend(args.backend)
    window = parse_span(args.window, "--window")
    step = parse_span(args.step, "--step")
    src, dst, t = read_events(args.events, args.time_col)
    order = np.argsort(t, kind="stable")
    src, dst, t = src[order], dst[order], t[order]
    t_min, t_max = int(t[0]), int(t[-1])
    K = num_steps(t_min, t_max, step)
    head = {"events": str(args.events), "rows": int(t.shape[0]),
            "self_loops": int(np.count_nonzero(src == dst)), "t_min": t_min, "t_max": t_max,
            "window": window, "step": step, "steps": K,
            "method": "offline" if args.offline else "online",
            "backend": "cpu" if backend is None else backend.name}
    last_count = None
    start = 0
    total = 0.0
    if args.offline:
        from .window_offline import offline_counts

        res = offline_counts(src, dst, t, window=window, step=step, start=t_min)
        total = res.seconds
        head.update(seconds=round(res.seconds, 6), segments=res.segments,
                    union_edges=res.union_edges)
        _header(args, head)
        prev = 0
        for i in range(K):
            c = int(res.triangles[i])
            _line(args, {"batch": i, "step": i + 1, "end": int(res.ends[i]), "triangles": c,
                         "delta": c - prev, "edges": int(res.edges[i]),
                         "arrivals": int(res.arrivals[i]), "seconds": 0.0, "offline": True})
            prev = c
        last_count = prev
    else:
        _header(args, head)
        sw, start = _online_start(args, head, backend)
        if sw is None:
            from .sliding_window import SlidingWindow

            sw = SlidingWindow(window=window, step=step, start=t_min, backend=backend)
            _snap(args, sw, head)
        total = _run_online(args, sw, start, src, dst, t, head)
        last_count = sw.count()
    if args.check:
        from .static import count_triangles_arrays

        end = t_min + K * step
        m = (t >= end - window) & (t < end)
        expect = count_triangles_arrays(src[m], dst[m]) if m.any() else 0
        if expect != last_count:
            print(f"check failed: the window count after the last step is {last_count} but a "
                  f"static recount of its edges gives {expect}", file=sys.stderr)
            return 1
        print(f"check: ok, the last step's count {last_count:,} equals a static recount of "
              "the window's edges", file=sys.stderr, flush=True)
    if not args.json:
        done = f"{K - start} of {K} steps" if start else f"{K} steps"
        print(f"{done}, {t.shape[0]:,} events in {total:.2f} s ({head['method']}); final "
              f"count {last_count:,}")
    return 0


def _online_backend(choice: str | None):
    """The online window's backend: ``--backend``, else ``$GPU_IVM_BACKEND``, else cpu,
    resolved before any work (a bad name or a missing device fails at once, naming it)."""
    from .backend import ENV_VAR, get_backend

    try:
        return get_backend(choice)
    except InputError:
        raise InputError(f"${ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a backend; use cpu, "
                         "cuda or auto") from None


def _header(args, head: dict) -> None:
    if args.json:
        print(json.dumps({"kind": "window", **head}), flush=True)
    else:
        print(f"sliding window over {head['events']}: {head['rows']:,} events, window "
              f"{head['window']}, step {head['step']}, {head['steps']} steps "
              f"({head['method']})", flush=True)



def _run_online(args, sw, start: int, src, dst, t, head: dict) -> float:
    """Close steps start + 1 .. K, pushing the events of up to CHUNK arrivals (or up to the
    next snapshot) at a time and closing exactly the steps they fill, so that after each push
    no arrival is pending and a snapshot holds the steps closed and nothing else. Returns the
    summed step seconds."""
    K, step, t_min = head["steps"], head["step"], head["t_min"]
    every = args.snapshot_every if args.snapshot_dir is not None else K
    ends = t_min + np.arange(1, K + 1, dtype=np.int64) * step
    cuts = np.searchsorted(t, ends, side="left")  # events of step k: cuts[k-2] .. cuts[k-1]
    total = 0.0
    k = start
    while k < K:
        lo = int(cuts[k - 1]) if k else 0
        # the last step to close in this push: the next snapshot point, or earlier once the
        # push holds CHUNK arrivals
        stop = min(K, (k // every + 1) * every)
        k_to = min(stop, max(k + 1, int(np.searchsorted(cuts, lo + CHUNK, side="right"))))
        hi = int(cuts[k_to - 1])
        reps = sw.push({"src": src[lo:hi], "dst": dst[lo:hi], "time": t[lo:hi]}) \
            if hi > lo else []
        reps += sw.advance_to(k_to)
        for rep in reps:
            total += rep.seconds
            _line(args, rep.to_dict())
        k = k_to
        if k % every == 0 or k == K:
            _snap(args, sw, head)
    return total


def _cli_meta(args, head: dict) -> dict:
    """The run's inputs as a snapshot records them: the events file with its content
    fingerprint and the options that decide the steps."""
    return {"events": str(args.events), "events_fingerprint": head["_fingerprint"],
            "config": {"window": head["window"], "step": head["step"],
                       "time_col": args.time_col or "time"}}


def _snap(args, sw, head: dict) -> None:
    if args.snapshot_dir is None:
        return
    from .window_snapshot import save_numbered

    meta = _cli_meta(args, head)
    meta["steps_closed"] = sw.k
    save_numbered(sw, args.snapshot_dir, sw.k, metadata={"cli": meta})


def _online_start(args, head: dict, backend):
    """(window, steps closed) restored from ``--resume``, or (None, 0) for a fresh run. Also
    fingerprints the events when snapshots are kept, and checks the --snapshot-dir series
    as the batch replay does."""
    from . import cli_snapshots as cs

    head["_fingerprint"] = None
    if args.snapshot_dir is None and args.resume is None:
        return None, 0
    if args.snapshot_every < 1:
        raise InputError(f"must be at least 1, got {args.snapshot_every}",
                         option="--snapshot-every")
    for value, option in ((args.snapshot_dir, "--snapshot-dir"), (args.resume, "--resume")):
        cs.folder_option(value, option)
    from .fingerprint import fingerprint

    head["_fingerprint"] = fingerprint(args.events)
    newer = cs.snapshot_series_check(args) if args.snapshot_dir is not None else []
    if args.resume is None:
        return None, 0
    t_resume = time.perf_counter()
    sw, latest = _resume(args, head, backend)
    if sw is None:
        return None, 0
    cs.drop_newer(newer, latest)
    if args.json:
        print(json.dumps({"kind": "resume", "step": sw.k, "triangles": sw.count(),
                          "edges": sw.num_edges, "file": str(latest),
                          "seconds": round(time.perf_counter() - t_resume, 6)}), flush=True)
    else:
        print(f"resumed from {latest}: {sw.k} of {head['steps']} steps already closed, "
              f"{sw.num_edges:,} edges, {sw.count():,} triangles", flush=True)
    return sw, sw.k


def _resume(args, head: dict, backend):
    """The window of the newest snapshot in ``--resume`` (or of the snapshot folder it names)
    and that folder; (None, None) with a note on stderr when there is none. A snapshot of
    another events file or of other options is refused (exit 2, naming what differs); a
    damaged newest snapshot names the newest valid older one."""
    from . import cli_snapshots as cs
    from .fingerprint import differences, short
    from .sliding_window import SlidingWindow
    from .snapshot import MANIFEST, SnapshotError
    from .window_snapshot import FORM

    def check(path):  # validates a snapshot (on the host: nothing uploaded)
        return SlidingWindow.restore(path, backend="cpu")

    found = cs.locate_run(args, check, FORM, "gpu-ivm replay --events")
    if found is None:
        return None, None
    loc, meta = found
    latest = loc.latest
    now = _cli_meta(args, head)
    if meta.get("config") != now["config"]:
        raise InputError(f"{latest} was taken with other options ("
                         f"{cs.config_differences(meta.get('config') or {}, now['config'])}"
                         "); pass the same --window/--step/--time-col", option="--resume")
    rec_fp = meta.get("events_fingerprint") or {}
    diff = differences(rec_fp, now["events_fingerprint"])
    if diff:
        raise InputError(f"{latest} is a snapshot of another events file: it was taken with "
                         f"--events {meta.get('events')} ({short(rec_fp)}), this run's "
                         f"--events {args.events} differs ({', '.join(diff)}); resume with "
                         "the same events, or use another snapshot folder", option="--resume")
    # a snapshot of either backend, restored on this run's
    sw = cs.restore_located(loc, args, lambda p: SlidingWindow.restore(p, backend=backend),
                            check)
    if sw.k != meta.get("steps_closed") or sw.k > head["steps"] or sw._pending \
            or sw.t0 != head["t_min"]:
        raise SnapshotError(f"holds {sw.k} closed steps (recorded {meta.get('steps_closed')}, "
                            f"the events have {head['steps']}) or pending arrivals",
                            file=latest / MANIFEST)
    return sw, latest
