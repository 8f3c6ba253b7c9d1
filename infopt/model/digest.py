"""A content digest of a model (one GGUF file, or every file of an HF directory), so a resumed
run reuses a trial only if the weights are byte-for-byte the ones it measured."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

_CHUNK = 1 << 20


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@cache
def _digest(path: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    p = Path(path)
    if p.is_file():
        return "sha256:" + _file_sha256(p)
    h = hashlib.sha256()
    for rel, _, _ in stamp:  # sorted relative paths: the order does not depend on the fs
        h.update(rel.encode() + b"\0" + _file_sha256(p / rel).encode() + b"\n")
    return "sha256-tree:" + h.hexdigest()


def model_digest(path: str) -> str:
    """sha256 of the file, or of the directory's (relative path, file sha256) list. Cached per
    process on (path, sizes, mtimes): ~0.3 s for the 98 MB demo GGUF, once."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    stamp = tuple((str(f.relative_to(p)) if f != p else f.name, f.stat().st_size,
                   f.stat().st_mtime_ns) for f in files)
    return _digest(str(p), stamp)
