"""Graph batches prepared in device memory: ids, consolidation and set-semantics facts of a
batch whose columns are already on the device (issue 15, item 1).

A batch that arrives as device columns (:func:`gpu_ivm.io.device.device_columns`: cuDF, CuPy,
``__cuda_array_interface__``, DLPack) is never copied to the host. :func:`prepare` encodes its
keys with a device copy of the engine's key table (:class:`DeviceKeyTable`), forms the packed
edge keys, sorts them, sums the rows of each edge and places the edges with a nonzero net
sign, with the kernels of the backend's ``prep`` part (:mod:`gpu_ivm.kernels.cuda_batch_prep`;
their CPU twins in :mod:`gpu_ivm.kernels.batch_prep` run the same steps on the host backend,
which the tests use). The host reads one small ``stats`` array and knows every size and every
fact it decides on: bad rows, self-loops, keys not known yet, nets beyond ±1, deletes of an
edge with a new vertex.

Keys not known yet are numbered on the device in the order the host's encoder numbers them
(first appearance in ``src`` then ``dst``, self-loops left out), so both paths give every
vertex the same id. Such a batch costs a second pass, a few size reads and, once it is
applied, one download of its new keys (the host's encoder stays the dictionary of record).

What the device cannot decide alone goes to the host's rules, on the columns downloaded once
(``Prepared.host_rules``): a bad row (the host's reader words the error), a conflict for sure
(the error or the rows to skip), a new vertex whose every edge cancels (the host renumbers).

>>> import numpy as np
>>> from gpu_ivm.backend import get_backend
>>> from gpu_ivm.encoding import IdEncoder
>>> from gpu_ivm.io.device import DeviceColumns
>>> be, enc = get_backend("cpu"), IdEncoder()
>>> cols = DeviceColumns(np.array([10, 20, 10]), np.array([20, 30, 20]), np.array([1, 1, -1]))
>>> p = prepare(be, DeviceKeyTable(be), enc, cols, directed=False)
>>> p.new_keys.tolist(), p.n_pairs, p.keys.tolist() == [1 << 32 | 2, 2 << 32 | 1]
([10, 20, 30], 1, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .encoding import IdEncoder
from .kernels import batch_prep as bp


class DeviceKeyTable:
    """The device's copy of an :class:`~gpu_ivm.encoding.IdEncoder`'s hash table and of its
    keys in id order (what results handed back on the device are decoded with).

    Uploaded whole when the encoder has keys the copy lacks that were not added through
    :meth:`added` (keys committed by a host batch, a grown table, a restored snapshot), else
    kept up to date on the device (the insert kernel, and the new keys appended). On the host
    backend the copy is the encoder's own arrays.
    """

    def __init__(self, backend) -> None:
        self.backend = backend
        self.tkeys = self.tvals = self.keys = None
        self.n = -1  # keys in the copy
        self.cap = -1  # its capacity

    def tables(self, encoder: IdEncoder) -> tuple[Any, Any]:
        """(tkeys, tvals) on the device, equal to the encoder's."""
        if encoder.kind == "str":
            from .errors import InputError

            raise InputError("this engine's vertex keys are strings; device columns hold "
                             "integers (pass string keys on the host)", column="src")
        tk, tv = encoder.hash_table()
        if self.n != len(encoder) or self.cap != tk.shape[0]:
            keys, cap = encoder.int_keys(), tk.shape[0]
            if self.backend.xp is np:  # the host: the encoder's own arrays
                self.tkeys, self.tvals, self.keys = tk, tv, keys
            else:  # one upload, three views
                buf = self.backend.to_device(np.concatenate([tk, tv, keys]))
                self.tkeys, self.tvals, self.keys = buf[:cap], buf[cap:2 * cap], buf[2 * cap:]
            self.n, self.cap = len(encoder), cap
        return self.tkeys, self.tvals

    def keys_of(self, encoder: IdEncoder, ids):
        """The user keys of ``ids`` (device), gathered on the device."""
        self.tables(encoder)
        return self.keys[ids]

    def added(self, encoder: IdEncoder, new_keys, n0: int) -> None:
        """``new_keys`` (device) were committed to ``encoder`` with ids n0, n0 + 1, ...: add
        them to the copy (or leave it to be uploaded again when the encoder's table grew)."""
        tk, _ = encoder.hash_table()
        if self.tkeys is tk:  # the host backend: the copy is the encoder's table itself
            self.keys = encoder.int_keys()
            self.n = len(encoder)
            return
        if self.n != n0 or self.cap != tk.shape[0]:
            return  # uploaded afresh at the next tables()
        xp = self.backend.xp
        ids = xp.arange(n0, n0 + new_keys.shape[0], dtype=np.int64)
        self.backend.kernels.hash.insert(self.tkeys, self.tvals, new_keys, ids)
        self.keys = xp.concatenate([self.keys, new_keys])
        self.n = len(encoder)


