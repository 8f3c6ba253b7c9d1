"""TensorRT-LLM adapter (`trtllm-serve MODEL`, OpenAI-compatible routes).

Pinned: TensorRT-LLM 1.x (the 1.2 line: PyTorch backend by default). Flags checked against
tensorrt_llm/commands/serve.py at NVIDIA/TensorRT-LLM@00209af149e7774406881a37283dce303571eb11
(click options; main early in 2026, after the 1.2 branch: each spelling below is also a primary
option name of the late-2025 serve.py, so the 1.2 line between the two takes it) and the CLI
reference
https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html .
We render the spellings that both that source and the 0.18 reference
(https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html) accept, because 1.x
kept them as aliases of renamed options:
  MODEL (positional) --host --port --backend {pytorch,tensorrt} --max_batch_size --max_num_tokens
  --max_seq_len --tp_size (= --tensor_parallel_size) --pp_size (= --pipeline_parallel_size)
  --kv_cache_free_gpu_memory_fraction (= --free_gpu_memory_fraction)
  --extra_llm_api_options (= --config): a YAML file of LLM API options, read with yaml.safe_load
  and merged by llmapi/llm_args.py `update_llm_args_with_extra_dict`.

That merge *replaces* the CLI-built KvCacheConfig when the YAML has a `kv_cache_config` block,
so the free-memory fraction is copied into the block whenever both are set (else it would fall
back to 0.9 silently).

Routes (tensorrt_llm/serve/openai_server.py): GET /health (200 when the executor is healthy),
/health_generate, /version, /v1/models. `/metrics` there is JSON iteration stats, not Prometheus:
Prometheus text (names prefixed `trtllm_`, tensorrt_llm/metrics/collector.py) is served on
/prometheus/metrics when `return_perf_metrics: true` is in the extra options.
The served model name is the model directory's basename (no rename flag in the pinned CLI).
TensorRT-LLM is not installed on the optimizer's machines: tested on argv, YAML and log lines,
and every argv and YAML the adapter and its ladder build is checked against TensorRT-LLM 1.2's
own argument models and click options, recorded as data with their sources
(infopt/engines/data/trtllm-1.2-llm-args.json, read by infopt.engines.trtllm.args).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from infopt.costmodel.allocation import (
    CUDA_CONTEXT_BYTES,
    NCCL_BYTES,
    EngineKnobs,
    KvBudget,
    activation_peak_bytes,
)
from infopt.engines.base import (
    CONTINUOUS_USAGE,
    CheckedVersions,
    EngineAdapter,
    MemoryShape,
    locate_executable,
    min_tokens_and_ignore_eos,
    version_report,
)
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.trtllm.kernel_log import KERNEL_LOG
from infopt.engines.trtllm.rules import LAYOUT
from infopt.engines.trtllm.rules import RULES as LADDER
from infopt.specs.fit import KvObservation
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import EngineName, TrtllmConfig, with_knobs

ENV_OVERRIDE = "INFOPT_TRTLLM_SERVE"
# TensorRT-LLM runs on Linux only; the YAML is content-addressed so concurrent launches with
# different options never overwrite each other's file.
EXTRA_OPTIONS_DIR = "/tmp/infopt-trtllm"
GIB = 2**30


def locate() -> str:
    found = shutil.which("trtllm-serve")
    return locate_executable(
        ENV_OVERRIDE, Path(found) if found else None,
        missing="TensorRT-LLM's trtllm-serve is not installed here (it needs a Linux host with "
        "an NVIDIA GPU). Use the NGC image nvcr.io/nvidia/tensorrt-llm/release:1.2.x or `pip "
        "install tensorrt-llm` from NVIDIA's index, then put trtllm-serve on PATH or set "
        f"{ENV_OVERRIDE} to its path.",
        invalid="not an executable file: set it to the trtllm-serve console script of a "
        "TensorRT-LLM environment")


def extra_options(cfg: TrtllmConfig) -> dict[str, Any] | None:
    """The --extra_llm_api_options document as data (None: no file needed)."""
    if cfg.extra_llm_api_options is None:
        return None
    doc = cfg.extra_llm_api_options.model_dump(exclude_none=True)
    if "kv_cache_config" in doc and cfg.kv_cache_free_gpu_memory_fraction is not None:
        doc["kv_cache_config"]["free_gpu_memory_fraction"] = cfg.kv_cache_free_gpu_memory_fraction
    return doc or None


def extra_options_yaml(cfg: TrtllmConfig) -> str | None:
    doc = extra_options(cfg)
    return None if doc is None else yaml.safe_dump(doc, sort_keys=True, default_flow_style=False)


def build_launch(cfg: TrtllmConfig, executable: str, port: int) -> Launch:
    argv = [executable, cfg.model_path, "--host", cfg.host, "--port", str(port),
            "--backend", cfg.backend, "--max_seq_len", str(cfg.max_seq_len)]
    for flag, value in (("--max_batch_size", cfg.max_batch_size),
                        ("--max_num_tokens", cfg.max_num_tokens),
                        ("--tp_size", cfg.tp_size), ("--pp_size", cfg.pp_size),
                        ("--ep_size", cfg.ep_size)):
        if value is not None:
            argv += [flag, str(value)]
    if cfg.kv_cache_free_gpu_memory_fraction is not None:
        argv += ["--kv_cache_free_gpu_memory_fraction", str(cfg.kv_cache_free_gpu_memory_fraction)]
    files: dict[str, str] = {}
    text = extra_options_yaml(cfg)
    if text is not None:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = f"{EXTRA_OPTIONS_DIR}/extra-llm-api-options-{digest}.yaml"
        files[path] = text
        argv += ["--extra_llm_api_options", path]
    # Local weights only: the optimizer never lets an engine reach a hub on its own.
    return Launch(argv=argv, env={"HF_HUB_OFFLINE": "1"}, engine=EngineName.TRTLLM.value,
                  port=port, model_path=cfg.model_path, files=files)


# cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:
#   "[TensorRT-LLM][INFO] [MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache
#    (%d)." -- GiB = 1 << 30, the count is blocks in the primary pool x tokens per block.
# The PyTorch backend first allocates a small cache to profile memory and then the real one, so
# the last such line is the capacity served. 0.x releases (C++ runtime) logged
# "Using N tokens in paged KV cache." instead.
_ALLOCATED_RE = re.compile(
    r"Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)")
_USING_RE = re.compile(r"Using (\d+) tokens in paged KV cache")


def kv_from_log(text: str) -> KvObservation | None:
    lines = text.splitlines()
    alloc = [(m, ln) for ln in lines if (m := _ALLOCATED_RE.search(ln))]
    if alloc:
        m, line = alloc[-1]
        return KvObservation(tokens=int(m.group(2)), bytes=int(round(float(m.group(1)) * GIB)),
                             line=line.strip())
    using = [(m, ln) for ln in lines if (m := _USING_RE.search(ln))]
    if using:
        m, line = using[-1]
        return KvObservation(tokens=int(m.group(1)), line=line.strip())
    return None


# _torch/pyexecutor/resource_manager.py: when the KV pool holds fewer tokens than max_seq_len,
# the PyTorch backend warns "Attention window size N exceeds upper bound M for available
# blocks. Reducing to M." and "Adjusted max_seq_len to M", then serves the shorter context.
# It sizes twice (a small pool for the profiling run, then the real one), warning before each
# "Allocated ... paged KV cache" line: only the warnings before the last allocation speak for
# the served pool; the "max_seq_len=N, max_num_requests=M" line after it, where printed, says
# what is served.
_ADJUSTED_RE = re.compile(r"Adjusted max_seq_len to (\d+)")
_SERVED_RE = re.compile(r"max_seq_len=(\d+), max_num_requests=")


def context_shortened(text: str, cfg: TrtllmConfig) -> str | None:
    allocations = [m.start() for m in _ALLOCATED_RE.finditer(text)]
    served = [int(m.group(1)) for m in _SERVED_RE.finditer(text)]
    if served:
        final = served[-1]
    else:
        start = allocations[-2] if len(allocations) >= 2 else 0
        end = allocations[-1] if allocations else len(text)
        adjusted = [int(m.group(1)) for m in _ADJUSTED_RE.finditer(text, start, end)]
        final = min(adjusted) if adjusted else cfg.max_seq_len
    if final >= cfg.max_seq_len:
        return None
    return (f"lowered max_seq_len from {cfg.max_seq_len} to {final} tokens to fit its KV pool "
            "(\"Adjusted max_seq_len to ...\")")


# tensorrt_llm/__init__.py prints "[TensorRT-LLM] TensorRT LLM version: X" on import (older
# releases: "TensorRT-LLM version: X"), so any trtllm-serve invocation reports it.
_VERSION_RE = re.compile(r"TensorRT[- ]LLM version: (\S+)")


def parse_version(text: str) -> str:
    m = _VERSION_RE.search(text)
    return m.group(1) if m else "unknown"


@cache
def detect_version(executable: str) -> str:
    _, text = version_report([executable, "--help"], engine="TensorRT-LLM's trtllm-serve",
                             env_var=ENV_OVERRIDE, timeout_s=180)
    return parse_version(text)


def readiness_timeout_s(weights_bytes: int, cfg: TrtllmConfig) -> float:
    # Estimates: the PyTorch backend loads, profiles KV memory, autotunes kernels and captures
    # CUDA graphs (minutes); the TensorRT backend may first build an engine (tens of minutes).
    base = 600.0 if cfg.backend == "pytorch" else 1800.0
    return base + 30.0 * weights_bytes / GIB


def memory_shape(cfg: TrtllmConfig, target_concurrency: int, is_cpu: bool,
                 native_context_tokens: int | None = None) -> MemoryShape:
    seqs = min(cfg.max_batch_size or target_concurrency, target_concurrency)
    knobs: dict = {"max_num_batched_tokens": cfg.max_num_tokens,
                   "max_num_seqs": cfg.max_batch_size, "device_is_cpu": is_cpu}
    if cfg.kv_cache_free_gpu_memory_fraction is not None:  # else KvCacheConfig's 0.9
        knobs["free_gpu_memory_fraction"] = cfg.kv_cache_free_gpu_memory_fraction
    kv = cfg.extra_llm_api_options.kv_cache_config if cfg.extra_llm_api_options else None
    # A prompt cap below max_seq_len (no chunked prefill) is the context a full-context request
    # gets: the plan and the control's eligibility see the defaults' 8,192 tokens, not the
    # max_seq_len they were started with.
    context = min(cfg.max_seq_len, cfg.prompt_cap_tokens or cfg.max_seq_len)
    return MemoryShape(kv_dtype=(kv.dtype if kv and kv.dtype else "auto"),
                       context_tokens=context, max_sequences=seqs,
                       knobs=EngineKnobs(**knobs), tensor_parallel=cfg.tp_size or 1,
                       pipeline_parallel=cfg.pp_size or 1)


def control_config(t: ServingTarget) -> TrtllmConfig:
    """`trtllm-serve MODEL` at the model's full context (served as the directory's name): the
    engine's defaults, which refuse any prompt over max_num_tokens (8,192) when the context is
    longer (TrtllmConfig.prompt_cap_tokens). The control stays the defaults all the same; the
    fit sees the cap (memory_shape), so the run says the defaults fail the full context."""
    return TrtllmConfig(model_path=t.model_path, port=t.port,
                        served_model_name=Path(t.model_path).name,
                        max_seq_len=t.native_context_tokens)


def baseline_config(t: ServingTarget) -> TrtllmConfig:
    """The defaults, plus chunked prefill when the context is longer than an iteration's
    max_num_tokens: without it the PyTorch backend answers every longer prompt with HTTP 400
    (llm.py BaseLLM._check_arguments), so the full native context is not served. Chunked
    prefill splits such a prompt over iterations of max_num_tokens and is what that check
    lets through (it reads enable_chunked_prefill, nothing else); it is a TorchLlmArgs field
    (llm_args.py:2006 at v1.2.1), so it goes in the YAML with the other LLM API options."""
    cfg = control_config(t)
    if cfg.prompt_cap_tokens is None:
        return cfg
    out = with_knobs(cfg, {"extra_llm_api_options.enable_chunked_prefill": True})
    assert isinstance(out, TrtllmConfig)
    return out


def kv_allocation(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
           k: EngineKnobs) -> KvBudget:
    """TensorRT-LLM: free memory after weights and activations x free_gpu_memory_fraction
    (0.9), in blocks of 32 tokens (tokens_per_block default)."""
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    act = activation_peak_bytes(m, k.max_num_batched_tokens or 8192, k.max_num_seqs or 256, tp)
    free = memory_bytes - weights_bytes - ctx - act
    kv = int(free * k.free_gpu_memory_fraction)
    return KvBudget(memory_bytes, ctx + act, kv, 32, (
        f"TensorRT-LLM: KV = {k.free_gpu_memory_fraction:g} x free memory after weights "
        "and activations (free_gpu_memory_fraction)",
        f"activations ~{act / GIB:.2f} GiB, context ~{ctx / GIB:.2f} GiB (estimates)",
        "blocks of 32 tokens"))


ADAPTER = EngineAdapter(
    executable_env=ENV_OVERRIDE,
    venv_executable="bin/trtllm-serve",
    release_package="tensorrt-llm",
    kv_allocator=kv_allocation,
    name=EngineName.TRTLLM,
    # The knob capping how many requests run at once: the first tuning dimension.
    concurrency_knob="max_batch_size",
    concurrency_knob_why="TensorRT-LLM's runtime batch size cap",
    display_name="TensorRT-LLM trtllm-serve",
    config_type=TrtllmConfig,
    locate=locate,
    build_launch=build_launch,
    detect_version=detect_version,
    health_path="/health",
    # serve/openai_protocol.py: CompletionRequest and ChatCompletionRequest carry ignore_eos and
    # min_tokens; chat's max_completion_tokens accepts the alias max_tokens. The request models
    # are extra="forbid", so only fields that exist may be sent.
    forced_length_fields=min_tokens_and_ignore_eos,
    # TensorRT-LLM's StreamOptions (serve/openai_protocol.py) has the same vLLM extension.
    stream_counting=CONTINUOUS_USAGE,
    readiness_timeout_s=readiness_timeout_s,
    metric_prefix="trtllm_",
    no_token_scoring_why="trtllm-serve's completions return no prompt logprobs: its "
    "CompletionRequest has no such field and refuses unknown ones (extra=\"forbid\"; "
    "tensorrt_llm/serve/openai_protocol.py at 0076e93)",
    kv_from_log=kv_from_log,
    kernel_log=KERNEL_LOG,
    context_shortened=context_shortened,
    memory_shape=memory_shape,
    control_config=control_config,
    upstream_repos=("NVIDIA/TensorRT-LLM",),
    baseline_config=baseline_config,
    doc_url="https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html",
    container_image="nvcr.io/nvidia/tensorrt-llm/release:1.2.0",
    # TensorRT-LLM cannot be imported without a GPU (its PyPI entry is a stub for NVIDIA's
    # index; llm_args.py loads the CUDA bindings), so its own models judge infopt's YAML and
    # argv as recorded from the 1.2.1 source: infopt/engines/data/trtllm-1.2-llm-args.json.
    checked_versions=CheckedVersions(("1.2",), (
        "every argv and extra_llm_api_options YAML validated against TensorRT-LLM 1.2.1's "
        "argument models as recorded from its source: tests/unit/test_trtllm_llm_args.py")),
    container_executable="trtllm-serve",
    # The KV type is kv_cache_config.dtype, a nested option, not a flat knob.
    kv_dtype_knobs=(),
    layout_knobs=LAYOUT,
    ladder=LADDER,
)
