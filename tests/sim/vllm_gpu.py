"""SIMULATED vLLM on a SIMULATED GPU host (issue 32): a stand-in for `python -m
vllm.entrypoints.openai.api_server ...` where no GPU exists, so the GPU paths of infopt (layouts,
KV capacity, memory failures, the ladder on a GPU) run against a program, not a reading.

Started from the argv infopt's vLLM adapter builds (the `python` of the adapter is a wrapper
that runs this file: `write_python`), it
- refuses what vLLM's parser refuses among the flags infopt uses (an unknown flag is argparse's
  "unrecognized arguments"; tests/integration/test_vllm_gpu_argv.py checks the same commands
  against the real vLLM 0.32 parser);
- sizes memory with its own arithmetic from the model's config.json and the GPU facts given in
  INFOPT_SIM_GPU (JSON: name, memory_bytes, hbm_bytes_per_s, bf16_flops_per_s, count,
  link_bytes_per_s), never with infopt's cost model, and prints vLLM's real startup lines with
  its numbers (formats copied from real logs: "Loading weights took", "Model loading took
  ... GiB memory" vllm#38820; "Using FLASH_ATTN attention backend out of potential backends"
  vllm#49011; "Available KV cache memory", "GPU KV cache size: N tokens" vllm#21348;
  "Maximum concurrency for N tokens per request: Cx" docs/serving/parallelism_scaling.md;
  "Estimated CUDA graph memory" vllm#39559);
- for an FP8 checkpoint, logs the linear kernel vLLM 0.32's own CUDA priority lists and gates
  select on the GPU's compute capability (INFOPT_SIM_GPU's compute_capability), with vLLM's
  Marlin fallback warning where they fall back (fp8_kernel_lines): infopt's support matrix
  judges that line, so the two can disagree;
- fails the way vLLM fails when memory does not fit: the weights beyond a GPU give PyTorch's
  "CUDA out of memory. Tried to allocate"; KV short of one max_model_len request gives V1's
  "To serve at least one request with the models's max seq len" ValueError
  (tests/fixtures/engine_logs/vllm_v1_kv_insufficient_enginecore.log), so troubleshooting runs;
- serves the OpenAI routes, /tokenize and /metrics (vllm: names) through the host's common
  parts (tests/sim/gpu_host.py: continuous batching per DP replica, a step time that depends on
  the batch, TP, PP, KV dtype and CUDA graphs, a toy deterministic model for the quality gate).

Every duration is multiplied by INFOPT_SIM_TIME_SCALE (default 1) so tests run a 70B in seconds;
everything it prints and serves says SIMULATED. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file by the wrapper python: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sim.gpu_host import (
    GIB,
    Engine,
    Front,
    Gpu,
    Memory,
    Model,
    PrefixCache,
    Shape,
    Speculation,
    answer_calibration,
    kv_bytes_per_token,
    publish_gpu_memory,
    read_gpu,
    read_model,
    serve,
    speculation,
    time_scale,
    weights_per_gpu,
)
from tests.sim.gpu_host import write_python as _write_python

VERSION = "0.32.0+simulated"
ACTIVATION_BYTES = int(1.5 * GIB)  # the profiling run's peak, per GPU (a fixed guess)
GRAPH_BYTES = int(0.5 * GIB)  # "Estimated CUDA graph memory", unless --enforce-eager
BLOCK_TOKENS = 16


def write_python(folder: Path) -> str:
    """An executable `python` for infopt's vLLM adapter that runs this stand-in."""
    return _write_python(folder, __file__, "vLLM")


# -- the CLI -----------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="api_server.py", description="SIMULATED vLLM")
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", type=int, default=1)
    p.add_argument("--data-parallel-size", type=int, default=1)
    p.add_argument("--distributed-executor-backend", choices=["mp", "uni", "ray"])
    p.add_argument("--kv-cache-dtype", default="auto",
                   choices=["auto", "fp8", "fp8_e4m3", "fp8_e5m2"])
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--enable-auto-tool-choice", action="store_true")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    p.add_argument("--enable-expert-parallel", action="store_true")
    p.add_argument("--kv-offloading-size", type=float, default=None)  # GiB of host RAM
    p.add_argument("--speculative-config", type=json.loads, default=None)  # a JSON object
    return p


