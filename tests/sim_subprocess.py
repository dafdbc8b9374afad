"""Running a simulator cases file in a child process (imported by the wrappers, not a test).

``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported, so each ``cuda_*_cases.py``
file runs in a pytest of its own; :func:`run_cases` starts it and fails with the end of its
output when any case fails (or, unless ``skips_allowed``, when one is skipped).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def run_cases(name: str, *, skips_allowed: bool = False, timeout: int = 900) -> None:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    env.pop("GPU_IVM_BACKEND", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(TESTS / name)], cwd=TESTS, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, (out.stdout + out.stderr)[-6000:]
    assert " passed" in out.stdout
    assert skips_allowed or "skipped" not in out.stdout, out.stdout[-2000:]
