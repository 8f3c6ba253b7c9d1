"""Cluster serving: the SLO boundary of one configuration, replicas behind routers, and the
capacity plan (issue 34). What the cluster flow records and the report reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from .base import Spec
from .deploy import DeployTarget
from .results import PlotRef
from .traffic import Slo


class Policy(StrEnum):
    """What a routing policy does, whatever the router calls it (infopt.cluster.routers)."""

    ROUND_ROBIN = "round_robin"  # each replica in turn: ordinary routing
    LOAD_AWARE = "load_aware"  # power of two choices: the less loaded of two sampled replicas
    CACHE_AWARE = "cache_aware"  # the replica whose radix tree matches most of the prompt
    SESSION_HASH = "session_hash"  # a consistent hash of the request's session id


# The routers infopt/cluster/routers.py knows (its ROUTERS; a unit test keeps them equal).
ROUTER_NAMES = ("vllm-router", "sglang-router")


def _one_of(values: list[str], known: tuple[str, ...], what: str) -> list[str]:
    bad = [v for v in values if v not in known]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(bad)}: choose from {', '.join(known)}")
    return values


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
    # Requests completed per second after the first quarter of the phase (differences of
    # completion times, so no request's own latency biases it): what the server kept up with.
    # Below SUSTAINED x the rate they were sent at, the queue grows whatever the percentiles of a short
    # probe show, and the probe misses (None: too few records to tell).
    completion_rate_per_s: float | None = None
    send_rate_per_s: float | None = None  # the rate the requests were really sent at


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
    # The queueing wait's stretch beyond Allen-Cunneen's, fitted to the one-replica boundary
    # (1: not fitted).
    wait_scale: float = 1.0
    # A CPU host: replicas share its cores once their threads outnumber them, and each then
    # serves proportionally slower (None: GPU replicas, each on its own devices).
    host_cores: int | None = None
    threads_per_replica: int | None = None


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
    # predicted / reference - 1, the reference being the rate the SLO sat at its margin (the
    # undecided rates inside the bracket, two runs pooled; their geometric mean if several),
    # else the bracket's geometric middle; None: not bracketed (infopt.cluster.capacity).
    error: float | None
    measured_reference_rate_per_s: float | None = None
    reference: str = ""  # which of the two, in words
    bracket_width: float | None = None  # misses_from / meets_up_to - 1 (None: not bracketed)
    # The model was fitted to this count's boundary (the one-replica bracket of the run it was
    # calibrated on): the error is in-sample, not a validation.
    in_sample: bool = False


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


class RouterRun(Spec):
    """One router and policy over one workload, on `replicas` replicas: the measured scenario's
    headline numbers and each replica's evidence."""

    router: str  # "vllm-router 0.1.17"
    policy: str  # Policy value
    policy_flag: str  # what the router calls it
    workload: str  # "sessions" (prefix groups, one X-Session-ID each) or "unique" (none shared)
    replicas: int
    requests: int
    errors: int
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    e2e_p50_s: float | None
    prefix_hit_ratio: float | None  # over all replicas: cached / looked-up prompt tokens
    evidence: list[ReplicaEvidence]
    contract_passed: bool | None = None  # the API contract through the router (None: not run)
    # Greedy answers through the router equal to a replica's own (None: not run), and how.
    quality_identical: bool | None = None
    quality_detail: str | None = None
    caveat: str | None = None  # what the policy relies on that these replicas do not give
    failed: str | None = None  # the router did not start or the scenario did not run


