"""One optimization request: the optimize flow's only parameter, its deployment's parameter
schema, and the YAML target file `infopt optimize --target FILE` reads (CLI flags override
fields). Sizes and counts are capped so a typo cannot schedule a week of trials.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from .approval import ExposeRequest
from .base import HttpUrlText, Spec
from .decision import NoFitPolicy
from .deploy import DeployTarget
from .ladder import Dimension
from .scenarios import ScenarioName
from .serving import EngineName, KnobValue, engine_knobs
from .traffic import RouteName, TrafficSpec
from .workload import Objective, Workload, default_objective, interactive_traffic

# The longest sequence a request may name, tokens: the largest native context of any model
# today (Llama 4 Scout's 10M). A longer context, prompt or output is a typo, not a workload;
# `infopt optimize --input-tokens/--output-tokens` and `bench --max-input-tokens` share it.
MAX_SEQUENCE_TOKENS = 10_000_000


class ModelTarget(Spec):
    # A local GGUF file or HF directory to serve; None = the bundled demo model (make engines).
    path: str | None = None
    # The hub id it derives from: its quantized variants are shortlisted (metadata only, no
    # download: a download needs an approval), revision-pinned.
    hub_id: str | None = Field(None, pattern=r"^[\w.-]+/[\w.-]+$")
    revision: str | None = None
    hub_endpoint: HttpUrlText | None = None  # a hub mirror; default $HF_ENDPOINT or huggingface.co
    # Files of hub_id (at revision) to download and serve, as glob patterns such as
    # ["*Q8_0.gguf"]: behind the download gate, instead of a local `path`.
    download: list[str] = Field(default_factory=list, max_length=64)
    # The same model in other formats here (an HF directory beside the GGUF): the engine
    # that serves one of them is tuned as the routed engine's comparator and the better
    # measured winner is recommended. With `path` unset, the bundled model's HF copy.
    other_formats: list[str] = Field(default_factory=list, max_length=4)
    # Shortlisted checkpoints of hub_id to download and try as weight candidates, as
    # "org/name" or "org/name:file.gguf", each behind the download gate. None listed and
    # downloads pre-authorized: the shortlist's best `max_checkpoints` each engine serves here.
    try_checkpoints: list[Annotated[str, Field(pattern=r"^[\w.-]+/[\w.-]+(:[^:/]+)?$")]] = \
        Field(default_factory=list, max_length=8)
    max_checkpoints: int = Field(2, ge=0, le=8)
    # Local draft models for speculative decoding (a GGUF for llama.cpp, a folder for vLLM and
    # SGLang), each sharing the model's tokenizer (checked where the request is read: the same
    # vocabulary size): the speculative step tries each as a series over draft lengths.
    draft_models: list[str] = Field(default_factory=list, max_length=4)

    @model_validator(mode="after")
    def _one_source(self) -> "ModelTarget":
        if self.try_checkpoints and not self.hub_id:
            raise ValueError("model.try_checkpoints names checkpoints from the shortlist of a "
                             "hub model: give model.hub_id too")
        if self.download and not self.hub_id:
            raise ValueError("model.download names files of a hub repository: give "
                             "model.hub_id too")
        if self.download and self.path:
            raise ValueError("model.path and model.download both say where the weights come "
                             "from: give one")
        return self


class Authorization(StrEnum):
    DOWNLOAD = "download"  # fetch weights
    QUANTIZE = "quantize"  # run calibration or a local quantization
    EXPOSE = "expose"  # bind an engine beyond 127.0.0.1


# llama-quantize's type names that infopt makes weight variants of (or uses as a reference).
GgufType = Literal["F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q4_1", "Q3_K_M",
                   "Q2_K"]
# llm-compressor's schemes infopt makes HF variants of (infopt.engines.hf_quantize).
HfScheme = Literal["W8A8", "W4A16", "FP8_DYNAMIC"]


class QuantizeSettings(Spec):
    """How a calibrated local quantization runs (llm-compressor's GPTQ/SmoothQuant; for
    GGUF variants, llama.cpp's importance matrix when `imatrix`)."""

    # A UTF-8 text file, samples separated by blank lines (None: infopt's default chat
    # sample, infopt.engines.calibration_texts); better when the traffic is known.
    calibration: str | None = None
    samples: int = Field(64, ge=8, le=4096, description="calibration samples")
    max_seq_len: int = Field(512, ge=32, le=32768, description="tokens per sample, at most")
    budget_s: float = Field(3600.0, gt=0, description="a quantization still running after "
                            "this many seconds is stopped and its variant skipped")
    imatrix: bool = Field(False, description="GGUF variants: compute llama.cpp's importance "
                          "matrix (llama-imatrix) on the calibration sample and quantize "
                          "with it (llama-quantize --imatrix)")

    @model_validator(mode="after")
    def _calibration_file(self) -> QuantizeSettings:
        if self.calibration is not None and not Path(self.calibration).expanduser().is_file():
            raise ValueError(f"quantize.calibration {self.calibration!r} is not a file: give "
                             "a UTF-8 text file of calibration samples separated by blank "
                             "lines, or leave it out for infopt's default chat sample")
        return self


class Budgets(Spec):
    # Paired rounds (incumbent and candidate back to back) before a comparison may decide, and
    # the most a close call may earn (infopt.tuning.rounds); the control and the baseline are
    # measured `repeats` rounds at the start.
    repeats: int = Field(3, ge=1, le=20, description="paired rounds before a verdict (1: "
                         "a look only, nothing can be decided)")
    max_rounds: int = Field(8, ge=2, le=40, description="the most paired rounds a comparison "
                                                        "may add until it is decided")
    # The measurement window after the start: its requests scaled so that one window's
    # relative noise (measured on the control and baseline) comes to this, at most
    # `max_window_scale` times the workload's own count (the run's time is the limit).
    window_rel_noise: float = Field(0.05, gt=0, le=1)
    max_window_scale: float = Field(4.0, ge=1, le=32)
    # Engines kept up between trials on a CPU host (the incumbent's and its candidate's, so
    # paired windows alternate without restarts); 1: every configuration change restarts (a
    # host short of memory); 0: every trial starts and stops its own engine. A GPU host keeps
    # at most one: each engine claims most of the GPU.
    engines_up: int = Field(2, ge=0, le=2)
    max_trials: int | None = Field(None, ge=1, le=500, description="stop planning past this")
    max_wall_s: float | None = Field(None, gt=0, le=7 * 86400,
                                     description="no new trial starts after this, s")
    # A change must beat the incumbent by this fraction beyond the noise (0: any gain whose
    # paired interval excludes none); screening uses the same margin.
    min_gain: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _rounds_order(self) -> Budgets:
        if self.max_rounds < self.repeats:
            raise ValueError(f"budgets.max_rounds ({self.max_rounds}) is below budgets.repeats "
                             f"({self.repeats}): a comparison needs at least `repeats` rounds; "
                             "raise max_rounds or lower repeats")
        return self
    # A trial whose engine was killed by a signal mid-trial is a fault of the machine, not of
    # the configuration: it is started afresh (each attempt kept as evidence) this many times.
    retries: int = Field(2, ge=0, le=10, description="fresh starts after an engine is killed "
                                                     "mid-trial")
    # A hung engine (deadlocked, stopped) would hold every request for the client's timeout:
    # the first request that gets nothing for this long fails the trial, and the engine is
    # ended. Long by default, since a long prefill on a busy CPU sends nothing for minutes.
    stall_timeout_s: float = Field(600.0, ge=1, le=3600, description="a request that gets "
                                   "nothing from the engine this long: the engine hung, s")


class ApiRequirements(Spec):
    """What the client needs of the server; the contract gate checks each (issue 12)."""

    routes: list[RouteName] = Field(default_factory=lambda: [RouteName.CHAT_COMPLETIONS],
                                    min_length=1)
    features: list[str] = Field(default_factory=list)  # e.g. "json_schema", "tools"


class KvPrefixBudget(Spec):
    """RAM/SSD the user allows for reusable KV prefixes (prefix caching, offload tiers)."""

    ram_bytes: int | None = Field(None, ge=0, le=2**44)
    ssd_bytes: int | None = Field(None, ge=0, le=2**50)


class TuneOverride(Spec):
    """Tune this one knob over these values instead of the ladder's dimensions."""

    knob: str = Field(..., min_length=1)
    values: list[KnobValue] = Field(..., min_length=1, max_length=32)
    base_overrides: dict[str, KnobValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _no_address(self) -> "TuneOverride":
        if "host" in {self.knob, *self.base_overrides}:
            raise ValueError("tune: `host` is not a tuning knob; to serve beyond 127.0.0.1 ask "
                             "for it with `expose: {address: ...}`, which waits for the expose "
                             "gate and requires an API key")
        known = engine_knobs()
        if unknown := sorted({self.knob, *self.base_overrides} - known):
            raise ValueError(f"{unknown} is not a knob of any engine; the knobs: "
                             + ", ".join(sorted(known)))
        return self


def _known_scenarios(names: object) -> object:
    """One sentence naming the misspelt scenarios and the choices (pydantic's own message for
    a union of an enum and a literal says it twice, per member)."""
    known = ["all", *(n.value for n in ScenarioName)]
    if isinstance(names, list) and (unknown := [n for n in names if n not in known]):
        raise ValueError(f"unknown scenario(s) {unknown}; choose from {known} (or [] for none)")
    return names


def _all_scenarios() -> list[ScenarioName | Literal["all"]]:
    return ["all"]


class OptimizeRequest(Spec):
    name: str = Field("optimize", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    model: ModelTarget = Field(default_factory=ModelTarget)
    # Engines allowed, in preference order; None = the routed order for this hardware.
    engines: list[EngineName] | None = Field(None, min_length=1)
    # The traffic, in the language of `infopt bench` workload files (a target file may also
    # name such a file); default: one active user chatting (a vague request).
    workload: TrafficSpec = Field(default_factory=interactive_traffic)
    # None: goodput when workload.slos are given, else latency for one active user, else
    # throughput at peak_active_generations (infopt.specs.workload.default_objective).
    objective: Objective | None = None
    # Standard scenarios the winner is measured on: "all", names, or [] for none (typed: a
    # misspelt name is refused where the request is read, before anything starts).
    scenarios: Annotated[list[ScenarioName | Literal["all"]], BeforeValidator(_known_scenarios)
                         ] = Field(default_factory=_all_scenarios, max_length=8)
    # Measured requests per scenario; None: each scenario's own count (at least 20, enough
    # for a p95; the report flags percentiles from fewer samples).
    scenario_requests: int | None = Field(None, ge=1, le=10_000)
    api: ApiRequirements = Field(default_factory=ApiRequirements)
    # Quality gate tolerance (issue 12): the largest accepted drop of the candidate's score
    # against the higher-precision reference, as a fraction.
    quality_tolerance: float = Field(0.02, ge=0, le=1)
    # The most prompts the quality gate may score to decide a verdict (issue 30): a candidate is
    # scored on 8, then 16, then 32 ... of the fixed pool (infopt.quality.prompts, 48 prompts)
    # until its interval clears the threshold one way or the other; still straddling it at the
    # budget, it is "undecided" and not accepted. The reference and its floor cover this many.
    quality_max_prompts: int = Field(32, ge=8, le=48)
    # Items per generative task set (arithmetic, facts, JSON schema, needle, French, code),
    # answered by the reference and by the recommended configuration; a value whose answers
    # regress beyond noise is not recommended. 0: token fidelity alone.
    quality_task_items: int = Field(8, ge=0, le=500)
    # The shortest context the user accepts if the native window cannot fit (None: only the
    # native context; infopt never shortens it on its own).
    min_context_tokens: int | None = Field(None, ge=16, le=MAX_SEQUENCE_TOKENS)
    # When no allowed engine's baseline fits: ask which constraint may change (a decision gate
    # offering the computed alternatives, waiting up to approval_timeout_s, then stopping),
    # stop with the no-fit report, or take the named change when it is among the alternatives.
    on_no_fit: NoFitPolicy = NoFitPolicy.ASK
    budgets: Budgets = Field(default_factory=Budgets)
    # Side effects allowed without asking (recorded as pre-authorized); every other download,
    # quantization and exposure waits at its gate for up to approval_timeout_s, then is denied.
    authorize: list[Authorization] = Field(default_factory=list)
    approval_timeout_s: int = Field(3600, ge=1, le=7 * 86400)
    # Serve the recommended configuration beyond 127.0.0.1 (behind the expose gate, with an
    # API key); None: loopback only. No other field or flag sets a non-loopback host.
    expose: ExposeRequest | None = None
    # Where a rendered deployment's pods get the weights and a hub token (report's Kubernetes
    # manifest and Helm values); nothing named: the values say the pod cannot start as is.
    deploy: DeployTarget = Field(default_factory=DeployTarget)
    # Weight variants to make locally, each behind the quantize gate: llama-quantize types of a
    # GGUF on llama.cpp, llm-compressor schemes of an HF checkpoint on vLLM; the ladder's
    # weights dimension (none listed, quantization pre-authorized: the engine's own formats
    # for this device).
    requantize: list[GgufType | HfScheme] = Field(default_factory=list, max_length=8)
    quantize: QuantizeSettings = Field(default_factory=QuantizeSettings)
    kv_prefix_budget: KvPrefixBudget = Field(default_factory=KvPrefixBudget)
    tune: TuneOverride | None = None
    # The ladder's dimensions to climb, kept in the specification's order (None: all of them);
    # the others are recorded as not asked for.
    dimensions: list[Dimension] | None = Field(None, min_length=1)
    # Knobs the baseline starts from, e.g. {enforce_eager: true} for a quick vLLM start.
    base_overrides: dict[str, KnobValue] = Field(default_factory=dict)
    port: int | None = Field(None, ge=1024, le=65535, description="None: a free port")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    # Issue-first troubleshooting asks GitHub when online: the search terms of a failed
    # start's root error line (not the log) go to github_url; false keeps them here.
    github_search: bool = True
    github_url: HttpUrlText | None = None  # a GitHub API mirror (tests: a local server)
    github_token_to_url: bool = Field(
        False, description="send the GitHub token to github_url too (a GitHub Enterprise host "
        "you trust); otherwise it goes to https://api.github.com only")
    credentials_block: str | None = Field(
        None, description="an InfoptCredentials block's name: the Hugging Face and GitHub "
        "tokens the tasks use; None: $HF_TOKEN and $GITHUB_TOKEN")

    @model_validator(mode="after")
    def _consistent(self) -> "OptimizeRequest":
        if unused := [r.route.value for r in self.workload.routes
                      if r.route not in self.api.routes]:
            raise ValueError(f"workload.routes {unused} are not among the required api.routes "
                             f"{[r.value for r in self.api.routes]}: tune on routes the clients "
                             "use, or add them to api.routes")
        if self.model.revision and not self.model.hub_id:
            raise ValueError("model.revision pins a hub revision: give model.hub_id too")
        if "host" in self.base_overrides:
            raise ValueError("base_overrides: `host` is not a tuning knob; to serve beyond "
                             "127.0.0.1 ask for it with `expose: {address: ...}`, which waits "
                             "for the expose gate and requires an API key")
        try:  # the objective must be measurable on this traffic
            self.tuning_workload()
        except ValidationError as exc:
            raise ValueError("; ".join(e["msg"].removeprefix("Value error, ")
                                       for e in exc.errors())) from None
        return self

    def unauthorized_gates(self) -> list[str]:
        """The kinds of gate this request will stop at for a person's answer."""
        wanted = ((["download"] if self.model.download or self.model.try_checkpoints else [])
                  + (["quantize"] if self.requantize else []) + (["expose"] if self.expose else []))
        return [k for k in wanted if k not in self.authorize]

    def tuning_workload(self) -> Workload:
        """The traffic with its objective resolved: what every trial measures and is judged on."""
        return Workload(traffic=self.workload,
                        objective=self.objective or default_objective(self.workload))
