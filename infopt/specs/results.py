"""Measurements and the report. Every latency in seconds, every rate per second."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Literal

from pydantic import Field

from .approval import ExposureOutcome, GateAnswer
from .base import Spec
from .checkpoint import Shortlist
from .comparison import Comparison
from .contract import ContractCheck, ContractOutcome
from .decision import ConstraintDecision, GateWait
from .diagnosis import Diagnosis, Remedy
from .drafters import DrafterSearch
from .fit import CeilingRatio, DeviceBudget, KvCheck, MemoryFit, OffloadObservation
from .hardware import HardwareInventory
from .ladder import CeilingPick, EngineChoice, LadderOutcome, ParetoPoint
from .model import ModelProfile
from .paired import FinalDecision, MeasureName
from .quality import LongContextCheck, QualityVerdict, TaskSetOutcome
from .serving import ServingConfig
from .trial import KnobChange, TrialDimension, TrialRole
from .workload import Workload


class RunningEngine(Spec):
    """A started engine process, as handed between tasks (the Popen lives in engines.process)."""

    engine: str
    pid: int
    base_url: str
    port: int
    argv: list[str]
    env_overrides: dict[str, str]
    command: str  # the exact, copy-pasteable command line (env + argv, shell-quoted)
    version: str
    log_path: str
    startup_s: float
    # What the process group really listens on ("ip:port", from the socket table), and where
    # the API key it requires is kept when it was exposed (never the key itself).
    bind_addresses: list[str] = Field(default_factory=list)
    api_key_source: str | None = None


class RequestRecord(Spec):
    """One measured request. Times from time.perf_counter() relative to the request start."""

    request_id: str
    concurrency: int
    ok: bool
    error: str | None = None
    route: str = "chat_completions"  # infopt.specs.traffic.RouteName value
    stream: bool = True
    prompt_tokens: int | None = None  # from the engine's usage block
    prompt_tokens_requested: int | None = None  # None: the prompt length was approximate
    prompt_tokens_cached: int | None = None  # served from the engine's prefix cache, if reported
    # What the workload explains of that: the route's template plus a declared shared prefix
    # (and the unique head's tokens, which may begin alike); None when unknown (not checked).
    prompt_tokens_cache_allowed: int | None = None
    # Speculative decoding, where the engine reports it per request (llama.cpp's `timings`:
    # draft_n, draft_n_accepted): tokens drafted, and how many of them the target accepted.
    draft_tokens: int | None = None
    draft_tokens_accepted: int | None = None
    output_tokens: int | None = None  # from the engine's usage block
    output_tokens_requested: int
    content_chunks: int = 0
    # Output tokens seen in the stream: the engine's running count where it sends one, else one
    # per content chunk. chunk_tokens_counted: True = every chunk carried the engine's count;
    # False = some chunk's count was assumed to be 1; None = nothing was streamed.
    streamed_tokens: int | None = None
    chunk_tokens_counted: bool | None = None
    reconnects: int = 0  # sends repeated because a pooled connection was found closed
    ttft_s: float | None = None  # None for a non-streamed request
    e2e_s: float | None = None
    itl_s: list[float] = Field(default_factory=list)  # one gap per output token after the first chunk
    start_offset_s: float = 0.0  # request start relative to the level's measured phase start

    @property
    def length_reached(self) -> bool:
        return self.output_tokens == self.output_tokens_requested

    @property
    def tpot_s(self) -> float | None:
        """Decode time per output token after the first (the first token's time is TTFT):
        (E2E - TTFT) / (output tokens - 1); None without a stream or with one output token."""
        if (self.ttft_s is None or self.e2e_s is None or self.output_tokens is None
                or self.output_tokens < 2):
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def prompt_length_exact(self) -> bool | None:
        """usage.prompt_tokens equals the requested prompt length (None: nothing to compare)."""
        if self.prompt_tokens_requested is None or self.prompt_tokens is None:
            return None
        return self.prompt_tokens == self.prompt_tokens_requested


class Percentiles(Spec):
    n: int
    p50: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    low_sample_p95: bool  # fewer than 20 samples: p95 is an interpolation of few points
    low_sample_p99: bool = True  # fewer than 100 samples: likewise for p99


class LevelResult(Spec):
    """All measured requests at one concurrency level (or one scenario)."""

    concurrency: int
    requests: int
    errors: int
    error_rate: float = 0.0  # errors / requests
    lengths_not_reached: int
    # Exact prompts whose usage.prompt_tokens differed from the requested length.
    prompt_lengths_off: int = 0
    # Streamed requests where some chunk's token count was assumed to be 1 (the engine sent no
    # running count): their per-token ITLs are per-chunk gaps.
    chunk_counts_assumed: int = 0
    duration_s: float
    ttft_s: Percentiles  # streamed requests only
    itl_s: Percentiles  # one sample per output token after the first chunk
    tpot_s: Percentiles | None = None  # per request: (E2E - TTFT) / (output tokens - 1)
    e2e_s: Percentiles
    output_tokens_total: int
    prompt_tokens_total: int = 0
    prompt_tokens_mean: float | None = None  # from usage.prompt_tokens (template included)
    # Prompt tokens the engine served from its prefix cache (usage's cached_tokens), summed;
    # None when it reported none for any request (not measured, not zero).
    prompt_tokens_cached_total: int | None = None
    # Speculative decoding's drafted and accepted tokens, summed over the requests that reported
    # them (None: no request did: no speculation, or an engine that reports it only in totals).
    draft_tokens_total: int | None = None
    draft_tokens_accepted_total: int | None = None
    # Where those came from: None = the requests' own counts; else the engine's counters
    # around the scenario (its warm-up requests included).
    draft_counts_source: Literal["engine counters"] | None = None
    # Mean tokens a verification step yields, the target's own token included (1 + accepted /
    # verification steps), where the engine reports it; None: not reported.
    spec_accept_length: float | None = None
    output_tokens_per_s: float  # aggregate over the measured phase's wall time
    # The same inside the steady-state window of a closed loop (the target concurrency held;
    # ramp and drain left out: infopt.loadgen.steady); None: no such window (an open loop, a
    # failed request, fewer requests than workers). The throughput objective reads it.
    steady_output_tokens_per_s: float | None = None
    steady_window_s: float | None = None
    total_tokens_per_s: float = 0.0  # (prompt + output tokens) / wall time
    requests_per_s: float
    # Is the client the bottleneck? Its event-loop lag and its loop thread's CPU share of a core
    # during the phase (None: not measured); the flag, and why it is up
    # (infopt.loadgen.monitor.client_bound_reason; None: not client-bound or not measured).
    client_loop_lag_p99_s: float | None = None
    client_cpu_share: float | None = None
    client_saturated: bool | None = None
    client_bound_reason: str | None = None
    # The engine's own use during the phase (psutil over its process group; 100% = one core).
    engine_cpu_percent_mean: float | None = None
    engine_cpu_percent_max: float | None = None
    engine_rss_peak_bytes: int | None = None
    # NVML during the phase, over the engine's GPUs (None: no GPU or not sampled).
    gpu_util_percent_mean: float | None = None
    gpu_memory_used_peak_bytes: int | None = None

    @property
    def prefix_hit_ratio(self) -> float | None:
        """The share of prompt tokens served from the prefix cache (None: not reported)."""
        if self.prompt_tokens_cached_total is None or not self.prompt_tokens_total:
            return None
        return self.prompt_tokens_cached_total / self.prompt_tokens_total

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted over drafted tokens (None: nothing drafted, or not reported)."""
        if not self.draft_tokens_total or self.draft_tokens_accepted_total is None:
            return None
        return self.draft_tokens_accepted_total / self.draft_tokens_total


class SloResult(Spec):
    """One SLO judged on one measured scenario (infopt.analysis.slo; docs/metrics.md)."""

    metric: str  # SloMetric value: ttft, itl, tpot, e2e
    percentile: int
    max_s: float
    observed_s: float | None  # the run's value at the percentile; None: no sample or +inf
    samples: int  # what the percentile is over (ITL: token gaps; else requests)
    met: bool
    requests_meeting_fraction: float  # measured requests whose own value is within max_s


class ScenarioResult(Spec):
    """One measured traffic spec (a concurrency level, a sweep value, a standard scenario):
    what `infopt.loadgen.measure.measure` returns, for `infopt bench` and trials alike."""

    name: str
    arrival: str
    input_tokens_mean: float | None = None  # scheduled prompt tokens (mean)
    output_tokens_mean: float | None = None
    # Measured requests whose drawn prompt was longer than max_input_tokens and was cut to
    # it (an uncapped log-normal's tail; a longer fixed or capped length is refused upfront).
    clipped_inputs: int = 0
    level: LevelResult
    slos: list[SloResult] = Field(default_factory=list)
    goodput_requests_per_s: float | None  # None: the traffic states no SLOs
    slo_violated: bool | None  # some SLO not met; None without SLOs
    validation_passed: bool
    validation_failures: list[str]
    errors_by_kind: dict[str, int]
    records_path: str | None


class BenchmarkResult(Spec):
    """A trial's measurement: every scenario of the request's workload (one per sweep value)."""

    workload: Workload
    scenarios: list[ScenarioResult]

    @property
    def levels(self) -> list[LevelResult]:
        return [s.level for s in self.scenarios]

    @property
    def validation_passed(self) -> bool:
        return all(s.validation_passed for s in self.scenarios)

    @property
    def validation_failures(self) -> list[str]:
        return [f"{s.name}: {f}" for s in self.scenarios for f in s.validation_failures]

    def scenario(self, name: str) -> ScenarioResult:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(f"no scenario {name!r}")

    def level(self, concurrency: int) -> LevelResult:
        for lvl in self.levels:
            if lvl.concurrency == concurrency:
                return lvl
        raise KeyError(f"no level with concurrency {concurrency}")


class BenchResult(Spec):
    endpoint: str
    model: str
    workload: str
    scenarios: list[ScenarioResult]
    stopped_early: str | None = None
    created_at: str = Field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))


