"""Read how a checkpoint is quantized from its own metadata, never from its repository name.

Two sources:

* `quantization_config` in config.json (AWQ, GPTQ, fp8, fbgemm_fp8, compressed-tensors,
  bitsandbytes, mxfp4, modelopt, mlx-lm), the key the engines themselves read first (vLLM's
  `get_quant_config` looks there before any sidecar file);
* the ModelOpt sidecar `hf_quant_config.json` (`{"producer": ..., "quantization": {"quant_algo":
  "FP8" | "NVFP4" | ..., "group_size": 16, "exclude_modules": [...]}}`), used when config.json
  carries no quantization_config.

And GGUF tensor types: bits per weight with the per-block scales included, from ggml's block
structs, so that file size and resident weight bytes can be predicted from tensor counts.

Units: bits per weight (bpw) include every byte of the block (scales, mins, high bits); bytes are
bytes. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

from infopt.specs.base import InputError
from infopt.specs.checkpoint import CheckpointFormat
from infopt.specs.inspection import QuantizationInfo, QuantMethod

# ModelOpt quant_algo -> (weight bits, group size, element format, activation bits or None).
# Source: NVIDIA Model-Optimizer, modelopt/torch/export (quant_algo names written to
# hf_quant_config.json) and the NVFP4 recipe (E2M1 elements, one FP8-E4M3 scale per 16 weights,
# activations quantized to NVFP4 too); FP8 is per-tensor E4M3 weights and activations.
_MODELOPT_ALGOS: dict[str, tuple[int, int | None, str, int | None]] = {
    "FP8": (8, None, "e4m3", 8),
    "FP8_PER_CHANNEL_PER_TOKEN": (8, None, "e4m3 per-channel", 8),
    "FP8_PB_WO": (8, None, "e4m3 block", None),
    "NVFP4": (4, 16, "e2m1 (nvfp4)", 4),
    "NVFP4_AWQ": (4, 16, "e2m1 (nvfp4) awq", 4),
    "W4A16_AWQ": (4, 128, "int4 awq", None),
    "W4A8_AWQ": (4, 128, "int4 awq", 8),
    "INT8_SQ": (8, None, "int8 smoothquant", 8),
    "W8A16": (8, None, "int8", None),
    "MXFP4": (4, 32, "e2m1 (mxfp4)", None),
    "MXFP8": (8, 32, "e4m3 (mxfp8)", 8),
}

def _scheme(bits: int | None, activation_bits: int | None) -> str:
    w = f"W{bits}" if bits else "W?"
    return f"{w}A{activation_bits or 16}"


def _info(method: QuantMethod, *, bits: int | None, group_size: int | None, fmt: str | None,
          activation_bits: int | None, source: str, not_converted: list[str] | None = None,
          block: list[int] | None = None, kv: str | None = None,
          producer: str | None = None) -> QuantizationInfo:
    return QuantizationInfo(
        method=method, bits=bits, group_size=group_size, weight_block_size=block, format=fmt,
        activations_quantized=activation_bits is not None and activation_bits < 16,
        activation_bits=activation_bits, scheme=_scheme(bits, activation_bits),
        kv_cache_quant=kv, modules_not_converted=list(not_converted or []), producer=producer,
        source=source)


def _group(value: Any) -> int | None:
    """GPTQ/AWQ write group_size -1 (or 0) for one scale per output channel."""
    return int(value) if isinstance(value, int) and value > 0 else None


def _modelopt(q: dict[str, Any], source: str, producer: dict[str, Any] | None) -> QuantizationInfo:
    algo = str(q.get("quant_algo") or "").upper()
    kv = q.get("kv_cache_quant_algo")
    excluded = list(q.get("exclude_modules") or q.get("ignore") or [])
    prod = (f"{producer.get('name', 'modelopt')} {producer.get('version', '')}".strip()
            if isinstance(producer, dict) else "modelopt")
    if algo not in _MODELOPT_ALGOS:
        # MIXED_PRECISION and future algorithms: report what we can; the shortlist must verify.
        return _info(QuantMethod.MODELOPT, bits=None, group_size=_group(q.get("group_size")),
                     fmt=algo or None, activation_bits=None, source=source,
                     not_converted=excluded, kv=kv, producer=prod)
    bits, group, fmt, abits = _MODELOPT_ALGOS[algo]
    return _info(QuantMethod.MODELOPT, bits=bits, group_size=_group(q.get("group_size")) or group,
                 fmt=fmt, activation_bits=abits, source=source, not_converted=excluded, kv=kv,
                 producer=prod)


def _compressed_tensors(q: dict[str, Any], source: str) -> QuantizationInfo:
    groups = q.get("config_groups") or {}
    if not groups:
        return _info(QuantMethod.COMPRESSED_TENSORS, bits=None, group_size=None,
                     fmt=q.get("format"), activation_bits=None, source=source,
                     not_converted=q.get("ignore"))
    # Several groups (mixed precision) are possible; the first one targeting Linear layers is
    # the bulk of the weights in every llm-compressor recipe we know of.
    ordered = sorted(groups.values(), key=lambda g: "Linear" not in (g.get("targets") or []))
    g = ordered[0]
    w = g.get("weights") or {}
    a = g.get("input_activations") or None
    bits = w.get("num_bits")
    elem = f"{w.get('type', 'int')}{bits}" if bits else None
    fmt = " ".join(x for x in (elem, q.get("format")) if x) or None
    kv = q.get("kv_cache_scheme")
    kv_desc = f"{kv.get('type', '')}{kv.get('num_bits', '')}" if isinstance(kv, dict) else None
    return _info(QuantMethod.COMPRESSED_TENSORS, bits=bits, group_size=_group(w.get("group_size")),
                 fmt=fmt, activation_bits=a.get("num_bits") if a else None, source=source,
                 not_converted=q.get("ignore"), block=w.get("block_structure"), kv=kv_desc)


def _bitsandbytes(q: dict[str, Any], source: str) -> QuantizationInfo:
    skip = q.get("llm_int8_skip_modules") or []
    if q.get("load_in_4bit") or q.get("_load_in_4bit"):
        # bitsandbytes quantize_4bit default blocksize=64 (bitsandbytes/functional.py); compute
        # runs in bnb_4bit_compute_dtype, so activations stay 16-bit.
        return _info(QuantMethod.BITSANDBYTES, bits=4, group_size=64,
                     fmt=str(q.get("bnb_4bit_quant_type", "fp4")), activation_bits=None,
                     source=source, not_converted=skip)
    # LLM.int8(): int8 weights, vector-wise int8 activations with fp16 outlier decomposition
    # (Dettmers et al. 2022, arXiv:2208.07339).
    return _info(QuantMethod.BITSANDBYTES, bits=8, group_size=None, fmt="int8 (LLM.int8)",
                 activation_bits=8, source=source, not_converted=skip)


def parse_quantization(config: dict[str, Any],
                       hf_quant_config: dict[str, Any] | None = None) -> QuantizationInfo | None:
    """The checkpoint's quantization from its metadata, or None for an unquantized checkpoint."""
    q = config.get("quantization_config")
    if q is None and isinstance(config.get("text_config"), dict):
        q = config["text_config"].get("quantization_config")
    if q is not None and not isinstance(q, dict):
        raise InputError("config.json 'quantization_config' is not a JSON object; pass the "
                         "checkpoint's config.json unmodified.")
    if not q:
        if hf_quant_config:
            inner = hf_quant_config.get("quantization")
            if not isinstance(inner, dict):
                raise InputError("hf_quant_config.json has no 'quantization' object; expected "
                                 "ModelOpt's {'producer': ..., 'quantization': {'quant_algo': "
                                 "...}} layout.")
            return _modelopt(inner, "hf_quant_config.json quantization",
                             hf_quant_config.get("producer"))
        return None

    src = "config.json quantization_config"
    method = str(q.get("quant_method", "")).lower()
    not_conv = list(q.get("modules_to_not_convert") or [])
    if method == "awq":
        bits = q.get("bits", q.get("w_bit"))
        return _info(QuantMethod.AWQ, bits=bits, group_size=_group(
            q.get("group_size", q.get("q_group_size"))),
            fmt=f"int{bits or '?'} {q.get('version', 'gemm')}", activation_bits=None, source=src,
            not_converted=not_conv)
    if method == "gptq":
        bits = q.get("bits")
        return _info(QuantMethod.GPTQ, bits=bits, group_size=_group(q.get("group_size")),
                     fmt=f"int{bits or '?'} {q.get('checkpoint_format', 'gptq')}",
                     activation_bits=None,
                     source=src, not_converted=not_conv)
    if method == "fp8":
        # HF FineGrainedFP8 / DeepSeek-V3: E4M3 weights with 128x128 block scales; activations
        # are quantized on the fly (activation_scheme "dynamic") per 1x128 group -> W8A8.
        block = q.get("weight_block_size")
        act = 8 if q.get("activation_scheme", "dynamic") in ("dynamic", "static") else None
        return _info(QuantMethod.FP8, bits=8, group_size=None, fmt=str(q.get("fmt", "e4m3")),
                     activation_bits=act, source=src, not_converted=not_conv,
                     block=list(block) if block else None)
    if method == "fbgemm_fp8":
        # Per-channel E4M3 weights, dynamic per-token FP8 activations (transformers FbgemmFp8).
        return _info(QuantMethod.FP8, bits=8, group_size=None, fmt="e4m3 per-channel",
                     activation_bits=8, source=src, not_converted=not_conv)
    if method == "mxfp4":
        # OCP Microscaling: E2M1 elements, one E8M0 scale per 32 (OCP MX spec v1.0). gpt-oss
        # ships MoE expert weights this way; activations are bf16 in the reference kernels.
        return _info(QuantMethod.MXFP4, bits=4, group_size=32, fmt="e2m1 (mxfp4)",
                     activation_bits=None, source=src, not_converted=not_conv)
    if method == "compressed-tensors":
        return _compressed_tensors(q, src)
    if method == "bitsandbytes" or "load_in_4bit" in q or "load_in_8bit" in q:
        return _bitsandbytes(q, src)
    if method == "modelopt":
        return _modelopt(q, src, q.get("producer"))
    if not method and isinstance(config.get("quantization"), dict):
        # mlx-lm writes {"group_size", "bits"[, "mode"]} under both "quantization" and
        # "quantization_config"; "affine" (the default) stores a scale and a bias per group.
        bits = q.get("bits")
        return _info(QuantMethod.MLX, bits=bits, group_size=_group(q.get("group_size")),
                     fmt=f"{q.get('mode', 'affine')} int{bits or '?'} (mlx)",
                     activation_bits=None, source=src)
    # hqq, torchao, aqlm, eetq, ...: say what the config says, leave the judgement to a human.
    bits = q.get("bits", q.get("nbits"))
    return _info(QuantMethod.OTHER, bits=bits if isinstance(bits, int) else None,
                 group_size=_group(q.get("group_size")), fmt=method or None,
                 activation_bits=None, source=src, not_converted=not_conv)


