"""The tuning ladder as data: the performance dimensions in the specification's order, the
candidates each adapter derives for this machine, model and workload (each saying why it is
tried), what became of each, and the Pareto set over every measured configuration."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from .base import Spec
from .comparison import Comparison
from .fit import LayoutFamily
from .paired import FinalDecision, RoundsDecision
from .serving import KnobValue


class Dimension(StrEnum):
    """Step 5 of the specification's loop, in its order: one dimension changed at a time."""

    WEIGHTS = "weights"  # weight format and the kernel path it selects
    KV_PRECISION = "kv_precision"
    SCHEDULING = "scheduling"  # running-request caps, batched tokens, CPU threads
    PREFILL = "prefill"  # chunked prefill, batch / micro-batch, flash attention
    COMPILATION = "compilation"  # graph capture / torch.compile vs eager
    PREFIX_CACHING = "prefix_caching"
    PARALLEL_LAYOUT = "parallel_layout"  # TP -> PP -> DP -> EP
    SPECULATIVE = "speculative"  # speculative decoding: drafter and draft length
    KV_TIER = "kv_tier"  # host-RAM / SSD tiers for reused KV prefixes (kv_prefix_budget)
    USER = "user"  # the request's own knob and values (`tune`) instead of the ladder


LADDER_ORDER: tuple[Dimension, ...] = tuple(d for d in Dimension if d is not Dimension.USER)


class LadderCandidate(Spec):
    """One change to the incumbent: the knobs it sets and why this value is worth a launch."""

    dimension: Dimension
    # A trial-id fragment: "parallel_slots=4", "weights=Q8_0", "kv=q8_0".
    label: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")
    changes: dict[str, KnobValue]
    why: str
    # Candidates of one ordered series (slots 2, 4, 8): climbing stops at the first value that
    # measures no better than the one before it.
    series: str | None = None
    # A parallel layout's family (TP, PP, DP, EP): the climb runs one step per family, in that
    # order, each from the incumbent the families before it left (infopt.specs.fit).
    family: LayoutFamily | None = None


CandidateStatus = Literal[
    "accepted",  # beat the incumbent beyond the noise, every gate passed: carried forward
    "within noise",  # confirmed with repeats, but the interval did not clear the noise
    "worse",  # its screening measurement was no better than the incumbent's median
    "gate",  # rejected by the API contract or the quality gate (the trial says which)
    "undecided",  # the quality gate could not decide within its prompt budget: not accepted
    "failed",  # the engine did not start or died (diagnosis in the trial)
    "pruned",  # not run: this machine cannot run it, or it does not fit (why in `reason`)
    "not run",  # a stop rule or the budget ended the step first, or (screened once) a
    # candidate that screened better was accepted before its confirmation
]


class CandidateResult(Spec):
    candidate: LadderCandidate
    status: CandidateStatus
    reason: str
    trial_ids: list[str] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)  # the objective, one per measured trial
    median: float | None = None
    comparison: Comparison | None = None  # incumbent (a) vs candidate (b), unpaired (legacy)
    # The paired rounds' decision (incumbent a, candidate b), when it was confirmed, and the
    # incumbent's windows paired with `values`.
    rounds: RoundsDecision | None = None
    incumbent_values: list[float] = Field(default_factory=list)
    # Rounds set aside as outliers of the log ratio (infopt.tuning.pairs), "ids: values".
    set_aside: list[str] = Field(default_factory=list)


class LadderStep(Spec):
    dimension: Dimension
    incumbent: str  # the incumbent's label entering the step ("baseline" or the last change)
    incumbent_values: list[float] = Field(default_factory=list)
    candidates: list[CandidateResult] = Field(default_factory=list)
    family: LayoutFamily | None = None  # the layout family this step climbed, if any
    skipped: str | None = None  # why the step tried nothing
    accepted: str | None = None  # the accepted candidate's label, carried into the next step
    # The quality gate's verdict on the accepted change (every trial is gated; this is the
    # re-check after an accepted change, named in the report).
    quality_recheck: str | None = None


