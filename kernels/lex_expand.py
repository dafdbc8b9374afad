"""The expand-join of the query engine: each left row joined with every row of a sorted run
that starts with its probe.

The query engine (:mod:`gpu_ivm.cq`) joins a relation (a delta, a request, a view being
built) with a run of key rows sorted lexicographically: left row q carries a probe (its values
of the variables both sides share) and meets the run's rows whose first ``p`` columns equal
that probe, one row when the run's variables are all bound (a lookup-join), any number
otherwise (an expand-join, whose output size is known only after the matches are counted).
:func:`expand_join` is the classic two-pass expand:

1. **count**: the range ``[lo, hi)`` of each probe in the run
   (:func:`~gpu_ivm.kernels.lex_search.prefix_ranges`: a binary search and a gallop);
2. **scan**: the exclusive prefix sum of the counts ``hi - lo`` gives each left row its first
   output row, and the total sizes the output;
3. **fill**: left row q writes its rows there, each the left row's columns followed by the
   run row's columns from ``skip`` on, with a multiplicity chosen by ``how``:

   - :data:`PRODUCT`: left multiplicity times the run row's, an int64 product tested before
     it is taken (:func:`~gpu_ivm.kernels.int64_checks.mul_overflows`); one outside int64
     raises :class:`~gpu_ivm.errors.IntegerOverflowError`;
   - :data:`LEFT`: the left multiplicity (a join with the run's support);
   - :data:`RIGHT`: the run row's multiplicity (a gather of the matches).

:func:`expand_rows` is the fill's per-row body, shared unchanged by the CUDA twin
(:func:`gpu_ivm.kernels.cuda_lex_join.expand_join`).

The output rows come in left-row order, each left row's in the run's order: for left rows
sorted and unique, and ``skip`` the probe's width, the output is sorted and unique too.

>>> import numpy as np
>>> left = np.array([[1, 7], [2, 8], [3, 9]])
>>> run = np.array([[7, 0], [7, 5], [9, 4]])
>>> k, m = expand_join(left, np.array([2, 3, 5]), left[:, 1:], run, np.array([1, 2, 3]), 1,
...                    PRODUCT)
>>> k.tolist(), m.tolist()
([[1, 7, 0], [1, 7, 5], [3, 9, 4]], [2, 4, 15])
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .int64_checks import mul_overflows
from .jit import helper
from .lex_search import prefix_ranges

__all__ = ["LEFT", "PRODUCT", "RIGHT", "check_expand", "check_ranges", "expand_join", "expand_rows",
           "overflow_error"]

PRODUCT = 0  # output multiplicity: left times right (checked)
LEFT = 1  # the left row's (a join with the run's support)
RIGHT = 2  # the run row's (a gather of the matches)


@nb.njit(cache=True, inline="always")
def expand_rows(left_keys, left_mult, q, keys, mult, lo, hi, skip, how, out_keys, out_mult,
                o):
    """Write left row q joined with the run rows ``[lo, hi)`` to output rows ``o, o + 1...``:
    the left row's columns, then each run row's columns from ``skip`` on, and the
    multiplicity ``how`` asks for. Returns whether every product fitted in int64 (a product
    that did not is written as 0)."""
    a = left_keys.shape[1]
    b = keys.shape[1] - skip
    lm = left_mult[q]
    ok = True
    for r in range(lo, hi):
        for c in range(a):
            out_keys[o, c] = left_keys[q, c]
        for c in range(b):
            out_keys[o, a + c] = keys[r, skip + c]
        if how == 0:
            v = mult[r]
            if mul_overflows(lm, v):
                ok = False
                out_mult[o] = 0
            else:
                out_mult[o] = lm * v
        elif how == 1:
            out_mult[o] = lm
        else:
            out_mult[o] = mult[r]
        o += 1
    return ok


@helper
def _offsets(lo, hi, offs):
    """offs[q] = Σ_{q' < q} (hi[q'] - lo[q']); returns the total (the scan of the counts)."""
    t = 0
    for q in range(lo.shape[0]):
        offs[q] = t
        t += hi[q] - lo[q]
    return t


@helper
def _fill(left_keys, left_mult, keys, mult, lo, hi, offs, skip, how, out_keys, out_mult):
    """Every left row's output rows; returns the first left row whose product left int64,
    or -1."""
    bad = -1
    for q in range(lo.shape[0]):
        if not expand_rows(left_keys, left_mult, q, keys, mult, lo[q], hi[q], skip, how,
                           out_keys, out_mult, offs[q]) and bad < 0:
            bad = q
    return bad


def check_expand(left_keys, left_mult, probes, keys, mult, skip: int, how: int) -> None:
    """Refuse arguments that do not fit (ValueError): 2-D keys, one multiplicity per row,
    one probe per left row, no wider than the run, ``0 <= skip <= `` the run's width, ``how``
    one of PRODUCT, LEFT, RIGHT."""
    if (len(left_keys.shape) != 2 or len(probes.shape) != 2 or len(keys.shape) != 2
            or left_keys.shape[0] != left_mult.shape[0] or keys.shape[0] != mult.shape[0]
            or probes.shape[0] != left_keys.shape[0] or probes.shape[1] > keys.shape[1]
            or not 0 <= skip <= keys.shape[1] or how not in (PRODUCT, LEFT, RIGHT)):
        raise ValueError(f"expand_join: left {left_keys.shape}/{left_mult.shape}, probes "
                         f"{probes.shape}, run {keys.shape}/{mult.shape}, skip {skip}, how "
                         f"{how} do not fit")


def check_ranges(ranges, n: int, size: int, xp):
    """``ranges`` (``(lo, hi)``, host or device arrays of module ``xp``) as int64 arrays of
    length ``n`` with ``0 <= lo <= hi <= size``, or ValueError."""
    lo, hi = (xp.ascontiguousarray(r, dtype=np.int64) for r in ranges)
    if lo.shape != (n,) or hi.shape != (n,):
        raise ValueError(f"expand_join: ranges of shapes {lo.shape}, {hi.shape} for {n} rows")
    if n and bool(((lo < 0) | (lo > hi) | (hi > size)).any()):
        raise ValueError(f"expand_join: ranges outside 0 <= lo <= hi <= {size}")
    return lo, hi


def overflow_error(left_keys: np.ndarray | None, q: int):
    """The error for left row ``q`` whose product with a match leaves int64 (its key named
    when ``left_keys`` are on the host)."""
    from gpu_ivm.errors import IntegerOverflowError

    what = f"the row {left_keys[q].tolist()}" if left_keys is not None else f"left row {q}"
    return IntegerOverflowError(f"a multiplicity would leave the int64 range (joining {what})")


def expand_join(left_keys: np.ndarray, left_mult: np.ndarray, probes: np.ndarray,
                keys: np.ndarray, mult: np.ndarray, skip: int, how: int = PRODUCT,
                fence: np.ndarray | None = None,
                ranges: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(out_keys, out_mult)``: each left row (``left_keys[q]``, ``left_mult[q]``) joined
    with every row of ``keys`` (sorted lexicographically, int64) whose first
    ``probes.shape[1]`` columns equal ``probes[q]``; an output row is the left row's columns
    then the run row's from ``skip`` on; its multiplicity as ``how`` says (see the module
    docstring). ``fence``: :func:`~gpu_ivm.kernels.lex_search.fences` of ``keys``, if it has
    them. ``ranges``: ``(lo, hi)``, the run rows each left row takes, when the caller has
    narrowed the probes' ranges (a seek or a cap: a range must lie inside its probe's, which
    the caller guarantees); the search is then skipped. A product outside int64 raises
    :class:`~gpu_ivm.errors.IntegerOverflowError`.

    >>> k, m = expand_join(np.array([[5], [6]]), np.array([1, 1]), np.zeros((2, 0), np.int64),
    ...                    np.array([[1], [2]]), np.array([3, 4]), 0, RIGHT)
    >>> k.tolist(), m.tolist()
    ([[5, 1], [5, 2], [6, 1], [6, 2]], [3, 4, 3, 4])
    >>> expand_join(np.array([[5], [6]]), np.array([1, 1]), np.zeros((2, 0), np.int64),
    ...             np.array([[1], [2]]), np.array([3, 4]), 0, RIGHT,
    ...             ranges=(np.array([1, 0]), np.array([2, 1])))[0].tolist()
    [[5, 2], [6, 1]]
    """
    left_keys = np.ascontiguousarray(left_keys, dtype=np.int64)
    left_mult = np.ascontiguousarray(left_mult, dtype=np.int64)
    probes = np.ascontiguousarray(probes, dtype=np.int64)
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    mult = np.ascontiguousarray(mult, dtype=np.int64)
    check_expand(left_keys, left_mult, probes, keys, mult, skip, how)
    n = left_keys.shape[0]
    lo, hi = prefix_ranges(keys, probes, fence) if ranges is None else \
        check_ranges(ranges, n, keys.shape[0], np)
    offs = np.empty(n, np.int64)
    total = _offsets(lo, hi, offs) if n else 0
    out_keys = np.empty((total, left_keys.shape[1] + keys.shape[1] - skip), np.int64)
    out_mult = np.empty(total, np.int64)
    if total:
        bad = _fill(left_keys, left_mult, keys, mult, lo, hi, offs, skip, how, out_keys,
                    out_mult)
        if bad >= 0:
            raise overflow_error(left_keys, bad)
    return out_keys, out_mult
