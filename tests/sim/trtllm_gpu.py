"""SIMULATED TensorRT-LLM on a SIMULATED GPU host (issue 32): a stand-in for `trtllm-serve MODEL
...` (TensorRT-LLM 1.2, PyTorch backend) where no GPU exists, started from the argv infopt's
TensorRT-LLM adapter builds. Its executable is a wrapper script named `trtllm-serve` that runs
this file (`write_serve`); the adapter finds it through INFOPT_TRTLLM_SERVE or a direct path. It

- prints "[TensorRT-LLM] TensorRT LLM version: 1.2.0+simulated" first on every run, as
  `import tensorrt_llm` does (tensorrt_llm/__init__.py), so `trtllm-serve --help` answers the
  adapter's version probe;
- parses its command line the way click does (tests/sim/trtllm_cli.py). The options and their aliases are those of
  tensorrt_llm/commands/serve.py at NVIDIA/TensorRT-LLM@00209af149e7774406881a37283dce303571eb11
  (the commit the adapter pins): `--tp_size` = `--tensor_parallel_size`, `--pp_size` =
  `--pipeline_parallel_size`, `--ep_size` = `--moe_expert_parallel_size`,
  `--kv_cache_free_gpu_memory_fraction` = `--free_gpu_memory_fraction`,
  `--extra_llm_api_options` = `--config`, ...; `trtllm-serve` is a click group whose
  DefaultGroup runs `serve` when the first word is not a command. Refusals print click's own
  text on stderr and exit 2 (pallets/click src/click/exceptions.py and parser.py, 8.0-8.3:
  "Error: No such option: --foo" with a difflib "Did you mean --bar?", "Error: Invalid value for
  '--port': 'x' is not a valid integer.", "Error: Missing argument 'MODEL'.", under "Usage:
  trtllm-serve serve [OPTIONS] MODEL" and "Try 'trtllm-serve serve --help' for help.". click
  8.4.0 (2026-05) reworded the first to "No such option '--foo'."; TensorRT-LLM's
  requirements.txt leaves click unpinned, so the text follows the image's click: this prints
  the 8.0-8.3 one);
- reads the --extra_llm_api_options YAML as TorchLlmArgs would: kv_cache_config (dtype "fp8"
  halves the KV bytes; free_gpu_memory_fraction, max_tokens, tokens_per_block),
  cuda_graph_config (null: no CUDA graphs), enable_attention_dp (each rank keeps every KV head:
  _util.py's KV size per token uses TP 1 then), disable_overlap_scheduler, return_perf_metrics,
  enable_chunked_prefill, speculative_config. The LLM API's models are pydantic with
  extra="forbid" (llmapi/llm_args.py builds them on llmapi/utils.py's StrictBaseModel), so an
  unknown key at any level is pydantic's "Extra inputs are not permitted [type=extra_forbidden,
  ...]" ValidationError, and a decoding_type outside DecodingBaseConfig.from_dict's registry
  its "ValueError: Invalid decoding type: X", exit 1. The known keys and decoding types are
  those recorded for 1.2 in infopt/engines/data/trtllm-1.2-llm-args.json (tests/sim/
  trtllm_cli.py reads them);
- drafts as 1.2 does: MTP's draft length is num_nextn_predict_layers (default 1), which
  overwrites max_draft_len (MTPDecodingConfig.from_dict, validate_speculative_config); NGram
  needs max_draft_len and max_matching_ngram_size > 0 and Eagle/DraftTarget a drafter, else
  validate_speculative_config's AssertionError or message, exit 1;
- refuses, on the PyTorch backend without enable_chunked_prefill, every prompt longer than
  max_num_tokens (default 8,192) with HTTP 400 and TensorRT-LLM's own message ("The sum of
  prompt length (9000.0), query length (0) should not exceed max_num_tokens (8192)":
  tensorrt_llm/llmapi/llm.py BaseLLM._check_arguments, before anything is scheduled);
- sizes memory with TensorRT-LLM's own rule (tensorrt_llm/_torch/pyexecutor/_util.py,
  KvCacheCreator): weights (weights / (TP x PP) per GPU) load, a small KV cache is allocated
  for the profiling run (enough blocks for max_num_tokens of dummy prompts,
  `_get_token_num_for_estimation`), the profiling run measures the peak, and the KV pool is
  `(total - peak + temporary KV) x free_gpu_memory_fraction` (default 0.9, a float32 once it
  crosses the C++ binding: 0.8999999761581421) over the bytes of one token, rounded up to
  whole blocks of tokens_per_block (32). The CUDA context, NCCL buffers, CUDA graphs and the
  profiling activations are this stand-in's guesses (CONTEXT_BYTES...), not measurements;
- prints TensorRT-LLM's own start-up lines with its numbers, each under a "[SIMULATED]" mark
  (the sources are quoted where each is printed): the temporary and then the real
  "[MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache (%d)." (so
  infopt.engines.trtllm.adapter.kv_from_log's "last such line" rule is exercised), the profiling
  lines, the attention-window warnings, and uvicorn's "Application startup complete." /
  "Uvicorn running on http://HOST:PORT (Press CTRL+C to quit)";
- fails as TensorRT-LLM fails: weights beyond the GPU give PyTorch's "torch.OutOfMemoryError:
  CUDA out of memory. Tried to allocate ..."; a KV pool that cannot be created at all gives
  the PyTorch backend's "Executor creation failed due to insufficient GPU memory." report
  (TensorRT-LLM PR #4497; tests/fixtures/engine_logs/trtllm_serve_executor_kv_cache_oom.log).
  A KV pool smaller than one max_seq_len sequence is NOT an error in TensorRT-LLM: it warns
  "Attention window size N exceeds upper bound M for available blocks. Reducing to M." and
  "Adjusted max_seq_len to M" (_torch/pyexecutor/resource_manager.py; a published trtllm-serve
  1.1.0rc3 start-up log of gpt-oss-120b on a DGX Spark, 2025-12-20, shows both) and serves the
  shorter context; this stand-in does the same. --fail_fast_on_attention_window_too_large
  turns that into the runtime error of
  cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp (the TensorRT backend's; that
  the PyTorch backend honours the flag is an assumption here);
- serves the OpenAI routes, /health and /version through tests/sim/gpu_host.py, plus
  trtllm-serve's own /metrics (JSON iteration stats, empty: iteration stats are off by
  default) and, with return_perf_metrics, Prometheus text on /prometheus/metrics under
  `trtllm_` names (tensorrt_llm/metrics/collector.py).

Everything it prints and serves says SIMULATED. Standard library and yaml only.
"""

