"""Files: format and compression detection, opening (decompressing) streams, and reading
Parquet and Arrow IPC files (text and CSV files: :mod:`.text`)."""

from __future__ import annotations

import bz2
import gzip
import pathlib
import zlib

import pyarrow as pa

from gpu_ivm.errors import InputError

_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\x28\xb5\x2f\xfd", "zstd"))


def file_kind(path: pathlib.Path) -> str:
    """``"csv"``, ``"parquet"``, ``"ipc"`` or ``"text"``, from the name (compression aside)."""
    name = path.name.lower()
    for ext in _COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".arrow", ".arrows", ".feather", ".ipc")):
        return "ipc"
    return "text"


def check_file(path: pathlib.Path) -> None:
    if not path.exists():
        raise InputError(f"input file {str(path)!r} does not exist")
    if path.is_dir():
        raise InputError(f"input path {str(path)!r} is a directory, not a file")


def compression(path: pathlib.Path) -> str | None:
    """The codec of a compressed file, by extension or else by its magic bytes."""
    name = path.name.lower()
    for ext, codec in _COMPRESSED.items():
        if name.endswith(ext):
            return codec
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc
    return next((codec for m, codec in _MAGIC if magic.startswith(m)), None)


def open_stream(path: pathlib.Path, codec: str | None) -> pa.NativeFile:
    try:
        return pa.input_stream(str(path), compression=codec)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc


def peek(path: pathlib.Path, codec: str | None, size: int) -> bytes:
    """The first ``size`` bytes of the decompressed file (Python's gzip and bz2 readers
    decompress only what is asked for; pyarrow's streams decompress whole blocks)."""
    opener = {"gzip": gzip.open, "bz2": bz2.open}.get(codec or "")
    try:
        if opener is None:
            with open_stream(path, codec) as stream:
                return stream.read(size)
        with opener(path, "rb") as f:
            return f.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise corrupt(path, codec, exc) from exc


def corrupt(path: pathlib.Path, codec: str | None, exc: Exception) -> InputError:
    if codec is None:
        return InputError(f"cannot read {str(path)!r}: {exc}")
    return InputError(
        f"cannot decompress {str(path)!r}: truncated or corrupt {codec} data ({exc})"
    )


def read_parquet(path: pathlib.Path) -> pa.Table:
    import pyarrow.parquet as pq

    check_file(path)
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"cannot read Parquet file {str(path)!r}: truncated or corrupt ({exc})"
        ) from exc


def read_ipc(path: pathlib.Path) -> pa.Table:
    """An Arrow IPC file or stream (``.arrow``, ``.arrows``, ``.feather``, ``.ipc``)."""
    check_file(path)
    try:
        buf = pa.py_buffer(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from exc
    try:
        return pa.ipc.open_file(buf).read_all()
    except (pa.ArrowException, OSError, ValueError):
        pass
    try:
        return pa.ipc.open_stream(buf).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(
            f"cannot read Arrow IPC file {str(path)!r}: not an Arrow file or stream, or "
            f"truncated/corrupt ({exc})"
        ) from exc
