"""docs/queries-cq.md runs (doctest); its engine example also checks the oracle."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "queries-cq.md"


def test_queries_cq_doc_examples():
    res = doctest.testfile(str(DOC), module_relative=False,
                           optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 10
    assert res.failed == 0
