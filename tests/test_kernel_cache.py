"""The kernel cache folder is keyed by every Numba-bearing source file (gpu_ivm.kernel_cache).

Numba's own cache check looks only at the file defining a function; a change in a module that
the function calls must still give a fresh cache (else stale machine code, wrong answers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba

from gpu_ivm import kernel_cache


def _tree(tmp: Path) -> Path:
    root = tmp / "pkg"
    root.mkdir()
    (root / "caller.py").write_text(
        "import numba\n@numba.njit(cache=True)\ndef f(x): return g(x)\n")
    (root / "callee.py").write_text("import numba\n@numba.njit\ndef g(x): return x + 1\n")
    (root / "plain.py").write_text("def h(x): return x\n")
    return root


def test_digest_changes_with_a_called_module(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = kernel_cache.digest_of([root])
    (root / "callee.py").write_text("import numba\n@numba.njit\ndef g(x): return x + 2\n")
    assert kernel_cache.digest_of([root]) != before


def test_digest_ignores_files_without_numba(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = kernel_cache.digest_of([root])
    (root / "plain.py").write_text("def h(x): return x + 1\n")
    assert kernel_cache.digest_of([root]) == before
    assert kernel_cache.digest_of([root], "numba 0.1") != before


def test_the_kernels_are_covered() -> None:
    roots = kernel_cache._source_roots()
    files = {p.name for r in roots for p in r.rglob("*.py")}
    assert {"lsm.py", "delta_kernels.py", "backend.py"} <= files
    assert kernel_cache.source_digest() in numba.config.CACHE_DIR


def test_a_fresh_process_caches_under_the_digest(tmp_path: Path) -> None:
    env = {**os.environ, "GPU_IVM_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    code = ("import numpy as np, gpu_ivm, numba\n"
            "from gpu_ivm.kernels.lsm import lower_bound\n"
            "print(lower_bound(np.arange(10, dtype=np.int64), 0, 10, 4))\n"
            "print(numba.config.CACHE_DIR)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out[0] == "4"
    folder = Path(out[1])
    assert folder.parent == tmp_path and folder.name == f"numba-{kernel_cache.source_digest()}"
    assert list(folder.rglob("*.nbi")), "no cache index written"