class Trial(Spec):
    trial_id: str
    role: TrialRole  # control, baseline or tuning (a StrEnum: compares equal to its value)
    dimension: TrialDimension | None  # what its value belongs to; None: control, baseline
    value: str | None
    repeat: int
    config: ServingConfig
    # Its folder under trials/ and the hash of what it measured (infopt.specs.trial.trial_key).
    key: str | None = None
    changes: list[KnobChange] = Field(default_factory=list)  # relative to the control
    contract: list[ContractCheck] = Field(default_factory=list)  # when the trial checked it
    quality: QualityVerdict | None = None  # the quality gate's verdict, when it ran
    # The long-context check, when the trial changed KV precision or weights against its
    # incumbent and the run had long windows (infopt.quality.long_run).
    long_context: LongContextCheck | None = None
    engine: RunningEngine | None
    benchmark: BenchmarkResult | None
    objective_value: float | None
    failed: str | None = None  # why the trial produced no measurement
    # The signal that ended the engine mid-trial (not sent by infopt: an operator, the OOM
    # killer); such a trial is started afresh under the request's `budgets.retries`.
    killed_by_signal: int | None = None
    fit: MemoryFit | None = None  # predicted memory fit of this configuration
    kv: KvCheck | None = None  # the engine's logged KV capacity against the fit's
    # What the engine put in device memory, read from its load log (llama.cpp); None: it
    # reported no offload (a CPU build) or infopt reads none for this engine.
    offload: OffloadObservation | None = None
    # The kernels its engine logged selecting (its startup log, or one load-only start of
    # its configuration at the level that logs them); None: infopt reads none for the engine.
    kernels: KernelCheck | None = None
    # GPU memory its engine held after the benchmark (NVML, its process group); None off GPUs.
    gpu_memory_bytes: int | None = None
    # The same per device index (NVML's), each rank's share: a layout fits when its fullest
    # GPU does, which the sum hides.
    gpu_memory_by_device_bytes: dict[int, int] | None = None
    diagnosis: Diagnosis | None = None  # why a start failed (first attempt), when it did
    remedy: Remedy | None = None  # the contract-preserving change applied after diagnosis
    ceilings: list[CeilingRatio] = Field(default_factory=list)  # measured / ceiling per level
    # The single-stream prompt rate (mean prompt / TTFT p50 at concurrency 1) against each
    # envelope's prefill ceiling (infopt.tuning.prefill_ceiling); empty without that level.
    prefill_ceilings: list[CeilingRatio] = Field(default_factory=list)
    approvals: list[GateAnswer] = Field(default_factory=list)  # the gates this trial needed
    # What it measured at the target level beside the objective (units in the names): the
    # secondary measures that order configurations tied on the objective.
    measures: dict[MeasureName, float] = Field(default_factory=dict)


