"""The per-layer plan of a decoder: each layer's token mixer and feed-forward block.

Four ways configs describe it:

* `hybrid_override_pattern` (Nemotron-H): one character per block, a mixer OR an MLP;
* `block_configs` (DeciLM / Nemotron-NAS, e.g. Llama-3.3-Nemotron-Super-49B): per layer an
  attention block ({no_op, replace_with_linear, n_heads_in_group}) and an FFN block ({no_op,
  replace_with_linear, ffn_mult}); KV heads = num_attention_heads / n_heads_in_group, and the FFN
  width is `_ffn_mult_to_intermediate_size`: int(2 x ffn_mult x hidden / 3) rounded up to a
  multiple of 256 (configuration_decilm.py / block_config.py of the checkpoint; vLLM
  nemotron_nas.py uses the same);
* `layer_types` (Gemma 3, gpt-oss, Qwen3-Next / Qwen3.5 with linear_attention, DeepSeek-V3.2's
  indexed_attention), Llama 4's `no_rope_layers` + `attention_chunk_size`, or a sliding window
  rule (Qwen2's max_window_layers, Mistral's every-layer window);
* MoE placement keys (first_k_dense_replace, moe_layer_freq, decoder_sparse_step,
  mlp_only_layers, ERNIE's moe_layer_start_index/end_index/interval, Llama 4's moe_layers or
  interleave_moe_layer_step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from infopt.specs.base import InputError
from infopt.specs.inspection import LayerKind, MlpKind

_MIXER_CHARS = {"M": LayerKind.MAMBA, "*": LayerKind.FULL_ATTENTION}  # Nemotron-H pattern
_MLP_CHARS = {"E": MlpKind.MOE, "-": MlpKind.DENSE}


class Keys(Protocol):
    cfg: dict[str, Any]

    def get(self, *names: str, default: Any = None) -> Any: ...


@dataclass(frozen=True)
class Layer:
    mixer: LayerKind | None  # None: no token mixer (a skipped or linear-replaced block)
    mlp: MlpKind | None  # None: no feed-forward block
    kv_heads: int | None = None  # this attention layer's KV heads, when layers differ
    intermediate: int | None = None  # this dense MLP's width, when layers differ
    linear_mixer: bool = False  # attention replaced by one hidden x hidden Linear
    linear_mlp: bool = False  # FFN replaced by one hidden x hidden Linear


def _find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - n % k


def ffn_mult_to_intermediate(ffn_mult: float, hidden: int) -> int:
    """DeciLM's FFN width for an ffn_mult (block_config.py `_ffn_mult_to_intermediate_size`)."""
    return _find_multiple(int(2 * ffn_mult * hidden / 3), 256)


def _decilm_block(i: int, block: Any, n_heads: int, hidden: int) -> Layer:
    if not isinstance(block, dict) or not isinstance(block.get("attention"), dict) or \
            not isinstance(block.get("ffn"), dict):
        raise InputError(f"block_configs[{i}] must be an object with 'attention' and 'ffn' "
                         "objects; pass the checkpoint's config.json unmodified.")
    attn, ffn = block["attention"], block["ffn"]
    for part, name in ((attn, "attention"), (ffn, "ffn")):
        odd = [key for key in ("sparsify", "window_length", "num_sink_tokens")
               if part.get(key) not in (None, False)]
        if odd:
            raise InputError(f"block_configs[{i}].{name} sets {', '.join(odd)}: infopt does not "
                             "model sparsified, windowed or sink-token DeciLM blocks yet.")
    mixer, kv, linear_mixer = None, None, False
    if attn.get("replace_with_linear"):
        linear_mixer = True
    elif not attn.get("no_op"):
        group = attn.get("n_heads_in_group")
        if not isinstance(group, int) or isinstance(group, bool) or group < 1 or n_heads % group:
            raise InputError(f"block_configs[{i}].attention.n_heads_in_group must be a whole "
                             f"number dividing num_attention_heads={n_heads}, got {group!r}.")
        mixer, kv = LayerKind.FULL_ATTENTION, n_heads // group
    mlp, width, linear_mlp = None, None, False
    if ffn.get("replace_with_linear"):
        linear_mlp = True
    elif not ffn.get("no_op"):
        mult = ffn.get("ffn_mult")
        if not isinstance(mult, (int, float)) or isinstance(mult, bool) or not mult > 0:
            raise InputError(f"block_configs[{i}].ffn.ffn_mult must be a positive number, got "
                             f"{mult!r}.")
        mlp, width = MlpKind.DENSE, ffn_mult_to_intermediate(float(mult), hidden)
    return Layer(mixer, mlp, kv, width, linear_mixer, linear_mlp)


