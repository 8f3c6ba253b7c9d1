"""Did a configuration get worse after an engine upgrade? Pure.

The trial (a fresh engine start) is the unit of replication: a configuration's objective over
its stored trials against its fresh trials. Two or three starts per side say little about the
spread, so the start-to-start relative standard deviation is pooled over every configuration
either run repeated (infopt.tuning.reproduce.pooled_relative_sd). The ratio of the medians gets
a Student-t interval on the log scale, SE = s_rel x sqrt(1/n_old + 1/n_new). The verdict, in
the way nightly performance dashboards flag ratio bounds rather than any drop:
- regression: the whole interval lies under `bound` (confidently worse by more than 1-bound);
- improvement: the whole interval lies over 1/bound;
- no change: otherwise (a drop inside the noise, or smaller than the bound, is not flagged).
A regression is only called confirmed when consecutive rounds of fresh starts all flag it
(ReoptimizeRequest.confirm_rounds)."""

from __future__ import annotations

import math
import statistics

from infopt.specs.reoptimize import (
    Outcome,
    RegressionCheck,
    RegressionVerdict,
    ReoptimizeRound,
)
from infopt.tuning.reproduce import pooled_relative_sd


def judge(label: str, stored: list[float], fresh: list[float], groups: list[list[float]], *,
          higher_is_better: bool, bound: float, confidence: float) -> RegressionCheck:
    """`groups`: every repeated configuration's objective values, of both runs (the spread)."""
    from scipy.stats import t as student_t  # 1.7 s import: only when a check is made

    if len(stored) < 1 or len(fresh) < 1:
        raise ValueError(f"{label}: no measured objective on one side")
    old, new = statistics.median(stored), statistics.median(fresh)
    ratio = new / old if higher_is_better else old / new
    s_rel, dof = pooled_relative_sd(groups)
    if dof == 0:
        raise ValueError("no configuration was repeated: the noise cannot be stated")
    t = float(student_t.ppf(0.5 + confidence / 2, dof))
    half = t * s_rel * math.sqrt(1 / len(stored) + 1 / len(fresh))
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    verdict: RegressionVerdict = ("regression" if high < bound else
                                  "improvement" if low > 1 / bound else "no change")
    rule = (f"ratio of medians {ratio:.3f} ({'new/old' if higher_is_better else 'old/new'}), "
            f"{confidence:.0%} interval [{low:.3f}, {high:.3f}] = ratio x exp(+/- t({dof} dof) "
            f"x {s_rel:.1%} x sqrt(1/{len(stored)} + 1/{len(fresh)})); a regression needs the "
            f"interval under {bound:g}, an improvement over {1 / bound:.3f}")
    return RegressionCheck(label=label, stored=stored, fresh=fresh, ratio=ratio, ratio_low=low,
                           ratio_high=high, relative_sd=s_rel, dof=dof, verdict=verdict,
                           rule=rule)


def outcome(rounds: list[ReoptimizeRound], confirm_rounds: int) -> Outcome:
    """"regression" when the last `confirm_rounds` rounds all flagged one; "suspected
    regression" when some but not enough did; else the last round's best verdict."""
    flagged = 0
    for r in reversed(rounds):
        if not r.regressed:
            break
        flagged += 1
    if flagged >= confirm_rounds:
        return "regression"
    if flagged:
        return "suspected regression"
    last = rounds[-1].checks
    return "improvement" if any(c.verdict == "improvement" for c in last) else "no change"


def needs_another_round(rounds: list[ReoptimizeRound], confirm_rounds: int) -> bool:
    """A flagged round is re-measured until `confirm_rounds` in a row agree; a clean round ends
    the run (so an unchanged engine costs one round)."""
    return bool(rounds) and rounds[-1].regressed and len(rounds) < confirm_rounds
