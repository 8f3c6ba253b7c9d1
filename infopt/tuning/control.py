"""The run's fixed points: the control (the engine's defaults) and the baseline configuration,
which candidates this CPU can run, the objective of a measured trial, and the winner against
the control. The ladder's own decisions are in infopt.tuning.dimension_rules."""

from __future__ import annotations

from collections.abc import Callable

from infopt.analysis.compare import bootstrap_diff
from infopt.analysis.stats import median_and_spread
from infopt.contract.remedies import contract_gaps
from infopt.engines import adapter_for
from infopt.engines.launch import ServingTarget
from infopt.engines.support import unsupported_config
from infopt.specs.contract import ContractRemedy
from infopt.specs.fit import MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.paired import FinalDecision, MeasureName
from infopt.specs.results import BenchmarkResult, ControlGain, Trial
from infopt.specs.serving import AnyServingConfig, EngineName
from infopt.specs.workload import HIGHER_IS_BETTER, Objective


def serving_target(model: ModelProfile, hw: HardwareInventory, served_name: str,
                   port: int | None, kv_prefix_ram_bytes: int | None = None) -> ServingTarget:
    return ServingTarget(model_path=model.path, served_model_name=served_name,
                         native_context_tokens=model.native_context_tokens,
                         usable_cpus=hw.host.usable_cpus, port=port,
                         kv_prefix_ram_bytes=kv_prefix_ram_bytes)


def control_config(engine: EngineName, target: ServingTarget) -> AnyServingConfig:
    """The engine's out-of-the-box defaults (trial 0: every gain is stated against it)."""
    return adapter_for(engine).control_config(target)


def baseline_config(engine: EngineName, target: ServingTarget) -> AnyServingConfig:
    """The simplest correct configuration at the model's full native context."""
    return adapter_for(engine).baseline_config(target)


def runnable_candidates(configs: dict[str, AnyServingConfig], cpu_isa: list[str] | None
                        ) -> tuple[dict[str, AnyServingConfig], list[str]]:
    """The candidates this CPU can run, and for each one left out, why (the engine would refuse
    it here: see EngineAdapter.cpu_kernel_requirements). `cpu_isa` None: a GPU run."""
    kept, left_out = {}, []
    for value, config in configs.items():
        if refused := unsupported_config(config, cpu_isa):
            left_out += [f"{u.knob}={u.value}: not on this CPU: {u.reason}" for u in refused]
        else:
            kept[value] = config
    return kept, left_out


def why_pruned(config: AnyServingConfig, cpu_isa: list[str] | None,
               fit: Callable[[AnyServingConfig], MemoryFit]) -> str | None:
    """Why the ladder does not launch `config`: this CPU cannot run it, or it does not fit at
    the full context (the gap, and the smallest alternatives); None: it is worth a launch."""
    _, refused = runnable_candidates({"candidate": config}, cpu_isa)
    if refused:
        return "; ".join(refused)
    f = fit(config)
    if not f.fits:
        return (f"does not fit at the full context: {f.gap_bytes / 2**30:.2f} GiB short per "
                "device; options: " + "; ".join(f.alternatives))
    return None


def control_ineligible(control: Trial, fit: Callable[[AnyServingConfig], MemoryFit],
                       served_context_tokens: int, remedies: tuple[ContractRemedy, ...]
                       ) -> str | None:
    """The hard requirement the engine's defaults fail, from their first trial: no
    measurement, a required API feature missing, the quality gate, or less context per
    sequence than the run serves (llama.cpp's auto slots share one context); None: eligible."""
    if control.objective_value is None:
        return f"they did not measure ({control.failed or 'no value'})"
    if broken := [g.feature for g in contract_gaps(control.contract, remedies) if g.required]:
        return "they lack required API features: " + ", ".join(broken)
    if control.quality is not None and not control.quality.passed:
        return f"the quality gate: {control.quality.summary}"
    context = fit(control.config).context_tokens
    if context is not None and context < served_context_tokens:
        return (f"they give each sequence {context:,} context tokens of the "
                f"{served_context_tokens:,} the run serves (the full native context)")
    return None


