"""The SLO model, computed once (definitions: docs/metrics.md). `infopt bench`, the optimizer's
trials and the reports all call `evaluate_slos`; nothing else judges an SLO.

A request's value of each metric: TTFT, TPOT and E2E as measured for it; ITL at percentile p is
the p-th percentile of that request's own token gaps. A run's value at percentile p is the p-th
percentile over its measured requests (ITL: over all their gaps, pooled), with every failed
request counted as one sample of +inf (a failure misses every SLO). A run *meets* an SLO when
that value is at most `max_s`. A request is *good* when it succeeded and its own value of each
SLO's metric is at most `max_s` (a metric it does not have holds vacuously: TTFT, ITL, TPOT of a
non-streamed response in a route mix; ITL, TPOT of a one-token answer);
goodput = good requests per second of the measured window, as `vllm bench --goodput` counts it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infopt.specs.results import RequestRecord, SloResult
from infopt.specs.traffic import Slo, SloMetric


def _one_per_request(rec: RequestRecord, metric: SloMetric) -> float | None:
    return {SloMetric.TTFT: rec.ttft_s, SloMetric.TPOT: rec.tpot_s,
            SloMetric.E2E: rec.e2e_s}[metric]


def request_value(rec: RequestRecord, slo: Slo) -> float | None:
    """This request's value of the SLO's metric (None: not measured for it)."""
    if slo.metric is SloMetric.ITL:
        return float(np.percentile(rec.itl_s, slo.percentile)) if rec.itl_s else None
    return _one_per_request(rec, slo.metric)


def request_meets(rec: RequestRecord, slo: Slo) -> bool:
    if not rec.ok:
        return False
    value = request_value(rec, slo)
    # A metric the request does not have holds vacuously: TTFT/ITL/TPOT of a non-streamed
    # response, ITL/TPOT of a one-token answer (a successful request always has an E2E).
    return value is None or value <= slo.max_s


def run_samples(records: Sequence[RequestRecord], metric: SloMetric) -> list[float]:
    """The samples a run's percentile is taken over; a failed request is one +inf."""
    out: list[float] = []
    for rec in records:
        if not rec.ok:
            out.append(math.inf)
        elif metric is SloMetric.ITL:
            out.extend(rec.itl_s)
        elif (v := _one_per_request(rec, metric)) is not None:
            out.append(v)
    return out


def _percentile(samples: list[float], pct: float) -> float | None:
    """numpy's default (linear) percentile, the one infopt.analysis.stats uses everywhere, with
    +inf samples allowed: the value is +inf once the percentile reaches into them."""
    if not samples:
        return None
    arr = np.sort(np.asarray(samples, dtype=float))
    rank = (arr.size - 1) * pct / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    if math.isinf(arr[hi]):
        return math.inf
    return float(arr[lo] + (rank - lo) * (arr[hi] - arr[lo]))


def evaluate_slos(records: Sequence[RequestRecord], slos: Sequence[Slo], wall_s: float
                  ) -> tuple[list[SloResult], float | None]:
    """Each SLO judged on the run, and the goodput (None without SLOs)."""
    results = []
    for slo in slos:
        samples = run_samples(records, slo.metric)
        observed = _percentile(samples, slo.percentile)
        attained = (sum(request_meets(r, slo) for r in records) / len(records)
                    if records else 0.0)
        results.append(SloResult(
            metric=slo.metric.value, percentile=slo.percentile, max_s=slo.max_s,
            observed_s=None if observed is None or math.isinf(observed) else observed,
            samples=len(samples), met=observed is not None and observed <= slo.max_s,
            requests_meeting_fraction=attained))
    if not slos:
        return results, None
    good = sum(all(request_meets(r, s) for s in slos) for r in records)
    return results, good / wall_s if wall_s > 0 else 0.0