@dataclass
class Prepared:
    """A batch prepared on the device (arrays of the backend's module, exact sizes).

    ``keys``, ``vals``, ``old``: the edges with a nonzero net sign (sorted unique packed keys,
    both orientations of an undirected edge), the net signs, and their multiplicities before
    the batch under set semantics (1 for a net delete). ``pairs``: (a, b, net) of the edges
    a < b (undirected) or of every edge (directed). ``new_keys``: the user keys given ids
    ``n0, n0 + 1, ...`` (device), ``n_new`` of them.
    """

    rows: int
    keys: Any
    vals: Any
    old: Any
    pairs: tuple
    n_deletes: int
    loops: int
    new_keys: Any
    n_new: int
    n0: int
    host_rules: bool  # the batch must be judged by the host's rules (see the module's doc)

    @property
    def n_pairs(self) -> int:
        return int(self.pairs[0].shape[0])


def _counters(backend, k: int):
    """``k`` zeroed int64 slots (one buffer per batch on a device: ``counters``)."""
    make = getattr(backend.kernels.prep, "counters", None)
    return make(k) if make is not None else backend.xp.zeros(k, np.int64)


def _mode(cols, directed: bool, probe: bool, packed: bool) -> int:
    return ((bp.DIRECTED if directed else 0) | (bp.PROBE if probe else 0)
            | (bp.PACKED if packed else 0)
            | (bp.KEYS_U64 if cols.keys_u64 else 0) | (bp.SIGN_U64 if cols.sign_u64 else 0))


def _consolidate(backend, keys, sg, stats, n0: int, n_new: int, directed: bool, packed: bool):
    """Sort the rows' keys, sum each edge's rows and place the kept edges: the 6-row output
    of the placement (keys, net, old, a, b, net of the pairs) and ``stats`` filled."""
    xp, k = backend.xp, backend.kernels.prep
    if packed:  # the signs ride in the keys: one sort
        keys = xp.sort(keys)
    else:
        order = xp.argsort(keys)
        keys, sg = keys[order], sg[order]
    n = keys.shape[0]
    net = xp.empty(n, np.int64)
    flags = xp.empty((3, n), np.int64)
    used = xp.zeros(n_new, np.int64) if n_new else _counters(backend, 1)
    k.groups(keys, sg, net, flags, used, stats, n0, directed, packed)
    out = xp.empty((6, n), np.int64)
    if n:
        k.scatter(keys, net, flags, xp.cumsum(flags, axis=1), out, stats, packed)
    return out


def number_new(xp, src, dst, ids, n0: int):
    """Give the unknown keys (``ids`` -1 at their positions of ``src`` then ``dst``; rows
    with src == dst left out) the ids n0, n0 + 1, ... in order of first appearance, as
    :meth:`IdEncoder.plan` does; returns the new keys in id order (device)."""
    allk = xp.concatenate([src, dst])
    loop = src == dst
    upos = xp.flatnonzero((ids < 0) & ~xp.concatenate([loop, loop]))
    uk = allk[upos]
    order = xp.argsort(uk, kind="stable")  # equal keys keep their positions' order
    suk, spos = uk[order], upos[order]
    first = xp.empty(suk.shape[0], np.bool_)
    if suk.shape[0]:
        first[0] = True
        first[1:] = suk[1:] != suk[:-1]
    fidx = xp.flatnonzero(first)
    rank = xp.argsort(spos[fidx])  # the distinct keys by their first position
    new_keys = suk[fidx][rank]
    gid = xp.empty(fidx.shape[0], np.int64)
    gid[rank] = xp.arange(n0, n0 + fidx.shape[0], dtype=np.int64)
    ids[spos] = gid[xp.cumsum(first) - 1]
    return new_keys


def _row_pass(backend, cols, tables, ids, directed: bool, probe: bool, packed: bool = False,
              stats=None):
    """The row pass: (keys, signs, stats) of the rows (``stats``: zeroed slots to count in)."""
    xp = backend.xp
    m = cols.rows
    per = 1 if directed else 2
    keys = xp.empty(per * m, np.int64)
    sg = xp.empty(per * m, np.int64)
    if stats is None:
        stats = _counters(backend, bp.N_STATS)
    sign = cols.sign if cols.sign is not None else xp.ones(m, np.int64)
    backend.kernels.prep.rows(cols.src, cols.dst, sign, *tables, ids, keys, sg, stats,
                              _mode(cols, directed, probe, packed))
    return keys, sg, stats


