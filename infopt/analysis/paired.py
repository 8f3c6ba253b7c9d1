"""Paired comparison of two configurations measured in alternating windows.

Round r measures the incumbent (a_r) and the candidate (b_r) back to back, so what the machine
does slowly (another tenant, thermal state, a cache filling) hits both alike and cancels in the
ratio b_r / a_r. The comparison is Student's t on d_r = log(b_r / a_r): exact for normally
distributed log ratios, and a ratio because a rate halved by a busy machine halves for both.
The point estimate is the geometric mean ratio; the interval is exp(mean(d) +- t * sd(d)/sqrt(n)).

`detectable` answers "what could this run have shown": the relative difference that a test at
this confidence finds with 80% power given the rounds' own spread, (t_{1-alpha/2} + t_{0.8}) *
sd / sqrt(n) on the log scale (the usual normal-approximation power formula with t quantiles)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy.stats import t as student_t

from infopt.specs.base import InputError
from infopt.specs.paired import PairedComparison, PairedVerdict

POWER = 0.8  # the power `detectable` is stated at


def log_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """log(b_r / a_r) per round; every value must be a positive measurement."""
    if len(a) != len(b):
        raise InputError(f"paired rounds need one a and one b each: {len(a)} a, {len(b)} b")
    bad = [v for v in (*a, *b) if not (v > 0 and math.isfinite(v))]
    if bad:
        raise InputError(f"paired values must be positive and finite (got {bad[:3]}): leave "
                         "failed windows out of the rounds")
    return [math.log(y / x) for x, y in zip(a, b, strict=True)]


def paired_compare(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool,
                   confidence: float = 0.95, min_gain: float = 0.0,
                   equivalence: float = 0.05, measure: str = "objective") -> PairedComparison:
    """b against a over paired rounds. `b_better` when the whole interval of the ratio clears
    1 + min_gain on the better side, `a_better` when it lies wholly on the worse side of 1,
    `equivalent` when it lies within [1 - equivalence, 1 + equivalence], else `undecided`."""
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence={confidence}: give a level between 0 and 1, e.g. 0.95")
    d = log_ratios(a, b)
    n = len(d)
    if n < 2:
        raise InputError(f"{n} paired round(s): an interval needs at least 2")
    mean, sd = statistics.fmean(d), statistics.stdev(d)
    t_crit = float(student_t.ppf(0.5 + confidence / 2, n - 1))
    half = t_crit * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    verdict = _verdict(low, high, higher_is_better, min_gain, equivalence)
    t_power = float(student_t.ppf(POWER, n - 1))
    detectable = math.expm1((t_crit + t_power) * sd / math.sqrt(n))
    return PairedComparison(
        measure=measure, higher_is_better=higher_is_better, rounds=n,
        a_median=statistics.median(a), b_median=statistics.median(b), ratio=math.exp(mean),
        ratio_low=low, ratio_high=high, confidence=confidence, verdict=verdict,
        equivalence=equivalence, min_gain=min_gain, detectable=detectable, sd_log=sd)


def _verdict(low: float, high: float, higher: bool, min_gain: float,
             equivalence: float) -> PairedVerdict:
    # On the "better" scale: for a lower-is-better measure, b better means b/a below 1.
    better_low, better_high = (low, high) if higher else (1 / high, 1 / low)
    if better_low > 1 + min_gain:
        return "b_better"
    if better_high < 1:
        return "a_better"
    if low >= 1 - equivalence and high <= 1 + equivalence:
        return "equivalent"
    return "undecided"


def better_ratio(c: PairedComparison) -> tuple[float, float, float]:
    """(ratio, low, high) on the "better" scale: above 1 means b is better, whatever the
    measure's direction (1 / ratio for a latency)."""
    if c.higher_is_better:
        return c.ratio, c.ratio_low, c.ratio_high
    return 1 / c.ratio, 1 / c.ratio_high, 1 / c.ratio_low


def noise_sd_log(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The standard deviation of log(b/a) over paired rounds of two fixed configurations: the
    noise one paired round carries (their true ratio is constant). None below 2 rounds."""
    if len(a) < 2:
        return None
    return statistics.stdev(log_ratios(a, b))
