"""Content keys: what a kept result depends on, hashed, so a trial, a contract probe or a quality
score or verdict is reused exactly when the same thing would be measured again (a resumed run,
repeats, another run on this machine) and never when anything it depends on changed. Every key
of the project is made here; each caller says what goes into its payload."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

KEY_HEX = 12  # 48 bits: a collision among a machine's kept results is not a practical risk


def content_key(payload: dict) -> str:
    """The first KEY_HEX hex digits of the SHA-256 of `payload` as sorted JSON."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:KEY_HEX]


def code_digest(files: Iterable[Path]) -> str:
    """The digest of source files, for a key that must change when the code that produced the
    result changes (the contract probes, the quality scoring)."""
    return hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()[:KEY_HEX]
