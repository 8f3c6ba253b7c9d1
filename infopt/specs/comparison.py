"""The verdict of a noise-aware comparison of two samples (see infopt.analysis.compare)."""

from __future__ import annotations

from typing import Literal

from .base import Spec

Verdict = Literal["b_better", "a_better", "no_difference"]


class Comparison(Spec):
    stat: str
    a_value: float  # the statistic on sample a (the baseline)
    b_value: float
    diff: float  # b_value - a_value
    rel_diff: float | None  # diff / |a_value|; None when a_value is 0
    ci: float  # confidence level of [ci_low, ci_high], e.g. 0.95
    # The interval of the difference b - a: the percentile bootstrap's; with fewer than
    # MIN_SAMPLES_FOR_BOOTSTRAP on a side, widened to also cover Welch's t interval of the
    # difference of means (`interval`), which the percentile bootstrap undercovers there.
    ci_low: float
    ci_high: float
    min_rel_diff: float  # practical margin the interval had to clear, relative to |a_value|
    higher_is_better: bool
    verdict: Verdict
    n_a: int
    n_b: int
    n_resamples: int
    seed: int
    low_sample: bool  # fewer than MIN_SAMPLES_FOR_BOOTSTRAP on a side
    interval: str = "percentile bootstrap"
