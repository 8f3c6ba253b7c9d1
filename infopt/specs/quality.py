"""The quality gate as data: a reference's greedy continuations of a fixed prompt set, each
candidate's teacher-forced scores of those tokens, the fidelity measures with their sample
counts and intervals, and the verdict against the noise floor (infopt.quality)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Spec


class TokenLogprob(Spec):
    token_id: int
    logprob: float  # natural log of the probability, <= 0


class PositionScore(Spec):
    """What a server says about one position of a teacher-forced sequence: the log-probability
    of the token it was given there (exact, not sampled) and its own top-k at that position."""

    token_id: int  # the token teacher-forced at this position
    logprob: float
    top: list[TokenLogprob]  # descending, k entries


class ScoredSequence(Spec):
    prompt_name: str
    prompt_text: str
    prompt_ids: list[int]
    continuation: list[int]  # the reference's greedy tokens after the prompt
    # One per continuation token, scored by one server; None where the server cannot report
    # that position (llama-server: a token ending inside a UTF-8 character).
    positions: list[PositionScore | None]


class ReferenceSet(Spec):
    """The reference's greedy continuations scored by the reference itself."""

    endpoint: str
    top_k: int = Field(..., ge=1)
    sequences: list[ScoredSequence]
    self_agreement: float  # its own top-1 under teacher forcing vs its greedy tokens

    @property
    def positions(self) -> int:
        return sum(len(s.continuation) for s in self.sequences)


class Interval(Spec):
    low: float
    high: float
    confidence: float = 0.95
    method: str = "Wilson score (scipy.stats.binomtest)"


class FidelityResult(Spec):
    """A candidate's scores of the reference's tokens, against the reference's own."""

    endpoint: str
    prompts: int
    positions: int  # the sample count of every per-position measure below
    unscored_positions: int  # left out: one of the two servers could not report them
    top1_agreement: float  # candidate's argmax == the reference's greedy token
    top1_interval: Interval
    # Mean over positions of p_candidate(ref token) - p_reference(ref token), in probability.
    delta_p_mean: float
    delta_p_p05: float  # its 5th percentile: how badly the worst positions drop
    perplexity_ratio: float  # exp(mean NLL candidate - mean NLL reference) on the same tokens
    # KL(reference || candidate) on the distributions coarsened to the tokens both top-k lists
    # hold plus one bin for the rest: by the log-sum inequality a lower bound on the full KL.
    kl_lower_bound_mean_nats: float
    # Per prompt, the first position where the candidate's greedy choice differs from the
    # reference (None: none within the continuation): where free generation would diverge.
    first_divergence: list[int | None]


class TaskSetResult(Spec):
    """One generative task set on one server: exact-scored greedy answers."""

    set_name: str
    passed: int
    total: int
    interval: Interval  # of passed / total
    outcomes: list[bool]  # per item, in item order (the paired comparison needs them)
    answers: list[str]  # each answer's start, the evidence

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


class MeasureVerdict(Spec):
    measure: str  # e.g. "top1_agreement", "perplexity_ratio"
    value: float
    floor: float | None  # the reference against a restart of itself (None: not measured)
    threshold: float
    passed: bool
    why: str
    p_value: float | None = None  # a paired test's, where the measure has one
    # The interval straddles the threshold: neither a pass nor an established drop.
    undecided: bool = False


class PairedChange(Spec):
    """Question (a): did this change cost quality? The candidate against the incumbent it
    modifies, paired on the same prompts and positions: at each position both either reproduce
    the reference's token as their own top-1 or not; only the discordant positions carry
    information (McNemar). `drop` > 0: the candidate loses agreement the incumbent had."""

    incumbent_key: str  # the incumbent configuration's quality key (its scores file)
    prompts: int
    positions: int
    incumbent_only: int  # the incumbent reproduces the reference's token there, the candidate not
    candidate_only: int  # the reverse
    drop: float  # (incumbent_only - candidate_only) / positions, a fraction of positions
    drop_interval: Interval
    # The largest drop still called "unchanged": the floor's own disagreement, at least half the
    # tolerance (infopt.quality.sequential.change_margin says why).
    margin: float
    unchanged: bool  # the whole interval of the drop lies at or under the margin


