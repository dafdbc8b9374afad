"""What a scenario gets from the runner: the profile, a record sink, progress bars, a logger."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tqdm import tqdm

from bench.config import Profile


@dataclass
class RunContext:
    profile: Profile
    emit: Callable[[dict], dict]
    progress: bool = True
    messages: list[str] = field(default_factory=list)
    #: results scenarios share within one run (e.g. replay's R-MAT records for scaling)
    shared: dict = field(default_factory=dict)

    def log(self, msg: str) -> None:
        """A line on stderr (kept out of the way of the progress bars)."""
        self.messages.append(msg)
        if self.progress:
            tqdm.write(msg, file=sys.stderr)
        else:
            print(msg, file=sys.stderr, flush=True)

    def bar(self, iterable: Iterable, desc: str, total: int | None = None):
        """A tqdm progress bar on stderr (or the bare iterable when progress is off)."""
        if not self.progress:
            return iterable
        return tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False,
                    mininterval=0.5, dynamic_ncols=True)
