"""vLLM's tuning ladder: which values of each dimension are worth a launch, derived from the
incumbent and the run's facts. Flags as in infopt.engines.vllm.adapter (vLLM 0.32)."""

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
from infopt.specs.serving import VllmConfig

# How vLLM spells each axis: --tensor-parallel-size, --pipeline-parallel-size,
# --data-parallel-size, and --enable-expert-parallel over the TP (x DP) ranks.
LAYOUT = LayoutKnobs(tp="tensor_parallel_size", pp="pipeline_parallel_size",
                     dp="data_parallel_size", ep="enable_expert_parallel", ep_is_flag=True,
                     rank_order="vllm/distributed/parallel_state.py: TP groups are consecutive "
                     "ranks ([g0, g1], [g2, g3]); a PP group takes every TP-th ([g0, g2, g4, "
                     "g6]); DP ranks outermost")


def weights(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return checkpoint_variants(cfg, f)


def kv_precision(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.kv_cache_dtype != "auto":
        return f"the incumbent already runs kv_cache_dtype={cfg.kv_cache_dtype}"
    share = ("" if f.kv_read_share is None else
             f"; KV reads are ~{f.kv_read_share:.1%} of weight reads per decoded token here")
    return [candidate(D.KV_PRECISION, {"kv_cache_dtype": "fp8"}, label="kv=fp8",
                      why="the specification's first optimized candidate where model, device "
                          "and backend support it; the 16-bit KV is the control" + share)]


def scheduling(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # The default cap (256 sequences) admits any load; a cap at the target load lets the
    # scheduler size its batches (and the CPU backend its attention metadata) for it.
    room = kv_headroom(f, "gpu_memory_utilization", cfg.gpu_memory_utilization, 0.9,
                       "--gpu-memory-utilization")  # vLLM's default: 0.9
    if cfg.max_num_seqs == f.target_concurrency:
        return room or f"the incumbent already caps running sequences at {cfg.max_num_seqs}"
    return [candidate(D.SCHEDULING, {"max_num_seqs": f.target_concurrency},
                      why=f"--max-num-seqs {f.target_concurrency}: running sequences capped "
                          "at the target load instead of the default 256"), *room]


def prefill(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # Tokens per scheduler step (chunked prefill's budget): the target load's prompts at once.
    burst = prefill_burst_tokens(f)
    if cfg.max_num_batched_tokens == burst:
        return f"the incumbent already schedules {burst} tokens per step"
    return [candidate(D.PREFILL, {"max_num_batched_tokens": burst},
                      why=f"--max-num-batched-tokens {burst}: the target load's prompts "
                          f"({f.target_concurrency} x {f.mean_prompt_tokens} tokens) in one "
                          "scheduler step instead of chunks")]


def compilation(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate]:
    if cfg.enforce_eager:
        return [candidate(D.COMPILATION, {"enforce_eager": False}, label="compiled",
                          why="torch.compile (and CUDA graphs on a GPU): slower start, "
                              "faster steps")]
    return [candidate(D.COMPILATION, {"enforce_eager": True}, label="eager",
                      why="--enforce-eager: no compilation at start-up (37 s vs ~141 s on 2 "
                          "cores); compiled steps measured faster here (120 vs 84 tok/s at 4 "
                          "streams), so eager is kept only if it measures better")]


def prefix_caching(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if not f.prefix_reuse:
        return ("the workload has no shared prompt prefixes (unique heads): nothing for a "
                "prefix cache to reuse")
    on = cfg.enable_prefix_caching is not False
    return [candidate(D.PREFIX_CACHING, {"enable_prefix_caching": not on},
                      why="prefix caching " + ("off: its hashing costs when little is reused"
                                               if on else "on: the workload shares prefixes"))]


def parallel_layout(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return layout_candidates(LAYOUT, cfg, f)


_VLLM_METHOD = {"mtp": "mtp", "eagle3": "eagle3", "eagle": "eagle", "draft_model": "draft_model"}


def _drafter(d: Drafter, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"speculative_method": _VLLM_METHOD[d.kind],
                           "num_speculative_tokens": n}
    if d.kind != "mtp":
        out["speculative_model"] = d.path
    return out


def speculative(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.speculative_method is not None:
        return (f"the incumbent already drafts {cfg.num_speculative_tokens} tokens with "
                f"{cfg.speculative_method}")
    return speculation(f, lambda n: {"speculative_method": "ngram", "num_speculative_tokens": n},
                       _drafter, "vLLM", "--speculative-config method ngram")


def kv_tier(cfg: VllmConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """Native CPU offloading (--kv-offloading-size, GiB summed over TP ranks): KV blocks
    evicted from the GPU kept in host RAM and brought back for a later request with the same
    prefix."""
    size = round((f.kv_prefix_ram_bytes or 0) / 2**30, 1)
    return host_ram_tier(f, cfg.kv_offloading_size_gib, "kv_offloading_size_gib", size, "GiB",
                         "--kv-offloading-size", "kv_offload",
                         "on the CPU backend the KV cache already lives in host RAM: no tier "
                         "below it")



RULES = ladder_rules(weights, kv_precision, scheduling, prefill, compilation, prefix_caching,
                     parallel_layout, speculative, kv_tier)