# -- the memory --------------------------------------------------------------------------------

def shape_of(a: argparse.Namespace, spec: Speculation | None = None) -> Shape:
    return Shape(tp=a.tensor_parallel_size, pp=a.pipeline_parallel_size,
                 dp=a.data_parallel_size, max_seqs=a.max_num_seqs, max_len=a.max_model_len,
                 kv_fp8=a.kv_cache_dtype.startswith("fp8"), graphs=not a.enforce_eager,
                 spec=spec)


_METHODS = ("ngram", "mtp", "eagle3", "eagle", "draft_model")


def speculation_of(conf: dict | None, m: Model) -> Speculation | None:
    """--speculative-config as vLLM's SpeculativeConfig checks what infopt sends
    (vllm/config/speculative.py): a known method, num_speculative_tokens, a drafter folder
    for eagle3/eagle/draft_model, MTP layers in the model for mtp. Refusals exit 1 with the
    ValueError vLLM raises (abridged)."""
    if conf is None:
        return None
    method, k, drafter = conf.get("method"), conf.get("num_speculative_tokens"), conf.get("model")

    def refuse(msg: str) -> None:
        log(f"ValueError: {msg}", "APIServer", "ERROR")
        raise SystemExit(1)
    if method not in _METHODS:
        refuse(f"Unsupported speculative method: '{method}'")
    if not isinstance(k, int) or k < 1:
        refuse("num_speculative_tokens was provided but without speculative model.")
    if method in ("eagle3", "eagle", "draft_model") and not (
            drafter and (Path(drafter) / "config.json").is_file()):
        refuse(f"Invalid repository ID or local directory specified: '{drafter}'.")
    if method == "mtp" and not m.mtp_layers:
        refuse("The model has no MTP layers (num_nextn_predict_layers): method mtp needs them")
    return speculation(str(method), int(k))


def size_memory(m: Model, g: Gpu, a: argparse.Namespace) -> Memory:
    """vLLM V1: gpu_memory_utilization x memory, less the weights, the profiling run's peak
    activations and (unless eager) the CUDA graphs, is the KV pool, in whole blocks."""
    s = shape_of(a)
    weights, per_token = weights_per_gpu(m, s), kv_bytes_per_token(m, s)
    budget = int(g.cuda_total_bytes * a.gpu_memory_utilization)
    available = budget - weights - ACTIVATION_BYTES - (0 if a.enforce_eager else GRAPH_BYTES)
    tokens = max(0, available) // per_token // BLOCK_TOKENS * BLOCK_TOKENS
    return Memory(weights, per_token, available, tokens)


# -- the log -----------------------------------------------------------------------------------

def log(line: str, who: str = "EngineCore_DP0", level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"({who} pid={os.getpid()}) {level} {stamp} {line}", flush=True)


def fp8_kernel_lines(folder: str, cc: str | None) -> list[tuple[str, str]]:
    """What vLLM 0.32 logs choosing an FP8 checkpoint's linear kernel, chosen by its own CUDA
    priority lists and gates, not by infopt's support matrix (so the two can disagree):
    model_executor/kernels/linear/__init__.py _POSSIBLE_FP8_KERNELS (:443; per-tensor:
    FlashInfer needs CC >= 10.0 and flashinfer, which this stand-in does not have; CUTLASS
    cutlass_fp8_supported(): CC >= 8.9) and _POSSIBLE_FP8_BLOCK_KERNELS (:478; block scales:
    the FlashInfer/DeepGEMM kernels need their packages, CUTLASS block CC >= 9.0), both ending
    in MarlinFP8ScaledMMLinearKernel (CC >= 7.5), which warns (utils/marlin_utils_fp8.py:108);
    "Selected %s for %s" at :797 / :758."""
    q = json.loads((Path(folder) / "config.json").read_text()).get("quantization_config") or {}
    if q.get("quant_method") != "fp8" or cc is None:
        return []
    block, major = bool(q.get("weight_block_size")), float(cc)
    kernel = (("CutlassFp8BlockScaledMMKernel" if major >= 9.0 else None) if block else
              ("CutlassFP8ScaledMMLinearKernel" if major >= 8.9 else None))
    out = [(f"[__init__.py:{758 if block else 797}] Selected "
            f"{kernel or 'MarlinFP8ScaledMMLinearKernel'} for Fp8LinearMethod", "INFO")]
    if kernel is None:
        out.append(("[marlin_utils_fp8.py:108] Your GPU does not have native support for FP8 "
                    "computation but FP8 quantization is being used. Weight-only FP8 "
                    "compression will be used leveraging the Marlin kernel. This may degrade "
                    "performance for compute-heavy workloads.", "WARNING"))
    return out


