"""Fixtures that need the real engines and model from `make engines` (per-machine cache)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from infopt.bootstrap import default_paths
from infopt.engines.process import free_port


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


@pytest.fixture(scope="session")
def vllm_server(vllm_python, hf_model, tmp_path_factory):
    """One real vLLM CPU server shared by every test that can use it (~40 s start-up)."""
    from infopt.engines import process, vllm
    from infopt.specs.serving import VllmConfig

    # --enforce-eager: ~37 s start on 2 cores instead of ~140 s compiled (notes/engines.md).
    cfg = VllmConfig(model_path=str(hf_model), served_model_name="smollm2", max_model_len=4096,
                     enforce_eager=True, cpu_kvcache_space_gib=1)
    log = tmp_path_factory.mktemp("vllm") / "engine.log"
    running = process.start(vllm.ADAPTER, cfg, str(vllm_python), log, weights_bytes=270_000_000)
    yield running
    process.stop(running.pid)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real `prefect server start` on 127.0.0.1 (API and UI), for the tests whose flows are
    answered from another process; yields the environment that points at it."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start",
                             "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    else:
        pytest.fail("prefect server did not answer /api/health within 180 s")
    yield env
    proc.terminate()
    proc.wait(30)
