"""Classify a checkpoint's components from its config.json: attention kind, layer kinds, MoE,
Mamba, linear attention, MTP, quantization, parameter counts and KV-cache bytes per token.

Pure: a dict in, a `ModelInspection` out. Hub facts (revision, license, gating, chat template)
are the caller's inputs; nothing here reads files or the network. Keys the file leaves to its
family's configuration class (Gemma 3's vocab_size, ...) come from that class (defaults.py) and
are listed in `defaults_used`.

Parameter counting (logical parameters, one per weight whatever the storage format; the block
shapes are in shapes.py, the per-layer plan in layers.py):

* embedding V x H; lm_head V x H unless tie_word_embeddings; final norm H;
* attention per attention layer: q, k, v, o projections, their biases where the family or
  `attention_bias` has them, per-head q/k norms (Qwen3, Gemma 3), the output gate folded into
  q_proj (Qwen3-Next, Qwen3.5), sink logits (gpt-oss); MLA: q_a/q_b (or q), kv_a_with_mqa, kv_b,
  o and the two latent norms, plus DeepSeek-V3.2's lightning indexer (wq_b, wk, key LayerNorm,
  weights_proj); DeciLM layers may each have their own KV head count;
* dense MLP: 3 x H x I when gated (SwiGLU), 2 x H x I otherwise (Nemotron-H relu2), plus biases;
  DeciLM layers each have their own I (or none, or one H x H Linear);
* MoE layer: every routed expert, shared experts (Llama 4: one of the experts' width, which its
  config does not count), router weight and router/score-correction bias;
* Mamba-2 mixer and Gated DeltaNet (linear_attention) mixer: see shapes.py;
* norms: one per sub-block (two per classic decoder layer, one per Nemotron-H block, four per
  Gemma 3 layer, none for a skipped DeciLM block);
* MTP modules (DeepSeek-V3 `num_nextn_predict_layers`, Qwen3.5 `mtp_num_hidden_layers`) go to
  `params.mtp`, outside params_total, as the publishers' totals exclude them; their embedding
  and head are shared, so not counted again.

`params_active_per_token` is what one token's forward pass multiplies through: params_total
minus the routed experts it does not select and minus the input embedding table (a token reads
one row of it), unless the embedding is tied and so read in full as the output head. This is the
convention of DeepSeek (36.6B "activation parameters, including 0.9B for the output head"),
NVIDIA (Nemotron 3 Nano "3.2B active, 3.6B with embeddings") and OpenAI (gpt-oss 3.61B); Qwen
and Mistral state active counts with the embedding table: add `params.embedding` to compare.

KV bytes per token at 16 bit: full-attention layers x kv_heads x head_dim x 2 (K and V) x 2
bytes; MLA layers cache (kv_lora_rank + qk_rope_head_dim) x 2 bytes; DeepSeek-V3.2's indexed
(sparse) layers cache that latent plus the indexer's FP8 key (`indexer_bytes_per_token`, at its
own format); sliding layers, and Llama 4's chunked local-attention layers, are reported apart
(they stop growing at the window or chunk); Mamba and linear-attention layers hold a fixed
per-sequence state (`recurrent_state_bytes_per_sequence` at the dtype the config asks for it).
"""

from __future__ import annotations

import numbers
from dataclasses import replace
from typing import Any

from infopt.model import shapes
from infopt.model.defaults import FILLABLE, family_defaults
from infopt.model.layers import Layer, layer_plan
from infopt.model.modules import Component, embedding_components, layer_component, not_converted
from infopt.model.quantization import parse_quantization
from infopt.model.shapes import Family
from infopt.specs.base import InputError
from infopt.specs.inspection import (
    KvCacheInfo,
    LayerKind,
    MlpKind,
    ModelInspection,
    MoeInfo,
    ParamBreakdown,
    QuantizationInfo,
)

