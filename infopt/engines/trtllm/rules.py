"""TensorRT-LLM's tuning ladder: which values of each dimension are worth a launch, derived from
the incumbent and the run's facts. Flags and LLM API options as in infopt.engines.trtllm.adapter
(trtllm-serve 1.2, PyTorch backend; tensorrt_llm/llmapi/llm_args.py for the YAML's keys).
Options without a flag are nested knobs ("extra_llm_api_options.kv_cache_config.dtype")."""

from __future__ import annotations

from typing import Any

from infopt.engines.layout import LayoutKnobs
from infopt.engines.rules import Drafter, LadderFacts, candidate, ladder_rules
from infopt.engines.shared_rules import (
    checkpoint_variants,
    host_ram_tier,
    kv_headroom,
    layout_candidates,
    prefill_burst_tokens,
    speculation,
)
from infopt.specs.ladder import Dimension as D
from infopt.specs.ladder import LadderCandidate
from infopt.specs.serving import TrtllmConfig, knob_value

LAYOUT = LayoutKnobs(
    tp="tp_size", pp="pp_size", ep="ep_size",
    missing="trtllm-serve runs one TP x PP engine per server; DP replicas are separate "
    "servers behind a router (or attention DP: enable_attention_dp in the extra options)",
    rank_order="tensorrt_llm/mapping.py: tp_groups are consecutive ranks, pp_groups "
    "range(i, world_size, tp_size)")
_KV = "extra_llm_api_options.kv_cache_config"
_GRAPHS = "extra_llm_api_options.cuda_graph_config"


