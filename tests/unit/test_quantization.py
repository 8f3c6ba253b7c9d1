"""Quantization read from metadata (config.json quantization_config, ModelOpt hf_quant_config.json)
and GGUF bits per weight from ggml's block structs."""

from __future__ import annotations

import json

import gguf
import pytest

from infopt.model.quantization import (
    GGML_BLOCKS,
    gguf_bits_per_weight,
    gguf_tensor_bytes,
    parse_quantization,
)
from infopt.specs.base import InputError
from infopt.specs.inspection import QuantMethod
from tests.fixture_data import MODEL_CONFIGS, require

CONFIGS = require(MODEL_CONFIGS)


def _load(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


# --- real checkpoints --------------------------------------------------------------------------

def test_qwen3_fp8_block_scales():
    q = parse_quantization(_load("Qwen__Qwen3-30B-A3B-FP8.json"))
    assert (q.method, q.bits, q.format, q.weight_block_size) == (QuantMethod.FP8, 8, "e4m3",
                                                                 [128, 128])
    assert q.activations_quantized and q.activation_bits == 8 and q.scheme == "W8A8"
    assert "lm_head" in q.modules_not_converted
    assert "model.layers.47.mlp.gate" in q.modules_not_converted  # routers stay 16-bit
    assert q.source == "config.json quantization_config"


def test_deepseek_v3_is_natively_fp8():
    q = parse_quantization(_load("deepseek-ai__DeepSeek-V3.json"))
    assert (q.method, q.scheme, q.weight_block_size) == (QuantMethod.FP8, "W8A8", [128, 128])


def test_gpt_oss_mxfp4_is_weight_only():
    q = parse_quantization(_load("openai__gpt-oss-20b.json"))
    assert (q.method, q.bits, q.group_size, q.scheme) == (QuantMethod.MXFP4, 4, 32, "W4A16")
    assert not q.activations_quantized
    assert q.modules_not_converted == ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"]


def test_modelopt_fp8_sidecar():
    cfg = _load("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    assert parse_quantization(cfg) is None  # config.json alone says nothing: read the sidecar
    q = parse_quantization(cfg, _load("nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json"))
    assert (q.method, q.bits, q.format, q.scheme) == (QuantMethod.MODELOPT, 8, "e4m3", "W8A8")
    assert q.kv_cache_quant == "FP8"
    assert q.modules_not_converted == ["lm_head"]
    assert q.producer == "modelopt 0.23.0"
    assert q.source == "hf_quant_config.json quantization"


def test_modelopt_nvfp4_sidecar():
    q = parse_quantization(_load("nvidia__Qwen3-235B-A22B-NVFP4.json"),
                           _load("nvidia__Qwen3-235B-A22B-NVFP4.hf_quant_config.json"))
    assert (q.method, q.bits, q.group_size, q.scheme) == (QuantMethod.MODELOPT, 4, 16, "W4A4")
    assert q.activations_quantized and q.activation_bits == 4
    assert len(q.modules_not_converted) == 95  # 94 routers + lm_head
    assert q.producer == "modelopt 0.33.0"


@pytest.mark.parametrize("name", ["Qwen__Qwen3-8B.json", "meta-llama__Llama-3.1-8B-Instruct.json",
                                  "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"])
def test_unquantized_is_none(name):
    assert parse_quantization(_load(name)) is None


# --- formats seen on the hub (configs abbreviated from real checkpoints) ------------------------

def test_awq():
    # Qwen/Qwen2.5-7B-Instruct-AWQ config.json
    q = parse_quantization({"quantization_config": {
        "bits": 4, "group_size": 128, "modules_to_not_convert": None, "quant_method": "awq",
        "version": "gemm", "zero_point": True}})
    assert (q.method, q.bits, q.group_size, q.format, q.scheme) == (
        QuantMethod.AWQ, 4, 128, "int4 gemm", "W4A16")
    assert q.modules_not_converted == []


def test_gptq_per_channel_and_grouped():
    base = {"bits": 4, "desc_act": False, "quant_method": "gptq", "sym": True}
    q = parse_quantization({"quantization_config": base | {"group_size": 128}})
    assert (q.method, q.bits, q.group_size, q.scheme) == (QuantMethod.GPTQ, 4, 128, "W4A16")
    # group_size -1 means one scale per output channel, not a group of -1.
    assert parse_quantization({"quantization_config": base | {"group_size": -1}}).group_size is None
    q8 = parse_quantization({"quantization_config": base | {"bits": 8, "group_size": 128}})
    assert q8.scheme == "W8A16" and not q8.activations_quantized


def _ct(weights: dict, acts: dict | None, fmt: str) -> dict:
    return {"quantization_config": {
        "config_groups": {"group_0": {"input_activations": acts, "output_activations": None,
                                      "targets": ["Linear"], "weights": weights}},
        "format": fmt, "ignore": ["lm_head"], "kv_cache_scheme": None,
        "quant_method": "compressed-tensors", "quantization_status": "compressed"}}


def test_compressed_tensors_fp8_dynamic():
    # RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic
    q = parse_quantization(_ct(
        {"num_bits": 8, "type": "float", "strategy": "channel", "group_size": None,
         "symmetric": True, "dynamic": False},
        {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
        "float-quantized"))
    assert (q.method, q.bits, q.group_size, q.scheme) == (QuantMethod.COMPRESSED_TENSORS, 8,
                                                          None, "W8A8")
    assert q.format == "float8 float-quantized" and q.modules_not_converted == ["lm_head"]


def test_compressed_tensors_w4a16_and_nvfp4():
    w4 = parse_quantization(_ct({"num_bits": 4, "type": "int", "strategy": "group",
                                 "group_size": 128}, None, "pack-quantized"))
    assert (w4.bits, w4.group_size, w4.scheme, w4.activations_quantized) == (4, 128, "W4A16",
                                                                             False)
    fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
    nv = parse_quantization(_ct(fp4, fp4 | {"dynamic": "local"}, "nvfp4-pack-quantized"))
    assert (nv.bits, nv.group_size, nv.scheme) == (4, 16, "W4A4")


def test_bitsandbytes():
    # unsloth/...-bnb-4bit
    q = parse_quantization({"quantization_config": {
        "_load_in_4bit": True, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True, "llm_int8_skip_modules": None, "load_in_4bit": True,
        "load_in_8bit": False, "quant_method": "bitsandbytes"}})
    assert (q.method, q.bits, q.group_size, q.format, q.scheme) == (
        QuantMethod.BITSANDBYTES, 4, 64, "nf4", "W4A16")
    q8 = parse_quantization({"quantization_config": {"load_in_8bit": True,
                                                     "quant_method": "bitsandbytes"}})
    assert (q8.bits, q8.scheme) == (8, "W8A8")


def test_fbgemm_fp8_and_modelopt_in_config():
    q = parse_quantization({"quantization_config": {"quant_method": "fbgemm_fp8",
                                                    "modules_to_not_convert": ["lm_head"]}})
    assert (q.method, q.scheme) == (QuantMethod.FP8, "W8A8")
    mo = parse_quantization({"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
        "group_size": 16, "exclude_modules": ["lm_head"]}})
    assert (mo.method, mo.bits, mo.group_size, mo.scheme, mo.kv_cache_quant) == (
        QuantMethod.MODELOPT, 4, 16, "W4A4", "FP8")


def test_config_wins_over_sidecar_as_in_vllm():
    cfg = {"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    side = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}
    assert parse_quantization(cfg, side).method == QuantMethod.FP8


def test_unknown_method_and_algo_are_reported_not_guessed():
    q = parse_quantization({"quantization_config": {"quant_method": "hqq", "nbits": 4}})
    assert (q.method, q.bits, q.format) == (QuantMethod.OTHER, 4, "hqq")
    mo = parse_quantization({}, {"producer": {"name": "modelopt", "version": "9"},
                                 "quantization": {"quant_algo": "MIXED_PRECISION"}})
    assert (mo.method, mo.bits, mo.format) == (QuantMethod.MODELOPT, None, "MIXED_PRECISION")


def test_mlx_has_no_quant_method_but_is_recognised():
    # mlx-community/Qwen3-8B-4bit config.json
    q = parse_quantization({"quantization": {"group_size": 64, "bits": 4},
                            "quantization_config": {"group_size": 64, "bits": 4}})
    assert (q.method, q.bits, q.group_size, q.scheme, q.format) == (
        QuantMethod.MLX, 4, 64, "W4A16", "affine int4 (mlx)")


def test_nested_text_config_quantization():
    q = parse_quantization({"text_config": {"quantization_config": {"quant_method": "mxfp4"}}})
    assert q.method == QuantMethod.MXFP4


def test_malformed_inputs_raise_input_error():
    with pytest.raises(InputError, match="not a JSON object"):
        parse_quantization({"quantization_config": "fp8"})
    with pytest.raises(InputError, match="'quantization'"):
        parse_quantization({}, {"producer": {"name": "modelopt"}})


# --- GGUF ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, bpw", [
    ("Q4_0", 4.5),  # 18 bytes / 32 weights: ggml_half d + 16 bytes of nibbles
    ("Q4_1", 5.0),  # 20 / 32: d and m (2 x ggml_half) + 16
    ("Q5_0", 5.5),  # 22 / 32
    ("Q5_1", 6.0),  # 24 / 32
    ("Q8_0", 8.5),  # 34 / 32: d + 32 int8
    ("Q2_K", 2.625),  # 84 / 256
    ("Q3_K", 3.4375),  # 110 / 256
    ("Q4_K", 4.5),  # 144 / 256
    ("Q5_K", 5.5),  # 176 / 256
    ("Q6_K", 6.5625),  # 210 / 256
    ("IQ4_XS", 4.25),  # 136 / 256
    ("MXFP4", 4.25),  # 17 / 32: one E8M0 byte + 16
    ("F16", 16.0), ("BF16", 16.0), ("F32", 32.0),
])
def test_gguf_bits_per_weight(name, bpw):
    assert gguf_bits_per_weight(name) == bpw


def test_gguf_file_types_map_to_their_dominant_tensor_type():
    assert gguf_bits_per_weight("Q4_K_M") == gguf_bits_per_weight("MOSTLY_Q4_K_M") == 4.5
    assert gguf_bits_per_weight("MOSTLY_Q4_1") == 5.0  # the bundled SmolLM2 demo file type
    assert gguf_bits_per_weight("q8_0") == 8.5
    assert gguf_bits_per_weight("MOSTLY_MXFP4_MOE") == 4.25


def test_block_table_agrees_with_gguf_py():
    """gguf-py's GGML_QUANT_SIZES mirrors ggml-common.h: an independent check of the arithmetic."""
    for name, (weights, nbytes) in GGML_BLOCKS.items():
        qtype = gguf.GGMLQuantizationType[name]
        assert gguf.GGML_QUANT_SIZES[qtype] == (weights, nbytes), name


def test_gguf_tensor_bytes():
    assert gguf_tensor_bytes("Q4_1", 4096 * 4096) == 4096 * 4096 // 32 * 20
    assert gguf_tensor_bytes("Q6_K", 256 * 10) == 2100
    with pytest.raises(InputError, match="multiple of 256"):
        gguf_tensor_bytes("Q4_K", 100)
    with pytest.raises(InputError, match="unknown GGUF"):
        gguf_bits_per_weight("Q9_Z")
    with pytest.raises(InputError, match="unknown GGUF"):
        gguf_tensor_bytes("Q9_Z", 32)