_QWEN_NEXT = Family(qk_norm=True, shared_expert_gate=True, gated_q=True)
_LLAMA4 = Family(shared_experts=1, chunked_rope=True)
# transformers models/<name>/modeling_<name>.py (and the checkpoints' remote code for
# deepseek_v3 / nemotron_h / nemotron-nas) at the versions named in each config's
# transformers_version.
_FAMILIES: dict[str, Family] = {
    "llama": Family(),
    "mistral": Family(),
    "mixtral": Family(),
    "phi3": Family(),  # fused qkv_proj/gate_up_proj: same counts as split projections
    "qwen2": Family(qkv_bias=True, o_bias=False),
    "qwen2_moe": Family(qkv_bias=True, o_bias=False, shared_expert_gate=True),
    "qwen3": Family(qk_norm=True),
    "qwen3_moe": Family(qk_norm=True),
    "qwen3_next": _QWEN_NEXT,
    "qwen3_5_moe_text": _QWEN_NEXT,  # attn_output_gate in the config turns the gate on/off
    "qwen3_5_text": _QWEN_NEXT,
    "deepseek_v2": Family(),
    "deepseek_v3": Family(score_correction_bias=True),
    # V3 plus a lightning indexer on every MLA layer (modeling_deepseek_v32.py).
    "deepseek_v32": Family(score_correction_bias=True, indexed_attention=True),
    "gpt_oss": Family(expert_bias=True, router_bias=True, sinks=True),
    "nemotron_h": Family(gated_mlp=False, score_correction_bias=True),
    "nemotron-nas": Family(),  # DeciLM: Llama blocks, per-layer block_configs (layers.py)
    "gemma3_text": Family(qk_norm=True, norms_per_block=2),  # GeGLU MLP: gated, 3 matrices
    # modeling_llama4.py: the q/k norm is weightless (no parameters); every MoE layer has one
    # shared expert of the experts' width (Llama4TextMoe.shared_expert); sigmoid router, no bias.
    "llama4_text": _LLAMA4,
    "llama4": _LLAMA4,  # a GGUF's general.architecture for the same text model
}

_ENCODER_HINTS = ("vision", "audio", "speech", "image", "visual", "video")
_ATTENTION = (LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION,
              LayerKind.CHUNKED_ATTENTION, LayerKind.INDEXED_ATTENTION)
# Layers whose cache grows with the whole context, and those capped at a window or chunk.
_GROWING = (LayerKind.FULL_ATTENTION, LayerKind.INDEXED_ATTENTION)
_WINDOWED = (LayerKind.SLIDING_ATTENTION, LayerKind.CHUNKED_ATTENTION)
_INDEX_KEYS = ("index_n_heads", "index_head_dim", "index_topk")


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
    "ssm_state_size", "n_groups", "conv_kernel", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "moe_k", "moe_layer_interval", "attention_chunk_size",
    "interleave_moe_layer_step", "intermediate_size_mlp", "no_rope_layer_interval",
    "index_n_heads", "index_head_dim", "index_topk"), 1),
    **dict.fromkeys((
        "n_routed_experts", "num_local_experts", "num_experts", "n_shared_experts",
        "first_k_dense_replace", "num_nextn_predict_layers", "mtp_num_hidden_layers",
        "max_window_layers", "sliding_window", "qk_nope_head_dim", "qk_rope_head_dim",
        "moe_num_experts", "num_shared_experts", "moe_num_shared_experts",
        "moe_layer_start_index"), 0)}
_SHAPES = {"architectures": list, "layer_types": list, "mlp_only_layers": list,
           "hybrid_override_pattern": str, "block_configs": list, "moe_layers": list,
           "no_rope_layers": list}
