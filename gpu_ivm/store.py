"""Z-relation storage: sorted columnar runs in LSM style.

A :class:`ZStore` maps a packed pair key ``first << 32 | second`` (both dense ids) to a nonzero
int64 multiplicity. It is kept as a few sorted runs in one flat pair of arrays, biggest and
oldest first; a batch's new keys become a new run at the end and runs are merged when the
youngest grows past ``1/GROWTH`` of its elder, so a key is rewritten O(log N) times and applying
a batch of B updates costs O(B log N) amortized, independent of how big the base run is.
Existing keys are updated in place (a delete leaves a tombstone, a later insert revives it);
tombstones are dropped by merges, and a first key whose tombstones outnumber its live tuples is
compacted in place, so enumerating a key costs O(its live degree).

Big runs carry a dense directory (first key → start), small ones are binary searched, and a
per-first-key bitmap says which runs may hold the key, so a lookup visits one or two runs.

A store built with ``index_min`` also keeps, for every first key with at least that many live
tuples, a hash table second id → multiplicity (:mod:`gpu_ivm.kernels.row_index`), updated in
place with each batch, so intersecting a short row with a long one costs O(short row).

On a device (or with ``padded=True``) the host sizes every run before the device
fills it, so that no batch reads a count back: a batch's new run gets the length the caller
bounds (``add(hint=)``) and a merged run keeps the length of its inputs, and either ends
with ``PAD_KEY`` entries (first key above every id) where fewer entries were written. The
run bounds and directory offsets live in a device array that small kernels patch (no
upload). When dead entries (tombstones and padding) outnumber the live tuples by
``DEAD_SLACK``, the runs are rebuilt into one (a few reads, amortized over as many deletes).

A store built with ``bits=True`` keeps, for every first key with at least :attr:`ZStore.bits_min`
live tuples, all of multiplicity 1, a bitmap over the id space (:mod:`gpu_ivm.kernels.row_bits`),
updated in place with each batch: an intersection with such a row walks the other row only.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import numpy as np

from .errors import SetViolation
from .kernels import store_kernels as _cpu_store_kernels
from .kernels.row_bits import BITS_NONE
from .kernels.row_index import BUCKET
from .selection import run_starts

GROWTH = 4  # a run is merged into its elder once it is more than 1/GROWTH of its size
DIR_MIN = 2048  # runs smaller than this are binary searched
DIR_RATIO = 4  # a run gets a directory when len(run) * DIR_RATIO >= number of first keys
MAX_RUNS = 48
COMPACT_SLACK = 32  # compact key x once tomb[x] > live[x] + COMPACT_SLACK
INDEX_LOAD = 4  # a table has >= INDEX_LOAD slots per taken slot (load factor <= 1/4)
# a row gets a bitmap (id space / 8 bytes) when that is at most BITS_BYTES times the 16 bytes per
# tuple it takes in the runs, and it has at least BITS_FLOOR tuples; it keeps it down to half that
BITS_BYTES = 2
BITS_FLOOR = 64
META_CAP = 64  # entries of each of the device's bounds / dirptr / dirlen arrays (> MAX_RUNS + 1)
_NO_CONTEXT = nullcontext()  # ZStore._carried where nothing is queued
DEAD_SLACK = 1 << 16  # a device store's runs are rebuilt once dead entries exceed live + this
# host stores built without ``padded=`` take a device store's padded runs too (for tests that
# compare a host store bit for bit with a device one, which is always padded)
PAD_HOST_RUNS = False


def _grow(xp, arr, need: int, room: int = 0):
    """``arr`` with room for ``need`` entries (capacity doubling; ``room`` entries at least
    when it grows), in the array module ``xp``; the entries beyond the old ones are not set
    (the store reads its arrays only up to what it wrote: ``used`` for the runs,
    ``dirs_used`` for the directories)."""
    if need <= arr.shape[0]:
        return arr
    new = xp.empty(max(need, room, 2 * arr.shape[0], 16), dtype=arr.dtype)
    new[: arr.shape[0]] = arr
    return new


def _aligned_start(arr) -> int:
    """First index of ``arr`` (int64) at a 64-byte boundary: where the row tables' buckets
    start. Device allocations (CuPy's pool) are at least 256-byte aligned already."""
    if isinstance(arr, np.ndarray):
        return (-arr.__array_interface__["data"][0] % 64) // 8
    return 0


class ZStore:
    """A Z-relation over packed int64 pair keys (see module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> s = ZStore(id_capacity=4)
    >>> keys = np.array([(1 << 32) | 2, (3 << 32) | 0], dtype=np.int64)
    >>> _ = s.add(keys, np.array([1, 5]))
    >>> s.get(keys).tolist(), len(s)
    ([1, 5], 2)
    >>> _ = s.add(keys[:1], np.array([-1]))
    >>> s.get(keys).tolist(), len(s), int(s.live[1])
    ([0, 5], 1, 0)
    """

    def __init__(self, id_capacity: int = 0, kernels=None, index_min: int | None = None,
                 bits: bool = False, padded: bool | None = None):
        # the backend's store kernels (CPU Numba by default; see gpu_ivm.backend)
        self.sk = kernels.store if kernels is not None else _cpu_store_kernels
        # the array module of the backend: NumPy, or CuPy with the state in device memory
        self.xp = xp = kernels.xp if kernels is not None else np
        self.keys = xp.zeros(16, np.int64)
        self.vals = xp.zeros(16, np.int64)
        self.bounds: list[int] = [0]
        self.dirptr: list[int] = []
        self.dirlen: list[int] = []
        self.dirs = xp.zeros(16, np.int64)
        self.dirs_used = 0
        self.runmask = xp.zeros(id_capacity, np.int64)
        self.live = xp.zeros(id_capacity, np.int64)  # live tuples per first key (= degree)
        self.tomb = xp.zeros(id_capacity, np.int64)  # tombstones per first key
        self.size = 0
        self._nt = None
        # run lengths fixed on the host, metadata patched in place (see above): a device
        # store's way, which ``padded=True`` also gives a host store (for testing it)
        self.padded = (xp is not np or PAD_HOST_RUNS) if padded is None else bool(padded)
        self.meta = None  # the device's bounds | dirptr | dirlen, META_CAP entries each
        self._meta_now = None  # what the device's meta holds (host copy)
        self._queue = None  # run kernels queued by :meth:`_carried`
        # per-row hash tables of the long rows (kernels/row_index.py); empty when off
        self.index_min = index_min
        self.ioff = xp.full(id_capacity if index_min else 0, -1, np.int64)
        self.imask = xp.zeros(id_capacity if index_min else 0, np.int64)
        self.iused = xp.zeros(id_capacity if index_min else 0, np.int64)
        self.itab = xp.zeros(BUCKET, np.int64)  # the tables' slab
        self.islab_start = 0  # first 64-byte aligned slot of the slab
        self.islab_used = 0  # slab slots handed out (from islab_start)
        self.islab_garbage = 0  # of them, slots of tables since dropped or rebuilt
        self.ibad = xp.zeros(1, np.int64)  # set by the kernels when a value leaves int32
        # per-row bitmaps of the long rows (kernels/row_bits.py); empty when off or when the
        # backend's store kernels lack bits_fill / bits_apply
        self.bits_on = bool(bits) and hasattr(self.sk, "bits_fill")
        self.boff = xp.full(id_capacity if self.bits_on else 0, BITS_NONE, np.int64)
        self.bits = xp.zeros((0, 1), np.uint64)  # slots x words
        self.bstack = xp.zeros(0, np.int64)  # slots given back
        self.bmeta = xp.zeros(2, np.int64)  # [slots on the stack, slots handed out]
        self.bits_ids = 0  # ids the bitmaps cover (64 per word)
        if self.bits_on and id_capacity:
            self._bits_layout()

    # ----------------------------------------------------------------- structure
    @property
    def id_capacity(self) -> int:
        return self.live.shape[0]

    @property
    def nruns(self) -> int:
        return len(self.bounds) - 1

    @property
    def used(self) -> int:
        return self.bounds[-1]

    def __len__(self) -> int:
        return self.size

    def grow_ids(self, capacity: int) -> None:
        """Make room for first keys below ``capacity``."""
        if capacity > self.live.shape[0]:
            cap = max(capacity, 2 * self.live.shape[0])
            names = ("runmask", "live", "tomb")
            if self.index_min:
                names += ("ioff", "imask", "iused")
            if self.bits_on:
                names += ("boff",)
            for name in names:
                old = getattr(self, name)
                new = self.xp.full(cap, -1 if name in ("ioff", "boff") else 0, np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
            self._nt = None
            if self.bits_on and cap > self.bits_ids:
                self._bits_layout()  # the bitmaps cover the id space

    def nt(self):
        """The store as the tuple the kernels take: (keys, vals, bounds, dirptr, dirlen, dirs,
        runmask, live, ioff, imask, itab, boff, bits), cached until the structure changes. The run
        bounds and directory offsets are host lists, uploaded here in one transfer (a few
        hundred bytes, once per structure change; the three arrays are views of it)."""
        if self._nt is None:
            nb_, nd = len(self.bounds), len(self.dirptr)
            if self.padded:
                meta = self._device_meta()
                bounds = meta[:nb_]
                dirptr = meta[META_CAP : META_CAP + nd]
                dirlen = meta[2 * META_CAP : 2 * META_CAP + nd]
            else:
                meta = self.xp.asarray(np.asarray(self.bounds + self.dirptr + self.dirlen,
                                                  np.int64))
                bounds, dirptr, dirlen = meta[:nb_], meta[nb_:nb_ + nd], meta[nb_ + nd:]
            self._nt = (
                self.keys,
                self.vals,
                bounds,
                dirptr,
                dirlen,
                self.dirs,
                self.runmask,
                self.live,
                self.ioff,
                self.imask,
                self.itab,
                self.boff,
                self.bits,
            )
            bundle = getattr(self.sk, "device_bundle", None)  # a device's launch form, once
            if bundle is not None:
                self._nt = bundle(self._nt)
        return self._nt

    def _meta_writes(self) -> tuple[np.ndarray, list]:
        """(the metadata the host's lists say, the (index, value) writes that bring the
        device's copy to it)."""
        nb_, nd = len(self.bounds), len(self.dirptr)
        if nb_ > META_CAP or nd > META_CAP:  # MAX_RUNS keeps both below
            raise RuntimeError(f"internal: {nb_ - 1} runs exceed the device metadata")
        want = np.zeros(3 * META_CAP, np.int64)
        want[:nb_] = self.bounds
        want[META_CAP : META_CAP + nd] = self.dirptr
        want[2 * META_CAP : 2 * META_CAP + nd] = self.dirlen
        if self.meta is None:
            return want, []
        diff = np.flatnonzero(want != self._meta_now)
        return want, [(int(i), int(want[i])) for i in diff]

    def _device_meta(self):
        """The device's metadata array brought up to date with the host's lists: uploaded
        when the store is new, afterwards patched in place where it differs (a kernel launch
        with the values as arguments; a batch's new run and merges change a few entries, and
        those ride on the batch's last run kernel: :meth:`_carried`)."""
        want, writes = self._meta_writes()
        if self.meta is None:
            self.meta = self.xp.asarray(want)
        elif writes:
            self.sk.patch_meta(self.meta, writes)
        self._meta_now = want
        return self.meta

    def _carried(self):
        """:meth:`_carried_launches` on a device store whose metadata is there, else a context
        that does nothing (no generator on the host's path)."""
        if self.meta is None or not self.padded or not getattr(self.sk, "META_RIDES", False):
            return _NO_CONTEXT
        return self._carried_launches()

    @contextmanager
    def _carried_launches(self):
        """A batch's new run, merges and directory (:meth:`_append_flagged`, :meth:`_settle`)
        with the metadata writes they cause made by the last of their kernels, not by a
        launch of its own: inside, those kernels are queued (the host's bookkeeping of a
        padded store needs no result of theirs), and on leaving they are launched in order,
        the last one carrying the writes. Elsewhere (the host, a store whose metadata is not
        on the device yet) the kernels run at once and :meth:`nt` patches the metadata.
        Inside, an array may be reallocated only before a kernel that writes it is queued
        (the new run's room and the directory's are made before their kernels are queued):
        a queued kernel writes the array it was given."""
        self._queue = []
        done = False
        try:
            yield
            done = True
        finally:
            queue, self._queue = self._queue, None
            want, writes = self._meta_writes() if done else (None, [])
            for i, (fn, args, kw) in enumerate(queue):
                if writes and i == len(queue) - 1:
                    kw = dict(kw, meta=(self.meta, writes))
                fn(*args, **kw)
            if done and (writes == [] or queue):
                self._meta_now = want

    def _run(self, fn, *args, **kw):
        """``fn(*args, **kw)`` now, or queued inside :meth:`_carried`."""
        if self._queue is None:
            return fn(*args, **kw)
        self._queue.append((fn, args, kw))
        return None

    @classmethod
    def from_sorted(cls, keys, vals, id_capacity: int, kernels=None,
                    index_min: int | None = None, bits: bool = False) -> ZStore:
        """Build from sorted unique keys with nonzero values (one base run), given as arrays of
        the backend's array module; ``index_min``, ``bits``: see :class:`ZStore`."""
        s = cls(id_capacity, kernels, index_min, bits)
        xp = s.xp
        keys = xp.ascontiguousarray(keys, dtype=np.int64)
        vals = xp.ascontiguousarray(vals, dtype=np.int64)
        if keys.shape[0]:
            s.grow_ids(int(keys[-1] >> 32) + 1)
            # room for a quarter more tuples before the arrays are first reallocated, so the
            # first batches after a load do not pay for copying the base run
            slack = keys.shape[0] + keys.shape[0] // 4 + 1024
            s.keys = xp.empty(slack, np.int64)
            s.vals = xp.empty(slack, np.int64)
            s._append_run(keys, vals)
            s.sk.first_key_counts(keys, keys.shape[0], s.live)
            s.size = keys.shape[0]
            if index_min:
                s._index_build(s.xp.flatnonzero(s.live >= index_min))
            if s.bits_on:
                s._bits_layout(int((keys & 0xFFFFFFFF).max()) + 1)
        return s

    def _append_run(self, keys: np.ndarray, vals: np.ndarray, directory: bool = True) -> None:
        n = keys.shape[0]
        start = self._run_room(n)
        self.keys[start : start + n] = keys
        self.vals[start : start + n] = vals
        self._close_run(start, n, directory)

    def _append_flagged(self, keys: np.ndarray, vals: np.ndarray, flags: np.ndarray,
                        n: int, padded: bool = False) -> None:
        """:meth:`_append_run` of the ``n`` entries of ``keys`` / ``vals`` that ``flags``
        marks, copied in one kernel (a scan and a scatter on a device) that also sets the new
        run's bits. ``padded``: at most ``n`` are marked, the rest of the run is ``PAD_KEY``
        (on a device)."""
        start = self._run_room(n)
        bit = 1 << self.nruns  # the run index the new run gets
        self._run(self.sk.copy_flagged, keys, vals, flags, self.keys, self.vals, start,
                  pad_to=n if padded else -1, runmask=self.runmask, bit=bit)
        self._close_run(start, n, directory=False, bits=False)  # :meth:`_settle` follows

    def _run_room(self, n: int) -> int:
        """The start of a new run of ``n`` entries after the last one (arrays grown)."""
        start = self.bounds[-1]
        if start + n > self.keys.shape[0]:
            self.keys = _grow(self.xp, self.keys, start + n)
            self.vals = _grow(self.xp, self.vals, start + n)
        return start

    def _close_run(self, start: int, n: int, directory: bool = True, bits: bool = True) -> None:
        """Register the run of ``n`` entries written at ``start``: bounds, run bits (unless
        ``bits`` is False: the copy set them), and its directory unless ``directory`` is
        False (a new run that :meth:`_settle` may merge at once gets its directory there,
        after the merges)."""
        self.bounds.append(start + n)
        j = self.nruns - 1
        if bits:
            self.sk.set_run_bits(self.keys, start, start + n, self.runmask, j)
        self.dirptr.append(-1)
        self.dirlen.append(0)
        if directory:
            self._maybe_directory(j)
        self._nt = None

    def _maybe_directory(self, j: int) -> None:
        s, e = self.bounds[j], self.bounds[j + 1]
        n = e - s
        if n < DIR_MIN:
            return
        # on a device the id capacity bounds the run's first keys (its last key is not read;
        # it may be padding)
        nkeys = self.id_capacity if self.padded else int(self.keys[e - 1] >> 32) + 1
        if n * DIR_RATIO < nkeys:
            return
        need = self.dirs_used + nkeys + 1
        # room for the next run's directory as well: a store's first merges then find it
        # (on a device each growth is a copy, a call of its own in the batch)
        self.dirs = _grow(self.xp, self.dirs, need, room=need + nkeys + 1)
        out = self.dirs[self.dirs_used : need]
        self._run(self.sk.build_directory, self.keys, s, e, nkeys, out)
        self.dirptr[j] = self.dirs_used
        self.dirlen[j] = nkeys + 1
        self.dirs_used = need

    def _merge_last_two(self) -> None:
        j = self.nruns - 2
        s1, s2, s3 = self.bounds[j], self.bounds[j + 1], self.bounds[j + 2]
        if self.padded:  # the merged run keeps its length: nothing read back
            self._run(self.sk.merge_runs, self.keys, self.vals, s1, s2, s3, self.tomb,
                      self.runmask, j, padded=True)
            w = s3
        else:
            w = self.sk.merge_runs(self.keys, self.vals, s1, s2, s3, self.tomb, self.runmask, j)
        ptrs = [p for p in self.dirptr[j:] if p >= 0]
        if ptrs:
            self.dirs_used = min(ptrs)
        del self.bounds[-2:]
        self.bounds.append(int(w))
        del self.dirptr[-2:], self.dirlen[-2:]
        self.dirptr.append(-1)
        self.dirlen.append(0)
        self._nt = None

    def _settle(self) -> None:
        """Merge the last run into its elder while it is more than 1/GROWTH of its size (or
        the runs are too many); then the last run, new or merged, gets its directory: one
        build per batch, not one for the new run and one per merge."""
        while self.nruns >= 2:
            b = self.bounds
            last = b[-1] - b[-2]
            prev = b[-2] - b[-3]
            if last * GROWTH > prev or self.nruns > MAX_RUNS:
                self._merge_last_two()
            else:
                break
        j = self.nruns - 1
        if j >= 0 and self.dirptr[j] < 0:
            self._maybe_directory(j)

    # ----------------------------------------------------------------- operations
    def get(self, keys: np.ndarray, assume_sorted: bool = False) -> np.ndarray:
        """Multiplicities of ``keys`` (0 where absent); ``assume_sorted``: keys are sorted and
        unique, located by galloping instead of independent searches."""
        keys = self.xp.ascontiguousarray(keys, dtype=np.int64)
        out = self.xp.empty(keys.shape[0], np.int64)
        if assume_sorted:
            self.sk.probe_sorted(self.nt(), keys, out)
        elif keys.shape[0] > 4096:
            self.sk.probe_many_par(self.nt(), keys, out)
        else:
            self.sk.probe_many(self.nt(), keys, out)
        return out

    def add(self, keys: np.ndarray, deltas: np.ndarray, below: int | None = None,
            hint: tuple[int, int] | None = None, sets_check: bool = False,
            then=None) -> np.ndarray:
        """Add ``deltas`` at sorted unique ``keys``; return the old multiplicities.

        ``below``: a bound on the keys' first ids that the caller knows (on a device the
        store then makes room for them without reading the last key back). ``hint``:
        ``(new_at_most, size_change)`` that the caller knows (set semantics: the inserts,
        and inserts minus deletes): on a device the batch then reads nothing back; on the
        host they are checked against the counts. ``sets_check`` (host kernels): the batch
        is checked for set semantics as its keys are located, and where a multiplicity
        would leave {0, 1} :class:`~gpu_ivm.errors.SetViolation` is raised with nothing
        changed. ``then`` (device store kernels): work launched after the update that comes
        back with its read (``apply_updates_then``); not run when nothing is read (its
        ``done`` stays False)."""
        xp = self.xp
        keys = xp.ascontiguousarray(keys, dtype=np.int64)
        deltas = xp.ascontiguousarray(deltas, dtype=np.int64)
        n = keys.shape[0]
        if n == 0:
            return xp.zeros(0, np.int64)
        self.grow_ids(int(keys[-1] >> 32) + 1 if below is None or xp is np else below)
        old = xp.empty(n, np.int64)
        is_new = xp.empty(n, np.bool_)
        blind = self.padded and hint is not None  # sizes from the hint: no read
        if sets_check:
            *got, bad = self.sk.apply_updates_sets(self.nt(), self.live, self.tomb, keys,
                                                   deltas, old, is_new)
            if bad:
                raise SetViolation(bad)
        else:
            ride = getattr(self.sk, "apply_updates_then", None) if then is not None else None
            if ride is not None and not blind:
                got = ride(self.nt(), self.live, self.tomb, keys, deltas, old, is_new, then)
            else:
                got = self.sk.apply_updates(self.nt(), self.live, self.tomb, keys, deltas, old,
                                            is_new, read=not blind)  # the host kernel returns them
        if got is not None and hint is not None and (got[0] > hint[0] or got[1] != hint[1]):
            raise RuntimeError(f"internal: a batch's hint {hint} does not match its "
                               f"{got[0]} new keys and size change {got[1]}")
        n_new, size_change = hint if blind else got
        self.size += size_change
        if n_new:  # the kernel counted the new keys (or the hint bounds them): no host read
            with self._carried():
                self._append_flagged(keys, deltas, is_new, n_new, padded=blind)
                self._settle()
        self._reclaim()
        # first keys whose tombstones now outnumber their live tuples
        self.sk.compact_rows_of(self.nt(), self.tomb, self.live, keys, COMPACT_SLACK)
        if self.index_min:
            self._index_update(keys, deltas)
        if self.bits_on:
            self._bits_update(keys, old, deltas)
        return old

    def add_absent(self, keys: np.ndarray, vals: np.ndarray) -> None:
        """Store sorted unique ``keys`` that are known to be absent (neither live nor a
        tombstone) with nonzero ``vals``: :meth:`add` without locating each key in the runs
        first (the insert-only engine has already probed them). Nothing is checked here.

        >>> s = ZStore(0)
        >>> s.add_absent(np.array([(1 << 32) | 2, (2 << 32) | 1]), np.array([5, 5]))
        >>> len(s), s.get(np.array([(1 << 32) | 2])).tolist(), s.live[:3].tolist()
        (2, [5], [0, 1, 1])
        """
        xp = self.xp
        keys = xp.ascontiguousarray(keys, dtype=np.int64)
        vals = xp.ascontiguousarray(vals, dtype=np.int64)
        n = keys.shape[0]
        if n == 0:
            return
        self.grow_ids(int(keys[-1] >> 32) + 1)
        self.sk.first_key_counts(keys, n, self.live)
        self.size += n
        self._append_run(keys, vals, directory=False)  # :meth:`_settle` builds it
        self._settle()
        self._reclaim()
        if self.index_min:
            self._index_update(keys, vals)
        if self.bits_on:
            self._bits_update(keys, xp.zeros(n, np.int64), vals)

    def _reclaim(self) -> None:
        """:meth:`_squeeze` a store sized on the host once its dead entries outnumber its live
        tuples by ``DEAD_SLACK``."""
        if self.padded and self.used - self.size > self.size + DEAD_SLACK:
            self._squeeze()

    def _squeeze(self) -> None:
        """Rebuild the runs into one with the live tuples only (tombstones and padding
        dropped): a device store's dead entries, which merges keep as padding, are reclaimed
        here. Reads each run's live count back; rare (see the module docstring)."""
        ok, ov = self.items(sort=True)
        self.bounds = [0]
        self.dirptr, self.dirlen = [], []
        self.dirs_used = 0
        self.runmask[:] = 0
        self.tomb[:] = 0
        self._nt = None
        if ok.shape[0]:
            self._append_run(ok, ov)

    # ----------------------------------------------------------------- row bitmaps
    @property
    def bits_min(self) -> int:
        """Live tuples from which a row gets a bitmap: its ``bits_ids / 8`` bytes are then at
        most ``BITS_BYTES`` times the row's 16 bytes per tuple (and at least ``BITS_FLOOR``)."""
        return max(BITS_FLOOR, -(-(self.bits_ids // 64) // (2 * BITS_BYTES)))

    def _bits_layout(self, ids: int = 0) -> None:
        """Bitmaps afresh, covering the id space and ``ids`` (rounded up to 64), for every row
        at ``bits_min`` or more that is not barred (a row barred stays barred until the store is
        rebuilt)."""
        xp = self.xp
        self.bits_ids = -(-max(self.id_capacity, self.bits_ids, ids, 1) // 64) * 64
        words = self.bits_ids // 64
        self.boff[self.boff >= 0] = BITS_NONE
        rows = xp.flatnonzero((self.live >= self.bits_min) & (self.boff == BITS_NONE))
        slots = rows.shape[0] + rows.shape[0] // 4 + 8
        self.bits = xp.empty((slots, words), np.uint64)
        self.bstack = xp.empty(slots, np.int64)
        self.bmeta[:] = 0
        self._nt = None
        if rows.shape[0]:
            self._bits_add(rows)

    def _bits_add(self, rows) -> None:
        """Bitmaps for ``rows`` (distinct rows; those without one get one); the slab doubles
        when it is full."""
        rows = rows[self.boff[rows] == BITS_NONE]
        while rows.shape[0]:
            short = self.sk.bits_fill(self.nt(), rows, self.boff, self.bits, self.bstack,
                                      self.bmeta)
            if not short:
                return
            xp = self.xp
            old = self.bits
            self.bits = xp.empty((2 * old.shape[0], old.shape[1]), np.uint64)
            self.bits[: old.shape[0]] = old
            stack = xp.empty(self.bits.shape[0], np.int64)
            stack[: self.bstack.shape[0]] = self.bstack
            self.bstack = stack
            self._nt = None
            rows = rows[self.boff[rows] == BITS_NONE]

    def _bits_update(self, keys, old, deltas) -> None:
        """Bring the bitmaps up to date with a batch just added (sorted unique ``keys``, the
        multiplicities before and the deltas): see :func:`gpu_ivm.kernels.row_bits.bits_apply`."""
        t = self.bits_min
        want = self.xp.empty(keys.shape[0], np.int64)
        n, top = self.sk.bits_apply(keys, old, deltas, self.live, self.boff, self.bits,
                                    self.bstack, self.bmeta, t // 2, t, want)
        if top >= self.bits_ids:  # an id beyond the bitmaps: wider, all afresh
            self._bits_layout(max(2 * self.bits_ids, top + 1))
        elif n:
            self._bits_add(want[:n])

    def bits_rows(self) -> int:
        """Rows that have a bitmap now."""
        return int((self.boff >= 0).sum())

    # ----------------------------------------------------------------- row index
    def _index_update(self, keys, deltas) -> None:
        """Bring the row tables up to date with a batch just added (sorted unique ``keys``):
        tables that could pass load 1/4 and rows that fell below ``index_min / 2`` are dropped,
        the other tables take the deltas in place (a table whose home bucket overflows is
        dropped), and rows at ``index_min`` or more without a table get one, from the store."""
        xp = self.xp
        fx = keys >> 32
        starts = xp.flatnonzero(run_starts(xp, fx))
        ux = fx[starts]
        bounds = xp.empty(starts.shape[0] + 1, np.int64)
        bounds[:-1] = starts
        bounds[-1] = keys.shape[0]
        had = self.ioff[ux] >= 0
        over = (self.iused[ux] + xp.diff(bounds)) * INDEX_LOAD > self.imask[ux] + 1
        low = self.live[ux] * 2 < self.index_min
        drop = ux[had & (over | low)]
        if drop.shape[0]:
            self.islab_garbage += int((self.imask[drop] + 1).sum())
            self.ioff[drop] = -1
        self.sk.index_upsert(self.nt(), keys, deltas, bounds, self.iused, self.ibad)
        full = ux[(self.ioff[ux] >= 0) & (self.iused[ux] < 0)]
        if full.shape[0]:
            self.islab_garbage += int((self.imask[full] + 1).sum())
            self.ioff[full] = -1
        new = ux[(self.ioff[ux] < 0) & (self.live[ux] >= self.index_min)]
        if new.shape[0]:
            self._index_build(new)
        elif int(self.ibad[0]):
            self._index_off()

    def _index_off(self) -> None:
        """A multiplicity left the tables' int32 slots: drop every table for good (lookups
        fall back to the sorted runs; results are unchanged)."""
        self.index_min = None
        self.ioff = self.xp.full(0, -1, np.int64)
        self.itab = self.xp.zeros(BUCKET, np.int64)
        self.islab_used = self.islab_garbage = 0
        self._nt = None

    def _index_build(self, rows) -> None:
        """Give ``rows`` (distinct first keys) fresh tables sized for their live tuples. The
        slab is rebuilt whole (all tables, a new 64-byte aligned array) when it is full or
        dropped tables make up more than half of it."""
        xp = self.xp
        caps = self._index_caps(rows)
        total = int(caps.sum())
        fits = self.islab_start + self.islab_used + total <= self.itab.shape[0]
        if not fits or self.islab_garbage * 2 > self.islab_used:
            kept = xp.flatnonzero(self.ioff >= 0)
            caps = xp.concatenate([caps, self.imask[kept] + 1])
            rows = xp.concatenate([rows, kept])
            self.ioff[:] = -1
            total = int(caps.sum())
            size = max(2 * total, 1024)
            self.itab = xp.empty(size + BUCKET, np.int64)
            self.islab_start = _aligned_start(self.itab)
            self.islab_used = self.islab_garbage = 0
        self._index_build_sized(rows, caps)

    def _index_build_sized(self, rows, caps) -> None:
        """Tables of capacities ``caps`` for ``rows``, built again twice as large where a home
        bucket overflowed (at load <= 1/4 a retry is rare); the slab grows (copied, realigned)
        when it is full."""
        xp = self.xp
        while rows.shape[0]:
            total = int(caps.sum())
            if self.islab_start + self.islab_used + total > self.itab.shape[0]:
                size = max(2 * (self.islab_used + total), 1024)
                old = self.itab
                self.itab = xp.empty(size + BUCKET, np.int64)
                start = _aligned_start(self.itab)
                self.itab[start : start + self.islab_used] = \
                    old[self.islab_start : self.islab_start + self.islab_used]
                live = self.ioff >= 0
                self.ioff[live] += start - self.islab_start
                self.islab_start = start
            offs = xp.empty(rows.shape[0], np.int64)
            offs[0] = 0
            xp.cumsum(caps[:-1], out=offs[1:])
            offs += self.islab_start + self.islab_used
            self.islab_used += total
            self.ioff[rows] = offs
            self.imask[rows] = caps - 1
            self._nt = None
            self.sk.index_fill(self.nt(), rows, offs, caps - 1, self.itab, self.iused,
                               self.ibad)
            if int(self.ibad[0]):
                self._index_off()
                return
            failed = self.iused[rows] < 0
            self.islab_garbage += int(caps[failed].sum())
            rows, caps = rows[failed], 2 * caps[failed]
            self.ioff[rows] = -1

    def _index_caps(self, rows):
        """Table capacities for ``rows``: powers of two >= INDEX_LOAD · live + 1 (at least two
        buckets)."""
        xp = self.xp
        if rows.shape[0] == 0:
            return xp.zeros(0, np.int64)
        need = xp.maximum(self.live[rows] * INDEX_LOAD + 1, 2 * BUCKET)
        caps = xp.left_shift(1, xp.ceil(xp.log2(need)).astype(np.int64))
        return xp.where(caps < need, caps * 2, caps)  # guard against rounding

    def index_bytes(self) -> int:
        """Bytes held by the row tables (slab and per-row arrays)."""
        return int(self.itab.nbytes + self.ioff.nbytes + self.imask.nbytes + self.iused.nbytes)

    def rows(self, firsts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Live tuples of the given first keys: (ptr, packed keys, values), CSR style."""
        xp = self.xp
        firsts = xp.ascontiguousarray(firsts, dtype=np.int64)
        counts = xp.empty(firsts.shape[0], np.int64)
        self.sk.count_rows(self.nt(), firsts, counts)
        ptr = xp.zeros(firsts.shape[0] + 1, np.int64)
        xp.cumsum(counts, out=ptr[1:])
        total = int(ptr[-1])
        ok = xp.empty(total, np.int64)
        ov = xp.empty(total, np.int64)
        self.sk.fill_rows(self.nt(), firsts, ptr, ok, ov)
        return ptr, ok, ov

    def items(self, sort: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """All live tuples, sorted by key (``sort=False``: in storage order, cheaper)."""
        total = self.used
        ok = self.xp.empty(total, np.int64)
        ov = self.xp.empty(total, np.int64)
        w = 0
        for j in range(self.nruns):
            w += self.sk.collect_live(self.keys, self.vals, self.bounds[j], self.bounds[j + 1],
                                 ok[w:], ov[w:])
        ok, ov = ok[:w], ov[:w]
        if sort and self.nruns > 1:
            order = self.xp.argsort(ok, kind="stable")
            ok, ov = ok[order], ov[order]
        return ok, ov

    def tombstones(self) -> int:
        """Physical entries that hold no live tuple (tombstones and compaction padding)."""
        return self.used - self.size
