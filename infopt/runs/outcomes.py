"""What the optimize flow established and what each engine's tuning returned, as plain data:
the report (infopt.report.assemble) is assembled from these, and the winner's confirmation
(flows/winner.py) reads an engine's run context from its EngineTuning."""

from __future__ import annotations

from dataclasses import dataclass, field

from infopt.runs.engine_run import EngineRun
from infopt.specs.approval import ExposureOutcome, GateAnswer
from infopt.specs.checkpoint import Shortlist
from infopt.specs.contract import ContractGap, ContractRemedy
from infopt.specs.decision import ConstraintDecision, GateWait
from infopt.specs.drafters import DrafterSearch
from infopt.specs.hardware import HardwareInventory
from infopt.specs.ladder import LadderOutcome
from infopt.specs.model import ModelProfile
from infopt.specs.results import ControlGain, KernelPath, Trial
from infopt.specs.serving import AnyServingConfig, EngineName
from infopt.tuning.climb_data import Incumbent
from infopt.tuning.plan_run import RunPlan
from infopt.tuning.winner import Decision


@dataclass(frozen=True)
class Target:
    """What the run established before any engine starts: the machine, the model, the
    shortlist, the drafters and the plan (the routed engine, its comparator, their starts)."""

    hw: HardwareInventory
    model: ModelProfile
    shortlist: Shortlist | None
    plan: RunPlan
    download_answers: list[GateAnswer]
    drafters: DrafterSearch | None = None  # the exact hub model's verified drafters
    drafter_paths: dict[str, str] = field(default_factory=dict)  # repo -> downloaded copy
    others: tuple[ModelProfile, ...] = ()  # the model's other local formats (re-planning)
    decisions: list[ConstraintDecision] = field(default_factory=list)  # asked instead of ending
    waits: list[GateWait] = field(default_factory=list)  # each gate's wait, what ran meanwhile


@dataclass
class LadderRun:
    """What the driver ran: every attempt in order (the report's trials), and the candidates
    the climb pruned ("label: why")."""

    trials: list[Trial] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)


def control_values(run: LadderRun) -> tuple[list[float], bool]:
    """The control's measurements, and whether the baseline's stood in for them."""
    own = [t.objective_value for t in run.trials if t.role == "control"
           and t.objective_value is not None]
    if any(t.role == "control" for t in run.trials):
        return own, False
    return [t.objective_value for t in run.trials if t.role == "baseline"
            and t.objective_value is not None], True


@dataclass
class EngineTuning:
    """One engine's tuning: what it ran, and the ladder's result."""

    engine: EngineName
    model: ModelProfile
    version: str
    digest: str
    control: AnyServingConfig
    baseline: AnyServingConfig
    ref_key: str | None  # the quality reference's key; None: no gate ran
    quality_note: str
    run: LadderRun
    ladder: LadderOutcome
    history: list[Incumbent]
    # What the run recommends of this engine: the ladder's winner, or the control when nothing
    # beat it (infopt.tuning.final.recommend).
    chosen: Incumbent
    # The engine's run context, as its trials had it (the winner's confirmation reads it).
    engine_run: EngineRun
    applied: ContractRemedy | None = None
    first_gaps: list[ContractGap] = field(default_factory=list)
    superseded: list[Trial] = field(default_factory=list)
    weight_notes: list[str] = field(default_factory=list)
    weight_answers: list[GateAnswer] = field(default_factory=list)  # quantize and download gates
    gate_waits: list[GateWait] = field(default_factory=list)  # those gates' waits for a person
    context_tokens: int | None = None  # served when shorter than native (StartShape)
    # What the quality gate judged against: "served" (the checkpoint's own weights: quality
    # relative to them only), why a higher-precision reference, or None (no reference built).
    quality_against: str | None = None

    @property
    def served_context_tokens(self) -> int:
        return self.context_tokens or self.model.native_context_tokens

    @property
    def base_trial(self) -> Trial:
        return self.history[0].trials[0]

    @property
    def trials(self) -> list[Trial]:
        return self.superseded + self.run.trials


@dataclass(frozen=True)
class Finish:
    """The winner as the run recommends it, with what was measured of it after the ladder."""

    decision: Decision
    kernels: KernelPath
    exposure: ExposureOutcome | None
    expose_answers: list[GateAnswer]
    gain: ControlGain
