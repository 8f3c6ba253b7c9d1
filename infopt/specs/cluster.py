"""Cluster serving: the SLO boundary of one configuration, replicas behind routers, and the
capacity plan (issue 34). What the cluster flow records and the report reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from .base import Spec


class Verdict(StrEnum):
    """A probe's SLO verdict, decided only where its requests decide it."""

    MEETS = "meets"  # every SLO met, beyond the sampling noise
    MISSES = "misses"  # some SLO missed, beyond the sampling noise
    UNDECIDED = "undecided"  # too few requests to tell either way


class SloCheck(Spec):
    """One SLO at one probe: `percentile` of `metric` within `max_s` means at least that share
    of requests within it; `meeting` of `requests` were, with the share's exact interval."""

    metric: str
    percentile: int
    max_s: float
    observed_s: float | None  # the percentile as measured (None: no sample)
    requests: int
    meeting: int
    share_low: float  # Clopper-Pearson bounds on the share of requests within max_s
    share_high: float
    verdict: Verdict


class Probe(Spec):
    """One measured arrival rate (Poisson, the user's lengths) and what it decided."""

    rate_per_s: float  # offered
    achieved_requests_per_s: float
    goodput_requests_per_s: float  # requests that met every SLO, per second of the phase
    requests: int
    errors: int
    checks: list[SloCheck]
    verdict: Verdict
    why: str
    # The requests' E2E times (successful ones): the capacity model's service time and its
    # squared coefficient of variation (None: no records given).
    e2e_mean_s: float | None = None
    e2e_cv2: float | None = None


class Boundary(Spec):
    """The highest rate that meets every SLO, as an interval: `meets_up_to_rate_per_s` met
    them (decided), `misses_from_rate_per_s` did not (decided; None: no rate tried missed)."""

    probes: list[Probe]
    meets_up_to_rate_per_s: float | None  # None: even the lowest rate tried did not meet
    misses_from_rate_per_s: float | None
    # cliff: goodput fell between the two ends (overload collapses it); slope: it held or rose
    # while a percentile crossed its limit; None: not bracketed.
    shape: Literal["cliff", "slope"] | None
    probes_budget: int
    measurements: int  # probes measured (a pooled pair is two)
    rel_tolerance: float  # the search stops when misses / meets <= 1 + this
    confidence: float  # of each verdict's one-sided bound
    notes: list[str] = Field(default_factory=list)

    @property
    def bracketed(self) -> bool:
        return self.meets_up_to_rate_per_s is not None and self.misses_from_rate_per_s is not None


Routing = Literal["pooled", "split"]


class ReplicaModel(Spec):
    """One replica as a queue, calibrated from its measured SLO boundary (an estimate): `slots`
    requests served at once, each for `service_mean_s` on average (CV^2 `service_cv2`), the
    measured light-load value of each SLO's percentile, and the measured decode-time
    percentiles against the offered rate (they grow with the batch, not with queueing)."""

    slots: int
    service_mean_s: float
    service_cv2: float
    light_load_rate_per_s: float
    light_load_s: dict[str, float]  # "ttft p90" -> seconds at the lightest met probe
    decode_curve: dict[str, list[tuple[float, float]]]  # "tpot p90" -> [(rate, s)]
    calibrated_from: str  # which probes, in words


class ReplicaPrediction(Spec):
    replicas: int
    routing: Routing
    max_rate_per_s: float  # the highest rate predicted to meet every SLO
    limited_by: str  # the SLO (or the slots' capacity) that sets it


class PlanValidation(Spec):
    """Predicted against measured boundaries at a replica count."""

    replicas: int
    routing: Routing
    predicted_rate_per_s: float
    measured_meets_up_to_rate_per_s: float | None
    measured_misses_from_rate_per_s: float | None
    # (predicted - measured) / measured, against the measured interval's nearer end; 0 when
    # the prediction falls inside it; None when nothing was measured to compare.
    error: float | None


class CapacityPlan(Spec):
    target_rate_per_s: float
    peak_rate_per_s: float  # what the plan sizes for (the target times the burst allowance)
    routing: Routing
    model: ReplicaModel
    predictions: list[ReplicaPrediction]
    replicas: int | None  # None: no count up to the plan's limit serves the peak
    gpus_per_replica: int
    gpus: int | None
    validations: list[PlanValidation] = Field(default_factory=list)
    method: str  # the model, in words, labelled an estimate


class ReplicaEvidence(Spec):
    """One replica behind a router over one measured scenario (its warm-up included): the
    requests the router's own counter says it got, and its prefix-cache counters' deltas."""

    url: str
    # Attempts, as the router counts them (a request it sent again counts twice); None: the
    # router's counter did not name this replica.
    requests_routed: int | None
    prompt_tokens_from_cache: int | None  # None: the engine exposes no such counter
    prompt_tokens_looked_up: int | None

    @property
    def prefix_hit_ratio(self) -> float | None:
        if not self.prompt_tokens_looked_up or self.prompt_tokens_from_cache is None:
            return None
        return self.prompt_tokens_from_cache / self.prompt_tokens_looked_up