def weights(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return checkpoint_variants(cfg, f)


def kv_precision(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if knob_value(cfg, f"{_KV}.dtype") == "fp8":
        return "the incumbent already runs an FP8 KV cache"
    return [candidate(D.KV_PRECISION, {f"{_KV}.dtype": "fp8"}, label="kv=fp8",
                      why="kv_cache_config.dtype: fp8 (PyTorch backend): the specification's "
                          "first optimized candidate, half the KV bytes; the 16-bit KV is the "
                          "control")]


def scheduling(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # KvCacheConfig.free_gpu_memory_fraction's default: 0.9 (llm_args.py).
    room = kv_headroom(f, "kv_cache_free_gpu_memory_fraction",
                       cfg.kv_cache_free_gpu_memory_fraction, 0.9,
                       "--kv_cache_free_gpu_memory_fraction")
    out = []
    if cfg.max_batch_size != f.target_concurrency:
        out.append(candidate(D.SCHEDULING, {"max_batch_size": f.target_concurrency},
                             why=f"--max_batch_size {f.target_concurrency}: the runtime batch "
                                 "(and the CUDA graphs captured for it) sized for the target "
                                 "load instead of the serve default"))
    out += overlap_scheduler(cfg, f)
    return out + room or (f"the incumbent already caps the runtime batch at "
                          f"{cfg.max_batch_size} and keeps the overlap scheduler")


# The overlap scheduler launches step n+1 before step n's stop checks, "one extra decoding
# step" a request for hidden host work (docs/source/features/overlap_scheduler.md). The
# extra step is a large share only of short outputs; 16 tokens (6% of the steps) is this
# rule's own cut-off, an assumption, and the measurement decides.
SHORT_OUTPUT_TOKENS = 16


def overlap_scheduler(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate]:
    key = "extra_llm_api_options.disable_overlap_scheduler"
    if knob_value(cfg, key):
        return [candidate(D.SCHEDULING, {key: False}, label="overlap_scheduler=on",
                          why="the overlap scheduler on (TensorRT-LLM's default): the next "
                              "step's GPU work launched while the host finishes this one")]
    if f.gpu_count and 0 < f.mean_output_tokens <= SHORT_OUTPUT_TOKENS:
        return [candidate(D.SCHEDULING, {key: True}, label="overlap_scheduler=off",
                          why=f"disable_overlap_scheduler: outputs of ~{f.mean_output_tokens} "
                              "tokens each pay the overlap scheduler's extra decoding step "
                              f"(1/{f.mean_output_tokens + 1} of their steps); kept only if "
                              "that outweighs the host work it hides")]
    return []


_CHUNKED = "extra_llm_api_options.enable_chunked_prefill"


def prefill(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # Tokens per iteration: the target load's prompts at once, with chunked context so a
    # longer prompt still fits an iteration (the full context stays servable).
    burst = prefill_burst_tokens(f)
    out = []
    if cfg.max_num_tokens != burst:
        changes: dict[str, Any] = {"max_num_tokens": burst}
        why = (f"--max_num_tokens {burst}: the target load's prompts ({f.target_concurrency} x "
               f"{f.mean_prompt_tokens} tokens) in one iteration")
        # Below max_seq_len the PyTorch backend refuses longer prompts (HTTP 400, llm.py
        # BaseLLM._check_arguments) unless chunked prefill splits them: the two go together.
        if burst < cfg.max_seq_len and not cfg.chunked_prefill:
            changes[_CHUNKED] = True
            why += ", with chunked prefill so prompts up to the full context are still served"
        out.append(candidate(D.PREFILL, changes, label=f"max_num_tokens={burst}", why=why))
    if knob_value(cfg, _CHUNKED) is not True:
        out.append(candidate(D.PREFILL, {_CHUNKED: True},
                             label="chunked_prefill=on",
                             why="enable_chunked_prefill: long prompts split over iterations "
                                 "so decode steps are not held behind them"))
    return out or "the incumbent already sizes its iterations for the target load"


def compilation(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if f.gpu_count == 0:
        return "TensorRT-LLM's CUDA graphs are a GPU path; this run has no GPU"
    out = []
    # CudaGraphConfig.max_batch_size: captured up to 128 when unset (llm_args.py); a larger
    # decode batch runs without a graph.
    ceiling = knob_value(cfg, f"{_GRAPHS}.max_batch_size") or 128
    if f.target_concurrency > ceiling:
        out.append(candidate(D.COMPILATION,
                             {f"{_GRAPHS}.max_batch_size": f.target_concurrency},
                             label=f"cuda_graph_max_batch={f.target_concurrency}",
                             why=f"cuda_graph_config.max_batch_size: decode batches of the "
                                 f"target load ({f.target_concurrency}) are above the {ceiling} "
                                 "captured, so they run without a graph; captured up to the "
                                 "target load instead"))
    if not knob_value(cfg, f"{_GRAPHS}.enable_padding"):
        out.append(candidate(D.COMPILATION, {f"{_GRAPHS}.enable_padding": True},
                             label="cuda_graph_padding",
                             why="cuda_graph_config.enable_padding: each batch padded to a "
                                 "captured size, so every decode step replays a CUDA graph"))
    return out or ("the incumbent already pads batches to the captured CUDA graph sizes, "
                   f"up to {ceiling}")


def prefix_caching(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    reuse = knob_value(cfg, f"{_KV}.enable_block_reuse")
    if f.prefix_reuse:
        if reuse is False:
            return [candidate(D.PREFIX_CACHING, {f"{_KV}.enable_block_reuse": True},
                              label="block_reuse=on",
                              why="KV block reuse on: the workload shares prompt prefixes")]
        return "KV block reuse (on by default) already serves the workload's shared prefixes"
    if reuse is False:
        return "the incumbent already runs without KV block reuse"
    return [candidate(D.PREFIX_CACHING, {f"{_KV}.enable_block_reuse": False},
                      label="block_reuse=off",
                      why="kv_cache_config.enable_block_reuse: false: no shared prefixes, so "
                          "hashing and matching blocks is pure overhead")]


def parallel_layout(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return layout_candidates(LAYOUT, cfg, f)


_SPEC = "extra_llm_api_options.speculative_config"
# Drafter kinds as TensorRT-LLM 1.2's decoding types: DecodingBaseConfig.from_dict's registry
# keys (llm_args.py:768-782 at v1.2.1). "Eagle" is EAGLE-3 on the PyTorch backend (1.2 has no
# "Eagle3" key and no EAGLE-1/2 on PyTorch); "DraftTarget", not the internal "Draft_Target".
_DECODING = {"mtp": "MTP", "eagle3": "Eagle", "draft_model": "DraftTarget"}


def _drafter(d: Drafter, n: int) -> dict[str, Any] | None:
    kind = _DECODING.get(d.kind)
    if kind is None:
        return None
    if d.kind == "mtp":
        # 1.2 sets MTP's max_draft_len from num_nextn_predict_layers (default 1) in
        # MTPDecodingConfig.from_dict and validate_speculative_config: that field is the length.
        return {f"{_SPEC}.decoding_type": kind, f"{_SPEC}.num_nextn_predict_layers": n}
    # dotted knobs: a candidate's changes are scalars, validated together
    return {f"{_SPEC}.decoding_type": kind, f"{_SPEC}.max_draft_len": n,
            f"{_SPEC}.speculative_model": d.path}


def ngram_pattern_tokens(target_concurrency: int) -> int:
    """NGram's max_matching_ngram_size, which 1.2 asserts > 0 and defaults to 0: what upstream
    picks for its own AUTO speculation, 3 at a max_batch_size of up to 4, else 5 (the AUTO
    heuristic of tensorrt_llm/llmapi/llm.py in 1.x, later _torch/speculative/auto_heuristic.py
    suggest_spec_config). Keyed here on the target load, the batch the run serves."""
    return 3 if target_concurrency <= 4 else 5


def speculative(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """speculative_config: each verified drafter, then n-grams, a series over the draft length."""
    if knob_value(cfg, _SPEC) is not None:
        return "the incumbent already speculates (speculative_config)"
    pattern = ngram_pattern_tokens(f.target_concurrency)
    return speculation(f, lambda n: {f"{_SPEC}.decoding_type": "NGram",
                                     f"{_SPEC}.max_draft_len": n,
                                     f"{_SPEC}.max_matching_ngram_size": pattern},
                       _drafter, "TensorRT-LLM", "speculative_config decoding_type NGram")


def kv_tier(cfg: TrtllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """kv_cache_config.host_cache_size: blocks evicted from the GPU kept in host RAM for later
    requests with the same prefix, at the allowance the user gave (kv_prefix_budget), only
    where prompts share prefixes and block reuse is on."""
    if f.prefix_reuse and knob_value(cfg, f"{_KV}.enable_block_reuse") is False:
        return "KV block reuse is off: a host tier holds reusable blocks only"
    size = f.kv_prefix_ram_bytes or 0
    return host_ram_tier(f, knob_value(cfg, f"{_KV}.host_cache_size"),
                         f"{_KV}.host_cache_size", round(size / 2**30, 1), "GiB",
                         "kv_cache_config.host_cache_size (bytes)", "host_cache",
                         "TensorRT-LLM runs on GPUs only", value=size)


RULES = ladder_rules(weights, kv_precision, scheduling, prefill, compilation, prefix_caching,
                     parallel_layout, speculative, kv_tier)
