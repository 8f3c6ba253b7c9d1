"""Sequential decisions on paired rounds, pure: after each round from `min_rounds` on, the
candidate (b) and its incumbent (a) are compared on the objective and, where the objective
cannot separate them, on the secondary measures in order; rounds are added until one of these
holds or `max_rounds` is reached:

- gain: the objective's interval clears 1 + min_gain on the better side;
- worse: it lies wholly on the worse side of 1;
- tie_break / tie_lost: the objective is not worse beyond the equivalence margin (its interval's
  worse end within it) and the first secondary measure that decides says better / worse;
- no_gain: a gain beyond the margin is excluded (the interval's better end is within it), or
  out of reach: the observed gain is under half what `max_rounds` rounds could detect at the
  spread seen (futility: only ever lowers the chance of a false accept);
- undecided: the last round came first, said with the difference these rounds could detect.

Error control across looks and measures: every interval is taken at 1 - alpha / (looks x
measures) (Bonferroni), so the chance that the whole sequence calls any difference where there
is none stays within alpha = 5%, however many rounds are added. The equivalence margin (5%) is
this rule's judgement call: below it two configurations count as tied and the secondary
measures (TTFT, then ITL, for a throughput objective) order them, so a configuration that
queues requests behind one slot does not win a tie on throughput with twice the TTFT."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import t as student_t

from infopt.analysis.paired import POWER, better_ratio, paired_compare
from infopt.specs.paired import (
    HIGHER_IS_BETTER_MEASURE,
    DecisionState,
    MeasureName,
    PairedComparison,
    RoundsDecision,
)

FAMILY_ALPHA = 0.05
EQUIVALENCE = 0.05
# Secondary measures by objective, in the order they break ties (a throughput tie goes to the
# one that answers first, then streams faster).
SECONDARY: dict[str, tuple[MeasureName, ...]] = {
    "throughput": ("ttft_p50_s", "itl_p50_s"),
    "goodput": ("ttft_p50_s", "output_tokens_per_s"),
    "latency": ("ttft_p50_s", "output_tokens_per_s"),
}
# Screening: a one-round ratio this many noise standard deviations below the margin still
# earns a confirmation (one round of a real 20% gain lands low often on a noisy machine).
SCREEN_SLACK_SD = 1.0
DEFAULT_NOISE_SD_LOG = 0.1  # before the run has measured its own (about +-10% per round)
# Futility needs a spread it can trust: three rounds' standard deviation (2 degrees of freedom)
# swings by a factor of several, so the earliest futility stop is after the fourth round.
FUTILITY_FROM = 3


@dataclass(frozen=True)
class RoundsPolicy:
    objective: str
    higher: bool
    min_rounds: int
    max_rounds: int
    min_gain: float = 0.0
    equivalence: float = EQUIVALENCE
    family_alpha: float = FAMILY_ALPHA

    def __post_init__(self) -> None:
        if self.min_rounds < 2 or self.max_rounds < self.min_rounds:
            raise ValueError(f"rounds: need 2 <= min_rounds ({self.min_rounds}) <= "
                             f"max_rounds ({self.max_rounds})")

    @property
    def secondary(self) -> tuple[MeasureName, ...]:
        return SECONDARY.get(self.objective, ())

    @property
    def looks(self) -> int:
        return self.max_rounds - self.min_rounds + 1

    @property
    def look_confidence(self) -> float:
        return 1 - self.family_alpha / (self.looks * (1 + len(self.secondary)))

    def text(self) -> str:
        return (f"paired rounds (candidate and incumbent measured back to back, alternating "
                f"which goes first), {self.min_rounds} to {self.max_rounds} per comparison, "
                f"decided on Student's t of the per-round log ratio at {self.look_confidence:.2%}"
                f" per look and measure ({self.family_alpha:.0%} for the whole sequence, "
                f"Bonferroni); ties within +-{self.equivalence:.0%} ordered by "
                + (", then ".join(pretty_measure(m) for m in self.secondary) or "nothing"))


def pretty_measure(measure: str) -> str:
    """A measure's name as the report writes it."""
    return {"ttft_p50_s": "TTFT p50", "itl_p50_s": "ITL p50", "tpot_p50_s": "TPOT p50",
            "output_tokens_per_s": "output tokens/s",
            "goodput_requests_per_s": "goodput"}.get(measure, measure)


def compare(a: Sequence[float], b: Sequence[float], policy: RoundsPolicy, measure: str,
            higher: bool) -> PairedComparison:
    return paired_compare(a, b, higher_is_better=higher, confidence=policy.look_confidence,
                          min_gain=policy.min_gain, equivalence=policy.equivalence,
                          measure=measure)