from __future__ import annotations

import dataclasses
import math
import os
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file by the wrapper script: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sim.gpu_host import (
    GIB,
    Engine,
    Front,
    Gpu,
    Memory,
    Model,
    Server,
    Shape,
    Speculation,
    handler,
    kv_bytes_per_token,
    publish_gpu_memory,
    read_gpu,
    read_model,
    speculation,
    time_scale,
    weights_per_gpu,
    write_python,
)
from tests.sim.trtllm_cli import (
    MARK,
    PROG,
    UsageError,
    extra_forbidden,
    parse_cli,
    print_serve_help,
    read_extra,
    refuse,
    serve_args,
    validation_error,
)

VERSION = "1.2.0+simulated"
# Guesses, per GPU (not measurements): the CUDA context and library workspaces, NCCL buffers
# when there is more than one rank, the captured CUDA graphs, and the profiling run's
# activations (bytes per batched token per unit of hidden size; ~0.6 GiB for 8,192 tokens of
# a 4,096-wide model, the order of the 0.85 GiB a 1.1.0rc3 log shows for gpt-oss-120b).
CONTEXT_BYTES = int(0.55 * GIB)
NCCL_BYTES = int(0.25 * GIB)
GRAPH_BYTES = int(0.35 * GIB)
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 20
# BuildConfig's defaults (1.x), which serve.py uses for the flags left out.
DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_NUM_TOKENS = 2048, 8192


def write_serve(folder: Path) -> str:
    """An executable `trtllm-serve` for infopt's TensorRT-LLM adapter that runs this stand-in
    (the adapter's executable is the console script itself, not a python)."""
    return write_python(folder, __file__, "TensorRT-LLM", PROG)


# -- what the engine runs with -------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    model: str
    host: str
    port: int
    max_batch_size: int
    max_num_tokens: int
    max_seq_len: int | None  # None: the model's own (serve.py deduces it)
    tp: int
    pp: int
    fraction: float  # free_gpu_memory_fraction, as the C++ binding holds it (float32)
    kv_fp8: bool
    kv_max_tokens: int | None
    tokens_per_block: int
    graphs: bool
    graph_max_batch: int  # cuda_graph_config.max_batch_size (128 when unset: llm_args.py)
    attention_dp: bool
    overlap: bool  # the overlap scheduler (on unless disable_overlap_scheduler)
    prometheus: bool
    fail_fast: bool
    spec: dict | None = None  # the speculative_config block, as given
    chunked_prefill: bool = False  # enable_chunked_prefill (flag or YAML; default off)


