"""One engine's tuning inside the optimize flow: what the climb needs from the world (weight
variants behind their gates, the quality reference, the trial context, pruning by CPU and fit,
the engine's contract remedies), then the climb itself (infopt.tuning.climb, driven by
flows/climb.py): its control (the engine's defaults) and its baseline with repeats, the
baseline re-planned with its contract remedy when one knob change provides what the client
needs, then the ladder from the baseline. A baseline the climb found broken stops the engine
here with what to change. The flow runs it for the routed engine and, when the model is here in
a format another allowed engine serves, for that comparator too.

Every trial is persisted under its key; a resumed run re-runs none that completed."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from blocks.credentials import troubleshooting
from flows.climb import Progress, run_climb
from flows.weight_gates import ask_weight_gates
from flows.weights import current_type
from infopt.contract.remedies import contract_gaps
from infopt.engines import adapter_for
from infopt.engines.rules import Drafter
from infopt.model.digest import model_digest
from infopt.model.profile import weights_profile
from infopt.quality.gate_run import with_long_note
from infopt.quality.keys import quality_key
from infopt.runs.engine_run import EngineRun, LongWindowsSource
from infopt.runs.outcomes import EngineTuning, LadderRun
from infopt.runs.rundir import atomic_write, trial_dir
from infopt.specs.base import EngineStartError, InfoptError
from infopt.specs.checkpoint import Shortlist
from infopt.specs.contract import ContractGap
from infopt.specs.fit import MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.trial import trial_key
from infopt.specs.workload import Workload
from infopt.troubleshoot.diagnose import next_steps
from infopt.tuning.climb import ClimbPlan
from infopt.tuning.control import (
    control_ineligible,
    higher_is_better,
    why_pruned,
)
from infopt.tuning.dimension_rules import ladder_facts, rules_for
from infopt.tuning.hub_weights import host_capacity_bytes
from infopt.tuning.plan_run import EnginePlan, fit_of, reference_config, start_configs
from tasks.quality import quality_reference


def tune_engine(request: OptimizeRequest, plan: EnginePlan, hw: HardwareInventory,
                workload: Workload, run_dir: Path, t_start: float,
                shortlist: Shortlist | None = None, drafters: tuple[Drafter, ...] = ()
                ) -> EngineTuning:
    """Control, baseline and the ladder for the planned engine serving its model, in the shape
    it must start in; `shortlist` holds the hub checkpoints it may try as weights."""
    engine, model, shape, id_prefix = plan.engine, plan.model, plan.shape, plan.id_prefix
    adapter = adapter_for(engine)
    control, baseline = start_configs(request, engine, model, hw, shape)
    version = adapter.detect_version(adapter.locate())
    digest = model_digest(model.path)
    # The weight candidates' gates are asked at the start: first when a downloaded checkpoint
    # of higher precision may become the quality reference, else beside the control and the
    # baseline, which no answer changes (flows/weight_gates.py).
    weights = ask_weight_gates(request, shortlist, model, engine.value, version, digest,
                               host_capacity_bytes(hw))
    ref_config, ref_digest, ref_why = reference_config(
        control, model, hw, workload, () if weights.background else weights.candidates().variants,
        digest)
    # The quality reference: started once, restarted for the floor.
    ref_key = quality_key(ref_config, version, ref_digest, request.quality_max_prompts)
    ref_bytes = weights_profile(model, ref_config.model_path).file_bytes
    reference, quality_note = quality_reference(
        ref_config, str(run_dir / "quality"), ref_bytes, ref_key, ref_why,
        request.quality_max_prompts, troubleshooting(request))
    gate = (f"{ref_key}:{request.quality_tolerance}:{request.quality_max_prompts}"
            if reference else "")
    ctx = EngineRun.of(request, str(run_dir), model, hw, workload, engine_version=version,
                       model_digest=digest, quality_reference=reference,
                       troubleshoot=troubleshooting(request),
                       context_tokens=shape.context_tokens if shape else None,
                       long_windows_from=LongWindowsSource(ref_config, ref_bytes))
    def fit(c: AnyServingConfig) -> MemoryFit:
        return fit_of(model, hw, c, workload.target_concurrency)

    climb_plan = ClimbPlan(
        control=control, baseline=baseline, engine=adapter.name.value,
        rules=rules_for(adapter, request.dimensions, request.tune),
        facts=lambda base: ladder_facts(model, hw, workload, base, weights.candidates().variants,
                                        "; ".join(weights.candidates().notes) or None,
                                        current_type(model),
                                        request.kv_prefix_budget.ram_bytes, drafters),
        objective=workload.objective.value, higher=higher_is_better(workload.objective),
        budgets=request.budgets, seed=request.seed,
        why_pruned=lambda c: why_pruned(c, hw.engine_cpu_isa, fit),
        gaps=lambda t: contract_gaps(t.contract, adapter_for(t.config.engine).contract_remedies),
        approvals=weights, id_prefix=id_prefix, t_start=t_start,
        log=get_run_logger(), window_requests=workload.traffic.measured_requests,
        control_ineligible=lambda t: control_ineligible(t, fit, ctx.served_context_tokens,
                                                        adapter.contract_remedies),
        progress=Progress(run_dir.name, adapter.name.value))
    try:
        outcome = run_climb(climb_plan, ctx,
                            lambda s: trial_key(s, workload, version, digest, gate), fit,
                            request.budgets.engines_up)
    except BaseException as exc:
        weights.withdraw(f"{type(exc).__name__} during the {engine.value} climb")
        raise
    trials = outcome.trials
    # A re-planned baseline (its contract remedy): the first plan's trials the second did not
    # reload by key stay as the report's evidence, renamed.
    before, trials = trials[:outcome.replanned_after], trials[outcome.replanned_after:]
    if outcome.broken is not None:
        weights.withdraw("the baseline is broken")
        _stop_on_broken_baseline(outcome.broken, run_dir, outcome.broken_gaps)
    run = LadderRun(trials=trials, pruned=outcome.pruned)
    ladder, history = outcome.ladder, outcome.history
    assert ladder is not None  # only a broken baseline leaves no ladder, and it stopped above
    return EngineTuning(
        engine=engine, model=model, version=version, digest=digest, control=control,
        # Without exact scoring the winner is still confirmed on the generative task sets
        # against the control's answers (tasks.quality.quality_reference says so).
        baseline=history[0].config,
        ref_key=ref_key if reference or adapter.token_scoring is None else None,
        quality_note=with_long_note(quality_note, reference, ctx.served_context_tokens),
        run=run, ladder=ladder,
        history=history, quality_against=(ref_why or "served") if reference else None,
        chosen=outcome.chosen or history[-1],
        applied=outcome.remedy, first_gaps=outcome.first_gaps,
        superseded=_superseded(before, trials), weight_notes=weights.candidates().notes,
        weight_answers=weights.candidates().answers, gate_waits=weights.waits(),
        context_tokens=shape.context_tokens if shape else None,
        engine_run=ctx)


def _superseded(before: list[Trial], after: list[Trial]) -> list[Trial]:
    """The first attempt's trials the re-planned run did not reuse (the baseline without the
    remedy: the report's evidence), renamed so no trial id appears twice."""
    reused = {t.key for t in after}
    return [t.model_copy(update={"trial_id": f"{t.trial_id}-before-remedy"})
            for t in before if t.key not in reused]


