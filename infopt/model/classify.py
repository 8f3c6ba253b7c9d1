"""Classify a checkpoint's components from its config.json: attention kind, layer kinds, MoE,
Mamba, MTP, quantization, parameter counts and KV-cache bytes per token.

Pure: a dict in, a `ModelInspection` out. Hub facts (revision, license, gating, chat template)
are the caller's inputs; nothing here reads files or the network.

Parameter counting (logical parameters, one per weight whatever the storage format):

* embedding V x H; lm_head V x H unless tie_word_embeddings; final norm H;
* attention per attention layer: q, k, v, o projections, their biases where the family or
  `attention_bias` has them, per-head q/k norms (Qwen3), sink logits (gpt-oss); MLA: q_a/q_b (or
  q), kv_a_with_mqa, kv_b, o and the two latent norms;
* dense MLP: 3 x H x I when gated (SwiGLU), 2 x H x I otherwise (Nemotron-H relu2), plus biases;
* MoE layer: every routed expert, shared experts, router weight and router/score-correction bias;
* Mamba-2 mixer: in_proj, depthwise conv (+bias), dt_bias, A_log, D, gated norm, out_proj;
* norms: one per sub-block (two per classic decoder layer, one per Nemotron-H block);
* MTP modules (DeepSeek-V3 `num_nextn_predict_layers`) go to `params.mtp`, outside params_total,
  as the publisher's 671B excludes them; their embedding/head are shared, so not counted again.

`params_active_per_token` is what one token's forward pass multiplies through: params_total
minus the routed experts it does not select and minus the input embedding table (a token reads
one row of it), unless the embedding is tied and so read in full as the output head. This is the
convention of DeepSeek (36.6B "activation parameters, including 0.9B for the output head"),
NVIDIA (Nemotron 3 Nano "3.2B active, 3.6B with embeddings") and OpenAI (gpt-oss 3.61B); Qwen
and Mistral state active counts with the embedding table: add `params.embedding` to compare.

KV bytes per token at 16 bit: full-attention layers x kv_heads x head_dim x 2 (K and V) x 2
bytes; MLA layers cache (kv_lora_rank + qk_rope_head_dim) x 2 bytes; sliding layers are reported
apart (they stop growing at the window); Mamba layers hold a fixed per-sequence state.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from infopt.model.quantization import parse_quantization
from infopt.specs.base import InputError
from infopt.specs.inspection import (
    AttentionInfo,
    AttentionKind,
    KvCacheInfo,
    LayerKind,
    MambaInfo,
    MlpKind,
    ModelInspection,
    MoeInfo,
    ParamBreakdown,
)


@dataclass(frozen=True)
class _Family:
    """What config.json leaves implicit for a model_type, read from its modeling code."""

    qkv_bias: bool | None = None  # None: follow `attention_bias` (which then covers o too)
    o_bias: bool | None = None
    qk_norm: bool = False  # per-head RMSNorm on q and k: 2 x head_dim per layer
    gated_mlp: bool = True  # gate+up+down (SwiGLU); False: up+down
    expert_bias: bool = False  # biases on every expert projection (gpt-oss)
    router_bias: bool = False  # router Linear has a bias (gpt-oss)
    score_correction_bias: bool = False  # e_score_correction_bias per expert (noaux_tc routing)
    shared_expert_gate: bool = False  # sigmoid gate H -> 1 on the shared expert (Qwen2-MoE)
    sinks: bool = False  # per-head learned attention-sink logits


# transformers models/<name>/modeling_<name>.py (and the checkpoints' remote code for
# deepseek_v3 / nemotron_h) at the versions named in each config's transformers_version.
_FAMILIES: dict[str, _Family] = {
    "llama": _Family(),
    "mistral": _Family(),
    "mixtral": _Family(),
    "phi3": _Family(),  # fused qkv_proj/gate_up_proj: same counts as split projections
    "qwen2": _Family(qkv_bias=True, o_bias=False),
    "qwen2_moe": _Family(qkv_bias=True, o_bias=False, shared_expert_gate=True),
    "qwen3": _Family(qk_norm=True),
    "qwen3_moe": _Family(qk_norm=True),
    "deepseek_v2": _Family(),
    "deepseek_v3": _Family(score_correction_bias=True),
    "gpt_oss": _Family(expert_bias=True, router_bias=True, sinks=True),
    "nemotron_h": _Family(gated_mlp=False, score_correction_bias=True),
}

_MIXER_CHARS = {"M": LayerKind.MAMBA, "*": LayerKind.FULL_ATTENTION}  # Nemotron-H pattern
_MLP_CHARS = {"E": MlpKind.MOE, "-": MlpKind.DENSE}
_ENCODER_HINTS = ("vision", "audio", "speech", "image", "visual", "video")


# Keys that count something, with their least allowed value: each must be a whole number when
# present. int() would take "32" or true from a hand-edited config.json silently, and a zero or
# negative count divides by zero or sizes a model of no layers further down.
_COUNTS = {**dict.fromkeys((
    "num_hidden_layers", "n_layer", "num_layers", "hidden_size", "d_model", "n_embd",
    "vocab_size", "max_position_embeddings", "max_sequence_length", "seq_length", "n_positions",
    "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim",
    "intermediate_size", "ffn_hidden_size", "moe_intermediate_size", "num_experts_per_tok",
    "experts_per_token", "moe_topk", "kv_lora_rank", "q_lora_rank", "v_head_dim",
    "moe_layer_freq", "decoder_sparse_step", "mamba_num_heads", "mamba_head_dim",
    "ssm_state_size", "n_groups", "conv_kernel"), 1),
    **dict.fromkeys((
        "n_routed_experts", "num_local_experts", "num_experts", "n_shared_experts",
        "first_k_dense_replace", "num_nextn_predict_layers", "max_window_layers",
        "sliding_window", "qk_nope_head_dim", "qk_rope_head_dim"), 0)}
_SHAPES = {"architectures": list, "layer_types": list, "mlp_only_layers": list,
           "hybrid_override_pattern": str}


def _check_types(cfg: dict[str, Any]) -> None:
    """Refuse a count that is not a whole number at or above its least value, and a list or
    pattern of the wrong JSON type, naming the key (the caller names the file)."""
    for key, least in _COUNTS.items():
        v = cfg.get(key)
        if v is None:
            continue
        whole = (isinstance(v, numbers.Integral) and not isinstance(v, bool)) or (
            isinstance(v, float) and v.is_integer())
        if not whole or v < least:
            raise InputError(f"{key} must be a whole number >= {least}, got {v!r}"
                             + (f" (a JSON {'string' if isinstance(v, str) else 'boolean'}); "
                                "write the number without quotes" if isinstance(v, (str, bool))
                                else "; pass the checkpoint's config.json unmodified"))
    for key, shape in _SHAPES.items():
        if cfg.get(key) is not None and not isinstance(cfg[key], shape):
            raise InputError(f"{key} must be a JSON {'array' if shape is list else 'string'}, "
                             f"got {cfg[key]!r}; pass the checkpoint's config.json unmodified")


class _Keys:
    """Reads a config dict by alias lists and remembers what was missing, to report it once."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.missing: list[str] = []

    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            if self.cfg.get(name) is not None:
                return self.cfg[name]
        return default

    def need(self, *names: str) -> int:
        value = self.get(*names)
        if value is None:
            self.missing.append("|".join(names))
            return 0
        return int(value)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs nest the language model under text_config (Llama 4, Gemma 3, LLaVA)."""
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("num_hidden_layers") is not None:
        return text
    return config


def _layer_plan(k: _Keys, n: int, moe: bool, notes: list[str]
                ) -> tuple[list[LayerKind | None], list[MlpKind | None], int | None]:
    """Per layer: token mixer, feed-forward kind, and the sliding window if any layer slides."""
    pattern = k.get("hybrid_override_pattern")
    if pattern is not None:  # Nemotron-H: one block per character, a mixer OR an MLP
        if len(pattern) != n or set(pattern) - set(_MIXER_CHARS) - set(_MLP_CHARS):
            raise InputError(
                f"hybrid_override_pattern '{pattern}' must have num_hidden_layers={n} characters "
                "from M (Mamba-2), * (attention), E (MoE), - (dense MLP); fix the config.")
        return ([_MIXER_CHARS.get(c) for c in pattern], [_MLP_CHARS.get(c) for c in pattern],
                None)

    window = k.get("sliding_window")
    types = k.get("layer_types")
    if types is not None:
        try:
            mixers: list[LayerKind | None] = [LayerKind(t) for t in types]
        except ValueError as exc:
            raise InputError(f"layer_types has a kind infopt does not know ({exc}); known: "
                             f"{', '.join(x.value for x in LayerKind)}.") from exc
        if len(mixers) != n:
            raise InputError(f"layer_types lists {len(mixers)} layers but num_hidden_layers is "
                             f"{n}; pass the checkpoint's config.json unmodified.")
    elif window and k.get("use_sliding_window") is not False:
        # Qwen2 convention: layers from max_window_layers up slide; elsewhere (Mistral v0.1,
        # Phi-3) a non-null sliding_window applies to every layer.
        first = int(k.get("max_window_layers", default=0)) if "use_sliding_window" in k.cfg else 0
        mixers = [LayerKind.SLIDING_ATTENTION if i >= first else LayerKind.FULL_ATTENTION
                  for i in range(n)]
    else:
        if window:
            notes.append(f"sliding_window={window} is set but use_sliding_window=false: every "
                         "layer attends to the full context.")
        mixers = [LayerKind.FULL_ATTENTION] * n

    mlps: list[MlpKind | None] = [MlpKind.DENSE] * n
    if moe:
        first_dense = int(k.get("first_k_dense_replace", default=0))  # DeepSeek
        freq = int(k.get("moe_layer_freq", default=1))
        step = int(k.get("decoder_sparse_step", default=1))  # Qwen-MoE
        dense_only = set(k.get("mlp_only_layers", default=[]))
        mlps = [MlpKind.MOE if (i >= first_dense and i % freq == 0 and (i + 1) % step == 0
                                and i not in dense_only) else MlpKind.DENSE for i in range(n)]
    slides = LayerKind.SLIDING_ATTENTION in mixers
    if slides and not window:
        raise InputError("layers are marked sliding_attention but sliding_window is missing; "
                         "add the window size (tokens) to the config.")
    return mixers, mlps, int(window) if slides else None


def _counts(items: list[Any]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for item in items:
        if item is not None:
            out[item] = out.get(item, 0) + 1
    return out


def classify_config(config: dict[str, Any], *, hf_quant_config: dict[str, Any] | None = None,
                    model: str = "", revision: str | None = None, license: str | None = None,
                    gated: bool | None = None,
                    chat_template_present: bool | None = None) -> ModelInspection:
    """Classify a checkpoint from its config.json (and ModelOpt hf_quant_config.json if any).

    Raises InputError when the config lacks the keys needed to size the model, naming the
    model_type, the architecture and every missing key.
    """
    if not isinstance(config, dict):
        raise InputError("pass the parsed config.json (a JSON object) of the checkpoint.")
    text = _text_config(config)
    _check_types(text)
    k = _Keys(text)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    archs = config.get("architectures") or text.get("architectures") or []
    architecture = str(archs[0]) if archs else (model_type or "unknown")
    notes: list[str] = []
    fam = _FAMILIES.get(model_type)
    if fam is None:
        fam = _Family()
        notes.append(f"model_type '{model_type}' ({architecture}) is not in infopt's family "
                     "table: counted as a Llama-style decoder (gated MLP, biases only per "
                     "attention_bias, no q/k norm); verify against the modeling code.")

    n = k.need("num_hidden_layers", "n_layer", "num_layers")
    hidden = k.need("hidden_size", "d_model", "n_embd")
    vocab = k.need("vocab_size")
    ctx = k.need("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")
    n_heads = k.need("num_attention_heads", "n_head")
    n_kv = int(k.get("num_key_value_heads", "num_kv_heads", default=n_heads) or n_heads)
    num_experts = int(k.get("n_routed_experts", "num_local_experts", "num_experts", default=0))
    is_moe = num_experts > 0
    top_k = k.need("num_experts_per_tok", "experts_per_token", "moe_topk") if is_moe else 0
    is_mla = k.get("kv_lora_rank") is not None
    if is_mla:
        for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            k.need(key)
    is_hybrid = k.get("hybrid_override_pattern") is not None
    if k.missing:
        known = ", ".join(sorted(_FAMILIES))
        raise InputError(
            f"cannot classify model_type '{model_type or '?'}' (architecture '{architecture}'): "
            f"config.json lacks {', '.join(k.missing)}. Pass the checkpoint's full config.json "
            f"(multimodal configs: the language model's keys under text_config). Model types "
            f"with known layouts: {known}.")

    mixers, mlps, window = _layer_plan(k, n, is_moe, notes)
    layer_kinds = _counts(mixers)
    mlp_kinds = _counts(mlps)
    n_attn = layer_kinds.get(LayerKind.FULL_ATTENTION, 0) + layer_kinds.get(
        LayerKind.SLIDING_ATTENTION, 0)
    if layer_kinds.get(LayerKind.LINEAR_ATTENTION):
        raise InputError(f"model_type '{model_type}' ({architecture}) has linear_attention "
                         "layers; infopt cannot count their parameters or state yet. Extend "
                         "infopt/model/classify.py with that layer's shapes.")
    n_dense = mlp_kinds.get(MlpKind.DENSE, 0)
    intermediate = k.need("intermediate_size", "ffn_hidden_size") if n_dense or (
        is_moe and k.get("moe_intermediate_size") is None) else 0
    n_mamba = layer_kinds.get(LayerKind.MAMBA, 0)
    if n_mamba:
        for key in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
                    "conv_kernel"):
            k.need(key)
    if mlp_kinds.get(MlpKind.MOE) and not is_moe:  # a hybrid pattern with E blocks
        k.missing.append("n_routed_experts|num_local_experts|num_experts")
    if k.missing:
        raise InputError(f"cannot size the layers of model_type '{model_type}' ({architecture}):"
                         f" config.json lacks {', '.join(k.missing)}.")

    # --- attention -------------------------------------------------------------------------
    if not is_mla and not k.get("head_dim") and hidden % n_heads:
        raise InputError(f"hidden_size {hidden} is not divisible by num_attention_heads "
                         f"{n_heads}, and head_dim is not given: fix one of them, or give "
                         "head_dim")
    head_dim = int(k.get("head_dim", default=0) or hidden // n_heads)
    qkv_bias = fam.qkv_bias if fam.qkv_bias is not None else bool(k.get("attention_bias"))
    o_bias = fam.o_bias if fam.o_bias is not None else bool(k.get("attention_bias"))
    if is_mla:
        q_rank = k.get("q_lora_rank")
        kv_rank = int(k.get("kv_lora_rank"))
        nope, rope = int(k.get("qk_nope_head_dim")), int(k.get("qk_rope_head_dim"))
        v_dim = int(k.get("v_head_dim"))
        qk_dim = nope + rope
        q_params = (hidden * q_rank + q_rank + q_rank * n_heads * qk_dim if q_rank
                    else hidden * n_heads * qk_dim)
        attn_layer = (q_params + hidden * (kv_rank + rope) + kv_rank
                      + kv_rank * n_heads * (nope + v_dim) + n_heads * v_dim * hidden)
        attention = AttentionInfo(kind=AttentionKind.MLA, num_query_heads=n_heads,
                                  num_kv_heads=n_kv, head_dim=qk_dim, v_head_dim=v_dim,
                                  kv_lora_rank=kv_rank, qk_rope_head_dim=rope,
                                  q_lora_rank=int(q_rank) if q_rank else None)
        kv_layer_bytes = (kv_rank + rope) * 2  # one latent + decoupled rope key, 2 bytes each
    else:
        q_dim, kv_dim = n_heads * head_dim, n_kv * head_dim
        attn_layer = (hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden
                      + (q_dim + 2 * kv_dim if qkv_bias else 0) + (hidden if o_bias else 0)
                      + (2 * head_dim if fam.qk_norm else 0) + (n_heads if fam.sinks else 0))
        kind = (AttentionKind.MQA if n_kv == 1 else AttentionKind.MHA if n_kv == n_heads
                else AttentionKind.GQA)
        attention = AttentionInfo(kind=kind, num_query_heads=n_heads, num_kv_heads=n_kv,
                                  head_dim=head_dim, v_head_dim=head_dim, sinks=fam.sinks)
        kv_layer_bytes = 2 * n_kv * head_dim * 2  # K and V, 2 bytes per element

    # --- feed-forward ----------------------------------------------------------------------
    mlp_mats = 3 if fam.gated_mlp else 2
    mlp_bias = bool(k.get("mlp_bias"))
    dense_layer = mlp_mats * hidden * intermediate + (
        (mlp_mats - 1) * intermediate + hidden if mlp_bias else 0)
    moe_info: MoeInfo | None = None
    expert = shared = router = 0
    n_moe = mlp_kinds.get(MlpKind.MOE, 0)
    if is_moe:
        e_int = int(k.get("moe_intermediate_size", default=0) or intermediate)
        expert = mlp_mats * hidden * e_int + (
            (mlp_mats - 1) * e_int + hidden if fam.expert_bias or mlp_bias else 0)
        n_shared = int(k.get("n_shared_experts", default=0) or 0)
        shared_int = k.get("moe_shared_expert_intermediate_size", "shared_expert_intermediate_size")
        if shared_int is None and n_shared:
            shared_int = n_shared * e_int  # DeepSeek: one MLP of n_shared x moe_intermediate
        if shared_int:
            n_shared = n_shared or 1
            shared = mlp_mats * hidden * int(shared_int) + (hidden if fam.shared_expert_gate else 0)
        router = hidden * num_experts + num_experts * (
            int(fam.router_bias) + int(fam.score_correction_bias))
        moe_info = MoeInfo(
            num_experts=num_experts, experts_per_token=top_k, num_shared_experts=n_shared,
            num_moe_layers=n_moe, num_dense_layers=n_dense,
            expert_intermediate_size=e_int,
            shared_expert_intermediate_size=int(shared_int) if shared_int else None,
            gated_experts=fam.gated_mlp)

    # --- mamba -----------------------------------------------------------------------------
    mamba_info: MambaInfo | None = None
    mamba_layer = mamba_state_bytes = 0
    if n_mamba:
        nh, hd = int(k.get("mamba_num_heads")), int(k.get("mamba_head_dim"))
        d_state, groups = int(k.get("ssm_state_size")), int(k.get("n_groups"))
        kernel = int(k.get("conv_kernel"))
        d_inner = nh * hd  # Nemotron-H sizes the mixer by heads, not expand x hidden
        conv_dim = d_inner + 2 * groups * d_state
        proj_bias = bool(k.get("mamba_proj_bias"))
        mamba_layer = (hidden * (d_inner + conv_dim + nh) + (d_inner + conv_dim + nh) * proj_bias
                       + conv_dim * kernel + conv_dim * bool(k.get("use_conv_bias", default=True))
                       + 3 * nh + d_inner + d_inner * hidden + hidden * proj_bias)
        ssm_elems, conv_elems = nh * hd * d_state, (kernel - 1) * conv_dim
        mamba_info = MambaInfo(num_heads=nh, head_dim=hd, state_size=d_state, n_groups=groups,
                               conv_kernel=kernel, ssm_state_elements_per_layer=ssm_elems,
                               conv_state_elements_per_layer=conv_elems,
                               ssm_cache_dtype=k.get("mamba_ssm_cache_dtype"))
        mamba_state_bytes = n_mamba * (ssm_elems + conv_elems) * 2
        if k.get("mamba_ssm_cache_dtype") in ("float32", "fp32"):
            notes.append("mamba_ssm_cache_dtype=float32: an engine honouring it stores the SSM "
                         "state at 4 bytes, twice recurrent_state_bytes_per_sequence_16bit's "
                         "SSM share.")

    # --- totals ----------------------------------------------------------------------------
    tied = k.get("tie_word_embeddings", default=config.get("tie_word_embeddings"))
    if tied is None:
        # transformers' PretrainedConfig defaults to tied, most decoder configs override it to
        # untied; assuming untied never under-counts the weights to load.
        notes.append("tie_word_embeddings is absent: assumed untied (lm_head counted apart).")
    tied = bool(tied)
    blocks_per_layer = 1 if is_hybrid else 2  # Nemotron-H: one norm per block
    n_mtp = int(k.get("num_nextn_predict_layers", default=0) or 0)
    mtp = 0
    if n_mtp:
        # DeepSeek-V3 MTP module: enorm, hnorm, eh_proj (2H -> H), one MoE decoder layer and
        # its final norm; embedding and output head are shared with the main model.
        mtp_layer = attn_layer + (expert * num_experts + shared + router if is_moe
                                  else dense_layer) + 2 * hidden
        mtp = n_mtp * (2 * hidden + 2 * hidden * hidden + mtp_layer + hidden)
        notes.append(f"{n_mtp} multi-token-prediction layer(s) ({mtp / 1e9:.1f}B params) usable "
                     "as a speculative draft: counted in params.mtp, not in params_total.")
    params = ParamBreakdown(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=n_attn * attn_layer,
        dense_mlp=n_dense * dense_layer,
        routed_experts=n_moe * num_experts * expert,
        routed_experts_active=n_moe * top_k * expert,
        shared_experts=n_moe * shared,
        routers=n_moe * router,
        mamba=n_mamba * mamba_layer,
        norms=n * blocks_per_layer * hidden + hidden,
        mtp=mtp,
    )
    total = (params.embedding + params.lm_head + params.attention + params.dense_mlp
             + params.routed_experts + params.shared_experts + params.routers + params.mamba
             + params.norms)
    active = (total - params.routed_experts + params.routed_experts_active
              - (0 if tied else params.embedding))

    n_full = layer_kinds.get(LayerKind.FULL_ATTENTION, 0)
    n_slide = layer_kinds.get(LayerKind.SLIDING_ATTENTION, 0)
    kv = KvCacheInfo(
        full_attention_layers=n_full, bytes_per_token_16bit=n_full * kv_layer_bytes,
        sliding_attention_layers=n_slide, sliding_bytes_per_token_16bit=n_slide * kv_layer_bytes,
        sliding_window_tokens=window, recurrent_layers=n_mamba,
        recurrent_state_bytes_per_sequence_16bit=mamba_state_bytes)

    rope_scaling = k.get("rope_scaling", "rope_parameters")
    if isinstance(rope_scaling, dict) and (rope_scaling.get("factor") or 1) != 1:
        notes.append(f"rope_scaling {rope_scaling.get('rope_type', rope_scaling.get('type'))} "
                     f"factor {rope_scaling.get('factor')} is reported, not applied: "
                     "native_context_tokens is max_position_embeddings.")
    encoders = sorted(key for key, value in config.items() if key.endswith("_config")
                      and isinstance(value, dict) and any(h in key for h in _ENCODER_HINTS))
    if encoders:
        notes.append(f"multimodal encoder config(s) {', '.join(encoders)}: their parameters are "
                     "not in params_total (language model only).")

    return ModelInspection(
        model=model, revision=revision, license=license, gated=gated,
        chat_template_present=chat_template_present,
        architecture=architecture, model_type=model_type,
        weights_dtype=k.get("torch_dtype", "dtype", default=config.get("torch_dtype")),
        num_layers=n, hidden_size=hidden, vocab_size=vocab, native_context_tokens=ctx,
        rope_scaling=rope_scaling if isinstance(rope_scaling, dict) else None,
        tie_word_embeddings=tied, attention=attention, layer_kinds=layer_kinds,
        mlp_kinds=mlp_kinds, sliding_window_tokens=window, moe=moe_info, mamba=mamba_info,
        mtp_layers=n_mtp, multimodal_encoders=encoders, params_total=total,
        params_active_per_token=active, params=params, kv_cache=kv,
        quantization=parse_quantization(config, hf_quant_config), notes=notes)
