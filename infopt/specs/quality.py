"""The quality gate as data: a reference's greedy continuations of a fixed prompt set, each
candidate's teacher-forced scores of those tokens, the fidelity measures with their sample
counts and intervals, and the verdict against the noise floor (infopt.quality)."""

from __future__ import annotations

from pydantic import Field

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


class QualityVerdict(Spec):
    passed: bool
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
