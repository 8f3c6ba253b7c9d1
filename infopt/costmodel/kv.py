"""KV-cache bytes per token and per sequence, per GPU, from the layer classification.

Full-attention layers: 2 (K and V) x kv_heads x head_dim x bytes per element, per token.
MLA layers: one latent of (kv_lora_rank + qk_rope_head_dim) elements per token (no K/V split).
DeepSeek-V3.2's indexed (sparse) layers: that latent plus the indexer's key, which engines keep
in FP8 + fp32 scales whatever the KV dtype; with an FP8 KV dtype the latent itself is stored in
FlashMLA's fp8_ds_mla layout (656 B per token per layer for V3.2, not 576: the 512 latent
elements in FP8, 4 fp32 scales, the 64 rope elements left bf16; vLLM
v1/attention/backends/mla/flashmla_sparse.py, SGLang's DSA kv_cache_dim = 656).
Sliding-window layers (and Llama 4's chunked local-attention layers) stop growing at the window
(chunk); Mamba/linear layers hold a fixed state.
Tensor parallelism splits KV heads across ranks (a rank holds ceil(kv_heads / tp) heads: heads
are replicated when tp > kv_heads); MLA's latent is not split by head, so vLLM/SGLang replicate
it on every TP rank, and the indexer's keys too (vLLM: "no tensor parallel, just replicated").
Pipeline parallelism splits layers: a rank holds ceil(layers / pp).
"""

from __future__ import annotations

import math

from infopt.specs.base import InputError
from infopt.specs.inspection import AttentionKind, ModelInspection

# Bytes per cached element. GGUF q8_0/q4_0 include their block scale (34/32, 18/32 bytes);
# fp8 variants are 1 byte (+ per-tensor scales, negligible).
KV_ELEMENT_BYTES: dict[str, float] = {
    "auto": 2.0, "bf16": 2.0, "fp16": 2.0, "f16": 2.0, "float16": 2.0, "bfloat16": 2.0,
    "f32": 4.0, "fp32": 4.0,
    "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0,
    "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
}


def kv_element_bytes(dtype: str) -> float:
    try:
        return KV_ELEMENT_BYTES[dtype.lower()]
    except KeyError:
        raise InputError(f"unknown KV cache dtype '{dtype}'; known: "
                         f"{', '.join(sorted(KV_ELEMENT_BYTES))}") from None


def _tp_head_share(m: ModelInspection, tp: int) -> float:
    """Fraction of the per-token KV one TP rank holds."""
    a = m.attention
    if a.kind is AttentionKind.MLA:
        return 1.0  # latent replicated on every rank
    return math.ceil(a.num_kv_heads / tp) / a.num_kv_heads


def _pp_layer_share(layers: int, pp: int) -> float:
    return math.ceil(layers / pp) / layers if layers else 0.0


def _attention_cache_bytes_per_token(m: ModelInspection, kv_dtype: str) -> float:
    """K/V or latent bytes per token over the growing layers, on one rank before TP/PP."""
    kv, a = m.kv_cache, m.attention
    elem = kv_element_bytes(kv_dtype)
    if a.index_topk and a.kv_lora_rank and elem == 1.0:  # FlashMLA sparse: fp8_ds_mla rows
        row = a.kv_lora_rank + a.kv_lora_rank // 128 * 4 + (a.qk_rope_head_dim or 0) * 2
        return kv.full_attention_layers * row
    return kv.bytes_per_token_16bit * elem / 2.0  # kv_cache figures are at 2 bytes/element


def attention_cache_bytes_per_token_per_gpu(m: ModelInspection, kv_dtype: str, tp: int = 1,
                                            pp: int = 1) -> float:
    """K/V (or MLA latent) bytes per token over the layers whose cache grows with the whole
    context; what a sparse layer's attention reads per attended token."""
    return (_attention_cache_bytes_per_token(m, kv_dtype) * _tp_head_share(m, tp)
            * _pp_layer_share(m.kv_cache.full_attention_layers, pp))


def indexer_bytes_per_token_per_gpu(m: ModelInspection, pp: int = 1) -> float:
    """The sparse-attention indexer's key cache per token: at its own format, whole on every
    TP rank; 0 without an indexer."""
    kv = m.kv_cache
    return kv.indexer_bytes_per_token * _pp_layer_share(kv.full_attention_layers, pp)


def kv_bytes_per_token_per_gpu(m: ModelInspection, kv_dtype: str, tp: int = 1,
                               pp: int = 1) -> float:
    """Bytes per token over the layers whose cache grows with the whole context (with a
    sparse-attention indexer's keys)."""
    return (attention_cache_bytes_per_token_per_gpu(m, kv_dtype, tp, pp)
            + indexer_bytes_per_token_per_gpu(m, pp))


def state_bytes_per_sequence_per_gpu(m: ModelInspection, kv_dtype: str, context_tokens: int,
                                     tp: int = 1, pp: int = 1) -> float:
    """Per-sequence bytes that do not scale with context: sliding-window layers (capped at the
    window) and recurrent state. Recurrent state is costed at the dtypes the config asks for it
    (an fp32 SSM state where Nemotron-H or Qwen3.5 say so; vLLM copies that setting into its
    cache config); KV quantization does not apply to it."""
    kv = m.kv_cache
    per_elem = kv_element_bytes(kv_dtype) / 2.0
    window = min(context_tokens, kv.sliding_window_tokens or context_tokens)
    sliding = (kv.sliding_bytes_per_token_16bit * per_elem * window * _tp_head_share(m, tp)
               * _pp_layer_share(kv.sliding_attention_layers, pp))
    state = kv.recurrent_state_bytes_per_sequence
    if state is None:
        state = kv.recurrent_state_bytes_per_sequence_16bit
    recurrent = state / tp * _pp_layer_share(
        kv.recurrent_layers, pp)
    return sliding + recurrent


def attended_tokens(m: ModelInspection, context_tokens: int) -> int:
    """Cached tokens one query attends per growing layer: all of them, or a sparse layer's
    index_topk (DeepSeek-V3.2: 2048, whatever the context)."""
    topk = m.attention.index_topk
    return min(context_tokens, topk) if topk else context_tokens


def decode_read_bytes_per_sequence_per_gpu(m: ModelInspection, kv_dtype: str,
                                           context_tokens: int, tp: int = 1,
                                           pp: int = 1) -> float:
    """Cache bytes one decode step reads for one sequence at `context_tokens`: the attended
    K/V or latents (a sparse layer's index_topk of them), every cached indexer key (the indexer
    scores them all to pick those), and the windowed and recurrent state."""
    return (attended_tokens(m, context_tokens)
            * attention_cache_bytes_per_token_per_gpu(m, kv_dtype, tp, pp)
            + context_tokens * indexer_bytes_per_token_per_gpu(m, pp)
            + state_bytes_per_sequence_per_gpu(m, kv_dtype, context_tokens, tp, pp))


def sequence_bytes_per_gpu(m: ModelInspection, kv_dtype: str, context_tokens: int, tp: int = 1,
                           pp: int = 1) -> float:
    return (kv_bytes_per_token_per_gpu(m, kv_dtype, tp, pp) * context_tokens
            + state_bytes_per_sequence_per_gpu(m, kv_dtype, context_tokens, tp, pp))
