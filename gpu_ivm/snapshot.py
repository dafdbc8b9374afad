"""Snapshots: save an engine's full IVM^ε state to a folder and restore it exactly.

A snapshot is a folder holding one Arrow IPC file per stored array and a JSON manifest:

=====================  ==================================================================
``manifest.json``      format version, library version, form (graph / relations), config
                       (directed, ε as ``"p/q"`` strings, on_conflict, adaptive), N, Q, the
                       count, sizes, ``last_batch_id``, ``batches_applied``, a sha256 of
                       every relation's tuples, per-file sha256 and byte counts, caller
                       metadata, and a sha256 of the manifest itself
``encoder.arrow``      the user keys in dense-id order (one int64 or string column ``key``)
``<K>.h.arrow``        heavy part of relation K: packed keys ``key`` (sorted) and ``val``
``<K>.l.arrow``        light part of relation K
``<K>.heavy.arrow``    the ids flagged heavy in relation K (column ``id``)
``view<k>.arrow``      view k (``K_k,h · K_k+1,l``): packed keys and values
=====================  ==================================================================

Keys are stored as dense ids (packed ``first << 32 | second``) plus the encoder's key list, so
the format holds nothing backend-specific: a snapshot written by one backend restores on any
other (``load(path, backend=...)``). The transposed heavy copy ``K_ht``, thresholds and the
view storage layout (dense rows) are derived on restore.

Writing is atomic: files go to ``<path>.tmp-XXXX/`` (each fsynced, then the folder); then an
existing ``<path>`` is renamed to ``<path>.old-XXXX``, the temporary folder is renamed to
``<path>``, the parent folder is fsynced and the old snapshot deleted. An older snapshot is
thus replaced only once the new one is complete. Restoring verifies the manifest's own
checksum, every file's size and sha256, the arrays' shapes and ranges, rebuilds the engine,
runs :meth:`check_invariants` and recounts Q from the stored tuples; any mismatch raises
:class:`SnapshotError` naming the file.

Testing hook: ``GPU_IVM_SNAPSHOT_SLEEP=<seconds>`` sleeps after each file written, so crash
tests can kill a process in the middle of a snapshot. It is meant for tests only.

Examples
--------
>>> import tempfile, pathlib
>>> from gpu_ivm import GraphEngine
>>> from gpu_ivm import snapshot
>>> g = GraphEngine(epsilon="1/3")
>>> _ = g.load({"src": [1, 2, 3, 3], "dst": [2, 3, 1, 4]})
>>> _ = g.apply({"src": [4], "dst": [1], "sign": [1]}, batch_id=7)
>>> d = pathlib.Path(tempfile.mkdtemp()) / "snap"
>>> _ = snapshot.save(g, d)
>>> h = snapshot.load(d)
>>> h.count(), h.last_batch_id, str(h.epsilon)
(2, 7, '1/3')
>>> h.apply({"src": [2], "dst": [4], "sign": [1]}).triangles
4
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ._version import __version__
from .errors import GpuIvmError, InputError, InvariantError
from .rational import Thresholds
from .views import ViewStore

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "SLEEP_ENV",
    "SnapshotError",
    "SnapshotInfo",
    "find_latest",
    "list_snapshots",
    "load",
    "read_manifest",
    "save",
    "save_numbered",
]

FORMAT = "gpu_ivm-snapshot"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SLEEP_ENV = "GPU_IVM_SNAPSHOT_SLEEP"
NUMBERED = re.compile(r"^snapshot-(\d+)$")
_TEMP_MARKERS = (".tmp-", ".old-")

# The engines import this module (``engine.snapshot()`` / ``restore()``), so it does not import
# them: each engine module registers its class under its manifest form when imported (the
# package ``gpu_ivm`` imports them all), and the insert-only engine its own writer and reader.
_FORMS: dict[str, type] = {}
_INSERT_ONLY_FORMAT: dict[str, Any] = {}


def register_form(form: str, cls: type) -> None:
    """Record ``cls`` as the engine class of the manifest form ``form`` ("graph",
    "relations"); called by the engine modules when imported."""
    _FORMS[form] = cls


def register_insert_only_format(write, load) -> None:
    """Record the writer and reader of the insert-only state (:mod:`gpu_ivm.insert_only`
    calls this when imported): ``write(engine, folder, metadata) -> manifest`` and
    ``load(engine, manifest, folder, table, keys) -> engine``."""
    _INSERT_ONLY_FORMAT.update(write=write, load=load)


def _form_class(form: str) -> type:
    try:
        return _FORMS[form]
    except KeyError:
        raise RuntimeError(f"no engine class registered for the snapshot form {form!r} "
                           "(import gpu_ivm)") from None


class SnapshotError(GpuIvmError, ValueError):
    """A snapshot cannot be written or restored: missing, truncated, corrupted or mismatched.

    Attributes
    ----------
    file : str or None
        The snapshot file at fault (a path), when one is.
    """

    def __init__(self, message: str, *, file: str | os.PathLike[str] | None = None):
        self.file = None if file is None else str(file)
        super().__init__(f"{self.file}: {message}" if self.file else message)


@dataclass(frozen=True)
class SnapshotInfo:
    """What :meth:`GraphEngine.snapshot` / :meth:`RelationEngine.snapshot` wrote.

    Attributes
    ----------
    path : pathlib.Path
        The snapshot folder.
    batch_id : int or None
        The engine's ``last_batch_id`` (None before the first batch with an id).
    count : int
        The maintained count (triangles, directed 3-cycles or Q) at the snapshot.
    files : int
        Files written, the manifest included.
    bytes : int
        Their total size in bytes.
    created : float
        Unix time (seconds) the snapshot was written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine()
    >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> info = g.snapshot(pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> info.count, info.batch_id, info.files, info.bytes > 0
    (1, None, 6, True)
    """

    path: Path
    batch_id: int | None
    count: int
    files: int
    bytes: int
    created: float

    @classmethod
    def of(cls, path: str | os.PathLike[str], manifest: dict) -> SnapshotInfo:
        """The summary of the snapshot at ``path`` with the manifest ``manifest``."""
        folder = Path(path)
        files = manifest.get("files", {})
        size = sum(int(f.get("bytes", 0)) for f in files.values())
        with contextlib.suppress(OSError):
            size += (folder / MANIFEST).stat().st_size
        last = manifest.get("last_batch_id")
        return cls(path=folder, batch_id=None if last is None else int(last),
                   count=int(manifest.get("count", 0)), files=len(files) + 1, bytes=size,
                   created=float(manifest.get("created_unix", 0.0)))


# ---------------------------------------------------------------------------- low-level I/O
def _sleep_hook() -> None:
    """Test hook: sleep ``$GPU_IVM_SNAPSHOT_SLEEP`` seconds (crash tests kill mid-write)."""
    val = os.environ.get(SLEEP_ENV)
    if val:
        try:
            time.sleep(float(val))
        except ValueError:
            pass


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_bytes(path: Path, data: bytes) -> dict:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    _sleep_hook()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _kv_table(keys: np.ndarray, vals: np.ndarray) -> pa.Table:
    return pa.table({"key": pa.array(np.ascontiguousarray(keys, np.int64)),
                     "val": pa.array(np.ascontiguousarray(vals, np.int64))})


def _digest_arrays(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a, np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


def _manifest_digest(man: dict) -> str:
    body = {k: v for k, v in man.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _eps_str(e: Fraction) -> str:
    return f"{e.numerator}/{e.denominator}"


# ---------------------------------------------------------------------------- saving
def _config(engine) -> dict:
    GraphEngine, RelationEngine = _form_class("graph"), _form_class("relations")
    adaptive = bool(getattr(getattr(engine, "policy", None), "enabled", True))
    if isinstance(engine, GraphEngine):
        return {"form": "graph", "query": "directed 3-cycles" if engine.directed
                else "triangles", "directed": engine.directed,
                "epsilon": _eps_str(engine.epsilon), "epsilon_auto": engine.epsilon_auto,
                "on_conflict": engine.on_conflict,
                "adaptive": adaptive, "maintain": list(engine.maintain),
                "track_changes": engine.track_changes,
                **({"results_from": engine.results_from} if engine.results_from != "auto"
                   else {}),
                # insert-only / auto engines (gpu_ivm.insert_only) record their mode
                **({"mode": engine.mode} if engine.mode != "general" else {})}
    if isinstance(engine, RelationEngine):
        mode = {}
        if engine.mode != "general":  # insert-only / auto (gpu_ivm.insert_only_relations):
            # the mode and the ε setting of the general structures built at the first delete
            mode = {"mode": engine.mode, "general_epsilon": {
                nm: "auto" if e is None else _eps_str(e)
                for nm, e in zip(engine.names, engine.general_epsilons)}}
        return {"form": "relations", "query": "sum R(a,b)*S(b,c)*T(c,a)",
                "epsilon": {nm: _eps_str(e) for nm, e in zip(engine.names, engine.epsilons)},
                "epsilon_auto": engine.epsilon_auto, "adaptive": adaptive,
                "maintain": list(engine.maintain),
                "track_changes": engine.track_changes, **mode}
    raise InputError(f"cannot snapshot a {type(engine).__name__}; expected a GraphEngine or "
                     "a RelationEngine", column="engine")


def _encoder_table(engine) -> pa.Table:
    enc = engine.encoder
    n = len(enc)
    ids = np.arange(n, dtype=np.int64)
    if enc.kind == "str":
        return pa.table({"key": pa.array(enc.decode(ids).tolist(), pa.large_string())})
    return pa.table({"key": pa.array(enc.decode(ids) if n else np.zeros(0, np.int64))})


def _write_folder(engine, folder: Path, metadata: dict | None) -> dict:
    insert_only = bool(getattr(engine, "insert_only_active", False))
    if insert_only and _config(engine)["form"] == "graph":  # stamped edges, its own format
        return _INSERT_ONLY_FORMAT["write"](engine, folder, metadata)

    files: dict[str, dict] = {}
    tables: list[tuple[str, pa.Table]] = [("encoder.arrow", _encoder_table(engine))]
    rel_meta = []
    host = engine.backend.to_host  # the state may live in device memory

    def items(st) -> tuple[np.ndarray, np.ndarray]:
        k, v = st.items()
        return host(k), host(v)

    for K in engine.rels:
        hk, hv = items(K.h)
        lk, lv = items(K.l)
        heavy_ids = np.flatnonzero(host(K.heavy)).astype(np.int64)
        tables += [(f"{K.name}.h.arrow", _kv_table(hk, hv)),
                   (f"{K.name}.l.arrow", _kv_table(lk, lv)),
                   (f"{K.name}.heavy.arrow", pa.table({"id": pa.array(heavy_ids)}))]
        ak, av = items(K)
        rel_meta.append({"name": K.name, "epsilon": _eps_str(K.eps), "epsilon_auto": K.auto,
                         "max_abs": int(K.max_abs),
                         "tuples": int(ak.shape[0]), "heavy": len(K.h), "light": len(K.l),
                         "heavy_keys": int(heavy_ids.shape[0]),
                         "tuples_sha256": _digest_arrays(ak, av)})
    for k, v in enumerate(engine.views):
        vk, vv = items(v)
        tables.append((f"view{k}.arrow", _kv_table(vk, vv)))
    for name, table in tables:
        files[name] = {"rows": table.num_rows, **_write_bytes(folder / name,
                                                              _table_bytes(table))}
    man: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "created_unix": time.time(),
        **_config(engine),
        "key_kind": engine.encoder.kind,
        "num_keys": len(engine.encoder),
        "N": int(engine.N),
        "Q": int(engine.Q),
        "count": int(engine.count()),
        "size": int(engine.size),
        "last_batch_id": engine.last_batch_id,
        "batches_applied": int(engine.batches_applied),
        "stats": {k: int(v) for k, v in engine._stats.items()},
        # the relations form's insert-only state is a general state at ε = 0
        **({"insert_only_active": True} if insert_only else {}),
        "relations": rel_meta,
        "files": files,
        "metadata": metadata or {},
    }
    man["manifest_sha256"] = _manifest_digest(man)
    _write_bytes(folder / MANIFEST, (json.dumps(man, indent=1, sort_keys=True) + "\n").encode())
    _fsync_dir(folder)
    return man


def save(engine, path: str | os.PathLike[str], *, metadata: dict | None = None) -> dict:
    """Write a snapshot of ``engine`` to the folder ``path``, atomically.

    A state left stale by the adaptive recompute path is brought up to date first
    (``engine._freshen()``), so the snapshot holds a fresh IVM^ε state. The files are written
    to ``<path>.tmp-XXXX`` and fsynced; an existing ``path`` is replaced only after the new
    snapshot is complete (renamed to ``<path>.old-XXXX``, the new folder renamed into place,
    the old one deleted).

    Parameters
    ----------
    engine : GraphEngine or RelationEngine
        Any configuration (directed or not, any ε, per-relation ε, on_conflict).
    path : str or path-like
        The snapshot folder to create or replace. Its parent folder must exist.
    metadata : dict, optional
        JSON-serialisable data stored in the manifest under ``"metadata"`` (the CLI records
        the batch files applied).

    Returns
    -------
    dict
        The manifest written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from gpu_ivm import RelationEngine
    >>> e = RelationEngine(epsilon={"R": 0, "S": "1/2", "T": 1})
    >>> _ = e.load(R={"src": [1], "dst": [2]}, S={"src": [2], "dst": [3]},
    ...            T={"src": [3], "dst": [1], "mult": [2]})
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "rel"
    >>> man = save(e, d, metadata={"note": "demo"})
    >>> man["Q"], man["epsilon"], sorted(man["files"])[:2]
    (2, {'R': '0/1', 'S': '1/2', 'T': '1/1'}, ['R.h.arrow', 'R.heavy.arrow'])
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise SnapshotError("the parent folder does not exist", file=target.parent)
    _config(engine)  # refuse unknown engine types before touching the disk
    engine._freshen()
    return write_atomically(target, lambda tmp: _write_folder(engine, tmp, metadata), metadata)


def write_atomically(target: Path, write, metadata: dict | None = None) -> dict:
    """Write a snapshot folder with ``write(tmp) -> manifest`` into ``<target>.tmp-XXXX``, then
    swap it into place (an existing ``target`` renamed away first and deleted last), so
    ``target`` is always absent, the old snapshot or the complete new one. ``metadata`` must
    be JSON-serialisable. Shared by the triangle engines, the sliding window and the query
    engine."""
    parent = target.parent
    if not parent.is_dir():
        raise SnapshotError("the parent folder does not exist", file=parent)
    if metadata is not None:
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as e:
            raise InputError(f"snapshot metadata is not JSON-serialisable: {e}",
                             column="metadata") from None
    token = secrets.token_hex(4)
    tmp = parent / f"{target.name}.tmp-{token}"
    tmp.mkdir()
    try:
        man = write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = parent / f"{target.name}.old-{token}"
        os.replace(target, old)
    os.replace(tmp, target)
    _fsync_dir(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return man


def open_folder(path: str | os.PathLike[str], form: str, what: str):
    """(folder, manifest, manifest path, ``table(name, columns)``) of a snapshot of ``form``
    (a verified manifest; another form is refused as "not ``what``"). ``table`` reads a file
    the manifest lists, checked as :func:`load` checks its own."""
    folder = Path(path)
    man = read_manifest(folder)
    mpath = folder / MANIFEST
    if man.get("form") != form:
        raise SnapshotError(f"holds a {man.get('form')!r} snapshot, not {what}", file=mpath)
    files = man.get("files", {})

    def table(name: str, columns: dict[str, str]) -> pa.Table:
        if name not in files:
            raise SnapshotError(f"manifest does not list {name}", file=mpath)
        return _read_table(folder, name, files[name], columns)

    return folder, man, mpath, table


def write_tables(folder: Path, tables: dict[str, pa.Table], fields: dict,
                 metadata: dict | None) -> dict:
    """Write ``tables`` (file name -> Arrow table) into ``folder`` and the manifest: format,
    versions, creation time, ``fields``, each file's rows, bytes and sha256, ``metadata`` and
    the manifest's own checksum. Returns the manifest."""
    files = {name: {"rows": t.num_rows, **_write_bytes(folder / name, _table_bytes(t))}
             for name, t in tables.items()}
    man = {"format": FORMAT, "format_version": FORMAT_VERSION, "library_version": __version__,
           "created_unix": time.time(), **fields, "files": files, "metadata": metadata or {}}
    man["manifest_sha256"] = _manifest_digest(man)
    _write_bytes(folder / MANIFEST, (json.dumps(man, indent=1, sort_keys=True) + "\n").encode())
    _fsync_dir(folder)
    return man


# ---------------------------------------------------------------------------- loading
def read_manifest(path: str | os.PathLike[str]) -> dict:
    """Read and verify a snapshot's manifest (its own checksum, format and version).

    Parameters
    ----------
    path : str or path-like
        The snapshot folder.

    Returns
    -------
    dict
        The manifest.

    Raises
    ------
    SnapshotError
        The folder or manifest is missing, truncated, corrupted or of an unknown format.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine()
    >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "s"
    >>> _ = save(g, d)
    >>> m = read_manifest(d)
    >>> m["form"], m["count"], m["Q"]
    ('graph', 1, 6)
    """
    folder = Path(path)
    mpath = folder / MANIFEST
    if not folder.is_dir():
        olds = sorted(folder.parent.glob(f"{folder.name}.old-*")) if folder.parent.is_dir() \
            else []
        hint = f" (an interrupted replace left the previous snapshot at {olds[-1]})" \
            if olds else ""
        raise SnapshotError(f"no snapshot folder here{hint}", file=folder)
    try:
        raw = mpath.read_bytes()
    except FileNotFoundError:
        raise SnapshotError("manifest missing: the snapshot is incomplete or damaged",
                            file=mpath) from None
    except OSError as e:
        raise SnapshotError(f"cannot read the manifest: {e}", file=mpath) from None
    try:
        man = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SnapshotError(f"manifest is not valid JSON (truncated or corrupted?): {e}",
                            file=mpath) from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise SnapshotError("not a gpu_ivm snapshot manifest", file=mpath)
    if man.get("format_version") != FORMAT_VERSION:
        raise SnapshotError(f"snapshot format version {man.get('format_version')!r} is not "
                            f"supported (this library reads version {FORMAT_VERSION})",
                            file=mpath)
    if man.get("manifest_sha256") != _manifest_digest(man):
        raise SnapshotError("manifest checksum mismatch (the manifest was modified or "
                            "corrupted)", file=mpath)
    return man


def _read_table(folder: Path, name: str, info: dict, columns: dict[str, str]) -> pa.Table:
    fpath = folder / name
    try:
        data = fpath.read_bytes()
    except FileNotFoundError:
        raise SnapshotError("file missing", file=fpath) from None
    except OSError as e:
        raise SnapshotError(f"cannot read: {e}", file=fpath) from None
    if len(data) != info.get("bytes"):
        raise SnapshotError(f"size {len(data)} bytes, manifest says {info.get('bytes')} "
                            "(truncated or corrupted)", file=fpath)
    if hashlib.sha256(data).hexdigest() != info.get("sha256"):
        raise SnapshotError("sha256 checksum mismatch (corrupted)", file=fpath)
    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowException, OSError, ValueError) as e:
        raise SnapshotError(f"not a readable Arrow IPC file: {e}", file=fpath) from None
    for col, kind in columns.items():
        if col not in table.column_names:
            raise SnapshotError(f"column {col!r} missing", file=fpath)
        t = table.schema.field(col).type
        ok = pa.types.is_int64(t) if kind == "int" else (
            pa.types.is_string(t) or pa.types.is_large_string(t))
        if not ok:
            raise SnapshotError(f"column {col!r} has type {t}, expected {kind}", file=fpath)
        if table.column(col).null_count:
            raise SnapshotError(f"column {col!r} holds nulls", file=fpath)
    if table.num_rows != info.get("rows"):
        raise SnapshotError(f"{table.num_rows} rows, manifest says {info.get('rows')}",
                            file=fpath)
    return table


def _int_col(table: pa.Table, col: str) -> np.ndarray:
    return np.ascontiguousarray(table.column(col).to_numpy(), np.int64)


def _check_pairs(fpath: Path, keys: np.ndarray, vals: np.ndarray, n_ids: int) -> None:
    if keys.shape[0] == 0:
        return
    if (np.diff(keys) <= 0).any():
        raise SnapshotError("keys are not sorted and unique", file=fpath)
    if (vals == 0).any():
        raise SnapshotError("stored zero value", file=fpath)
    if keys[0] < 0 or (keys >> 32).max() >= n_ids or (keys & 0xFFFFFFFF).max() >= n_ids:
        raise SnapshotError(f"ids outside [0, {n_ids})", file=fpath)


def _new_engine(man: dict, mpath: Path, backend):
    GraphEngine, RelationEngine = _form_class("graph"), _form_class("relations")
    try:
        if man["form"] == "graph":
            return GraphEngine(directed=bool(man["directed"]), epsilon=man["epsilon"],
                               backend=backend, on_conflict=man["on_conflict"],
                               adaptive=bool(man.get("adaptive", True)),
                               maintain=man.get("maintain"),
                               track_changes=bool(man.get("track_changes", False)),
                               mode=man.get("mode", "general"),
                               results_from=man.get("results_from", "auto"))
        if man["form"] == "relations":
            eps = man["epsilon"]  # in use; an insert-only state's general setting is apart
            if man.get("insert_only_active"):
                eps = man["general_epsilon"]
            return RelationEngine(epsilon=dict(eps), backend=backend,
                                  adaptive=bool(man.get("adaptive", True)),
                                  maintain=man.get("maintain"),
                                  track_changes=bool(man.get("track_changes", False)),
                                  mode=man.get("mode", "general"))
    except KeyError as e:
        raise SnapshotError(f"manifest lacks {e}", file=mpath) from None
    except InputError as e:
        raise SnapshotError(f"manifest holds a bad engine configuration: {e}",
                            file=mpath) from None
    raise SnapshotError(f"unknown form {man.get('form')!r}", file=mpath)


def load(path: str | os.PathLike[str], *, backend=None, expect: type | None = None):
    """Restore an engine from a snapshot folder written by :func:`save`.

    Parameters
    ----------
    path : str or path-like
        The snapshot folder.
    backend : str or Backend, optional
        The backend of the restored engine (default as for a new engine); snapshots hold no
        backend-specific data, so any backend restores any snapshot.
    expect : type, optional
        Require the snapshot to hold an engine of this class (``GraphEngine.restore`` passes
        its own class); anything else raises :class:`SnapshotError` before reading the data.

    Returns
    -------
    GraphEngine or RelationEngine
        As recorded in the manifest, with the same configuration, state, ``last_batch_id``
        and ``batches_applied``.

    Raises
    ------
    SnapshotError
        A file is missing, truncated or corrupted, the state breaks an IVM^ε invariant, or the
        recounted Q differs from the manifest; the message names the file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine(directed=True, epsilon=0)
    >>> _ = g.load({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]})
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "s"
    >>> _ = save(g, d)
    >>> h = load(d, backend="cpu")
    >>> h.count(), h.directed, sorted(h.edges()[0].tolist())
    (1, True, ['a', 'b', 'c'])
    """
    folder = Path(path)
    man = read_manifest(folder)
    mpath = folder / MANIFEST
    files = man.get("files")
    if not isinstance(files, dict):
        raise SnapshotError("manifest lacks the file list", file=mpath)

    def table(name: str, columns: dict[str, str]) -> pa.Table:
        if name not in files:
            raise SnapshotError(f"manifest does not list {name}", file=mpath)
        return _read_table(folder, name, files[name], columns)

    eng = _new_engine(man, mpath, backend)
    if expect is not None and not isinstance(eng, expect):
        raise SnapshotError(f"holds a {type(eng).__name__} ({man.get('form')} form), not a "
                            f"{expect.__name__}", file=mpath)
    rel_meta = man.get("relations")
    io_state = bool(man.get("insert_only_active"))  # an insert-only engine's own format
    if io_state != bool(getattr(eng, "insert_only_active", False)):
        if io_state:
            raise SnapshotError("manifest holds an insert-only state but no insert-only mode",
                                file=mpath)
        eng.mark_general()  # an auto-mode engine that switched to general
    special = io_state and man.get("form") == "graph"  # the stamped-edge format
    if special:
        pass
    elif not isinstance(rel_meta, list) or [r.get("name") for r in rel_meta] != list(eng.names):
        raise SnapshotError(f"manifest relations do not match the form {man['form']!r}",
                            file=mpath)
    # everything is read and checked before the engine is assembled
    kind = man.get("key_kind")
    enc_t = table("encoder.arrow", {"key": "str" if kind == "str" else "int"})
    n_ids = enc_t.num_rows
    if n_ids != man.get("num_keys"):
        raise SnapshotError(f"{n_ids} keys, manifest says {man.get('num_keys')}",
                            file=folder / "encoder.arrow")
    if kind == "str":
        keys_arr = np.array(enc_t.column("key").to_pylist(), dtype=object)
    else:
        keys_arr = _int_col(enc_t, "key")
    if len(set(keys_arr.tolist())) != n_ids:
        raise SnapshotError("duplicate keys", file=folder / "encoder.arrow")
    if special:
        return _INSERT_ONLY_FORMAT["load"](eng, man, folder, table, keys_arr)
    parts = []
    for K in eng.rels:
        got = {}
        for part in ("h", "l"):
            nm = f"{K.name}.{part}.arrow"
            t = table(nm, {"key": "int", "val": "int"})
            ks, vs = _int_col(t, "key"), _int_col(t, "val")
            _check_pairs(folder / nm, ks, vs, n_ids)
            got[part] = (ks, vs)
        nm = f"{K.name}.heavy.arrow"
        hid = _int_col(table(nm, {"id": "int"}), "id")
        if hid.shape[0] and (hid.min() < 0 or hid.max() >= n_ids or (np.diff(hid) <= 0).any()):
            raise SnapshotError("heavy ids out of range or not sorted", file=folder / nm)
        got["heavy"] = hid
        parts.append(got)
    views = []
    for k in range(len(eng.rels)):
        nm = f"view{k}.arrow"
        t = table(nm, {"key": "int", "val": "int"})
        ks, vs = _int_col(t, "key"), _int_col(t, "val")
        _check_pairs(folder / nm, ks, vs, n_ids)
        views.append((ks, vs))
    try:
        N, Q = int(man["N"]), int(man["Q"])
        last = man["last_batch_id"]
        applied = int(man["batches_applied"])
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"manifest lacks or garbles a counter: {e}", file=mpath) from None
    # assemble
    if n_ids:
        eng.encoder.commit(keys_arr)
    eng._grow_ids(max(n_ids, 1))
    eng.N = N
    dev = eng.backend.to_device  # the state goes to the backend's memory once
    for K, got, meta in zip(eng.rels, parts, rel_meta):
        cap = K.id_capacity
        K.th = Thresholds.of(N, K.eps)  # the ε in use (for "auto": the one last chosen)
        K.auto = bool(meta.get("epsilon_auto", False))  # "auto" chooses again at rebuilds
        heavy = np.zeros(cap, np.bool_)
        heavy[got["heavy"]] = True
        K.heavy = dev(heavy)
        hk, hv = got["h"]
        # the row tables and bitmaps are derived state, rebuilt here
        K.h = K.store_from_sorted(dev(hk), dev(hv), cap)
        K.l = K.store_from_sorted(*map(dev, got["l"]), cap)
        t = ((hk & 0xFFFFFFFF) << 32) | (hk >> 32)
        order = np.argsort(t, kind="stable")
        K.ht = K.store_from_sorted(dev(t[order]), dev(hv[order]), cap)
        K.max_abs = int(meta.get("max_abs", 0))
        K.watch_lights(N)
    cap = eng.rels[0].id_capacity
    eng.views = [ViewStore.build(dev(ks), dev(vs), cap, getattr(eng, "k", None))
                 for ks, vs in views]
    eng.Q = Q
    eng.stale = False
    eng.batches_applied = applied
    eng.last_batch_id = None if last is None else int(last)
    stats = man.get("stats")
    if isinstance(stats, dict):
        for k in eng._stats:
            eng._stats[k] = int(stats.get(k, 0))
    # verify the assembled state against its own definition and against the manifest
    try:
        eng.check_invariants()
    except InvariantError as e:
        raise SnapshotError(f"restored state breaks an IVM^ε invariant: {e}",
                            file=folder) from None
    for K, meta in zip(eng.rels, rel_meta):
        ak, av = map(eng.backend.to_host, K.items())
        if _digest_arrays(ak, av) != meta.get("tuples_sha256"):
            raise SnapshotError(f"relation {K.name}: tuples differ from the manifest checksum",
                                file=folder / f"{K.name}.h.arrow")
        if ak.shape[0] and int(np.abs(av).max()) > K.max_abs:
            raise SnapshotError(f"relation {K.name}: max_abs below the largest multiplicity",
                                file=mpath)
    recount = int(eng._count_from_stores())
    if recount != Q or eng.size != man.get("size") or eng.count() != man.get("count"):
        raise SnapshotError(f"Q recounted from the stored tuples is {recount}, manifest says "
                            f"{Q} (size {eng.size} vs {man.get('size')})", file=mpath)
    if eng.fq is not None:
        # the free-variable views are not stored: preprocessing rebuilds them from the tuples
        eng._queries_rebuild()
        if eng.fq.count != Q:
            raise SnapshotError(f"free-variable views rebuilt to {eng.fq.count} triangles, "
                                f"manifest says {Q}", file=mpath)
    return eng