def float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def settle(opts: dict, extra: dict) -> Settings:
    """The CLI flags, then the YAML on top (update_llm_args_with_extra_dict: a
    kv_cache_config block replaces the CLI-built KvCacheConfig, fraction included)."""
    kv = extra.get("kv_cache_config")
    if kv is None:
        kv, fraction = {}, opts.get("free_gpu_memory_fraction")
    else:  # the block's own fraction, or KvCacheConfig's default
        fraction = kv.get("free_gpu_memory_fraction")
    return Settings(
        model=opts["model"], host=opts.get("host", "localhost"), port=opts.get("port", 8000),
        max_batch_size=extra.get("max_batch_size", opts.get("max_batch_size",
                                                            DEFAULT_MAX_BATCH_SIZE)),
        max_num_tokens=extra.get("max_num_tokens", opts.get("max_num_tokens",
                                                            DEFAULT_MAX_NUM_TOKENS)),
        max_seq_len=extra.get("max_seq_len", opts.get("max_seq_len")),
        tp=extra.get("tensor_parallel_size", opts.get("tensor_parallel_size", 1)),
        pp=extra.get("pipeline_parallel_size", opts.get("pipeline_parallel_size", 1)),
        fraction=float32(0.9 if fraction is None else fraction),
        kv_fp8=str(kv.get("dtype", "auto")).startswith("fp8"),
        kv_max_tokens=kv.get("max_tokens"),
        tokens_per_block=kv.get("tokens_per_block", 32),
        graphs=extra.get("cuda_graph_config", {}) is not None,
        graph_max_batch=(extra.get("cuda_graph_config") or {}).get("max_batch_size") or 128,
        attention_dp=bool(extra.get("enable_attention_dp")),
        overlap=not extra.get("disable_overlap_scheduler"),
        prometheus=bool(extra.get("return_perf_metrics")),
        fail_fast=bool(opts.get("fail_fast_on_attention_window_too_large")),
        spec=extra.get("speculative_config"),
        chunked_prefill=bool(extra.get("enable_chunked_prefill",
                                       opts.get("enable_chunked_prefill", False))))


# 1.2's decoding types (DecodingBaseConfig.from_dict's registry) as the planted drafter kinds;
# "Eagle" is EAGLE-3 on the PyTorch backend. Other registry keys are refused before this.
_KINDS = {"NGram": "ngram", "MTP": "mtp", "Eagle": "eagle3", "DraftTarget": "draft_model"}
# TorchLlmArgs.validate_speculative_config's messages (llm_args.py:3049/3054 at v1.2.1).
_NO_DRAFTER = {"Eagle": "EAGLE3 draft model must be specified.",
               "DraftTarget": "Draft model must be specified."}


def draft_tokens(block: dict) -> int | None:
    """The draft length 1.2 runs: MTP's is num_nextn_predict_layers (default 1), written over
    max_draft_len by MTPDecodingConfig.from_dict; the others' is max_draft_len."""
    if block.get("decoding_type") == "MTP":
        return block.get("num_nextn_predict_layers", 1)
    return block.get("max_draft_len")


def speculation_of(s: Settings, m: Model | None = None) -> Speculation | None:
    """speculative_config as 1.2 checks it: validate_speculative_config's asserts (a positive
    draft length; NGram's max_matching_ngram_size > 0, default 0), a drafter for Eagle and
    DraftTarget, the model's own layers for MTP. Refusals exit 1."""
    block = s.spec
    if not block:
        return None
    name = str(block.get("decoding_type"))
    kind, k = _KINDS.get(name), draft_tokens(block)
    model = block.get("speculative_model") or block.get("speculative_model_dir")
    if kind is None:
        py_log("E", f"ValueError: Invalid decoding type: {name}")
        raise SystemExit(1)
    if not isinstance(k, int) or k < 1 or (
            kind == "ngram" and not block.get("max_matching_ngram_size", 0) > 0):
        py_log("E", f"AssertionError (validate_speculative_config): {name} {block!r}")
        raise SystemExit(1)
    if kind in ("eagle3", "draft_model") and not (model and (Path(model) / "config.json")
                                                  .is_file()):
        py_log("E", f"ValueError: {_NO_DRAFTER[name]}")
        raise SystemExit(1)
    if kind == "mtp" and m is not None and not m.mtp_layers:
        py_log("E", "ValueError: MTP needs num_nextn_predict_layers in the model's config")
        raise SystemExit(1)
    return speculation(kind, k)