class ClusterRequest(Spec):
    """What the `cluster` flow takes: the accepted configuration, the traffic and its SLOs, the
    routers and replica counts to measure, the plan's target."""

    deploy: DeployTarget | None = Field(None, description="where the rendered Helm values' "
                                        "pods get the weights and a hub token; None: the "
                                        "accepted run's own `deploy`")
    baseline_run: str | None = Field(
        None, description="run id of the optimize run whose winner is served; None: the runs "
        "folder's accepted run (`infopt accept RUN_ID`)")
    slos: list[Slo] = Field(default_factory=list, description="the SLOs the boundary is "
                            "searched for; empty: the accepted run's workload SLOs")
    replica_counts: list[int] = Field(default_factory=lambda: [1, 2], min_length=1,
                                      description="replica counts measured (1 is always "
                                      "measured: the capacity model is calibrated on it)")
    routers: list[str] = Field(default_factory=lambda: ["vllm-router", "sglang-router"])
    policies: list[str] = Field(
        default_factory=lambda: ["round_robin", "load_aware", "cache_aware", "session_hash"],
        description="routing policies compared (each router runs those it has)")
    probe_requests: int = Field(40, ge=10, le=2000, description="measured requests per "
                                "boundary probe (more: tighter verdicts, longer probes)")
    max_probes: int = Field(15, ge=3, le=40)
    start_rate_per_s: float | None = Field(
        None, gt=0, description="the boundary search's first rate; None: half the rate the "
        "winner served at the target load")
    session_groups: int = Field(8, ge=1, le=256, description="sessions (prefix groups) in "
                                "the router comparison's session workload")
    session_prefix_tokens: int = Field(512, ge=16, le=32768)
    comparison_requests: int = Field(48, ge=8, le=2000)
    target_rate_per_s: float | None = Field(
        None, gt=0, description="the rate the capacity plan sizes for; None: the highest "
        "rate measured on the largest replica count")
    burst_factor: float = Field(1.5, ge=1, le=10, description="the plan sizes for the target "
                                "times this (bursts above the mean rate)")
    threads_per_replica: int | None = Field(
        None, ge=1, description="CPU engines: threads each replica gets; None: the usable CPUs "
        "split over the largest replica count")

    @field_validator("routers")
    @classmethod
    def _routers(cls, v: list[str]) -> list[str]:
        return _one_of(v, ROUTER_NAMES, "router(s)")

    @field_validator("policies")
    @classmethod
    def _policies(cls, v: list[str]) -> list[str]:
        return _one_of(v, tuple(p.value for p in Policy), "policy(ies)")

    @field_validator("replica_counts")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        if any(n < 1 or n > 64 for n in v):
            raise ValueError("replica_counts are between 1 and 64")
        return sorted({1, *v})


class HelmValues(Spec):
    """One chart's values for the measured winner at the plan's replica count, validated
    against the chart's own values schema."""

    chart: str  # "llm-d-stack 0.1.0"
    schema_file: str  # infopt/cluster/schemas/<file> (source and version in SOURCE.md)
    values_yaml: str
    errors: list[str]  # schema violations (empty: valid)
    notes: list[str] = Field(default_factory=list)


class InterferenceSample(Spec):
    """What one replica measured for the interference rule (infopt.cluster.interference)."""

    itl_alone_s: float | None  # decode ITL p95 of the target load alone (None: not streamed)
    itl_mixed_s: float | None  # the same with long prompts sent beside it
    long_prompt_tokens: int
    prefill_tokens_per_s: float | None  # the long prompts' tokens over their TTFT, mean
    decode_tokens_per_s: float | None  # output tokens/s of the load alone
    mean_prompt_tokens: float
    mean_output_tokens: float


class Interference(Spec):
    """Prefill/decode interference on one replica: decode ITL p95 of the target load alone and
    with long prompts sent beside it, and what that recommends."""

    itl_p95_alone_s: float
    itl_p95_mixed_s: float
    long_prompt_tokens: int
    threshold: float  # ratio above which separate pools are recommended
    prefill_tokens_per_s: float | None  # one replica, long prompts: prompt tokens / TTFT
    decode_tokens_per_s: float | None  # one replica at the target load, alone
    recommend_pools: bool
    prefill_replicas: int | None = None  # sized for the plan's peak (an untested suggestion)
    decode_replicas: int | None = None
    why: str

    @property
    def ratio(self) -> float:
        return self.itl_p95_mixed_s / self.itl_p95_alone_s if self.itl_p95_alone_s else 0.0


class ClusterReport(Spec):
    run_id: str
    created_at: str
    baseline_run: str
    engine: str
    engine_version: str
    winner_command: str
    slos: list[Slo]
    boundaries: dict[int, Boundary]  # replica count -> its boundary (1: direct, else routed)
    boundary_routes: dict[int, str]  # how each count was reached ("direct", "vllm-router ...")
    routers: list[RouterRun]
    plan: CapacityPlan | None
    helm: list[HelmValues] = Field(default_factory=list)
    interference: Interference | None = None
    plots: list[PlotRef] = Field(default_factory=list)  # infopt.report.cluster_plots
    notes: list[str] = Field(default_factory=list)
