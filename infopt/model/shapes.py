"""Parameter counts and cached state of each block kind, from config keys (see classify.py).

Each function takes the config reader and returns logical parameter counts per layer (one per
weight whatever the storage) and, for token mixers, what one sequence keeps between steps.
Sources per block are named in each docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from infopt.specs.inspection import (
    AttentionInfo,
    AttentionKind,
    LinearAttentionInfo,
    MambaInfo,
)


class Keys(Protocol):
    def get(self, *names: str, default: Any = None) -> Any: ...


@dataclass(frozen=True)
class Family:
    """What config.json leaves implicit for a model_type, read from its modeling code."""

    qkv_bias: bool | None = None  # None: follow `attention_bias` (which then covers o too)
    o_bias: bool | None = None
    qk_norm: bool = False  # per-head RMSNorm on q and k: 2 x head_dim per layer
    gated_q: bool = False  # q_proj also emits a per-head output gate (Qwen3-Next attention)
    gated_mlp: bool = True  # gate+up+down (SwiGLU); False: up+down
    expert_bias: bool = False  # biases on every expert projection (gpt-oss)
    router_bias: bool = False  # router Linear has a bias (gpt-oss)
    score_correction_bias: bool = False  # e_score_correction_bias per expert (noaux_tc routing)
    shared_expert_gate: bool = False  # sigmoid gate H -> 1 on the shared expert (Qwen2-MoE)
    sinks: bool = False  # per-head learned attention-sink logits
    norms_per_block: int = 1  # Gemma 2/3: a pre- and a post-norm around each sub-block
    shared_experts: int = 0  # always-on experts of the routed width the config does not count
    chunked_rope: bool = False  # layers read by Llama 4's no_rope_layers / chunk rule
    indexed_attention: bool = False  # every attention layer has a DSA indexer (DeepSeek-V3.2)


@dataclass(frozen=True)
class Attention:
    info: AttentionInfo
    mla: bool
    head_dim: int
    q_dim: int

    def params(self, k: Keys, fam: Family, hidden: int, kv_heads: int,
               indexed: bool = False) -> int:
        """q, k, v, o (+ biases, q/k norms, sinks) for a layer with `kv_heads` KV heads; MLA:
        q_a/q_b (or q), kv_a_with_mqa, kv_b, o and the two latent norms; an indexed layer adds
        its indexer (indexer_params)."""
        a = self.info
        if self.mla:
            q_rank, kv_rank = a.q_lora_rank, a.kv_lora_rank or 0
            rope, nope = a.qk_rope_head_dim or 0, a.head_dim - (a.qk_rope_head_dim or 0)
            q = (hidden * q_rank + q_rank + q_rank * a.num_query_heads * a.head_dim if q_rank
                 else hidden * a.num_query_heads * a.head_dim)
            return (q + hidden * (kv_rank + rope) + kv_rank
                    + kv_rank * a.num_query_heads * (nope + a.v_head_dim)
                    + a.num_query_heads * a.v_head_dim * hidden
                    + (self.indexer_params(hidden) if indexed else 0))
        qkv_bias = fam.qkv_bias if fam.qkv_bias is not None else bool(k.get("attention_bias"))
        o_bias = fam.o_bias if fam.o_bias is not None else bool(k.get("attention_bias"))
        gated = k.get("attn_output_gate", default=fam.gated_q)
        q_out = self.q_dim * (2 if gated else 1)
        kv_dim = kv_heads * self.head_dim
        return (hidden * q_out + 2 * hidden * kv_dim + self.q_dim * hidden
                + (q_out + 2 * kv_dim if qkv_bias else 0) + (hidden if o_bias else 0)
                + (2 * self.head_dim if fam.qk_norm else 0)
                + (a.num_query_heads if fam.sinks else 0))

    def indexer_params(self, hidden: int) -> int:
        """DeepSeek-V3.2's lightning indexer (transformers modeling_deepseek_v32.py
        DeepseekV32Indexer; DeepSeek-V3.2-Exp inference/model.py Indexer): wq_b from the
        q latent to index_n_heads x index_head_dim, wk H -> index_head_dim, a LayerNorm on the
        key (weight and bias), weights_proj H -> index_n_heads."""
        a = self.info
        heads, dim = a.index_n_heads or 0, a.index_head_dim or 0
        return (a.q_lora_rank or 0) * heads * dim + hidden * dim + 2 * dim + hidden * heads

    def indexer_bytes_per_token(self) -> int:
        """The indexer's key cache per token of one layer, FP8 keys and one fp32 scale per 128
        elements whatever the KV cache dtype: vLLM deepseek_v2.py Indexer allocates
        `index_head_dim + index_head_dim // quant_block_size * 4` uint8 per token
        (quant_block_size 128); DeepSeek's reference keeps k_cache float8_e4m3fn [index_head_dim]
        and k_scale_cache float32 [index_head_dim // 128]. 128 + 4 = 132 bytes for V3.2."""
        dim = self.info.index_head_dim or 0
        return dim + dim // 128 * 4

    def kv_bytes_per_token(self, kv_heads: int) -> int:
        """16-bit cache per token of one layer: MLA one latent + rope key; else K and V."""
        a = self.info
        if self.mla:
            return ((a.kv_lora_rank or 0) + (a.qk_rope_head_dim or 0)) * 2
        return 2 * kv_heads * self.head_dim * 2


def attention(k: Keys, fam: Family, hidden: int, n_heads: int, n_kv: int,
              indexed: bool = False) -> Attention:
    """The attention block's shape; `indexed`: its layers carry a DSA indexer (the index_*
    keys, which the caller has checked are present)."""
    if k.get("kv_lora_rank") is not None:
        kv_rank, q_rank = int(k.get("kv_lora_rank")), k.get("q_lora_rank")
        nope, rope = int(k.get("qk_nope_head_dim")), int(k.get("qk_rope_head_dim"))
        info = AttentionInfo(kind=AttentionKind.MLA, num_query_heads=n_heads, num_kv_heads=n_kv,
                             head_dim=nope + rope, v_head_dim=int(k.get("v_head_dim")),
                             kv_lora_rank=kv_rank, qk_rope_head_dim=rope,
                             q_lora_rank=int(q_rank) if q_rank else None,
                             index_n_heads=_index(k, "index_n_heads", indexed),
                             index_head_dim=_index(k, "index_head_dim", indexed),
                             index_topk=_index(k, "index_topk", indexed))
        return Attention(info, True, nope + rope, n_heads * (nope + rope))
    head_dim = int(k.get("head_dim", default=0) or hidden // n_heads)
    kind = (AttentionKind.MQA if n_kv == 1 else AttentionKind.MHA if n_kv == n_heads
            else AttentionKind.GQA)
    info = AttentionInfo(kind=kind, num_query_heads=n_heads, num_kv_heads=n_kv,
                         head_dim=head_dim, v_head_dim=head_dim, sinks=fam.sinks)
    return Attention(info, False, head_dim, n_heads * head_dim)


def _index(k: Keys, key: str, indexed: bool) -> int | None:
    return int(k.get(key)) if indexed else None


def dense_mlp(k: Keys, fam: Family, hidden: int, intermediate: int) -> int:
    """3 x H x I when gated (SwiGLU / GeGLU), 2 x H x I otherwise, plus biases (mlp_bias)."""
    mats = 3 if fam.gated_mlp else 2
    return mats * hidden * intermediate + (
        (mats - 1) * intermediate + hidden if k.get("mlp_bias") else 0)


def mamba(k: Keys, hidden: int) -> tuple[int, MambaInfo, int]:
    """Mamba-2 mixer (Nemotron-H sizes it by heads): in_proj, depthwise conv (+bias), dt_bias,
    A_log, D, gated norm, out_proj. Returns (params, info, 16-bit state bytes per layer)."""
    nh, hd = int(k.get("mamba_num_heads")), int(k.get("mamba_head_dim"))
    d_state, groups = int(k.get("ssm_state_size")), int(k.get("n_groups"))
    kernel = int(k.get("conv_kernel"))
    d_inner = nh * hd
    conv_dim = d_inner + 2 * groups * d_state
    proj_bias = bool(k.get("mamba_proj_bias"))
    params = (hidden * (d_inner + conv_dim + nh) + (d_inner + conv_dim + nh) * proj_bias
              + conv_dim * kernel + conv_dim * bool(k.get("use_conv_bias", default=True))
              + 3 * nh + d_inner + d_inner * hidden + hidden * proj_bias)
    ssm, conv = nh * hd * d_state, (kernel - 1) * conv_dim
    info = MambaInfo(num_heads=nh, head_dim=hd, state_size=d_state, n_groups=groups,
                     conv_kernel=kernel, ssm_state_elements_per_layer=ssm,
                     conv_state_elements_per_layer=conv,
                     ssm_cache_dtype=k.get("mamba_ssm_cache_dtype"))
    return params, info, (ssm + conv) * 2


def linear_attention(k: Keys, hidden: int) -> tuple[int, LinearAttentionInfo]:
    """Gated DeltaNet (transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet; Qwen3.5
    splits the same projections into in_proj_qkv / z / b / a): in_proj to q, k (key dim each),
    v and the output gate z (value dim each) and the per-value-head b and a; a depthwise conv
    over q, k, v without bias; dt_bias and A_log per value head; a gated RMSNorm of one value
    head's width; out_proj value dim -> H. State per sequence: the conv window, (kernel - 1) x
    conv dim, and the delta-rule memory, value heads x key_head_dim x value_head_dim."""
    nk, nv = int(k.get("linear_num_key_heads")), int(k.get("linear_num_value_heads"))
    dk, dv = int(k.get("linear_key_head_dim")), int(k.get("linear_value_head_dim"))
    kernel = int(k.get("linear_conv_kernel_dim"))
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    params = (hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * nv + conv_dim * kernel
              + 2 * nv + dv + value_dim * hidden)
    info = LinearAttentionInfo(
        num_key_heads=nk, num_value_heads=nv, key_head_dim=dk, value_head_dim=dv,
        conv_kernel=kernel, conv_state_elements_per_layer=(kernel - 1) * conv_dim,
        recurrent_state_elements_per_layer=nv * dk * dv,
        state_dtype=k.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype"))
    return params, info


def fp32_state(dtype: str | None) -> bool:
    return dtype in ("float32", "fp32")