class ControlGain(Spec):
    """The winner against the engine's out-of-the-box defaults, on the same workload: the gain
    a user gets from the run. Never clamped; negative means the defaults were better."""

    objective: str
    higher_is_better: bool
    control_median: float | None
    winner_median: float | None
    ratio: float | None  # winner / control
    comparison: Comparison | None  # bootstrap of winner - control over their repeated trials
    control_is_baseline: bool  # the defaults already were the baseline (one set of trials)
    note: str
    # The context every trial served when shorter than the model's native window (a start
    # shape or a no-fit decision), tokens; None: the native window.
    served_context_tokens: int | None = None
    # What to run when the defaults beat the winner beyond the noise (None: they did not).
    recommendation: str | None = None
    # The paired comparison of the ladder's winner with the control at the end of the run, the
    # drift check, and what the run recommends (the winner or the defaults) and why.
    decision: FinalDecision | None = None


class DeploymentRendering(Spec):
    """The winning configuration as a container command and a Kubernetes manifest."""

    image: str
    # The image's content digest when known; None: only its tag is known (the notes say so).
    image_digest: str | None = None
    container_command: str
    kubernetes_yaml: str
    # Values for the engine's own Helm chart, where it has one (infopt.engines.helm).
    helm_chart: str | None = None
    helm_values_yaml: str | None = None
    notes: list[str]