# --- GGUF ------------------------------------------------------------------------------------
# (weights per block, bytes per block), from the block structs in ggml/src/ggml-common.h
# (ggml-org/llama.cpp); ggml_half is 2 bytes, QK_K = 256. bpw = 8 x bytes / weights.
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "F64": (1, 8), "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "I8": (1, 1),
    "Q4_0": (32, 18),  # ggml_half d; uint8 qs[16]                          -> 4.5 bpw
    "Q4_1": (32, 20),  # ggml_half d, m; uint8 qs[16]                       -> 5.0
    "Q5_0": (32, 22),  # ggml_half d; uint8 qh[4]; uint8 qs[16]             -> 5.5
    "Q5_1": (32, 24),  # ggml_half d, m; uint8 qh[4]; uint8 qs[16]          -> 6.0
    "Q8_0": (32, 34),  # ggml_half d; int8 qs[32]                           -> 8.5
    "Q2_K": (256, 84),  # uint8 scales[16]; qs[64]; ggml_half d, dmin      -> 2.625
    "Q3_K": (256, 110),  # hmask[32]; qs[64]; scales[12]; ggml_half d      -> 3.4375
    "Q4_K": (256, 144),  # ggml_half d, dmin; scales[12]; qs[128]          -> 4.5
    "Q5_K": (256, 176),  # ggml_half d, dmin; scales[12]; qh[32]; qs[128]  -> 5.5
    "Q6_K": (256, 210),  # ql[128]; qh[64]; int8 scales[16]; ggml_half d   -> 6.5625
    "Q8_K": (256, 292),  # float d; int8 qs[256]; int16 bsums[16]          -> 9.125
    "IQ1_S": (256, 50),  # ggml_half d; qs[32]; uint16 qh[8]               -> 1.5625
    "IQ1_M": (256, 56),  # qs[32]; qh[16]; scales[8]                        -> 1.75
    "IQ2_XXS": (256, 66),  # ggml_half d; uint16 qs[32]                    -> 2.0625
    "IQ2_XS": (256, 74),  # ggml_half d; uint16 qs[32]; scales[8]          -> 2.3125
    "IQ2_S": (256, 82),  # ggml_half d; qs[64]; qh[8]; scales[8]            -> 2.5625
    "IQ3_XXS": (256, 98),  # ggml_half d; qs[96]                           -> 3.0625
    "IQ3_S": (256, 110),  # ggml_half d; qs[64]; qh[8]; signs[32]; scales[4] -> 3.4375
    "IQ4_NL": (32, 18),  # ggml_half d; qs[16]                              -> 4.5
    "IQ4_XS": (256, 136),  # ggml_half d; uint16 scales_h; scales_l[4]; qs[128] -> 4.25
    "TQ1_0": (256, 54),  # qs[48]; qh[4]; ggml_half d                       -> 1.6875
    "TQ2_0": (256, 66),  # qs[64]; ggml_half d                              -> 2.0625
    "MXFP4": (32, 17),  # uint8 e (E8M0); qs[16]                            -> 4.25
    "NVFP4": (64, 36),  # uint8 d[4] (UE4M3 per 16); qs[32]                 -> 4.5
    "Q1_0": (128, 18),  # ggml_half d; qs[16]                               -> 1.125
}
# Q8_1 is left out on purpose: it only exists as the activation operand of dot products, never
# in a GGUF file (and gguf-py's size for it, 40 bytes, predates ggml's 2 x ggml_half layout).