def start_up(a: argparse.Namespace, m: Model, g: Gpu, scale: float) -> Memory:
    """vLLM's start-up lines, or its failure (SystemExit 1) when memory does not fit."""
    print(f"SIMULATED vLLM {VERSION} on {g.count} x SIMULATED {g.name} "
          "(tests/sim/vllm_gpu.py): no GPU ran this", flush=True)
    if m.heads % a.tensor_parallel_size:
        log(f"ValueError: Total number of attention heads ({m.heads}) must be divisible by "
            f"tensor parallel size ({a.tensor_parallel_size}).", "APIServer", "ERROR")
        raise SystemExit(1)
    mem = size_memory(m, g, a)
    load_s = mem.weights_per_gpu / 2e9 * scale  # ~2 GB/s from the page cache
    time.sleep(min(load_s, 0.2))  # the log says the full figure; a test needs no wait
    budget = g.cuda_total_bytes * a.gpu_memory_utilization
    if mem.weights_per_gpu > budget:
        total = g.cuda_total_bytes / GIB
        log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{min(2.0, mem.weights_per_gpu / GIB):.2f} GiB. GPU 0 has a total capacity of "
            f"{total:.2f} GiB of which 0 bytes is free.", "Worker_TP0", "ERROR")
        raise SystemExit(1)
    log(f"[default_loader.py:384] Loading weights took {load_s:.2f} seconds", "Worker_TP0")
    log(f"[gpu_model_runner.py:4879] Model loading took {mem.weights_per_gpu / GIB:.2f} GiB "
        f"memory and {load_s + 0.5:.6f} seconds", "Worker_TP0")
    for line, level in fp8_kernel_lines(a.model, g.compute_capability):
        log(line, "Worker_TP0", level)
    log("[cuda.py:476] Using FLASH_ATTN attention backend out of potential backends: "
        "['FLASH_ATTN', 'FLASHINFER'].", "Worker_TP0")
    if not a.enforce_eager:
        log(f"[gpu_model_runner.py:5993] Estimated CUDA graph memory: "
            f"{GRAPH_BYTES / GIB:.2f} GiB total", "Worker_TP0")
    need = a.max_model_len * mem.kv_bytes_per_token
    if mem.kv_tokens < a.max_model_len:
        est = mem.kv_tokens
        log(f"ValueError: To serve at least one request with the models's max seq len "
            f"({a.max_model_len}), ({need / GIB:.2f} GiB KV cache is needed, which is larger "
            f"than the available KV cache memory ({max(0, mem.available_kv) / GIB:.2f} GiB). "
            f"Based on the available memory, the estimated maximum model length is {est}. Try "
            "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.", level="ERROR")
        raise SystemExit(1)
    log(f"[gpu_worker.py:298] Available KV cache memory: {mem.available_kv / GIB:.2f} GiB",
        "Worker_TP0")
    log(f"[kv_cache_utils.py:775] GPU KV cache size: {mem.kv_tokens:,} tokens")
    log(f"[kv_cache_utils.py:779] Maximum concurrency for {a.max_model_len:,} tokens per "
        f"request: {mem.kv_tokens / a.max_model_len:.2f}x")
    return mem


