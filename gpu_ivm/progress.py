"""Progress lines on stderr for long steps of the command line (loading a base graph).

A step that finishes quickly prints nothing. One that runs longer than ``GPU_IVM_PROGRESS_AFTER``
seconds (default 2) prints ``gpu-ivm: <what> ...`` when that time has passed and, when it ends,
``gpu-ivm: <done> in <s> s``. Standard output is never written, so JSON-lines output stays
clean.

Examples
--------
>>> import io
>>> err = io.StringIO()
>>> with announce_if_slow("loading base g.txt", after=0, stream=err) as step:
...     step.done = "loaded 3 edges"
>>> lines = err.getvalue().splitlines()
>>> lines[0], lines[1].startswith("gpu-ivm: loaded 3 edges in ")
('gpu-ivm: loading base g.txt ...', True)
>>> quiet = io.StringIO()
>>> with announce_if_slow("loading base g.txt", after=60, stream=quiet) as step:
...     step.done = "loaded 3 edges"
>>> quiet.getvalue()
''
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["AFTER_ENV", "Step", "announce_if_slow"]

AFTER_ENV = "GPU_IVM_PROGRESS_AFTER"
DEFAULT_AFTER = 2.0


class Step:
    """What the caller reports at the end of a step: set ``done`` (e.g. "loaded 5 edges")."""

    def __init__(self) -> None:
        self.done: str | None = None


def _after() -> float:
    try:
        return float(os.environ.get(AFTER_ENV, DEFAULT_AFTER))
    except ValueError:
        return DEFAULT_AFTER


@contextlib.contextmanager
def announce_if_slow(what: str, *, after: float | None = None,
                     stream: TextIO | None = None) -> Iterator[Step]:
    """Announce ``what`` on ``stream`` (stderr) if the block runs longer than ``after`` seconds
    (default ``$GPU_IVM_PROGRESS_AFTER`` or 2), and then report ``step.done`` with the time."""
    out = stream if stream is not None else sys.stderr
    wait = _after() if after is None else after
    t0 = time.perf_counter()
    fired = threading.Event()
    lock = threading.Lock()

    def fire() -> None:
        with lock:
            if not finished:
                fired.set()
                print(f"gpu-ivm: {what} ...", file=out, flush=True)

    finished = False
    timer = None
    if wait <= 0:
        fire()
    else:
        timer = threading.Timer(wait, fire)
        timer.daemon = True
        timer.start()
    step = Step()
    try:
        yield step
    finally:
        with lock:
            finished = True
        if timer is not None:
            timer.cancel()
        if fired.is_set() and step.done:
            print(f"gpu-ivm: {step.done} in {time.perf_counter() - t0:.1f} s", file=out,
                  flush=True)
