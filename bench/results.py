"""Raw results as JSON lines: one ``meta`` record per run, then one record per measurement.

Every record carries ``run_id`` (the file's time stamp) and ``kind``; measurement records also
carry ``scenario``. Files live in ``bench/results/`` (git-ignored) unless ``--out`` says otherwise.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def _clean(obj):
    """JSON-safe copy: numpy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, np.integer | np.bool_):
        return obj.item()
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else None
    return obj


class ResultWriter:
    """Appends records to ``<dir>/<run_id>.jsonl``, flushing each one."""

    def __init__(self, directory: Path, run_id: str):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{run_id}.jsonl"
        self.run_id = run_id
        self.records: list[dict] = []

    def write(self, record: dict) -> dict:
        rec = _clean({"run_id": self.run_id, **record})
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.records.append(rec)
        return rec


def read(path: Path) -> list[dict]:
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            out.append(json.loads(line))
    return out


def latest_with(directory: Path, scenario: str, exclude: Path | None = None,
                profile: str | None = None) -> tuple[Path, list[dict]] | None:
    """The newest result file in ``directory`` with records of ``scenario`` (and the same
    profile, if given): its path and all its records."""
    if not directory.is_dir():
        return None
    for path in sorted(directory.glob("*.jsonl"), reverse=True):
        if exclude is not None and path.resolve() == exclude.resolve():
            continue
        try:
            recs = read(path)
        except (OSError, ValueError):
            continue
        meta = next((r for r in recs if r.get("kind") == "meta"), {})
        if profile is not None and meta.get("profile") != profile:
            continue
        if any(r.get("scenario") == scenario and r.get("kind") == "result" for r in recs):
            return path, recs
    return None
