"""The tuning ladder inside the optimize flow: a thin driver of the climb
(infopt.tuning.climb), which owns the whole policy (control and baseline with repeats, every
dimension in the specification's order, screen, confirm, carry the incumbent, budgets, a fresh
start of a trial whose engine a signal killed). This module only runs what the climb yields,
each `TrialSpec` as the run-trial task, and sends the trial back. Every trial is persisted under
its key (infopt.runs.trial_run): a resumed run re-derives the same candidates from the same
loaded measurements and re-runs nothing that completed."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from infopt.engines.session import EnginePool
from infopt.runs.engine_run import EngineRun
from infopt.specs.fit import MemoryFit
from infopt.specs.ladder import ClimbProgress
from infopt.specs.serving import AnyServingConfig
from infopt.specs.trial import TrialSpec
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, climb
from tasks.trial import run_trial

__all__ = ["Progress", "run_climb"]


def run_climb(plan: ClimbPlan, ctx: EngineRun, key: Callable[[TrialSpec], str],
              fit: Callable[[AnyServingConfig], MemoryFit], engines_up: int = 2
              ) -> ClimbOutcome:
    """The climb, each yielded trial run as a task under its persistence key `key(spec)`; the
    outcome carries every attempt, in order."""
    # Paired windows alternate between engines kept up: the incumbent's and its candidate's on
    # a CPU host; on a GPU host one at a time (each claims most of the GPU's memory).
    up = min(engines_up, 1) if ctx.hw.gpus else engines_up
    pool = EnginePool(up, ctx.troubleshoot) if up else None
    gen = climb(plan)
    try:
        spec = next(gen)
        while True:  # the driver inline: one hop from here to the task
            spec = gen.send(run_trial(spec, key(spec), fit(spec.config), ctx, pool))
    except StopIteration as done:
        outcome: ClimbOutcome = done.value
    finally:
        if pool is not None:
            pool.close()
    if isinstance(plan.progress, Progress):
        plan.progress.finish(len(outcome.trials))
    return outcome


class Progress:
    """Where the climb is, on the console (the run's log) and in the Prefect UI (a progress
    artifact whose description is the same line): trial k of the planned N, what it measures,
    the time so far and an estimate of the time left, which grows when a close call earns
    rounds."""

    def __init__(self, run_id: str, engine: str) -> None:
        self.run_id, self.engine = run_id, engine
        self.artifact: UUID | None = None

    def __call__(self, p: ClimbProgress) -> None:
        line = f"{self.engine}: {p.line()}"
        get_run_logger().info("progress: %s", line)
        self._show(100.0 * (p.trial - 1) / max(1, p.planned), line)

    def finish(self, trials: int) -> None:
        self._show(100.0, f"{self.engine}: done, {trials} trials")

    def _show(self, share: float, line: str) -> None:
        text = f"run {self.run_id}, {line}"
        if self.artifact is None:
            self.artifact = cast(UUID, create_progress_artifact(  # sync here: a UUID
                progress=share, key=f"infopt-progress-{self.engine}".lower(), description=text))
        else:
            update_progress_artifact(self.artifact, progress=share, description=text)
