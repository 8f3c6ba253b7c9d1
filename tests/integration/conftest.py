"""Fixtures that need the real engines and model from `make engines` (per-machine cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.bootstrap import default_paths


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.fail(f"{what} missing at {path}: run `make engines` first (make test does)")
    return path


@pytest.fixture(scope="session")
def engine_paths():
    return default_paths()


@pytest.fixture(scope="session")
def gguf_model(engine_paths) -> Path:
    return _need(engine_paths.gguf, "SmolLM2 GGUF")


@pytest.fixture(scope="session")
def llama_server(engine_paths) -> Path:
    return _need(engine_paths.llama_server, "llama-server")


@pytest.fixture(scope="session")
def hf_model(engine_paths) -> Path:
    return _need(engine_paths.hf_model, "converted SmolLM2 (HF safetensors)")


@pytest.fixture(scope="session")
def vllm_python(engine_paths) -> Path:
    return _need(engine_paths.vllm_python, "vLLM CPU environment")
