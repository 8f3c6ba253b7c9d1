"""The climb's data (infopt.tuning.climb): the run's fixed points and world checks it is given
(`ClimbPlan`), the incumbents it carries, what it decided (`ClimbOutcome`), and `drive`, which
runs any such generator with a trial runner."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infopt.specs.approval import GateAnswer
from infopt.specs.contract import ContractGap, ContractRemedy
from infopt.specs.ladder import ClimbProgress, Dimension, LadderOutcome
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.trial import TrialDimension, TrialRole, TrialSpec

if TYPE_CHECKING:  # the adapters' rules and facts arrive as data
    from infopt.engines.rules import DimensionRule, LadderFacts

LOG = logging.getLogger("infopt.tuning.climb")


@dataclass
class Incumbent:
    label: str  # "baseline", "control" or the last accepted candidate's label
    config: AnyServingConfig
    trials: list[Trial]
    dimension: TrialDimension | None = None  # the dimension of its last change
    chain: list[str] = field(default_factory=list)  # accepted labels, in order
    role: TrialRole = TrialRole.TUNING  # its own windows' role (CONTROL, BASELINE or TUNING)

    @property
    def values(self) -> list[float]:
        return [t.objective_value for t in self.trials if t.objective_value is not None]

    @property
    def winner_label(self) -> str:
        if self.role is TrialRole.CONTROL:
            return "control (the engine's defaults)"
        return " + ".join(["baseline", *self.chain])


def _no_gaps(trial: Trial) -> list[ContractGap]:
    return []


def _runs_anywhere(config: AnyServingConfig) -> str | None:
    return None


def _quality_failed(control: Trial) -> str | None:
    if control.objective_value is None:
        return f"they did not measure ({control.failed or 'no value'})"
    if control.quality is not None and not control.quality.passed:
        return f"the quality gate: {control.quality.summary}"
    return None


@dataclass(frozen=True)
class ClimbPlan:
    """What the climb needs from the run: its fixed points and rules as data, and the checks
    that need the world (this CPU, the memory fit, the engine's contract remedies, the facts
    measured by the first baseline trial) as functions."""

    control: AnyServingConfig  # the engine's defaults: every change is stated against it
    baseline: AnyServingConfig
    engine: str
    rules: dict[Dimension, DimensionRule | None]  # infopt.tuning.dimension_rules.rules_for
    facts: Callable[[Trial], LadderFacts]  # from the first baseline trial
    objective: str
    higher: bool  # higher objective is better
    budgets: Budgets
    seed: int = 0
    # Why a candidate's configuration cannot run here or does not fit (None: it can).
    why_pruned: Callable[[AnyServingConfig], str | None] = _runs_anywhere
    gaps: Callable[[Trial], list[ContractGap]] = _no_gaps  # the baseline's contract gaps
    # weights path -> the answer that let it be tried; read only once the ladder's facts are
    # (the flow's gates may still be waiting while the control and the baseline run)
    approvals: Mapping[str, GateAnswer] = field(default_factory=dict)
    id_prefix: str = ""  # a comparator engine's trials: "vllm-t00-control-r1"
    clock: Callable[[], float] = time.monotonic  # seconds, for the wall-time budget
    t_start: float | None = None  # on `clock`; None: when the climb starts
    # The flow passes Prefect's run logger (a LoggerAdapter), so the UI shows the decisions.
    log: logging.Logger | logging.LoggerAdapter = LOG
    # The workload's measured requests per window (its target scenario's); None: windows are
    # not resized from the measured noise.
    window_requests: int | None = None
    # The hard requirement the control (its first trial) fails (context, contract, quality),
    # or None: a control that meets them all is what the run recommends unless beaten.
    control_ineligible: Callable[[Trial], str | None] = _quality_failed
    progress: Callable[[ClimbProgress], None] | None = None  # before each trial


@dataclass
class ClimbOutcome:
    """What the climb decided. `ladder` None: the baseline was broken (`broken`, with its
    contract gaps), so nothing was climbed; the driver says why and stops."""

    ladder: LadderOutcome | None
    history: list[Incumbent]  # the incumbents in the order accepted, the baseline first
    pruned: list[str]  # "label: why", for the report
    launches: int  # attempts of the current plan (a re-plan starts it afresh)
    remedy: ContractRemedy | None = None  # the contract remedy the baseline was re-planned with
    first_gaps: list[ContractGap] = field(default_factory=list)  # the first baseline's gaps
    # Attempts the first plan made before the remedy re-planned it (its trials the re-planned
    # run reloads by key are not run again; the others are the report's evidence).
    replanned_after: int = 0
    broken: Trial | None = None
    broken_gaps: list[ContractGap] = field(default_factory=list)
    # What the run recommends (the ladder's winner or the control) with its trials.
    chosen: Incumbent | None = None
    trials: list[Trial] = field(default_factory=list)  # every attempt, in order


Climb = Generator[TrialSpec, Trial, ClimbOutcome]


def drive(gen: Generator[TrialSpec, Trial, Any],
          run: Callable[[TrialSpec], list[Trial]]) -> tuple[Any, list[Trial]]:
    """Run every spec `gen` yields with `run` (its trial, as a list so a black-box search's
    driver may add attempts), send it the last; returns its outcome and every trial `run`
    returned, in order. The bench's and the tests' driver; the flow's is flows/climb.py."""
    trials: list[Trial] = []
    try:
        spec = next(gen)
        while True:
            attempts = run(spec)
            trials.extend(attempts)
            spec = gen.send(attempts[-1])
    except StopIteration as done:
        return done.value, trials
