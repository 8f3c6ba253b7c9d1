"""The one SLO model (docs/metrics.md), checked by hand on small record sets."""

from __future__ import annotations

import math

import pytest

from infopt.analysis.slo import _percentile, evaluate_slos, request_meets, run_samples
from infopt.specs.results import RequestRecord
from infopt.specs.traffic import Slo, SloMetric


def _rec(i, ttft, e2e, itl=(0.02, 0.02, 0.02), ok=True, out=4):
    if not ok:
        return RequestRecord(request_id=f"r{i}", concurrency=2, ok=False, error="http_500",
                             output_tokens_requested=4)
    return RequestRecord(request_id=f"r{i}", concurrency=2, ok=True, prompt_tokens=10,
                         output_tokens=out, output_tokens_requested=4, ttft_s=ttft, e2e_s=e2e,
                         itl_s=list(itl), content_chunks=len(itl) + 1)


def _ten():
    # 10 requests: 8 fast, one with a slow first token, one failed.
    return [_rec(i, 0.1, 0.3) for i in range(8)] + [_rec(8, 0.9, 1.1), _rec(9, None, None,
                                                                            ok=False)]


def test_goodput_counts_requests_meeting_every_slo_per_second():
    recs = _ten()
    slos, good = evaluate_slos(recs, [Slo(metric="ttft", percentile=50, max_s=0.5)], 5.0)
    assert good == pytest.approx(8 / 5)  # 8 within 0.5 s; the failed one is never good
    assert slos[0].met and slos[0].requests_meeting_fraction == pytest.approx(0.8)
    _, good = evaluate_slos(recs, [Slo(metric="e2e", percentile=50, max_s=2.0)], 5.0)
    assert good == pytest.approx(9 / 5)
    _, good = evaluate_slos(recs, [Slo(metric="ttft", percentile=50, max_s=0.5),
                                   Slo(metric="e2e", percentile=50, max_s=0.2)], 5.0)
    assert good == 0.0  # no request's E2E is within 0.2 s
    assert evaluate_slos(recs, [], 5.0) == ([], None)


def test_a_run_meets_an_slo_by_its_percentile_with_failures_as_infinite():
    recs = _ten()
    # TTFT samples sorted: 8 x 0.1, 0.9, +inf. p50 = 0.1; p90 sits between 0.9 and +inf at
    # rank 8.1: +inf, so the run misses any p90 TTFT bound (a failure counts against it).
    slos, _ = evaluate_slos(recs, [Slo(metric="ttft", percentile=50, max_s=0.5),
                                   Slo(metric="ttft", percentile=90, max_s=5.0)], 5.0)
    assert slos[0].observed_s == pytest.approx(0.1) and slos[0].met
    assert slos[1].observed_s is None and not slos[1].met and slos[1].samples == 10
    # Without the failure, p90 is interpolated linearly between 0.1 and 0.9 (rank 7.2).
    slos, _ = evaluate_slos(recs[:9], [Slo(metric="ttft", percentile=90, max_s=5.0)], 5.0)
    assert slos[0].observed_s == pytest.approx(0.1 + 0.2 * 0.8) and slos[0].met


def test_itl_is_the_token_gap_pooled_for_the_run_and_per_request_for_goodput():
    recs = [_rec(0, 0.1, 0.5, itl=(0.02, 0.02, 0.02)), _rec(1, 0.1, 0.5, itl=(0.02, 0.02, 0.4)),
            _rec(2, 0.1, 0.5, itl=(0.2, 0.2, 0.2)), _rec(3, 0.1, 0.1, itl=(), out=1)]
    p50 = Slo(metric="itl", percentile=50, max_s=0.05)
    # Per request, ITL p50 is the median of its own gaps: 0.02, 0.02, 0.2, none (one token:
    # holds vacuously). Three good requests in 2 s.
    assert [request_meets(r, p50) for r in recs] == [True, True, False, True]
    slos, good = evaluate_slos(recs, [p50], 2.0)
    assert good == pytest.approx(3 / 2)
    # The run's ITL pools the 9 gaps: sorted 5 x 0.02, 3 x 0.2, 0.4 -> median 0.02.
    assert run_samples(recs, SloMetric.ITL) == [0.02] * 3 + [0.02, 0.02, 0.4] + [0.2] * 3
    assert slos[0].observed_s == pytest.approx(0.02) and slos[0].samples == 9 and slos[0].met


def test_tpot_is_decode_time_per_token_after_the_first():
    recs = [_rec(i, 0.1, 0.5) for i in range(3)]  # (0.5 - 0.1) / (4 - 1) = 0.1333 s
    _, good = evaluate_slos(recs, [Slo(metric="tpot", percentile=99, max_s=0.14)], 1.0)
    assert good == 3.0
    slos, good = evaluate_slos(recs, [Slo(metric="tpot", percentile=99, max_s=0.13)], 1.0)
    assert good == 0.0 and not slos[0].met


def test_percentile_matches_numpy_when_finite_and_is_inf_into_failures():
    import numpy as np
    xs = [0.3, 0.1, 0.7, 0.2, 0.5]
    for p in (50, 90, 95, 99):
        assert _percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)))
    assert _percentile(xs + [math.inf], 50) == pytest.approx(float(np.percentile(xs + [9], 50)))
    assert _percentile(xs + [math.inf], 99) == math.inf
    assert _percentile([], 50) is None