def _stop_on_broken_baseline(trial: Trial, run_dir: Path, gaps: list[ContractGap]) -> None:
    """Nothing to tune without a baseline that starts, keeps the API contract and passes the
    quality gate."""
    assert trial.key is not None  # the climb's trials are persisted under their keys
    if broken := [g for g in gaps if g.required]:
        raise InfoptError("the baseline failed its API contract: " + "; ".join(
            f"{g.feature} ({g.status.value}): {g.detail}"
            + (f" [would need: {g.remedy.change}]" if g.remedy else " [no known remedy]")
            for g in broken) + (". Applied first: " + "; ".join(c.knob + "=" + str(c.value)
                                for c in trial.changes) if trial.changes else "")
            + ". Evidence: " + str(trial_dir(run_dir, trial.key) / "contract"))
    if trial.quality is not None and not trial.quality.passed:
        raise InfoptError(f"the baseline failed the quality gate: {trial.quality.summary}. "
                          f"Evidence: {run_dir / 'quality'}; loosen quality_tolerance only if "
                          "the floor shows the reference itself is this noisy")
    if trial.objective_value is None:  # did not start, died mid-trial, or invalid records
        d = trial.diagnosis
        out = trial_dir(run_dir, trial.key) / "diagnosis.json"
        if d is not None:
            atomic_write(out, d.model_dump_json(indent=2))
        links = "; ".join(m.url for m in (d.matches if d else [])[:3])
        steps = next_steps(d) if d is not None else ""
        raise EngineStartError(
            f"the baseline configuration failed ({trial.failed}). Upstream: "
            f"{links or 'no match'}. {f'No knob fixes it: {steps}. ' if steps else ''}"
            f"Diagnosis: {out}; engine log: "
            f"{trial_dir(run_dir, trial.key) / 'engine.log'}")