def as_python(argv: list[str]) -> list[str] | None:
    """The adapter runs this as a `python`: `-c SCRIPT` (its version and build-device probes)
    is answered here (None: done); `-m vllm.entrypoints.openai.api_server ARGS` gives ARGS."""
    if answer_calibration(argv, "vLLM"):
        return None
    if argv[:1] == ["-c"]:
        print("cuda" if "nvidia-cuda-runtime" in argv[1] else VERSION)
        return None
    if argv[:1] == ["-m"]:
        if argv[1:2] != ["vllm.entrypoints.openai.api_server"]:
            raise SystemExit(f"SIMULATED vLLM: no module {argv[1:2]}")
        return argv[2:]
    return argv


def stats_line(victims: int, replica) -> None:
    """vLLM's periodic stats line (vllm/v1/metrics/loggers.py LoggingStatLogger.log, 0.33),
    printed here when the KV pool made the scheduler preempt: "Preemptions: N" is cumulative."""
    e = replica.e
    used = sum(r["ctx"] for r in replica.running) / max(1, e.pool_tokens)
    log(f"[loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        f"throughput: 0.0 tokens/s, Running: {e.running()} reqs, Waiting: {e.waiting()} reqs, "
        f"Preemptions: {e.preemptions}, GPU KV cache usage: {100 * used:.1f}%", "APIServer")


def _metrics(engine: Engine, name: str) -> str:
    text = (f'vllm:num_requests_running{{model_name="{name}"}} {engine.running()}\n'
            f'vllm:num_requests_waiting{{model_name="{name}"}} {engine.waiting()}\n'
            f'vllm:num_preemptions_total{{model_name="{name}"}} {float(engine.preemptions)}\n'
            f'vllm:request_success_total{{model_name="{name}"}} {engine.requests}\n')
    if engine.shape.spec is not None:  # vLLM registers these only with speculation on
        text += (f'vllm:spec_decode_num_draft_tokens_total{{model_name="{name}"}} '
                 f'{float(engine.drafted)}\n'
                 f'vllm:spec_decode_num_accepted_tokens_total{{model_name="{name}"}} '
                 f'{float(engine.accepted)}\n'
                 f'vllm:spec_decode_num_drafts_total{{model_name="{name}"}} '
                 f'{float(engine.verified)}\n')
    return text


def _too_long(limit: int, prompt: int, n: int) -> str:
    return (f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt + n} tokens ({prompt} in the messages, {n} in the completion). Please "
            "reduce the length of the messages or completion.")


FRONT = Front(engine="vLLM", version=VERSION, owned_by="vllm (SIMULATED)", metrics=_metrics,
              too_long=_too_long)


def main(argv: list[str] | None = None) -> None:
    args = as_python(sys.argv[1:] if argv is None else argv)
    if args is None:
        return
    a = parser().parse_args(args)
    model, gpu = read_model(a.model), read_gpu("vLLM")
    a.max_model_len = a.max_model_len or model.native_context
    scale = time_scale()
    spec = speculation_of(a.speculative_config, model)
    mem = start_up(a, model, gpu, scale)
    engine = Engine(shape_of(a, spec), model, gpu, mem, scale, on_preempt=stats_line)
    if a.enable_prefix_caching is not False:  # on by default in vLLM V1
        engine.prefix_cache = PrefixCache()
    # vLLM holds its whole budget on every rank: weights, activations, graphs and KV.
    shape = engine.shape
    publish_gpu_memory(shape.tp * shape.pp * shape.dp,
                       int(gpu.cuda_total_bytes * a.gpu_memory_utilization))

    def ready() -> None:
        print(f"(APIServer pid={os.getpid()}) INFO {time.strftime('%m-%d %H:%M:%S')} "
              f"[api_server.py:1880] Starting vLLM API server 0 on http://{a.host}:{a.port}",
              flush=True)
    serve(engine, a.host, a.port, a.served_model_name or a.model, FRONT, ready)


if __name__ == "__main__":
    main()
