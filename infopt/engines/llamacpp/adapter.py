"""llama.cpp `llama-server` adapter.

Flags checked against the server README of the vendored llama.cpp (llama-cpp-python 0.3.36,
tools/server/README.md): -m, --host, --port, -c, -np/--parallel, -t, -fa on|off|auto, -ctk, -ctv,
-b, -ub, --metrics, -a/--alias, --spec-type, -md, --spec-draft-n-max,
--spec-ngram-simple-size-m, --cache-ram. Doc: https://github.com/ggml-org/llama.cpp/tree/master/tools/server
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

from infopt.bootstrap import default_paths
from infopt.costmodel.allocation import (
    GIB,
    LLAMACPP_COMPUTE_BUFFER_BYTES,
    LLAMACPP_CTX_PAD,
    EngineKnobs,
    KvBudget,
)
from infopt.engines.base import (
    CheckedVersions,
    EngineAdapter,
    MemoryShape,
    StreamCounting,
    locate_executable,
    probe_error,
    version_fix,
    version_report,
)
from infopt.engines.kernel_log import KernelLog
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.layout import LayoutKnobs
from infopt.engines.llamacpp.rules import DEFAULT_CACHE_RAM_MIB
from infopt.engines.llamacpp.rules import RULES as LADDER
from infopt.engines.scoring import LLAMACPP_SCORING
from infopt.hardware.host import detect_other_accelerators
from infopt.specs.contract import ContractRemedy
from infopt.specs.endpoint import PrefixCacheCounters, SpecCounters
from infopt.specs.fit import KvObservation, OffloadObservation
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import EngineName, LlamaCppConfig

ENV_OVERRIDE = "INFOPT_LLAMA_SERVER"


def locate() -> str:
    """$INFOPT_LLAMA_SERVER, else on a host with an AMD GPU the Vulkan build (`make engines`
    builds it there), else the CPU or CUDA build."""
    paths = default_paths()
    amd = detect_other_accelerators()[0] == "amd"
    return locate_executable(
        ENV_OVERRIDE, paths.llama_server_vulkan if amd else paths.llama_server, missing="",
        invalid=f"llama.cpp's llama-server{' Vulkan build' if amd else ''} binary is missing. "
        f"Run `make engines{'-vulkan' if amd else ''}` to build it into the per-machine cache "
        f"(~6 min on 2 cores), or set {ENV_OVERRIDE} to an existing llama-server executable")


# llama.cpp's own defaults in this build (common/common.h, tools/server/server.cpp): what
# `llama-server -m MODEL` runs. Flags equal to them are left off the command line.
DEFAULT_FLASH_ATTN = "auto"  # common_params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO
DEFAULT_CACHE_TYPE = "f16"  # common_params.cache_type_k/v = GGML_TYPE_F16
# --parallel unset = -1 = auto; server.cpp: "using n_parallel = 4 and kv_unified = true".
AUTO_PARALLEL_SLOTS = 4


def build_launch(cfg: LlamaCppConfig, executable: str, port: int) -> Launch:
    # --alias and --metrics change no serving behaviour: the name clients use, and /metrics.
    argv = [executable, "-m", cfg.model_path, "--host", cfg.host, "--port", str(port),
            "--alias", cfg.served_model_name, "--metrics"]
    if cfg.ctx_total_tokens is not None:
        argv += ["-c", str(cfg.ctx_total_tokens)]
    if cfg.parallel_slots is not None:
        argv += ["--parallel", str(cfg.parallel_slots)]
    if cfg.flash_attn != DEFAULT_FLASH_ATTN:
        argv += ["-fa", cfg.flash_attn]
    if cfg.cache_type_k != DEFAULT_CACHE_TYPE:
        argv += ["-ctk", cfg.cache_type_k]
    if cfg.cache_type_v != DEFAULT_CACHE_TYPE:
        argv += ["-ctv", cfg.cache_type_v]
    if cfg.threads is not None:
        argv += ["-t", str(cfg.threads)]
    if cfg.batch_tokens is not None:
        argv += ["-b", str(cfg.batch_tokens)]
    if cfg.ubatch_tokens is not None:
        argv += ["-ub", str(cfg.ubatch_tokens)]
    if cfg.spec_type is not None:
        argv += ["--spec-type", cfg.spec_type]
    if cfg.spec_draft_model is not None:
        argv += ["-md", cfg.spec_draft_model]
    if cfg.spec_draft_n_max is not None:
        argv += ["--spec-draft-n-max", str(cfg.spec_draft_n_max)]
    if cfg.spec_ngram_simple_size_m is not None:
        argv += ["--spec-ngram-simple-size-m", str(cfg.spec_ngram_simple_size_m)]
    if cfg.cache_ram_mib is not None:
        argv += ["--cache-ram", str(cfg.cache_ram_mib)]
    if cfg.log_verbosity is not None:
        argv += ["-lv", str(cfg.log_verbosity)]
    argv += _offload_args(cfg)
    return Launch(argv=argv, engine=EngineName.LLAMACPP.value, port=port,
                  model_path=cfg.model_path)


def _offload_args(cfg: LlamaCppConfig) -> list[str]:
    """What is kept in device memory and how it is split (a GPU build; a CPU build warns)."""
    argv = []
    if cfg.n_gpu_layers is not None:
        argv += ["-ngl", str(cfg.n_gpu_layers)]
    if cfg.n_cpu_moe is not None:
        argv += ["-ncmoe", str(cfg.n_cpu_moe)]
    if cfg.split_mode is not None:
        argv += ["-sm", cfg.split_mode]
    if cfg.tensor_split is not None:
        argv += ["-ts", ",".join(f"{x:g}" for x in cfg.tensor_split)]
    return argv


# The offload llama.cpp achieved, from its load log (src/llama-model.cpp, load_tensors, named
# llm_load_tensors in older builds; recorded lines: tests/fixtures/engine_logs/llamacpp_offload_*):
#   "%s: offloaded %d/%d layers to GPU"         (layers kept in device memory / all, +1 output)
#   "%s: %12s model buffer size = %8.2f MiB"    (one per buffer: CUDA0, Vulkan0, CPU_Mapped;
#                                                "%10s buffer size" in older builds)
_OFFLOADED_RE = re.compile(r"(?:llm_)?load_tensors: offloaded (\d+)/(\d+) layers to GPU")
_MODEL_BUFFER_RE = re.compile(
    r"(?:llm_)?load_tensors:\s+(\S+) (?:model )?buffer size =\s+([\d.]+) MiB")


def offload_from_log(text: str) -> OffloadObservation | None:
    """The layers the engine itself says it put on the GPU, and each buffer's size; None when
    it printed no offload line (a CPU build prints none: nothing is offloaded)."""
    m = _OFFLOADED_RE.search(text)
    if m is None:
        return None
    buffers = {name: int(float(mib) * 2**20) for name, mib in _MODEL_BUFFER_RE.findall(text)}
    return OffloadObservation(layers_offloaded=int(m.group(1)), layers_total=int(m.group(2)),
                              model_buffer_bytes=buffers, line=m.group(0))


# "llama_kv_cache:        CPU KV buffer size =   180.00 MiB" (one line per device buffer; printed
# at log verbosity >= 4 in this build, hence the log_verbosity knob).
_KV_BUFFER_RE = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")


def kv_from_log(text: str) -> KvObservation | None:
    """The KV cache the engine allocated. Under a partial offload the offloaded layers' KV is on
    the GPU and the rest in host RAM: the device's buffers are what the fit sizes against the
    device (its KV per GPU), so they alone are counted; a CPU build's are its whole cache."""
    found = _KV_BUFFER_RE.findall(text)
    if not found:
        return None
    device = [(name, mib) for name, mib in found if not name.upper().startswith("CPU")]
    counted = device or found
    names = {name for name, _ in counted}
    lines = [ln for ln in text.splitlines()
             if (m := _KV_BUFFER_RE.search(ln)) and m.group(1) in names]
    return KvObservation(bytes=int(round(sum(float(mib) for _, mib in counted) * 2**20)),
                         line="\n".join(lines))


