"""``gpu-ivm query``: maintain a CQAP over Parquet relations and a folder of batch folders.

``gpu-ivm query 'Q(B,C | A) = R(A,B), S(A,C)' --relations DIR --batches DIR
[--requests FILE --out DIR] [--epsilon E] [--json]``

- ``--relations DIR`` holds ``<NAME>.parquet`` for every relation of the query (value columns
  in atom-argument order, optional ``mult``).
- ``--batches DIR`` holds one sub-folder per batch, applied in natural name order (``b2``
  before ``b10``); each holds ``<NAME>.parquet`` files with a required ``mult`` column.
- One line after the load and after each batch; with ``--json`` a JSON object with ``kind``
  (``load`` / ``batch``), ``batch`` (0 for the load, then 1, 2, ...), ``name``, ``count``
  and ``seconds``.

- ``--requests FILE`` (Parquet or CSV, one column per input variable) is answered after the
  load and after every batch; ``--out DIR`` receives ``answers-<NNNNNN>.parquet`` (NNNNNN =
  0 for the load, then the batch number) with columns ``request, outputs..., mult``, each
  written atomically. The JSON line then also has ``answers`` (rows written).
- ``--snapshot-dir DIR [--snapshot-every K]`` and ``--resume DIR`` as for ``gpu-ivm replay``
  (:mod:`gpu_ivm.cq.cli_snapshots`); a resumed run prints a ``resume`` line and then the lines
  of the batches after the snapshot's.
- ``--epsilon E`` (default 1): below 1, a query that forks runs on the heavy/light engine
  (:class:`gpu_ivm.cq.tradeoff.TradeoffEngine`; a query it does not support is refused, and
  one that never forks runs at ε = 1, the thesis's choice for it). Its snapshots record ε
  and the partition; ``--resume`` refuses a snapshot taken at another ε. ``--mode`` other
  than ``general`` runs at ε = 1 only.
- ``--strategy auto|view-trees`` (default auto): a triangle query, the body ``R(A,B),
  S(B,C), T(C,A)`` (up to renaming, self-joins included) with any head (the count
  ``Q( | )``, ``Q(A | )``, ``Q(A,B | )``, ``Q(A,B,C | )`` and their access patterns such as
  ``Q(B,C | A)``), runs on the triangle engine, IVM^ε
  (:class:`gpu_ivm.cq.triangle_strategy.TriangleQueryEngine`, which picks its own ε; at
  ``--epsilon`` below 1, the CQAP trade-off's, the triangle is refused as before);
  ``view-trees`` keeps the general view trees.
  Both write the same snapshots, and ``--resume`` reads either's.
- ``--backend cpu|cuda`` (default cpu): where the engine's operators run, the CPU kernels or
  their CUDA twins (``Engine(backend=...)``; cuda needs a device or Numba's simulator). A
  snapshot holds no backend: ``--resume`` restores it on this run's.

A missing relation file, an unknown file in a batch folder, or any bad value stops the run
with exit code 2 before that batch changes anything.

>>> import argparse
>>> p = argparse.ArgumentParser(prog="gpu-ivm")
>>> _ = add_parser(p.add_subparsers(dest="cmd"))
>>> a = p.parse_args(["query", "Q(A|)=R(A)", "--relations", "r", "--batches", "b", "--json"])
>>> a.query, a.json, a.fn.__name__
('Q(A|)=R(A)', True, 'cmd_query')
>>> sorted(["b10", "b2", "b1"], key=natural_key)
['b1', 'b2', 'b10']
"""

from __future__ import annotations

import argparse
import json
import re
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["add_parser", "cmd_query", "natural_key"]


def natural_key(name: str) -> list:
    """Sort key in which digit runs compare as numbers."""
    return [(0, int(p), p) if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name) if p]


def _read_parquet(path: Path):
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except Exception as e:  # pyarrow raises several types for damaged files
        raise InputError(f"cannot read {path}: {e}") from e


