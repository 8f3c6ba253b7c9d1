"""The ladder's rules, pure so they are unit-tested without engines: which rule each dimension
uses, the facts the rules derive candidates from, and the choice between the routed engine's
winner and its comparator's. The search that applies them is infopt.tuning.climb (driven by
flows/ladder.py): each dimension in the specification's order derives candidates from the
incumbent; each is screened with one paired round (every gate applies); the promising ones, best
first, are confirmed with paired rounds until decided (infopt.tuning.rounds), and the first
accepted carries forward."""

from __future__ import annotations

from typing import Any

from infopt.costmodel.kv import kv_bytes_per_token_per_gpu
from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.base import EngineAdapter
from infopt.engines.ladder import (
    Derive,
    DimensionRule,
    Drafter,
    LadderFacts,
    WeightVariant,
    candidate,
)
from infopt.specs.hardware import HardwareInventory
from infopt.specs.inspection import AttentionKind
from infopt.specs.ladder import (
    LADDER_ORDER,
    Dimension,
    EngineChoice,
    EngineResult,
    LadderCandidate,
)
from infopt.specs.model import ModelProfile
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.workload import Workload

# The decisions live beside the climb, free of engine imports; named here for callers.
from infopt.tuning.decide import (  # noqa: F401
    CONFIRMATIONS_PER_STEP,
    apply,
    better,
    derive,
    judge,
    median,
    rule_text,
    series_stops,
)
from infopt.tuning.weights import BITS_PER_WEIGHT


def rules_for(adapter: EngineAdapter, dimensions: list[Dimension] | None = None,
              tune: Any = None) -> dict[Dimension, DimensionRule | None]:
    """Every dimension in order, with the adapter's rule (None: it declares none; a dimension
    the request left out: a rule saying so). An adapter without a ladder still gets its
    running-request cap as the scheduling dimension. `tune` (the request's own knob and
    values) replaces the ladder with one user step."""
    if tune is not None:
        return {Dimension.USER: DimensionRule(Dimension.USER, _user_rule(tune))}
    declared = {r.dimension: r for r in adapter.ladder}
    if not declared:
        declared[Dimension.SCHEDULING] = DimensionRule(Dimension.SCHEDULING,
                                                       _cap_rule(adapter))
    asked = set(dimensions or LADDER_ORDER)
    return {d: declared.get(d) if d in asked else DimensionRule(d, _not_asked)
            for d in LADDER_ORDER}


def climbs(request: Any, dimension: Dimension) -> bool:
    """Whether the request's ladder includes `dimension` (a `tune` override replaces it)."""
    return request.tune is None and dimension in (request.dimensions or LADDER_ORDER)


def _not_asked(cfg: AnyServingConfig, f: LadderFacts) -> str:
    return "not asked for: the request's `dimensions` leaves it out"


def _user_rule(tune: Any) -> Derive:
    def user(cfg: AnyServingConfig, f: LadderFacts) -> list[LadderCandidate]:
        return [candidate(Dimension.USER, {tune.knob: v}, why="chosen by the user")
                for v in tune.values]
    return user


def _cap_rule(adapter: EngineAdapter) -> Derive:
    def cap(cfg: AnyServingConfig, f: LadderFacts) -> list[LadderCandidate] | str:
        dim = adapter.scheduling_dimension(f.target_concurrency)
        return [candidate(Dimension.SCHEDULING, {dim.knob: v}, why=dim.why, series=dim.knob)
                for v in dim.values if getattr(cfg, dim.knob) != v] or "nothing to try"
    return cap


def ladder_facts(model: ModelProfile, hw: HardwareInventory, workload: Workload,
                 base: Trial | None, variants: tuple[WeightVariant, ...] = (),
                 weights_note: str | None = None, current: str | None = None,
                 kv_prefix_ram_bytes: int | None = None,
                 drafters: tuple[Drafter, ...] = ()) -> LadderFacts:
    """The facts the rules derive from: the device, and the workload as the baseline measured
    it (prompt tokens with the chat template; forced output tokens)."""
    t = workload.target_concurrency
    prompt, output = _measured_lengths(workload, base)
    mtp = model.inspection.mtp_layers
    if mtp and not any(d.kind == "mtp" for d in drafters):  # in the checkpoint: no search
        drafters = (Drafter("mtp", None, why=f"the model's own {mtp} MTP layer(s) "
                            "(config.json)"), *drafters)
    kv_per_token = kv_bytes_per_token_per_gpu(model.inspection, "f16")
    # One decode step at the target batch reads the weights once and each sequence's cache.
    share = (t * (prompt + output / 2) * kv_per_token / model.file_bytes
             if model.file_bytes else None)
    return LadderFacts(
        target_concurrency=t, usable_cpus=hw.host.usable_cpus,
        physical_cores=hw.host.physical_cores, gpu_count=len(hw.gpus),
        kv_prefix_ram_bytes=kv_prefix_ram_bytes,
        mean_prompt_tokens=prompt, mean_output_tokens=output,
        prefix_reuse=workload.traffic.prefix.reuse_ratio > 0, kv_read_share=share,
        weight_variants=variants, weights_note=weights_note, current_weights=current,
        current_bits_per_weight=BITS_PER_WEIGHT.get(current) if current else None,
        kv_pool_tokens=(base.kv.observed if base is not None and base.kv is not None
                        and base.kv.unit == "tokens" else None),
        drafters=drafters,
        gpu_memory_bytes=hw.gpus[0].memory_total_bytes if hw.gpus else None,
        gpu_compute_capability=hw.gpus[0].compute_capability if hw.gpus else None,
        mla=model.inspection.attention.kind is AttentionKind.MLA,
        layouts=tuple(candidate_layouts(model.inspection, len(hw.gpus)))
        if len(hw.gpus) > 1 else ())


