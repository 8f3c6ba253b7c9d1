"""Routing that knows the device (issue 49), on recorded inventories: a GPU's compute capability
(NVML's, or its catalog row's where a recorded nvidia-smi does not state it) against the support
matrix's per-engine minimums, each refusal naming its source; a legacy NVIDIA GPU (V100, T4) and
an AMD GPU take the compatibility route, llama.cpp first, before the workload defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infopt.engines import serves
from infopt.engines.routing import (
    checkpoint_format_of,
    device_of,
    device_refusal,
    route,
    select_available,
)
from infopt.hardware.host import detect_other_accelerators
from infopt.model.classify import classify_config
from infopt.specs.base import EngineUnavailableError
from infopt.specs.checkpoint import CheckpointFormat
from infopt.specs.hardware import HardwareInventory
from infopt.specs.inspection import QuantizationInfo, QuantMethod
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import EngineName as E
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import MODEL_CONFIGS

AMD_FIXTURE = Path(__file__).parents[1] / "fixtures" / "amd" / "radeon_rx7900xt.json"
SGLANG_MATRIX = "https://docs.sglang.ai/advanced_features/quantization.html"


def _model(fmt: ModelFormat, quant: QuantizationInfo | None = None) -> ModelProfile:
    cfg = json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text())
    insp = classify_config(cfg, model="q")
    if quant is not None:
        insp = insp.model_copy(update={"quantization": quant})
    return ModelProfile(path="/m", format=fmt, file_bytes=1, inspection=insp, source="test")


AWQ = QuantizationInfo(method=QuantMethod.AWQ, bits=4, group_size=128, format="int4 gemm",
                       activations_quantized=False, scheme="W4A16", source="test")


def _amd(tmp_path: Path) -> HardwareInventory:
    """This host with the recorded Radeon as infopt's own prober reads an AMD GPU: amdgpu's
    files in a DRM tree (PCI vendor 0x1002, the VRAM rocm-smi reported), no NVML device."""
    card = json.loads(AMD_FIXTURE.read_text())["rocm_smi"]["card0"]
    dev = tmp_path / "card0" / "device"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "mem_info_vram_total").write_text(card["VRAM Total Memory (B)"] + "\n")
    accelerator, notes = detect_other_accelerators(tmp_path)
    h100 = recorded_inventory("h100_sxm_8x")
    return h100.model_copy(update={"gpus": [], "gpu_pairs": [], "accelerator": accelerator,
                                   "gpu_probe": "NVML: no NVIDIA driver", "gpu_notes": notes})


def _pick(hw: HardwareInventory, m: ModelProfile, concurrency: int = 4):
    device, fmt = device_of(hw), checkpoint_format_of(m)
    return select_available(route(hw, m, concurrency), None, lambda n: None,
                            lambda n: serves(n, m.format) or device_refusal(n, device, fmt))


@pytest.mark.parametrize("fixture, cc, source", [
    ("tesla_t4_shared", "7.5", "catalog row t4"),
    ("tesla_v100_sxm2_16gb", "7.0", "catalog row v100_sxm2_16gb"),
    ("h100_sxm_8x", "9.0", "NVML")])
def test_the_compute_capability_comes_from_nvml_or_the_gpus_catalog_row(fixture, cc, source):
    d = device_of(recorded_inventory(fixture))
    assert (d.vendor, d.compute_capability, d.cc_source) == ("nvidia", cc, source)


@pytest.mark.parametrize("fixture", ["tesla_t4_shared", "tesla_v100_sxm2_16gb"])
def test_a_legacy_nvidia_gpu_routes_llama_cpp_first_and_refuses_sglang_by_the_matrix(fixture):
    hw = recorded_inventory(fixture)
    routes = route(hw, _model(ModelFormat.GGUF), 4)
    assert routes[0].engine is E.LLAMACPP and routes[0].reason.startswith("legacy GPU")
    assert "sglang runs gguf checkpoints on CUDA CC >= 8.0" in routes[0].reason
    # An HF checkpoint's routes: the workload defaults stay behind it, judged one by one.
    hf_routes = route(hw, _model(ModelFormat.HF), 4)
    assert [r.engine for r in hf_routes] == [E.LLAMACPP, E.VLLM, E.SGLANG, E.TRTLLM]
    assert _pick(hw, _model(ModelFormat.GGUF))[0] is E.LLAMACPP
    # An HF checkpoint: llama.cpp loads GGUF only, SGLang has no path below CC 8.0, vLLM does.
    chosen, skipped = _pick(hw, _model(ModelFormat.HF))
    assert chosen is E.VLLM
    assert any(s.startswith("llamacpp: serves GGUF") for s in skipped)
    refusal = device_refusal(E.SGLANG, device_of(hw), CheckpointFormat.UNQUANTIZED)
    assert refusal is not None and "CUDA CC >= 8.0" in refusal and SGLANG_MATRIX in refusal


def test_a_checkpoint_whose_kernels_need_a_newer_gpu_is_refused_on_a_v100():
    hw = recorded_inventory("tesla_v100_sxm2_16gb")
    awq = _model(ModelFormat.HF, AWQ)
    why = device_refusal(E.VLLM, device_of(hw), checkpoint_format_of(awq))
    assert why is not None and "vllm runs awq checkpoints on" in why and "not compute " \
        "capability 7.0" in why
    assert device_refusal(E.VLLM, device_of(recorded_inventory("tesla_t4_shared")),
                          CheckpointFormat.AWQ) is None  # awq's own kernels cover CC 7.5
    with pytest.raises(EngineUnavailableError, match="no usable engine"):
        _pick(hw, awq)


def test_a_current_gpu_keeps_the_workload_defaults():
    hw = recorded_inventory("h100_sxm_8x")
    assert [r.engine for r in route(hw, _model(ModelFormat.HF), 4)][:2] == [E.VLLM, E.SGLANG]
    assert _pick(hw, _model(ModelFormat.HF))[0] is E.VLLM


def test_an_amd_gpu_routes_llama_cpp_first_and_no_cuda_engine(tmp_path):
    hw = _amd(tmp_path)
    d = device_of(hw)
    assert d.vendor == "amd" and "20.0 GiB VRAM" in d.label()
    routes = route(hw, _model(ModelFormat.GGUF), 1)
    assert routes[0].engine is E.LLAMACPP and "with a Vulkan or ROCm/HIP build" in routes[0].reason
    assert _pick(hw, _model(ModelFormat.GGUF), 1)[0] is E.LLAMACPP
    # Before: an AMD GPU counted as no GPU. Now vLLM's CPU build is not chosen beside it for
    # an HF checkpoint: nothing here serves it, and the paragraph says why for each engine.
    with pytest.raises(EngineUnavailableError) as err:
        _pick(hw, _model(ModelFormat.HF), 1)
    assert "serves GGUF" in str(err.value) and "CUDA or CPU builds" in str(err.value)


def test_which_engines_serve_an_amd_gpu_is_the_adapters_data(tmp_path, monkeypatch):
    """An adapter that lists a ROCm build for AMD GPUs is no longer refused there, and the
    compatibility route names it beside llama.cpp: nothing in routing names an engine."""
    from dataclasses import replace

    from infopt.engines import ENGINES
    from infopt.engines.routing import device_refusal
    from infopt.specs.checkpoint import CheckpointFormat

    hw = _amd(tmp_path)
    d = device_of(hw)
    assert device_refusal(E.VLLM, d, CheckpointFormat.UNQUANTIZED) is not None
    monkeypatch.setitem(ENGINES, E.VLLM, replace(ENGINES[E.VLLM], gpu_builds=(
        ("nvidia", "CUDA"), ("amd", "ROCm"))))
    assert device_refusal(E.VLLM, d, CheckpointFormat.UNQUANTIZED) is None
    routes = route(hw, _model(ModelFormat.GGUF), 1)
    assert "vLLM with a ROCm build" in routes[0].reason
