"""The optimize run's report, assembled from what the run established (a Target), what each
engine's tuning returned (EngineTuning) and what was measured of the winner after the ladder
(Finish): the chosen engine's winner, every trial of every engine, and where each number comes
from. Pure but for rendering the control's command when no control trial started."""

from __future__ import annotations

import time
from pathlib import Path

from infopt.contract.remedies import contract_gaps
from infopt.contract.verify import PROBES as CONTRACT_PROBES
from infopt.engines import adapter_for
from infopt.engines.config_layout import deployed_gpus
from infopt.engines.launch import launch_for
from infopt.engines.render import render_deployment
from infopt.report.reproduce import reproduction, weights_identity
from infopt.runs.outcomes import EngineTuning, Finish, Target
from infopt.specs.contract import ContractOutcome
from infopt.specs.ladder import EngineChoice
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport, RunningEngine, SloOutcome, Trial
from infopt.specs.trial import TrialRole
from infopt.specs.workload import Workload
from infopt.tuning.candidates import run_device
from infopt.tuning.climb_data import Incumbent
from infopt.tuning.pareto import closest_to_ceiling, config_label
from infopt.tuning.pareto import points as pareto_points
from infopt.tuning.slo_gate import Measured, slo_outcome

# What every report says of how it measured (the notes after the run's own).
METHOD_NOTES = (
    "control: the engine's out-of-the-box defaults on the same workload; every gain is stated "
    "against it",
    "prompts carry unique heads (no prefix-cache reuse beyond the chat template); prompt "
    "lengths are exact by the engine's own tokenizer where it has a tokenize route "
    "(usage.prompt_tokens checked per request); output lengths forced with the engine's fields "
    "and checked against usage")


def _control_command(trials: list[Trial], tuned: EngineTuning) -> str:
    """The command the control trial ran; rendered on a placeholder port if none started."""
    ran = next((t.engine.command for t in trials if t.role == "control" and t.engine), None)
    adapter = adapter_for(tuned.engine)
    return ran or launch_for(adapter, tuned.control, adapter.locate(), 8000).command


def _started(t: Trial) -> RunningEngine:
    assert t.engine is not None  # the winner is a measured trial: its engine started
    return t.engine


def _contract_outcome(tuned: EngineTuning) -> ContractOutcome:
    base_trial = tuned.base_trial
    control_trial = next((t for t in tuned.run.trials if t.role == "control"), base_trial)
    remedies = adapter_for(tuned.engine).contract_remedies
    return ContractOutcome(
        control_gaps=contract_gaps(control_trial.contract, remedies),
        first_baseline_gaps=tuned.first_gaps, applied=tuned.applied,
        baseline_gaps=contract_gaps(base_trial.contract, remedies))


def _notes(request: OptimizeRequest, target: Target, tunings: list[EngineTuning],
           tuned: EngineTuning) -> list[str]:
    plan = target.plan
    return ([f"skipped {s}" for s in plan.skipped] + list(plan.notes) + [
        f"required API feature `{f}`: no contract probe for it yet, so it was NOT checked"
        for f in request.api.features if f not in CONTRACT_PROBES]
        + [n for tn in tunings for n in tn.weight_notes]
        + ([] if plan.has_comparator else
           [f"no comparator engine: {plan.comparator_why}"])
        + [*METHOD_NOTES, f"tuning: {tuned.ladder.rule}"])


def assemble_report(run_id: str, run_dir: Path, request: OptimizeRequest, workload: Workload,
                    target: Target, tunings: list[EngineTuning], tuned: EngineTuning,
                    choice: EngineChoice, finish: Finish) -> OptimizationReport:
    """The run's report: the chosen engine's winner, every trial of every engine, and where
    each number comes from (labels name their engine when two were tuned)."""
    hw, decision = target.hw, finish.decision
    chosen_inc, winner = decision.chosen, decision.winner
    trials = [t for tn in tunings for t in tn.trials]
    qualify = len(tunings) > 1

    def qualified(t: Trial) -> str:
        return config_label(t, True)

    label_of = qualified if qualify else None
    return OptimizationReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=hw,
        device=run_device(hw)[0],
        model=tuned.model, workload=workload, engine=tuned.engine.value,
        engine_version=tuned.version,
        routing=[f"{r.engine.value}: {r.reason}" for r in target.plan.routes],
        shortlist=target.shortlist, drafter_search=target.drafters,
        pruned=[p for tn in tunings for p in tn.run.pruned],
        contract=tuned.base_trial.contract, contract_outcome=_contract_outcome(tuned),
        quality_note=tuned.quality_note, trials=trials, ladder=tuned.ladder,
        quality_against=tuned.quality_against,
        winner_label=chosen_inc.winner_label, engines=choice,
        pareto=pareto_points(trials, workload.target_concurrency, label_of),
        closest_to_ceiling=closest_to_ceiling(
            trials, config_label(winner, True) if qualify else chosen_inc.label,
            *([label_of] if label_of else [])),
        winner_trial_id=winner.trial_id, winner_config=winner.config,
        winner_command=_started(winner).command, control_config=tuned.control,
        control_command=_control_command(tuned.run.trials, tuned),
        baseline_config=tuned.baseline, gain_vs_control=finish.gain,
        winner_deployment=render_deployment(
            winner.config, port=8000, gpus=deployed_gpus(winner.config, hw),
            cpus=hw.host.usable_cpus, model_bytes=tuned.model.file_bytes,
            name=f"infopt-{run_id}".lower(),
            model=request.deploy.source(request.model.hub_id, request.model.revision,
                                        downloaded=any(a.approved
                                                       for a in target.download_answers)),
            token=request.deploy.token()),
        scenarios=decision.scenarios, tasks=decision.tasks, kernel_path=finish.kernels,
        slos=_slos(tuned, chosen_inc, workload, request.model.hub_id or tuned.model.path),
        reproduce=reproduction(run_dir, workload, winner, chosen_inc.trials, tuned.run.trials),
        winner_weights=weights_identity(winner.config.model_path, request.model.hub_id,
                                        request.model.revision),
        approvals=target.download_answers + [a for tn in tunings for a in tn.weight_answers]
        + [d.answer for d in target.decisions] + finish.expose_answers,
        decisions=target.decisions,
        gate_waits=target.waits + [w for tn in tunings for w in tn.gate_waits],
        exposure=finish.exposure,
        notes=_notes(request, target, tunings, tuned))


def _slos(tuned: EngineTuning, chosen: Incumbent, workload: Workload, model: str
          ) -> SloOutcome | None:
    """The SLOs against the recommended configuration, the defaults beside it for the loads
    they meet (infopt.tuning.slo_gate)."""
    control = [t for t in tuned.run.trials if t.role == TrialRole.CONTROL.value]
    others = ([] if chosen.role is TrialRole.CONTROL else
              [Measured("the engine's defaults", control)])
    return slo_outcome(Measured(chosen.winner_label, chosen.trials), others,
                       workload.target_concurrency, model)
