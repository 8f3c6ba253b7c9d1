"""Profile a local model artifact: its classification plus what is on disk."""

from __future__ import annotations

from functools import lru_cache
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


def weights_profile(model: ModelProfile, model_path: str) -> ModelProfile:
    """The profile of the weights a configuration serves from `model_path`: `model` itself; a
    checkpoint directory's own profile (a downloaded AWQ/GPTQ/FP8 folder is fitted and given
    ceilings with its own size and quantization, not the original model's); a local variant
    file (a GGUF requantized here) is `model` with that file's size."""
    if model_path == model.path:
        return model
    path = Path(model_path)
    if path.is_dir():
        return _directory_profile(str(path.resolve()), path.stat().st_mtime_ns)
    if path.is_file():
        return model.model_copy(update={"file_bytes": path.stat().st_size})
    return model


@lru_cache(maxsize=32)
def _directory_profile(path: str, mtime_ns: int) -> ModelProfile:
    """A checkpoint directory's profile, once per run (the fit asks for every candidate);
    keyed by its mtime, so a folder downloaded again is profiled again."""
    return profile_model(path)
