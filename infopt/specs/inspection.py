"""What a checkpoint is made of, as classified from its config.json (and hf_quant_config.json).

`ModelInspection.model_dump(mode="json")` is a stable JSON contract read by the fit, ceiling,
shortlist and report stages: keys are only ever added, never renamed or removed.

Units are in the field names: `_tokens` (sequence positions), `_bytes`; parameter counts are plain
integers of *logical* parameters (a 4-bit packed checkpoint still counts one per weight, so the
count is comparable with the publisher's figure; storage bytes belong to the quantization info).
`_16bit` figures assume 2 bytes per cached element; the cost model rescales for FP8 KV etc.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import Spec


class AttentionKind(StrEnum):
    MHA = "MHA"  # one K/V head per query head
    GQA = "GQA"  # 1 < kv heads < query heads
    MQA = "MQA"  # a single K/V head
    MLA = "MLA"  # DeepSeek multi-head latent attention: a compressed latent is cached, not K/V


class LayerKind(StrEnum):
    """The token mixer of a layer: what it keeps per sequence between decode steps."""

    FULL_ATTENTION = "full_attention"  # KV grows with the whole context
    SLIDING_ATTENTION = "sliding_attention"  # KV capped at sliding_window_tokens
    # Llama 4's RoPE layers: attention within a chunk of attention_chunk_tokens, so a sequence
    # keeps at most one chunk of KV (a token sees 1 to chunk tokens; the memory bound is the chunk)
    CHUNKED_ATTENTION = "chunked_attention"
    # DeepSeek-V3.2's sparse attention (DSA): MLA over the index_topk tokens a lightning indexer
    # picks; the latent and the indexer's keys are cached for the whole context
    INDEXED_ATTENTION = "indexed_attention"
    LINEAR_ATTENTION = "linear_attention"  # fixed-size recurrent state (e.g. Gated DeltaNet)
    MAMBA = "mamba"  # SSM state + conv buffer per sequence, no per-token KV


class MlpKind(StrEnum):
    DENSE = "dense"
    MOE = "moe"


class QuantMethod(StrEnum):
    AWQ = "awq"
    GPTQ = "gptq"
    FP8 = "fp8"  # HF fine-grained / DeepSeek FP8 and fbgemm_fp8
    COMPRESSED_TENSORS = "compressed-tensors"  # llm-compressor output
    BITSANDBYTES = "bitsandbytes"
    MXFP4 = "mxfp4"
    MODELOPT = "modelopt"  # NVIDIA TensorRT Model Optimizer (FP8, NVFP4, INT4-AWQ, ...)
    MLX = "mlx"  # mlx-lm: per-group scale and bias, no quant_method key
    GGUF = "gguf"  # llama.cpp block quantization, read from the GGUF tensor types
    OTHER = "other"  # a quant_method this parser does not know: see `format`, verify by hand


class ParamBreakdown(Spec):
    """Logical parameters by component; params_total is the sum of all but `mtp`."""

    embedding: int  # input token embedding table (a lookup: one row read per token)
    lm_head: int  # 0 when tied to the embedding
    attention: int  # q/k/v/o (or MLA projections), their biases, q/k norms, sinks
    dense_mlp: int  # dense-MLP layers
    routed_experts: int  # all routed experts, all layers
    routed_experts_active: int  # experts_per_token of them per layer
    shared_experts: int
    routers: int  # router weights, biases and score-correction biases
    mamba: int  # Mamba-2 mixers (in/out projections, conv, dt/A/D, gated norm)
    linear_attention: int = 0  # Gated DeltaNet mixers (projections, conv, dt/A, gated norm)
    norms: int  # per-layer and final norms
    mtp: int  # multi-token-prediction module(s); NOT in params_total (publishers exclude it)


class QuantizationInfo(Spec):
    """How the checkpoint's weights (and, where it says so, activations) are encoded on disk.

    `activations_quantized` decides the arithmetic path: W4A16/W8A16 dequantize weights into a
    16-bit GEMM (decode is bandwidth-bound on packed weights); W8A8-FP8 or W4A4-NVFP4 can run the
    GEMM itself in low precision where the GPU supports it.
    """

    method: QuantMethod
    bits: int | None  # weight bits (4, 8); None when the config does not say
    # Weights sharing one scale along the input dim; None: per-channel or per-tensor scales.
    group_size: int | None
    weight_block_size: list[int] | None = None  # 2-D block scales, e.g. [128, 128] for DeepSeek FP8
    format: str | None  # element encoding / packing: e4m3, e2m1, nf4, int4 gemm, pack-quantized...
    activations_quantized: bool
    activation_bits: int | None = None
    scheme: str  # "W4A16", "W8A8", "W4A4": weight/activation bits, the arithmetic path in brief
    kv_cache_quant: str | None = None  # a KV-cache scheme the checkpoint ships scales for (FP8)
    modules_not_converted: list[str] = Field(default_factory=list)  # left in 16-bit
    # What those names cover, matched against the model's modules (infopt/model/modules.py):
    # parameters per component kept at 16 bits; set by classify_config, None before.
    params_not_converted: ParamBreakdown | None = None
    not_converted_partial: list[str] = Field(default_factory=list)  # named part of a component
    not_converted_unmatched: list[str] = Field(default_factory=list)  # matched no module
    producer: str | None = None  # e.g. "modelopt 0.33.0"
    source: str  # which file and keys this was read from


class AttentionInfo(Spec):
    kind: AttentionKind
    num_query_heads: int
    num_kv_heads: int  # MLA: the nominal head count; what is cached is the latent, see kv_lora_rank
    head_dim: int  # per-head dim of q/k (MLA: qk_nope_head_dim + qk_rope_head_dim)
    v_head_dim: int  # equal to head_dim except in MLA
    kv_lora_rank: int | None = None  # MLA latent width (cached per token per layer)
    qk_rope_head_dim: int | None = None  # MLA decoupled RoPE key width (also cached)
    q_lora_rank: int | None = None  # MLA low-rank query compression; None: plain q projection
    sinks: bool = False  # learned per-head attention-sink logits (gpt-oss)
    # DeepSeek sparse attention (indexed_attention layers): the lightning indexer's heads and key
    # width, and the cached tokens each query attends (index_topk); None without an indexer.
    index_n_heads: int | None = None
    index_head_dim: int | None = None
    index_topk: int | None = None


class MoeInfo(Spec):
    num_experts: int  # routed experts per MoE layer
    experts_per_token: int  # routed experts selected per token
    num_shared_experts: int  # always-on experts per MoE layer
    num_moe_layers: int
    num_dense_layers: int  # layers with a dense MLP instead (DeepSeek first_k_dense_replace)
    expert_intermediate_size: int
    shared_expert_intermediate_size: int | None  # total width of the shared path, None if none
    gated_experts: bool  # gate+up+down (SwiGLU) vs up+down (Nemotron-H relu2)


class MambaInfo(Spec):
    """Mamba-2 mixer shape: per-sequence state, independent of context length."""

    num_heads: int
    head_dim: int
    state_size: int  # d_state (N)
    n_groups: int
    conv_kernel: int
    ssm_state_elements_per_layer: int  # heads x head_dim x state_size
    conv_state_elements_per_layer: int  # (conv_kernel - 1) x (inner + 2 x n_groups x state_size)
    ssm_cache_dtype: str | None  # as the config asks (Nemotron-H: float32), reported as-is


class LinearAttentionInfo(Spec):
    """Gated DeltaNet mixer shape (Qwen3-Next, Qwen3.5): a fixed per-sequence state."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    conv_state_elements_per_layer: int  # (conv_kernel - 1) x (2 x key dim + value dim)
    recurrent_state_elements_per_layer: int  # value heads x key_head_dim x value_head_dim
    state_dtype: str | None  # as the config asks for the recurrent state (mamba_ssm_dtype)


