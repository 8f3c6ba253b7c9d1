"""Weight storage and per-step weight traffic for a classified model on a chosen weight path.

Quantized schemes quantize the linear layers (attention, MLP, experts, Mamba projections);
embeddings, an untied lm_head, norms and routers stay 16-bit unless the format says otherwise
(GGUF quantizes embeddings too, which is why a local GGUF's exact tensor bytes are preferred).
Storage bits include scales and zero points: AWQ int4 group 128 = 4 + 16/128 (fp16 scale) +
4/128 (packed zero) = 4.156 bits/weight; NVFP4 = 4 + 8/16 (e4m3 scale per 16) = 4.5;
MXFP4 = 4 + 8/32 (e8m0 scale per 32) = 4.25; FP8 with per-channel or 128x128 block scales ~8.0.
"""

from __future__ import annotations

from typing import Literal

from infopt.model.quantization import gguf_bits_per_weight
from infopt.specs.fit import WeightPath
from infopt.specs.inspection import ModelInspection, QuantizationInfo, QuantMethod

BF16 = WeightPath(label="BF16", bits_per_weight=16.0, math="bf16",
                  source="2 bytes per weight (bfloat16)")


def _int4_bits(group_size: int | None, zero_point: bool) -> float:
    g = group_size or 128
    return 4.0 + 16.0 / g + (4.0 / g if zero_point else 0.0)


def path_from_quantization(q: QuantizationInfo | None, compute_capability: str | None
                           ) -> WeightPath:
    """The weight path a checkpoint's own quantization implies on a device; the modules its
    config left unconverted stay at 16 bits on it (`honours_not_converted`)."""
    path = _scheme_path(q, compute_capability)
    kept = q.params_not_converted if q is not None else None
    if kept is None or path is BF16:
        return path
    n = sum(getattr(kept, f) for f in _LINEAR)
    return path.model_copy(update={
        "honours_not_converted": True,
        "source": path.source + (f"; {n / 1e9:.2f}B linear params left unconverted (16-bit)"
                                 if n else "")})


def _scheme_path(q: QuantizationInfo | None, compute_capability: str | None) -> WeightPath:
    """The path of the checkpoint's quantization scheme on a device.

    FP8 W8A8 executes FP8 math only on CC >= 8.9 (Ada/Hopper+); below that vLLM runs FP8
    weights through a W8A16 Marlin kernel (16-bit math). NVFP4 W4A4 runs FP4 math only on
    CC 10.x/12.x (Blackwell). W4A16 schemes always multiply in 16-bit.
    """
    if q is None:
        return BF16
    cc = float(compute_capability) if compute_capability else 0.0
    if q.method is QuantMethod.GGUF:
        kind = (q.format or "").split(" ")[0]
        return WeightPath(label=f"GGUF {kind}", bits_per_weight=gguf_bits_per_weight(kind),
                          math="bf16", unquantized_bits=gguf_bits_per_weight(kind),
                          source=f"GGUF block layout of {kind} ({q.source})")
    bits = q.bits or 16
    if bits >= 16:
        return BF16
    is_fp8 = "e4m3" in (q.format or "").lower() or q.method in (QuantMethod.FP8,
                                                                QuantMethod.MODELOPT)
    if bits == 8 and is_fp8:
        math: Literal["fp8", "bf16"] = "fp8" if q.activations_quantized and cc >= 8.9 else "bf16"
        return WeightPath(label=f"FP8 {'W8A8' if math == 'fp8' else 'W8A16'}",
                          bits_per_weight=8.0, math=math,
                          source=f"{q.method.value} FP8 weights; math {math} on CC {cc or '?'}")
    if bits == 8:
        return WeightPath(label=f"{q.method.value} INT8", bits_per_weight=8.0 + 16.0 / (
            q.group_size or 4096), math="int8" if q.activations_quantized else "bf16",
            source=q.source)
    fmt = (q.format or "").lower()
    if "e2m1" in fmt or "nvfp4" in fmt or q.method is QuantMethod.MXFP4:
        mx = q.method is QuantMethod.MXFP4 or "mxfp4" in fmt
        bpw = 4.25 if mx else 4.5
        native = q.activations_quantized and cc >= 10.0
        return WeightPath(label=("MXFP4" if mx else "NVFP4") + (" W4A4" if native else " W4A16"),
                          bits_per_weight=bpw, math="fp4" if native else "bf16",
                          source=f"{q.source}; FP4 math only on Blackwell (CC >= 10.0)")
    zero = q.method in (QuantMethod.AWQ,) or "asym" in fmt
    return WeightPath(label=f"{q.method.value.upper()} W{bits}A16",
                      bits_per_weight=_int4_bits(q.group_size, zero) * bits / 4, math="bf16",
                      source=f"{q.source}; group {q.group_size or 128}, "
                      f"{'with' if zero else 'no'} zero points")


