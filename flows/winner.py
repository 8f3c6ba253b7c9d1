"""The optimize flow's last steps before the report: the ladder's winner confirmed on the
generative task sets against the reference's answers (the policy is infopt.tuning.winner's
fallback: one that won on speed but regresses there is excluded and the incumbent before it
tried, down to the baseline), measured on the standard scenarios (its engine started once for
both), its kernel path read, exposed behind its gate, and its gain against the engine's
defaults."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from flows.expose import expose_winner
from infopt.engines.session import engine_session
from infopt.quality.taskrun import taskset_verdicts
from infopt.runs.engine_run import EngineRun
from infopt.runs.outcomes import EngineTuning, Finish, control_values
from infopt.runs.rundir import trial_dir
from infopt.specs.hardware import HardwareInventory
from infopt.specs.quality import TaskSetOutcome, TaskSetResult
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import RunningEngine, ScenarioResult, Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.workload import Workload
from infopt.tuning.climb_data import Incumbent
from infopt.tuning.control import control_gain, control_recommendation
from infopt.tuning.plan_run import fit_of
from infopt.tuning.winner import Attempt, Decision, fallback
from tasks.benchmark import benchmark_scenarios
from tasks.kernel import kernel_path_task
from tasks.quality import reference_task_sets, task_sets


def finish_winner(request: OptimizeRequest, workload: Workload, tuned: EngineTuning,
                  run_dir: Path, hw: HardwareInventory) -> Finish:
    """The winner confirmed on the task sets against the reference's answers (the engine
    started once for them and the standard scenarios), its kernel path, the expose gate, and
    its gain against the control."""
    # The defaults recommended: nothing to confirm against the reference, whose answers they
    # are; the ladder's winner: confirmed, falling back through the incumbents before it.
    chosen = [tuned.chosen] if tuned.chosen.role == "control" else tuned.history
    decision = confirm_winner(chosen, request, tuned.engine_run, tuned.control, tuned.ref_key)
    winner = decision.winner
    run = tuned.engine_run
    kernels = kernel_path_task(winner, str(run_dir), run.weights_bytes(winner.config),
                               run.troubleshoot)
    exposure, expose_answers = expose_winner(request, winner, run.weights_bytes(winner.config),
                                             run_dir)
    c_values, control_is_baseline = control_values(tuned.run)
    gain = control_gain(c_values, decision.chosen.values, workload.objective,
                        seed=request.seed, control_is_baseline=control_is_baseline,
                        decision=tuned.ladder.decision)
    gain.served_context_tokens = tuned.context_tokens
    control_fit = fit_of(tuned.model, hw, tuned.control, workload.target_concurrency)
    gain.recommendation = control_recommendation(gain, control_fit.context_tokens,
                                                 tuned.served_context_tokens)
    return Finish(decision, kernels, exposure, expose_answers, gain)


def confirm_winner(history: list[Incumbent], request: OptimizeRequest, run: EngineRun,
                   control: AnyServingConfig, reference_key: str | None) -> Decision:
    """infopt.tuning.winner.fallback driven: each attempt's engine started once for its task
    sets (against the reference's answers, made first: `reference_key` None, no reference, no
    task sets) and, for the one accepted, the standard scenarios."""
    items = request.quality_task_items if reference_key else 0
    policy = fallback(history)
    attempt = next(policy)
    if not items and not request.scenarios:
        return Decision(attempt.incumbent, attempt.winner, None, [])
    run_dir = Path(run.run_dir)
    reference = (reference_task_sets(control, str(run_dir / "quality"),
                                     run.weights_bytes(control), reference_key, items,
                                     run.troubleshoot)
                 if items and reference_key else None)  # before the winner: one engine at a time
    while True:
        winner = attempt.winner
        with engine_session(winner.config, trial_dir(run_dir, "t-scenarios") / "engine.log",
                            run.weights_bytes(winner.config), troubleshoot=run.troubleshoot,
                            log=get_run_logger()) as started:
            tasks = (_tasks(started.running, attempt, run, reference, reference_key, items,
                            request.quality_tolerance) if reference and reference_key else None)
            try:
                attempt = policy.send(tasks)
            except StopIteration:
                return Decision(attempt.incumbent, winner, tasks,
                                _scenarios(started.running, winner, request, run))
        get_run_logger().warning("%s regressed on the task sets: excluded, falling back",
                                 attempt.excluded[-1])


def _tasks(running: RunningEngine, attempt: Attempt, run: EngineRun,
           reference: list[TaskSetResult], reference_key: str, items: int, tolerance: float
           ) -> TaskSetOutcome:
    winner = attempt.winner
    key = run.quality_key(winner.config)
    sets = (reference if key == reference_key else
            task_sets(running, winner.config, str(Path(run.run_dir) / "quality"), key, items))
    return TaskSetOutcome(
        items_per_set=items, reference=reference, winner_trial_id=winner.trial_id,
        winner=sets, excluded=list(attempt.excluded),
        verdicts=taskset_verdicts(reference, sets, tolerance))


def _scenarios(running: RunningEngine, winner: Trial, request: OptimizeRequest, run: EngineRun
               ) -> list[ScenarioResult]:
    names = request.scenarios
    if not names:
        return []
    get_run_logger().info("measuring the winner (%s) on the standard scenarios",
                          winner.trial_id)
    return benchmark_scenarios(
        running, winner.config.served_model_name, run.served_context_tokens,
        request.workload.peak_active_generations, request.scenario_requests,
        request.seed, run.run_dir, "t-scenarios",
        None if "all" in names else [str(n) for n in names],
        tokenizer_path=run.tokenizer_path)