def _measured_lengths(workload: Workload, base: Trial | None) -> tuple[int, int]:
    if base is not None and base.benchmark is not None:
        s = base.benchmark.scenario(workload.target_scenario)
        prompt = s.level.prompt_tokens_mean or s.input_tokens_mean or 0
        return int(prompt), int(s.output_tokens_mean or 0)
    return 0, 0  # unmeasured: the rules fall back to their defaults


# Within a ladder the candidate's repeats alternate with the incumbent's, so drift hits both;
# the two engines' winners are measured in separate windows (all of one engine's trials, then
# the other's), and slow drift between the windows (other load, clocks, thermals) is outside
# the bootstrap interval. A switch of engine must therefore clear this margin as well as the
# request's own min_gain; a smaller decided difference is reported as practically equal. 2%
# is an assumption of the size of run-to-run drift on a shared machine, stated in the report.
ENGINE_SWITCH_MARGIN = 0.02


def engine_choice(results: list[EngineResult], higher: bool, seed: int, min_gain: float
                  ) -> EngineChoice:
    """The routed engine's winner unless the comparator's beats it beyond the noise (the
    same bootstrap rule as every ladder step) and by ENGINE_SWITCH_MARGIN; a failed engine
    cannot win."""
    routed, others = results[0], [r for r in results[1:] if r.failed is None]
    if routed.failed is not None:
        if not others:
            raise ValueError("no engine produced a result")  # the flow re-raises before this
        return EngineChoice(results=results, chosen=others[0].engine, reason=(
            f"the routed engine {routed.engine} failed ({routed.failed}); {others[0].engine} "
            "is recommended"))
    if not others:
        why = next((f"{r.engine} failed: {r.failed}" for r in results[1:]), None)
        return EngineChoice(results=results, chosen=routed.engine, reason=(
            "only the routed engine was tuned" + (f" ({why})" if why else "")))
    comp = others[0]
    margin = max(min_gain, ENGINE_SWITCH_MARGIN)
    ok, cmp, why = judge(routed.winner_values, comp.winner_values, higher, seed, margin)
    if not ok and cmp is not None and cmp.verdict == "no_difference":
        small = _below_switch_margin(routed, comp, higher, seed, min_gain, margin)
        if small is not None:
            return EngineChoice(results=results, chosen=routed.engine, comparison=cmp,
                                reason=small)
    if ok:
        return EngineChoice(results=results, chosen=comp.engine, comparison=cmp, reason=(
            f"the comparator {comp.engine}'s winner ({comp.winner_label}) "
            + why.replace("the incumbent", f"{routed.engine}'s ({routed.winner_label})")))
    verb = "does not beat"
    if cmp is not None and cmp.verdict == "a_better":
        verb = "is worse than"
        why = f"95% interval of the difference [{cmp.ci_low:.4g}, {cmp.ci_high:.4g}]"
    return EngineChoice(results=results, chosen=routed.engine, comparison=cmp, reason=(
        f"{comp.engine}'s winner ({comp.winner_label}, median {comp.winner_median:.4g}) {verb} "
        f"{routed.engine}'s ({routed.winner_label}, median {routed.winner_median:.4g}) beyond "
        f"the noise: {why}; the routed engine stands"))


def _below_switch_margin(routed: EngineResult, comp: EngineResult, higher: bool, seed: int,
                         min_gain: float, margin: float) -> str | None:
    """Why the routed engine stands when the comparator is better beyond the noise but by
    less than the switch margin (None when the noise alone decides it)."""
    ok, cmp, _ = judge(routed.winner_values, comp.winner_values, higher, seed, min_gain)
    if not ok or cmp is None:
        return None
    gain = abs(cmp.diff) / abs(cmp.a_value) if cmp.a_value else 0.0
    return (f"{comp.engine}'s winner ({comp.winner_label}, median {comp.winner_median:.4g}) "
            f"is better than {routed.engine}'s ({routed.winner_label}, median "
            f"{routed.winner_median:.4g}) by {gain:.1%} (95% interval of the difference "
            f"[{cmp.ci_low:.4g}, {cmp.ci_high:.4g}]), under the {margin:.0%} an engine switch "
            "must clear: the engines were measured in separate windows, so drift between them "
            "is outside the interval; practically equal, the routed engine stands")
