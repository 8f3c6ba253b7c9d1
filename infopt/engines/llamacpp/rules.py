"""llama.cpp's tuning ladder: which values of each dimension are worth a launch, derived from the
incumbent and the run's facts. Flags as in infopt.engines.llamacpp.adapter (llama-server 0.3.36)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infopt.analysis.monotone import first_true, last_true
from infopt.engines.rules import (
    Drafter,
    LadderFacts,
    candidate,
    ladder_rules,
    powers_below,
)
from infopt.engines.shared_rules import DRAFT_LENGTHS
from infopt.specs.ladder import Dimension as D
from infopt.specs.ladder import LadderCandidate
from infopt.specs.serving import LlamaCppConfig, with_knobs

# Why each GGUF type is worth measuring (llama.cpp's quantize table and kernel paths).
_WEIGHT_WHY = {
    "Q4_0": "4-bit, one scale per 32 weights: the cheapest 4-bit dequantization, the fastest "
            "4-bit decode on x86 here; the most rounding of the 4-bit types",
    "Q4_K_M": "4-bit k-quant with 6-bit sub-block scales: llama.cpp's usual 4-bit default",
    "Q5_K_M": "5-bit k-quant: closer to the reference than 4-bit for ~20% more bytes",
    "Q6_K": "6-bit k-quant: near the reference",
    "Q8_0": "8-bit: nearly lossless; its int8 dot products make prompt processing "
            "compute-cheaper on CPUs, where prefill is compute-bound",
    "Q4_1": "4-bit with a scale and a minimum per 32 weights",
    "Q3_K_M": "3-bit k-quant: the smallest memory, the most rounding",
    "Q2_K": "2-bit k-quant: the smallest memory, the most rounding",
}
# Quantized V caches need flash attention in llama.cpp (llama-context.cpp refuses
# "V cache quantization requires flash_attn" otherwise).
_FA_FOR_QUANTIZED_V = "on"


def weights(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    out = []
    for v in f.weight_variants:
        if v.path == cfg.model_path:
            continue
        bits = f", {v.bits_per_weight} bits per weight (estimate)" if v.bits_per_weight else ""
        out.append(candidate(D.WEIGHTS, {"model_path": v.path}, label=v.label,
                             why=_WEIGHT_WHY.get(v.fmt, f"GGUF {v.fmt}") + bits
                             + (f"; {v.why}" if v.why else "")))
    return out or (f.weights_note or "no other weight file of this model is available here")


def kv_precision(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if cfg.cache_type_k != "f16" or cfg.cache_type_v != "f16":
        return f"the incumbent already runs a {cfg.cache_type_k}/{cfg.cache_type_v} KV cache"
    share = ("" if f.kv_read_share is None else
             f"; at this workload's mean context KV reads are ~{f.kv_read_share:.1%} of the "
             "weight reads per decoded token, which bounds what KV precision can gain")
    out = [candidate(D.KV_PRECISION, {"cache_type_k": "q8_0", "cache_type_v": "q8_0",
                                      "flash_attn": _FA_FOR_QUANTIZED_V}, label="kv=q8_0",
                     why="8-bit K and V halve the cache's bytes against the f16 control "
                         "(quantized V needs flash attention on)" + share)]
    if f.kv_read_share is not None and f.kv_read_share >= 0.25:
        out.append(candidate(D.KV_PRECISION, {"cache_type_k": "q4_0", "cache_type_v": "q4_0",
                                              "flash_attn": _FA_FOR_QUANTIZED_V},
                             label="kv=q4_0", why="4-bit K and V: KV reads are a quarter or "
                             "more of decode traffic here" + share))
    return out


def scheduling(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    slots = cfg.parallel_slots or 1
    values = [v for v in sorted(set(powers_below(f.target_concurrency)) |
                                {f.target_concurrency}) if v > slots]
    out = [candidate(D.SCHEDULING, {"parallel_slots": v}, series="parallel_slots",
                     why=f"{v} slots: llama.cpp batches decoding only across its --parallel "
                         f"slots; the target load is {f.target_concurrency} active "
                         "generations; each slot keeps the full native context")
           for v in values]
    threads = cfg.threads or f.usable_cpus
    if f.physical_cores and f.physical_cores < threads:
        out.append(candidate(D.SCHEDULING, {"threads": f.physical_cores},
                             why=f"{f.physical_cores} threads, one per physical core: "
                                 "hyperthreads share a core's vector units"))
    elif threads >= 4:
        out.append(candidate(D.SCHEDULING, {"threads": threads - 1},
                             why="one core left to the HTTP server and sampling"))
    return out or (f"the incumbent already has {slots} slots for a target of "
                   f"{f.target_concurrency}, and {threads} threads on {f.usable_cpus} CPUs")


def prefill(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    out = []
    ub = cfg.ubatch_tokens or 512  # llama.cpp's default physical batch (-ub)
    # Concurrent prompts share a physical batch; on a CPU a smaller one keeps the activations
    # in cache. Tried: the batch that holds one mean prompt, if it is below the default.
    fit_one = max(64, 1 << (max(1, f.mean_prompt_tokens) - 1).bit_length())
    for v in sorted({fit_one, fit_one * 2} - {ub}):
        if v < ub:
            out.append(candidate(D.PREFILL, {"ubatch_tokens": v}, series="ubatch",
                                 why=f"-ub {v}: a physical batch near the mean prompt "
                                     f"({f.mean_prompt_tokens} tokens) instead of {ub}"))
    if cfg.cache_type_v == "f16" and cfg.flash_attn != "off":
        out.append(candidate(D.PREFILL, {"flash_attn": "off"},
                             why="flash attention off: 'auto' turns it on; at short contexts "
                                 "on a CPU the plain path can be as fast"))
    elif cfg.flash_attn == "off":
        out.append(candidate(D.PREFILL, {"flash_attn": "on"},
                             why="flash attention on: fused attention over the KV cache"))
    return out or "no prefill setting left to try"


def compilation(cfg: LlamaCppConfig, f: LadderFacts) -> str:
    if f.gpu_count == 0:
        return "llama.cpp has no graph-capture or compilation switch on a CPU"
    return ("llama.cpp's CUDA build captures CUDA graphs by default; llama-server has no "
            "switch to compare")


def prefix_caching(cfg: LlamaCppConfig, f: LadderFacts) -> str:
    if not f.prefix_reuse:
        return ("the workload has no shared prompt prefixes (unique heads): nothing for a "
                "prefix cache to reuse")
    return "llama-server keeps each slot's prompt cache by default; this build has no switch"


def parallel_layout(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    if isinstance(cfg.n_gpu_layers, int) and f.fits_gpu is not None:
        more = _more_gpu_layers(cfg, f.fits_gpu, f.num_layers)
        experts = _experts_on_host(cfg, f.fits_gpu, f.num_layers) if f.moe else []
        if isinstance(more, str):
            return experts or more
        return more + experts
    if f.gpu_count <= 1:
        return "one device: no tensor/pipeline/data-parallel layout to compare"
    return ("llama.cpp splits layers across GPUs by default (--split-mode layer); its split "
            "modes are not on the ladder yet")


def _more_gpu_layers(cfg: LlamaCppConfig, fits: Callable[[Any], bool],
                     layers: int) -> list[LadderCandidate] | str:
    """A partial offload climbs -ngl: the most layers that fit beside this configuration's KV
    and batches (what earlier dimensions freed, e.g. an 8-bit KV cache) by infopt's fit, up to
    all of them (n_layer + 1: llama.cpp counts the output layer)."""
    now = cfg.n_gpu_layers
    assert isinstance(now, int)  # parallel_layout's condition
    most = last_true(now + 1, layers + 1, lambda n: fits(with_knobs(cfg, {"n_gpu_layers": n})))
    if most is None:
        return (f"-ngl {now} is already the most layers that fit the GPU in this "
                "configuration (estimate; each trial's log says what loaded)")
    return [candidate(D.PARALLEL_LAYOUT, {"n_gpu_layers": most}, series="n_gpu_layers",
                      why=f"{most - now} more layer(s) fit on the GPU in this configuration "
                          "(estimate): a layer moved off host RAM is read at the GPU's "
                          "bandwidth instead of the host's on every decoded token")]


def _experts_on_host(cfg: LlamaCppConfig, fits: Callable[[Any], bool],
                     layers: int) -> list[LadderCandidate]:
    """An MoE model under partial offload: every layer's attention on the GPU and the routed
    experts of the fewest first layers in host RAM (--n-cpu-moe, "keep the MoE weights of the
    first N layers in the CPU"): a token reads only its selected experts there, while a
    partial -ngl reads whole layers from host RAM. The measurement decides."""
    if cfg.n_cpu_moe is not None:
        return []
    n = first_true(1, layers, lambda k: fits(with_knobs(cfg, {"n_gpu_layers": "all",
                                                               "n_cpu_moe": k})))
    if n is None:
        return []
    return [candidate(D.PARALLEL_LAYOUT, {"n_gpu_layers": "all", "n_cpu_moe": n},
                      label=f"ngl=all_ncmoe={n}",
                      why=f"all layers on the GPU with the routed experts of the first {n} in "
                          "host RAM: the fewest that fit (estimate); attention and the shared "
                          "weights read at GPU bandwidth, each token's few experts on the CPU")]


# A draft model pays only when drafting k tokens costs well under k target steps: at draft/
# target cost c and acceptance a, a step yields (1 - a^(k+1)) / (1 - a) tokens for k*c + 1
# target-step costs (decode reads the weights once a step, so c ~ the ratio of weight bytes).
# At c = 2/3 and a = 0.8 the best draft length gains ~5%: a cheaper checkpoint of the same
# model drafts only below that ratio. An estimate; the measurement decides.
SELF_DRAFT_MAX_COST = 2 / 3


def _incumbent_bits(cfg: LlamaCppConfig, f: LadderFacts) -> float | None:
    own = next((v.bits_per_weight for v in f.weight_variants if v.path == cfg.model_path), None)
    return own if own is not None else f.current_bits_per_weight


def draft_models(cfg: LlamaCppConfig, f: LadderFacts) -> tuple[list[Drafter], str]:
    """The GGUF drafters this incumbent can use: the drafter search's draft models with a local
    file, else the cheapest checkpoint of the exact model itself (the same tokenizer by
    construction) when it reads at most SELF_DRAFT_MAX_COST of the incumbent's bytes."""
    found = [d for d in f.drafters if d.kind == "draft_model" and d.path
             and d.path.endswith(".gguf") and d.path != cfg.model_path]
    if found:
        return found, ""
    bits = _incumbent_bits(cfg, f)
    cheap = sorted(((v, v.bits_per_weight) for v in f.weight_variants
                    if v.bits_per_weight and bits and v.path != cfg.model_path
                    and v.bits_per_weight <= SELF_DRAFT_MAX_COST * bits), key=lambda vb: vb[1])
    if cheap and bits:
        v, vbits = cheap[0]
        return [Drafter("draft_model", v.path, why=(
            f"the exact model's own {v.fmt} checkpoint ({vbits} bits per weight against the "
            f"incumbent's {bits}): the same tokenizer by construction, ~{vbits / bits:.0%} of "
            "its bytes a step"))], ""
    heads = sorted({d.kind for d in f.drafters if d.kind != "draft_model"})
    return [], ("no draft model here: the drafter search found no smaller model with the same "
                "tokenizer as a local GGUF, and no checkpoint of this model reads under "
                f"{SELF_DRAFT_MAX_COST:.0%} of the incumbent's bytes"
                + (f" ({', '.join(heads)} heads need a GGUF conversion for llama.cpp's "
                   "draft-eagle3/draft-mtp, not done here)" if heads else ""))


def speculative(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """Speculation tuned by its draft length: n-gram drafting from the context (no drafter),
    and each draft model found, each a series over DRAFT_LENGTHS. Lossless under greedy
    verification; kept only if the objective on this workload measures better."""
    if cfg.spec_type is not None:
        return f"the incumbent already drafts with {cfg.spec_type}"
    out = [candidate(D.SPECULATIVE, {"spec_type": "ngram-simple",
                                     "spec_ngram_simple_size_m": n},
                     label=f"spec=ngram-{n}", series="ngram_draft_tokens",
                     why=f"--spec-type ngram-simple --spec-ngram-simple-size-m {n}: drafts up "
                         f"to {n} tokens a step from n-grams already in the context (no draft "
                         "model; the build's default draft is 48); pays off when the output "
                         "repeats the prompt or itself")
           for n in DRAFT_LENGTHS]
    drafters, none_why = draft_models(cfg, f)
    for d in drafters:
        out += [candidate(D.SPECULATIVE, {"spec_type": "draft-simple", "spec_draft_model": d.path,
                                          "spec_draft_n_max": n},
                          label=f"spec={d.label}-{n}", series=f"{d.label}_draft_tokens",
                          why=f"-md {d.path} --spec-draft-n-max {n}: {n} tokens a step drafted "
                              f"by {d.why or d.label} and verified by the target in one batch")
                for n in DRAFT_LENGTHS]
    if none_why:
        out[0] = out[0].model_copy(update={"why": f"{out[0].why}; {none_why}"})
    return out


# The bundled build's --cache-ram default (llama-server --help: "default: 8192").
DEFAULT_CACHE_RAM_MIB = 8192
MIB = 2**20


def kv_tier(cfg: LlamaCppConfig, f: LadderFacts) -> list[LadderCandidate] | str:
    """The host-RAM prompt cache (--cache-ram), measured only where prompts share prefixes:
    idle slots' prompts are kept in RAM and restored for a later request with the same
    prefix instead of prefilling it again. The build's default keeps 8 GiB; the candidates
    are the tier sized to the user's allowance, and no tier (does it earn its RAM here?)."""
    if not f.prefix_reuse:
        return ("the workload shares no prompt prefixes: a host-RAM prompt cache has nothing to "
                "restore (the build's own --cache-ram stays)")
    current = DEFAULT_CACHE_RAM_MIB if cfg.cache_ram_mib is None else cfg.cache_ram_mib
    out = []
    allowed = None if f.kv_prefix_ram_bytes is None else f.kv_prefix_ram_bytes // MIB
    if allowed is not None and allowed > 0 and allowed != current:
        out.append(candidate(D.KV_TIER, {"cache_ram_mib": allowed},
                             label=f"cache_ram={allowed}MiB",
                             why=f"--cache-ram {allowed}: the prompt cache sized to the "
                                 f"kv_prefix_budget the user allows ({allowed} MiB of host RAM) "
                                 f"instead of {current} MiB"))
    if current != 0:
        out.append(candidate(D.KV_TIER, {"cache_ram_mib": 0}, label="cache_ram=off",
                             why=f"--cache-ram 0: no host-RAM tier, against {current} MiB: the "
                                 "tier is kept only if restoring prefixes measures better than "
                                 "prefilling them again"))
    return out or "the incumbent already runs without a host-RAM prompt cache"


RULES = ladder_rules(weights, kv_precision, scheduling, prefill, compilation, prefix_caching,
                     parallel_layout, speculative, kv_tier)
