"""Llama 4 (chunked local attention on its RoPE layers, interleaved MoE with a shared expert) and
DeepSeek-V3.2 (MLA plus a lightning indexer: sparse attention over index_topk tokens), refused
before issue 32 item 12 and now sized. Real config.json files from tests/fixtures/model_configs
(SOURCES.txt); every figure written out by hand from the modeling code it cites."""

from __future__ import annotations

import copy
import json

import pytest

from infopt.costmodel.kv import (
    decode_read_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
    sequence_bytes_per_gpu,
)
from infopt.costmodel.roofline import decode_row, prefill_row
from infopt.costmodel.weights import (
    BF16,
    decode_weight_traffic_bytes,
    executed_linear_params,
)
from infopt.model.classify import classify_config
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget, Envelope
from infopt.specs.inspection import LayerKind, MlpKind
from tests.fixture_data import MODEL_CONFIGS, require

CONFIGS = require(MODEL_CONFIGS)
H200 = DeviceBudget(name="H200", memory_bytes=141 * 10**9, bandwidth_bytes_per_s=4.8e12,
                    dense_flops_per_s={"bf16": 989e12, "fp8": 1979e12},
                    compute_capability="9.0", source="test")
CHUNKED, FULL = LayerKind.CHUNKED_ATTENTION, LayerKind.FULL_ATTENTION
INDEXED = LayerKind.INDEXED_ATTENTION
SCOUT, MAVERICK = ("meta-llama__Llama-4-Scout-17B-16E-Instruct",
                   "meta-llama__Llama-4-Maverick-17B-128E-Instruct")
V3, V32 = "deepseek-ai__DeepSeek-V3", "deepseek-ai__DeepSeek-V3.2"


