"""Durable engine state: snapshots plus a write-ahead log of applied batches.

A folder holds ``snap-<id>`` snapshots (the engine after batch ``<id>``) and ``wal-<id>.arrow``
entries (the rows of batch ``<id>`` as applied). The state after batch ``b`` is the newest
snapshot with id ≤ b plus the log entries after it, up to ``b``, re-applied in id order (the
engines are deterministic, so this gives the same state). With ``snapshot_every=1`` every batch
is a snapshot and the log stays empty; with ``snapshot_every=m`` a batch costs one small Arrow
file and every m-th batch a snapshot.

Snapshots use :mod:`gpu_ivm.snapshot` (``save(engine, path)`` / ``load(path)``) when it is
installed, else a pickle of the engine (:func:`snapshot_format` says which). Every file is
written to a temporary name and renamed, so a crash never leaves a half-written entry.
"""

from __future__ import annotations

import importlib
import io
import os
import pathlib
import pickle
import shutil
import types
import uuid
from typing import Any

import pyarrow as pa

__all__ = ["EngineLog", "load_engine", "save_engine", "snapshot_format"]

_MAGIC = b"GPUIVM-PICKLE1\n"


def _snapshot_module() -> types.ModuleType | None:
    try:
        mod = importlib.import_module("gpu_ivm.snapshot")
    except ImportError:
        return None
    if callable(getattr(mod, "save", None)) and callable(getattr(mod, "load", None)):
        return mod
    return None


def snapshot_format() -> str:
    """``"gpu_ivm.snapshot"`` when that module is installed, else ``"pickle"``.

    Examples
    --------
    >>> snapshot_format() in ("gpu_ivm.snapshot", "pickle")
    True
    """
    return "gpu_ivm.snapshot" if _snapshot_module() is not None else "pickle"