def shape_of(s: Settings, max_len: int, m: Model | None = None) -> Shape:
    return Shape(tp=s.tp, pp=s.pp, dp=1, max_seqs=s.max_batch_size, max_len=max_len,
                 kv_fp8=s.kv_fp8, graphs=s.graphs, graph_max_batch=s.graph_max_batch,
                 spec=speculation_of(s, m))


# -- the memory ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sizing:
    weights: int  # per GPU
    kv_per_token: int  # per GPU
    outside_torch: int  # CUDA context, NCCL, CUDA graphs
    activation: int
    estimation_tokens: int  # the temporary KV cache of the profiling run
    available: int  # "available KV cache memory when calculating max tokens"
    max_tokens: int  # available // kv_per_token (capped by kv_cache_config.max_tokens)
    kv_tokens: int  # whole blocks: what "[MemUsageChange] Allocated ..." reports


def estimation_tokens(s: Settings, max_seq_len: int) -> int:
    """_util.py `_get_token_num_for_estimation`: dummy prompts of min(max_num_tokens,
    max_seq_len - 1) tokens filling max_num_tokens, each with its generated token (two with the
    overlap scheduler), each rounded up to whole blocks (requests share no block)."""
    per_request = min(s.max_num_tokens, max_seq_len - 1)
    extra = 2 if s.overlap else 1
    left, blocks = s.max_num_tokens, 0
    while left > 0:
        n = min(per_request, left)
        blocks += math.ceil((n + extra) / s.tokens_per_block)
        left -= n
    return blocks * s.tokens_per_block


def size_memory(m: Model, g: Gpu, s: Settings, max_seq_len: int) -> Sizing:
    """KvCacheCreator: available = (total - peak + temporary KV) x fraction, where the peak of
    the profiling run is weights + outside-torch memory + activations + the temporary KV."""
    shape = shape_of(s, max_seq_len)
    # _get_cache_size_per_token: with attention DP every rank holds all KV heads (TP 1).
    kv_shape = dataclasses.replace(shape, tp=1) if s.attention_dp else shape
    weights, per_token = weights_per_gpu(m, shape), kv_bytes_per_token(m, kv_shape)
    outside = CONTEXT_BYTES + (NCCL_BYTES if s.tp * s.pp > 1 else 0) + \
        (GRAPH_BYTES if s.graphs else 0)
    activation = s.max_num_tokens * m.hidden * ACTIVATION_BYTES_PER_TOKEN_HIDDEN
    available = int((g.cuda_total_bytes - weights - outside - activation) * s.fraction)
    max_tokens = max(0, available) // per_token
    if s.kv_max_tokens is not None:  # "The smaller value will be used."
        max_tokens = min(max_tokens, s.kv_max_tokens)
    kv_tokens = math.ceil(max_tokens / s.tokens_per_block) * s.tokens_per_block
    return Sizing(weights, per_token, outside, activation, estimation_tokens(s, max_seq_len),
                  available, max_tokens, kv_tokens)


# -- the log -------------------------------------------------------------------------------------

def say(line: str) -> None:
    print(f"{MARK}{line}", flush=True)


def py_log(level: str, message: str, rank: int | None = None) -> None:
    """tensorrt_llm.logger's Python lines: "[MM/DD/YYYY-HH:MM:SS] [TRT-LLM] [I] ...", with
    "[RANK n]" from the executor's workers."""
    where = "" if rank is None else f" [RANK {rank}]"
    say(f"[{time.strftime('%m/%d/%Y-%H:%M:%S')}] [TRT-LLM]{where} [{level}] {message}")


def cpp_log(level: str, message: str) -> None:
    """The C++ runtime's lines: "[TensorRT-LLM][INFO] ..."."""
    say(f"[TensorRT-LLM][{level}] {message}")


def gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def cuda_oom(g: Gpu, weights: int) -> None:
    """PyTorch's message (same text as the vLLM and SGLang stand-ins), as the executor worker
    reports it ("Failed to initialize executor on rank N: ...", trtllm#5872's log)."""
    oom = (f"CUDA out of memory. Tried to allocate {min(2.0, weights / GIB):.2f} GiB. GPU 0 has "
           f"a total capacity of {gib(g.cuda_total_bytes)} GiB of which 0 bytes is free.")
    py_log("E", f"Failed to initialize executor on rank 0: {oom}", rank=0)
    say(f"torch.OutOfMemoryError: {oom}")
    raise SystemExit(1)


def executor_oom(g: Gpu, component: str, free: int, created: list[str]) -> None:
    """The PyTorch backend's component report (PR #4497; the format of trtllm#5872's log in
    tests/fixtures/engine_logs/trtllm_serve_executor_kv_cache_oom.log)."""
    py_log("E", "Failed to initialize executor on rank 0: Executor creation failed due to "
           "insufficient GPU memory.", rank=0)
    for line in ["", f"The following component could not be created: {component}",
                 f"Total GPU memory (GiB): {gib(g.cuda_total_bytes)}",
                 f"Free GPU memory before component creation attempt (GiB): {gib(free)}", "",
                 "Previously created components and free GPU memory before/after creation "
                 "(GiB):", *created]:
        say(line)
    raise SystemExit(1)


def allocate(s: Settings, z: Sizing, tokens: int, max_tokens: int, max_seq_len: int,
             final: bool) -> int:
    """One KV cache allocation's lines; the max_seq_len it leaves (window clamped to fit).
    The warnings: _torch/pyexecutor/resource_manager.py (KVCacheManager) as a 1.1.0rc3 log
    prints them; the Allocated line: cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp."""
    py_log("W", f"Both free_gpu_memory_fraction and max_tokens are set (to {s.fraction} and "
           f"{max_tokens}, respectively). The smaller value will be used.")
    if max_seq_len > tokens:
        # cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp's error. Applied to
        # the real pool only (not the profiling run's small one): whether the PyTorch
        # backend's Python window clamp honours the flag at all is not established here.
        if s.fail_fast and final:
            cpp_log("ERROR", "Attention window too large to fit even a single sequence in the "
                    "KV cache. Failing fast rather than attempting an adjustment of the window "
                    f"sizes. Old: [{max_seq_len}], New: [{tokens}]")
            raise SystemExit(1)
        py_log("W", f"Attention window size {max_seq_len} exceeds upper bound {tokens} for "
               f"available blocks. Reducing to {tokens}.")
        py_log("W", f"Adjusted max_attention_window_vec to [{tokens}]")
        py_log("W", f"Adjusted window size {max_seq_len} to {tokens} in blocks_per_window")
        py_log("W", f"Adjusted max_seq_len to {tokens}")
        max_seq_len = tokens
    cpp_log("INFO", f"Number of tokens per block: {s.tokens_per_block}.")
    cpp_log("INFO", f"[MemUsageChange] Allocated {gib(tokens * z.kv_per_token)} GiB for max "
            f"tokens in paged KV cache ({tokens}).")
    py_log("I", f"max_seq_len={max_seq_len}, max_num_requests={s.max_batch_size}, "
           f"max_num_tokens={s.max_num_tokens}, max_batch_size={s.max_batch_size}")
    return max_seq_len


def profile(g: Gpu, s: Settings, z: Sizing) -> None:
    """_util.py KvCacheCreator's profiling lines (its mid-2025 wording, which the 1.1.0rc3 log
    shows; later releases reword the Peak line's tail)."""
    tmp = z.estimation_tokens * z.kv_per_token
    peak = z.weights + z.outside_torch + z.activation + tmp
    if s.graphs:
        py_log("I", "Creating CUDA graph instances for "
               f"{len(graph_batch_sizes(s.max_batch_size))} batch sizes.")
    py_log("I", "Memory used after loading model weights (inside torch) in memory usage "
           f"profiling: {gib(z.weights)} GiB")
    py_log("I", "Memory used after loading model weights (outside torch) in memory usage "
           f"profiling: {gib(z.outside_torch)} GiB")
    py_log("I", "Memory dynamically allocated during inference (inside torch) in memory usage "
           f"profiling: {gib(z.activation)} GiB")
    py_log("I", "Memory used outside torch (e.g., NCCL and CUDA graphs) in memory usage "
           f"profiling: {gib(z.outside_torch)} GiB")
    py_log("I", f"Peak memory during memory usage profiling (torch + non-torch): {gib(peak)} "
           f"GiB, available KV cache memory when calculating max tokens: {gib(z.available)} "
           f"GiB, fraction is set {s.fraction}, kv size is {z.kv_per_token}. device total "
           f"memory {gib(g.cuda_total_bytes)} GiB, , tmp kv_mem {gib(tmp)} GiB")
    py_log("I", f"Estimated max memory in KV cache : {gib(z.available)} GiB")


