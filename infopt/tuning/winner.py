"""The winner's confirmation as a policy, like the climb: a generator that yields which
incumbent to try on the generative task sets and receives how it did. The ladder's last
incumbent first; one that regresses beyond the noise is excluded and the incumbent before it is
tried, down to the baseline (reported as it is, never excluded). flows/winner.py drives it,
starting each tried configuration's engine once for its task sets and the standard scenarios."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from infopt.specs.base import EngineStartError
from infopt.specs.quality import TaskSetOutcome
from infopt.specs.results import ScenarioResult, Trial
from infopt.tuning.climb_data import Incumbent


@dataclass(frozen=True)
class Attempt:
    """An incumbent to confirm, its trial at the median objective (the one started), and the
    configurations excluded before it ("label: why", for the report)."""

    incumbent: Incumbent
    winner: Trial
    excluded: list[str] = field(default_factory=list)


@dataclass
class Decision:
    chosen: Incumbent  # the configuration recommended
    winner: Trial  # its trial at the median objective
    tasks: TaskSetOutcome | None
    scenarios: list[ScenarioResult]


def median_trial(trials: list[Trial]) -> Trial:
    """The measured trial at the median objective."""
    measured = sorted((t for t in trials if t.objective_value is not None),
                      key=lambda t: t.objective_value or 0.0)
    if not measured:  # the ladder accepts only measured incumbents; the baseline is checked
        raise EngineStartError("no trial of this configuration was measured: " + "; ".join(
            f"{t.trial_id}: {t.failed}" for t in trials))
    return measured[len(measured) // 2]


def fallback(history: list[Incumbent]) -> Generator[Attempt, TaskSetOutcome | None, Attempt]:
    """Yields each incumbent to confirm, newest first; send its task-set outcome (None: none
    were run). Returns the attempt accepted: the first that passed or ran none, else the
    baseline (history[0])."""
    excluded: list[str] = []
    for inc in reversed(history):
        attempt = Attempt(inc, median_trial(inc.trials), list(excluded))
        tasks = yield attempt
        if tasks is None or tasks.passed or inc is history[0]:
            return attempt
        excluded.append(f"{inc.winner_label}: "
                        + "; ".join(v.why for v in tasks.verdicts if not v.passed))
    raise AssertionError("the history starts with the baseline, which is never excluded")
