"""Cost model: hand-worked arithmetic (written out beside each assertion) and the reference
document's worked example."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.allocation import EngineKnobs, round_to_blocks
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.kv import kv_bytes_per_token_per_gpu, state_bytes_per_sequence_per_gpu
from infopt.costmodel.roofline import ceiling_ratio, decode_row, step_floor
from infopt.costmodel.weights import BF16, expected_experts_touched, named_path, weights_bytes
from infopt.engines.support import kv_options
from infopt.model.classify import classify_config
from infopt.specs.base import InputError
from infopt.specs.fit import Bound, DeviceBudget, Envelope
from tests.fixture_data import MODEL_CONFIGS

GIB = 2**30


def _model(name: str, **kw):
    cfg = json.loads((MODEL_CONFIGS / f"{name}.json").read_text())
    hqc = MODEL_CONFIGS / f"{name}.hf_quant_config.json"
    return classify_config(cfg, hf_quant_config=json.loads(hqc.read_text()) if hqc.exists()
                           else None, model=name, **kw)


def test_reference_worked_example_55_161_192():
    # hardware-throughput-ceilings.md: BW 1 TB/s, 100 TFLOP/s, 32 GFLOP/step (0.32 ms).
    for gb, expected in ((18.2, 55), (6.2, 161), (5.2, 192)):
        t_mem, t_comp, _, t_step, bound = step_floor(gb * 1e9, 32e9, 0.0, 1e12, 100e12, None)
        assert t_comp == pytest.approx(0.32e-3)
        assert t_mem == pytest.approx(gb * 1e-3)  # 18.2 GB / 1 TB/s = 18.2 ms
        assert bound is Bound.MEMORY
        assert round(1 / t_step) == expected  # 1 / 18.2 ms = 54.9 -> 55 tokens/s


def test_ratio_is_never_clamped():
    # The document's example: 120 tok/s on a 192 tok/s envelope = 62%; above 1 is flagged.
    row = decode_row(_model("meta-llama__Llama-3.1-8B-Instruct"), BF16, "auto", 1, 1024,
                     DeviceBudget(name="x", memory_bytes=80 * GIB, bandwidth_bytes_per_s=1e12,
                                  dense_flops_per_s={"bf16": 1e14}, source="t"),
                     Envelope.THEORETICAL)
    over = ceiling_ratio("out tok/s", row.tokens_per_s * 1.5, row)
    assert over.ratio == pytest.approx(1.5) and over.flagged
    under = ceiling_ratio("out tok/s", row.tokens_per_s * 0.62, row)
    assert under.ratio == pytest.approx(0.62) and not under.flagged


def test_llama31_8b_kv_per_token_by_hand():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    # 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes = 131,072 B/token.
    assert kv_bytes_per_token_per_gpu(m, "bf16") == 131_072
    assert kv_bytes_per_token_per_gpu(m, "fp8") == 65_536
    # TP=2: each rank holds 4 of the 8 KV heads -> half. TP=16 > 8 heads: 1 head per rank.
    assert kv_bytes_per_token_per_gpu(m, "bf16", tp=2) == 65_536
    assert kv_bytes_per_token_per_gpu(m, "bf16", tp=16) == 131_072 / 8
    # PP=2: 16 of 32 layers per stage.
    assert kv_bytes_per_token_per_gpu(m, "bf16", pp=2) == 65_536


def test_deepseek_v3_mla_latent_is_replicated_across_tp():
    m = _model("deepseek-ai__DeepSeek-V3")
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes = 70,272 B/token; not split by TP.
    assert kv_bytes_per_token_per_gpu(m, "bf16") == 61 * 576 * 2
    assert kv_bytes_per_token_per_gpu(m, "bf16", tp=8) == 61 * 576 * 2


def test_gpt_oss_sliding_layers_stop_at_the_window():
    m = _model("openai__gpt-oss-20b")
    # 24 layers alternate: 12 full + 12 sliding (window 128); 8 KV heads x 64 dims.
    per_layer = 8 * 64 * 2 * 2  # 2,048 B/token/layer at 16-bit
    assert kv_bytes_per_token_per_gpu(m, "bf16") == 12 * per_layer
    # At 100,000 tokens the sliding layers hold only 128 tokens each.
    assert state_bytes_per_sequence_per_gpu(m, "bf16", 100_000) == 12 * per_layer * 128


def test_weights_bytes_bf16_and_int4_by_hand():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    # BF16: 8,030,261,248 params x 2 bytes.
    assert weights_bytes(m, BF16) == 8_030_261_248 * 2
    # W4A16 g128 with zeros: linear layers at 4 + 16/128 + 4/128 = 4.15625 bits; the
    # 128256 x 4096 embedding and untied lm_head, and norms stay 16-bit.
    p = m.params
    linear = p.attention + p.dense_mlp
    other = p.embedding + p.lm_head + p.norms
    int4 = named_path("int4", "9.0")
    assert int4.bits_per_weight == pytest.approx(4.15625)
    assert weights_bytes(m, int4) == int(linear * 4.15625 / 8 + other * 2)


def test_expected_expert_union():
    # One token touches exactly top_k; a huge batch touches all; 128 experts, k=8, B=16:
    # 128 x (1 - (120/128)^16) = 128 x (1 - 0.3561) = 82.4
    assert expected_experts_touched(128, 8, 1) == pytest.approx(8)
    assert expected_experts_touched(128, 8, 16) == pytest.approx(128 * (1 - (120 / 128) ** 16))
    assert expected_experts_touched(128, 8, 10_000) == pytest.approx(128)


def test_block_rounding():
    # vLLM CPU: 1 GiB / 23,040 B = 46,603.4 tokens -> 364 blocks of 128 -> 46,592.
    assert round_to_blocks(GIB, 23_040, 128) == 46_592
    assert round_to_blocks(-5, 23_040, 16) == 0


H100 = DeviceBudget(name="H100 SXM5 80GB", memory_bytes=81_559 * 2**20,
                    bandwidth_bytes_per_s=3.35e12, dense_flops_per_s={"bf16": 989.5e12},
                    compute_capability="9.0", source="test")


def _fit(model, **kw):
    base = dict(model=model, device=H100, gpu_count=1, engine="vllm", context_tokens=8192,
                concurrency=1, kv_dtype="auto", weight_path=BF16)
    base.update(kw)
    base.setdefault("kv", kv_options(base["engine"], None))
    return plan_fit(FitRequest(**base))


def test_vllm_fit_by_hand_llama_8b_on_h100():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    fit = _fit(m, knobs=EngineKnobs(enforce_eager=True, max_num_batched_tokens=8192,
                                    max_num_seqs=256))
    budget = int(81_559 * 2**20 * 0.9)  # 76,971,278,745 B at gpu_memory_utilization 0.9
    assert fit.budget_bytes_per_gpu == budget
    kv_budget = budget - 16_060_522_496 - fit.runtime_overhead_bytes_per_gpu
    assert fit.kv_budget_bytes_per_gpu == kv_budget
    # whole blocks of 16 tokens at 131,072 B/token
    assert fit.kv_capacity_tokens == kv_budget // (131_072 * 16) * 16
    assert fit.fits and fit.gap_bytes == 0


def test_70b_bf16_does_not_fit_one_h100_and_offers_alternatives():
    m = _model("nvidia__Llama-3.1-70B-Instruct-FP8")
    fit = _fit(m, context_tokens=131_072, concurrency=8)
    assert not fit.fits and fit.gap_bytes > 0
    text = " ".join(fit.alternatives)
    assert "tensor parallel tp=8" in text and "smaller weight format" in text
    # The weights alone exceed the GPU: no KV, concurrency or context change is offered.
    assert "8-bit KV cache" not in text and "shorter context" not in text


def test_a_data_parallel_layout_that_does_not_fit_offers_wider_replicas_without_failing():
    """Regression (found on the simulated 8-GPU host): Mixtral's DP=8 replicas of TP=1 do not
    fit; the TP alternative must count every replica's GPUs (tp x pp x dp), not tp x pp, or
    the fit of the alternative refuses its own layout."""
    m = _model("mistralai__Mixtral-8x7B-v0.1")
    fit = _fit(m, gpu_count=8, dp=8, context_tokens=32_768, concurrency=2)
    assert not fit.fits
    assert any(a.startswith("tensor parallel tp=2 on 16 GPUs") for a in fit.alternatives), \
        fit.alternatives


def test_on_a_cpu_the_host_must_hold_the_weights_beside_a_fixed_kv_space():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    host = DeviceBudget(name="CPU", memory_bytes=24 * GIB, bandwidth_bytes_per_s=50e9,
                        dense_flops_per_s={}, source="t")

    def fit(weights_gib):
        return plan_fit(FitRequest(
            model=m, device=host, gpu_count=1, engine="vllm", context_tokens=8192,
            concurrency=1, kv_dtype="auto", weight_path=BF16,
            knobs=EngineKnobs(device_is_cpu=True), exact_weights_bytes=weights_gib * GIB,
            kv=kv_options("vllm", frozenset())))

    assert fit(15).fits  # 15 GiB of weights + the 4 GiB KV space in 24 GiB
    big = fit(30)  # the KV space alone would hold the context, the host cannot hold both
    assert not big.fits and big.gap_bytes == (30 + 4 - 24) * GIB
    assert any("must hold the weights" in a for a in big.assumptions)
    assert any("smaller weight format" in a for a in big.alternatives)


def test_impossible_inputs_are_clear_errors():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    with pytest.raises(InputError, match="native context"):
        _fit(m, context_tokens=200_000)
    with pytest.raises(InputError, match="at least 1"):
        _fit(m, gpu_count=0)
    with pytest.raises(InputError, match="needs that many GPUs"):
        _fit(m, tp=4)
    with pytest.raises(InputError, match="does not divide"):
        _fit(m, tp=3, gpu_count=3)
    with pytest.raises(InputError, match="unknown KV cache dtype"):
        _fit(m, kv_dtype="int3")
    with pytest.raises(InputError, match="unknown --weight-dtype"):
        named_path("fp7", "9.0")


CONFIG_NAMES = sorted(p.stem for p in MODEL_CONFIGS.glob("*.json")
                      if not p.stem.endswith(".hf_quant_config"))


@pytest.mark.parametrize("name", CONFIG_NAMES)
@pytest.mark.parametrize("gpu", ["H100 SXM", "A100 80GB SXM", "L4", "B200", "RTX 4090"])
def test_plan_answers_for_every_config_on_several_gpus(name, gpu):
    from infopt.costmodel.device import device_from_catalog
    from infopt.costmodel.plan import make_plan, with_path
    from infopt.hardware.catalog import lookup_gpu

    m = _model(name)
    dev = device_from_catalog(lookup_gpu(gpu))
    heads = m.attention.num_query_heads
    tp = 8 if heads % 8 == 0 else 4
    r = with_path(FitRequest(model=m, device=dev, gpu_count=8, engine="vllm",
                             context_tokens=m.native_context_tokens, concurrency=4,
                             kv_dtype="auto", weight_path=BF16, tp=tp,
                             kv=kv_options("vllm", None)), None)
    plan = make_plan(r)
    d = plan.model_dump(mode="json")
    for key in ("weights_bytes_per_gpu", "kv_bytes_per_token_per_gpu", "kv_capacity_tokens",
                "max_concurrency_at_context", "fits", "gap_bytes", "alternatives",
                "assumptions"):
        assert key in d
    assert plan.weights_bytes_per_gpu > 0 and plan.kv_bytes_per_token_per_gpu > 0
    assert plan.fits == (plan.gap_bytes == 0)
    if not plan.fits:
        assert plan.alternatives  # always something to put to the user
    decode = [row for row in plan.ceilings.rows if row.phase == "decode"]
    assert decode and all(row.tokens_per_s > 0 for row in decode)
    # The checkpoint's own quantization decides its row: NVFP4 (W4A4: activations quantized
    # too) runs FP4 math only on B200; gpt-oss MXFP4 declares weight-only, so W4A16 anywhere.
    q = m.quantization
    if q and "e2m1" in (q.format or "").lower() and q.activations_quantized:
        assert ("W4A4" in plan.weight_path) == (gpu == "B200")


def test_speculative_decoding_counts_verified_tokens_not_drafts():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    one = decode_row(m, BF16, "auto", 1, 4096, H100, Envelope.THEORETICAL)
    two = decode_row(m, BF16, "auto", 1, 4096, H100, Envelope.THEORETICAL, tokens_per_step=2.0)
    # Memory-bound at batch 1: the step reads the same weights and KV (+1 more KV write), so
    # 2 verified tokens per step nearly double the ceiling; FLOPs double exactly.
    assert two.flops_per_step == pytest.approx(2 * one.flops_per_step)
    assert two.bytes_per_step == pytest.approx(one.bytes_per_step + 131_072)
    assert 1.95 < two.tokens_per_s / one.tokens_per_s <= 2.0


def test_tp_adds_allreduce_time_and_splits_weights():
    m = _model("meta-llama__Llama-3.1-8B-Instruct")
    nv = H100.model_copy(update={"interconnect_bytes_per_s": 450e9})
    one = decode_row(m, BF16, "auto", 8, 4096, nv, Envelope.THEORETICAL)
    four = decode_row(m, BF16, "auto", 8, 4096, nv, Envelope.THEORETICAL, tp=4)
    # 2 all-reduces x 32 layers x 8 tokens x 4096 x 2 bytes x 2 (tp-1)/tp = 3,145,728 bytes.
    assert four.comm_bytes_per_step == pytest.approx(2 * 32 * 8 * 4096 * 2 * 2 * 3 / 4)
    assert four.t_comm_s == pytest.approx(four.comm_bytes_per_step / 450e9)
    assert four.bytes_per_step < one.bytes_per_step / 3  # weights and KV heads split 4 ways