class WeightsIdentity(Spec):
    """Exactly which weights the recommended configuration serves."""

    path: str
    digest: str  # sha256 of the file, or of an HF directory's (path, sha256) list
    source: str  # "local file", or the hub repository and revision it was downloaded from


class Reproduction(Spec):
    """How to re-measure the recommended configuration by hand, and what to expect
    (infopt.tuning.reproduce)."""

    command: str  # the winner's exact command line (any free port works)
    bench_command: str  # `infopt bench` on the run's own workload file
    workload_file: str  # relative to the run folder
    objective: str
    unit: str
    trial_ids: list[str]
    expected: float  # the mean over the winner's trials
    low: float | None  # None: no configuration was repeated, so no noise is known
    high: float | None
    rule: str


class KernelLine(Spec):
    aspect: str  # "weights GEMM", "MoE backend", "flash attention", "compilation", ...
    line: str  # the engine's own words
    kernel: str | None = None  # the kernel or backend the line names, where it names one


class KernelVerdict(StrEnum):
    """The logged kernel against the support matrix's expected path for this checkpoint and
    device (infopt.engines.kernel_verify)."""

    AS_EXPECTED = "as expected"
    FALLBACK = "fallback"  # a slower path than the matrix expects here, or the engine says so
    OTHER_PATH = "another path"  # a path the matrix places on other devices, not a slower one
    UNRECOGNIZED = "unrecognized"  # a kernel name the matrix's paths do not know
    NOT_LOGGED = "not logged"  # the engine printed no kernel name to judge: undecided
    NO_EXPECTATION = "no expectation"  # the matrix has no path for this checkpoint here


class KernelFinding(Spec):
    verdict: KernelVerdict
    expected: str | None  # the matrix's path: kernel, tier, math, where, source
    found: list[str] = Field(default_factory=list)  # the kernel names the log gave
    detail: str  # one sentence: what ran against what was expected

    @property
    def flagged(self) -> bool:
        return self.verdict in (KernelVerdict.FALLBACK, KernelVerdict.OTHER_PATH,
                                KernelVerdict.UNRECOGNIZED)


