"""Whether a measured share of requests meets an SLO, decided only where the requests decide it.
An SLO "p95 of TTFT <= 0.5 s" holds when at least 95% of requests are within 0.5 s; a count
decides it only when the exact (Clopper-Pearson) interval on that share lies wholly on one side
of 95%, else it is undecided, never a pass. Shared by the cluster's SLO boundary
(infopt.cluster.boundary) and the optimizer's SLO gate (infopt.tuning.slo_gate)."""

from __future__ import annotations

from scipy.stats import binomtest

from infopt.specs.cluster import SloCheck, Verdict

DEFAULT_CONFIDENCE = 0.90  # one-sided, per SLO verdict


def meeting_count(fraction: float, requests: int) -> int:
    """The requests within an SLO's limit, from the share a scenario records of them (a count
    over a whole number of requests: rounding undoes the division)."""
    return round(fraction * requests)


def share_interval(meeting: int, requests: int, confidence: float) -> tuple[float, float]:
    """One-sided bounds at `confidence` each (a two-sided exact interval at 2c - 1)."""
    if requests == 0:
        return 0.0, 1.0
    ci = binomtest(meeting, requests).proportion_ci(confidence_level=2 * confidence - 1,
                                                    method="exact")
    return float(ci.low), float(ci.high)


def check(metric: str, percentile: int, max_s: float, observed_s: float | None,
          requests: int, meeting: int, confidence: float) -> SloCheck:
    low, high = share_interval(meeting, requests, confidence)
    need = percentile / 100
    verdict = (Verdict.MEETS if low >= need else Verdict.MISSES if high < need
               else Verdict.UNDECIDED)
    return SloCheck(metric=metric, percentile=percentile, max_s=max_s, observed_s=observed_s,
                    requests=requests, meeting=meeting, share_low=low, share_high=high,
                    verdict=verdict)


def overall(checks: list[SloCheck]) -> tuple[Verdict, str]:
    missed = [c for c in checks if c.verdict is Verdict.MISSES]
    if missed:
        return Verdict.MISSES, "; ".join(
            f"{c.metric} p{c.percentile}: {c.meeting}/{c.requests} within {c.max_s:g} s "
            f"(at most {c.share_high:.0%} of requests, {c.percentile}% needed)" for c in missed)
    open_ = [c for c in checks if c.verdict is Verdict.UNDECIDED]
    if open_:
        return Verdict.UNDECIDED, "; ".join(
            f"{c.metric} p{c.percentile}: {c.meeting}/{c.requests} within {c.max_s:g} s, "
            f"between {c.share_low:.0%} and {c.share_high:.0%} of requests: too few to tell "
            f"from {c.percentile}%" for c in open_)
    return Verdict.MEETS, "every SLO met beyond the sampling noise"