def hypothetical_paths(compute_capability: str | None) -> list[WeightPath]:
    """Weight paths worth a ceiling row on this device (the quantization comparison table)."""
    cc = float(compute_capability) if compute_capability else 0.0
    paths = [BF16,
             WeightPath(label="FP8 W8A8" if cc >= 8.9 else "FP8 W8A16", bits_per_weight=8.0,
                        math="fp8" if cc >= 8.9 else "bf16",
                        source="FP8 e4m3 weights, per-channel scales (hypothetical checkpoint)"),
             WeightPath(label="INT4 W4A16 (AWQ/GPTQ g128)", bits_per_weight=_int4_bits(128, True),
                        math="bf16", source="int4 + fp16 scale + 4-bit zero per 128 weights")]
    if cc >= 10.0:
        paths.append(WeightPath(label="NVFP4 W4A4", bits_per_weight=4.5, math="fp4",
                                source="e2m1 + e4m3 scale per 16 weights, Blackwell FP4 math"))
    return paths


# Linear components a weight-quantization scheme converts (ParamBreakdown fields).
_LINEAR = ("attention", "dense_mlp", "routed_experts", "shared_experts", "mamba",
           "linear_attention")
_EXECUTED = ("attention", "dense_mlp", "routed_experts_active", "shared_experts", "mamba",
             "linear_attention")
KEPT_BITS = 16.0  # a module the quantization left unconverted keeps the checkpoint's bf16/fp16


def _kept(m: ModelInspection, path: WeightPath, fields: tuple[str, ...]) -> int:
    """Parameters of `fields` the checkpoint left at 16 bits, on its own weight path only."""
    q = m.quantization
    if not path.honours_not_converted or q is None or q.params_not_converted is None:
        return 0
    return sum(getattr(q.params_not_converted, f) for f in fields)


def _quantizable(m: ModelInspection, path: WeightPath) -> tuple[int, int, int]:
    """(linear parameters the scheme converts, linear parameters it left at 16 bits,
    other parameters: embeddings, head, norms, routers at the path's unquantized bits)."""
    p = m.params
    linear = sum(getattr(p, f) for f in _LINEAR)
    kept = _kept(m, path, _LINEAR)
    other = p.embedding + p.lm_head + p.norms + p.routers
    return linear - kept, kept, other


def weights_bytes(m: ModelInspection, path: WeightPath, exact_bytes: int | None = None) -> int:
    """Resident weight bytes (all experts: MoE residency uses total parameters). `exact_bytes`
    (the checkpoint's actual tensor bytes) wins when known: it includes every wider layer."""
    if exact_bytes is not None:
        return exact_bytes
    converted, kept, other = _quantizable(m, path)
    return int(converted * path.bits_per_weight / 8 + kept * KEPT_BITS / 8
               + other * path.unquantized_bits / 8)