def _decilm_plan(blocks: Any, n: int, n_heads: int, hidden: int) -> list[Layer]:
    if not isinstance(blocks, list) or len(blocks) != n:
        raise InputError(f"block_configs must list num_hidden_layers={n} blocks, got "
                         f"{len(blocks) if isinstance(blocks, list) else type(blocks).__name__}.")
    return [_decilm_block(i, b, n_heads, hidden) for i, b in enumerate(blocks)]


def _llama4_mixers(k: Keys, n: int) -> list[LayerKind]:
    """Llama 4 (transformers modeling_llama4.py Llama4TextAttention, vLLM llama4.py): layer i
    uses RoPE when no_rope_layers[i] is 1, and a RoPE layer attends within its chunk of
    attention_chunk_size tokens when that is set (vLLM: ChunkedLocalAttention); a NoPE layer
    (0) attends to the whole context. An absent or empty no_rope_layers makes every
    no_rope_layer_interval-th layer (default 4) NoPE, as Llama4TextConfig does."""
    rope = k.cfg.get("no_rope_layers")
    if not rope:
        interval = int(k.get("no_rope_layer_interval", default=4))
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    if len(rope) < n or any(r not in (0, 1) or isinstance(r, bool) for r in rope[:n]):
        raise InputError(f"no_rope_layers must list a 0 (NoPE) or 1 (RoPE) for each of the "
                         f"num_hidden_layers={n} layers, got {rope!r}; pass the checkpoint's "
                         "config.json unmodified.")
    chunked = k.get("attention_chunk_size") is not None
    return [LayerKind.CHUNKED_ATTENTION if r and chunked else LayerKind.FULL_ATTENTION
            for r in rope[:n]]


def _mixers(k: Keys, n: int, notes: list[str], chunked_rope: bool) -> list[LayerKind]:
    window = k.get("sliding_window")
    # A config's own layer_types first; then Llama 4's RoPE/NoPE rule (its own, not only the
    # class's layer_types, which transformers before 4.54 did not derive); with Qwen2's
    # use_sliding_window key its own rule below; otherwise the family class's layer_types
    # (Gemma 3 derives them from a pattern, DeepSeek-V3.2 marks every layer indexed).
    types = k.cfg.get("layer_types")
    if types is None and chunked_rope:
        return _llama4_mixers(k, n)
    if types is None and "use_sliding_window" not in k.cfg:
        types = k.get("layer_types")
    if types is not None:
        try:
            mixers = [LayerKind(t) for t in types]
        except ValueError as exc:
            raise InputError(f"layer_types has a kind infopt does not know ({exc}); known: "
                             f"{', '.join(x.value for x in LayerKind)}.") from exc
        if len(mixers) != n:
            raise InputError(f"layer_types lists {len(mixers)} layers but num_hidden_layers is "
                             f"{n}; pass the checkpoint's config.json unmodified.")
        return mixers
    if window and k.get("use_sliding_window") is not False:
        # Qwen2 convention: layers from max_window_layers up slide; elsewhere (Mistral v0.1,
        # Phi-3) a non-null sliding_window applies to every layer.
        first = int(k.get("max_window_layers", default=0)) if "use_sliding_window" in k.cfg else 0
        return [LayerKind.SLIDING_ATTENTION if i >= first else LayerKind.FULL_ATTENTION
                for i in range(n)]
    if window:
        notes.append(f"sliding_window={window} is set but use_sliding_window=false: every "
                     "layer attends to the full context.")
    return [LayerKind.FULL_ATTENTION] * n