class VerdictOrigin(Spec):
    """Which run and trial measured a verdict (one reused from the machine's cache names them)."""

    run_id: str
    trial_id: str
    made_at: str  # ISO 8601, UTC


Decision = Literal["pass", "fail", "undecided"]


class QualityVerdict(Spec):
    passed: bool
    # "undecided": the data could not tell, within the prompt budget, whether the candidate is
    # within tolerance; it is not accepted (and never reported as a pass).
    decision: Decision | None = None  # None in files written before the sequential gate
    # How the decision was reached: "lossless" (unchanged against the incumbent, question (a)),
    # "lossy" (changed or not shown unchanged: judged against the reference, question (b)),
    # "unpaired" (no incumbent scores: judged against the reference directly).
    change: Literal["lossless", "lossy", "unpaired"] | None = None
    paired: PairedChange | None = None
    looks: list[int] = Field(default_factory=list)  # prompts scored at each look, in order
    prompt_budget: int | None = None  # the most prompts the gate could add (the request's)
    made_by: VerdictOrigin | None = None
    # Set when this verdict was not measured by this run but recalled from the machine's cache.
    reused_from: VerdictOrigin | None = None
    # None: token fidelity was not measured (a server without exact scoring): `fidelity_note`
    # says why, and the task sets alone decide.
    candidate: FidelityResult | None
    floor: FidelityResult | None
    tolerance: float
    measures: list[MeasureVerdict]
    summary: str  # one line; names what regressed when it fails
    fidelity_note: str | None = None
    # The generative task sets, when run: the reference's results and the candidate's.
    reference_tasks: list[TaskSetResult] = Field(default_factory=list)
    candidate_tasks: list[TaskSetResult] = Field(default_factory=list)

    @model_validator(mode="after")
    def _decided(self) -> QualityVerdict:
        if self.decision is None:  # an older file: its pass/fail is all it recorded
            self.decision = "pass" if self.passed else "fail"
        elif self.passed != (self.decision == "pass"):
            raise ValueError(f"passed={self.passed} contradicts decision={self.decision!r}")
        return self


class LongContextReference(Spec):
    """The reference's continuations of prompts at half the served context or more
    (infopt.quality.long_context): what a change of KV precision or weights is checked on."""

    reference: ReferenceSet | None  # None: no window could be built (`unavailable` says why)
    served_context_tokens: int
    prompt_tokens: list[int]  # each window's prompt, in the reference's tokens
    # Why the windows are shorter than half the served context (the reference refused that
    # length), None when they are not.
    shortened: str | None = None
    unavailable: str | None = None
    # A fresh restart of the reference at another batch size scoring the same windows: what
    # noise alone moves at this length (near-ties flip more often far into a context), the
    # long check's floor as the short pool's is the short gate's. None until it is scored.
    floor: FidelityResult | None = None


class LongContextCheck(Spec):
    """A trial's long-context check: required because it changes KV precision or weights
    against the configuration it modifies, judged like the short gate against the reference."""

    reason: str  # the change that required it, e.g. "KV precision (cache_type_k f16 -> q4_0)"
    served_context_tokens: int
    prompt_tokens: list[int]  # the windows the reference scored (the verdict used a prefix)
    shortened: str | None = None
    verdict: QualityVerdict


class TaskSetOutcome(Spec):
    """The generative task sets in a run: the reference's results, the recommended
    configuration's on the same items, and each set's verdict. A value that won on speed but
    regressed here was excluded and the decision re-made without it (`excluded`)."""

    items_per_set: int
    reference: list[TaskSetResult]
    winner_trial_id: str
    winner: list[TaskSetResult]
    verdicts: list[MeasureVerdict]
    excluded: list[str] = Field(default_factory=list)  # "knob=value: why", in order

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)