def graph_batch_sizes(max_batch_size: int) -> list[int]:
    """The default CUDA-graph batch sizes (llm_args.py: 1-31, 32, 64, 128 without padding;
    cuda_graph_config.max_batch_size 128), those the engine's max_batch_size allows."""
    return [b for b in [*range(1, 32), 32, 64, 128] if b <= max_batch_size]


def start_up(s: Settings, m: Model, g: Gpu, scale: float) -> tuple[Sizing, int]:
    """TensorRT-LLM's start-up lines, or its failure (SystemExit 1); the sizing and the
    max_seq_len it serves."""
    say(f"SIMULATED TensorRT-LLM {VERSION} trtllm-serve (PyTorch backend) on {g.count} x "
        f"SIMULATED {g.name} (tests/sim/trtllm_gpu.py): no GPU ran this")
    py_log("I", "Using LLM with PyTorch backend")
    max_seq_len = s.max_seq_len
    if max_seq_len is None:
        max_seq_len = m.native_context
        py_log("I", f"max_seq_len is not specified, using inferred value {max_seq_len}")
    if s.tp * s.pp > g.count:
        say(f"SIMULATED TensorRT-LLM: TP {s.tp} x PP {s.pp} needs more than the {g.count} "
            "GPUs of this host (the stand-in's own message)")
        raise SystemExit(1)
    z = size_memory(m, g, s, max_seq_len)
    time.sleep(min(z.weights / 2e9 * scale, 0.2))  # ~2 GB/s from the page cache
    free = g.cuda_total_bytes - CONTEXT_BYTES
    if z.weights > free:
        cuda_oom(g, z.weights)
    free -= z.weights
    tmp = z.estimation_tokens * z.kv_per_token
    created = [f"Model: {gib(free + z.weights)} / {gib(free)}",
               f"Sampler: {gib(free)} / {gib(free)}"]
    # The profiling run's cache, activations, graphs and NCCL must fit beside the weights.
    if tmp + z.activation + z.outside_torch - CONTEXT_BYTES > free:
        executor_oom(g, "Initial KV cache (temporary for KV cache size estimation)", free,
                     created)
    allocate(s, z, z.estimation_tokens, z.estimation_tokens, max_seq_len, final=False)
    profile(g, s, z)
    if z.kv_tokens < s.tokens_per_block:
        after = free - tmp
        executor_oom(g, "KV cache", after, created + [
            f"Initial KV cache (temporary for KV cache size estimation): {gib(free)} / "
            f"{gib(after)}", f"Drafter: {gib(after)} / {gib(after)}"])
    return z, allocate(s, z, z.kv_tokens, z.max_tokens, max_seq_len, final=True)


# -- serving -------------------------------------------------------------------------------------

def _prometheus(engine: Engine, name: str) -> str:
    """A few of tensorrt_llm/metrics/collector.py's metrics (labels as its docstring's
    example: model_name, engine_type)."""
    labels = f'model_name="{name}",engine_type="trtllm"'
    used = min(1.0, engine.running() * engine.shape.max_len / max(1, engine.mem.kv_tokens))
    return ("# HELP trtllm_request_success_total Count of successfully processed requests.\n"
            "# TYPE trtllm_request_success_total counter\n"
            f'trtllm_request_success_total{{{labels},finished_reason="length"}} '
            f"{engine.requests}\n"
            "# HELP trtllm_kv_cache_utilization KV cache utilization\n"
            "# TYPE trtllm_kv_cache_utilization gauge\n"
            f"trtllm_kv_cache_utilization{{{labels}}} {used}\n")


def _too_long(limit: int, prompt: int, n: int) -> str:
    # llmapi/llm.py's request check (the wording a client's test quotes from a real body).
    return (f"The sum of prompt length ({prompt}) and query length (0) max_tokens ({n}) should "
            f"not exceed max_seq_len ({limit})")


FRONT = Front(engine="TensorRT-LLM", version=VERSION, owned_by="tensorrt_llm (SIMULATED)",
              metrics=_prometheus, too_long=_too_long, flat_errors=True)