class _EnginePickler(pickle.Pickler):
    """Pickles an engine: modules and backends (kernel tables) are stored by name."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        from gpu_ivm.backend import Backend, get_backend

        if isinstance(obj, Backend):
            return get_backend, (obj.name,)
        return NotImplemented


def _tmp_name(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = pathlib.Path(path)
    tmp = _tmp_name(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_engine(engine: Any, path: str | os.PathLike[str]) -> None:
    """Save an engine atomically (gpu_ivm.snapshot when installed, else a pickle).

    Examples
    --------
    >>> import tempfile, pathlib, gpu_ivm
    >>> g = gpu_ivm.GraphEngine()
    >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "snap"
    >>> save_engine(g, p)
    >>> load_engine(p).count()
    1
    """
    path = pathlib.Path(path)
    mod = _snapshot_module()
    if mod is not None:
        mod.save(engine, path)  # atomic itself (temporary folder + rename)
        return
    buf = io.BytesIO()
    buf.write(_MAGIC)
    _EnginePickler(buf, protocol=5).dump(engine)
    write_bytes_atomic(path, buf.getvalue())


def load_engine(path: str | os.PathLike[str]) -> Any:
    """Load an engine saved by :func:`save_engine` (either format)."""
    path = pathlib.Path(path)
    if path.is_file():
        with open(path, "rb") as f:
            head = f.read(len(_MAGIC))
            if head == _MAGIC:
                return pickle.load(f)  # noqa: S301 - our own state folder
    mod = _snapshot_module()
    if mod is None:
        raise FileNotFoundError(f"{path} is not a pickled engine and gpu_ivm.snapshot is absent")
    return mod.load(path)


def remove_path(path: str | os.PathLike[str]) -> None:
    """Delete a file or a folder if it exists."""
    path = pathlib.Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def _id_name(prefix: str, batch_id: int, suffix: str = "") -> str:
    return f"{prefix}{batch_id:+021d}{suffix}"


class EngineLog:
    """Snapshots and a write-ahead log of one engine in a folder (see the module docstring).

    Parameters
    ----------
    folder : path
        Created if missing. Must be visible to every process that restores the engine.
    snapshot_every : int
        Take a snapshot every this many recorded batches (1: every batch, no log).

    Examples
    --------
    >>> import tempfile, gpu_ivm
    >>> log = EngineLog(tempfile.mkdtemp(), snapshot_every=3)
    >>> g = gpu_ivm.GraphEngine()
    >>> log.record(g, -1)                       # the initial state
    >>> batch = {"src": [1, 2, 3], "dst": [2, 3, 1], "sign": [1, 1, 1]}
    >>> _ = g.apply(batch, batch_id=0)
    >>> log.record(g, 0, batch)                 # logged, no snapshot yet
    >>> log.restore().count(), log.restore(upto=-1).count()
    (1, 0)
    """

    def __init__(self, folder: str | os.PathLike[str], *, snapshot_every: int = 1):
        self.folder = pathlib.Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.snapshot_every = max(1, int(snapshot_every))

    # ------------------------------------------------------------------ listing
    def _ids(self, prefix: str, suffix: str = "") -> list[int]:
        out = []
        for p in self.folder.iterdir():
            name = p.name
            if name.startswith(prefix) and name.endswith(suffix) and not name.startswith("."):
                core = name[len(prefix):len(name) - len(suffix) if suffix else None]
                try:
                    out.append(int(core))
                except ValueError:
                    continue
        return sorted(out)

    def snapshots(self) -> list[int]:
        """Batch ids of the stored snapshots, ascending."""
        return self._ids("snap-")

    def log_ids(self) -> list[int]:
        """Batch ids of the stored log entries, ascending."""
        return self._ids("wal-", ".arrow")

    def snapshot_path(self, batch_id: int) -> pathlib.Path:
        return self.folder / _id_name("snap-", batch_id)

    def log_path(self, batch_id: int) -> pathlib.Path:
        return self.folder / _id_name("wal-", batch_id, ".arrow")

    # ------------------------------------------------------------------ restore
    def restore(self, upto: int | None = None) -> Any | None:
        """The engine after batch ``upto`` (default: the newest recorded), or None if no
        snapshot at or before it exists."""
        snaps = [s for s in self.snapshots() if upto is None or s <= upto]
        if not snaps:
            return None
        base = snaps[-1]
        engine = load_engine(self.snapshot_path(base))
        for b in self.log_ids():
            if b <= base or (upto is not None and b > upto):
                continue
            with pa.memory_map(str(self.log_path(b))) as src:
                table = pa.ipc.open_file(src).read_all()
            engine.apply(table, batch_id=b)
        return engine

    # ------------------------------------------------------------------ record
    def record(self, engine: Any, batch_id: int, applied: Any = None) -> None:
        """Make the state after ``batch_id`` durable: a snapshot, or a log entry holding
        ``applied`` (the rows as applied, anything ``pyarrow.table`` accepts)."""
        snaps = [s for s in self.snapshots() if s < batch_id]
        pending = [b for b in self.log_ids() if (not snaps or b > snaps[-1]) and b < batch_id]
        if applied is None or not snaps or len(pending) + 1 >= self.snapshot_every:
            save_engine(engine, self.snapshot_path(batch_id))
            remove_path(self.log_path(batch_id))
            return
        table = applied if isinstance(applied, pa.Table) else pa.table(applied)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        write_bytes_atomic(self.log_path(batch_id), sink.getvalue().to_pybytes())

    def gc(self, committed: int | None = None) -> None:
        """Delete what restoring to ``committed`` (default: the newest state) no longer
        needs: snapshots older than the newest one at or before it, and log entries up to
        that snapshot. Entries after ``committed`` are kept (they may be re-applied)."""
        snaps = [s for s in self.snapshots() if committed is None or s <= committed]
        if not snaps:
            return
        keep = snaps[-1]
        for s in self.snapshots():
            if s < keep:
                remove_path(self.snapshot_path(s))
        for b in self.log_ids():
            if b <= keep:
                remove_path(self.log_path(b))


def read_recorded_tables(record: dict | None, batch_id: int, path_of) -> dict | None:
    """The result tables a batch record lists (Arrow IPC files at ``path_of(batch_id, name)``),
    or None when ``record`` is about another batch. Shared by the streaming sink and the
    HyperCube driver: what a replay of the batch re-emits."""
    import pyarrow as pa

    if record is None or int(record.get("batch_id", record.get("batch", -2))) != int(batch_id):
        return None
    tables = {}
    for name in record.get("tables", []):
        p = path_of(batch_id, name)
        if p is None or not p.exists():
            raise FileNotFoundError(f"the recorded {name!r} results of batch {batch_id} "
                                    f"are missing ({p})")
        with pa.memory_map(str(p)) as src:
            tables[name] = pa.ipc.open_file(src).read_all()
    return tables
