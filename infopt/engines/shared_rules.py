"""Ladder rules that read the same on every engine whose config has the knob: the exact
model's other checkpoints, and the parallel layouts spelt through the adapter's LayoutKnobs.
Pure; each engine's ladder module passes its own config and knobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infopt.engines.layout import LayoutKnobs
from infopt.engines.rules import Drafter, LadderFacts, candidate
from infopt.specs.ladder import Dimension as D
from infopt.specs.ladder import LadderCandidate


def prefill_burst_tokens(f: LadderFacts) -> int:
    """Tokens per scheduler step that take the target load's prompts at once (a power of two,
    at least 256): the prefill dimension's value on every engine with such a budget."""
    return max(256, 1 << (max(1, f.mean_prompt_tokens * f.target_concurrency) - 1)
               .bit_length())


def checkpoint_variants(cfg: Any, f: LadderFacts) -> list[LadderCandidate] | str:
    """Each local checkpoint of the exact model the incumbent does not already load."""
    out = [candidate(D.WEIGHTS, {"model_path": v.path}, label=v.label,
                     why=f"{v.fmt} checkpoint of the exact model"
                     + (f"; {v.why}" if v.why else ""))
           for v in f.weight_variants if v.path != cfg.model_path]
    return out or (f.weights_note or "only this checkpoint of the model is local; others come "
                   "through the download gate (model.download)")


def layout_candidates(knobs: LayoutKnobs, cfg: Any, f: LadderFacts
                      ) -> list[LadderCandidate] | str:
    """The layout matrix's layouts as this engine spells them, less the incumbent's own."""
    if f.gpu_count <= 1:
        return "one device: no tensor/pipeline/data/expert-parallel layout to compare"
    out = []
    for layout, why in f.layouts:
        changes = knobs.changes_from(cfg, layout)
        if isinstance(changes, str) or not changes or all(
                getattr(cfg, k) == v for k, v in changes.items()):
            continue  # the TP=1 control, a layout the engine cannot run, or the incumbent's
        out.append(candidate(D.PARALLEL_LAYOUT, changes, why=f"{layout.label}: {why}",
                             label=layout.label.replace("=", "").replace(" ", "_"),
                             family=layout.family))
    return out or f"no layout of {f.gpu_count} GPUs divides this model's heads"


def host_ram_tier(f: LadderFacts, current: float | None, knob: str, size: float, unit: str,
                  flag: str, label: str, no_gpu: str, value: float | None = None
                  ) -> list[LadderCandidate] | str:
    """A GPU engine's host-RAM KV tier at the size the user allows (kv_prefix_budget), only
    where prompts share prefixes: the tier is the user's RAM to give, never assumed. `size`
    in `unit` is what the label and reason show; `value` (default: size) what the knob takes."""
    value = size if value is None else value
    if not f.prefix_reuse:
        return ("the workload shares no prompt prefixes: a host-RAM KV tier has nothing to "
                "serve")
    if f.gpu_count == 0:
        return no_gpu
    if not f.kv_prefix_ram_bytes:
        return ("no kv_prefix_budget.ram_bytes in the request: the host RAM a KV tier may take "
                "is the user's to allow, so no tier is tried")
    if current == value:
        return f"the incumbent already runs a {size:g} {unit} tier"
    return [candidate(D.KV_TIER, {knob: value}, label=f"{label}={size:g}{unit}",
                      why=f"{flag} {size:g}: a host-RAM tier of the kv_prefix_budget the user "
                          "allows, measured on the workload's shared prefixes against none")]


# The most of a GPU's memory a rule hands an engine: what is left covers allocator
# fragmentation and other processes (an assumption, stated in the rule's reason).
MEMORY_FRACTION_CAP = 0.95


