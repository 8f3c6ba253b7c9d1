"""The run's fixed points: the control (the engine's defaults) and the baseline configuration,
which candidates this CPU can run, the objective of a measured trial, and the winner against
the control. The ladder's own decisions are in infopt.tuning.ladder."""

from __future__ import annotations

from collections.abc import Callable

from infopt.analysis.compare import bootstrap_diff
from infopt.analysis.stats import median_and_spread
from infopt.engines import adapter_for
from infopt.engines.base import ServingTarget
from infopt.engines.support import unsupported_config
from infopt.specs.fit import MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.results import BenchmarkResult, ControlGain
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


def objective_value(bench: BenchmarkResult) -> float | None:
    """The workload's objective, read from its target scenario (docs/metrics.md)."""
    w = bench.workload
    s = bench.scenario(w.target_scenario)
    if w.objective is Objective.THROUGHPUT:
        return s.level.output_tokens_per_s
    if w.objective is Objective.GOODPUT:
        return s.goodput_requests_per_s
    # TPOT, not ITL: a speculative draft's tokens arrive in bursts (docs/metrics.md).
    tpot = s.level.tpot_s.p50 if s.level.tpot_s is not None else None
    return tpot if tpot is not None else s.level.itl_s.p50


def higher_is_better(objective: Objective) -> bool:
    return HIGHER_IS_BETTER[objective]


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


def control_gain(control: list[float], winner: list[float], objective: Objective, *,
                 seed: int = 0, control_is_baseline: bool = False) -> ControlGain:
    """The winner's repeated trials against the control's (the engine's defaults). When the run
    had no separate control trials, the defaults were the baseline: its trials stand in."""
    higher = higher_is_better(objective)
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
    return ControlGain(objective=objective.value, higher_is_better=higher,
                       control_median=c_med, winner_median=w_med,
                       ratio=w_med / c_med if c_med and w_med is not None else None,
                       comparison=comparison, control_is_baseline=control_is_baseline,
                       note=note)

