"""A capacity plan from one replica's measured SLO boundary: the replica as a queue of `slots`
servers (its concurrent requests), calibrated from the boundary search's probes, predicts the
highest rate N replicas serve within the SLOs, the replicas a target (and its bursts) needs,
and how far those predictions were from the measured boundaries (against each bracket's
reference rate, its width beside it).

The model, an estimate: a request's TTFT and E2E are their light-load values plus the queueing
wait (Erlang-C's M/M/c tail, scaled by the Allen-Cunneen factor for the measured service-time
variability and the arrivals' own); decode times (TPOT, ITL) do not queue but grow with the
batch, so they are read off the measured rate curve at each replica's share of the rate, and a
rate beyond the measured curve is not predicted to meet them. One factor, the wait's stretch,
is fitted so the model reproduces the one-replica boundary; on a CPU host, replicas whose
threads outnumber the cores serve proportionally slower. Routing: "pooled" (a load-aware
router: any free slot of any replica, one M/G/(N x slots) queue) or "split" (round robin: N
separate queues, each fed every N-th arrival).

What is fitted to what: the wait's stretch is the only fitted number, and it is fitted to one
bracket, the one-replica boundary of the run the model is calibrated on; every other count's
bracket is a prediction. The model's form was not chosen blind, though: the shared-cores term
(no free constant: replicas x threads / cores) was added after the first `make bench-cluster`
run's three-replica bracket was seen, so that run's larger counts are in-sample for the form.
Out of sample means another run's brackets (infopt.cluster.recorded)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence

from infopt.cluster.boundary import SUSTAINED, last_word
from infopt.cluster.queueing import allen_cunneen, split_arrival_cv2, wait_quantile_s
from infopt.specs.cluster import (
    Boundary,
    CapacityPlan,
    PlanValidation,
    Probe,
    ReplicaModel,
    ReplicaPrediction,
    Routing,
    Verdict,
)
from infopt.specs.traffic import Slo

QUEUED = ("ttft", "e2e")  # metrics that include the wait for a slot
DECODE = ("tpot", "itl")  # metrics that grow with the batch instead
MAX_REPLICAS = 256
METHOD = ("estimate: each replica a queue of its slots; TTFT and E2E = their light-load "
          "values + the queueing wait (Erlang-C M/M/c tail x the Allen-Cunneen factor "
          "(CV_a^2 + CV_s^2) / 2, stretched by one factor fitted to the one-replica "
          "boundary; the service time from the replica's measured completion rates, its "
          "CV^2 from the light-load E2E times); TPOT and ITL read off the "
          "measured rate curve at each replica's share of the rate; on a CPU host, replicas "
          "whose threads outnumber the cores serve proportionally slower")


def key(metric: str, percentile: int) -> str:
    return f"{metric} p{percentile}"


def _decided(b: Boundary) -> list[Probe]:
    return [p for p in last_word(b.probes) if p.verdict is not Verdict.UNDECIDED]


def _service_time(probes: list[Probe], slots: int, light: Probe) -> tuple[float, str]:
    """What one request holds a slot for: from a saturated probe's completion rate (the
    replica's capacity), else the tighter of two upper bounds: the light-load E2E mean, and the
    slots over the highest completion rate any probe reached (capacity is at least that)."""
    saturated = [p.completion_rate_per_s for p in probes if p.verdict is Verdict.MISSES
                 and p.completion_rate_per_s is not None
                 and p.send_rate_per_s is not None
                 and p.completion_rate_per_s < SUSTAINED * p.send_rate_per_s]
    if saturated:
        return slots / max(saturated), (f"service time {slots} slot(s) / {max(saturated):.3g} "
                                         "requests/s completed when saturated")
    assert light.e2e_mean_s is not None
    reached = max((p.completion_rate_per_s for p in probes
                   if p.completion_rate_per_s is not None), default=None)
    if reached is not None and slots / reached < light.e2e_mean_s:
        return slots / reached, (f"service time at most {slots} slot(s) / {reached:.3g} "
                                 "requests/s, the most any probe completed (none saturated)")
    return light.e2e_mean_s, ("service time the light-load E2E mean (no probe saturated: an "
                              "upper bound)")


def calibrate(boundary: Boundary, slots: int, slos: list[Slo] | None = None, *,
              host_cores: int | None = None, threads_per_replica: int | None = None
              ) -> ReplicaModel:
    """The replica model from one replica's boundary search (its decided probes). With the
    SLOs and a bracketed boundary, the one free factor, how much the queueing wait is
    stretched (Allen-Cunneen's variability times `wait_scale`), is fitted so the model puts
    this replica's boundary at the bracket's reference rate (`reference_rate`: the geometric
    middle, or the rate left undecided inside it): larger counts are then predictions, not
    fits. Without SLOs nothing is fitted (`wait_scale` 1): the replica as measured."""
    probes = _decided(boundary)
    met = [p for p in probes if p.verdict is Verdict.MEETS]
    if not met:
        raise ValueError("no probe met the SLOs: there is no service rate to plan from; "
                         "lower the start rate or loosen the SLOs")
    light = met[0]
    if light.e2e_mean_s is None or light.e2e_cv2 is None:
        raise ValueError("the probes carry no E2E times: measure them with their records")
    service, how = _service_time(probes, slots, light)
    curve: dict[str, list[tuple[float, float]]] = {}
    for p in probes:
        for c in p.checks:
            if c.metric in DECODE and c.observed_s is not None:
                curve.setdefault(key(c.metric, c.percentile), []).append(
                    (p.rate_per_s, c.observed_s))
    model = ReplicaModel(
        slots=slots, service_mean_s=service, service_cv2=light.e2e_cv2,
        light_load_rate_per_s=light.rate_per_s,
        light_load_s={key(c.metric, c.percentile): c.observed_s for c in light.checks
                      if c.metric in QUEUED and c.observed_s is not None},
        decode_curve=curve, host_cores=host_cores, threads_per_replica=threads_per_replica,
        calibrated_from=f"{len(probes)} decided probes; light load at {light.rate_per_s:.3g} "
                        f"requests/s; {how}")
    target, _ = reference_rate(boundary)
    if slos and target is not None:
        model = _fit_wait_scale(model, slos, target)
    return model


def _fit_wait_scale(m: ReplicaModel, slos: list[Slo], target: float) -> ReplicaModel:
    """Bisection on log(wait_scale) in [1/100, 100]: more stretch, a lower predicted rate."""
    lo, hi = math.log(0.01), math.log(100.0)

    def rate(x: float) -> float:
        return predict(m.model_copy(update={"wait_scale": math.exp(x)}), slos, 1,
                       "pooled").max_rate_per_s
    if rate(hi) >= target or rate(lo) <= target:
        bound = "low" if rate(lo) <= target else "high"
        return m.model_copy(update={"calibrated_from": m.calibrated_from + (
            f"; the wait stretch could not reach the measured boundary ({bound} end of "
            "1/100..100): left at 1")})
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rate(mid) > target else (lo, mid)
    scale = math.exp((lo + hi) / 2)
    return m.model_copy(update={"wait_scale": scale, "calibrated_from": m.calibrated_from + (
        f"; wait stretch x{scale:.3g} fitted to the measured one-replica boundary "
        f"({target:.3g} requests/s, the bracket's reference rate)")})


def _interpolate(points: list[tuple[float, float]], rate: float) -> float:
    """Piecewise-linear in the rate; inf beyond the last measured rate (not predicted)."""
    pts = sorted(points)
    if rate <= pts[0][0]:
        return pts[0][1]
    for (r0, v0), (r1, v1) in itertools.pairwise(pts):
        if rate <= r1:
            return v0 + (v1 - v0) * (rate - r0) / (r1 - r0)
    return math.inf


def shared_cores_factor(m: ReplicaModel, replicas: int) -> float:
    """How much longer a request holds its slot when `replicas` share the host's cores (1 when
    their threads fit the cores, or on GPUs)."""
    if not m.host_cores or not m.threads_per_replica:
        return 1.0
    return max(1.0, replicas * m.threads_per_replica / m.host_cores)


def predicted_s(m: ReplicaModel, slo: Slo, replicas: int, routing: Routing,
                rate_per_s: float) -> float:
    """The SLO's percentile, predicted for `replicas` at `rate_per_s` in all."""
    k = key(slo.metric.value, slo.percentile)
    slow = shared_cores_factor(m, replicas)
    share = rate_per_s / replicas
    if slo.metric.value in DECODE:
        points = m.decode_curve.get(k)
        return _interpolate(points, share * slow) if points else math.inf
    base = m.light_load_s.get(k)
    if base is None:
        return math.inf
    if routing == "pooled":
        servers, lam, cv2a = replicas * m.slots, rate_per_s, 1.0
    else:
        servers, lam, cv2a = m.slots, share, split_arrival_cv2(replicas)
    wait = wait_quantile_s(servers, lam, m.service_mean_s * slow, slo.percentile / 100,
                           allen_cunneen(cv2a, m.service_cv2) * m.wait_scale)
    return base + wait