class KernelCheck(Spec):
    """What one trial's engine logged of the kernels it selected (infopt.runs.load_evidence)."""

    log: str | None  # the log read, relative to the run folder; None: none was read
    how: str  # the trial's own startup log, or a load-only start at a higher log level
    lines: list[KernelLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # what the engine selects without a line
    finding: KernelFinding | None = None  # against the matrix; None: nothing read to judge


class KernelPath(Spec):
    """The kernels the recommended configuration ran with, read from the engine's log."""

    engine: str
    log: str | None  # the log read, relative to the run folder; None: none was read
    lines: list[KernelLine] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # what is not logged, how it was read
    finding: KernelFinding | None = None  # against the support matrix's expected path


class ProvenanceKind(StrEnum):
    MEASURED = "measured"  # by this run: a trial's records, the host's own benchmark
    ESTIMATED = "estimated"  # a formula over stated inputs (fit, ceilings, ratios to them)
    SOURCED = "sourced"  # read from a file, a URL or the hub's metadata
    CONFIGURED = "configured"  # the request, or the configuration a trial ran


class ProvenanceRule(Spec):
    """Where the numbers at `path` come from (infopt.report.provenance): placeholders in
    braces name fields of the objects around each number (a trial's id and folder)."""

    path: str
    kind: ProvenanceKind
    source: str


class PlotRef(Spec):
    """A picture of the report (infopt.report.plots), drawn from the run's own records."""

    name: str
    title: str
    file: str  # relative to the run folder
    series: int
    points: int


# report.json's format. Bumped when a field changes meaning or goes; a file without the field
# is of version 1 (reports written before it existed read the same way).
REPORT_SCHEMA_VERSION = 1


class SloOutcome(Spec):
    """The SLOs at the target load against what the run recommends (infopt.tuning.slo_gate):
    met beyond the sampling noise, or the SLO that binds hardest with the smallest viable
    alternatives, each from a measurement or labelled an estimate."""

    met: bool
    binding: str | None = None  # which SLO, by how much, at which load (None: met)
    loads: list[str] = Field(default_factory=list)  # each load measured, met or not
    alternatives: list[str] = Field(default_factory=list)


class OptimizationReport(Spec):
    schema_version: int = REPORT_SCHEMA_VERSION
    run_id: str
    created_at: str
    hardware: HardwareInventory
    # The device the ceilings and estimates priced (its peaks and their source); None in a
    # report made before it was recorded.
    device: DeviceBudget | None = None
    model: ModelProfile
    workload: Workload
    engine: str
    engine_version: str
    routing: list[str]  # routed engine order with reasons
    shortlist: Shortlist | None = None  # hub variants of `base_model`, when one was named
    drafter_search: DrafterSearch | None = None  # its verified drafters (GPU runs with a hub id)
    pruned: list[str] = Field(default_factory=list)  # candidate values the fit ruled out, why
    contract: list[ContractCheck]
    contract_outcome: ContractOutcome = Field(default_factory=ContractOutcome)
    # What the quality gate compared against, or why it did not run.
    quality_note: str | None = None
    # What the quality gate judged against: "served" (the served checkpoint's own weights: no
    # higher-precision reference), a higher-precision checkpoint (why), or None (no gate ran).
    quality_against: str | None = None
    trials: list[Trial]
    # The tuning ladder: every dimension in order, its candidates and decisions; the winner's
    # accepted changes; the Pareto set and the closest-to-ceiling configuration per level.
    ladder: LadderOutcome | None = None
    winner_label: str = "baseline"
    # The engines tuned (the routed one, its comparator) and which one's winner is recommended.
    engines: EngineChoice | None = None
    pareto: list[ParetoPoint] = Field(default_factory=list)
    closest_to_ceiling: list[CeilingPick] = Field(default_factory=list)
    winner_trial_id: str
    winner_config: ServingConfig
    winner_command: str
    control_config: ServingConfig | None = None  # the engine's defaults (trial 0)
    control_command: str | None = None
    baseline_config: ServingConfig | None = None
    gain_vs_control: ControlGain | None = None
    winner_deployment: DeploymentRendering | None = None
    # The winner on the specification's standard scenarios (short, medium, full context,
    # single stream, target concurrency).
    scenarios: list[ScenarioResult] = Field(default_factory=list)
    # The generative task sets: the reference's and the recommended configuration's answers.
    tasks: TaskSetOutcome | None = None
    # Every gate of the run with its answer, and the exposure of the recommended configuration.
    approvals: list[GateAnswer] = Field(default_factory=list)
    # Decisions asked instead of ending (a no-fit's constraint), and every gate's wait with the
    # work that ran meanwhile.
    decisions: list[ConstraintDecision] = Field(default_factory=list)
    gate_waits: list[GateWait] = Field(default_factory=list)
    exposure: ExposureOutcome | None = None
    notes: list[str]
    # The pictures (infopt.report.plots), drawn by the report writer from the run's records.
    plots: list[PlotRef] = Field(default_factory=list)
    kernel_path: KernelPath | None = None
    # The SLOs against the recommended configuration (None: the workload states none). When
    # they are not met the report leads with it and `infopt optimize` exits 3.
    slos: SloOutcome | None = None
    reproduce: Reproduction | None = None
    winner_weights: WeightsIdentity | None = None
    # Where every number above comes from (infopt.report.provenance), one rule per path.
    provenance: list[ProvenanceRule] = Field(default_factory=list)


class EngineFit(Spec):
    """An engine's baseline (its simplest correct configuration at the full context) against
    this machine's memory."""

    engine: str
    config: ServingConfig
    fit: MemoryFit


class NoFitReport(Spec):
    """What a run reports when no allowed engine's baseline fits this machine: the binding
    constraint and the smallest alternatives that would (each checked with the same model);
    nothing was started. report.json says so in `kind`."""

    kind: Literal["no-fit"] = "no-fit"
    run_id: str
    created_at: str
    hardware: HardwareInventory
    model: ModelProfile
    workload: Workload
    engines: list[EngineFit]
    binding: str  # the constraint that no configuration meets, in numbers
    decision: ConstraintDecision | None = None  # the decision asked, when one was
    notes: list[str] = Field(default_factory=list)
    provenance: list[ProvenanceRule] = Field(default_factory=list)

