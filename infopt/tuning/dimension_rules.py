"""The ladder's rules, pure so they are unit-tested without engines: which rule each dimension
uses, the facts the rules derive candidates from, and the choice between the routed engine's
winner and its comparator's. The search that applies them is infopt.tuning.climb (driven by
flows/climb.py): each dimension in the specification's order derives candidates from the
incumbent; each is screened with one paired round (every gate applies); the promising ones, best
first, are confirmed with paired rounds until decided (infopt.tuning.rounds), and the first
accepted carries forward."""

from __future__ import annotations

from typing import Any

from infopt.costmodel.kv import kv_bytes_per_token_per_gpu
from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.base import EngineAdapter
from infopt.engines.rules import (
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
    LadderCandidate,
)
from infopt.specs.model import ModelProfile
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.workload import Workload
from infopt.tuning.candidates import fit_config
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
        if len(hw.gpus) > 1 else (),
        fits_gpu=(lambda c: fit_config(model, hw, c, t).fits) if hw.gpus else None,
        num_layers=model.inspection.num_layers, moe=model.inspection.moe is not None)


def _measured_lengths(workload: Workload, base: Trial | None) -> tuple[int, int]:
    if base is not None and base.benchmark is not None:
        s = base.benchmark.scenario(workload.target_scenario)
        prompt = s.level.prompt_tokens_mean or s.input_tokens_mean or 0
        return int(prompt), int(s.output_tokens_mean or 0)
    return 0, 0  # unmeasured: the rules fall back to their defaults