def _load(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


# --- Llama 4 ------------------------------------------------------------------------------------

# Scout and Maverick share the attention: 48 layers, 40 query / 8 KV heads x 128, and (no
# no_rope_layers in the file) Llama4TextConfig's rule: every 4th layer (3, 7, ..., 47) is NoPE and
# attends to the whole context, the other 36 use RoPE within 8192-token chunks.
KV_PER_LAYER = 2 * 8 * 128 * 2  # K and V x 8 heads x 128 x 2 bytes = 4,096 B per token


def test_llama4_scout_layers_chunk_and_kv_by_hand():
    m = classify_config(_load(SCOUT))
    assert m.model_type == "llama4_text" and m.architecture == "Llama4ForConditionalGeneration"
    assert m.layer_kinds == {CHUNKED: 36, FULL: 12}
    assert m.attention_chunk_tokens == 8192 and m.sliding_window_tokens is None
    kv = m.kv_cache
    assert (kv.full_attention_layers, kv.sliding_attention_layers) == (12, 36)
    assert kv.bytes_per_token_16bit == 12 * KV_PER_LAYER == 49_152
    assert kv.sliding_bytes_per_token_16bit == 36 * KV_PER_LAYER == 147_456
    assert kv.sliding_window_tokens == 8192 and kv.indexer_bytes_per_token == 0
    # At 8k every layer holds the whole context: (49,152 + 147,456) x 8,192 = 1,610,612,736 B,
    # 196,608 B per token. At 128k the 12 NoPE layers hold 131,072 tokens and the 36 chunked
    # ones at most one 8,192-token chunk: 49,152 x 131,072 + 147,456 x 8,192
    # = 6,442,450,944 + 1,207,959,552 = 7,650,410,496 B (7.65 GB), 58,368 B per token.
    assert kv.bytes_per_sequence_16bit(8192) == 196_608 * 8192 == 1_610_612_736
    assert kv.bytes_per_sequence_16bit(131072) == 7_650_410_496 == 58_368 * 131072
    # The cost model reads the same split: growing bytes per token, the chunk as fixed state.
    assert kv_bytes_per_token_per_gpu(m, "auto") == 49_152
    assert sequence_bytes_per_gpu(m, "auto", 131072) == 7_650_410_496
    assert sequence_bytes_per_gpu(m, "fp8", 131072) == 7_650_410_496 / 2
    # TP 8: one KV head per rank, an eighth of both groups.
    assert sequence_bytes_per_gpu(m, "auto", 131072, tp=8) == 7_650_410_496 / 8
    assert any("36 chunked local-attention layers" in n and "8192" in n for n in m.notes)


def test_llama4_scout_moe_and_params_by_hand():
    m = classify_config(_load(SCOUT))
    H, V, L = 5120, 202048, 48  # noqa: N806 - the usual symbols
    attn = H * 40 * 128 + 2 * H * 8 * 128 + 40 * 128 * H  # q, k, v, o; the q/k norm is weightless
    expert = 3 * H * 8192  # gate, up, down at intermediate_size
    # Every layer MoE (interleave_moe_layer_step 1): 16 experts, top-1, one shared expert of the
    # same width (Llama4TextMoe.shared_expert), a bias-free router H -> 16.
    moe = 16 * expert + expert + H * 16
    total = 2 * V * H + L * (attn + moe + 2 * H) + H  # untied embedding and head
    assert m.mlp_kinds == {MlpKind.MOE: 48}
    got = m.moe
    assert (got.num_experts, got.experts_per_token, got.num_shared_experts, got.num_moe_layers,
            got.expert_intermediate_size, got.shared_expert_intermediate_size) == (
        16, 1, 1, 48, 8192, 8192)
    assert m.params_total == total == 107_769_861_120
    # Active: all but 15 unselected experts per layer, and the embedding table (one row read).
    assert m.params_active_per_token == total - L * 15 * expert - V * H == 16_138_408_960


def test_llama4_maverick_interleaves_dense_and_moe_layers():
    m = classify_config(_load(MAVERICK))
    H = 5120  # noqa: N806
    # interleave_moe_layer_step 2: layers 1, 3, ..., 47 are MoE (128 experts + a shared one);
    # 0, 2, ..., 46 a dense MLP of intermediate_size_mlp 16384, twice the experts' 8192.
    assert m.mlp_kinds == {MlpKind.DENSE: 24, MlpKind.MOE: 24}
    assert m.params.dense_mlp == 24 * 3 * H * 16384
    assert m.params.routed_experts == 24 * 128 * 3 * H * 8192
    assert m.params.shared_experts == 24 * 3 * H * 8192
    assert (m.moe.num_experts, m.moe.experts_per_token, m.moe.num_dense_layers) == (128, 1, 24)
    assert m.layer_kinds == {CHUNKED: 36, FULL: 12}


def test_llama4_explicit_layer_lists_win():
    cfg = _load(SCOUT)
    text = cfg["text_config"]
    text["moe_layers"] = [0, 5]  # Llama4TextConfig: moe_layers overrides the interleave step
    text["no_rope_layers"] = [0] * 8 + [1] * 40  # 8 NoPE (global) layers, 40 chunked
    m = classify_config(cfg)
    assert m.mlp_kinds == {MlpKind.MOE: 2, MlpKind.DENSE: 46}
    assert m.layer_kinds == {FULL: 8, CHUNKED: 40}
    text["attention_chunk_size"] = None  # no chunking: every layer attends to the whole context
    m = classify_config(cfg)
    assert m.layer_kinds == {FULL: 48} and m.attention_chunk_tokens is None
    assert m.kv_cache.bytes_per_token_16bit == 48 * KV_PER_LAYER


@pytest.mark.parametrize("change, match", [
    ({"no_rope_layers": [1, 0]}, "no_rope_layers must list a 0 .* num_hidden_layers=48"),
    ({"layer_types": ["chunked_attention"] * 48, "attention_chunk_size": None},
     "chunked_attention but attention_chunk_size is missing"),
    ({"layer_types": ["chunked_attention"] * 47 + ["sliding_attention"], "sliding_window": 4096},
     "both sliding_attention and chunked_attention"),
    ({"attention_chunk_size": "8192"}, "attention_chunk_size must be a whole number"),
])
def test_llama4_bad_layouts_are_clear_errors(change, match):
    cfg = _load(SCOUT)
    cfg["text_config"].update(change)
    with pytest.raises(InputError, match=match):
        classify_config(cfg)


# --- DeepSeek-V3.2 ------------------------------------------------------------------------------

# V3's MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per token per layer:
# 1,152 B at 16 bits. V3.2 adds the lightning indexer's key, index_head_dim 128, cached in FP8
# with one fp32 scale per 128 elements whatever the KV dtype: 128 + 4 = 132 B (vLLM
# deepseek_v2.py Indexer; SGLang NSATokenToKVPool; DeepSeek's inference/model.py k_cache +
# k_scale_cache).
LATENT_16BIT, INDEXER = (512 + 64) * 2, 128 + 128 // 128 * 4
# wq_b (q_lora_rank 1536 -> 64 heads x 128), wk (7168 -> 128), k_norm (weight + bias),
# weights_proj (7168 -> 64): modeling_deepseek_v32.py DeepseekV32Indexer.
INDEXER_PARAMS = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64


def test_deepseek_v32_layers_indexer_and_kv_by_hand():
    m = classify_config(_load(V32))
    assert m.model_type == "deepseek_v32" and m.architecture == "DeepseekV32ForCausalLM"
    assert m.layer_kinds == {INDEXED: 61}
    a = m.attention
    assert (a.kv_lora_rank, a.qk_rope_head_dim, a.q_lora_rank) == (512, 64, 1536)
    assert (a.index_n_heads, a.index_head_dim, a.index_topk) == (64, 128, 2048)
    kv = m.kv_cache
    assert kv.full_attention_layers == 61  # every layer's cache grows with the context
    assert kv.bytes_per_token_16bit == 61 * LATENT_16BIT == 70_272  # as V3
    assert kv.indexer_bytes_per_token == 61 * INDEXER == 8_052
    # 128k context: (70,272 + 8,052) x 131,072 = 78,324 x 131,072 = 10,266,083,328 B (10.3 GB,
    # 9.56 GiB) per sequence; V3 alone would be 9,210,691,584 B.
    assert kv.bytes_per_sequence_16bit(131072) == 78_324 * 131072 == 10_266_083_328
    assert kv_bytes_per_token_per_gpu(m, "auto") == 78_324
    # FP8 KV: the latent in FlashMLA's fp8_ds_mla rows, 512 FP8 + 4 fp32 scales + 64 bf16 rope
    # = 656 B per layer (not 576); the indexer keys stay 132 B: 61 x (656 + 132) = 48,068 B.
    assert kv_bytes_per_token_per_gpu(m, "fp8") == 61 * (512 + 16 + 128 + INDEXER) == 48_068
    # TP splits neither: the latent and the indexer's keys are whole on every rank.
    assert kv_bytes_per_token_per_gpu(m, "auto", tp=8) == 78_324
    assert any("index_topk=2048" in n and "8,052 B/token" in n for n in m.notes)


def test_deepseek_v32_params_are_v3_plus_its_indexers():
    v3, v32 = classify_config(_load(V3)), classify_config(_load(V32))
    assert v32.mlp_kinds == v3.mlp_kinds == {MlpKind.DENSE: 3, MlpKind.MOE: 58}
    assert (v32.moe.num_experts, v32.moe.experts_per_token, v32.moe.num_shared_experts) == (
        256, 8, 1)
    assert INDEXER_PARAMS == 13_959_424
    assert v32.params.attention == v3.params.attention + 61 * INDEXER_PARAMS
    assert v32.params_total == v3.params_total + 61 * INDEXER_PARAMS  # 671.88B
    assert v32.params_active_per_token == v3.params_active_per_token + 61 * INDEXER_PARAMS
    assert v32.params.mtp == v3.params.mtp + INDEXER_PARAMS  # the MTP layer has one too


def test_deepseek_v32_decode_reads_topk_latents_and_every_indexer_key():
    m = classify_config(_load(V32))
    ctx = 131072
    # Per sequence per step: 2,048 attended latents x 70,272 B + all 131,072 indexer keys x
    # 8,052 B = 143,917,056 + 1,055,391,744 = 1,199,308,800 B, against V3's full
    # 131,072 x 70,272 = 9,210,691,584 B.
    reads = decode_read_bytes_per_sequence_per_gpu(m, "auto", ctx)
    assert reads == 2048 * 70_272 + ctx * 8_052 == 1_199_308_800
    v3 = classify_config(_load(V3))
    assert decode_read_bytes_per_sequence_per_gpu(v3, "auto", ctx) == ctx * 70_272
    row = decode_row(m, BF16, "auto", 4, ctx, H200, Envelope.THEORETICAL)
    weights = decode_weight_traffic_bytes(m, BF16, 4)
    assert row.bytes_per_step == pytest.approx(weights + 4 * (reads + 78_324))
    # FLOPs beside the weights' 2 x executed params: attention over 2,048 latents for 128 heads
    # (4 x 61 x 2048 x 128 x 576) and the indexer scoring 131,072 keys with 64 heads x 128
    # (2 x 64 x 128 x 61 x 131,072), per sequence.
    linear = 2 * 4 * sum(executed_linear_params(m, BF16).values())
    assert row.flops_per_step == pytest.approx(
        linear + 4 * (4 * 61 * 2048 * 128 * 576 + 2 * 64 * 128 * 61 * ctx))
    # Below top-k the sparse layer reads everything, as V3 does.
    assert decode_read_bytes_per_sequence_per_gpu(m, "auto", 1000) == 1000 * 78_324


def test_deepseek_v32_prefill_attends_at_most_topk_keys_per_query():
    m = classify_config(_load(V32))
    t, k = 32768, 2048
    row = prefill_row(m, BF16, "auto", t, H200, Envelope.THEORETICAL)
    pairs = k * t - k * k / 2  # sum over queries of min(position, 2048), not t^2 / 2
    # Attention over those pairs (QK and AV, 128 heads over the 576-wide latent), and the
    # indexer scoring every causal pair with 64 heads x 128.
    attention = 61 * (4 * pairs * 128 * 576 + 2 * 64 * 128 * t * t / 2)
    linear = 2 * t * sum(executed_linear_params(m, BF16).values())
    assert row.flops_per_step == pytest.approx(linear + attention)
    # V3 attends every causal pair: its attention term is 4 x t^2 / 2 per head.
    v3 = classify_config(_load(V3))
    v3_row = prefill_row(v3, BF16, "auto", t, H200, Envelope.THEORETICAL)
    assert v3_row.flops_per_step == pytest.approx(
        2 * t * sum(executed_linear_params(v3, BF16).values())
        + 61 * 4 * (t * t / 2) * 128 * 576)


def test_deepseek_v32_is_indexed_without_transformers_layer_types(monkeypatch):
    """A transformers without DeepseekV32Config (before 5.x) supplies no layer_types: every
    layer is still read as indexed, from the family, not silently as V3."""
    import infopt.model.classify as classify

    monkeypatch.setattr(classify, "family_defaults", lambda cfg, model_type: ({}, None))
    m = classify_config(_load(V32))
    assert m.layer_kinds == {INDEXED: 61} and m.kv_cache.indexer_bytes_per_token == 8_052
    assert m.defaults_used == {}


def test_deepseek_v32_without_its_indexer_keys_names_them():
    cfg = _load(V32)
    del cfg["index_topk"], cfg["index_head_dim"]
    with pytest.raises(InputError, match="lacks index_head_dim, index_topk"):
        classify_config(cfg)


@pytest.mark.parametrize("model_type", ["glm_moe_dsa", "qwen4_exp_text", "some_new_dsa"])
def test_indexed_layers_of_an_unread_family_are_refused(model_type):
    cfg = copy.deepcopy(_load(V32))
    cfg["model_type"] = model_type
    cfg["layer_types"] = ["indexed_attention"] * 61
    with pytest.raises(InputError, match=r"indexed \(sparse\) attention layers whose indexer "
                                         r"layout infopt does not read.*Not supported yet"):
        classify_config(cfg)


def test_inspect_text_shows_the_chunk_and_the_indexer():
    from infopt.report.model_text import render_inspection

    scout = render_inspection(classify_config(_load(SCOUT)))
    assert "chunked_attention x36, full_attention x12 (attention chunk 8192 tokens)" in scout
    assert "Windowed KV: 147,456 B/token at 16-bit over 36 layers, at most 8192 tokens" in scout
    v32 = render_inspection(classify_config(_load(V32)))
    assert "indexed_attention x61" in v32
    assert "Sparse attention: top-2048 tokens per query; indexer keys 8,052 B/token" in v32


def _llama4_gguf_metadata(text: dict) -> dict:
    """The GGUF keys llama.cpp's converter writes for Llama 4 (convert_hf_to_gguf.py
    Llama4Model: the dense MLP width as feed_forward_length, the experts' as
    expert_feed_forward_length, interleave_moe_layer_step; no chunk size, which llama.cpp
    fixes at 8192 in llama-model.cpp)."""
    a = "llama4"
    return {"general.architecture": a, "tokenizer.ggml.tokens.count": text["vocab_size"],
            f"{a}.block_count": text["num_hidden_layers"],
            f"{a}.embedding_length": text["hidden_size"],
            f"{a}.feed_forward_length": text["intermediate_size_mlp"],
            f"{a}.attention.head_count": text["num_attention_heads"],
            f"{a}.attention.head_count_kv": text["num_key_value_heads"],
            f"{a}.attention.key_length": text["head_dim"],
            f"{a}.context_length": text["max_position_embeddings"],
            f"{a}.expert_count": text["num_local_experts"],
            f"{a}.expert_used_count": text["num_experts_per_tok"],
            f"{a}.expert_feed_forward_length": text["intermediate_size"],
            f"{a}.interleave_moe_layer_step": text["interleave_moe_layer_step"],
            f"{a}.rope.freq_base": text["rope_theta"]}


@pytest.mark.parametrize("name", [SCOUT, MAVERICK])
def test_a_llama4_gguf_is_sized_like_its_hf_config(name):
    from infopt.model.local import gguf_to_config

    hf = _load(name)
    g = classify_config(gguf_to_config(_llama4_gguf_metadata(hf["text_config"]),
                                       {"output.weight"}))
    h = classify_config(hf)
    assert g.layer_kinds == h.layer_kinds == {CHUNKED: 36, FULL: 12}
    assert g.attention_chunk_tokens == 8192
    assert g.kv_cache.bytes_per_sequence_16bit(131072) == 7_650_410_496
    # Maverick's MoE layers every other layer (interleave 2) and the widths: parameters agree.
    same = ("mlp_kinds", "moe", "attention", "params_total", "params_active_per_token", "params",
            "kv_cache")
    dh, dg = h.model_dump(), g.model_dump()
    assert {k: dg[k] for k in same} == {k: dh[k] for k in same}
    assert dh["params_total"] and dh["moe"]