# llama.cpp file types (LLAMA_FTYPE_MOSTLY_*) -> the tensor type most weights get. The mixes
# (_S/_M/_L, IQ*_M) keep some tensors (output, parts of attn_v/ffn_down) at a wider type, so the
# file's real bpw is above this; sum `gguf_tensor_bytes` over the tensors for the exact figure.
_FILE_TYPE_BASE = {
    "Q2_K_S": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K",
    "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "IQ3_XS": "IQ3_S", "IQ3_M": "IQ3_S",
    "IQ2_M": "IQ2_S", "IQ4_XS": "IQ4_XS", "MXFP4_MOE": "MXFP4", "ALL_F32": "F32",
}


def _type_name(name: str) -> str:
    key = name.strip().upper()
    for prefix in ("LLAMA_FTYPE_", "GGML_TYPE_", "MOSTLY_"):
        key = key.removeprefix(prefix)
    return _FILE_TYPE_BASE.get(key, key)


def gguf_bits_per_weight(type_name: str) -> float:
    """Bits per weight of a GGUF tensor type ("Q4_1", "Q8_0", "F16") with block scales included.

    A file type ("Q4_K_M", "MOSTLY_Q4_K_M") maps to its dominant tensor type: a floor for the
    file, since the mixes keep some tensors wider.
    """
    key = _type_name(type_name)
    if key not in GGML_BLOCKS:
        raise InputError(f"unknown GGUF tensor/file type '{type_name}'; known tensor types: "
                         f"{', '.join(sorted(GGML_BLOCKS))}.")
    weights, nbytes = GGML_BLOCKS[key]
    return 8 * nbytes / weights


