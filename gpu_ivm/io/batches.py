"""Update-batch folders: which files are batches, and in which order they apply."""

from __future__ import annotations

import os
import pathlib
import re

from gpu_ivm.errors import InputError

#: File extensions :func:`list_batch_files` picks up (matched case-insensitively).
BATCH_EXTENSIONS: tuple[str, ...] = (
    ".parquet", ".pq", ".csv", ".csv.gz", ".arrow", ".arrows", ".feather", ".ipc",
)

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the digit runs of a name by value: ``b2`` before ``b10``.

    >>> sorted(["b10.csv", "b2.csv", "a.csv"], key=natural_key)
    ['a.csv', 'b2.csv', 'b10.csv']
    """
    parts = _DIGITS.split(name)
    return tuple((1, int(p)) if i % 2 else (0, p) for i, p in enumerate(parts)) + ((0, name),)


def list_batch_files(directory: str | os.PathLike[str]) -> list[pathlib.Path]:
    """List the update-batch files in a folder, in natural (numeric-aware) name order.

    Runs of digits in the names compare by value, so ``batch-2`` comes before ``batch-10``
    (and ``b002`` sits with ``b2``); the rest of the name compares as text. The batches are
    applied in this order.

    Parameters
    ----------
    directory : str or os.PathLike
        The folder to scan (not recursively).

    Returns
    -------
    list of pathlib.Path
        Regular files whose name ends with one of :data:`BATCH_EXTENSIONS`
        (``.parquet .pq .csv .csv.gz .arrow .arrows .feather .ipc``, any case).

    Raises
    ------
    gpu_ivm.errors.InputError
        If the folder does not exist, is not a folder, or holds no such file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("batch-10.csv", "batch-2.parquet", "notes.txt"):
    ...     _ = (d / name).write_text("")
    >>> [p.name for p in list_batch_files(d)]
    ['batch-2.parquet', 'batch-10.csv']
    """
    folder = pathlib.Path(directory)
    if not folder.exists():
        raise InputError(f"batch folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise InputError(f"batch folder {str(folder)!r} is not a directory")
    files = sorted(
        (p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(BATCH_EXTENSIONS)),
        key=lambda p: natural_key(p.name),
    )
    if not files:
        raise InputError(
            f"batch folder {str(folder)!r} holds no batch files "
            f"(extensions: {' '.join(BATCH_EXTENSIONS)})"
        )
    return files