# What this build prints at -lv 4 (measured, llama-server 0.3.36 on an AVX2 CPU): the ISA the
# CPU backend uses, where the weights live (CPU_REPACK: repacked for the ggml-cpu extra kernels,
# as SmolLM2's Q4_0 is here, 56.95 MiB of it; CPU_Mapped: the mmap-ed file as is, all of Q4_1
# and Q8_0 here; a CUDA buffer: offloaded), whether flash attention resolved on, the KV cache's
# types, and the graph's splits.
KERNEL_LOG = KernelLog(knobs={"log_verbosity": 4}, patterns=(
    ("CPU backend", r"system_info: .*"),
    ("weights buffer", r"load_tensors:\s+\S+ model buffer size = .*"),
    ("GPU offload", r"load_tensors: offloaded \d+/\d+ layers to GPU"),
    ("flash attention", r"resolve_fused_ops: Flash Attention \w+|llama_context: flash_attn "
                        r"+= \S+"),
    ("KV cache", r"llama_kv_cache: size = .*"),
    ("graph", r"sched_reserve: graph: nodes = .*"),
))

_VERSION_RE = re.compile(r"^version:\s*(.+?)\s*$", re.MULTILINE)


def parse_version(text: str) -> str:
    """The text after 'version:' in `llama-server --version`: upstream builds print
    '6123 (abc1234)', the llama-cpp-python vendored tree '0.5.0-dev (build 1, commit 0c1e570)'."""
    m = _VERSION_RE.search(text)
    return m.group(1) if m else "unknown"


