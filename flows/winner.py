"""The optimize flow's last steps before the report: confirm the ladder's winner on the
generative task sets against the reference's answers (one that won on speed but regresses there
is excluded and the incumbent before it tried, down to the baseline), and measure it on the
standard scenarios. The winner's engine is started once for both."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from prefect import get_run_logger

from flows.ladder import Incumbent
from infopt.engines.session import engine_session
from infopt.quality.taskrun import taskset_verdicts
from infopt.runs.engine_run import EngineRun
from infopt.runs.rundir import trial_dir
from infopt.specs.base import EngineStartError
from infopt.specs.quality import TaskSetOutcome, TaskSetResult
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import ScenarioResult, Trial
from infopt.specs.serving import ServingConfig
from tasks.benchmark import benchmark_scenarios
from tasks.quality import reference_task_sets, task_sets


def median_trial(trials: list[Trial]) -> Trial:
    """The measured trial at the median objective."""
    measured = sorted((t for t in trials if t.objective_value is not None),
                      key=lambda t: t.objective_value)
    if not measured:  # the ladder accepts only measured incumbents; the baseline is checked
        raise EngineStartError("no trial of this configuration was measured: " + "; ".join(
            f"{t.trial_id}: {t.failed}" for t in trials))
    return measured[len(measured) // 2]


@dataclass
class WinnerContext:
    """What confirming a winner needs: the engine's run context (its keys and weights sizes,
    the same the trials used), the control and the quality reference's key."""

    request: OptimizeRequest
    run: EngineRun
    control: ServingConfig  # the reference configuration (the control)
    reference_key: str | None  # None: no quality reference, so no task sets
    reference_sets: list[TaskSetResult] | None = field(default=None, init=False)

    @property
    def items(self) -> int:
        return self.request.quality_task_items if self.reference_key else 0

    @property
    def run_dir(self) -> Path:
        return Path(self.run.run_dir)


@dataclass
class Decision:
    chosen: Incumbent  # the configuration recommended
    winner: Trial  # its trial at the median objective
    tasks: TaskSetOutcome | None
    scenarios: list[ScenarioResult]


def confirm_winner(history: list[Incumbent], wc: WinnerContext) -> Decision:
    """The ladder's last incumbent, confirmed on the task sets; one that regresses beyond the
    noise is excluded and the incumbent before it is tried, down to the baseline (reported
    as it is). Then the chosen one is measured on the scenarios."""
    excluded: list[str] = []  # "configuration: why", for the report
    for inc in reversed(history):
        winner = median_trial(inc.trials)
        if not wc.items and not wc.request.scenarios:
            return Decision(inc, winner, None, [])
        if wc.items and wc.reference_sets is None:  # before the winner starts: one at a time
            wc.reference_sets = reference_task_sets(
                wc.control, str(wc.run_dir / "quality"), wc.run.weights_bytes(wc.control),
                wc.reference_key, wc.items, wc.run.troubleshoot)
        with engine_session(winner.config, trial_dir(wc.run_dir, "t-scenarios") / "engine.log",
                            wc.run.weights_bytes(winner.config),
                            troubleshoot=wc.run.troubleshoot,
                            log=get_run_logger()) as started:
            running = started.running
            tasks = _tasks(running, winner, wc, excluded) if wc.items else None
            if tasks is not None and not tasks.passed and inc is not history[0]:
                why = "; ".join(v.why for v in tasks.verdicts if not v.passed)
                get_run_logger().warning("%s regressed on the task sets (%s): excluded, "
                                         "falling back", inc.winner_label, why)
                excluded.append(f"{inc.winner_label}: {why}")
                continue
            return Decision(inc, winner, tasks, _scenarios(running, winner, wc))
    raise AssertionError("the baseline is never excluded")


def _tasks(running, winner: Trial, wc: WinnerContext, excluded: list[str]) -> TaskSetOutcome:
    key = wc.run.quality_key(winner.config)
    sets = (wc.reference_sets if key == wc.reference_key else
            task_sets(running, winner.config, str(wc.run_dir / "quality"), key, wc.items))
    return TaskSetOutcome(
        items_per_set=wc.items, reference=wc.reference_sets, winner_trial_id=winner.trial_id,
        winner=sets, excluded=list(excluded),
        verdicts=taskset_verdicts(wc.reference_sets, sets, wc.request.quality_tolerance))


def _scenarios(running, winner: Trial, wc: WinnerContext) -> list[ScenarioResult]:
    names = wc.request.scenarios
    if not names:
        return []
    get_run_logger().info("measuring the winner (%s) on the standard scenarios",
                          winner.trial_id)
    return benchmark_scenarios(
        running, winner.config.served_model_name,
        wc.run.served_context_tokens,
        wc.request.workload.peak_active_generations, wc.request.scenario_requests,
        wc.request.seed, str(wc.run_dir), "t-scenarios", None if "all" in names else names,
        tokenizer_path=wc.run.tokenizer_path)