def objective_value(bench: BenchmarkResult) -> float | None:
    """The workload's objective, read from its target scenario (docs/metrics.md)."""
    w = bench.workload
    s = bench.scenario(w.target_scenario)
    if w.objective is Objective.THROUGHPUT:  # the steady state where the loop held its load
        lv = s.level
        return lv.steady_output_tokens_per_s or lv.output_tokens_per_s
    if w.objective is Objective.GOODPUT:
        return s.goodput_requests_per_s
    # TPOT, not ITL: a speculative draft's tokens arrive in bursts (docs/metrics.md).
    tpot = s.level.tpot_s.p50 if s.level.tpot_s is not None else None
    return tpot if tpot is not None else s.level.itl_s.p50


def trial_measures(bench: BenchmarkResult) -> dict[MeasureName, float]:
    """The target scenario's measures beside the objective, for ordering ties
    (infopt.tuning.rounds.SECONDARY); a measure the trial did not produce is left out."""
    s = bench.scenario(bench.workload.target_scenario)
    lv = s.level
    out: dict[MeasureName, float | None] = {
        "output_tokens_per_s": lv.steady_output_tokens_per_s or lv.output_tokens_per_s,
        "ttft_p50_s": lv.ttft_s.p50, "itl_p50_s": lv.itl_s.p50,
        "tpot_p50_s": lv.tpot_s.p50 if lv.tpot_s is not None else None,
        "goodput_requests_per_s": s.goodput_requests_per_s}
    return {k: v for k, v in out.items() if v is not None and v > 0}


def higher_is_better(objective: Objective) -> bool:
    return HIGHER_IS_BETTER[objective]


def control_recommendation(gain: ControlGain, control_context_tokens: int | None,
                           native_context_tokens: int) -> str | None:
    """When the engine's defaults beat every tuned candidate beyond the noise, what to run.
    Candidates are held to the full native context per sequence; defaults that give each
    sequence less (llama.cpp's auto slots share one context) buy their speed with it, so the
    choice depends on the longest request the clients send, which only the user knows."""
    d = gain.decision
    if d is not None and d.recommended == "control":
        return f"run the engine's defaults: {d.why}"
    last = (d.reconfirmed or d.rounds) if d is not None else None
    faster = (last.state == "worse" if last is not None else
              gain.comparison is not None and gain.comparison.verdict == "a_better")
    if not faster:
        return None
    if control_context_tokens is not None and control_context_tokens < native_context_tokens:
        return (f"the engine's defaults were faster, but give each sequence only "
                f"{control_context_tokens} of the model's {native_context_tokens} context "
                f"tokens: run the defaults if every request (prompt + output) stays within "
                f"{control_context_tokens} tokens; keep the winner where requests need the full "
                "context")
    return ("run the engine's defaults: no candidate beat them, and they serve the full "
            "native context")


def control_gain(control: list[float], winner: list[float], objective: Objective, *,
                 seed: int = 0, control_is_baseline: bool = False,
                 decision: FinalDecision | None = None) -> ControlGain:
    """The winner against the control (the engine's defaults). With the run's final paired
    comparison (`decision`), its medians, ratio and verdict are the gain; without one, the
    trials of each side are compared unpaired. When the run had no separate control trials,
    the defaults were the baseline: its trials stand in."""
    higher = higher_is_better(objective)
    rounds = decision.reconfirmed or decision.rounds if decision is not None else None
    if decision is not None and rounds is not None:
        o = rounds.objective
        return ControlGain(objective=objective.value, higher_is_better=higher,
                           control_median=o.a_median, winner_median=o.b_median, ratio=o.ratio,
                           comparison=None, control_is_baseline=control_is_baseline,
                           note=decision.why, decision=decision)
    c_med, _ = median_and_spread(control)
    w_med, _ = median_and_spread(winner)
    comparison, note = None, ""
    if len(control) >= 2 and len(winner) >= 2:
        comparison = bootstrap_diff(control, winner, higher_is_better=higher, seed=seed)
        note = {"b_better": "the winner beats the engine's defaults beyond the noise",
                "a_better": "the engine's defaults beat the winner beyond the noise",
                "no_difference": "no difference from the engine's defaults beyond the "
                                 "noise"}[comparison.verdict]
    else:
        note = (f"{len(control)} control and {len(winner)} winner measurement(s): at least 2 "
                "each are needed for an interval")
    if decision is not None:
        note = f"{note}; {decision.why}"
    return ControlGain(objective=objective.value, higher_is_better=higher,
                       control_median=c_med, winner_median=w_med,
                       ratio=w_med / c_med if c_med and w_med is not None else None,
                       comparison=comparison, control_is_baseline=control_is_baseline,
                       note=note, decision=decision)
