"""The engine adapter contract. Engines differ as data: each adapter module builds one
`EngineAdapter` value; shared process control lives in `infopt.engines.process`.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from infopt.costmodel.allocation import EngineKnobs, KvBudget
from infopt.engines.helm import HelmChart
from infopt.engines.kernel_log import KernelLog
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.layout import LayoutKnobs
from infopt.engines.rules import DimensionRule
from infopt.environ import scrubbed
from infopt.specs.contract import ContractRemedy
from infopt.specs.endpoint import PrefixCacheCounters, SpecCounters, StreamCounting, TokenScoring
from infopt.specs.fit import KvObservation, OffloadObservation
from infopt.specs.serving import AnyServingConfig, EngineName, KnobValue
from infopt.specs.trial import TuningDimension

# The serving configuration type an adapter starts (LlamaCppConfig for llama.cpp, ...).
C = TypeVar("C", bound=AnyServingConfig)

# Running-request caps tried below the target: powers of two, then the target itself.
_CAP_STEPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def locate_executable(env_var: str, default: Path | None, *, missing: str, invalid: str,
                      executable: bool = True) -> str:
    """The engine's executable (or interpreter): `$env_var` if set, else `default`. `missing`
    says how to install it (no override, no default); `invalid` how to fix a bad path. Both end
    up in an EngineUnavailableError the CLI prints as one paragraph."""
    from infopt.specs.base import EngineOverrideError, EngineUnavailableError

    override = os.environ.get(env_var)
    path = Path(override) if override else default
    if path is None:
        raise EngineUnavailableError(missing)
    ok = path.is_file() and (not executable or os.access(path, os.X_OK))
    if not ok:
        if override:
            raise EngineOverrideError(f"{invalid} (${env_var} points at {path})")
        raise EngineUnavailableError(f"{invalid} (expected at {path})")
    return str(path)


def listed_names(python: str, script: str) -> frozenset[str] | None:
    """The names an engine's own python prints as a JSON list on its last line (its model
    registry: infopt.engines.support.architecture_refusal); None when it did not answer (a
    stand-in, a broken env)."""
    try:
        out = subprocess.run([python, "-c", script], capture_output=True, text=True,
                             timeout=180, env=scrubbed())
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    try:
        got = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    except ValueError:
        return None
    return frozenset(got) if isinstance(got, list) and got else None


def version_report(argv: list[str], *, engine: str, env_var: str,
                   timeout_s: float) -> tuple[int, str]:
    """(exit status, stdout + stderr) of the engine's own version report. A program that hangs,
    cannot run, or exits printing nothing is not the engine: an error naming the executable
    and what it did, instead of a traceback, or an "unknown" version that fails minutes later."""
    fix = version_fix(engine, env_var)
    try:  # its own process group: a hung program's children are ended with it
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise probe_error(env_var)(
            f"`{shlex.join(argv)}` could not run ({exc.strerror or exc}); {fix}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise probe_error(env_var)(
            f"`{shlex.join(argv)}` did not answer within {timeout_s:.0f} s: {argv[0]} does not "
            f"behave like {engine} (its version report returns at once); {fix}") from None
    text = stdout + stderr
    if not text.strip():
        raise probe_error(env_var)(
            f"`{shlex.join(argv)}` exited with status {proc.returncode} and printed nothing: "
            f"{argv[0]} is not {engine}; {fix}")
    return proc.returncode, text


def version_fix(engine: str, env_var: str) -> str:
    """What to do about an executable that is not the engine."""
    return f"point ${env_var} at {engine}, or unset it to use the one `make engines` built"


def probe_error(env_var: str) -> type:
    """A bad executable the user named stops the run; the default one is skipped like a missing
    engine."""
    from infopt.specs.base import EngineOverrideError, EngineUnavailableError

    return EngineOverrideError if os.environ.get(env_var) else EngineUnavailableError


@dataclass(frozen=True)
class MemoryShape:
    """What a config asks of memory, in the cost model's terms."""

    kv_dtype: str
    context_tokens: int  # per sequence
    max_sequences: int  # sequences the engine runs at once (slots, max_num_seqs)
    knobs: EngineKnobs
    tensor_parallel: int = 1  # ranks sharing the KV heads (FitRequest.tp)
    pipeline_parallel: int = 1  # ranks sharing the layers (FitRequest.pp)


