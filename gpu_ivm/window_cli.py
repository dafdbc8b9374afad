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
and the evaluation time is on the ``window`` line.
"""

from __future__ import annotations

import json
import sys
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

    if args.backend not in (None, "cpu"):
        raise InputError("--events runs on the cpu backend only", option="--backend")
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
            "method": "offline" if args.offline else "online"}
    last_count = None
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
        from .sliding_window import SlidingWindow

        _header(args, head)
        sw = SlidingWindow(window=window, step=step, start=t_min)
        for lo in range(0, t.shape[0], CHUNK):
            hi = min(lo + CHUNK, t.shape[0])
            for rep in sw.push({"src": src[lo:hi], "dst": dst[lo:hi], "time": t[lo:hi]}):
                total += rep.seconds
                _line(args, rep.to_dict())
        for rep in sw.close():
            total += rep.seconds
            _line(args, rep.to_dict())
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
        print(f"{K} steps, {t.shape[0]:,} events in {total:.2f} s ({head['method']}); final "
              f"count {last_count:,}")
    return 0


def _header(args, head: dict) -> None:
    if args.json:
        print(json.dumps({"kind": "window", **head}), flush=True)
    else:
        print(f"sliding window over {head['events']}: {head['rows']:,} events, window "
              f"{head['window']}, step {head['step']}, {head['steps']} steps "
              f"({head['method']})", flush=True)

