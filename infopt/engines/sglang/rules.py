"""SGLang's tuning ladder: which values of each dimension are worth a launch, derived from the
incumbent and the run's facts. Flags as in infopt.engines.sglang.adapter (SGLang 0.5.23, its
server arguments in python/sglang/srt/arg_groups/ of the sglang-0.5.23 wheel;
https://docs.sglang.io/advanced_features/server_arguments.html). Every candidate's command is
parsed and resolved by that wheel's own code in tests/integration/test_sglang_argv.py."""

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
    # Unset, SGLang derives the cap from the KV pool (default_running_cap): far above a small
    # target, so the running batch is sized for loads the workload never brings.
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
    # SGLang's default fraction varies with the GPU and shape (memory_hook.py): its own rule.
    default = (default_mem_fraction_static(
        f.gpu_memory_bytes, cfg.tp_size or 1, cfg.pp_size or 1, cfg.chunked_prefill_size,
        cfg.cuda_graph_max_bs_decode, graphs=not cfg.disable_cuda_graph)
        if f.gpu_memory_bytes else 0.88)
    out += kv_headroom(f, "mem_fraction_static", cfg.mem_fraction_static, default,
                       "--mem-fraction-static")
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


# The decode graphs' largest batch when --cuda-graph-max-bs-decode is unset, by GPU memory
# (MiB, upper bounds) as (TP < 4, TP >= 4); 512 above the last bound, 160 when not known
# (0.5.23 arg_groups/memory_hook.py handle_gpu_memory_settings).
_GRAPH_MAX_BS = ((20 * 1024, 8, 8), (35 * 1024, 48, 160), (60 * 1024, 32, 160),
                 (90 * 1024, 256, 512), (160 * 1024, 256, 512))


def default_cuda_graph_max_bs(gpu_memory_bytes: int | None, tp: int,
                              max_running_requests: int | None = None) -> int:
    """SGLang's own decode max_bs; an explicit --max-running-requests below it lowers it
    (memory_hook.py: "decode_max_bs_is_default and ... max_bs > cfg.max_running_requests")."""
    if gpu_memory_bytes is None:
        found = 160
    else:
        mib = gpu_memory_bytes / 2**20
        found = next(((small if tp < 4 else large) for bound, small, large in _GRAPH_MAX_BS
                      if mib < bound), 512)
    return min(found, max_running_requests) if max_running_requests else found


# arg_groups/memory_hook.py (0.5.23) handle_gpu_memory_settings: chunked_prefill_size by GPU
# memory (MiB bound, tokens), and the decode graphs' max_bs (infopt.engines.sglang.rules).
_CHUNKED_PREFILL = ((20 * 1024, 2048), (35 * 1024, 4096), (60 * 1024, 4096),
                    (160 * 1024, 8192))


def default_chunked_prefill_size(gpu_memory_bytes: int) -> int:
    mib = gpu_memory_bytes / 2**20
    return next((size for bound, size in _CHUNKED_PREFILL if mib < bound), 16384)


def _prefill_graph_sizes(max_bs: int) -> int:
    """How many prefill graphs cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes
    captures up to `max_bs` tokens (each reserves 8 MB outside torch's pool)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32),
             *range(576, 1025, 64), *range(1280, 4097, 256), *range(4608, max_bs + 1, 512)]
    return sum(1 for s in sizes if s <= max_bs)


def default_mem_fraction_static(gpu_memory_bytes: int, tp: int, pp: int = 1,
                                chunked_prefill_size: int | None = None,
                                decode_graph_max_bs: int | None = None,
                                mla: bool = False, graphs: bool = True) -> float:
    """SGLang 0.5.23's mem_fraction_static when none is given (memory_hook.py, "Static memory
    and runtime headroom"): (GPU MB - reserved) / GPU MB, reserved = 512 + 1.5 x max(chunked
    prefill, 2048) + TP x PP / 8 x 1024 + the graphs' reserve (2 per decode batch size; 8 per
    prefill graph, 1.5 GiB with MLA), at least 10 GiB on a GPU above 60 GiB. The static share
    it leaves for weights and KV is what the fit must assume, not a constant (0.83 on one
    H100 at SGLang's defaults, 0.88 in the older rule infopt used to assume)."""
    mb = gpu_memory_bytes / 2**20
    chunked = chunked_prefill_size or default_chunked_prefill_size(gpu_memory_bytes)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024
    if graphs:
        reserved += 2 * (decode_graph_max_bs or default_cuda_graph_max_bs(gpu_memory_bytes, tp))
        # Prefill graphs: off by default with PP (cuda_graph_hook.py
        # apply_cuda_graph_compatibility); its other auto-disables are not modelled, which
        # leaves the fraction a little low (the safe side for a fit).
        if pp == 1:
            reserved += 1.5 * 1024 if mla else 8 * _prefill_graph_sizes(chunked)
    if mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mb - reserved) / mb, 3)


