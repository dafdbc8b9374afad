"""Content fingerprints of input files, so a resumed run can prove it continues the same input.

``gpu-ivm replay`` records the fingerprint of its base input (and ``spark-replay`` of its base
graph) with its snapshots; resuming with another input is refused. A fingerprint is a BLAKE2b
digest (32 bytes) of the bytes, read in chunks (constant memory), plus the byte count. A folder
is hashed over the relative names and contents of its regular files, in name order, so
renaming, adding, removing or editing any file changes it.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "g.txt").write_text("1 2\\n2 3\\n")
>>> fp = fingerprint(d / "g.txt")
>>> fp["kind"], fp["bytes"], len(fp["blake2b"])
('file', 8, 64)
>>> fp == fingerprint(d / "g.txt")
True
>>> _ = (d / "g.txt").write_text("1 2\\n2 4\\n")
>>> differences(fp, fingerprint(d / "g.txt"))
['content (blake2b c723bf8a... -> 3c783a52...)']
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import InputError

__all__ = ["CHUNK", "differences", "fingerprint", "short"]

CHUNK = 1 << 20


def _feed(h, path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n


def fingerprint(path: str | os.PathLike[str]) -> dict:
    """The fingerprint of a file or folder: ``{"kind": "file" | "folder", "bytes": n,
    "blake2b": hex}`` (``"files": count`` for a folder).

    Raises
    ------
    InputError
        If ``path`` does not exist or cannot be read.
    """
    p = Path(path)
    h = hashlib.blake2b(digest_size=32)
    try:
        if p.is_dir():
            files = sorted(q for q in p.rglob("*") if q.is_file())
            total = 0
            for q in files:
                name = q.relative_to(p).as_posix().encode()
                h.update(len(name).to_bytes(8, "little") + name)
                size = q.stat().st_size
                h.update(size.to_bytes(8, "little"))
                got = _feed(h, q)
                if got != size:
                    raise InputError(f"{q} changed while it was read")
                total += got
            return {"kind": "folder", "files": len(files), "bytes": total,
                    "blake2b": h.hexdigest()}
        total = _feed(h, p)
    except FileNotFoundError:
        raise InputError(f"{str(p)!r} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read {str(p)!r}: {e.strerror or e}") from None
    return {"kind": "file", "bytes": total, "blake2b": h.hexdigest()}


def short(fp: dict) -> str:
    """A one-line description: ``"1,234 bytes, blake2b 5e0c7b2f..."``.

    >>> short({"kind": "file", "bytes": 1234, "blake2b": "5e0c7b2f" + "0" * 56})
    '1,234 bytes, blake2b 5e0c7b2f...'
    """
    files = f"{fp.get('files'):,} files, " if fp.get("kind") == "folder" else ""
    return f"{files}{fp.get('bytes', 0):,} bytes, blake2b {str(fp.get('blake2b'))[:8]}..."


def differences(recorded: dict, now: dict) -> list[str]:
    """What differs between two fingerprints, in words (empty when they match)."""
    out = []
    if recorded.get("kind") != now.get("kind"):
        out.append(f"a {recorded.get('kind')} then, a {now.get('kind')} now")
    if recorded.get("files") != now.get("files") and now.get("kind") == "folder":
        out.append(f"{recorded.get('files')} files -> {now.get('files')}")
    if recorded.get("bytes") != now.get("bytes"):
        out.append(f"{recorded.get('bytes'):,} bytes -> {now.get('bytes'):,}")
    if recorded.get("blake2b") != now.get("blake2b"):
        out.append(f"content (blake2b {str(recorded.get('blake2b'))[:8]}... -> "
                   f"{str(now.get('blake2b'))[:8]}...)")
    return out