class LadderOutcome(Spec):
    objective: str
    higher_is_better: bool
    rule: str  # the acceptance rule, in words
    steps: list[LadderStep]
    accepted: list[str]  # labels, in the order they were carried forward
    winner_label: str  # "baseline" or "baseline + a + b"
    stopped: str | None = None  # a budget or stop rule that ended the ladder early
    launches: int  # trials the ladder made (resumed trials count as made)
    # The noise one paired round carried at the start (sd of log(baseline/control)), and the
    # measured requests per window it sized (None: the workload's own count).
    noise_sd_log: float | None = None
    window_requests: int | None = None
    window_why: str | None = None
    # A screen's one-round ratio below which a candidate is not confirmed (ratio - 1; from the
    # noise and min_gain: infopt.tuning.rounds.promising); None: the noise was not measured.
    screen_drops_below: float | None = None
    decision: FinalDecision | None = None  # the winner against the control, and the pick


class ParetoPoint(Spec):
    """One measured configuration on the axes the specification keeps: throughput, latency,
    memory and quality, each at the workload's target level."""

    label: str
    trial_ids: list[str]
    output_tokens_per_s: float | None  # median over its trials
    ttft_p50_s: float | None
    itl_p50_s: float | None
    # On a GPU host the engine's GPU memory (NVML, its process group, summed over devices);
    # elsewhere its peak host resident set. Measured; None when not read.
    memory_bytes: int | None
    memory_kind: Literal["gpu", "host_rss"] = "host_rss"
    top1_agreement: float | None  # the quality gate's token fidelity vs the reference
    on_front: bool  # no other point is at least as good on every axis and better on one
    dominated_by: str | None = None


class CeilingPick(Spec):
    """The configuration whose decode rate came closest to its ceiling, at one workload level
    and one envelope, beside the objective winner's ratio at the same level and envelope."""

    level: int  # concurrency
    envelope: str
    label: str
    ratio: float
    winner_label: str
    winner_ratio: float | None


class EngineResult(Spec):
    """One engine's tuning in a run: the routed engine, or its comparator."""

    engine: str
    engine_version: str | None = None
    role: Literal["routed", "comparator"]
    reason: str  # why it was tuned (the routing rule, or request.engines)
    model_path: str
    model_format: str
    control_median: float | None = None
    winner_label: str | None = None
    winner_median: float | None = None
    winner_values: list[float] = Field(default_factory=list)
    launches: int = 0
    ladder: LadderOutcome | None = None
    failed: str | None = None  # why it produced no result
    # Whether its recommended configuration meets the SLOs at the target load (None: the
    # workload states none): one that does not cannot be the engines' choice while one does.
    slos_met: bool | None = None


class EngineChoice(Spec):
    """Which engine's winner the run recommends: the routed engine unless the comparator's
    winner beats it beyond the noise (the routing rule is a hypothesis, measured)."""

    results: list[EngineResult]
    chosen: str
    comparison: Comparison | None = None  # routed winner (a) vs comparator winner (b)
    reason: str


class ClimbProgress(Spec):
    """Where a run is, for a person following it: the trial about to start (1-based) of the
    planned total (trials made + an estimate of those left, which grows when a close call
    earns rounds), what it measures, and the time so far and left (an estimate from the mean
    trial time so far)."""

    trial: int
    planned: int
    phase: str  # "start", a dimension (and layout family), or "decision"
    label: str  # the configuration the trial measures
    elapsed_s: float
    eta_s: float | None  # None before the first trial ended

    def line(self) -> str:
        eta = "?" if self.eta_s is None else f"~{self.eta_s / 60:.1f} min"
        return (f"trial {self.trial} of ~{self.planned} [{self.phase}] {self.label}: "
                f"{self.elapsed_s / 60:.1f} min so far, {eta} left (estimate)")
