"""Paired comparisons as data: a candidate (b) and its incumbent (a) measured in alternating
windows, one pair per round, judged on the per-round ratios (infopt.analysis.paired), and the
sequential decision a run of such rounds reaches (infopt.tuning.rounds)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Spec

# What a trial measured at the workload's target level, beside its objective; the names carry
# their unit. The secondary measures break ties on the objective (infopt.tuning.rounds).
MeasureName = Literal["output_tokens_per_s", "ttft_p50_s", "itl_p50_s", "tpot_p50_s",
                      "goodput_requests_per_s"]
HIGHER_IS_BETTER_MEASURE: dict[str, bool] = {
    "output_tokens_per_s": True, "goodput_requests_per_s": True,
    "ttft_p50_s": False, "itl_p50_s": False, "tpot_p50_s": False}

PairedVerdict = Literal["b_better", "a_better", "equivalent", "undecided"]


class PairedComparison(Spec):
    """b against a on one measure over paired rounds: the interval is Student's t on the mean
    log ratio b/a of the rounds (a ratio, so a machine that drifts 2x slows both alike), taken
    at `confidence` (a look of a sequence: the family's level shared out, Bonferroni)."""

    measure: str
    higher_is_better: bool
    rounds: int
    a_median: float
    b_median: float
    ratio: float  # geometric mean of b/a over the rounds
    ratio_low: float  # the interval of that ratio
    ratio_high: float
    confidence: float
    verdict: PairedVerdict
    # `equivalent`: the whole interval lies within +-equivalence of 1 (a tie shown, not assumed)
    equivalence: float
    min_gain: float  # the margin a "better" verdict had to clear, relative
    # The smallest relative difference these rounds would have shown at this confidence with
    # 80% power, from their own spread; None below 2 rounds.
    detectable: float | None = None
    sd_log: float | None = None  # the rounds' standard deviation of log(b/a)


DecisionState = Literal["gain", "tie_break", "worse", "no_gain", "tie_lost", "undecided"]


class RoundsDecision(Spec):
    """What a sequence of paired rounds decided: `gain` (b beats a on the objective), `tie_break`
    (b is not worse on the objective beyond the equivalence margin and better on the first
    secondary measure that decides), `worse`, `no_gain` (a gain above the margin is excluded),
    `tie_lost` (tied on the objective, worse on the first secondary that decides), or
    `undecided` after the last round the budget allowed."""

    state: DecisionState
    objective: PairedComparison
    secondary: list[PairedComparison] = Field(default_factory=list)
    rounds: int
    max_rounds: int
    why: str

    @property
    def b_wins(self) -> bool:
        return self.state in ("gain", "tie_break")


class DriftCheck(Spec):
    """The control measured at the start of the run against the control measured at its end
    (both beside other configurations): a machine that got faster or slower in between makes
    every verdict that compared windows far apart suspect. Paired verdicts cancel drift; this
    says whether there was any."""

    start_values: list[float]
    end_values: list[float]
    change: float  # end median / start median - 1
    ratio_low: float  # the interval of end / start (Welch's t on the log values)
    ratio_high: float
    confidence: float
    moved: bool  # beyond the noise (the interval excludes 1) and beyond DRIFT_MIN_CHANGE
    why: str


RecommendedConfig = Literal["winner", "control"]


class FinalDecision(Spec):
    """The ladder's winner against the engine's defaults in paired rounds, and what the run
    recommends: the winner only when it beats the defaults (on the objective, or tied on it and
    better on the secondary measures) or when the defaults fail a hard requirement; else the
    defaults, said plainly."""

    recommended: RecommendedConfig
    winner_label: str  # the ladder's winner ("baseline + ...")
    rounds: RoundsDecision | None = None  # control (a) vs winner (b); None: not compared
    # After drift: the same comparison again, afresh; the recommendation follows it.
    reconfirmed: RoundsDecision | None = None
    control_ineligible: str | None = None  # the hard requirement the defaults fail
    drift: DriftCheck | None = None
    # The winner shown at least as good as the defaults: the worse end of its objective's
    # interval within the equivalence margin (None: not compared).
    at_least_as_good: bool | None = None
    # The SLOs at the target load (infopt.tuning.slo_gate): whether the recommended
    # configuration meets them beyond the sampling noise (None: the workload states none), and
    # when it does not, the SLO that binds hardest, by how much, at which load.
    slos_met: bool | None = None
    slo_binding: str | None = None
    why: str
