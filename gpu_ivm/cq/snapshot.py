"""Snapshots of a :class:`gpu_ivm.cq.engine.Engine` or a
:class:`gpu_ivm.cq.tradeoff.TradeoffEngine`: the base relations and the query.

A snapshot folder (written atomically, as :mod:`gpu_ivm.snapshot` writes the triangle
engines') holds ``manifest.json`` (the query text, the column names read per relation, the
batches applied, the count, a sha256 per relation) and one Arrow IPC file per relation,
``rel-<NAME>.arrow``, with its key columns ``c0, c1, ...`` and ``mult``. The views are
derived state: restoring rebuilds them from the relations (the engine's preprocessing,
O(N) for a CQAP_0 query) and checks the count against the manifest.

A trade-off engine's snapshot adds ``epsilon`` and its partition to the manifest (``M``, the
rebalancing counters, a sha256 per fork of its heavy key values) and each fork's heavy values
as ``heavy-values-<k>.arrow`` (k the fork's id; columns ``k0, k1, ...`` in the order of the
fork's key): restoring rebuilds every strategy with that partition, not a fresh strict one,
so rebalancing goes on as it would have. Snapshots of the earlier one-fork format (one
``heavy-values.arrow`` with column ``x``) are still read. Each class restores only its own
snapshots.

>>> import tempfile, pathlib
>>> from gpu_ivm.cq import Engine
>>> eng = Engine("Q(C | A) = R(A,B), S(B,C)")
>>> eng.load(R={"a": [1, 1], "b": [2, 3]}, S={"b": [2, 3], "c": [7, 7]})
>>> d = pathlib.Path(tempfile.mkdtemp()) / "snap"
>>> _ = eng.snapshot(d)
>>> back = Engine.restore(d)
>>> back.count(), back.request({"A": [1]}).to_pydict()["mult"]
(2, [2])
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

FORM = "cq"
HEAVY = "heavy-values.arrow"  # the one-fork format: column x
VALUES = "values.arrow"  # the strings of the string columns, in id order: column value


def _heavy_file(k: int) -> str:
    return f"heavy-values-{k}.arrow"


def _table(rel) -> pa.Table:
    cols = {f"c{j}": pa.array(np.ascontiguousarray(rel.keys[:, j]))
            for j in range(rel.keys.shape[1])}
    return pa.table({**cols, "mult": pa.array(rel.mult)})


def save(eng, path: str | os.PathLike[str], *, metadata: dict | None = None) -> dict:
    """Write ``eng`` to the folder ``path`` atomically; returns the manifest."""
    from .. import snapshot as sn

    def write(folder: Path) -> dict:
        base = {name: rel.zrel() for name, rel in eng.base.items()}
        tables = {f"rel-{name}.arrow": _table(rel) for name, rel in base.items()}
        digests = {name: sn._digest_arrays(rel.keys.ravel(), rel.mult)
                   for name, rel in base.items()}
        reader = getattr(eng, "_reader", eng)  # the engine that reads tables (its strings)
        if len(reader._values):
            tables[VALUES] = pa.table({"value": pa.array(reader._values.values, pa.string())})
        kinds: dict[str, dict[str, str]] = {}
        for (rel, j), kind in reader._kinds.kinds.items():
            kinds.setdefault(rel, {})[str(j)] = kind
        fields = {"form": FORM, "query": str(eng.query), "columns": eng.columns,
                  "column_kinds": kinds,
                  "batches_applied": eng.batches_applied, "count": int(eng.count()),
                  "mode": eng.mode, "insert_only_active": eng.insert_only_active,
                  "switched_at": eng.switched_at,
                  "relations_sha256": digests}
        if hasattr(eng, "_restore_state"):  # a trade-off engine: its ε and partition
            for k, h in enumerate(eng.heavy_sets):
                tables[_heavy_file(k)] = pa.table({f"k{j}": pa.array(np.ascontiguousarray(
                    h[:, j])) for j in range(h.shape[1])})
            fields.update(epsilon=str(eng.epsilon), M=int(eng.M),
                          rebalances=dict(eng.rebalances),
                          heavy_sha256=[sn._digest_arrays(h.ravel()) for h in eng.heavy_sets])
        return sn.write_tables(folder, tables, fields, metadata)

    return sn.write_atomically(Path(path), write, metadata)


def save_numbered(eng, folder, n: int, *, metadata: dict | None = None, keep: int = 2) -> Path:
    """Save ``eng`` as ``folder/snapshot-<n>``, keeping the newest ``keep`` snapshots (as
    :func:`gpu_ivm.snapshot.save_numbered`)."""
    from .. import snapshot as sn

    return sn.save_numbered(eng, folder, n, metadata=metadata, keep=keep, writer=save)


def load(path: str | os.PathLike[str], cls: type, backend: str = "cpu"):
    """An engine of class ``cls`` on ``backend`` restored from ``path``, verified
    (checksums, shapes, non-negative multiplicities, the count)."""
    from .. import snapshot as sn
    from .ops import check_backend
    from .zrel import consolidate

    check_backend(backend)  # a bad name is the caller's error, not the manifest's
    folder, man, mpath, table = sn.open_folder(path, FORM, "a query engine's")
    tradeoff = hasattr(cls, "_restore_state")
    if ("epsilon" in man) != tradeoff:
        what = (f"the trade-off engine at epsilon {man['epsilon']} (restore it with "
                "TradeoffEngine.restore)" if "epsilon" in man else
                "the epsilon = 1 engine (restore it with Engine.restore)")
        raise sn.SnapshotError(f"is a snapshot of {what}", file=mpath)
    try:
        relations = {k: v for k, v in man["columns"].items() if v}
        eng = cls(man["query"], relations=relations, epsilon=man["epsilon"],
                  backend=backend) if tradeoff else \
            cls(man["query"], relations=relations, mode=man.get("mode", "general"),
                backend=backend)
        applied, count = int(man["batches_applied"]), int(man["count"])
        active = bool(man.get("insert_only_active", eng.mode != "general"))
        switched = man.get("switched_at")
        switched = None if switched is None else int(switched)
        digests = dict(man["relations_sha256"])
    except (KeyError, TypeError, ValueError) as e:  # InputError (a bad mode) included
        raise sn.SnapshotError(f"manifest lacks or garbles a field: {e}", file=mpath) from None
    _restore_values(getattr(eng, "_reader", eng), man, mpath, table)
    base = {}
    for name, arity in eng.schemas.items():
        fname = f"rel-{name}.arrow"
        cols = {f"c{j}": "int" for j in range(arity)}
        t = table(fname, {**cols, "mult": "int"})
        keys = np.stack([sn._int_col(t, c) for c in cols], axis=1) if arity else \
            np.zeros((t.num_rows, 0), np.int64)
        mult = sn._int_col(t, "mult")
        rel = consolidate(eng.base[name].vars, keys, mult)
        if len(rel) != t.num_rows or not np.array_equal(rel.keys, keys) or (mult <= 0).any():
            raise sn.SnapshotError("tuples not sorted, not unique or not positive",
                                   file=folder / fname)
        if sn._digest_arrays(rel.keys.ravel(), rel.mult) != digests.get(name):
            raise sn.SnapshotError("tuples differ from the manifest checksum",
                                   file=folder / fname)
        reader = getattr(eng, "_reader", eng)
        n_values = len(reader._values)
        for j in range(arity):
            col = keys[:, j]
            if reader._kinds.of_column(name, j) == "str" and len(col) and (
                    col.min() < 0 or col.max() >= n_values):
                raise sn.SnapshotError(f"column c{j} holds a string id outside the "
                                       f"{n_values} strings of {VALUES}", file=folder / fname)
        base[name] = rel
    if tradeoff:
        heavy = _heavy_sets(eng, man, mpath, folder, table)
        try:
            eng._restore_state(base, heavy, int(man["M"]), dict(man.get("rebalances", {})))
        except (KeyError, TypeError, ValueError) as e:
            raise sn.SnapshotError(f"the partition does not fit the relations: {e}",
                                   file=mpath) from None
    else:
        eng._rebuild(base)
    eng.batches_applied = applied
    eng.insert_only_active, eng.switched_at = active, switched
    if eng.count() != count:
        raise sn.SnapshotError(f"the restored relations give count {eng.count()}, the "
                               f"manifest says {count}", file=mpath)
    return eng


def _restore_values(reader, man: dict, mpath: Path, table) -> None:
    """The strings (ids in the relations' files stand for them) and the column kinds of a
    snapshot, into the engine that reads tables (a snapshot of before strings has none)."""
    from .. import snapshot as sn
    from .values import INT, STR

    kinds = man.get("column_kinds", {})
    try:
        found = {(rel, int(j)): kind for rel, cols in kinds.items() for j, kind in cols.items()}
    except (AttributeError, TypeError, ValueError):
        raise sn.SnapshotError("manifest garbles column_kinds", file=mpath) from None
    if any(rel not in reader.schemas or not 0 <= j < reader.schemas[rel]
           or kind not in (INT, STR) for (rel, j), kind in found.items()):
        raise sn.SnapshotError("manifest's column_kinds do not fit the query", file=mpath)
    if VALUES in man.get("files", {}):
        values = table(VALUES, {"value": "str"}).column("value").to_pylist()
        try:
            reader._values.restore(values)
        except ValueError as e:
            raise sn.SnapshotError(str(e), file=mpath.parent / VALUES) from None
    reader._kinds.kinds = found


def _heavy_sets(eng, man: dict, mpath: Path, folder: Path, table) -> list[np.ndarray]:
    """Every fork's heavy key values from a trade-off snapshot, checked against the
    manifest's checksums (the one-fork format too)."""
    from .. import snapshot as sn

    digests = man.get("heavy_sha256")
    if isinstance(digests, str):  # the one-fork format: heavy-values.arrow, column x
        heavy = sn._int_col(table(HEAVY, {"x": "int"}), "x")
        if sn._digest_arrays(heavy) != digests:
            raise sn.SnapshotError("heavy values differ from the manifest checksum",
                                   file=folder / HEAVY)
        return [heavy.reshape(-1, 1)]
    if not isinstance(digests, list) or len(digests) != len(eng.forks):
        raise sn.SnapshotError(f"the manifest lists no heavy values for the query's "
                               f"{len(eng.forks)} fork(s)", file=mpath)
    out = []
    for k, (f, digest) in enumerate(zip(eng.forks, digests)):
        cols = [f"k{j}" for j in range(len(f.key))]
        t = table(_heavy_file(k), {c: "int" for c in cols})
        h = np.stack([sn._int_col(t, c) for c in cols], axis=1).astype(np.int64)
        if sn._digest_arrays(h.ravel()) != digest:
            raise sn.SnapshotError("heavy values differ from the manifest checksum",
                                   file=folder / _heavy_file(k))
        out.append(h)
    return out
