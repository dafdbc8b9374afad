"""Where Numba keeps the compiled kernels: a cache folder keyed by the kernels' source.

Numba's on-disk cache (``cache=True``) checks only the modification time and size of the file
that defines a function, not of the modules it calls. A kernel in ``delta_kernels.py`` that
inlines a probe from ``lsm.py`` keeps its old machine code after ``lsm.py`` changes, and gives
wrong answers without an error (seen during development). So the cache lives in a folder whose
name is a digest of every source file that defines or calls Numba code in this package, plus
the Numba and Python versions: any change to any of them starts a fresh cache.

The base folder is ``$GPU_IVM_CACHE_DIR``, else ``$NUMBA_CACHE_DIR``, else
``$XDG_CACHE_HOME/gpu_ivm`` (``~/.cache/gpu_ivm``). A base that cannot be written makes Numba
fall back to its other cache locations, as usual.

>>> import numba
>>> configure() == numba.config.CACHE_DIR
True
>>> source_digest() in numba.config.CACHE_DIR
True
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys
from functools import lru_cache

_PACKAGE = pathlib.Path(__file__).resolve().parent


def _source_roots() -> list[pathlib.Path]:
    """The package and its kernels (installed as ``gpu_ivm.kernels`` from another folder)."""
    roots = [_PACKAGE]
    import importlib.util

    spec = importlib.util.find_spec("gpu_ivm.kernels")
    if spec is not None and spec.submodule_search_locations:
        roots += [pathlib.Path(p).resolve() for p in spec.submodule_search_locations]
    return roots


def digest_of(roots: list[pathlib.Path], salt: str = "") -> str:
    """Hex digest of the ``.py`` files under ``roots`` that mention Numba (paths and bytes)."""
    h = hashlib.blake2b(digest_size=10)
    h.update(salt.encode())
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            data = path.read_bytes()
            if b"numba" in data:
                h.update(str(path.relative_to(root)).encode() + b"\0")
                h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def source_digest() -> str:
    """Digest of this package's Numba-bearing sources, the Numba and the Python version."""
    import numba

    return digest_of(_source_roots(), f"numba {numba.__version__} python {sys.version_info[:3]}")


def base_dir() -> pathlib.Path:
    """The folder under which the per-digest caches live."""
    for var in ("GPU_IVM_CACHE_DIR", "NUMBA_CACHE_DIR"):
        if os.environ.get(var):
            folder = pathlib.Path(os.environ[var])
            # configure() exports its folder for child processes (Spark workers): its parent
            # is the base
            return folder.parent if folder.name == f"numba-{source_digest()}" else folder
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(xdg) / "gpu_ivm"


def configure() -> str:
    """Point Numba's cache at ``base_dir()/numba-<digest>`` (before any kernel is defined).

    Returns the folder. Idempotent.
    """
    import numba

    folder = str(base_dir() / f"numba-{source_digest()}")
    # the environment too: Numba re-reads its configuration when NUMBA_* variables change,
    # and child processes (Spark's Python workers) inherit it
    os.environ["NUMBA_CACHE_DIR"] = folder
    numba.config.CACHE_DIR = folder
    return folder