@cache
def detect_version(executable: str) -> str:
    engine = "llama.cpp's llama-server"
    _, text = version_report([executable, "--version"], engine=engine, env_var=ENV_OVERRIDE,
                             timeout_s=30)
    if (version := parse_version(text)) == "unknown":  # every llama-server prints a version line
        first = text.strip().splitlines()[0][:80]
        raise probe_error(ENV_OVERRIDE)(
            f"`{executable} --version` printed no 'version:' line (its first line: {first!r}): "
            f"it is not {engine}; {version_fix(engine, ENV_OVERRIDE)}")
    return version


def readiness_timeout_s(weights_bytes: int, cfg: LlamaCppConfig) -> float:
    # Measured: 0.5 s for 98 MB on 2 cores (mmap). Load is disk-bound: allow 20 s per GiB.
    return 30.0 + 20.0 * weights_bytes / 2**30


def memory_shape(cfg: LlamaCppConfig, target_concurrency: int, is_cpu: bool,
                 native_context_tokens: int | None = None) -> MemoryShape:
    # Both cache types are set together by infopt; K's type sizes the cache per element.
    slots = cfg.parallel_slots or AUTO_PARALLEL_SLOTS
    if cfg.ctx_per_slot_tokens is not None:
        per_slot = cfg.ctx_per_slot_tokens
    elif native_context_tokens is not None:  # -c omitted: the trained context is the whole
        per_slot = native_context_tokens // slots  # pool, shared by the slots (unified KV)
    else:
        raise ValueError("-c is left to llama.cpp: give the model's native context to size it")
    # -ngl N (a number): N layers on the GPU, the rest in host RAM; "auto"/"all"/unset: sized
    # as all on the device (auto's own fitting is the engine's, read back from its log).
    layers = cfg.n_gpu_layers if isinstance(cfg.n_gpu_layers, int) else None
    return MemoryShape(kv_dtype=cfg.cache_type_k, context_tokens=per_slot, max_sequences=slots,
                       knobs=EngineKnobs(device_is_cpu=is_cpu, gpu_layers=layers,
                                         cpu_moe_layers=cfg.n_cpu_moe))


def control_config(t: ServingTarget) -> LlamaCppConfig:
    """`llama-server -m MODEL`: every knob at llama.cpp's own default."""
    return LlamaCppConfig(model_path=t.model_path, served_model_name=t.served_model_name,
                          port=t.port, parallel_slots=None, ctx_per_slot_tokens=None)


