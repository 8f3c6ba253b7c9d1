"""The cost model's KV prediction against what real engines log: llama-server's KV buffer size
and vLLM (CPU)'s KV capacity in tokens, over several configurations. Must agree within 2%."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.costmodel.allocation import EngineKnobs, llamacpp_kv_cells
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.kv import kv_bytes_per_token_per_gpu
from infopt.costmodel.weights import BF16
from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.support import kv_options, unsupported_kv_dtype
from infopt.engines.vllm import adapter as vllm
from infopt.hardware.host import probe_host
from infopt.model.local import inspect_local
from infopt.specs.base import InputError
from infopt.specs.diagnosis import FailureCategory
from infopt.specs.fit import DeviceBudget
from infopt.specs.serving import LlamaCppConfig, VllmConfig
from infopt.troubleshoot.diagnose import diagnose_file
from infopt.tuning.control import runnable_candidates

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

HOST = DeviceBudget(name="this host", memory_bytes=16 * 2**30, bandwidth_bytes_per_s=None,
                    dense_flops_per_s={}, source="test")


@pytest.mark.parametrize("ctx_per_slot,slots,cache_type,flash", [
    (2048, 4, "f16", "auto"),   # the notes' -c 8192 --parallel 4: 180 MiB
    (4000, 1, "q8_0", "on"),    # quantized V cache needs flash attention
    (8192, 2, "q4_0", "on"),
    (1024, 3, "f32", "auto"),
])
def test_llamacpp_kv_buffer_matches_prediction(llama_server, gguf_model, tmp_path,
                                               ctx_per_slot, slots, cache_type, flash):
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=ctx_per_slot,
                         parallel_slots=slots, cache_type_k=cache_type, cache_type_v=cache_type,
                         flash_attn=flash, log_verbosity=4)
    running = process.start(llamacpp.ADAPTER, cfg, str(llama_server), tmp_path / "e.log", 10**8)
    try:
        observed = llamacpp.kv_from_log(Path(running.log_path).read_text())
    finally:
        process.stop(running.pid)
    assert observed is not None, "llama-server logged no KV buffer size"
    m = inspect_local(str(gguf_model))
    # n_ctx = slots x ctx per slot, padded to 256 cells; 30 layers x 3 KV heads x 64 x 2 (K,V)
    # x element bytes per cell.
    n_ctx = llamacpp_kv_cells(ctx_per_slot * slots)
    predicted = kv_bytes_per_token_per_gpu(m, cache_type) * n_ctx
    assert abs(observed.bytes - predicted) / predicted <= 0.02, (observed.line, predicted)
    # And the fit model allocates exactly that for `slots` sequences at `ctx_per_slot`.
    fit = plan_fit(FitRequest(model=m, device=HOST, gpu_count=1, engine="llamacpp",
                              context_tokens=ctx_per_slot, concurrency=slots,
                              kv_dtype=cache_type, weight_path=BF16,
                              knobs=EngineKnobs(device_is_cpu=True),
                              kv=kv_options("llamacpp", [])))
    assert fit.kv_capacity_tokens == n_ctx and fit.required_kv_bytes_per_gpu == int(predicted)


def _vllm_prediction(hf_model, space_gib: float, kv_dtype: str,
                     isa: list[str] | None = None) -> int:
    m = inspect_local(str(hf_model))
    fit = plan_fit(FitRequest(
        model=m, device=HOST, gpu_count=1,
        engine="vllm", context_tokens=4096, concurrency=1,
        kv_dtype=kv_dtype, weight_path=BF16,
        knobs=EngineKnobs(device_is_cpu=True, cpu_kvcache_space_bytes=int(space_gib * 2**30)),
        kv=kv_options("vllm", isa)))
    return fit.kv_capacity_tokens


def test_vllm_cpu_kv_tokens_match_prediction_bf16(vllm_server, hf_model):
    observed = vllm.kv_from_log(Path(vllm_server.log_path).read_text())
    assert observed is not None
    predicted = _vllm_prediction(hf_model, 1, "auto")
    # 1 GiB / 23,040 B = 46,603 tokens -> 364 whole blocks of 128 = 46,592 (logged: 46,592).
    assert abs(observed.tokens - predicted) / predicted <= 0.02, observed.line
    assert predicted == 46_592


@pytest.mark.e2e  # a vLLM start (or the failed starts fixture where FP8 KV is refused)
def test_vllm_cpu_fp8_kv_on_this_cpu(vllm_python, hf_model, tmp_path, request):
    """Where this CPU runs FP8 KV (AMX or AVX-512): vLLM's KV capacity matches the prediction.
    Where it does not (AVX2 only): the optimizer says so before launching, and vLLM itself
    refuses with the message the known-failure catalog recognises. Either way the support
    table is checked against the real engine; the other branch is tested on a recorded
    /proc/cpuinfo in tests/unit/test_cpu_support.py."""
    isa = probe_host().isa_features
    refused = unsupported_kv_dtype("vllm", "fp8", isa)
    cfg = VllmConfig(model_path=str(hf_model), served_model_name="smollm2", max_model_len=2048,
                     enforce_eager=True, cpu_kvcache_space_gib=2, kv_cache_dtype="fp8")
    if refused:
        assert runnable_candidates({"fp8": cfg}, isa) == ({}, [
            f"kv_cache_dtype=fp8: not on this CPU: {refused[0].reason}"])
        with pytest.raises(InputError, match="--kv-dtype auto"):
            _vllm_prediction(hf_model, 2, "fp8", isa)
        # vLLM's own refusal, from the failing starts launched together (conftest.py).
        d = diagnose_file(request.getfixturevalue("vllm_failed_starts")["fp8_kv"], "vllm")
        assert "FP8 KV cache on CPU requires x86 with AVX-512 or AMX" in d.root_error
        assert d.category is FailureCategory.UNSUPPORTED_HARDWARE
        assert d.known_failure_ids == ["vllm-cpu-fp8-kv-needs-avx512-or-amx"]
        return
    running = process.start(vllm.ADAPTER, cfg, str(vllm_python), tmp_path / "v.log", 3 * 10**8)
    try:
        observed = vllm.kv_from_log(Path(running.log_path).read_text())
    finally:
        process.stop(running.pid)
    predicted = _vllm_prediction(hf_model, 2, "fp8", isa)
    # 2 GiB / 11,520 B (1-byte elements) = 186,413 -> 1,456 blocks x 128 = 186,368 tokens.
    assert observed is not None and abs(observed.tokens - predicted) / predicted <= 0.02, \
        observed
    assert predicted == 186_368