def gguf_tensor_bytes(type_name: str, n_elements: int) -> int:
    """Exact bytes of one tensor of `n_elements` weights stored as `type_name`."""
    key = _type_name(type_name)
    if key not in GGML_BLOCKS:
        raise InputError(f"unknown GGUF tensor type '{type_name}'.")
    weights, nbytes = GGML_BLOCKS[key]
    if n_elements % weights:
        raise InputError(f"{n_elements} weights is not a whole number of {key} blocks of "
                         f"{weights}; the tensor's row length must be a multiple of {weights}.")
    return n_elements // weights * nbytes


def format_of(q: QuantizationInfo | None) -> CheckpointFormat:
    """The format family the engines dispatch on, from a checkpoint's quantization."""
    if q is None:
        return CheckpointFormat.UNQUANTIZED
    fmt = (q.format or "").lower()
    if q.method is QuantMethod.COMPRESSED_TENSORS:
        if not q.activations_quantized:
            return CheckpointFormat.CT_WNA16
        if "float" in fmt:
            return CheckpointFormat.CT_NVFP4 if q.bits == 4 else CheckpointFormat.CT_FP8
        return CheckpointFormat.CT_INT8
    if q.method is QuantMethod.MODELOPT:
        if "nvfp4" in fmt:
            return CheckpointFormat.MODELOPT_NVFP4
        return CheckpointFormat.MODELOPT_FP8 if "e4m3" in fmt else CheckpointFormat.OTHER
    if q.method is QuantMethod.BITSANDBYTES:
        return CheckpointFormat.BNB_NF4 if q.bits == 4 else CheckpointFormat.BNB_INT8
    simple = {QuantMethod.AWQ: CheckpointFormat.AWQ, QuantMethod.GPTQ: CheckpointFormat.GPTQ,
              QuantMethod.FP8: CheckpointFormat.FP8, QuantMethod.MXFP4: CheckpointFormat.MXFP4}
    return simple.get(q.method, CheckpointFormat.OTHER)
