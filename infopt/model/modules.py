"""Which parameters a quantized checkpoint left at full precision, from its own module lists.

A quantization config names the modules it did not convert: `modules_to_not_convert` (HF
quantizers: AWQ, GPTQ, fp8, mxfp4, bitsandbytes' `llm_int8_skip_modules`), `ignore`
(compressed-tensors) and `exclude_modules` (ModelOpt). gpt-oss-120b keeps every attention block
in bf16 beside its MXFP4 experts: 0.96B parameters at 16 bits instead of 4.25, 1.40 GB more
weights than a quantize-everything count, and 13% more bytes per decode step at small batch.

The names are matched the way the engines match them, against the modules this file builds
for the family (`model.layers.{i}.self_attn`, `...mlp.experts`, `lm_head`, ...):

* `re:REGEX` (compressed-tensors): `re.match` on the module name;
* a glob with `*`, `?` or `[` (gpt-oss: `model.layers.*.self_attn`): fnmatch on the name;
* a plain name: the module itself, an ancestor of it, or whole dotted segments of its name
  (transformers tests `key in module_name`; segments keep `mlp.gate` off `mlp.gate_proj`).

A pattern that names part of a component (`model.layers.0.self_attn.q_proj`) counts the whole
component at 16 bits: the weights may be over-counted, never under-counted (memory fit errs
towards refusing, not towards an OOM). The result says which patterns did so, and which matched
nothing (a name infopt does not model: verify by hand).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

# ParamBreakdown fields a not-converted list can move to 16 bits.
FIELDS = ("embedding", "lm_head", "attention", "dense_mlp", "routed_experts", "shared_experts",
          "routers", "mamba", "linear_attention")

# Where a family's decoder layers live (multimodal checkpoints nest the language model).
_LAYER_ROOTS = ("model.layers", "model.language_model.layers", "language_model.model.layers",
                "backbone.layers", "transformer.h")
_EMBEDDINGS = ("model.embed_tokens", "model.language_model.embed_tokens",
               "language_model.model.embed_tokens", "backbone.embeddings", "transformer.wte")
_HEADS = ("lm_head", "language_model.lm_head")

# Component -> its module names below `<root>.{i}` (every family's spelling; vLLM and HF agree).
_RELATIVE = {
    "attention": ("self_attn", "attn", "mixer"),
    "dense_mlp": ("mlp", "mixer", "ffn"),
    "routed_experts": ("mlp.experts", "block_sparse_moe.experts", "mixer.experts"),
    "shared_experts": ("mlp.shared_experts", "mlp.shared_expert", "mlp.shared_expert_gate",
                       "mixer.shared_experts"),
    "routers": ("mlp.gate", "mlp.router", "block_sparse_moe.gate", "mixer.gate"),
    "mamba": ("mixer",),
    "linear_attention": ("linear_attn",),
}
# Children a pattern may name inside a component (counted as the whole component).
_CHILDREN = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj",
             "kv_a_proj_with_mqa", "kv_b_proj", "gate_proj", "up_proj", "down_proj",
             "gate_up_proj", "in_proj", "out_proj", "in_proj_qkvz", "in_proj_ba", "in_proj_qkv",
             "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "c_fc", "c_proj", "w1", "w2", "w3",
             "linear_attn")


@dataclass(frozen=True)
class Component:
    """One component instance: a layer's attention, MLP, experts..., or the embedding/head."""

    field: str  # a ParamBreakdown field
    names: tuple[str, ...]  # every spelling of its module name
    params: int
    active_params: int = 0  # routed experts: the top-k share one token runs through


@dataclass(frozen=True)
class NotConverted:
    params: dict[str, int]  # FIELDS (+ routed_experts_active) -> parameters left at 16 bits
    partial: list[str]  # patterns naming part of a component: the whole component counted
    unmatched: list[str]  # patterns that matched no module infopt models


def layer_component(field: str, layer: int, params: int, active_params: int = 0) -> Component:
    names = tuple(f"{root}.{layer}.{rel}" for root in _LAYER_ROOTS for rel in _RELATIVE[field])
    return Component(field, names, params, active_params)


def embedding_components(embedding: int, lm_head: int) -> list[Component]:
    out = [Component("embedding", _EMBEDDINGS, embedding)]
    if lm_head:
        out.append(Component("lm_head", _HEADS, lm_head))
    return out


def _segments_match(pattern: str, name: str) -> bool:
    return f".{pattern}." in f".{name}."


def _matches(pattern: str, name: str) -> bool:
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], name) is not None
        except re.error:
            return False
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return _segments_match(pattern, name)


def _names_child(pattern: str, name: str) -> bool:
    """Whether `pattern` names something inside `name` rather than `name` or an ancestor."""
    if not pattern.startswith("re:") and not any(c in pattern for c in "*?["):
        return f".{name}." in f".{pattern}"  # a plain name: `name` is a dotted part of it
    return any(_matches(pattern, f"{name}.{child}") for child in _CHILDREN)


def not_converted(components: list[Component], patterns: list[str]) -> NotConverted:
    """Parameters per component left at full precision by `patterns` (see the module doc)."""
    params = dict.fromkeys((*FIELDS, "routed_experts_active"), 0)
    used: set[str] = set()
    partial: set[str] = set()
    for comp in components:
        hit = None
        for pattern in patterns:
            if any(_matches(pattern, n) for n in comp.names):
                hit = pattern
                break
            if any(_names_child(pattern, n) for n in comp.names):
                hit = pattern
                partial.add(pattern)
                break
        if hit is None:
            continue
        used.add(hit)
        params[comp.field] += comp.params
        if comp.field == "routed_experts":
            params["routed_experts_active"] += comp.active_params
    unmatched = [p for p in patterns if p not in used and not _is_16bit_anyway(p)]
    return NotConverted(params, sorted(partial), unmatched)


def _is_16bit_anyway(pattern: str) -> bool:
    """Norms and gates the weight model already keeps at 16 bits: matching nothing is fine."""
    return any(word in pattern for word in ("norm", "layernorm", "router", ".gate"))