def min_tokens_and_ignore_eos(n: int) -> dict[str, Any]:
    """Exactly n output tokens on servers that take vLLM's sampling extensions (vLLM, SGLang,
    TensorRT-LLM): a floor, a cap, and no stop at the end-of-sequence token."""
    return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}


def _usage_completion_tokens(chunk: dict[str, Any]) -> int | None:
    usage = chunk.get("usage")
    return usage.get("completion_tokens") if usage else None


# vLLM's extension `stream_options.continuous_usage_stats`: usage (completion_tokens so far) on
# every chunk. SGLang and TensorRT-LLM copied it into their StreamOptions.
CONTINUOUS_USAGE = StreamCounting({"stream_options": {"continuous_usage_stats": True}},
                                  _usage_completion_tokens)


@dataclass(frozen=True)
class CheckedVersions:
    versions: tuple[str, ...]  # release prefixes: "0.32" matches 0.32.0 and 0.32.1
    how: str  # what judged the commands, for the report's note


def unchecked_version_note(checked: CheckedVersions | None, display_name: str,
                           installed: str) -> str | None:
    """A sentence for the report when the installed release is not one infopt's commands for
    this engine were checked against; None when it is (or nothing was pinned)."""
    if checked is None or not checked.versions:
        return None
    plain = installed.strip().lstrip("v")
    if any(plain == v or plain.startswith(v + ".") or plain.startswith(v + "+")
           for v in checked.versions):
        return None
    return (f"{display_name} {installed} is installed; infopt's commands for it were checked "
            f"against {', '.join(checked.versions)} ({checked.how}): flags or defaults that "
            "changed since may act differently.")


@dataclass(frozen=True)
class CpuKernelRequirement:
    """A knob value whose kernels exist only on some CPUs when the engine runs on one: the
    engine refuses to start (or crashes) elsewhere, so the plan and the tuning candidates leave
    it out on a CPU that has none of the `isa_any_of` sets in full (flag names as /proc/cpuinfo
    spells them)."""

    knob: str  # config field
    values: frozenset[str]  # values of that field needing the ISA
    isa_any_of: tuple[frozenset[str], ...]  # one whole set suffices
    what: str  # what the values switch on, for the reason shown to the user
    source: str  # where the engine enforces it (upstream file, or a recorded failure)


