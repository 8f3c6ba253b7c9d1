"""The paired rounds of one comparison as the climb (infopt.tuning.climb) collects them, and
what a candidate's record says once they are decided (infopt.tuning.rounds)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from infopt.specs.ladder import CandidateResult, CandidateStatus, LadderCandidate
from infopt.specs.paired import RoundsDecision
from infopt.specs.results import Trial
from infopt.tuning import decide

# A round whose log ratio lies beyond this many scaled median absolute deviations of the
# others' is set aside (kept in the record, left out of the test) and measured again: one
# window disturbed by something outside the comparison (a hiccup of the shared machine; seen
# in make demo: one baseline window at 65 tok/s among its 100-115) would otherwise widen a
# t interval that 7 clean rounds had decided. Symmetric in the ratio, so it favours neither
# side; at most one round in four is set aside; from 4 rounds on.
OUTLIER_MADS = 5.0
MIN_MAD_LOG = 0.01  # a floor on the scale: rounds that agree to 1% set nothing aside


def outlier_round(d: list[float]) -> int | None:
    """The index of the round (log ratios `d`) farthest beyond OUTLIER_MADS scaled MADs of the
    others' median, or None."""
    if len(d) < 4:
        return None
    worst, far = None, 0.0
    for i, x in enumerate(d):
        others = d[:i] + d[i + 1:]
        m = statistics.median(others)
        mad = max(MIN_MAD_LOG, 1.4826 * statistics.median(abs(y - m) for y in others))
        z = abs(x - m) / mad
        if z > OUTLIER_MADS and z > far:
            worst, far = i, z
    return worst


@dataclass
class Pairs:
    """The paired rounds of one comparison: the incumbent's (a) and the candidate's (b) trials,
    round by round; their objective values and secondary measures (a measure counts when every
    kept round has it on both sides); the rounds set aside as outliers; every trial id made."""

    rounds: list[tuple[Trial, Trial]] = field(default_factory=list)  # (incumbent, candidate)
    aside: list[tuple[Trial, Trial]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    @property
    def a(self) -> list[float]:
        return [_value(i) for i, _ in self.rounds]

    @property
    def b(self) -> list[float]:
        return [_value(c) for _, c in self.rounds]

    @property
    def b_trials(self) -> list[Trial]:
        return [c for _, c in self.rounds + self.aside]

    def sec(self, side: str) -> dict[str, list[float]]:
        k = 0 if side == "a" else 1
        if not self.rounds:
            return {}
        common = set.intersection(*(set(i.measures) & set(c.measures) for i, c in self.rounds))
        return {m: [r[k].measures[m] for r in self.rounds] for m in sorted(common)}

    def add(self, inc: Trial, cand: Trial) -> None:
        """A measured round; then the worst outlier round, if any, set aside (at most one in
        four of all rounds)."""
        assert inc.objective_value is not None and cand.objective_value is not None
        self.rounds.append((inc, cand))
        if len(self.aside) + 1 > (len(self.rounds) + len(self.aside)) // 4:
            return
        d = [math.log(b / a) for a, b in zip(self.a, self.b, strict=True)]
        i = outlier_round(d)
        if i is not None:
            self.aside.append(self.rounds.pop(i))

    def screen_log(self, higher: bool) -> float:
        """The first round's log ratio on the better scale (above 0: the candidate did
        better)."""
        a, b = self.a[0], self.b[0]
        d = math.log(b / a) if a > 0 and b > 0 else -math.inf
        return d if higher else -d

    def first_sec(self, side: str) -> dict[str, float]:
        return {m: v[0] for m, v in self.sec(side).items() if v}


def _value(t: Trial) -> float:
    assert t.objective_value is not None  # only measured rounds are added
    return t.objective_value


def result_of(c: LadderCandidate, pairs: Pairs) -> CandidateResult:
    return CandidateResult(candidate=c, status="worse", reason="", median=decide.median(pairs.b),
                           trial_ids=list(pairs.ids), values=list(pairs.b),
                           incumbent_values=list(pairs.a))


_STATUS: dict[str, CandidateStatus] = {
    "gain": "accepted", "tie_break": "accepted", "worse": "worse", "no_gain": "within noise",
    "tie_lost": "within noise", "undecided": "undecided"}


def fill(result: CandidateResult, pairs: Pairs, decision: RoundsDecision | None,
          failed: str | None) -> None:
    result.values, result.incumbent_values = list(pairs.b), list(pairs.a)
    result.trial_ids, result.median = list(pairs.ids), decide.median(pairs.b)
    result.rounds = decision
    result.set_aside = [f"{i.trial_id} / {c.trial_id}: {c.objective_value:.4g} vs "
                        f"{i.objective_value:.4g}" for i, c in pairs.aside]
    if failed is not None:
        result.status, result.reason = "failed", failed
    elif decision is None:
        result.status, result.reason = "not run", "the budget ended its rounds first"
    else:
        result.status, result.reason = _STATUS[decision.state], decision.why
