"""Profile a local model artifact: its classification plus what is on disk."""

from __future__ import annotations

from pathlib import Path

from infopt.model.local import inspect_local
from infopt.specs.model import ModelFormat, ModelProfile


def profile_model(path_str: str) -> ModelProfile:
    """Profile a GGUF file or an HF directory; a bad path raises InputError saying what to pass."""
    inspection = inspect_local(path_str)
    path = Path(path_str).expanduser().resolve()
    if path.is_dir():
        weights = list(path.glob("*.safetensors")) or list(path.glob("*.bin"))
        return ModelProfile(path=str(path), format=ModelFormat.HF,
                            file_bytes=sum(w.stat().st_size for w in weights),
                            inspection=inspection, source=f"{path / 'config.json'}")
    return ModelProfile(path=str(path), format=ModelFormat.GGUF, file_bytes=path.stat().st_size,
                        inspection=inspection,
                        source=f"GGUF metadata and tensor index of {path.name}")
