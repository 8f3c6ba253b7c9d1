"""The queueing formulas against closed forms, and the capacity plan on a planted replica:
predictions grow with replicas, pooling beats splitting, the plan takes the fewest replicas
that serve the peak, and its validation states the error against measured boundaries."""

from __future__ import annotations

import math

import pytest

from infopt.cluster.capacity import calibrate, plan, predict, validate
from infopt.cluster.queueing import allen_cunneen, erlang_c, wait_quantile_s
from infopt.specs.cluster import Boundary, Probe, SloCheck, Verdict
from infopt.specs.traffic import Slo, SloMetric

TTFT = Slo(metric=SloMetric.TTFT, percentile=90, max_s=2.0)
TPOT = Slo(metric=SloMetric.TPOT, percentile=90, max_s=0.2)


def test_erlang_c_and_the_wait_tail_match_their_closed_forms():
    assert erlang_c(1, 0.7) == pytest.approx(0.7)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # The reference's "rho = 0.85 gives C ~ 0.5" holds only near 10 servers: 0.85 at one,
    # 0.43 at sixteen.
    assert erlang_c(1, 0.85) == pytest.approx(0.85)
    assert erlang_c(16, 0.85 * 16) == pytest.approx(0.433, abs=1e-3)
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(4, 0.0) == 0.0
    # M/M/1, mu = 1, lambda = 0.5: P(W > t) = 0.5 e^{-0.5 t}; its 90th percentile.
    assert wait_quantile_s(1, 0.5, 1.0, 0.9) == pytest.approx(math.log(5) / 0.5)
    assert wait_quantile_s(1, 0.05, 1.0, 0.9) == 0.0  # P(wait) 5% < 10%: no wait at p90
    assert wait_quantile_s(1, 1.0, 1.0, 0.9) == math.inf
    assert allen_cunneen(1.0, 1.0) == 1.0 and allen_cunneen(0.5, 0.1) == pytest.approx(0.3)


def _probe(rate: float, ttft: float, tpot: float, verdict: Verdict) -> Probe:
    checks = [SloCheck(metric=m, percentile=90, max_s=x, observed_s=v, requests=100,
                       meeting=95 if verdict is Verdict.MEETS else 50, share_low=0.9,
                       share_high=1.0, verdict=verdict)
              for m, x, v in (("ttft", 2.0, ttft), ("tpot", 0.2, tpot))]
    return Probe(rate_per_s=rate, achieved_requests_per_s=rate, goodput_requests_per_s=rate,
                 requests=100, errors=0, checks=checks, verdict=verdict, why="planted",
                 e2e_mean_s=4.0, e2e_cv2=0.2)


def _boundary(probes: list[Probe]) -> Boundary:
    met = [p.rate_per_s for p in probes if p.verdict is Verdict.MEETS]
    miss = [p.rate_per_s for p in probes if p.verdict is Verdict.MISSES]
    return Boundary(probes=probes, meets_up_to_rate_per_s=max(met, default=None),
                    misses_from_rate_per_s=min(miss, default=None), shape="slope",
                    probes_budget=15, measurements=len(probes), rel_tolerance=0.1,
                    confidence=0.9)


# One replica, 4 slots, 4 s per request: at most 1 request/s; TPOT grows with the batch.
ONE = _boundary([_probe(0.25, 0.5, 0.05, Verdict.MEETS), _probe(0.5, 0.6, 0.08, Verdict.MEETS),
                 _probe(0.75, 1.2, 0.12, Verdict.MEETS), _probe(1.0, 9.0, 0.25, Verdict.MISSES)])


def test_the_model_is_calibrated_from_the_probes_that_decided():
    m = calibrate(ONE, slots=4)
    assert m.service_mean_s == 4.0 and m.light_load_s == {"ttft p90": 0.5}
    assert m.decode_curve["tpot p90"][-1] == (1.0, 0.25)
    with pytest.raises(ValueError, match="no probe met the SLOs"):
        calibrate(_boundary([_probe(1.0, 9.0, 0.3, Verdict.MISSES)]), slots=4)