def prompt_refusal(s: Settings, prompt: int) -> str | None:
    """TensorRT-LLM's refusal of a prompt of `prompt` tokens (None: taken). The PyTorch backend
    checks every request before scheduling it (tensorrt_llm/llmapi/llm.py BaseLLM.
    _check_arguments): without enable_chunked_prefill, prompt_len / cp_size + query_len over
    max_num_tokens is refused, the length printed as the float that division gives; trtllm-
    serve answers HTTP 400 (wire bodies from 1.x servers quote "The sum of prompt length
    (72417.0), query length (0) should not exceed max_num_tokens (69632)")."""
    if s.chunked_prefill or prompt <= s.max_num_tokens:
        return None
    return (f"The sum of prompt length ({prompt / 1}), query length (0) should not exceed "
            f"max_num_tokens ({s.max_num_tokens})")


def trtllm_handler(engine: Engine, name: str, prometheus: bool,
                   settings: Settings | None = None) -> type:
    """gpu_host's routes, with trtllm-serve's metrics routes: /metrics is JSON iteration
    stats (empty: enable_iter_perf_stats is off), Prometheus text is on /prometheus/metrics
    only with return_perf_metrics (openai_server.py); and its per-request prompt check
    (prompt_refusal) before gpu_host's own length check."""
    base = handler(engine, name, FRONT)

    class H(base):
        def _too_long(self, prompt: int, n: int) -> bool:
            why = prompt_refusal(settings, prompt) if settings is not None else None
            if why is None:
                return super()._too_long(prompt, n)
            self._error(why, 400)
            return True

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._json([])
            elif self.path == "/prometheus/metrics" and prometheus:
                self._text(FRONT.metrics(engine, name))
            elif self.path == "/prometheus/metrics":
                self._json({"detail": "Not Found"}, 404)
            else:
                super().do_GET()
    return H


def ready_lines(host: str, port: int) -> None:
    """uvicorn's start-up lines, as trtllm-serve 1.1.0rc3 printed them."""
    for line in (f"INFO:     Started server process [{os.getpid()}]",
                 "INFO:     Waiting for application startup.",
                 "INFO:     Application startup complete.",
                 f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)"):
        say(line)


def run(s: Settings, model: Model, gpu: Gpu) -> None:
    scale = time_scale()
    z, max_seq_len = start_up(s, model, gpu, scale)
    mem = Memory(z.weights, z.kv_per_token, z.available, z.kv_tokens)
    # The capacity scheduler's default policy, GUARANTEED_NO_EVICT (llmapi/llm_args.py
    # SchedulerConfig.capacity_scheduler_policy), admits a request only when its prompt and
    # every output token fit the pool, so the pool never preempts: requests wait instead.
    engine = Engine(shape_of(s, max_seq_len, model), model, gpu, mem, scale,
                    reserve_outputs=True)
    publish_gpu_memory(s.tp * s.pp, z.weights + z.outside_torch + z.activation
                       + z.kv_tokens * z.kv_per_token)
    name = Path(s.model).name  # openai_server.py: a local model directory's basename
    server = Server((s.host, s.port), trtllm_handler(engine, name, s.prometheus, s))
    server.daemon_threads = True
    ready_lines(s.host, s.port)
    server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    # tensorrt_llm/__init__.py prints this on import, before click parses anything.
    say(f"[TensorRT-LLM] TensorRT LLM version: {VERSION}")
    try:
        args = serve_args(sys.argv[1:] if argv is None else argv)
        if args is None:
            return
        opts = parse_cli(args)
    except UsageError as err:
        refuse(err)
    if opts.get("help"):
        print_serve_help()
        return
    if opts.get("backend", "pytorch") != "pytorch":
        raise SystemExit(f"{MARK}SIMULATED TensorRT-LLM: only the PyTorch backend is simulated, "
                         f"not --backend {opts['backend']}")
    extra = read_extra(opts.get("extra_llm_api_options"))
    try:
        model_cls, unknown = extra_forbidden(extra)
    except ValueError as err:  # DecodingBaseConfig.from_dict's refusal
        say(f"ValueError: {err}")
        raise SystemExit(1) from None
    if unknown:
        for line in validation_error(model_cls, unknown).splitlines():
            say(line)
        raise SystemExit(1)
    run(settle(opts, extra), read_model(opts["model"]), read_gpu("TensorRT-LLM"))


if __name__ == "__main__":
    main()
