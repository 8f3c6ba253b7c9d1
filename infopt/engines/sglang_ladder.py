"""SGLang's tuning ladder: which values of each dimension are worth a launch, derived from the
incumbent and the run's facts. Flags as in infopt.engines.sglang (SGLang 0.5.23
server_args.py; https://docs.sglang.io/advanced_features/server_arguments.html)."""

from __future__ import annotations

from typing import Any

from infopt.costmodel.allocation import EngineKnobs
from infopt.engines.ladder import Drafter, LadderFacts, candidate, ladder_rules
from infopt.engines.layout import LayoutKnobs
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
from infopt.specs.serving import SglangConfig

# --tp-size/--pp-size, --dp-size replicas under SGLang's own data-parallel controller (plain
# DP, not DP attention), --ep-size over the TP ranks.
LAYOUT = LayoutKnobs(
    tp="tp_size", pp="pp_size", dp="dp_size", ep="ep_size",
    rank_order="sglang/srt/entrypoints/engine.py _launch_scheduler_processes: gpu_id = "
    "base_gpu_id + pp_rank x tp_size + tp_rank x gpu_id_step (step 1); each DP replica "
    "starts its own base after the one before")


def weights(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return checkpoint_variants(cfg, f)


def kv_precision(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.kv_cache_dtype != "auto":
        return f"the incumbent already runs kv_cache_dtype={cfg.kv_cache_dtype}"
    share = ("" if f.kv_read_share is None else
             f"; KV reads are ~{f.kv_read_share:.1%} of weight reads per decoded token here")
    # fp8_e4m3 (not e5m2): the precision-first FP8 format, and SGLang's spelling of FP8 KV.
    return [candidate(D.KV_PRECISION, {"kv_cache_dtype": "fp8_e4m3"}, label="kv=fp8_e4m3",
                      why="--kv-cache-dtype fp8_e4m3: the specification's first optimized "
                          "candidate (half the KV bytes: twice the pool, less to read per "
                          "step); the 16-bit KV is the control" + share)]


def scheduling(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # Unset, SGLang derives the cap from the KV pool (max_total_num_tokens / context x 512,
    # at least 2048: scheduler.py): far above a small target, so the running batch is sized
    # for loads the workload never brings.
    out = []
    if cfg.max_running_requests != f.target_concurrency:
        out.append(candidate(D.SCHEDULING, {"max_running_requests": f.target_concurrency},
                             why=f"--max-running-requests {f.target_concurrency}: the running "
                                 "batch capped at the target load instead of the pool-derived "
                                 "default"))
    # Longest-prefix-match ordering pays only where waiting prompts share prefixes the radix
    # cache holds (schedule_policy.py; it falls back to fcfs for long queues itself).
    if f.prefix_reuse and not cfg.disable_radix_cache and cfg.schedule_policy in (None, "fcfs"):
        out.append(candidate(D.SCHEDULING, {"schedule_policy": "lpm"}, label="schedule=lpm",
                             why="--schedule-policy lpm: waiting requests ordered by the "
                                 "longest prefix already in the radix cache, instead of "
                                 "arrival (fcfs, the default): the workload shares prefixes"))
    # SGLang's default fraction varies with the GPU and TP; 0.88 is an 80 GB GPU's at TP 1
    # (the cost model's EngineKnobs default, an assumption where the GPU differs).
    out += kv_headroom(f, "mem_fraction_static", cfg.mem_fraction_static,
                       EngineKnobs().mem_fraction_static, "--mem-fraction-static")
    return out or (f"the incumbent already caps running requests at "
                   f"{cfg.max_running_requests}"
                   + ("" if f.prefix_reuse else "; no shared prefixes for lpm ordering"))


def prefill(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    # Tokens per prefill chunk: the target load's prompts in one chunk. SGLang's default is by
    # GPU memory (2048 under 35 GB up to 16384 on the largest: server_args.py).
    burst = prefill_burst_tokens(f)
    out = []
    if cfg.chunked_prefill_size != burst:
        out.append(candidate(D.PREFILL, {"chunked_prefill_size": burst},
                             why=f"--chunked-prefill-size {burst}: the target load's prompts "
                                 f"({f.target_concurrency} x {f.mean_prompt_tokens} tokens) in "
                                 "one chunk instead of the memory-derived default"))
    backend = attention_backend(cfg, f)
    if isinstance(backend, str):
        return out or f"the incumbent already prefills {burst} tokens per chunk; {backend}"
    return out + backend


# docs/advanced_features/attention_backend.md, "If you don't specify --attention-backend":
# (MHA default, MLA default) by compute capability's major; the alternative worth a launch is
# the other backend the support matrix lists for that architecture and attention kind.
_BACKENDS = {9: (("fa3", "flashinfer"), ("fa3", "flashmla")),
             10: (("trtllm_mha", "flashinfer"), ("trtllm_mla", "flashinfer"))}


def attention_backend(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """The attention kernels SGLang did not pick by default, on the same GPU and model."""
    if f.gpu_count == 0 or f.gpu_compute_capability is None:
        return "the attention backend is chosen per GPU architecture; no GPU was reported"
    major = int(float(f.gpu_compute_capability))
    kind = "MLA" if f.mla else "MHA"
    pair = _BACKENDS.get(major)
    if pair is None:
        return (f"on compute capability {f.gpu_compute_capability} SGLang's documented {kind} "
                "default (flashinfer, else triton) is its only fast backend there")
    default, other = pair[1] if f.mla else pair[0]
    if cfg.attention_backend not in (None, default):
        return f"the incumbent already runs the {cfg.attention_backend} attention backend"
    return [candidate(D.PREFILL, {"attention_backend": other}, label=f"attention={other}",
                      why=f"--attention-backend {other}: the other {kind} kernels SGLang "
                          f"supports on compute capability {major}.x; its default there is "
                          f"{default} (attention_backend.md); kept only if it measures better")]


# server_args.py _handle_gpu_memory_settings: --cuda-graph-max-bs when unset, by GPU memory
# (MiB, upper bounds) as (TP < 4, TP >= 4); 512 above the last bound, 160 when not known.
_GRAPH_MAX_BS = ((20 * 1024, 8, 8), (35 * 1024, 24, 80), (60 * 1024, 32, 160),
                 (160 * 1024, 256, 512))


def default_cuda_graph_max_bs(gpu_memory_bytes: int | None, tp: int) -> int:
    if gpu_memory_bytes is None:
        return 160
    mib = gpu_memory_bytes / 2**20
    for bound, small, large in _GRAPH_MAX_BS:
        if mib < bound:
            return small if tp < 4 else large
    return 512


def compilation(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if f.gpu_count == 0:
        return "SGLang's CUDA graphs and torch.compile are GPU paths; this run has no GPU"
    if cfg.disable_cuda_graph:
        return [candidate(D.COMPILATION, {"disable_cuda_graph": False}, label="cuda_graphs=on",
                          why="CUDA graphs on (SGLang's default): each decode step one replay "
                              "instead of a launch per kernel")]
    out = []
    ceiling = cfg.cuda_graph_max_bs or default_cuda_graph_max_bs(f.gpu_memory_bytes,
                                                                 cfg.tp_size or 1)
    t = f.target_concurrency
    if t > ceiling:
        out.append(candidate(D.COMPILATION, {"cuda_graph_max_bs": t},
                             why=f"--cuda-graph-max-bs {t}: decode batches of the target load "
                                 f"are larger than the {ceiling} captured (SGLang's default for "
                                 "this GPU's memory and TP, server_args.py), so they run "
                                 "eagerly; captured up to the target load instead"))
    if not cfg.enable_torch_compile:
        out.append(candidate(D.COMPILATION, {"enable_torch_compile": True},
                             label="torch_compile",
                             why="--enable-torch-compile: compiled decode kernels over the CUDA "
                                 "graphs, documented to help small models at small batch "
                                 "sizes; slower start, kept only if it measures better"))
    return out or (f"the incumbent already runs torch.compile, and captures decode batches up "
                   f"to {ceiling} (the target load is {t})")


def prefix_caching(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if f.prefix_reuse:
        if cfg.disable_radix_cache:
            return [candidate(D.PREFIX_CACHING, {"disable_radix_cache": False},
                              label="radix_cache=on",
                              why="the radix cache on: the workload shares prompt prefixes")]
        return "the radix cache (on by default) already serves the workload's shared prefixes"
    if cfg.disable_radix_cache:
        return "the incumbent already runs without the radix cache"
    return [candidate(D.PREFIX_CACHING, {"disable_radix_cache": True}, label="radix_cache=off",
                      why="--disable-radix-cache: the workload has no shared prefixes, so the "
                          "tree's matching and eviction are pure overhead")]


def parallel_layout(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    return layout_candidates(LAYOUT, cfg, f)


_SGLANG_ALGORITHM = {"mtp": "EAGLE", "eagle3": "EAGLE3", "eagle": "EAGLE",
                     "draft_model": "STANDALONE"}


def _drafter(d: Drafter, n: int) -> dict[str, Any]:
    """n draft steps of a chain (top-k 1), so n + 1 tokens verified a step (SGLang adjusts
    num-draft-tokens to num-steps + 1 at top-k 1); MTP layers load from the model's own
    checkpoint, with no draft path (SGLang's DeepSeek-V3 docs)."""
    out: dict[str, Any] = {"speculative_algorithm": _SGLANG_ALGORITHM[d.kind],
                           "speculative_num_steps": n, "speculative_eagle_topk": 1,
                           "speculative_num_draft_tokens": n + 1}
    if d.kind != "mtp":
        out["speculative_draft_model_path"] = d.path
    return out


def speculative(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.speculative_algorithm is not None:
        return f"the incumbent already speculates with {cfg.speculative_algorithm}"
    return speculation(f, lambda n: {"speculative_algorithm": "NGRAM",
                                     "speculative_num_draft_tokens": n}, _drafter, "SGLang",
                       "--speculative-algorithm NGRAM")


def kv_tier(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """The hierarchical cache (--enable-hierarchical-cache --hicache-size, GB of host memory
    per rank): the radix cache spills to host RAM and loads prefixes back."""
    size = max(1, (f.kv_prefix_ram_bytes or 0) // 10**9)
    return host_ram_tier(f, cfg.hicache_size_gb, "hicache_size_gb", size, "GB",
                         "--enable-hierarchical-cache --hicache-size", "hicache",
                         "SGLang's hierarchical cache backs GPU memory with host RAM; this run "
                         "has no GPU")



RULES = ladder_rules(weights, kv_precision, scheduling, prefill, compilation, prefix_caching,
                     parallel_layout, speculative, kv_tier)