_LINEAR_KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel_dim")
_MAMBA_KEYS = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")


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
    """Reads a config dict by alias lists, falls back to the family's configuration class for
    keys the file leaves out (recording which), and remembers what was missing."""

    def __init__(self, cfg: dict[str, Any], model_type: str):
        self.cfg = cfg
        self.model_type = model_type
        self.missing: list[str] = []
        self.defaults_used: dict[str, Any] = {}
        self.defaults_source: str | None = None
        self._defaults: dict[str, Any] | None = None

    def _default(self, name: str) -> Any:
        if self._defaults is None:
            self._defaults, self.defaults_source = family_defaults(self.cfg, self.model_type)
        if name in self._defaults:
            self.defaults_used[name] = self._defaults[name]
            return self._defaults[name]
        return None

    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            if self.cfg.get(name) is not None:
                return self.cfg[name]
        if default is not None:
            return default
        for name in names:
            if name not in self.cfg and name in FILLABLE and (
                    value := self._default(name)) is not None:
                return value
        return None

    def need(self, *names: str) -> int:
        value = self.get(*names)
        if value is None:
            self.missing.append("|".join(names))
            return 0
        return int(value)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs nest the language model under text_config (Llama 4, Gemma 3, LLaVA,
    Qwen3.5)."""
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("num_hidden_layers") is not None:
        return text
    return config


def _counts(items: list[Any]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for item in items:
        if item is not None:
            out[item] = out.get(item, 0) + 1
    return out


def _family(model_type: str, architecture: str, notes: list[str]) -> Family:
    fam = _FAMILIES.get(model_type)
    if fam is None:
        notes.append(f"model_type '{model_type}' ({architecture}) is not in infopt's family "
                     "table: counted as a Llama-style decoder (gated MLP, biases only per "
                     "attention_bias, no q/k norm); verify against the modeling code.")
        return Family()
    return fam


def _need_keys(k: _Keys, keys: tuple[str, ...]) -> None:
    for key in keys:
        k.need(key)


def _missing(k: _Keys, model_type: str, architecture: str, what: str) -> None:
    if not k.missing:
        return
    known = ", ".join(sorted(_FAMILIES))
    defaults = (f" {k.defaults_source} supplied no value for them either." if k.defaults_source
                else f" transformers has no configuration class for model_type "
                     f"'{model_type}' to take defaults from." if model_type else "")
    raise InputError(
        f"cannot {what} model_type '{model_type or '?'}' (architecture '{architecture}'): "
        f"config.json lacks {', '.join(k.missing)}.{defaults} Pass the checkpoint's full "
        "config.json (multimodal configs: the language model's keys under text_config). Model "
        f"types with known layouts: {known}.")


class _Shapes:
    """Per-layer parameter counts of every block kind the plan uses."""

    def __init__(self, k: _Keys, fam: Family, hidden: int, n_heads: int, n_kv: int,
                 layers: list[Layer], num_experts: int, top_k: int):
        self.k, self.fam, self.hidden, self.n_kv = k, fam, hidden, n_kv
        self.attn = shapes.attention(k, fam, hidden, n_heads, n_kv, indexed=any(
            x.mixer is LayerKind.INDEXED_ATTENTION for x in layers))
        kinds = _counts([x.mixer for x in layers])
        mlps = _counts([x.mlp for x in layers])
        self.intermediate = k.need("intermediate_size", "ffn_hidden_size") if (
            any(x.mlp is MlpKind.DENSE and x.intermediate is None for x in layers)
            or (num_experts and k.get("moe_intermediate_size") is None)) else 0
        self.mamba = self.linear = None
        self.mamba_params = self.linear_params = self.mamba_state = 0
        if kinds.get(LayerKind.MAMBA):
            _need_keys(k, _MAMBA_KEYS)
        if kinds.get(LayerKind.LINEAR_ATTENTION):
            _need_keys(k, _LINEAR_KEYS)
        if mlps.get(MlpKind.MOE) and not num_experts:  # a hybrid pattern with E blocks
            k.missing.append("n_routed_experts|num_local_experts|num_experts")
        if k.missing:
            return
        if kinds.get(LayerKind.MAMBA):
            self.mamba_params, self.mamba, self.mamba_state = shapes.mamba(k, hidden)
        if kinds.get(LayerKind.LINEAR_ATTENTION):
            self.linear_params, self.linear = shapes.linear_attention(k, hidden)
        self._moe(num_experts, top_k)

    def _moe(self, num_experts: int, top_k: int) -> None:
        k, fam, hidden = self.k, self.fam, self.hidden
        self.num_experts, self.top_k = num_experts, top_k
        self.expert = self.shared = self.router = self.n_shared = 0
        self.e_int = self.shared_int = None
        if not num_experts:
            return
        mats = 3 if fam.gated_mlp else 2
        self.e_int = int(k.get("moe_intermediate_size", default=0) or self.intermediate)
        self.expert = mats * hidden * self.e_int + (
            (mats - 1) * self.e_int + hidden if fam.expert_bias or k.get("mlp_bias") else 0)
        n_shared = int(k.get("n_shared_experts", "num_shared_experts", "moe_num_shared_experts",
                             default=fam.shared_experts) or 0)
        shared_int = k.get("moe_shared_expert_intermediate_size",
                           "shared_expert_intermediate_size")
        if shared_int is None and n_shared:
            shared_int = n_shared * self.e_int  # DeepSeek: one MLP of n_shared x moe_int
        if shared_int:
            n_shared = n_shared or 1
            self.shared = mats * hidden * int(shared_int) + (
                hidden if fam.shared_expert_gate else 0)
        self.shared_int = int(shared_int) if shared_int else None
        self.n_shared = n_shared
        self.router = hidden * num_experts + num_experts * (
            int(fam.router_bias) + int(fam.score_correction_bias))

    def mixer(self, layer: Layer) -> tuple[str, int] | None:
        """(ParamBreakdown field, params) of a layer's token mixer."""
        if layer.linear_mixer:
            return "attention", self.hidden * self.hidden
        if layer.mixer in _ATTENTION:
            return "attention", self.attn.params(
                self.k, self.fam, self.hidden, layer.kv_heads or self.n_kv,
                indexed=layer.mixer is LayerKind.INDEXED_ATTENTION)
        if layer.mixer is LayerKind.MAMBA:
            return "mamba", self.mamba_params
        if layer.mixer is LayerKind.LINEAR_ATTENTION:
            return "linear_attention", self.linear_params
        return None

    def dense(self, layer: Layer) -> int:
        if layer.linear_mlp:
            return self.hidden * self.hidden
        if layer.mlp is MlpKind.DENSE:
            return shapes.dense_mlp(self.k, self.fam, self.hidden,
                                    layer.intermediate or self.intermediate)
        return 0

    def kv_bytes(self, layer: Layer) -> int:
        return self.attn.kv_bytes_per_token(layer.kv_heads or self.n_kv)


