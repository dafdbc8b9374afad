"""Parquet files written atomically: a temporary file in the same folder, fsynced, renamed
into place, the folder fsynced. A reader sees the file absent, the old one or the whole new
one, never a part (the CLI's ``--emit`` results and ``gpu-ivm query``'s answers)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["fsync_dir", "write_parquet"]


def fsync_dir(d: Path) -> None:
    """fsync a folder (its entries: a rename into it is durable); errors are ignored."""
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_parquet(path: Path, batches, schema=None) -> int:
    """Stream Arrow record batches into ``path`` through a temporary file in the same folder
    and rename it into place, so ``path`` is either absent, the old file or the complete new
    one. Returns the rows written."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    rows = 0
    try:
        with open(tmp, "xb") as f:
            writer = pq.ParquetWriter(f, schema) if schema is not None else None
            try:
                for b in batches:
                    if writer is None:
                        writer = pq.ParquetWriter(f, b.schema)
                    writer.write_batch(b)
                    rows += b.num_rows
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:
                raise RuntimeError(f"no record batches (and no schema) for {path}")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return rows
