"""llama.cpp's Vulkan build, the route for AMD and older GPUs (issue 49), built by `make engines`
(infopt.bootstrap ensure_llamacpp_vulkan, with Debian's toolchain) and run here on Mesa's
lavapipe, a real Vulkan device on the CPU: -ngl N really offloads N layers, and the offload
infopt records is read from the engine's own load log. Only the device is a CPU."""

from __future__ import annotations

import httpx
import pytest

from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.serving import LlamaCppConfig

pytestmark = pytest.mark.integration

LAVAPIPE = {"GGML_VK_VISIBLE_DEVICES": "0"}  # llama.cpp skips a CPU-type device unless named


@pytest.fixture(scope="module")
def vulkan_server(engine_paths):
    path = engine_paths.llama_server_vulkan
    if not path.exists():
        pytest.fail(f"llama.cpp's Vulkan build is missing at {path}: run `make engines-vulkan` "
                    "(make test does)")
    return path


def test_the_vulkan_build_lists_its_device(vulkan_server, monkeypatch):
    llamacpp.build_device.cache_clear()
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    assert llamacpp.build_device(str(vulkan_server)) == "vulkan"
    llamacpp.build_device.cache_clear()


def test_partial_offload_is_real_and_read_from_the_log(vulkan_server, gguf_model, tmp_path):
    """-ngl 10 of SmolLM2's 30 layers: the engine says it put 10 of 31 (with the output layer)
    on the Vulkan device, in a Vulkan0 buffer beside the host's, and serves."""
    # -lv 4: this build prints its load lines (the offload among them) only at verbosity 4
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=512, n_gpu_layers=10,
                         log_verbosity=4, env=LAVAPIPE)
    log = tmp_path / "vulkan.log"
    running = process.start(llamacpp.ADAPTER, cfg, str(vulkan_server), log,
                            weights_bytes=10**8)
    try:
        r = httpx.post(f"{running.base_url}/v1/completions", timeout=120, json={
            "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
    finally:
        process.stop(running.pid)
    text = log.read_text(errors="replace")
    seen = llamacpp.offload_from_log(text)
    assert seen is not None and (seen.layers_offloaded, seen.layers_total) == (10, 31)
    assert any(name.startswith("Vulkan") for name in seen.model_buffer_bytes), seen
    _the_fit_agrees_with_the_engines_buffers(gguf_model, text, seen)


def _the_fit_agrees_with_the_engines_buffers(gguf_model, text: str, seen) -> None:
    """infopt's split of -ngl 10 (infopt.costmodel.fit.offload_split, from llama.cpp's source:
    the output layer and the last 9 decoder layers) against what the engine allocated on the
    device: the KV buffer to 2% (9 of 30 layers' KV), the weights to 20% (the estimate prices
    every parameter at the file's average bits; the tied output is Q8_0 in this Q4_1 file)."""
    from infopt.costmodel.allocation import EngineKnobs
    from infopt.costmodel.fit import offload_split
    from infopt.costmodel.kv import kv_bytes_per_token_per_gpu
    from infopt.model.profile import profile_model

    m = profile_model(str(gguf_model))
    split = offload_split(m.inspection, EngineKnobs(gpu_layers=10))
    kv = llamacpp.kv_from_log(text)  # the device's KV buffer alone under a partial offload
    assert kv is not None and "Vulkan0" in kv.line and "CPU" not in kv.line
    fit_kv = kv_bytes_per_token_per_gpu(m.inspection, "f16") * 512 * split.kv_share
    assert kv.bytes == pytest.approx(fit_kv, rel=0.02)
    device = sum(b for name, b in seen.model_buffer_bytes.items() if name.startswith("Vulkan"))
    assert split.weights_share * m.file_bytes == pytest.approx(device, rel=0.2)