def predict(m: ReplicaModel, slos: list[Slo], replicas: int, routing: Routing
            ) -> ReplicaPrediction:
    """The highest total rate predicted to meet every SLO (bisection to 0.1%)."""
    # The slots' throughput (cores shared on a CPU host): never beyond it.
    ceiling = replicas * m.slots / (m.service_mean_s * shared_cores_factor(m, replicas))

    def failing(rate: float) -> str | None:
        for s in slos:
            if predicted_s(m, s, replicas, routing, rate) > s.max_s:
                return f"{key(s.metric.value, s.percentile)} <= {s.max_s:g} s"
        return None

    lo, hi = 0.0, ceiling
    if failing(hi * 0.999) is None:
        return ReplicaPrediction(replicas=replicas, routing=routing, max_rate_per_s=hi * 0.999,
                                 limited_by="the slots' throughput (slots / service time)")
    while hi - lo > 1e-3 * ceiling:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if failing(mid) is None else (lo, mid)
    return ReplicaPrediction(replicas=replicas, routing=routing, max_rate_per_s=lo,
                             limited_by=failing(hi) or "")


def plan(m: ReplicaModel, slos: list[Slo], target_rate_per_s: float, *,
         burst_factor: float = 1.0, routing: Routing = "pooled", gpus_per_replica: int = 0,
         max_replicas: int = MAX_REPLICAS) -> CapacityPlan:
    """The fewest replicas predicted to serve the target times its burst allowance."""
    if target_rate_per_s <= 0 or burst_factor < 1:
        raise ValueError("plan for a target rate > 0 and a burst factor >= 1")
    peak = target_rate_per_s * burst_factor
    predictions: list[ReplicaPrediction] = []
    n = 0
    for n in range(1, max_replicas + 1):
        predictions.append(predict(m, slos, n, routing))
        if predictions[-1].max_rate_per_s >= peak:
            break
    else:
        n = 0
    replicas = n or None
    return CapacityPlan(target_rate_per_s=target_rate_per_s, peak_rate_per_s=peak,
                        routing=routing, model=m, predictions=predictions, replicas=replicas,
                        gpus_per_replica=gpus_per_replica,
                        gpus=replicas * gpus_per_replica if replicas else None, method=METHOD)