def expected_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected number of distinct experts a batch of `tokens` routes to in one layer, if each
    token picks top_k of num_experts uniformly: E x (1 - (1 - k/E)^B). Real routing is skewed,
    which touches fewer experts; this is the traffic upper estimate for a uniform router."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def decode_weight_traffic_bytes(m: ModelInspection, path: WeightPath, batch: int,
                                exact_bytes: int | None = None) -> float:
    """Weight bytes one decode step reads: every executed weight once per step (ideal batch
    reuse), MoE experts only as far as the batch touches them, the input embedding only one row
    per token (a tied output head still reads the whole table). With `exact_bytes`, the
    component estimate is rescaled to the checkpoint's real size."""
    estimate = weights_bytes(m, path)
    p = m.params
    emb = p.embedding * path.unquantized_bits / 8
    read = estimate - emb + (emb if m.tie_word_embeddings else 0.0)
    read += batch * m.hidden_size * path.unquantized_bits / 8  # embedding rows looked up
    if m.moe and p.routed_experts:
        kept = _kept(m, path, ("routed_experts",))
        per_expert = ((p.routed_experts - kept) * path.bits_per_weight + kept * KEPT_BITS
                      ) / 8 / m.moe.num_experts
        touched = expected_experts_touched(m.moe.num_experts, m.moe.experts_per_token, batch)
        read -= (m.moe.num_experts - touched) * per_expert
    scale = exact_bytes / estimate if exact_bytes else 1.0
    return read * scale


def executed_linear_params(m: ModelInspection, path: WeightPath) -> dict[str, int]:
    """Linear parameters one token multiplies through (MoE: its routed experts only), plus the
    output head (tied or not), by the math that runs them: 2 FLOPs each per token. Modules the
    checkpoint left unconverted, and a 16-bit head, multiply at 16-bit rates whatever the
    path's math (gpt-oss's bf16 attention beside MXFP4 experts)."""
    p = m.params
    head = p.lm_head if p.lm_head else (p.embedding if m.tie_word_embeddings else 0)
    kept = _kept(m, path, _EXECUTED)
    converted = sum(getattr(p, f) for f in _EXECUTED) - kept
    sixteen = kept + (head if path.unquantized_bits >= KEPT_BITS else 0)
    by_math: dict[str, int] = {
        path.math: converted + (head if path.unquantized_bits < KEPT_BITS else 0)}
    if sixteen:
        by_math["bf16"] = by_math.get("bf16", 0) + sixteen
    return by_math


_NAMED = ("bf16", "fp16", "fp8", "int4", "awq", "gptq", "nvfp4", "mxfp4")


def named_path(name: str, compute_capability: str | None) -> WeightPath:
    """--weight-dtype values: bf16, fp8, int4/awq/gptq (W4A16 g128), nvfp4, mxfp4, or a GGUF
    tensor type (q4_0, q4_1, q8_0, q4_k...)."""
    from infopt.specs.base import InputError

    key = name.lower()
    cc = float(compute_capability) if compute_capability else 0.0
    if key in ("bf16", "fp16"):
        return BF16
    if key == "fp8":
        return hypothetical_paths(compute_capability)[1]
    if key in ("int4", "awq", "gptq"):
        return hypothetical_paths(compute_capability)[2]
    if key in ("nvfp4", "mxfp4"):
        native = cc >= 10.0
        return WeightPath(label=f"{key.upper()} {'W4A4' if native else 'W4A16'}",
                          bits_per_weight=4.5 if key == "nvfp4" else 4.25,
                          math="fp4" if native else "bf16",
                          source="FP4 e2m1 + block scales; FP4 math only on CC >= 10.0")
    try:
        bpw = gguf_bits_per_weight(key.upper())
    except Exception:  # noqa: BLE001 - unknown name: one clear error below
        raise InputError(f"unknown --weight-dtype '{name}'; use one of {', '.join(_NAMED)} or a "
                         "GGUF type such as q4_0, q4_1, q8_0, q4_k") from None
    return WeightPath(label=f"GGUF {key.upper()}", bits_per_weight=bpw, math="bf16",
                      unquantized_bits=bpw, source=f"GGUF {key.upper()} block layout")
