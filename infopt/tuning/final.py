"""The run's last word, pure: did the control (the engine's defaults) move between the start and
the end of the run (drift), and what does the run recommend given the paired comparison of the
ladder's winner with the control and whether the control meets the hard requirements."""

from __future__ import annotations

import math
import statistics

import numpy as np

from infopt.analysis.compare import welch_interval
from infopt.analysis.paired import better_ratio
from infopt.specs.paired import DriftCheck, FinalDecision, RecommendedConfig, RoundsDecision

# A control that moved by less than this between the start and the end of a run is not called
# drift even when the interval excludes no change: a 5% shift is within what these verdicts'
# equivalence margin already absorbs (infopt.tuning.rounds.EQUIVALENCE), and twice that is a
# machine that changed under the run. A judgement call, stated in the report.
DRIFT_MIN_CHANGE = 0.10
DRIFT_CONFIDENCE = 0.99


def drift_check(start: list[float], end: list[float]) -> DriftCheck | None:
    """The control's windows at the end against those at the start: Welch's t on the log values
    (each side at least 2 windows); None when either side has fewer."""
    a = [v for v in start if v > 0]
    b = [v for v in end if v > 0]
    if len(a) < 2 or len(b) < 2:
        return None
    low, high = welch_interval(np.log(a), np.log(b), DRIFT_CONFIDENCE)
    change = statistics.median(b) / statistics.median(a) - 1
    outside = low > 0 or high < 0
    moved = outside and abs(change) >= DRIFT_MIN_CHANGE
    why = (f"the control measured {change:+.0%} at the end of the run against its start "
           f"(median of {len(b)} vs {len(a)} windows; {DRIFT_CONFIDENCE:.0%} interval "
           f"[{math.expm1(low):+.0%}, {math.expm1(high):+.0%}])")
    why += (": the machine changed under the run; verdicts that compared windows far apart "
            "are suspect" if moved else ": no drift beyond the noise"
            + (f" and {DRIFT_MIN_CHANGE:.0%}" if outside else ""))
    return DriftCheck(start_values=list(start), end_values=list(end), change=change,
                      ratio_low=math.exp(low), ratio_high=math.exp(high),
                      confidence=DRIFT_CONFIDENCE, moved=moved, why=why)


def recommend(winner_label: str, rounds: RoundsDecision | None,
              reconfirmed: RoundsDecision | None, control_ineligible: str | None,
              drift: DriftCheck | None, not_compared: str | None = None) -> FinalDecision:
    """The winner when it beats the control (the later of the two comparisons decides when
    drift made the run compare again) or when the control fails a hard requirement; else the
    control, the engine's defaults."""
    rec: RecommendedConfig
    last = reconfirmed or rounds
    said = (last.why if last is not None else
            f"not compared ({not_compared or 'no paired round measured both'})")
    good = None
    if last is not None:
        low = better_ratio(last.objective)[1]
        good = low >= 1 - last.objective.equivalence
        said += ("; the winner is at least as good as the defaults (the worse end of the "
                 f"interval within {last.objective.equivalence:.0%})" if good else
                 "; the winner is not shown at least as good as the defaults")
    if last is not None and last.b_wins:
        rec, why = "winner", f"the winner beats the engine's defaults: {said}"
    elif control_ineligible is not None:
        rec, why = "winner", (f"the engine's defaults fail a hard requirement "
                              f"({control_ineligible}), so the winner, the eligible "
                              f"configuration the ladder kept, is recommended: {said}")
    else:
        rec, why = "control", (f"nothing beat the engine's defaults beyond the noise ({said}); "
                               "the defaults meet every requirement: run them")
    return FinalDecision(recommended=rec, winner_label=winner_label, rounds=rounds,
                         reconfirmed=reconfirmed, control_ineligible=control_ineligible,
                         drift=drift, at_least_as_good=good, why=why)