def reference_rate(b: Boundary) -> tuple[float | None, str]:
    """The measured rate a prediction is compared with (`bracket_reference`) for a searched
    boundary: its bracket and the rates left undecided inside it."""
    return bracket_reference(b.meets_up_to_rate_per_s, b.misses_from_rate_per_s,
                             [p.rate_per_s for p in last_word(b.probes)
                              if p.verdict is Verdict.UNDECIDED])


def bracket_reference(lo: float | None, hi: float | None, undecided: Sequence[float] = ()
                      ) -> tuple[float | None, str]:
    """Where rates inside the bracket [lo, hi] stayed undecided (two runs pooled), the SLO sits
    at its margin there: their geometric mean; else the bracket's geometric middle (the search
    bisects geometrically); None when the search did not bracket the boundary."""
    if lo is None or hi is None:
        return None, "not bracketed"
    band = [r for r in undecided if lo < r < hi]
    if band:
        mid = math.exp(sum(math.log(r) for r in band) / len(band))
        return mid, ("the undecided rate, two runs pooled" if len(band) == 1 else
                     f"the geometric mean of {len(band)} undecided rates")
    return math.sqrt(lo * hi), "the bracket's geometric middle"


def bracket_width(b: Boundary) -> float | None:
    """How wide the measured bracket is: misses_from / meets_up_to - 1."""
    lo, hi = b.meets_up_to_rate_per_s, b.misses_from_rate_per_s
    return hi / lo - 1 if lo and hi else None


def validate(m: ReplicaModel, slos: list[Slo], measured: dict[int, Boundary],
             routing: Routing, *, in_sample: Collection[int]) -> list[PlanValidation]:
    """Each measured replica count's boundary beside the model's prediction for it: the error
    against the bracket's reference rate (`reference_rate`), with the bracket's width beside
    it. `in_sample`: the counts whose boundaries the model was fitted to (the calibration's
    one replica when it is the same run's), labelled so, never a validation."""
    out = []
    for n, b in sorted(measured.items()):
        pred = predict(m, slos, n, routing).max_rate_per_s
        ref, what = reference_rate(b)
        out.append(PlanValidation(
            replicas=n, routing=routing, predicted_rate_per_s=pred,
            measured_meets_up_to_rate_per_s=b.meets_up_to_rate_per_s,
            measured_misses_from_rate_per_s=b.misses_from_rate_per_s,
            error=pred / ref - 1 if ref else None, measured_reference_rate_per_s=ref,
            reference=what, bracket_width=bracket_width(b), in_sample=n in in_sample))
    return out
