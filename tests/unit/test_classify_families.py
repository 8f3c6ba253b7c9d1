"""Held-out families: Gemma 3 (defaults from its configuration class), Qwen3.5 (Gated DeltaNet
linear attention beside full attention), Llama-3.3-Nemotron-Super-49B (DeciLM per-layer blocks),
and gpt-oss-120b's bf16 modules beside MXFP4 experts. Real config.json files from
tests/fixtures/model_configs (SOURCES.txt); shapes written out by hand from the modeling code."""

from __future__ import annotations

import copy
import json

import pytest

from infopt.costmodel.roofline import decode_row
from infopt.costmodel.weights import (
    decode_weight_traffic_bytes,
    executed_linear_params,
    path_from_quantization,
    weights_bytes,
)
from infopt.model.classify import classify_config
from infopt.model.layers import ffn_mult_to_intermediate
from infopt.model.modules import Component, not_converted
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget, Envelope
from infopt.specs.inspection import LayerKind, MlpKind
from tests.fixture_data import MODEL_CONFIGS, require

CONFIGS = require(MODEL_CONFIGS)
H100 = DeviceBudget(name="H100 SXM", memory_bytes=80 * 2**30, bandwidth_bytes_per_s=3.35e12,
                    dense_flops_per_s={"bf16": 989e12, "fp8": 1979e12},
                    compute_capability="9.0", source="test")


