import pytest

from infopt.analysis.stats import median_and_spread, percentiles
from infopt.loadgen.summary import summarize_level
from infopt.specs.results import RequestRecord


def test_percentiles_linear_interpolation_by_hand():
    # numpy's default (linear): p50 of 1..5 is 3; p95 at rank 0.95*4 = 3.8 -> 4 + 0.8*(5-4) = 4.8
    p = percentiles([5.0, 1.0, 3.0, 2.0, 4.0])
    assert p.n == 5 and p.p50 == 3.0 and p.p95 == pytest.approx(4.8) and p.mean == 3.0
    assert p.low_sample_p95  # 5 < 20 samples


def test_percentiles_empty():
    p = percentiles([])
    assert p.n == 0 and p.p50 is None


def test_median_and_spread():
    assert median_and_spread([10.0, 14.0, 11.0]) == (11.0, 4.0)
    assert median_and_spread([]) == (None, None)


def _rec(i, ok=True, out=4, ttft=0.1, itl=(0.01, 0.02, 0.03)):
    return RequestRecord(request_id=str(i), concurrency=2, ok=ok, output_tokens=out if ok else None,
                         output_tokens_requested=4, ttft_s=ttft if ok else None,
                         e2e_s=0.2 if ok else None, itl_s=list(itl) if ok else [],
                         error=None if ok else "http_500")


def test_summarize_level_counts_only_successful_requests():
    recs = [_rec(0), _rec(1, out=3), _rec(2, ok=False)]
    lvl = summarize_level(recs, concurrency=2, wall_s=0.5)
    assert lvl.requests == 3 and lvl.errors == 1 and lvl.lengths_not_reached == 1
    assert lvl.output_tokens_total == 7
    assert lvl.output_tokens_per_s == pytest.approx(7 / 0.5)
    assert lvl.requests_per_s == pytest.approx(2 / 0.5)
    assert lvl.itl_s.n == 6  # gaps pooled over the two successful requests
    assert lvl.ttft_s.n == 2


def test_draft_acceptance_sums_the_requests_that_reported_it():
    recs = [_rec(0), _rec(1), _rec(2)]
    assert summarize_level(recs, 2, 1.0).draft_acceptance is None  # no speculation reported
    recs[0].draft_tokens, recs[0].draft_tokens_accepted = 10, 9
    recs[1].draft_tokens, recs[1].draft_tokens_accepted = 30, 3
    lvl = summarize_level(recs, 2, 1.0)
    assert (lvl.draft_tokens_total, lvl.draft_tokens_accepted_total) == (40, 12)
    assert lvl.draft_acceptance == pytest.approx(0.3)