def test_predictions_grow_with_replicas_and_pooling_beats_round_robin():
    m = calibrate(ONE, slots=4)
    pooled = [predict(m, [TTFT, TPOT], n, "pooled").max_rate_per_s for n in (1, 2, 3)]
    split = [predict(m, [TTFT, TPOT], n, "split").max_rate_per_s for n in (1, 2, 3)]
    assert pooled == sorted(pooled) and pooled[0] < 1.0  # never beyond the slots' throughput
    assert pooled[0] == pytest.approx(split[0], rel=1e-3)
    assert all(p >= s for p, s in zip(pooled[1:], split[1:], strict=True))
    # TPOT is read off the curve at each replica's share: it caps every count at 0.2 s (the
    # curve crosses 0.2 s between 0.75 and 1.0 requests/s a replica).
    cap = predict(m, [TPOT], 3, "pooled")
    assert cap.max_rate_per_s == pytest.approx(3 * (0.75 + 0.25 * 8 / 13), rel=1e-2)
    assert cap.limited_by == "tpot p90 <= 0.2 s"


def test_the_plan_takes_the_fewest_replicas_for_the_peak_and_states_its_error():
    m = calibrate(ONE, slots=4)
    one = predict(m, [TTFT], 1, "pooled").max_rate_per_s
    p = plan(m, [TTFT], target_rate_per_s=one * 2, burst_factor=1.5, gpus_per_replica=2)
    assert p.replicas is not None and p.gpus == 2 * p.replicas
    assert p.predictions[-1].max_rate_per_s >= one * 3 > p.predictions[-2].max_rate_per_s
    assert "estimate" in p.method
    # Three's bracket holds a rate the pooled runs left undecided: the SLO sits at its margin
    # there, so that rate is the reference, not the middle.
    measured = {1: ONE, 2: _boundary([_probe(1.2, 0.6, 0.1, Verdict.MEETS),
                                      _probe(1.5, 9.0, 0.3, Verdict.MISSES)]),
                3: _boundary([_probe(1.5, 0.6, 0.1, Verdict.MEETS),
                              _probe(2.0, 1.9, 0.1, Verdict.UNDECIDED),
                              _probe(3.0, 9.0, 0.3, Verdict.MISSES)])}
    v = {x.replicas: x for x in validate(m, [TTFT], measured, "pooled", in_sample={1})}
    two = predict(m, [TTFT], 2, "pooled").max_rate_per_s
    # Against the bracket's geometric middle sqrt(1.2 x 1.5) = 1.342, the width beside it.
    assert v[2].measured_reference_rate_per_s == pytest.approx(1.3416, abs=1e-4)
    assert v[2].error == pytest.approx(two / 1.3416 - 1, abs=1e-4)
    assert v[2].bracket_width == pytest.approx(0.25) and not v[2].in_sample
    assert v[3].measured_reference_rate_per_s == 2.0 and v[3].bracket_width == 1.0
    assert v[3].reference == "the undecided rate, two runs pooled"
    assert v[1].in_sample  # the bracket the model was calibrated on
    open_ = _boundary([_probe(1.2, 0.6, 0.1, Verdict.MEETS)])
    assert validate(m, [TTFT], {2: open_}, "pooled", in_sample=())[0].error is None
    with pytest.raises(ValueError, match="burst factor"):
        plan(m, [TTFT], 1.0, burst_factor=0.5)


def test_the_service_time_comes_from_a_saturated_probes_completions():
    saturated = _probe(1.0, 9.0, 0.25, Verdict.MISSES).model_copy(
        update={"completion_rate_per_s": 0.5, "send_rate_per_s": 1.0})
    m = calibrate(_boundary([*ONE.probes[:3], saturated]), slots=4)
    assert m.service_mean_s == pytest.approx(4 / 0.5)
    assert "completed when saturated" in m.calibrated_from