# ---------------------------------------------------------------------------- numbered series
def list_snapshots(folder: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The numbered snapshots ``snapshot-<n>`` in ``folder``, oldest first.

    Temporary (``*.tmp-*``) and replaced (``*.old-*``) folders are ignored: a
    ``snapshot-<n>`` folder only appears by an atomic rename of a complete snapshot.

    Examples
    --------
    >>> import tempfile
    >>> list_snapshots(tempfile.mkdtemp())
    []
    """
    d = Path(folder)
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        m = NUMBERED.match(p.name)
        if m and p.is_dir():
            out.append((int(m.group(1)), p))
    return sorted(out)


def find_latest(folder: str | os.PathLike[str]) -> Path | None:
    """The newest numbered snapshot in ``folder``, or None if there is none.

    Its manifest is verified (:func:`read_manifest`); a damaged newest snapshot raises
    :class:`SnapshotError` rather than silently falling back to an older one.

    Examples
    --------
    >>> import tempfile
    >>> find_latest(tempfile.mkdtemp()) is None
    True
    """
    snaps = list_snapshots(folder)
    if not snaps:
        return None
    path = snaps[-1][1]
    read_manifest(path)
    return path


def save_numbered(engine, folder: str | os.PathLike[str], n: int, *,
                  metadata: dict | None = None, keep: int = 2, writer=None) -> Path:
    """Save ``engine`` as ``folder/snapshot-<n>`` (zero-padded) and keep only the newest
    ``keep`` numbered snapshots; leftover temporary folders are removed.

    Parameters
    ----------
    engine : GraphEngine or RelationEngine
        The engine to save.
    folder : str or path-like
        The snapshot series folder (created if missing). One writer at a time.
    n : int
        The snapshot number (the CLI uses the number of batch files applied).
    metadata : dict, optional
        Stored in the manifest.
    keep : int
        How many numbered snapshots to keep (at least 1).
    writer : callable, optional
        ``writer(engine, target, metadata=...)`` writing one snapshot (default: this module's
        :func:`save`; the sliding window and the query engine pass their own).

    Returns
    -------
    pathlib.Path
        The snapshot folder written.

    Examples
    --------
    >>> import tempfile
    >>> from gpu_ivm import GraphEngine
    >>> g = GraphEngine()
    >>> _ = g.load({"src": [1, 2, 3], "dst": [2, 3, 1]})
    >>> d = tempfile.mkdtemp()
    >>> for i in range(3):
    ...     _ = g.apply({"src": [10 + i], "dst": [1], "sign": [1]}, batch_id=i)
    ...     _ = save_numbered(g, d, i + 1)
    >>> [n for n, _ in list_snapshots(d)], find_latest(d).name
    ([2, 3], 'snapshot-000003')
    """
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    for p in d.iterdir():
        if p.name.startswith("snapshot-") and any(m in p.name for m in _TEMP_MARKERS):
            shutil.rmtree(p, ignore_errors=True)
    target = d / f"snapshot-{int(n):06d}"
    (save if writer is None else writer)(engine, target, metadata=metadata)
    snaps = list_snapshots(d)
    for _, p in snaps[: max(len(snaps) - max(int(keep), 1), 0)]:
        # rename first, so a crash mid-delete never leaves a half-deleted numbered folder
        trash = d / f"{p.name}.old-{secrets.token_hex(4)}"
        os.replace(p, trash)
        shutil.rmtree(trash, ignore_errors=True)
    _fsync_dir(d)
    return target