@dataclass(frozen=True)
class EngineAdapter(Generic[C]):
    name: EngineName
    concurrency_knob: str  # config field capping concurrent requests (its batching dimension)
    concurrency_knob_why: str
    display_name: str
    config_type: type[C]
    # Where the engine comes from on this machine: returns the executable (or interpreter) path,
    # raising EngineUnavailableError with what to do when it is missing.
    locate: Callable[[], str]
    # (config, executable, port) -> Launch. Pure: no I/O.
    build_launch: Callable[[C, str, int], Launch]
    # executable -> version string (runs the engine's own version report).
    detect_version: Callable[[str], str]
    health_path: str
    # Request-body fields that force exactly n output tokens on this engine's OpenAI routes.
    forced_length_fields: Callable[[int], dict[str, Any]]
    # Seconds to wait for readiness given the weights' size in bytes (bigger models load longer).
    readiness_timeout_s: Callable[[int, C], float]
    metric_prefix: str  # Prometheus metric namespace on /metrics
    # Startup log text -> what the engine says it allocated for KV (None if not logged).
    kv_from_log: Callable[[str], KvObservation | None]
    # (config, target concurrency, device is CPU, model's native context) -> MemoryShape.
    memory_shape: Callable[..., MemoryShape]
    # The control: the engine's out-of-the-box defaults (what `llama-server -m MODEL` or
    # `vllm serve MODEL` runs), every gain is stated against it. The baseline: the
    # specification's simplest correct configuration at the full native context.
    control_config: Callable[[ServingTarget], C]
    baseline_config: Callable[[ServingTarget], C]
    doc_url: str  # the CLI reference the flags were checked against
    # Container rendering: the engine's published image (pin a tag/digest before production)
    # and its executable inside that image. None: the engine does not run in a Linux container.
    container_image: str | None = None
    container_executable: str | None = None
    # Exact token counts for prompts: POST tokenize_path with tokenize_body(model, text); the
    # JSON answer -> token count. None: the engine has no tokenize route (counts approximate).
    tokenize_path: str | None = None
    tokenize_body: Callable[[str, str], dict[str, Any]] | None = None
    tokenize_count: Callable[[dict[str, Any]], int] | None = None
    # How every streamed chunk can carry the running output-token count, so a chunk holding k
    # tokens counts k (infopt.loadgen.client). None: the engine has no such option.
    stream_counting: StreamCounting | None = None
    # Whether the server keeps a connection open after a streamed response. When it closes it
    # without saying so (no `Connection: close`), a client that reuses the connection at once
    # races the close; the load generator then asks for the close itself.
    stream_keepalive: bool = True
    # The config fields that take the KV cache element type, and the types worth a plan row:
    # the native one first, then the engine's 8-bit type (llama.cpp: q8_0; the others: fp8).
    kv_dtype_knobs: tuple[str, ...] = ("kv_cache_dtype",)
    kv_dtypes: tuple[str, str] = ("auto", "fp8")
    # How it turns device memory into a KV budget: (model, memory bytes, weights bytes per
    # device, tp, device name, EngineKnobs) -> costmodel.allocation.KvBudget; the CPU backend's
    # own rule where it has one. Handed to the fit as data (FitRequest.kv.allocate).
    kv_allocator: Callable[..., KvBudget] | None = None
    kv_allocator_cpu: Callable[..., KvBudget] | None = None
    # Exact teacher forcing for the quality gate (infopt.engines.scoring). None: the gate
    # cannot score this engine's tokens and says so.
    token_scoring: TokenScoring | None = None
    # Why there is no exact teacher forcing on this engine (its source), when token_scoring is
    # None: the quality gate's report says it.
    no_token_scoring_why: str = "it offers no exact teacher forcing that infopt knows"
    # The Prometheus counters of drafted and accepted speculative tokens (None: none known).
    spec_counters: SpecCounters | None = None
    # The Prometheus counters of prefix-cache hits per prompt token (None: none known): each
    # replica's hit rate behind a router.
    prefix_cache_counters: PrefixCacheCounters | None = None
    # A JSON route with the mean accepted length (SGLang's /get_server_info); None: none.
    spec_accept_length_route: str | None = None
    # (startup log, config) -> why the ready engine serves less context than it was given
    # (an engine that shortens max_seq_len to fit its KV pool, with a warning only); None:
    # it does not do that, or did not. A start that did is refused: context is never cut.
    context_shortened: Callable[[str, Any], str | None] | None = None
    # (GET path, JSON key) that only this engine's server answers with: tells a bare URL's
    # engine apart (infopt.engines.identify_engine). None: not identifiable this way.
    identity_probe: tuple[str, str] | None = None
    # The environment variable its server reads an API key from (never argv, where `ps` shows
    # it; never the launch's printed env). None: no such variable, so infopt will not expose it.
    api_key_env: str | None = None
    # Secret-looking variables of infopt's own environment it still needs (a server that pulls
    # gated weights itself would name HF_TOKEN here). Every other one is scrubbed from its
    # environment (infopt.engines.process.engine_environ): infopt downloads weights itself.
    passes_secrets: tuple[str, ...] = ()
    # The tool that makes local weight variants of this engine's model files (the request's
    # `requantize`, behind the quantize gate). None: infopt makes none for it.
    local_quantizer: str | None = None
    # The formats it tries on the weights dimension when quantization is pre-authorized and
    # the request names none (the 4-bit candidates first, then the near-lossless one).
    weight_formats: tuple[str, ...] = ()
    # The environment variable that points infopt at another build of the engine (an upgrade,
    # an EngineRuntime block's executable); `locate` reads it.
    executable_env: str | None = None
    # Upgrade detection (infopt.engines.releases): the package index name, and executable ->
    # the installed package's version as the index spells it (None: not known).
    release_package: str | None = None
    installed_release: Callable[[str], str | None] | None = None
    # executable -> the device its build runs on: "cpu", "cuda", "rocm", "metal", "vulkan", ...
    # or "unknown". A CPU build is refused on a host with GPUs (infopt.engines.support
    # .build_mismatch). None: the engine has one build per device kind it reports itself.
    build_device: Callable[[str], str] | None = None
    # Where `executable_env`'s target lies inside a virtual environment the engine is installed
    # in (an EngineRuntime block's venv): the interpreter for engines run as `python -m`, the
    # console script otherwise. None: the engine is not installed as a Python package.
    venv_executable: str | None = None
    # (GET path, JSON key) where its server publishes the chat template it applies (the
    # reasoning probe's evidence). None: not published over HTTP.
    chat_template_route: tuple[str, str] | None = None
    # Config fields that can change what the API does (n with one slot, the context a prompt
    # may fill, tool parsers, KV type): the contract is re-probed when one changes. None: any
    # field can (every change is re-probed).
    api_surface_knobs: tuple[str, ...] | None = None
    # What gives a configuration contract features its defaults lack (specs.contract
    # ContractRemedy): named in the report when the baseline fails one.
    contract_remedies: tuple[ContractRemedy, ...] = ()
    # Where its issues are filed: issue-first troubleshooting searches these, in this order.
    upstream_repos: tuple[str, ...] = ()
    # The releases whose own code judged the commands infopt builds for this engine (version
    # prefixes: "0.32" covers 0.32.x), and how; a run on another release says so in its report.
    checked_versions: CheckedVersions | None = None
    # Knob values that need particular CPU instructions when the engine runs on a CPU.
    cpu_kernel_requirements: tuple[CpuKernelRequirement, ...] = ()
    # The tuning ladder's rules, one per dimension it can change (infopt.engines.rules);
    # empty: only its running-request cap is tuned.
    ladder: tuple[DimensionRule, ...] = ()
    # The checkpoint formats it serves (specs.model.ModelFormat values): routing skips an
    # engine for a checkpoint it cannot load, and picks the comparator's format by it.
    model_formats: tuple[str, ...] = ("hf",)
    # How it spells TP / PP / DP / EP (infopt.engines.layout.LayoutKnobs); None: it has no
    # multi-GPU layout of that kind (the matrix says so).
    layout_knobs: LayoutKnobs | None = None
    # The GPU vendors whose builds of this engine infopt runs, and how, in words ("nvidia":
    # CUDA; llama.cpp also "amd": Vulkan or ROCm/HIP): routing refuses the engine on another
    # vendor's GPU and routes a non-NVIDIA GPU to the engines that list its vendor first.
    gpu_builds: tuple[tuple[str, str], ...] = (("nvidia", "CUDA"),)
    # The knob that keeps only the first N layers on the GPU and the rest in host RAM
    # (llama.cpp's n_gpu_layers, -ngl); None: the engine holds the whole model on its devices.
    offload_knob: str | None = None
    # Its startup log's kernel-selection lines (infopt.engines.kernel_log.KernelLog); None:
    # infopt does not know them yet (the report says so).
    kernel_log: KernelLog | None = None
    # Its own Helm chart (infopt.engines.helm.HelmChart); None: it has none infopt knows.
    helm_chart: HelmChart | None = None
    # The model architectures (config.json `architectures`) the installed engine's own registry
    # lists, read through its located executable; None from the call: the probe did not
    # answer. None here: infopt cannot read its registry (the architecture is not judged).
    architectures: Callable[[str], frozenset[str] | None] | None = None
    # The offload the engine itself reports in its load log (llama.cpp: the layers it put on
    # the GPU and each model buffer); None: it reports none infopt reads.
    offload_from_log: Callable[[str], OffloadObservation | None] | None = None

    def scheduling_dimension(self, target_concurrency: int) -> TuningDimension:
        """Scheduling/batching, the first dimension on a fixed checkpoint: the running-request
        cap from one stream up to the target load (powers of two, then the target)."""
        # list(): a list[int] is no list[KnobValue] to mypy (lists are invariant).
        values: list[KnobValue] = list(sorted(
            {v for v in _CAP_STEPS if v < target_concurrency} | {target_concurrency}))
        return TuningDimension(knob=self.concurrency_knob, values=values,
                               why=self.concurrency_knob_why)
