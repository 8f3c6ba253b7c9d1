"""The tuning ladder inside the optimize flow: a thin driver of the climb
(infopt.tuning.climb), which owns the whole policy (control and baseline with repeats, every
dimension in the specification's order, screen, confirm, carry the incumbent, budgets). This
module only executes what the climb yields: each `TrialSpec` as a run-trial task (started afresh
while a signal kills its engine, tasks.trial.run_attempts), the last attempt sent back.

Every trial is persisted under its key (tasks.trial): a resumed run re-derives the same
candidates from the same loaded measurements and re-runs nothing that completed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infopt.specs.approval import GateAnswer
from infopt.specs.fit import MemoryFit
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.trial import TrialSpec
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, Incumbent, climb, drive
from tasks.trial import TrialContext, run_attempts

__all__ = ["Incumbent", "LadderRun", "control_values", "run_climb", "weight_approvals"]


@dataclass
class LadderRun:
    """What the driver ran: every attempt in order (the report's trials), and the candidates
    the climb pruned ("label: why")."""

    trials: list[Trial] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def run_climb(plan: ClimbPlan, ctx: TrialContext, key: Callable[[TrialSpec], str],
              fit: Callable[[AnyServingConfig], MemoryFit], retries: int
              ) -> tuple[ClimbOutcome, list[Trial]]:
    """The climb, each yielded trial run as a task under its persistence key `key(spec)`;
    returns the outcome and every attempt, in order."""
    def run(spec: TrialSpec) -> list[Trial]:
        return run_attempts(spec, key(spec), fit(spec.config), ctx, retries)

    return drive(climb(plan), run)


def control_values(run: LadderRun) -> tuple[list[float], bool]:
    """The control's measurements, and whether the baseline's stood in for them."""
    own = [t.objective_value for t in run.trials if t.role == "control"
           and t.objective_value is not None]
    if any(t.role == "control" for t in run.trials):
        return own, False
    return [t.objective_value for t in run.trials if t.role == "baseline"
            and t.objective_value is not None], True


def weight_approvals(variants: dict[str, Path], answers: dict[str, GateAnswer]
                     ) -> dict[str, GateAnswer]:
    """model path -> the gate answer that let it be made."""
    return {str(path): answers[fmt] for fmt, path in variants.items() if fmt in answers}