def kv_headroom(f: LadderFacts, knob: str, current: float | None, default: float,
                flag: str) -> list[LadderCandidate]:
    """A larger memory fraction, only when the baseline's logged KV pool holds fewer tokens
    than the target load's sequences need at the workload's lengths (the engine would queue or
    preempt at the target load); a pool that already holds them gains nothing from more."""
    if f.gpu_count == 0 or f.kv_pool_tokens is None:
        return []
    need = f.target_concurrency * (f.mean_prompt_tokens + f.mean_output_tokens)
    now = default if current is None else current
    if f.kv_pool_tokens >= need or now >= MEMORY_FRACTION_CAP:
        return []
    return [candidate(D.SCHEDULING, {knob: MEMORY_FRACTION_CAP},
                      label=f"{knob}={MEMORY_FRACTION_CAP:g}",
                      why=f"{flag} {MEMORY_FRACTION_CAP:g} (from {now:g}): the KV pool holds "
                          f"{f.kv_pool_tokens:,} tokens, the target load's "
                          f"{f.target_concurrency} sequences need {need:,} at the workload's "
                          f"lengths, so requests queue or are preempted; "
                          f"{1 - MEMORY_FRACTION_CAP:.0%} of the memory stays free "
                          "(an assumption)")]


# Draft lengths a tuned speculation tries, shortest first: a series stops at the first length
# that measures no better than the one before it (longer drafts waste more verification work
# when the acceptance rate falls).
DRAFT_LENGTHS = (2, 4, 8)


# One MTP layer drafts further only by running itself again (vLLM warns that
# num_speculative_tokens > 1 "may result in lower acceptance rate"): its series starts at 1.
MTP_DRAFT_LENGTHS = (1, 2, 4)
DrafterChanges = Callable[[Drafter, int], "dict[str, Any] | None"]


def drafter_drafts(f: LadderFacts, changes: DrafterChanges, engine: str
                   ) -> tuple[list[LadderCandidate], list[str]]:
    """Each drafter the search verified, as a series over its draft lengths (`changes(d, n)`:
    the knobs for drafter d drafting n tokens; None: the engine cannot use this kind), and
    notes for the drafters left out: a hub drafter runs only once downloaded behind the
    download gate, never fetched by the engine on its own."""
    out, notes = [], []
    for d in f.drafters:
        if d.kind != "mtp" and d.path is None:
            notes.append(f"{d.source} ({d.kind}) verified but not downloaded: it runs once the "
                         "download gate has fetched it")
            continue
        lengths = MTP_DRAFT_LENGTHS if d.kind == "mtp" else DRAFT_LENGTHS
        if changes(d, lengths[0]) is None:
            notes.append(f"{d.label}: {engine} has no {d.kind} drafting here")
            continue
        out += [candidate(D.SPECULATIVE, changes(d, n) or {}, label=f"spec={d.label}-{n}",
                          series=f"{d.label}_draft_tokens",
                          why=f"{n} tokens a step drafted by {d.why or d.label}; lossless "
                              "under verification, kept only if the objective on this workload "
                              "measures better")
                for n in lengths]
    return out, notes


def speculation(f: LadderFacts, ngram: Callable[[int], dict[str, Any]], drafter: DrafterChanges,
                engine: str, flag: str) -> list[LadderCandidate] | str:
    """A GPU engine's speculative step: the verified drafters first (MTP, EAGLE, draft
    models), then n-gram drafting, each tuned over its draft length."""
    if f.gpu_count == 0:
        return (f"not on {engine}'s CPU ladder: its speculative decoding is not verified on the "
                "CPU backend")
    out, notes = drafter_drafts(f, drafter, engine)
    grams = ngram_drafts(ngram, flag)
    if notes:
        grams[0] = grams[0].model_copy(update={"why": f"{grams[0].why}; " + "; ".join(notes)})
    return out + grams


def ngram_drafts(changes: Callable[[int], dict[str, Any]], flag: str
                 ) -> list[LadderCandidate]:
    """N-gram (prompt-lookup) speculation tuned over its draft length: no drafter model
    needed, lossless under verification, judged by the objective on the workload
    (`changes(n)`: the knob changes for a draft of n tokens)."""
    return [candidate(D.SPECULATIVE, changes(n), label=f"spec=ngram-{n}", series="ngram_draft_tokens",
                      why=f"{flag}: n-gram drafting of {n} tokens a step from the context (no "
                          "drafter model); lossless under verification, kept only if the "
                          "objective on this workload measures better")
            for n in DRAFT_LENGTHS]