def _mlps(k: Keys, n: int, moe: bool) -> list[MlpKind]:
    if not moe:
        return [MlpKind.DENSE] * n
    first_dense = int(k.get("first_k_dense_replace", default=0))  # DeepSeek
    freq = int(k.get("moe_layer_freq", default=1))
    step = int(k.get("decoder_sparse_step", default=1))  # Qwen-MoE
    dense_only = set(k.get("mlp_only_layers", default=[]))
    # ERNIE 4.5 MoE (transformers modeling_ernie4_5_moe.py): layers start..end whose
    # (index + 1) is a multiple of the interval.
    start = int(k.get("moe_layer_start_index", default=0))
    end = k.get("moe_layer_end_index")
    end = n - 1 if end is None or int(end) < 0 else int(end)
    interval = int(k.get("moe_layer_interval", default=1))
    # Llama 4 (Llama4TextConfig, vLLM llama4.py): the moe_layers indices when given, else every
    # interleave_moe_layer_step-th layer counting from 1 (Maverick: 2, every other layer).
    listed = k.get("moe_layers")
    interleave = int(k.get("interleave_moe_layer_step", default=1))
    return [MlpKind.MOE if (i >= first_dense and i % freq == 0 and (i + 1) % step == 0
                            and i not in dense_only and start <= i <= end
                            and (i + 1) % interval == 0
                            and (i in listed if listed is not None else (i + 1) % interleave == 0))
            else MlpKind.DENSE
            for i in range(n)]


def layer_plan(k: Keys, n: int, moe: bool, n_heads: int, hidden: int, notes: list[str],
               chunked_rope: bool = False) -> tuple[list[Layer], int | None]:
    """Per layer: token mixer and feed-forward block; and the tokens a windowed layer holds at
    most (the sliding window, or Llama 4's attention chunk) if any layer is windowed.
    `chunked_rope`: the family reads its layers by Llama 4's no_rope_layers rule."""
    pattern = k.get("hybrid_override_pattern")
    if pattern is not None:  # Nemotron-H: one block per character, a mixer OR an MLP
        if len(pattern) != n or set(pattern) - set(_MIXER_CHARS) - set(_MLP_CHARS):
            raise InputError(
                f"hybrid_override_pattern '{pattern}' must have num_hidden_layers={n} characters "
                "from M (Mamba-2), * (attention), E (MoE), - (dense MLP); fix the config.")
        return [Layer(_MIXER_CHARS.get(c), _MLP_CHARS.get(c)) for c in pattern], None
    blocks = k.get("block_configs")
    if blocks is not None:
        return _decilm_plan(blocks, n, n_heads, hidden), None
    mixers = _mixers(k, n, notes, chunked_rope)
    # Llama 4's dense layers are wider than its experts (intermediate_size_mlp vs
    # intermediate_size, modeling_llama4.py Llama4TextDecoderLayer).
    dense_width = k.get("intermediate_size_mlp")
    layers = [Layer(mixer, mlp, intermediate=int(dense_width)
                    if dense_width and mlp is MlpKind.DENSE else None)
              for mixer, mlp in zip(mixers, _mlps(k, n, moe), strict=True)]
    return layers, _window(k, mixers)


def _window(k: Keys, mixers: list[LayerKind]) -> int | None:
    """The token cap of the windowed layers. Sliding and chunked layers in one model would need
    two caps; no published model has both, so such a config is refused rather than mis-sized."""
    slides = LayerKind.SLIDING_ATTENTION in mixers
    chunks = LayerKind.CHUNKED_ATTENTION in mixers
    if slides and chunks:
        raise InputError("layers are marked both sliding_attention and chunked_attention: "
                         "infopt caps one kind of windowed layer per model. Not supported yet; "
                         "plan it by hand.")
    if chunks:
        chunk = k.get("attention_chunk_size")
        if not chunk:
            raise InputError("layers are marked chunked_attention but attention_chunk_size is "
                             "missing; add the chunk size (tokens) to the config.")
        return int(chunk)
    window = k.get("sliding_window")
    if slides and not window:
        raise InputError("layers are marked sliding_attention but sliding_window is missing; "
                         "add the window size (tokens) to the config.")
    return int(window) if slides else None