class KvCacheInfo(Spec):
    """Per-sequence cache at 2 bytes per element, derived from the layer classification.

    Total for one sequence of T tokens: (full + indexer) x T + sliding x min(T, window)
    + recurrent.
    """

    # Layers whose cache grows with the context: full attention, MLA, and indexed (sparse)
    # layers, whose per-token cost is the latent.
    full_attention_layers: int
    bytes_per_token_16bit: int  # over those layers: grows with every token
    # Windowed layers: sliding-window layers, or Llama 4's chunked local-attention layers (a
    # model has one kind or the other); each holds at most sliding_window_tokens per sequence.
    sliding_attention_layers: int
    sliding_bytes_per_token_16bit: int  # over windowed layers: stops growing at the window
    sliding_window_tokens: int | None  # the sliding window, or the attention chunk
    recurrent_layers: int  # mamba / linear-attention layers
    recurrent_state_bytes_per_sequence_16bit: int  # fixed per sequence, whatever its length
    # The same at the dtypes the config asks for the state (an fp32 SSM/recurrent state where
    # mamba_ssm_cache_dtype / mamba_ssm_dtype says float32); None: as the 16-bit figure.
    recurrent_state_bytes_per_sequence: int | None = None
    # The sparse-attention indexer's key cache over indexed layers, at the format engines store
    # it whatever the KV cache dtype (DeepSeek-V3.2: FP8 keys + an fp32 scale per 128); grows
    # with every token like the latent beside it.
    indexer_bytes_per_token: int = 0

    def bytes_per_sequence_16bit(self, context_tokens: int) -> int:
        window = self.sliding_window_tokens or context_tokens
        return ((self.bytes_per_token_16bit + self.indexer_bytes_per_token) * context_tokens
                + self.sliding_bytes_per_token_16bit * min(context_tokens, window)
                + self.recurrent_state_bytes_per_sequence_16bit)


