"""The SLO boundary of one configuration: the highest Poisson arrival rate at which every SLO
is met, found by bracketing (doubling or halving from a start rate) and then bisecting on a
log scale until the bracket's ends are within 15% of each other, in a bounded number of probes.

Each probe is a measured scenario (the same `measure(endpoint, traffic)` path as every trial).
An SLO "p95 of TTFT <= 0.5 s" holds when at least 95% of requests are within 0.5 s; a probe
decides it only when the exact (Clopper-Pearson) interval on that share lies wholly on one side
of 95%. A probe that decides neither way is undecided, never a pass: the search measures that
rate again and pools the two runs' requests. A rate the pooled counts still do not decide is
where the SLO sits at its margin: the search goes on narrowing on both sides of it (below the
lowest such rate, above the highest) until each side is within the tolerance, and then says the
band that is left is the sampling noise's, not the budget's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from infopt.analysis.slo_share import DEFAULT_CONFIDENCE, check, meeting_count, overall
from infopt.specs.cluster import Boundary, Probe, Verdict
from infopt.specs.results import RequestRecord, ScenarioResult

DEFAULT_PROBES = 15
# Stop when the bracket's ends are within 15% of each other: its geometric middle, what a
# capacity prediction is compared with (infopt.cluster.capacity.reference_rate), is then within
# 7% of either end.
DEFAULT_REL_TOLERANCE = 0.15
# Bracketing gives up this many halvings or doublings away from the start rate.
MAX_STEPS_FROM_START = 8


# A probe whose completions keep up with less than this share of the rate its requests were
# really sent at is overloaded. Both rates are measured over the same probe (the Poisson draw's
# own noise cancels); 0.9 leaves room for the jitter of service times.
SUSTAINED = 0.9
# Fewer requests leave too few gaps after the first quarter for the two rates to compare
# (a 12-request probe: 8 gaps, each rate +-35%): the SLO checks alone decide then.
MIN_RECORDS_FOR_RATE = 20


def _rate(times: list[float]) -> float | None:
    """Events per second after the first quarter (differences of times: no offset bias)."""
    times = sorted(times)
    if len(times) < MIN_RECORDS_FOR_RATE:
        return None
    k = len(times) // 4
    span = times[-1] - times[k]
    return (len(times) - 1 - k) / span if span > 0 else None


def completion_rate(records: Sequence[RequestRecord]) -> float | None:
    """Completions per second over the phase after its first quarter."""
    return _rate([r.start_offset_s + r.e2e_s for r in records if r.ok and r.e2e_s is not None])


def send_rate(records: Sequence[RequestRecord]) -> float | None:
    """The rate the requests were really sent at (the Poisson draw, not its mean)."""
    return _rate([r.start_offset_s for r in records])


def _sustained(rate: float, sent: float | None, completed: float | None, verdict: Verdict,
               why: str) -> tuple[Verdict, str]:
    if completed is not None and sent is not None and completed < SUSTAINED * sent:
        return Verdict.MISSES, (f"completed {completed:.3g} requests/s while they were sent at "
                                f"{sent:.3g} (offered {rate:.3g}): under {SUSTAINED:.0%}, the "
                                "queue grows at this rate, so the SLOs fail in a longer run")
    return verdict, why


def e2e_moments(records: Sequence[RequestRecord]) -> tuple[float | None, float | None]:
    """Mean E2E of the successful requests and its squared coefficient of variation."""
    times = [r.e2e_s for r in records if r.ok and r.e2e_s is not None]
    if len(times) < 2:
        return None, None
    mean = statistics.fmean(times)
    return mean, statistics.pvariance(times, mean) / mean**2 if mean > 0 else None


def probe_from(rate_per_s: float, scenario: ScenarioResult,
               records: Sequence[RequestRecord] = (),
               confidence: float = DEFAULT_CONFIDENCE) -> Probe:
    """A measured scenario as a probe: each SLO's share of requests within its limit (errors
    count as not within it) and the verdict it decides; its records give the E2E moments."""
    if not scenario.slos:
        raise ValueError("the SLO boundary needs the traffic's SLOs (workload.slos)")
    n = scenario.level.requests
    checks = [check(s.metric, s.percentile, s.max_s, s.observed_s, n,
                    meeting_count(s.requests_meeting_fraction, n), confidence)
              for s in scenario.slos]
    mean, cv2 = e2e_moments(records)
    completed, sent = completion_rate(records), send_rate(records)
    verdict, why = _sustained(rate_per_s, sent, completed, *overall(checks))
    return Probe(rate_per_s=rate_per_s, achieved_requests_per_s=scenario.level.requests_per_s,
                 goodput_requests_per_s=scenario.goodput_requests_per_s or 0.0, requests=n,
                 errors=scenario.level.errors, checks=checks, verdict=verdict, why=why,
                 e2e_mean_s=mean, e2e_cv2=cv2, completion_rate_per_s=completed,
                 send_rate_per_s=sent)


def pooled(a: Probe, b: Probe, confidence: float = DEFAULT_CONFIDENCE) -> Probe:
    """Two runs at the same rate as one probe: their requests counted together. The pooled
    percentile is not recoverable from two percentiles: the higher of the two stands for it
    (shown only; the verdict comes from the pooled counts)."""
    checks = [check(x.metric, x.percentile, x.max_s, x.observed_s if y.observed_s is None
                    else max(x.observed_s or 0.0, y.observed_s), x.requests + y.requests,
                    x.meeting + y.meeting, confidence) for x, y in zip(a.checks, b.checks, strict=True)]
    n = a.requests + b.requests
    completed = _weighted(a, b, "completion_rate_per_s")
    verdict, why = _sustained(a.rate_per_s, _weighted(a, b, "send_rate_per_s"), completed,
                              *overall(checks))
    return Probe(rate_per_s=a.rate_per_s,
                 achieved_requests_per_s=(a.achieved_requests_per_s * a.requests
                                          + b.achieved_requests_per_s * b.requests) / n,
                 goodput_requests_per_s=(a.goodput_requests_per_s * a.requests
                                         + b.goodput_requests_per_s * b.requests) / n,
                 requests=n, errors=a.errors + b.errors, checks=checks, verdict=verdict,
                 why=f"two runs pooled: {why}", e2e_mean_s=_weighted(a, b, "e2e_mean_s"),
                 e2e_cv2=_weighted(a, b, "e2e_cv2"), completion_rate_per_s=completed,
                 send_rate_per_s=_weighted(a, b, "send_rate_per_s"))


def _weighted(a: Probe, b: Probe, field: str) -> float | None:
    x, y = getattr(a, field), getattr(b, field)
    if x is None or y is None:
        return x if y is None else y
    return (x * a.requests + y * b.requests) / (a.requests + b.requests)


class _Search:
    def __init__(self, measure_at: Callable[[float], Probe], budget: int) -> None:
        self.measure_at, self.budget = measure_at, budget
        self.probes: list[Probe] = []  # every run, and each pooled pair after its runs
        self.notes: list[str] = []
        self.measured = 0

    @property
    def left(self) -> int:
        return self.budget - self.measured

    def _measure(self, rate: float) -> Probe:
        self.measured += 1
        p = self.measure_at(rate)
        self.probes.append(p)
        return p

    def run(self, rate: float) -> Probe:
        p = self._measure(rate)
        if p.verdict is Verdict.UNDECIDED and self.left > 0:
            p = pooled(p, self._measure(rate))
            self.probes.append(p)
        return p

    def best(self) -> tuple[Probe | None, Probe | None, list[Probe]]:
        final = last_word(self.probes)
        meets = [p for p in final if p.verdict is Verdict.MEETS]
        misses = [p for p in final if p.verdict is Verdict.MISSES]
        lo = max(meets, key=lambda p: p.rate_per_s, default=None)
        hi = min((p for p in misses if lo is None or p.rate_per_s > lo.rate_per_s),
                 key=lambda p: p.rate_per_s, default=None)
        return lo, hi, [p for p in final if p.verdict is Verdict.UNDECIDED]


def last_word(probes: list[Probe]) -> list[Probe]:
    """The last word on each rate (a pooled probe replaces the runs it pooled), by rate."""
    last: dict[float, Probe] = {}
    for p in probes:
        last[p.rate_per_s] = p
    return sorted(last.values(), key=lambda p: p.rate_per_s)


def search_boundary(measure_at: Callable[[float], Probe], start_rate_per_s: float, *,
                    max_probes: int = DEFAULT_PROBES,
                    rel_tolerance: float = DEFAULT_REL_TOLERANCE,
                    confidence: float = DEFAULT_CONFIDENCE) -> Boundary:
    """Bracket the boundary from `start_rate_per_s` (double while it meets, halve while it
    misses), then bisect the bracket geometrically until its ends are within `rel_tolerance`,
    `max_probes` measurements are spent, or only rates the pooled counts cannot decide are left
    between ends already within it of them; the notes say which stopped it short."""
    if start_rate_per_s <= 0:
        raise ValueError("the start rate must be > 0 requests/s")
    s = _Search(measure_at, max_probes)
    _bracket(s, start_rate_per_s)
    _bisect(s, rel_tolerance)
    lo, hi, undecided = s.best()
    shape: Literal["cliff", "slope"] | None = None
    if lo is not None and hi is not None:
        shape = "cliff" if hi.goodput_requests_per_s < lo.goodput_requests_per_s else "slope"
    band = _band(lo, hi, undecided)
    pooled_band = [p.rate_per_s for p in undecided if p.rate_per_s in band
                   and p.why.startswith("two runs pooled")]
    if pooled_band:
        s.notes.append("undecided even with two runs pooled at "
                       + ", ".join(f"{r:.3g}" for r in pooled_band)
                       + " requests/s: the boundary lies in the reported interval, and more "
                         "requests per probe would narrow it")
    if len(pooled_band) < len(band):
        s.notes.append("undecided in one run, the budget leaving no second, at "
                       + ", ".join(f"{r:.3g}" for r in band if r not in pooled_band)
                       + " requests/s")
    return Boundary(probes=s.probes, meets_up_to_rate_per_s=lo.rate_per_s if lo else None,
                    misses_from_rate_per_s=hi.rate_per_s if hi else None, shape=shape,
                    probes_budget=max_probes, measurements=s.measured, rel_tolerance=rel_tolerance,
                    confidence=confidence, notes=s.notes)


def _band(lo: Probe | None, hi: Probe | None, undecided: list[Probe]) -> list[float]:
    """The undecided rates inside the bracket, in order."""
    return sorted(p.rate_per_s for p in undecided
                  if (lo is None or p.rate_per_s > lo.rate_per_s)
                  and (hi is None or p.rate_per_s < hi.rate_per_s))


def _bracket(s: _Search, start: float) -> None:
    rate, steps = start, 0
    while s.left > 0:
        p = s.run(rate)
        lo, hi, _ = s.best()
        if lo is not None and hi is not None:
            return
        if steps >= MAX_STEPS_FROM_START:
            s.notes.append(f"not bracketed within {MAX_STEPS_FROM_START} doublings or "
                           f"halvings of {start:.3g} requests/s")
            return
        steps += 1
        # Undecided counts as "not yet met": below any decided miss, above any decided meet
        # (a decided meet lying below, look above the fuzzy rate).
        up = p.verdict is Verdict.MEETS or (p.verdict is Verdict.UNDECIDED and lo is not None)
        rate = p.rate_per_s * 2 if up else p.rate_per_s / 2
        # A rate already left undecided is not measured again: step past it.
        known = {q.rate_per_s: q.verdict for q in last_word(s.probes)}
        while known.get(rate) is Verdict.UNDECIDED:
            rate = rate * 2 if up else rate / 2
    s.notes.append(f"the probe budget ({s.budget}) ran out while bracketing")


def _bisect(s: _Search, rel_tolerance: float) -> None:
    """Geometric bisection of the wider side. With undecided rates inside the bracket only a
    probe below the lowest of them or above the highest can move an end, so those two gaps are
    the ones bisected; when both are within the tolerance the band left is the noise's."""
    while True:
        lo, hi, undecided = s.best()
        if lo is None or hi is None:
            return
        a, b = lo.rate_per_s, hi.rate_per_s
        if b <= a * (1 + rel_tolerance):
            return
        band = _band(lo, hi, undecided)
        sides = [(a, band[0]), (band[-1], b)] if band else [(a, b)]
        gaps = [(x, y) for x, y in sides if y > x * (1 + rel_tolerance)]
        wide = f"the bracket stays {b / a - 1:.0%} wide (asked: within {rel_tolerance:.0%})"
        if not gaps:
            rates = (f"{band[0]:.3g}" if len(band) == 1 else
                     f"from {band[0]:.3g} to {band[-1]:.3g}")
            s.notes.append(f"{wide}: the SLO stayed undecided at {rates} requests/s with two "
                           "runs pooled, and each side of that is narrowed to the tolerance; "
                           "the sampling noise leaves this band, not the budget: more "
                           "requests per probe (probe_requests) would narrow it")
            return
        kept = 1 if _light_needed(s.probes, a) else 0
        if s.left <= kept:
            s.notes.append(f"{wide}: the probe budget ({s.budget}) ran out"
                           + (", one kept for the light-load probe" if kept else "")
                           + "; a larger max_probes would narrow it")
            return
        x, y = max(gaps, key=lambda g: g[1] / g[0])  # ties: the lower side first
        mid = math.sqrt(x * y)
        if any(p.rate_per_s == mid for p in s.probes):
            return
        s.run(mid)


def _light_needed(probes: list[Probe], lo: float | None) -> bool:
    """No rate at or below half the bracket's lower end met: `with_light_probe` will measure
    one (the bisection keeps a probe of the budget back for it)."""
    met = [p.rate_per_s for p in last_word(probes) if p.verdict is Verdict.MEETS]
    return lo is not None and bool(met) and min(met) > lo / 2


def with_light_probe(b: Boundary, measure_at: Callable[[float], Probe]) -> Boundary:
    """The capacity model reads TTFT and E2E at light load: where the search met no rate at or
    below half its boundary (it started close to it), one more probe at a quarter of it."""
    lo = b.meets_up_to_rate_per_s
    if lo is None or not _light_needed(b.probes, lo):
        return b
    light = measure_at(lo / 4)
    return b.model_copy(update={
        "probes": [*b.probes, light], "measurements": b.measurements + 1,
        "notes": [*b.notes, f"a light-load probe at {lo / 4:.3g} requests/s (a quarter of "
                            "the boundary) for the capacity model"]})
