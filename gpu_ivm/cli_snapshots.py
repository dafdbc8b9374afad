"""Snapshot-series helpers shared by the command line's replays (``gpu-ivm replay`` over batch
files and over timestamped events): which folder ``--resume`` names, refusing another run's
series, finding the snapshot to resume from, the damaged-snapshot message, and option
differences.

>>> config_differences({"epsilon": "1/2"}, {"epsilon": "1/3"})
"epsilon: '1/2' in the snapshot, '1/3' now"
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError


def resume_target(resume: str) -> tuple[Path, Path | None]:
    """(snapshot series folder, the snapshot folder itself when ``--resume`` names one)."""
    from .snapshot import MANIFEST, NUMBERED

    r = Path(resume)
    if r.is_dir() and (NUMBERED.match(r.name) or (r / MANIFEST).exists()):
        return r.parent, r
    return r, None


@dataclass(frozen=True)
class Located:
    """The snapshot ``--resume`` resumes from: its series folder, the folder ``--resume`` named
    itself (None when it named the series), the number of the series' newest snapshot (None
    when named), the snapshot folder and its manifest."""

    series: Path
    named: Path | None
    newest: int | None
    latest: Path
    manifest: dict


def locate_snapshot(args: Any, loader: Callable[[Path], Any] | None = None) -> Located | None:
    """The snapshot ``args.resume`` names, or the newest of its series; None (with a note on
    stderr) when the series holds none. A damaged newest manifest raises the error that names
    the newest valid older snapshot (``loader`` as in :func:`newest_valid`)."""
    from .snapshot import SnapshotError, find_latest, list_snapshots, read_manifest

    series, named = resume_target(args.resume)
    if named is not None:
        return Located(series, named, None, named, read_manifest(named))
    snaps = list_snapshots(series)
    if not snaps:
        print(f"gpu-ivm: note: no complete snapshot in {args.resume}; starting from the "
              "beginning", file=sys.stderr)
        return None
    try:
        latest = find_latest(series)
        return Located(series, None, snaps[-1][0], latest, read_manifest(latest))
    except SnapshotError as e:
        raise damaged_snapshot_error(e, args, series, snaps[-1][0], loader) from None


def locate_run(args: Any, load: Callable[[Path], Any], form: str,
               command: str) -> tuple[Located, dict] | None:
    """The snapshot ``--resume`` resumes from (:func:`locate_snapshot`) and the run record its
    writer left in ``metadata["cli"]``; None when the series holds none. A snapshot of
    another form, or without a run record, is refused naming ``command``, the one that
    writes this kind."""
    from .snapshot import MANIFEST, SnapshotError

    loc = locate_snapshot(args, load)
    if loc is None:
        return None
    man = loc.manifest
    meta = man.get("metadata", {}).get("cli") if isinstance(man.get("metadata"), dict) else None
    if man.get("form") != form or not isinstance(meta, dict):
        raise SnapshotError(f"not written by `{command}` (a {man.get('form')!r} snapshot)",
                            file=loc.latest / MANIFEST)
    return loc, meta


def restore_located(loc: Located, args: Any, restore: Callable[[Path], Any],
                    loader: Callable[[Path], Any] | None = None) -> Any:
    """``restore(loc.latest)``; a damaged snapshot that was found by searching the series
    (not named by ``--resume``) raises the error naming the newest valid older one."""
    from .snapshot import SnapshotError

    try:
        return restore(loc.latest)
    except SnapshotError as e:
        if loc.named is not None:
            raise
        raise damaged_snapshot_error(e, args, loc.series, loc.newest, loader) from None


def newest_valid(series: Path, below: int, backend, loader=None) -> Path | None:
    """The newest snapshot of ``series`` numbered below ``below`` that restores cleanly
    (with ``loader(path)``, default :func:`gpu_ivm.snapshot.load` on ``backend``)."""
    from .snapshot import SnapshotError, list_snapshots, load

    for n, p in reversed(list_snapshots(series)):
        if n >= below:
            continue
        try:
            load(p, backend=backend) if loader is None else loader(p)
        except SnapshotError:
            continue
        return p
    return None


def damaged_snapshot_error(err, args, series: Path, newest: int, loader=None):
    """The error for a damaged newest snapshot: it names the newest valid older one and the
    option that resumes from it (never a silent fallback)."""
    from .snapshot import SnapshotError

    older = newest_valid(series, newest, args.backend, loader)
    hint = (f"the newest valid older snapshot is {older}; resume from it with "
            f"--resume {older}" if older is not None else
            f"no older snapshot in {series} is valid; start over without --resume "
            "(and with an empty --snapshot-dir)")
    return SnapshotError(f"{err}. The newest snapshot is damaged: {hint}")


def config_differences(then: dict, now: dict) -> str:
    keys = sorted(set(then) | set(now))
    return "; ".join(f"{k}: {then.get(k)!r} in the snapshot, {now.get(k)!r} now"
                     for k in keys if then.get(k) != now.get(k))


def folder_option(value: str | None, option: str, must_exist: bool = False) -> None:
    """A folder option names a folder (or a path that does not exist yet), not a file."""
    if value is None:
        return
    p = Path(value)
    if p.exists() and not p.is_dir():
        raise InputError(f"{value} is a file; {option} takes a folder", option=option)
    if must_exist and not p.exists():
        raise InputError(f"{value} does not exist", option=option)


def snapshot_series_check(args) -> list[Path]:
    """A fresh run refuses a --snapshot-dir holding another run's snapshots. Returns the
    snapshots of the series newer than the one ``--resume`` names explicitly: once that one
    is restored they are dropped (:func:`drop_newer`), so the series continues from it."""
    from .snapshot import NUMBERED, list_snapshots

    snap_dir = args.snapshot_dir
    held = list_snapshots(snap_dir)
    if not held:
        return []
    if args.resume is None:
        raise InputError(f"{snap_dir} already holds snapshots of another run; resume from it "
                         "with --resume, or use an empty folder", option="--snapshot-dir")
    series, named = resume_target(args.resume)
    if os.path.realpath(series) != os.path.realpath(snap_dir):
        raise InputError(f"{snap_dir} already holds snapshots of another run than the one "
                         f"resumed from {args.resume}; pass the same folder to --resume and "
                         "--snapshot-dir, or use an empty folder", option="--snapshot-dir")
    if named is None or not NUMBERED.match(named.name):
        return []
    mine = int(NUMBERED.match(named.name).group(1))
    return [p for n, p in held if n > mine]


def drop_newer(newer: list[Path], resumed: Path) -> None:
    import shutil

    for p in newer:
        trash = p.parent / f"{p.name}.old-{secrets.token_hex(4)}"
        os.replace(p, trash)
        shutil.rmtree(trash, ignore_errors=True)
    if newer:
        print(f"gpu-ivm: note: removed {len(newer)} snapshot(s) newer than {resumed.name} "
              f"({', '.join(p.name for p in newer)}); the series continues from "
              f"{resumed.name}", file=sys.stderr)
