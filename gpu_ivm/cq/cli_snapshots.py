"""``gpu-ivm query --snapshot-dir DIR [--snapshot-every K] [--resume DIR]``.

Snapshots follow the batch replay's conventions (:mod:`gpu_ivm.cli_snapshots`):
``DIR/snapshot-<n>`` (n = batch folders applied; one after the load, then every K batches
and after the last; the newest two kept), each recording the query, the content fingerprint
of ``--relations`` and the names of the batch folders applied. ``--resume DIR`` continues
from the newest snapshot (or the snapshot folder it names): another query, other relation
files, or batch folders that no longer start with the ones applied are refused (exit 2,
naming what differs); a damaged newest snapshot names the newest valid older one.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def check_options(args) -> list[Path]:
    """Validate the snapshot options; returns the snapshots to drop once ``--resume`` has
    restored the one it names (see :func:`gpu_ivm.cli_snapshots.snapshot_series_check`)."""
    from .. import cli_snapshots as cs

    if args.snapshot_every < 1:
        raise InputError(f"must be at least 1, got {args.snapshot_every}",
                         option="--snapshot-every")
    for value, option in ((args.snapshot_dir, "--snapshot-dir"), (args.resume, "--resume")):
        cs.folder_option(value, option)
    return cs.snapshot_series_check(args) if args.snapshot_dir is not None else []


def run_meta(args, query: str, relations_fp: dict | None, applied: list[str]) -> dict:
    """What a snapshot records about the run."""
    return {"query": query, "relations": str(args.relations),
            "relations_fingerprint": relations_fp, "applied": list(applied)}


def resume(args, query: str, relations_fp: dict, batch_names: list[str], cls: type):
    """(engine, snapshot folder) restored from ``--resume`` by ``cls.restore`` (``Engine`` or
    ``TradeoffEngine``, which refuse each other's snapshots), or (None, None) when its series
    holds no snapshot (a note on stderr). Refuses a snapshot of another run."""
    from .. import cli_snapshots as cs
    from ..fingerprint import differences, short
    from ..snapshot import MANIFEST, SnapshotError
    from .snapshot import FORM

    def load(path):
        return cls.restore(path, backend=getattr(args, "backend", "cpu"))

    found = cs.locate_run(args, load, FORM, "gpu-ivm query")
    if found is None:
        return None, None
    loc, meta = found
    latest = loc.latest
    if meta.get("query") != query:
        raise InputError(f"{latest} is a snapshot of the query {meta.get('query')!r}, not "
                         f"{query!r}", option="--resume")
    rec_fp = meta.get("relations_fingerprint") or {}
    diff = differences(rec_fp, relations_fp)
    if diff:
        raise InputError(f"{latest} was taken with other relations: --relations "
                         f"{meta.get('relations')} ({short(rec_fp)}), this run's "
                         f"{args.relations} differs ({', '.join(diff)})", option="--resume")
    applied = meta.get("applied")
    if not isinstance(applied, list) or batch_names[:len(applied)] != applied:
        raise InputError(f"{latest} has applied the batch folders {applied}, but --batches "
                         f"{args.batches} does not start with them", option="--resume")
    eng = cs.restore_located(loc, args, load, load)
    if eng.batches_applied != len(applied):
        raise SnapshotError(f"holds {eng.batches_applied} batches applied, its run record "
                            f"{len(applied)}", file=latest / MANIFEST)
    return eng, latest


def save(args, eng, meta: dict) -> None:
    from .snapshot import save_numbered

    save_numbered(eng, args.snapshot_dir, eng.batches_applied, metadata={"cli": meta})