def _folder(path: str, option: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{path} is not a folder", option=option)
    return p


def _batch_tables(folder: Path, relations: dict[str, int]) -> dict[str, Any]:
    tables = {}
    for f in sorted(folder.iterdir(), key=lambda x: natural_key(x.name)):
        if f.name.startswith("."):
            continue
        if f.suffix != ".parquet" or f.stem not in relations or not f.is_file():
            raise InputError(f"batch folder {folder}: unexpected entry {f.name} (expected "
                             f"<NAME>.parquet for NAME in {', '.join(relations)})")
        tables[f.stem] = _read_parquet(f)
    return tables


def _requests(path: str):
    """The request table of ``--requests``: Parquet, or CSV (``.csv``)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path} is not a file", option="--requests")
    if p.suffix.lower() == ".csv":
        import pyarrow.csv as pacsv

        try:
            return pacsv.read_csv(p)
        except Exception as e:  # pyarrow raises several types for bad CSV
            raise InputError(f"cannot read {p}: {e}", option="--requests") from e
    return _read_parquet(p)


def _check_epsilon(args) -> Fraction:
    """ε of ``--epsilon`` (default 1); below 1 the modes, which the heavy/light engine does
    not have, are refused."""
    from ..rational import parse_epsilon

    if args.epsilon is None:
        return Fraction(1)
    try:
        e = parse_epsilon(args.epsilon)
    except InputError as err:
        raise InputError(str(err), option="--epsilon") from None
    if e < 1 and args.mode != "general":
        raise InputError("--mode insert-only/auto runs at epsilon 1", option="--mode")
    return e


def cmd_query(args) -> int:
    from ..fingerprint import fingerprint
    from ..parquet_out import write_parquet
    from . import cli_snapshots as snaps
    from .engine import Engine

    if (args.requests is None) != (args.out is None):
        raise InputError("--requests FILE and --out DIR go together",
                         option="--requests" if args.requests is None else "--out")
    eps = _check_epsilon(args)
    strategy = getattr(args, "strategy", "auto").replace("-", "_")
    from .triangle_strategy import prefers_triangle_engine

    if strategy == "auto" and eps == 1 and prefers_triangle_engine(args.query):
        from .factory import engine

        eng = engine(args.query, epsilon=eps, mode=args.mode, backend=args.backend)
    elif eps < 1:
        from .engine import UnsupportedQueryError
        from .factory import engine

        try:
            eng = engine(args.query, epsilon=eps, backend=args.backend)
        except UnsupportedQueryError as err:
            raise InputError(str(err), option="--epsilon") from None
    else:
        eng = Engine(args.query, mode=args.mode, backend=args.backend)
    query = str(eng.query)
    requests = _requests(args.requests) if args.requests is not None else None
    out = Path(args.out) if args.out is not None else None
    if requests is not None:
        eng.count(requests)  # the request table is checked before anything runs
    rel_dir = _folder(args.relations, "--relations")
    batch_dirs: list[Path] = []
    if args.batches is not None:
        bdir = _folder(args.batches, "--batches")
        batch_dirs = sorted((d for d in bdir.iterdir() if d.is_dir()),
                            key=lambda d: natural_key(d.name))
    names = [d.name for d in batch_dirs]
    relations = eng.query.schemas
    keep_snaps = args.snapshot_dir is not None or args.resume is not None
    newer = snaps.check_options(args) if keep_snaps else []
    rel_fp = fingerprint(rel_dir) if keep_snaps else None

    def report(kind: str, k: int, name: str, seconds: float) -> None:
        count = eng.count()
        extra: dict = {}
        if getattr(eng, "switched_at", None) == k and kind == "batch":
            extra["switched"] = "first delete: insert-only mode ended (same state)"
        if requests is not None:
            answers = eng.request(requests)
            extra["answers"] = write_parquet(out / f"answers-{k:06d}.parquet",
                                             answers.to_batches(), answers.schema)
        if args.json:
            print(json.dumps({"kind": kind, "batch": k, "name": name, "count": count,
                              "seconds": round(seconds, 6), **extra}), flush=True)
        else:
            more = f", {extra['answers']} answers" if "answers" in extra else ""
            more += f"; {extra['switched']}" if "switched" in extra else ""
            print(f"{kind} {k} {name}: count {count}{more} ({seconds:.3f} s)", flush=True)

    def snapshot(last: bool) -> None:
        n = eng.batches_applied
        if args.snapshot_dir is not None and (last or n % args.snapshot_every == 0):
            snaps.save(args, eng, snaps.run_meta(args, query, rel_fp, names[:n]))

    start, resumed = 0, False
    if args.resume is not None:
        t = time.perf_counter()
        restored, latest = snaps.resume(args, query, rel_fp, names, type(eng))
        if restored is not None:
            from ..cli_snapshots import drop_newer

            drop_newer(newer, latest)
            if restored.mode != eng.mode:
                raise InputError(f"{latest} is a snapshot of a run in mode {restored.mode}, "
                                 f"not {eng.mode}", option="--resume")
            if getattr(restored, "epsilon", None) != getattr(eng, "epsilon", None):
                raise InputError(f"{latest} is a snapshot of a run at epsilon "
                                 f"{restored.epsilon}, not {eng.epsilon}", option="--resume")
            eng, start, resumed = restored, restored.batches_applied, True
            if args.json:
                print(json.dumps({"kind": "resume", "batch": start, "name": latest.name,
                                  "count": eng.count(), "file": str(latest),
                                  "seconds": round(time.perf_counter() - t, 6)}), flush=True)
            else:
                print(f"resumed from {latest}: {start} of {len(names)} batch folders already "
                      f"applied, count {eng.count()}", flush=True)
    if not resumed:
        tables = {}
        for name in relations:
            path = rel_dir / f"{name}.parquet"
            if not path.is_file():
                raise InputError(f"relation {name}: no file {path}", option="--relations")
            tables[name] = _read_parquet(path)
        t = time.perf_counter()
        eng.load(**tables)
        report("load", 0, rel_dir.name, time.perf_counter() - t)
        snapshot(not batch_dirs)
    for k, d in enumerate(batch_dirs[start:], start + 1):
        batch = _batch_tables(d, relations)
        t = time.perf_counter()
        eng.apply(batch)
        report("batch", k, d.name, time.perf_counter() - t)
        snapshot(k == len(batch_dirs))
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``query`` on ``gpu-ivm``'s subparsers."""
    q = subparsers.add_parser(
        "query", help="maintain a conjunctive query with access patterns over Parquet files",
        description="Load <NAME>.parquet per relation from --relations, apply the batch "
                    "sub-folders of --batches in natural order, print the result count after "
                    "each (docs/queries-cq.md).")
    q.add_argument("query", help="the query, e.g. 'Q(B,C | A) = R(A,B), S(A,C)'")
    q.add_argument("--relations", required=True, metavar="DIR",
                   help="folder with <NAME>.parquet for every relation of the query")
    q.add_argument("--batches", default=None, metavar="DIR",
                   help="folder of batch sub-folders, each with <NAME>.parquet files that have "
                        "a mult column (+k inserts, -k deletes)")
    q.add_argument("--requests", default=None, metavar="FILE",
                   help="access requests (Parquet or CSV, one column per input variable), "
                        "answered after the load and every batch")
    q.add_argument("--out", default=None, metavar="DIR",
                   help="folder for answers-<NNNNNN>.parquet (with --requests)")
    q.add_argument("--epsilon", default=None, metavar="E",
                   help="the heavy/light trade-off in [0, 1] (default 1; below 1 for "
                        "hierarchical queries: docs/queries-cq.md)")
    q.add_argument("--snapshot-dir", default=None, metavar="DIR",
                   help="write snapshots DIR/snapshot-<n> (n = batch folders applied) after "
                        "the load, every --snapshot-every batches and after the last")
    q.add_argument("--snapshot-every", type=int, default=1, metavar="K",
                   help="with --snapshot-dir: a snapshot every K batch folders (default 1)")
    q.add_argument("--resume", default=None, metavar="DIR",
                   help="continue from the newest snapshot in DIR (or the snapshot folder DIR)")
    q.add_argument("--mode", default="general", choices=["general", "insert-only", "auto"],
                   help="insert-only: refuse any row with a negative mult (exit 2, nothing "
                        "applied); auto: insert-only until the first delete (default general)")
    q.add_argument("--strategy", default="auto", choices=["auto", "view-trees"],
                   help="auto (default): the planner's choice, the triangle engine (IVM^eps) "
                   "for the triangle queries, R(A,B), S(B,C), T(C,A) with any head; "
                   "view-trees: the general view trees for every query")
    q.add_argument("--json", action="store_true", help="one JSON object per line")
    q.add_argument("--backend", default="cpu", choices=["cpu", "cuda"], type=str.lower,
                   help="where the operators run: the CPU kernels or their CUDA twins "
                        "(default cpu; docs/queries-cq.md)")
    q.set_defaults(fn=cmd_query)
    return q
