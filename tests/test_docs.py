"""Docs that run: module docstring examples and the README's Python blocks."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import gpu_ivm

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(m.name for m in pkgutil.walk_packages(gpu_ivm.__path__, "gpu_ivm.")
                 if not m.name.endswith("__main__") and ".spark_glue" not in m.name)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0


def test_readme_python_blocks(data_dir, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    namespace: dict = {}
    outs = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
        outs[block] = capsys.readouterr().out.split()
    first = outs[blocks[0]]
    assert first[0] == "1612010"  # the count the README says the load prints
    rel = next(b for b in blocks if "RelationEngine(" in b)
    assert outs[rel][-1] == "0"  # the three-relation example's final count
    free = next(b for b in blocks if "maintain=" in b)
    assert outs[free][:2] == ["2", "2"]  # vertex 3 and edge {1, 3} lie in two triangles
    assert "'new':" in " ".join(outs[free])  # the change feed printed old and new values
