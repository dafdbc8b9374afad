"""Pathway peer: run by ``bench/.venvs/pathway/bin/python`` (Pathway's own venv; it pins
pyarrow < 26), not by the project's interpreter. Do not import gpu_ivm here.

    python pathway_driver.py DIR N_BATCHES

reads ``DIR/base.parquet`` (columns a < b: the undirected edges) and ``DIR/batches.parquet``
(batch, a, b, w = +1 insert / -1 delete), maintains the triangle count with a 3-way join of
the oriented edge table (``U(a,b) ⋈ U(b,c) ⋈ U(a,c)``, then ``count``) and prints JSON lines
on stdout: ``{"kind": "base", "seconds", "count", "version"}`` and then one
``{"kind": "batch", "batch", "seconds", "count"}`` per batch. A batch's seconds run from the
first row pushed into Pathway's input connector to the end of the batch's time in the output
(``on_time_end``): ingestion + the engine's incremental update.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import pyarrow.parquet as pq


def main() -> int:
    folder, n_batches = sys.argv[1], int(sys.argv[2])
    import pathway as pw

    base = pq.read_table(f"{folder}/base.parquet").to_pydict()
    bt = pq.read_table(f"{folder}/batches.parquet") if n_batches else None
    cols = bt.to_pydict() if bt is not None else {"batch": [], "a": [], "b": [], "w": []}
    by_batch: list[list[tuple[int, int, int]]] = [[] for _ in range(n_batches)]
    for i, a, b, w in zip(cols["batch"], cols["a"], cols["b"], cols["w"]):
        by_batch[i].append((a, b, w))

    class Edge(pw.Schema):
        a: int = pw.column_definition(primary_key=True)
        b: int = pw.column_definition(primary_key=True)

    state = {"count": 0, "t0": None, "phase": -1}
    done = threading.Event()

    def emit(rec: dict) -> None:
        sys.stdout.write(json.dumps(rec) + "\n")
        sys.stdout.flush()

    class Feed(pw.io.python.ConnectorSubject):
        def __init__(self) -> None:
            super().__init__(session_type="upsert")

        def run(self) -> None:
            self._disable_commits()
            state["t0"] = time.perf_counter()
            if base["a"]:
                for a, b in zip(base["a"], base["b"]):
                    self.next(a=a, b=b)
                self.commit()
                done.wait()
            else:  # an empty commit closes no output time: nothing to wait for
                emit({"kind": "base", "seconds": 0.0, "count": 0, "version": pw.__version__})
            for i, rows in enumerate(by_batch):
                done.clear()
                state["phase"] = i
                state["t0"] = time.perf_counter()
                for a, b, w in rows:
                    if w > 0:
                        self.next(a=a, b=b)
                    else:
                        self.delete(a=a, b=b)
                # a sentinel edge (isolated, negative ids) that changes every batch, so the
                # output changes and its time closes even when the count does not change
                if i:
                    self.delete(a=-2 * i, b=-2 * i + 1)
                self.next(a=-2 * (i + 1), b=-2 * (i + 1) + 1)
                self.commit()
                done.wait()

    U = pw.io.python.read(Feed(), schema=Edge, autocommit_duration_ms=None)
    U2 = U.copy()
    U3 = U.copy()
    ab = U.join(U2, U.b == U2.a).select(a=U.a, b=U.b, c=U2.b)
    tri = ab.join(U3, ab.a == U3.a, ab.c == U3.b).select(x=ab.a)
    total = tri.reduce(n=pw.reducers.count())
    tick = U.reduce(t=pw.reducers.min(U.a))
    out = tick.join_left(total).select(t=tick.t, n=total.n)

    def on_change(key, row, time, is_addition) -> None:  # noqa: A002 - pathway's names
        if is_addition:
            state["count"] = row["n"] or 0

    def on_time_end(t) -> None:
        if state["t0"] is None:
            return
        sec = time.perf_counter() - state["t0"]
        if state["phase"] < 0:
            emit({"kind": "base", "seconds": sec, "count": state["count"],
                  "version": pw.__version__})
        else:
            emit({"kind": "batch", "batch": state["phase"], "seconds": sec,
                  "count": state["count"]})
        state["t0"] = None
        done.set()

    pw.io.subscribe(out, on_change=on_change, on_time_end=on_time_end)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