def decide(a: Sequence[float], b: Sequence[float],
           a_sec: dict[str, list[float]], b_sec: dict[str, list[float]],
           policy: RoundsPolicy, *, last: bool = False) -> RoundsDecision | None:
    """The decision after these rounds, or None when another round is needed. `last`: no more
    rounds can be had (the budget): an open question becomes `undecided`."""
    n = len(a)
    if n < policy.min_rounds and not (last and n >= 2):
        return None
    obj = compare(a, b, policy, policy.objective, policy.higher)
    last = last or n >= policy.max_rounds
    sec = _secondary(a_sec, b_sec, policy, n)

    def done(state: DecisionState, why: str) -> RoundsDecision:
        return RoundsDecision(state=state, objective=obj, secondary=sec, rounds=n,
                              max_rounds=policy.max_rounds, why=why)

    ratio, low, high = better_ratio(obj)
    span = _span(obj, n)
    if obj.verdict == "b_better":
        return done("gain", f"better: {span}")
    if obj.verdict == "a_better":
        return done("worse", f"worse: {span}")
    if low >= 1 - policy.equivalence:  # not worse beyond the margin: a tie the others order
        for s in sec:
            if s.verdict in ("b_better", "a_better"):
                detail = (f"{pretty_measure(policy.objective)} tied within +-"
                          f"{policy.equivalence:.0%} ({span}); {pretty_measure(s.measure)} "
                          f"{_span(s, n)}")
                return (done("tie_break", f"tie broken by {pretty_measure(s.measure)}: {detail}")
                        if s.verdict == "b_better" else
                        done("tie_lost", f"tie lost on {pretty_measure(s.measure)}: {detail}"))
    # A secondary measure may still break a tie: the objective is not pointing worse beyond
    # the margin and a secondary points better beyond it.
    tie_hope = ratio >= 1 - policy.equivalence and any(
        better_ratio(s)[0] > 1 + policy.equivalence for s in sec if s.verdict != "a_better")
    margin = max(policy.min_gain, policy.equivalence)
    if high <= 1 + margin and not tie_hope:
        return done("no_gain", f"no gain beyond {margin:.0%}: {span}")
    reach = reachable(obj, policy)
    if not tie_hope and n > FUTILITY_FROM and \
            math.log(ratio) - math.log1p(policy.min_gain) < reach / 2:
        return done("no_gain", f"no gain in reach: {span}, under half the "
                               f"{math.expm1(reach):.0%} that {policy.max_rounds} rounds could "
                               "detect at this spread (futility)")
    if last:
        return done("undecided", f"undecided after {n} paired rounds: {span}; these rounds "
                                 f"could have detected {detectable_text(obj)}")
    return None


def reachable(c: PairedComparison, policy: RoundsPolicy) -> float:
    """The log difference `max_rounds` rounds would detect with 80% power at this spread and
    the per-look confidence. Futility stops a comparison whose observed gain is under half of
    it: its chance of deciding by the last round is small, and stopping a sequence early only
    ever lowers the chance of a false accept."""
    m = policy.max_rounds
    t_crit = float(student_t.ppf(0.5 + policy.look_confidence / 2, m - 1))
    t_pow = float(student_t.ppf(POWER, m - 1))
    return (t_crit + t_pow) * (c.sd_log or 0.0) / math.sqrt(m)


def detectable_text(c: PairedComparison) -> str:
    return ("no difference (fewer than 2 rounds)" if c.detectable is None else
            f"a difference of {c.detectable:.0%} (80% power at this run's spread)")


def _secondary(a_sec: dict[str, list[float]], b_sec: dict[str, list[float]],
               policy: RoundsPolicy, n: int) -> list[PairedComparison]:
    out = []
    for m in policy.secondary:
        a, b = a_sec.get(m, []), b_sec.get(m, [])
        if len(a) == n and len(b) == n and all(v > 0 for v in (*a, *b)):
            out.append(compare(a, b, policy, m, HIGHER_IS_BETTER_MEASURE[m]))
    return out


def _pct(ratio: float) -> str:
    return f"{ratio - 1:+.1%}"


def _span(c: PairedComparison, n: int) -> str:
    """b against a as measured (a latency that halves reads -50%), with its interval."""
    return (f"{_pct(c.ratio)} [{_pct(c.ratio_low)}, {_pct(c.ratio_high)}] over {n} paired "
            "rounds")


def promising(a1: float, b1: float, a_sec: dict[str, float], b_sec: dict[str, float],
              policy: RoundsPolicy, noise_sd_log: float | None) -> bool:
    """Worth confirming from one paired round: the candidate's ratio on the objective is within
    SCREEN_SLACK_SD noise deviations of the margin, or it is not clearly worse and its first
    secondary measure is better by more than the noise."""
    sd = noise_sd_log if noise_sd_log is not None else DEFAULT_NOISE_SD_LOG
    d = _better_log(a1, b1, policy.higher)
    if d > math.log1p(policy.min_gain) - SCREEN_SLACK_SD * sd:
        return True
    if d > math.log1p(-policy.equivalence) - SCREEN_SLACK_SD * sd and policy.secondary:
        m = policy.secondary[0]
        if m in a_sec and m in b_sec:
            return _better_log(a_sec[m], b_sec[m], HIGHER_IS_BETTER_MEASURE[m]) > sd
    return False


def screen_threshold(policy: RoundsPolicy, noise_sd_log: float | None) -> float | None:
    """The one-round ratio (minus 1, on the better scale) below which `promising` drops a
    candidate on the objective alone; None before the noise is measured."""
    if noise_sd_log is None:
        return None
    return math.expm1(math.log1p(policy.min_gain) - SCREEN_SLACK_SD * noise_sd_log)


def _better_log(a: float, b: float, higher: bool) -> float:
    if a <= 0 or b <= 0:
        return -math.inf
    d = math.log(b / a)
    return d if higher else -d