def _components(sh: _Shapes, layers: list[Layer], embedding: int, lm_head: int
                ) -> list[Component]:
    """Every component instance, by layer: the sums are the parameter breakdown, the names are
    what a quantization config's not-converted list is matched against."""
    out = embedding_components(embedding, lm_head)
    for i, layer in enumerate(layers):
        if (mixer := sh.mixer(layer)) is not None:
            out.append(layer_component(mixer[0], i, mixer[1]))
        if layer.mlp is MlpKind.DENSE or layer.linear_mlp:
            out.append(layer_component("dense_mlp", i, sh.dense(layer)))
        elif layer.mlp is MlpKind.MOE:
            out += [layer_component("routed_experts", i, sh.num_experts * sh.expert,
                                    sh.top_k * sh.expert),
                    layer_component("shared_experts", i, sh.shared),
                    layer_component("routers", i, sh.router)]
    return out


def _norms(fam: Family, layers: list[Layer], hidden: int, hybrid: bool) -> int:
    """One norm per present sub-block (Gemma: two), a Nemotron-H block one, plus the final."""
    if hybrid:
        return len(layers) * hidden + hidden
    blocks = sum((x.mixer is not None or x.linear_mixer) + (x.mlp is not None or x.linear_mlp)
                 for x in layers)
    return blocks * fam.norms_per_block * hidden + hidden