def baseline_config(t: ServingTarget) -> LlamaCppConfig:
    """The simplest correct configuration: one slot holding the full native context, one
    thread per usable CPU; the host-RAM prompt cache within the RAM the user allows for KV
    prefixes when that is less than the build's 8 GiB."""
    allowed = None if t.kv_prefix_ram_bytes is None else t.kv_prefix_ram_bytes // 2**20
    cap = allowed if allowed is not None and allowed < DEFAULT_CACHE_RAM_MIB else None
    return LlamaCppConfig(model_path=t.model_path, served_model_name=t.served_model_name,
                          port=t.port, threads=t.usable_cpus, parallel_slots=1,
                          ctx_per_slot_tokens=t.native_context_tokens, cache_ram_mib=cap)


def kv_allocation(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    """llama.cpp: n_ctx x per-token bytes of the -ctk/-ctv types, allocated up front by -c
    (padded to 256 cells); the fit adds weights and a compute buffer."""
    overhead = LLAMACPP_COMPUTE_BUFFER_BYTES
    return KvBudget(memory_bytes, overhead, memory_bytes - weights_bytes - overhead, 1, (
        "llama.cpp: KV = -c x per-token bytes of -ctk/-ctv, allocated up front",
        f"compute buffer ~{overhead / GIB:.2f} GiB (estimate)"), upfront_pad_cells=LLAMACPP_CTX_PAD)


# n > 1 choices run as parallel sequences, one slot each: with --parallel 1 llama-server
# answers n=2 with HTTP 400 "n: Value must be between 1 <= value <= 1" (recorded on 0.3.36);
# two slots serve it (the contract probe asks n=2; a client's own n needs as many slots).
N_CHOICES = ContractRemedy(
    features=["n"], knob_changes={"parallel_slots": 2},
    change="--parallel 2 (each of n choices takes a slot; the probe asks n=2)",
    source="llama-server 0.3.36's HTTP 400 for n=2 with --parallel 1")


def installed_release(executable: str) -> str | None:
    """The llama-cpp-python version a `make engines` build came from: its cache folder's
    marker ("llama-cpp-python==0.3.36 cpu=..."); None for a llama-server built elsewhere."""
    marker = Path(executable).resolve().parent.parent / ".complete"
    first = marker.read_text().split()[0] if marker.is_file() else ""
    return first.split("==", 1)[1] if first.startswith("llama-cpp-python==") else None

# `llama-server --list-devices` (common/arg.cpp): "Available devices:", then one line per
# backend device, "  CUDA0: NVIDIA H100 80GB HBM3 (81559 MiB, 80614 MiB free)", or "  (none)"
# for a CPU-only build (the CPU backend is not listed).
_DEVICE_LINE = re.compile(r"^\s+([A-Za-z]+)\d*: ", re.M)


def parse_build_device(text: str) -> str:
    if "Available devices:" not in text:
        return "unknown"
    kinds = [k.lower() for k in _DEVICE_LINE.findall(text.split("Available devices:", 1)[1])]
    return kinds[0] if kinds else "cpu"


@cache
def build_device(executable: str) -> str:
    try:
        out = subprocess.run([executable, "--list-devices"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return parse_build_device(out.stdout + out.stderr)


ADAPTER = EngineAdapter(
    executable_env=ENV_OVERRIDE,
    build_device=build_device,
    # The llama-cpp-python sdist `make engines` builds llama-server from (it vendors llama.cpp,
    # whose own releases are GitHub tags, not on a package index).
    release_package="llama-cpp-python",
    installed_release=installed_release,
    ladder=LADDER,
    kv_allocator=kv_allocation,
    name=EngineName.LLAMACPP,
    # The knob capping how many requests run at once: the first tuning dimension.
    concurrency_knob="parallel_slots",
    concurrency_knob_why="llama.cpp batches only across its --parallel slots; each slot keeps "
                         "the full native context",
    display_name="llama.cpp llama-server",
    config_type=LlamaCppConfig,
    locate=locate,
    build_launch=build_launch,
    detect_version=detect_version,
    health_path="/health",
    # llama-server honours ignore_eos on its OpenAI routes; max_tokens caps the length.
    forced_length_fields=lambda n: {"max_tokens": n, "ignore_eos": True},
    readiness_timeout_s=readiness_timeout_s,
    metric_prefix="llamacpp:",
    # tools/server/server-task.cpp (the --metrics text): counters named after vLLM's.
    spec_counters=SpecCounters("/metrics", "llamacpp:spec_decode_num_draft_tokens_total",
                               "llamacpp:spec_decode_num_accepted_tokens_total",
                               "llamacpp:spec_decode_num_drafts_total"),
    # The same text: prompt tokens computed ("excluding cached tokens") and served from cache.
    prefix_cache_counters=PrefixCacheCounters("/metrics", "llamacpp:prompt_tokens_cached_total",
                                              missed="llamacpp:prompt_tokens_total"),
    kv_from_log=kv_from_log,
    offload_from_log=offload_from_log,
    memory_shape=memory_shape,
    doc_url="https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md",
    container_image="ghcr.io/ggml-org/llama.cpp:server",
    container_executable="/app/llama-server",
    tokenize_path="/tokenize",
    contract_remedies=(N_CHOICES,),
    api_surface_knobs=("parallel_slots", "ctx_per_slot_tokens", "cache_type_k",
                       "cache_type_v", "flash_attn"),
    identity_probe=("/props", "default_generation_settings"),
    chat_template_route=("/props", "chat_template"),  # tools/server/README.md, GET /props
    api_key_env="LLAMA_API_KEY",  # llama-server --help: --api-key KEY (env: LLAMA_API_KEY)
    local_quantizer="llama-quantize",  # built beside llama-server by `make engines`
    # The specification's 4-bit default first, then the types x86 kernels make plausible.
    weight_formats=("Q4_0", "Q4_K_M", "Q5_K_M", "Q8_0"),
    token_scoring=LLAMACPP_SCORING,
    tokenize_body=lambda model, text: {"content": text},
    tokenize_count=lambda js: len(js["tokens"]),
    # Each streamed chunk then carries timings.predicted_n, the tokens generated so far
    # (server-context.cpp send_partial_response: stats are attached when timings_per_token).
    stream_counting=StreamCounting({"timings_per_token": True},
                                   lambda chunk: (chunk.get("timings") or {}).get("predicted_n")),
    # Measured on this build: each streamed response ends with the server closing the TCP
    # connection (a new client port per request) and no `Connection: close` header, so an
    # immediately reused connection fails with "Server disconnected without a response".
    stream_keepalive=False,
    # -ctk/-ctv; llama.cpp names its 8-bit cache type q8_0. No CPU-specific kernel limits: the
    # bootstrap builds it for the host's own ISA (GGML_NATIVE).
    kv_dtype_knobs=("cache_type_k", "cache_type_v"),
    control_config=control_config,
    upstream_repos=("ggml-org/llama.cpp",),
    baseline_config=baseline_config,
    kv_dtypes=("f16", "q8_0"),
    model_formats=("gguf",),
    offload_knob="n_gpu_layers",
    gpu_builds=(("nvidia", "CUDA"), ("amd", "Vulkan or ROCm/HIP")),
    layout_knobs=LayoutKnobs(missing=(
        "llama.cpp splits one model over GPUs by layers or rows (-sm layer|row, -ts), not "
        "TP/PP/DP/EP ranks; replicas are separate servers")),
    kernel_log=KERNEL_LOG,
    # The build `make engines` makes (llama-cpp-python 0.3.36's vendored llama.cpp, commit
    # 0c1e570): every command infopt builds runs against it in the tests.
    checked_versions=CheckedVersions(("0.5.0-dev (build 1, commit 0c1e570)",),
                                     "run by the test suite against that llama-server"),
)
