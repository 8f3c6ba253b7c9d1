"""One tuning dimension at a time: the baseline configuration, the values to try, the objective
of a measured trial, and the accept/reject decision over repeated runs.
"""

from __future__ import annotations

from collections import defaultdict

from infopt.analysis.compare import bootstrap_diff
from infopt.engines import adapter_for
from infopt.engines.base import ServingTarget
from infopt.engines.support import unsupported_config
from infopt.analysis.stats import median_and_spread
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.results import BenchmarkResult, ControlGain, Trial, TuningOutcome
from infopt.specs.serving import AnyServingConfig, EngineName
from infopt.specs.trial import TuningDimension
from infopt.specs.workload import HIGHER_IS_BETTER, Objective, Workload


def serving_target(model: ModelProfile, hw: HardwareInventory, served_name: str,
                   port: int | None) -> ServingTarget:
    return ServingTarget(model_path=model.path, served_model_name=served_name,
                         native_context_tokens=model.native_context_tokens,
                         usable_cpus=hw.host.usable_cpus, port=port)


def control_config(engine: EngineName, target: ServingTarget) -> AnyServingConfig:
    """The engine's out-of-the-box defaults (trial 0: every gain is stated against it)."""
    return adapter_for(engine).control_config(target)


def baseline_config(engine: EngineName, target: ServingTarget) -> AnyServingConfig:
    """The simplest correct configuration at the model's full native context."""
    return adapter_for(engine).baseline_config(target)


def first_dimension(config: AnyServingConfig, workload: Workload) -> TuningDimension:
    """The adapter's scheduling dimension at the workload's target load (issue 14: the ladder)."""
    return adapter_for(config.engine).scheduling_dimension(workload.target_concurrency)


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


def objective_value(bench: BenchmarkResult) -> float | None:
    """The workload's objective, read from its target scenario (docs/metrics.md)."""
    w = bench.workload
    s = bench.scenario(w.target_scenario)
    if w.objective is Objective.THROUGHPUT:
        return s.level.output_tokens_per_s
    if w.objective is Objective.GOODPUT:
        return s.goodput_requests_per_s
    return s.level.itl_s.p50


def higher_is_better(objective: Objective) -> bool:
    return HIGHER_IS_BETTER[objective]


def decide(trials: list[Trial], knob: str, baseline_value: str, objective: Objective, *,
           seed: int = 0, min_rel_diff: float = 0.0) -> TuningOutcome:
    """Winner = best median objective; a change from the baseline is accepted only when the
    bootstrap interval of (best - baseline) over their repeated trials lies wholly on the
    better side (beyond `min_rel_diff` of the baseline), so a gain inside run-to-run noise is
    never reported as a win. The unit of replication is the trial (a fresh engine start), not
    the request: drift between runs is the noise that matters here."""
    by_value: dict[str, list[float]] = defaultdict(list)
    values: list[str] = []
    for t in trials:
        if t.value is None:
            continue
        if t.value not in values:
            values.append(t.value)
        if t.objective_value is not None:
            by_value[t.value].append(t.objective_value)
    medians, spreads = {}, {}
    for v in values:
        medians[v], spreads[v] = median_and_spread(by_value[v])
    higher = higher_is_better(objective)
    sign = 1.0 if higher else -1.0
    measured = [v for v in values if medians[v] is not None]
    if not measured:
        raise ValueError("no tuning trial produced a measurement")
    best = max(measured, key=lambda v: sign * medians[v])
    base, win = by_value.get(baseline_value, []), by_value[best]
    comparison, why = None, None
    if best == baseline_value:
        why = "the baseline has the best median"
    elif len(base) < 2 or len(win) < 2:
        why = (f"{len(base)} baseline and {len(win)} best-value measurement(s): at least 2 "
               "repeats each are needed to tell a gain from noise (raise repeats)")
    else:
        comparison = bootstrap_diff(base, win, higher_is_better=higher, seed=seed,
                                    min_rel_diff=min_rel_diff)
        if comparison.verdict != "b_better":
            why = (f"the {comparison.ci:.0%} interval of the difference "
                   f"[{comparison.ci_low:.4g}, {comparison.ci_high:.4g}] does not clear the "
                   "noise")
    accepted = best != baseline_value and comparison is not None and why is None
    rule = ("accept the best median only if the bootstrap interval of its difference from the "
            f"baseline, over repeated trials, excludes zero ({'higher' if higher else 'lower'} "
            f"{objective.value} is better"
            + (f", margin {min_rel_diff:.0%}" if min_rel_diff else "") + ")")
    return TuningOutcome(dimension=knob, values=values, baseline_value=baseline_value,
                         medians=medians, spreads=spreads,
                         winner_value=best if accepted else baseline_value,
                         accepted=accepted, rule=rule, best_value=best, comparison=comparison,
                         kept_baseline_because=why if not accepted else None)


def control_recommendation(gain: ControlGain, control_context_tokens: int | None,
                           native_context_tokens: int) -> str | None:
    """When the engine's defaults beat every tuned candidate beyond the noise, what to run.
    Candidates are held to the full native context per sequence; defaults that give each
    sequence less (llama.cpp's auto slots share one context) buy their speed with it, so the
    choice depends on the longest request the clients send, which only the user knows."""
    if gain.comparison is None or gain.comparison.verdict != "a_better":
        return None
    if control_context_tokens is not None and control_context_tokens < native_context_tokens:
        return (f"the engine's defaults were faster, but give each sequence only "
                f"{control_context_tokens} of the model's {native_context_tokens} context "
                f"tokens: run the defaults if every request (prompt + output) stays within "
                f"{control_context_tokens} tokens; keep the winner where requests need the full "
                "context")
    return ("run the engine's defaults: no candidate beat them, and they serve the full "
            "native context")


def control_gain(trials: list[Trial], winner_value: str, objective: Objective, *,
                 seed: int = 0) -> ControlGain:
    """The winner's repeated trials against the control's (the engine's defaults). When the run
    had no separate control trials, the defaults were the baseline: its trials stand in."""
    control = [t.objective_value for t in trials if t.role == "control"
               and t.objective_value is not None]
    separate = any(t.role == "control" for t in trials)
    if not separate:
        control = [t.objective_value for t in trials if t.role == "baseline"
                   and t.objective_value is not None]
    win = [t.objective_value for t in trials if t.value == winner_value
           and t.role != "control" and t.objective_value is not None]
    higher = higher_is_better(objective)
    c_med, _ = median_and_spread(control)
    w_med, _ = median_and_spread(win)
    comparison, note = None, ""
    if len(control) >= 2 and len(win) >= 2:
        comparison = bootstrap_diff(control, win, higher_is_better=higher, seed=seed)
        note = {"b_better": "the winner beats the engine's defaults beyond the noise",
                "a_better": "the engine's defaults beat the winner beyond the noise",
                "no_difference": "no difference from the engine's defaults beyond the "
                                 "noise"}[comparison.verdict]
    else:
        note = (f"{len(control)} control and {len(win)} winner measurement(s): at least 2 "
                "each are needed for an interval")
    return ControlGain(objective=objective.value, higher_is_better=higher,
                       control_median=c_med, winner_median=w_med,
                       ratio=w_med / c_med if c_med and w_med is not None else None,
                       comparison=comparison, control_is_baseline=not separate, note=note)