def _mtp(k: _Keys, sh: _Shapes, hidden: int, notes: list[str]) -> tuple[int, int]:
    """(MTP layers, their params): DeepSeek-V3's enorm, hnorm, eh_proj (2H -> H), one decoder
    layer and its final norm; Qwen3.5's pre_fc norms, fc (2H -> H), one full-attention MoE
    layer and a norm: the same shape. Embedding and output head are shared with the model."""
    n_mtp = int(k.get("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0)
    if not n_mtp:
        return 0, 0
    ffn = (sh.expert * sh.num_experts + sh.shared + sh.router if sh.num_experts
           else shapes.dense_mlp(k, sh.fam, hidden, sh.intermediate))
    # DeepSeek-V3.2's MTP layer is a decoder layer of the model's own kind: indexer included.
    layer = sh.attn.params(k, sh.fam, hidden, sh.n_kv,
                           indexed=sh.attn.info.index_topk is not None) + ffn + 2 * hidden
    mtp = n_mtp * (2 * hidden + 2 * hidden * hidden + layer + hidden)
    notes.append(f"{n_mtp} multi-token-prediction layer(s) ({mtp / 1e9:.1f}B params) usable "
                 "as a speculative draft: counted in params.mtp, not in params_total.")
    return n_mtp, mtp


def _state(sh: _Shapes, kinds: dict[LayerKind, int], notes: list[str]) -> tuple[int, int]:
    """(16-bit recurrent state bytes per sequence, the same at the dtypes the config asks)."""
    n_mamba, n_linear = kinds.get(LayerKind.MAMBA, 0), kinds.get(LayerKind.LINEAR_ATTENTION, 0)
    sixteen = n_mamba * sh.mamba_state
    declared = sixteen
    if sh.mamba is not None and shapes.fp32_state(sh.mamba.ssm_cache_dtype):
        declared += n_mamba * sh.mamba.ssm_state_elements_per_layer * 2
        notes.append("mamba_ssm_cache_dtype=float32: the SSM state is costed at 4 bytes "
                     "(recurrent_state_bytes_per_sequence), twice its 16-bit figure.")
    if sh.linear is not None:
        la = sh.linear
        per_layer = la.conv_state_elements_per_layer + la.recurrent_state_elements_per_layer
        sixteen += n_linear * per_layer * 2
        declared += n_linear * per_layer * 2
        if shapes.fp32_state(la.state_dtype):
            declared += n_linear * la.recurrent_state_elements_per_layer * 2
            notes.append(f"mamba_ssm_dtype={la.state_dtype}: the Gated DeltaNet recurrent state "
                         "is costed at 4 bytes per element (recurrent_state_bytes_per_sequence)."
                         )
    return sixteen, declared


# Keys that declare token mixers other than attention (Mamba heads, state sizes, an attention
# period or hybrid block list, Jamba's expert period) in a layout infopt does not read: Jamba,
# Zamba/Zamba2, Bamba, Falcon-H1. Sized as attention, such a model would count KV for layers
# that hold none and miss their recurrent state; it is refused instead. Nemotron-H
# (hybrid_override_pattern) and Qwen3-Next/Qwen3.5 (layer_types) are read, and pass.
_UNREAD_LAYOUT_PREFIXES = ("mamba_", "ssm_", "n_mamba")
_UNREAD_LAYOUT_KEYS = ("attn_layer_period", "attn_layer_offset", "attn_layer_indices",
                       "hybrid_layer_ids", "layers_block_type", "expert_layer_period")


def refuse_unread_layout(cfg: dict[str, Any], layers: list, model_type: str,
                         architecture: str) -> None:
    recurrent = {LayerKind.MAMBA, LayerKind.LINEAR_ATTENTION}
    if any(layer.mixer in recurrent for layer in layers):
        return
    keys = sorted(key for key, value in cfg.items() if value not in (None, [], "")
                  and (key.startswith(_UNREAD_LAYOUT_PREFIXES) or key in _UNREAD_LAYOUT_KEYS))
    if keys:
        raise InputError(
            f"{model_type or architecture} ({architecture}) declares recurrent (Mamba/SSM) or "
            f"hybrid layers ({', '.join(keys[:6])}{'...' if len(keys) > 6 else ''}) in a layout "
            "infopt does not read: sizing it as attention would count KV for layers that hold "
            "none and miss their recurrent state. Not supported yet (supported hybrids: "
            "Nemotron-H's hybrid_override_pattern, Gated DeltaNet layers in layer_types); "
            "choose another model or plan it by hand.")


def _indexed(k: _Keys, fam: Family, layers: list[Layer], is_mla: bool, model_type: str,
             architecture: str) -> list[Layer]:
    """The plan with DeepSeek-V3.2's attention layers marked indexed (every one has a lightning
    indexer, whether or not the installed transformers derives layer_types for it); a family
    whose indexed layers infopt has not read is refused: GLM-5's shared indexers
    (indexer_types), Kolibri's pooled index, Qwen4-Exp's compressed one differ in what they
    cache, and sizing them as V3.2 or as full attention would be silently wrong."""
    if fam.indexed_attention:
        layers = [replace(x, mixer=LayerKind.INDEXED_ATTENTION)
                  if x.mixer is LayerKind.FULL_ATTENTION else x for x in layers]
    if not any(x.mixer is LayerKind.INDEXED_ATTENTION for x in layers):
        return layers
    if not fam.indexed_attention or not is_mla:
        raise InputError(
            f"{model_type or architecture} ({architecture}) has indexed (sparse) attention "
            "layers whose indexer layout infopt does not read: sizing them as full attention "
            "would miss the indexer's cache, and as DeepSeek-V3.2's could mis-state it. Not "
            "supported yet (supported: deepseek_v32, one lightning indexer per MLA layer); "
            "choose another model or plan it by hand.")
    _need_keys(k, (*_INDEX_KEYS, "q_lora_rank"))
    _missing(k, model_type, architecture, "size the sparse-attention indexer of")
    return layers


def classify_config(config: dict[str, Any], *, hf_quant_config: dict[str, Any] | None = None,
                    model: str = "", revision: str | None = None, license: str | None = None,
                    gated: bool | None = None,
                    chat_template_present: bool | None = None) -> ModelInspection:
    """Classify a checkpoint from its config.json (and ModelOpt hf_quant_config.json if any).

    Raises InputError when the config lacks the keys needed to size the model (after the
    family's configuration-class defaults), naming the model_type, architecture and every key.
    """
    if not isinstance(config, dict):
        raise InputError("pass the parsed config.json (a JSON object) of the checkpoint.")
    text = _text_config(config)
    _check_types(text)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    k = _Keys(text, model_type)
    archs = config.get("architectures") or text.get("architectures") or []
    architecture = str(archs[0]) if archs else (model_type or "unknown")
    notes: list[str] = []
    fam = _family(model_type, architecture, notes)

    n = k.need("num_hidden_layers", "n_layer", "num_layers")
    hidden = k.need("hidden_size", "d_model", "n_embd")
    vocab = k.need("vocab_size")
    ctx = k.need("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")
    n_heads = k.need("num_attention_heads", "n_head")
    n_kv = int(k.get("num_key_value_heads", "num_kv_heads", default=n_heads) or n_heads)
    num_experts = int(k.get("n_routed_experts", "num_local_experts", "num_experts",
                            "moe_num_experts", default=0) or 0)
    if num_experts and k.get("is_moe") is False:  # Doge: the experts are declared, not built
        notes.append(f"is_moe=false: the {num_experts} declared experts are not built; every "
                     "layer has a dense MLP")
        num_experts = 0
    top_k = k.need("num_experts_per_tok", "experts_per_token", "moe_topk", "moe_k") \
        if num_experts else 0
    is_mla = k.get("kv_lora_rank") is not None
    if is_mla:
        _need_keys(k, ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    _missing(k, model_type, architecture, "classify")

    layers, window = layer_plan(k, n, num_experts > 0, n_heads, hidden, notes,
                                chunked_rope=fam.chunked_rope)
    layers = _indexed(k, fam, layers, is_mla, model_type, architecture)
    refuse_unread_layout(text, layers, model_type, architecture)
    if not is_mla and not k.get("head_dim") and hidden % n_heads:
        raise InputError(f"hidden_size {hidden} is not divisible by num_attention_heads "
                         f"{n_heads}, and head_dim is not given: fix one of them, or give "
                         "head_dim")
    per_layer = [x.kv_heads for x in layers if x.kv_heads]
    if per_layer:  # DeciLM: each attention layer names its own; report the commonest
        n_kv = max(sorted(set(per_layer)), key=per_layer.count)
    sh = _Shapes(k, fam, hidden, n_heads, n_kv, layers, num_experts, top_k)
    _missing(k, model_type, architecture, "size the layers of")
    return _inspection(config, k, fam, sh, layers, window, dict(
        model=model, revision=revision, license=license, gated=gated,
        chat_template_present=chat_template_present, architecture=architecture,
        model_type=model_type, num_layers=n, hidden_size=hidden, vocab_size=vocab,
        native_context_tokens=ctx), hf_quant_config, notes)


def _inspection(config: dict[str, Any], k: _Keys, fam: Family, sh: _Shapes,
                layers: list[Layer], window: int | None, facts: dict[str, Any],
                hf_quant_config: dict[str, Any] | None, notes: list[str]) -> ModelInspection:
    hidden, vocab = facts["hidden_size"], facts["vocab_size"]
    kinds = _counts([x.mixer for x in layers])
    mlp_kinds = _counts([x.mlp for x in layers])
    tied = k.get("tie_word_embeddings", default=config.get("tie_word_embeddings"))
    if tied is None:
        # transformers' PretrainedConfig defaults to tied, most decoder configs override it to
        # untied; assuming untied never under-counts the weights to load.
        notes.append("tie_word_embeddings is absent: assumed untied (lm_head counted apart).")
    tied = bool(tied)
    n_mtp, mtp = _mtp(k, sh, hidden, notes)
    components = _components(sh, layers, vocab * hidden, 0 if tied else vocab * hidden)
    sums = dict.fromkeys(("attention", "dense_mlp", "routed_experts", "shared_experts",
                          "routers", "mamba", "linear_attention"), 0)
    active_experts = 0
    for comp in components:
        if comp.field in sums:
            sums[comp.field] += comp.params
        active_experts += comp.active_params
    params = ParamBreakdown(
        embedding=vocab * hidden, lm_head=0 if tied else vocab * hidden,
        routed_experts_active=active_experts,
        norms=_norms(fam, layers, hidden, k.get("hybrid_override_pattern") is not None),
        mtp=mtp, **sums)
    total = (params.embedding + params.lm_head + params.norms
             + sum(sums.values()))
    active = (total - params.routed_experts + params.routed_experts_active
              - (0 if tied else params.embedding))
    return ModelInspection(
        **facts, weights_dtype=k.get("torch_dtype", "dtype", default=config.get("torch_dtype")),
        rope_scaling=_rope(k, notes), tie_word_embeddings=tied, attention=sh.attn.info,
        layer_kinds=kinds, mlp_kinds=mlp_kinds,
        sliding_window_tokens=window if kinds.get(LayerKind.SLIDING_ATTENTION) else None,
        attention_chunk_tokens=window if kinds.get(LayerKind.CHUNKED_ATTENTION) else None,
        moe=_moe_info(sh, mlp_kinds), mamba=sh.mamba, linear_attention=sh.linear,
        mtp_layers=n_mtp, multimodal_encoders=_encoders(config, notes), params_total=total,
        params_active_per_token=active, params=params,
        kv_cache=_kv(sh, layers, kinds, window, notes),
        quantization=_with_not_converted(parse_quantization(config, hf_quant_config),
                                         components, notes),
        notes=notes + _defaults_note(k), defaults_used=k.defaults_used,
        defaults_source=k.defaults_source if k.defaults_used else None,
        linear_replaced_blocks=sum(x.linear_mixer + x.linear_mlp for x in layers),
        skipped_blocks=_skipped(k, layers))


def _skipped(k: _Keys, layers: list[Layer]) -> int:
    """DeciLM sub-blocks that are no_op (neither a block nor a Linear replacement)."""
    if k.get("block_configs") is None:
        return 0
    return sum((x.mixer is None and not x.linear_mixer) + (x.mlp is None and not x.linear_mlp)
               for x in layers)


def _defaults_note(k: _Keys) -> list[str]:
    if not k.defaults_used:
        return []
    said = ", ".join(f"{key}={v if not isinstance(v, list) else f'[{len(v)} entries]'}"
                     for key, v in k.defaults_used.items())
    return [f"not in config.json, taken from {k.defaults_source} defaults: {said}."]


def _moe_info(sh: _Shapes, mlp_kinds: dict[MlpKind, int]) -> MoeInfo | None:
    if not sh.num_experts:
        return None
    return MoeInfo(num_experts=sh.num_experts, experts_per_token=sh.top_k,
                   num_shared_experts=sh.n_shared, num_moe_layers=mlp_kinds.get(MlpKind.MOE, 0),
                   num_dense_layers=mlp_kinds.get(MlpKind.DENSE, 0),
                   expert_intermediate_size=sh.e_int or 0,
                   shared_expert_intermediate_size=sh.shared_int, gated_experts=sh.fam.gated_mlp)


def _kv(sh: _Shapes, layers: list[Layer], kinds: dict[LayerKind, int], window: int | None,
        notes: list[str]) -> KvCacheInfo:
    full = sum(sh.kv_bytes(x) for x in layers if x.mixer in _GROWING)
    slide = sum(sh.kv_bytes(x) for x in layers if x.mixer in _WINDOWED)
    indexed = kinds.get(LayerKind.INDEXED_ATTENTION, 0)
    indexer = indexed * sh.attn.indexer_bytes_per_token()
    _kv_notes(sh, kinds, window, indexer, notes)
    heads = {x.kv_heads for x in layers if x.kv_heads is not None}
    if len(heads) > 1:
        notes.append(f"attention layers have different KV head counts ({sorted(heads)}): "
                     f"tensor-parallel KV sharding is costed with {sh.n_kv}.")
    sixteen, declared = _state(sh, kinds, notes)
    return KvCacheInfo(
        full_attention_layers=sum(kinds.get(x, 0) for x in _GROWING),
        bytes_per_token_16bit=full, indexer_bytes_per_token=indexer,
        sliding_attention_layers=sum(kinds.get(x, 0) for x in _WINDOWED),
        sliding_bytes_per_token_16bit=slide, sliding_window_tokens=window,
        recurrent_layers=kinds.get(LayerKind.MAMBA, 0) + kinds.get(
            LayerKind.LINEAR_ATTENTION, 0),
        recurrent_state_bytes_per_sequence_16bit=sixteen,
        recurrent_state_bytes_per_sequence=declared)


def _kv_notes(sh: _Shapes, kinds: dict[LayerKind, int], window: int | None, indexer: int,
              notes: list[str]) -> None:
    """How the cache of chunked and indexed layers is sized: what a reader must know to check
    the figures against an engine's."""
    if kinds.get(LayerKind.CHUNKED_ATTENTION):
        notes.append(
            f"{kinds[LayerKind.CHUNKED_ATTENTION]} chunked local-attention layers attend "
            f"within chunks of {window} tokens (a token sees 1 to {window}): each holds at most "
            f"{window} tokens of KV per sequence (vLLM ChunkedLocalAttentionSpec), sized like a "
            f"sliding window; {kinds.get(LayerKind.FULL_ATTENTION, 0)} NoPE layers attend to "
            "the whole context.")
    if indexer:
        a = sh.attn.info
        notes.append(
            f"sparse attention: decode attends index_topk={a.index_topk} cached tokens per "
            "layer, while the lightning indexer scores every cached key; its key cache is "
            f"{indexer:,} B/token (FP8 + fp32 scale per 128, whatever the KV cache dtype) on "
            "top of the latent. With an fp8 KV cache, vLLM and SGLang store the latent in "
            "FlashMLA's fp8_ds_mla layout (656 B per token per layer for V3.2), which the cost "
            "model uses.")


def _rope(k: _Keys, notes: list[str]) -> dict[str, Any] | None:
    rope_scaling = k.get("rope_scaling", "rope_parameters")
    if isinstance(rope_scaling, dict) and (rope_scaling.get("factor") or 1) != 1:
        notes.append(f"rope_scaling {rope_scaling.get('rope_type', rope_scaling.get('type'))} "
                     f"factor {rope_scaling.get('factor')} is reported, not applied: "
                     "native_context_tokens is max_position_embeddings.")
    return rope_scaling if isinstance(rope_scaling, dict) else None


def _encoders(config: dict[str, Any], notes: list[str]) -> list[str]:
    encoders = sorted(key for key, value in config.items() if key.endswith("_config")
                      and isinstance(value, dict) and any(h in key for h in _ENCODER_HINTS))
    if encoders:
        notes.append(f"multimodal encoder config(s) {', '.join(encoders)}: their parameters are "
                     "not in params_total (language model only).")
    return encoders


def _with_not_converted(q: QuantizationInfo | None, components: list[Component],
                        notes: list[str]) -> QuantizationInfo | None:
    """The quantization info with what its not-converted names cover (infopt/model/modules)."""
    if q is None or not q.modules_not_converted:
        return q
    kept = not_converted(components, q.modules_not_converted)
    if kept.partial:
        notes.append(f"not-converted name(s) {', '.join(kept.partial)} cover part of a "
                     "component: the whole component is counted at 16 bits (weights may be "
                     "over-counted, never under-counted).")
    if kept.unmatched:
        notes.append(f"not-converted name(s) {', '.join(kept.unmatched)} match no module "
                     "infopt models: counted as converted; verify against the checkpoint's "
                     "tensor names.")
    return q.model_copy(update={
        "params_not_converted": ParamBreakdown(**kept.params, norms=0, mtp=0),
        "not_converted_partial": kept.partial, "not_converted_unmatched": kept.unmatched})
