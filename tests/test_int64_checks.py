"""The compiled kernels' int64 overflow checks fire on every input that leaves the range and
on none that stays in it (a check written as a test of the wrapped result was folded away by
LLVM and never fired; see ``kernels/int64_checks.py``). Oracle: Python's unbounded ints."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_ivm.kernels import row_marks
from gpu_ivm.kernels.int64_checks import add_overflows
from gpu_ivm.kernels.lex_search import merge_sorted

from gpu_ivm.errors import IntegerOverflowError
from gpu_ivm.store import ZStore

MAX, MIN = 2 ** 63 - 1, -2 ** 63
EDGES = [MAX, MAX - 1, 2 ** 62, 2 ** 62 - 1, 1, 0, -1, -2 ** 62, MIN + 1, MIN]


@pytest.mark.parametrize("a", EDGES)
def test_add_overflows(a: int) -> None:
    for b in EDGES:
        want = not MIN <= a + b <= MAX
        assert add_overflows(np.int64(a), np.int64(b)) == want, (a, b)


def test_merge_sorted_refuses_exactly_the_overflowing_sums() -> None:
    key = np.array([[7]])
    for a in EDGES:
        for b in EDGES:
            if not (a and b):
                continue  # a zero multiplicity is not stored
            if MIN <= a + b <= MAX:
                _, m = merge_sorted(key, np.array([a]), key, np.array([b]))
                assert m.tolist() == ([a + b] if a + b else [])
            else:
                with pytest.raises(IntegerOverflowError):
                    merge_sorted(key, np.array([a]), key, np.array([b]))


@pytest.mark.parametrize("scale", [1, 3, 6])
def test_mark_row_scaled_refuses_marks_outside_int8(scale: int) -> None:
    """A row is marked only when every scaled multiplicity fits an int8 mark, whatever the
    product does in int64 (6148914691236517206·3 wraps to 2)."""
    key = np.array([(0 << 32) | 5], np.int64)
    for v in (6148914691236517206, -6148914691236517206, 3074457345618258603, MAX, MIN,
              2 ** 62, 42, 43, -42, -43, 127, 21, 22, 1):
        st = ZStore.from_sorted(key, np.array([v], np.int64), 8)
        marks = np.zeros(9, np.int8)
        ok, _ = row_marks.mark_row_scaled(st.nt(), 0, marks, scale)
        assert ok == (abs(v * scale) <= 127), (v, scale)
        assert int(marks[5]) == (v * scale if ok else 0)