class ModelInspection(Spec):
    # Caller-supplied facts (hub metadata, not config.json).
    model: str  # ORG/NAME or a local path, as the caller names it
    revision: str | None
    license: str | None
    gated: bool | None
    chat_template_present: bool | None

    # From config.json.
    architecture: str  # architectures[0], e.g. "LlamaForCausalLM"
    model_type: str  # the text decoder's model_type, e.g. "llama"
    weights_dtype: str | None  # torch_dtype / dtype as declared
    num_layers: int  # decoder blocks, excluding MTP/draft layers
    hidden_size: int
    vocab_size: int
    native_context_tokens: int  # max_position_embeddings; never extended by rope_scaling
    rope_scaling: dict[str, Any] | None  # reported as-is, never applied
    tie_word_embeddings: bool
    attention: AttentionInfo
    layer_kinds: dict[LayerKind, int]  # token mixer -> layer count
    mlp_kinds: dict[MlpKind, int]  # feed-forward kind -> layer count (separate from the mixer)
    sliding_window_tokens: int | None  # only when some layer actually slides
    attention_chunk_tokens: int | None = None  # only when some layer attends in chunks (Llama 4)
    moe: MoeInfo | None
    mamba: MambaInfo | None
    linear_attention: LinearAttentionInfo | None = None
    mtp_layers: int  # DeepSeek-V3 num_nextn_predict_layers: usable as a speculative draft
    multimodal_encoders: list[str]  # e.g. ["vision_config"]; their parameters are not counted
    params_total: int
    # Weights one token's forward pass multiplies through: params_total minus unselected routed
    # experts and minus the input embedding table (one row is read), unless it is tied.
    params_active_per_token: int
    params: ParamBreakdown
    kv_cache: KvCacheInfo
    quantization: QuantizationInfo | None
    notes: list[str]  # how ambiguous keys were read; what a reader must verify
    # Keys config.json left out, taken from the family's configuration class (defaults.py),
    # and that class ("transformers 5.24.0 Gemma3TextConfig"); empty when the file said all.
    defaults_used: dict[str, Any] = Field(default_factory=dict)
    defaults_source: str | None = None
    # Layers whose attention or FFN block is replaced by one hidden x hidden Linear or skipped
    # (DeciLM block_configs): not token mixers / MLPs, so not in layer_kinds / mlp_kinds.
    linear_replaced_blocks: int = 0
    skipped_blocks: int = 0
