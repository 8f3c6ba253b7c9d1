"""The fit's KV estimate against the engine's own startup log (issue 32, item 11), on the real
logs this machine's engines printed (tests/fixtures/local_logs: vLLM 0.32 CPU and llama-server
0.3.36 at -lv 4, SmolLM2-135M) and the fit of the same configurations."""

from __future__ import annotations

import pytest

from infopt.costmodel.kv_check import KV_STOP_ERROR, kv_check
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.vllm import adapter as vllm
from infopt.model.classify import classify_config
from infopt.specs.fit import KvObservation
from infopt.specs.hardware import HardwareInventory, HostInfo
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import LlamaCppConfig, VllmConfig
from infopt.tuning.candidates import fit_config
from tests.fixture_data import FIXTURES

LOGS = FIXTURES / "local_logs"
# SmolLM2-135M-Instruct's config.json (the bundled model): 30 layers, 3 KV heads of 64.
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
           "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
           "num_key_value_heads": 3, "max_position_embeddings": 8192, "vocab_size": 49152,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
           "rope_theta": 100000}


def _host() -> HardwareInventory:
    return HardwareInventory(
        host=HostInfo(cpu_model="test", architecture="x86_64", logical_cpus=2, physical_cores=2,
                      usable_cpus=2, cgroup_cpu_limit=None, isa_features=[],
                      ram_total_bytes=24 * 2**30, ram_available_bytes=24 * 2**30, os="Linux",
                      kernel="6"), gpus=[], gpu_probe="none")


def _model(fmt: ModelFormat, file_bytes: int) -> ModelProfile:
    return ModelProfile(path="/m", format=fmt, file_bytes=file_bytes, source="test",
                        inspection=classify_config(SMOLLM2, model="smollm2"))


def test_vllms_logged_kv_tokens_match_the_fit():
    obs = vllm.kv_from_log((LOGS / "vllm032_cpu_eager_startup.log").read_text())
    cfg = VllmConfig(model_path="/m", max_model_len=4096, cpu_kvcache_space_gib=1)
    check = kv_check(obs, fit_config(_model(ModelFormat.HF, 270_000_000), _host(), cfg, 4))
    assert check.unit == "tokens" and check.observed == 46_592
    assert abs(check.error) < 0.01 and not check.stops_ladder


def test_llama_cpps_logged_kv_buffer_matches_the_fit():
    obs = llamacpp.kv_from_log((LOGS / "llamacpp0336_cpu_lv4_startup.log").read_text())
    cfg = LlamaCppConfig(model_path="/m.gguf", parallel_slots=4, ctx_per_slot_tokens=2048)
    check = kv_check(obs, fit_config(_model(ModelFormat.GGUF, 98_000_000), _host(), cfg, 4))
    assert check.unit == "bytes" and check.observed == 180 * 2**20  # 8,192 cells x 23,040 B
    assert abs(check.error) < 0.01 and not check.stops_ladder


@pytest.mark.parametrize(("observed", "stops"), [(46_592, False), (30_000, True),
                                                 (70_000, True)])
def test_an_error_beyond_the_threshold_stops_the_ladder(observed, stops):
    cfg = VllmConfig(model_path="/m", max_model_len=4096, cpu_kvcache_space_gib=1)
    fit = fit_config(_model(ModelFormat.HF, 270_000_000), _host(), cfg, 4)
    check = kv_check(KvObservation(tokens=observed, line="x"), fit)
    assert check.stops_ladder is stops and (abs(check.error) > KV_STOP_ERROR) is stops


def test_nothing_to_compare_is_no_check():
    cfg = VllmConfig(model_path="/m", max_model_len=4096, cpu_kvcache_space_gib=1)
    fit = fit_config(_model(ModelFormat.HF, 270_000_000), _host(), cfg, 4)
    assert kv_check(None, fit) is None
    assert kv_check(KvObservation(tokens=1, line="x"), None) is None