@dataclass
class Launched:
    """A batch's preparation launched on the device and not read back yet
    (:func:`launch`): ``out`` the placement's six rows (keys, net, old, a, b, net of the
    pairs), valid up to the counts in the device's ``stats``; ``n0`` the encoder's size."""

    out: Any
    stats: Any
    ids: Any
    n0: int

    def limits(self) -> tuple:
        """Device slots with the kept keys' count and the pairs' count (what a kernel
        launched before the read walks: ``cuda_phase.bounded``)."""
        return self.stats[bp.KEPT : bp.KEPT + 1], self.stats[bp.PAIRS : bp.PAIRS + 1]


def launch(backend, table: DeviceKeyTable, encoder: IdEncoder, cols, directed: bool,
           stats=None) -> Launched:
    """The preparation's first pass (ids probed in the device's key table), launched and not
    read: :func:`finish` takes the ``stats`` read back (``stats``: ``N_STATS`` zeroed slots,
    e.g. next to other counters read with them)."""
    xp = backend.xp
    n0 = len(encoder)
    tables = table.tables(encoder)
    ids = xp.empty(2 * cols.rows, np.int64)
    packed = n0 <= bp.PACKED_IDS
    keys, sg, stats = _row_pass(backend, cols, tables, ids, directed, True, packed, stats)
    out = _consolidate(backend, keys, sg, stats, n0, 0, directed, packed)
    return Launched(out, stats, ids, n0)


def finish(backend, table: DeviceKeyTable, encoder: IdEncoder, cols, directed: bool,
           done: Launched, st: list[int]) -> Prepared:
    """The :class:`Prepared` batch from a :func:`launch` and its ``stats`` read back
    (``st``): keys not known yet are numbered and the batch prepared again (a second pass
    and read)."""
    xp = backend.xp
    m, n0, out = cols.rows, done.n0, done.out
    new_keys, n_new = None, 0
    bad_rows = st[bp.BAD_SIGN] or st[bp.BAD_KEY]
    if st[bp.UNKNOWN] and not bad_rows:
        tables = table.tables(encoder)
        new_keys = number_new(xp, cols.src, cols.dst, done.ids, n0)
        n_new = int(new_keys.shape[0])
        encoder.check_room(n_new)
        packed = n0 + n_new <= bp.PACKED_IDS
        keys, sg, stats = _row_pass(backend, cols, tables, done.ids, directed, False, packed)
        out = _consolidate(backend, keys, sg, stats, n0, n_new, directed, packed)
        st = backend.to_host(stats).tolist()
    host_rules = bool(bad_rows or st[bp.BIG] or st[bp.NEW_DELETE]
                      or (n_new and st[bp.USED_NEW] != n_new))
    kept, pairs = st[bp.KEPT], st[bp.PAIRS]
    return Prepared(rows=m, keys=out[0, :kept], vals=out[1, :kept], old=out[2, :kept],
                    pairs=(out[3, :pairs], out[4, :pairs], out[5, :pairs]),
                    n_deletes=st[bp.DELETES], loops=st[bp.LOOPS], new_keys=new_keys,
                    n_new=n_new, n0=n0, host_rules=host_rules)


def prepare(backend, table: DeviceKeyTable, encoder: IdEncoder, cols, directed: bool) -> Prepared:
    """Prepare the batch ``cols`` (:class:`~gpu_ivm.io.device.DeviceColumns`) on the device;
    nothing of the engine changes (new keys are committed by the caller)."""
    done = launch(backend, table, encoder, cols, directed)
    return finish(backend, table, encoder, cols, directed, done,
                  backend.to_host(done.stats).tolist())  # the batch's one read


def prepare_load(backend, table: DeviceKeyTable, encoder: IdEncoder, cols, directed: bool):
    """(sorted unique packed keys of the edge list ``cols``, both orientations when
    undirected; self-loops dropped; the new keys (device) in id order, or None; self-loops)
    for :meth:`GraphEngine.load` from device columns."""
    xp = backend.xp
    m = cols.rows
    n0 = len(encoder)
    tables = table.tables(encoder)
    ids = xp.empty(2 * m, np.int64)
    keys, _, stats = _row_pass(backend, cols, tables, ids, directed, probe=True)
    st = backend.to_host(stats).tolist()
    new_keys = None
    if st[bp.BAD_KEY]:
        return None
    if st[bp.UNKNOWN]:
        new_keys = number_new(xp, cols.src, cols.dst, ids, n0)
        encoder.check_room(int(new_keys.shape[0]))
        keys, _, stats = _row_pass(backend, cols, tables, ids, directed, probe=False)
    keys = xp.unique(keys)
    if keys.shape[0] and bool(keys[-1] == bp.SENTINEL_KEY):
        keys = keys[:-1]
    return keys, new_keys, st[bp.LOOPS]