def compilation(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if f.gpu_count == 0:
        return "SGLang's CUDA graphs and torch.compile are GPU paths; this run has no GPU"
    if cfg.disable_cuda_graph:
        return [candidate(D.COMPILATION, {"disable_cuda_graph": False}, label="cuda_graphs=on",
                          why="CUDA graphs on (SGLang's default): each decode step one replay "
                              "instead of a launch per kernel")]
    out = []
    ceiling = cfg.cuda_graph_max_bs_decode or default_cuda_graph_max_bs(
        f.gpu_memory_bytes, cfg.tp_size or 1, cfg.max_running_requests)
    t = f.target_concurrency
    # The largest decode batch: the target load, or the incumbent's cap where it is lower.
    batch = min(t, cfg.max_running_requests or t)
    if batch > ceiling:
        out.append(candidate(D.COMPILATION, {"cuda_graph_max_bs_decode": batch},
                             why=f"--cuda-graph-max-bs-decode {batch}: decode batches of the "
                                 f"target load are larger than the {ceiling} captured (SGLang's "
                                 "default for this GPU's memory and TP, memory_hook.py), so they "
                                 "run eagerly; captured up to the target load instead"))
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
    """n drafted tokens as on vLLM (its num_speculative_tokens): n draft steps of a chain
    (top-k 1), so n + 1 tokens verified a step, the root included (0.5.23
    speculative_hook.py _handle_eagle_family: "speculative_num_draft_tokens is adjusted to
    speculative_num_steps + 1 when speculative_eagle_topk == 1"); MTP layers load from the
    model's own checkpoint, with no draft path (_handle_eagle_family sets
    speculative_draft_model_path to the model's for DeepSeek-V3 and the other MTP archs)."""
    out: dict[str, Any] = {"speculative_algorithm": _SGLANG_ALGORITHM[d.kind],
                           "speculative_num_steps": n, "speculative_eagle_topk": 1,
                           "speculative_num_draft_tokens": n + 1}
    if d.kind != "mtp":
        out["speculative_draft_model_path"] = d.path
    return out


def _ngram(n: int) -> dict[str, Any]:
    """n drafted tokens as on vLLM's ngram: SGLang's count includes the root (the last
    accepted token), so n + 1 (0.5.23 kernels/jit/csrc/ngram_corpus/param.h
    get_draft_token_num returns draft_token_num - 1 nodes to draft; result.cpp fillResult
    puts last_token first). Top-k and steps are NGRAM's own: speculative_hook.py
    _handle_ngram sets speculative_eagle_topk to --speculative-ngram-max-bfs-breadth (10)
    and steps to draft tokens // top-k, whatever is passed, so neither is rendered."""
    return {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": n + 1}


# 0.5.23 arg_groups/speculative_hook.py, in _handle_eagle_family and _handle_ngram alike:
# "if cfg.max_running_requests is None: declare_resolution(..., max_running_requests=48)"
# ("Max running requests is reset to 48 for speculative decoding").
SPECULATIVE_RUNNING_CAP = 48


def default_running_cap(kv_pool_tokens: int | None, context_tokens: int) -> tuple[int, str]:
    """The cap SGLang derives for an unset --max-running-requests, and how it is known: the
    pool over the context x 512, clamped to [2048, 4096], at most half the pool (0.5.23
    mem_cache/kv_cache_configurator.py resolve_max_num_reqs). Without a logged pool: 2048,
    the clamp's floor (what a pool of up to 4 x context tokens gets)."""
    if kv_pool_tokens is None:
        return 2048, ("the floor of SGLang's pool-derived default; no KV pool was logged to "
                      "derive it from")
    est = max(min(int(kv_pool_tokens / context_tokens * 512), 4096), 2048)
    cap = min(est, kv_pool_tokens // 2)
    return cap, (f"SGLang's default from the baseline's {kv_pool_tokens:,}-token KV pool at "
                 f"{context_tokens:,} tokens of context (kv_cache_configurator.py)")


def speculative(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.speculative_algorithm is not None:
        return f"the incumbent already speculates with {cfg.speculative_algorithm}"
    out = speculation(f, _ngram, _drafter, "SGLang", "--speculative-algorithm NGRAM")
    if isinstance(out, str) or cfg.max_running_requests is not None:
        return out  # an explicit cap is kept as it is: SGLang resets only an unset one
    # Unset, SGLang would cap the speculative run at 48 running requests, a cap nobody chose,
    # so the comparison would measure it as much as the speculation: the candidate carries
    # the incumbent's own cap instead, explicitly.
    cap, how = default_running_cap(f.kv_pool_tokens, cfg.context_length)
    note = (f"; --max-running-requests {cap}: the incumbent's cap ({how}) made explicit, as "
            f"SGLang caps an unset one at {SPECULATIVE_RUNNING_CAP} under speculation "
            "(speculative_hook.py)")
    return [c.model_copy(update={"changes": {**c.changes, "max_running_requests": cap},
                                 "why": c.why + note}) for c in out]


def kv_tier(cfg: SglangConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """The hierarchical cache (--enable-hierarchical-cache --hicache-size): the radix cache
    spills to host RAM and loads prefixes back. --hicache-size is GB (10**9 bytes) for EACH
    rank, and every TP x PP rank of every DP replica allocates its own (see
    SglangConfig.hicache_size_gb), so the user's allowance is split over them."""
    ranks = (cfg.tp_size or 1) * (cfg.pp_size or 1) * (cfg.dp_size or 1)
    budget = f.kv_prefix_ram_bytes or 0
    per_rank = budget // (10**9 * ranks)
    out = host_ram_tier(f, cfg.hicache_size_gb, "hicache_size_gb", max(1, per_rank), "GB",
                        "--enable-hierarchical-cache --hicache-size", "hicache",
                        "SGLang's hierarchical cache backs GPU memory with host RAM; this run "
                        "has no GPU")
    if isinstance(out, str):
        return out
    if per_rank < 1:
        return (f"the kv_prefix_budget allows {budget / 1e9:.1f} GB of host RAM: less than 1 GB "
                f"(SGLang's smallest --hicache-size) for each of the {ranks} ranks that "
                "allocate one")
    note = (f" ({per_rank} GB for each of the {ranks} ranks (TP x PP x DP), "
            f"{per_rank * ranks} GB of the {budget / 1e9:g} GB allowed: SGLang's size is per "
            "rank, pool_host/base.py)")
    return [c.model_copy(update={"why": c.why + note}) for c in out]



RULES = ladder_rules(weights, kv_precision, scheduling, prefill, compilation, prefix_caching,
                     parallel_layout, speculative, kv_tier)