def _load(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


# --- Gemma 3 ------------------------------------------------------------------------------------

def test_gemma3_text_config_defaults_come_from_its_class_and_are_named():
    m = classify_config(_load("google__gemma-3-27b-it"))
    # The file's text_config has none of these; Gemma3TextConfig supplies them.
    assert m.defaults_used["vocab_size"] == 262208
    assert m.defaults_used["max_position_embeddings"] == 131072
    assert m.defaults_used["tie_word_embeddings"] is True
    assert len(m.defaults_used["layer_types"]) == 62
    assert "Gemma3TextConfig" in m.defaults_source
    assert any("Gemma3TextConfig defaults" in n and "vocab_size=262208" in n for n in m.notes)
    # What the file states is never replaced: sliding_window 1024, not the class's 4096.
    assert m.sliding_window_tokens == 1024 and "sliding_window" not in m.defaults_used
    assert (m.vocab_size, m.native_context_tokens) == (262208, 131072)


def test_gemma3_27b_params_by_hand():
    H, V, L, I = 5376, 262208, 62, 21504  # noqa: N806, E741 - the usual symbols
    heads, kv, hd = 32, 16, 128
    attn = H * heads * hd + 2 * H * kv * hd + heads * hd * H + 2 * hd  # + q_norm, k_norm
    mlp = 3 * H * I  # gate (GeGLU), up, down
    norms = 4 * H  # input, post_attention, pre_feedforward, post_feedforward
    total = V * H + L * (attn + mlp + norms) + H  # tied: no lm_head
    m = classify_config(_load("google__gemma-3-27b-it"))
    assert m.params_total == total
    assert m.params.lm_head == 0 and m.tie_word_embeddings
    # Every sixth layer attends globally (sliding_window_pattern 6): layers 5, 11, ..., 59.
    assert m.layer_kinds == {LayerKind.SLIDING_ATTENTION: 52, LayerKind.FULL_ATTENTION: 10}
    per_layer_kv = 2 * kv * hd * 2
    assert m.kv_cache.bytes_per_token_16bit == 10 * per_layer_kv
    assert m.kv_cache.sliding_bytes_per_token_16bit == 52 * per_layer_kv


def test_a_key_the_file_states_wins_over_the_class_default():
    cfg = _load("google__gemma-3-27b-it")
    cfg["text_config"]["vocab_size"] = 1000
    m = classify_config(cfg)
    assert m.vocab_size == 1000 and "vocab_size" not in m.defaults_used


def test_a_family_without_a_class_names_the_missing_keys():
    cfg = _load("google__gemma-3-27b-it")
    cfg["text_config"]["model_type"] = "gemma_unknown_variant"
    with pytest.raises(InputError, match=r"vocab_size.*no configuration class"):
        classify_config(cfg)


# --- Qwen3.5 (Gated DeltaNet + full attention, MoE) -----------------------------------------------

def test_qwen35_linear_attention_params_state_and_kv_by_hand():
    m = classify_config(_load("Qwen__Qwen3.5-397B-A17B"))
    H = 4096  # noqa: N806
    nk, nv, dk, dv, kernel = 16, 64, 128, 128, 4
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    # in_proj_qkv + in_proj_z + in_proj_b + in_proj_a, conv1d (no bias), dt_bias, A_log,
    # the gated norm (one value head wide), out_proj.
    deltanet = (H * (2 * key_dim + value_dim) + H * value_dim + 2 * H * nv + conv_dim * kernel
                + 2 * nv + dv + value_dim * H)
    assert m.params.linear_attention == 45 * deltanet
    # Only the 15 full-attention layers cache K and V: 2 kv heads x 256 x (K,V) x 2 bytes.
    assert m.kv_cache.full_attention_layers == 15
    assert m.kv_cache.bytes_per_token_16bit == 15 * 2 * 2 * 256 * 2 == 30720
    la = m.linear_attention
    assert la.conv_state_elements_per_layer == (kernel - 1) * conv_dim
    assert la.recurrent_state_elements_per_layer == nv * dk * dv
    # The config asks for a float32 recurrent state (mamba_ssm_dtype): 183.2 MiB a sequence.
    conv_b, rec_b = (kernel - 1) * conv_dim * 2, nv * dk * dv * 4
    assert m.kv_cache.recurrent_state_bytes_per_sequence == 45 * (conv_b + rec_b)
    assert m.kv_cache.recurrent_state_bytes_per_sequence / 2**20 == pytest.approx(183.2, abs=0.1)
    assert m.kv_cache.recurrent_layers == 45


def test_qwen35_attention_gate_moe_and_mtp():
    m = classify_config(_load("Qwen__Qwen3.5-397B-A17B"))
    H, heads, kv, hd = 4096, 32, 2, 256  # noqa: N806
    # attn_output_gate: q_proj emits the query and a per-head gate (2 x heads x head_dim).
    attn = H * 2 * heads * hd + 2 * H * kv * hd + heads * hd * H + 2 * hd
    assert m.params.attention == 15 * attn
    assert m.moe.num_experts == 512 and m.moe.experts_per_token == 10
    assert m.params.shared_experts == 60 * (3 * H * 1024 + H)  # + shared_expert_gate
    assert m.mtp_layers == 1 and m.params.mtp == pytest.approx(6.6e9, rel=0.02)
    # Qwen's "17B activated" (embedding included), rounded to two digits.
    assert 16.5e9 <= m.params_active_per_token + m.params.embedding < 17.5e9


def test_qwen35_linear_layers_need_their_keys():
    cfg = _load("Qwen__Qwen3.5-397B-A17B")
    del cfg["text_config"]["linear_num_value_heads"]
    with pytest.raises(InputError, match="linear_num_value_heads"):
        classify_config(cfg)


# --- Llama-3.3-Nemotron-Super-49B (DeciLM block_configs) ------------------------------------------

def test_decilm_heterogeneous_blocks_by_hand():
    cfg = _load("nvidia__Llama-3_3-Nemotron-Super-49B-v1")
    m = classify_config(cfg)
    H, V, heads, hd = 8192, 128256, 64, 128  # noqa: N806
    total = 2 * V * H + H  # untied embedding and head, final norm
    kv_bytes = 0
    for block in cfg["block_configs"]:
        attn, ffn = block["attention"], block["ffn"]
        if not attn["no_op"]:
            kv = heads // attn["n_heads_in_group"]
            total += 2 * H * heads * hd + 2 * H * kv * hd + H  # q, o, k, v, input norm
            kv_bytes += 2 * kv * hd * 2
        if not ffn["no_op"]:
            width = ffn_mult_to_intermediate(ffn["ffn_mult"], H)
            total += 3 * H * width + H  # gate, up, down, post-attention norm
    assert m.params_total == total
    assert m.kv_cache.bytes_per_token_16bit == kv_bytes == 200704
    assert m.layer_kinds == {LayerKind.FULL_ATTENTION: 49}
    assert m.mlp_kinds == {MlpKind.DENSE: 80} and m.skipped_blocks == 31
    assert m.attention.num_kv_heads == 8  # from n_heads_in_group, not the null config key


def test_decilm_ffn_width_formula():
    # int(2 x mult x H / 3) rounded up to 256: 5.25 -> Llama-70B's 28672; 1.3125 -> 7168.
    assert ffn_mult_to_intermediate(5.25, 8192) == 28672
    assert ffn_mult_to_intermediate(1.3125, 8192) == 7168
    assert ffn_mult_to_intermediate(0.5, 8192) == 2816


def test_decilm_linear_replacements_count_one_linear_each():
    cfg = _load("nvidia__Llama-3_3-Nemotron-Super-49B-v1")
    base = classify_config(cfg)
    changed = copy.deepcopy(cfg)
    attn = changed["block_configs"][0]["attention"]
    attn.update(replace_with_linear=True)
    m = classify_config(changed)
    H, kv = 8192, 8  # noqa: N806
    dropped = 2 * H * 64 * 128 + 2 * H * kv * 128  # layer 0's q, o, k, v
    assert m.params_total == base.params_total - dropped + H * H
    assert m.linear_replaced_blocks == 1
    assert m.kv_cache.bytes_per_token_16bit == base.kv_cache.bytes_per_token_16bit - 2 * kv * 256


@pytest.mark.parametrize("change, match", [
    (lambda c: c["block_configs"].pop(), "must list num_hidden_layers=80"),
    (lambda c: c["block_configs"][0]["attention"].update(n_heads_in_group=7), "dividing"),
    (lambda c: c["block_configs"][0]["ffn"].update(ffn_mult="big"), "positive number"),
    (lambda c: c["block_configs"][0]["attention"].update(window_length=4096), "windowed"),
    (lambda c: c["block_configs"].__setitem__(3, "x"), r"block_configs\[3\]"),
])
def test_decilm_bad_blocks_are_clear_errors(change, match):
    cfg = _load("nvidia__Llama-3_3-Nemotron-Super-49B-v1")
    change(cfg)
    with pytest.raises(InputError, match=match):
        classify_config(cfg)


# --- gpt-oss-120b: bf16 modules beside MXFP4 experts -------------------------------------------

def _gpt_oss_120b():
    m = classify_config(_load("openai__gpt-oss-120b"))
    own = path_from_quantization(m.quantization, "9.0")
    return m, own, own.model_copy(update={"honours_not_converted": False})


def test_gpt_oss_120b_attention_is_kept_bf16_in_the_weights():
    m, own, naive = _gpt_oss_120b()
    kept = m.quantization.params_not_converted
    assert kept.attention == m.params.attention  # model.layers.*.self_attn
    assert kept.routed_experts == 0
    assert own.honours_not_converted and "0.96B linear params left unconverted" in own.source
    # 0.955B attention parameters at 16 bits instead of 4.25: 1.40 GB heavier.
    extra = weights_bytes(m, own) - weights_bytes(m, naive)
    assert extra == pytest.approx(m.params.attention * (16 - 4.25) / 8, abs=2)
    assert extra / 1e9 == pytest.approx(1.40, abs=0.01)


def test_gpt_oss_120b_decode_bytes_and_math_count_the_bf16_attention():
    m, own, naive = _gpt_oss_120b()
    kept_bytes = m.params.attention * (16 - 4.25) / 8
    for batch in (1, 8, 64):
        assert decode_weight_traffic_bytes(m, own, batch) == pytest.approx(
            decode_weight_traffic_bytes(m, naive, batch) + kept_bytes)
    # MXFP4 W4A16 already multiplies at bf16; the split shows with an FP8-math path.
    fp8 = own.model_copy(update={"math": "fp8"})
    by_math = executed_linear_params(m, fp8)
    assert by_math["bf16"] == m.params.attention + m.params.lm_head
    row_own = decode_row(m, own, "auto", 1, 8192, H100, Envelope.THEORETICAL)
    row_naive = decode_row(m, naive, "auto", 1, 8192, H100, Envelope.THEORETICAL)
    assert row_own.tokens_per_s < row_naive.tokens_per_s  # the ceiling drops


def test_hypothetical_paths_do_not_inherit_the_checkpoint_list():
    from infopt.costmodel.weights import BF16, named_path

    m, _, _ = _gpt_oss_120b()
    fp8 = named_path("fp8", "9.0")
    assert not fp8.honours_not_converted and not BF16.honours_not_converted


# --- name matching -------------------------------------------------------------------------------

def _comps():
    from infopt.model.modules import embedding_components, layer_component

    return [*embedding_components(100, 100), layer_component("attention", 0, 10),
            layer_component("attention", 1, 10), layer_component("dense_mlp", 0, 30),
            layer_component("routers", 1, 1)]


@pytest.mark.parametrize("patterns, attention, dense, head", [
    (["model.layers.*.self_attn"], 20, 0, 0),  # glob (gpt-oss)
    (["re:.*self_attn.*"], 20, 0, 0),  # compressed-tensors regex
    (["model.layers.1.self_attn"], 10, 0, 0),  # exact name
    (["self_attn"], 20, 0, 0),  # HF substring, on whole dotted segments
    (["model.layers.1"], 10, 0, 0),  # an ancestor: the whole layer
    (["lm_head"], 0, 0, 100),
    (["mlp.gate"], 0, 0, 0),  # not mlp.gate_proj: segments
])
def test_not_converted_matching(patterns, attention, dense, head):
    got = not_converted(_comps(), patterns)
    assert (got.params["attention"], got.params["dense_mlp"], got.params["lm_head"]) == (
        attention, dense, head)


def test_a_name_inside_a_component_counts_all_of_it_and_says_so():
    got = not_converted(_comps(), ["model.layers.0.self_attn.q_proj", "vision_tower.x"])
    assert got.params["attention"] == 10
    assert got.partial == ["model.layers.0.self_attn.q_proj"]
    assert got.unmatched == ["vision_tower.x"]


def test_component_names_are_the_engines_spelling():
    c = Component("attention", ("model.layers.0.self_attn",), 1)
    assert not_converted([c], ["model.layers.0.self_attn"]).params["attention"] == 1


def test_inspect_text_shows_the_new_kinds():
    from infopt.report.model_text import render_inspection

    qwen = render_inspection(classify_config(_load("Qwen__Qwen3.5-397B-A17B")))
    assert "Recurrent state: 183.2 MiB per sequence over 45 layers" in qwen
    assert "Gated DeltaNet" in qwen and "linear_attention x45" in qwen
    nas = render_inspection(classify_config(_load("nvidia__Llama-3_3-Nemotron-Super-49B-v1")))
    assert "31 skipped (no_op)" in nas
    oss = render_inspection(classify_config(_load("openai__gpt-oss-120b")))
    assert "Left at 16 bits by the checkpoint: attention 0.96 B" in oss
    gemma = render_inspection(classify_config(_load("google__gemma-3-27b-it")))
    assert "Gemma3TextConfig defaults: vocab_size=262208" in gemma
