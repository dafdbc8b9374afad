"""Which columns a reader wants, and how the caller's picks and a source's columns meet.

A column is picked, in this order, by the caller's option (``src=``, ``dst=``, ...: a column
name, or a 0-based position), by one of its usual names (``src``/``source``,
``dst``/``target``, ``time``/``t``, ``sign``, ``mult``, ``rel``), or by position when the
source has no usable names (a headerless file, a 2-D array, a tuple, rows). Columns that no
key picks are ignored with an :class:`~gpu_ivm.errors.InputNote`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_ivm.errors import InputError, InputNote

#: Header words the header rule recognises (compared lower-case, blanks stripped).
HEADER_WORDS = frozenset(
    "src dst sign source target u v from to weight w wt time t ts timestamp mult rel "
    "relation node1 node2 id1 id2 multiplicity".split()
)
#: Header words that name a column no reader uses (a weight): never taken by position.
UNUSED_WORDS = frozenset({"weight", "w", "wt"})


@dataclass(frozen=True)
class Layout:
    """The columns a reader wants.

    ``keys`` are canonical names in positional order; the first ``required`` are mandatory.
    ``aliases[key]`` lists the usual column names (the first names the column in messages).
    ``soft`` keys are taken by position only when the first data row holds an integer there
    (the SNAP ``src dst time`` convention); ``text_str`` keys are read as strings (``rel``).
    """

    keys: tuple[str, ...]
    required: int
    aliases: Mapping[str, tuple[str, ...]]
    soft: tuple[str, ...] = ()
    text_str: tuple[str, ...] = ()

    def display(self, key: str) -> str:
        return self.aliases[key][0]

    def describe(self) -> str:
        """``src dst [time]`` style summary for messages."""
        return " ".join(
            self.display(k) if i < self.required else f"[{self.display(k)}]"
            for i, k in enumerate(self.keys)
        )


EDGES = Layout(
    keys=("src", "dst", "time"),
    required=2,
    aliases={"src": ("src", "source"), "dst": ("dst", "target"), "time": ("time", "t")},
    soft=("time",),
)
GRAPH_UPDATES = Layout(
    keys=("src", "dst", "sign"),
    required=3,
    aliases={"src": ("src", "source"), "dst": ("dst", "target"), "sign": ("sign",)},
)
RELATION_UPDATES = Layout(
    keys=("rel", "src", "dst", "mult"),
    required=4,
    aliases={"rel": ("rel",), "src": ("src",), "dst": ("dst",), "mult": ("mult",)},
    text_str=("rel",),
)
RELATION = Layout(
    keys=("src", "dst", "mult"),
    required=2,
    aliases={"src": ("src",), "dst": ("dst",), "mult": ("mult",)},
)


@dataclass
class Gathered:
    """Raw columns picked from a source: ``cols[key] = (column name, raw column)``.

    ``text_like`` marks ids read from text (CSV, SNAP): they may be strings to classify.
    ``line_of`` maps a 0-based data row to its 1-based file line (files only).
    """

    cols: dict[str, tuple[str, Any]]
    text_like: bool = False
    line_of: Callable[[int], int] | None = None
    where: str = ""


def check_picks(layout: Layout, picks: Mapping[str, Any]) -> dict[str, str | int]:
    """Validate the caller's column options; returns the ones that are set."""
    out: dict[str, str | int] = {}
    for key, value in picks.items():
        if value is None:
            continue
        if key not in layout.keys:
            allowed = ", ".join(f"{k}=" for k in layout.keys)
            raise InputError(f"unknown column option {key}=; this reader takes {allowed}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(
                f"column option {key}= must be a column name (str) or a 0-based position "
                f"(int), got {value!r}"
            )
        if isinstance(value, int) and value < 0:
            raise InputError(f"column option {key}= must be a 0-based position >= 0, got {value}")
        out[key] = value
    positions = [v for v in out.values() if isinstance(v, int)]
    names = [v for v in out.values() if isinstance(v, str)]
    for group in (positions, names):
        dup = {v for v in group if group.count(v) > 1}
        if dup:
            v = sorted(dup, key=str)[0]
            keys = [k for k, w in out.items() if w == v]
            raise InputError(f"column {v!r} is picked for more than one of {', '.join(keys)}")
    return out


