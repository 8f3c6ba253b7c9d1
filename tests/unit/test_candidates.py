"""Fit-based pruning of candidate configurations (the flow's pruning by fit, infopt.tuning.plan_run.fit_of)."""

from __future__ import annotations

import json

from infopt.model.classify import classify_config
from infopt.specs.hardware import HardwareInventory, HostInfo
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import LlamaCppConfig
from infopt.tuning.candidates import fit_config, run_device
from tests.fixture_data import MODEL_CONFIGS

GIB = 2**30


def _host(ram_bytes: int) -> HardwareInventory:
    return HardwareInventory(
        host=HostInfo(cpu_model="test", architecture="x86_64", logical_cpus=2, physical_cores=2,
                      usable_cpus=2, cgroup_cpu_limit=None, isa_features=[],
                      ram_total_bytes=ram_bytes, ram_available_bytes=ram_bytes, os="Linux",
                      kernel="6"), gpus=[], gpu_probe="none")


def _llama8b() -> ModelProfile:
    cfg = json.loads((MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    insp = classify_config(cfg, model="llama")
    return ModelProfile(path="/m.gguf", format=ModelFormat.GGUF, file_bytes=int(4.9 * GIB),
                        inspection=insp, source="test")


def test_slots_that_cannot_hold_full_context_are_pruned():
    m, hw = _llama8b(), _host(32 * GIB)
    device, is_cpu = run_device(hw)
    assert is_cpu and device.memory_bytes == 32 * GIB
    # 131,072 B/token x 131,072 tokens = 16 GiB per slot at f16.
    one = fit_config(m, hw, LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=131_072,
                                           parallel_slots=1), 4)
    four = fit_config(m, hw, LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=131_072,
                                            parallel_slots=4), 4)
    assert one.fits and one.required_kv_bytes_per_gpu == 16 * GIB
    # 4 slots need 64 GiB of KV on a 32 GiB host: pruned, with options that keep the context.
    assert not four.fits and four.gap_bytes > 30 * GIB
    assert any("q8_0" in a or "FP8" in a or "concurrency" in a for a in four.alternatives)


def test_a_configuration_needing_more_gpus_than_the_host_has_is_refused_not_sized():
    """tp x pp beyond the host's 8 GPUs is an error naming the count, not a fit sized as if
    16 GPUs were there."""
    import pytest

    from infopt.specs.base import InputError
    from infopt.specs.serving import VllmConfig
    from tests.fake_nvml import recorded_inventory

    hw = recorded_inventory("h100_sxm_8x")
    m = _llama8b().model_copy(update={"path": "/m", "format": ModelFormat.HF,
                                      "file_bytes": 16 * GIB})
    tp8 = VllmConfig(model_path="/m", max_model_len=131_072, tensor_parallel_size=8)
    assert fit_config(m, hw, tp8, 8).fits
    with pytest.raises(InputError, match="needs that many GPUs; only 8 given"):
        fit_config(m, hw, tp8.model_copy(update={"pipeline_parallel_size": 2}), 8)