def label(layout: Layout, key: str, picks: Mapping[str, Any]) -> str:
    """How a positional column is named in messages: the caller's name, else the usual one."""
    value = picks.get(key)
    return value if isinstance(value, str) else layout.display(key)


def choose(
    names: Sequence[Any] | None,
    ncols: int,
    layout: Layout,
    picks: Mapping[str, str | int],
    *,
    positional_ok: bool,
    soft_ok: Callable[[int], bool] | None = None,
) -> tuple[dict[str, int], list[int]]:
    """Match the layout's keys to column indices.

    ``names`` are the source's column names (None for a headerless source, where every
    column goes by position and a ``str`` pick only names the column in messages).
    ``soft_ok(i)`` tells whether column ``i`` may take a soft key by position. Returns
    ``(key -> column index, indices of the ignored columns)``.
    """
    def find(name: Any) -> int | None:
        hits = [i for i, n in enumerate(names or ()) if n == name]
        if len(hits) > 1:
            raise InputError(f"duplicate column {name!r}", column=name)
        return hits[0] if hits else None

    chosen: dict[str, int] = {}
    for key, value in picks.items():
        if isinstance(value, int):
            if value >= ncols:
                raise InputError(
                    f"column option {key}={value} is out of range: the source has {ncols} "
                    f"column(s) (positions 0 to {ncols - 1})",
                    column=layout.display(key),
                )
            chosen[key] = value
        elif names is not None:
            hit = find(value)
            if hit is None:
                raise InputError(f"missing column {value!r} (picked with {key}=); found "
                                 f"columns: {list(names)!r}", column=value)
            chosen[key] = hit
    by_name = False
    for key in layout.keys if names is not None else ():
        for alias in layout.aliases[key] if key not in chosen else ():
            hit = find(alias)
            if hit is not None and hit not in chosen.values():
                chosen[key], by_name = hit, True
                break
    str_pick = any(isinstance(v, str) for v in picks.values())
    if names is None or (positional_ok and not by_name and not str_pick
                         and ncols <= len(layout.keys)):
        # every key not yet chosen takes the next free column, in layout order
        free = [i for i in range(ncols) if i not in chosen.values()
                and not (names is not None and str(names[i]).strip().lower() in UNUSED_WORDS)]
        for key in layout.keys:
            if key in chosen or not free:
                continue
            if key in layout.soft and soft_ok is not None and not soft_ok(free[0]):
                continue
            chosen[key] = free.pop(0)
    missing = [k for k in layout.keys[: layout.required] if k not in chosen]
    if missing:
        key = missing[0]
        if names is None:
            raise InputError(
                f"too few columns: {ncols} given, {layout.required} required "
                f"({layout.describe()})",
                column=label(layout, key, picks),
            )
        want = layout.aliases[key]
        also = f" (or {', '.join(repr(w) for w in want[1:])})" if len(want) > 1 else ""
        raise InputError(
            f"missing column {want[0]!r}{also}; found columns: {list(names)!r}",
            column=want[0],
        )
    used = set(chosen.values())
    return chosen, [i for i in range(ncols) if i not in used]


def note_ignored(what: str, ignored: Sequence[str]) -> None:
    """Warn (:class:`InputNote`) that columns of a source were not used."""
    if ignored:
        cols = ", ".join(ignored)
        warnings.warn(
            f"{what}: ignored extra column(s) {cols} (pick columns with src=, dst=, ... or "
            "--src-col, --dst-col, ...)",
            InputNote,
            stacklevel=4,
        )
