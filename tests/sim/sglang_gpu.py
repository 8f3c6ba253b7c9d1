"""SIMULATED SGLang on a SIMULATED GPU host (issue 32): a stand-in for `python -m
sglang.launch_server ...` where no GPU exists, started from the argv infopt's SGLang adapter
builds (its `python` is a wrapper that runs this file: `write_python`). It

- answers the adapter's version probe (`import importlib.metadata ... version('sglang')`);
- refuses what SGLang's parser refuses among the flags infopt uses (argparse's "unrecognized
  arguments"; flag names from python/sglang/srt/server_args.py, 0.5.23, as the adapter cites);
- sizes memory with SGLang's own rule (model_runner.py profile_max_num_token): the static pool
  is mem_fraction_static x device memory; what the weights and the CUDA context leave of it is
  the KV pool, one token per cell. The default fraction follows server_args.py's rule by TP
  size (0.88 at TP 1 down to 0.79 at TP 16; 0.5 derives it from the reserved memory instead,
  to similar values on 80 GB GPUs): an approximation, stated here;
- prints SGLang's start-up lines with its numbers: "Load weight begin/end ... avail mem ...
  mem usage", "Capture cuda graph begin/end", "max_total_num_tokens=..., max_prefill_tokens=
  ..., max_running_requests=..., context_len=..." and "The server is fired up and ready to
  roll!" (sglang#2468's log), "KV Cache is allocated. dtype: ..., #tokens: N, K size: X GB,
  V size: Y GB" (memory_pool.py, 0.5.23, as infopt.engines.sglang.kv_from_log quotes it),
  "Attention backend not explicitly specified. Use fa3 backend by default." (server_args.py);
- fails as SGLang fails: weights beyond the GPU give PyTorch's "CUDA out of memory"; a static
  pool the weights fill gives model_runner.py's "RuntimeError: Not enough memory. Please try
  to increase --mem-fraction-static.";
- serves the OpenAI routes and /metrics (sglang: names) through tests/sim/gpu_host.py.

Everything it prints and serves says SIMULATED. Standard library only.
"""

from __future__ import annotations

import argparse
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
    Shape,
    Speculation,
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

VERSION = "0.5.23+simulated"
CONTEXT_BYTES = int(0.5 * GIB)  # CUDA context and NCCL buffers, per GPU (a fixed guess)
GRAPH_BYTES = int(0.4 * GIB)  # what capturing the CUDA graphs takes out of the free memory


def write_python(folder: Path) -> str:
    """An executable `python` for infopt's SGLang adapter that runs this stand-in."""
    return _write_python(folder, __file__, "SGLang")


# -- the CLI -----------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_server.py", description="SIMULATED SGLang")
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--schedule-policy", default="fcfs",
                   choices=["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"])
    p.add_argument("--tp-size", "--tp", type=int, default=1)
    p.add_argument("--pp-size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", type=int, default=1)
    p.add_argument("--ep-size", "--ep", type=int, default=1)
    p.add_argument("--attention-backend", default=None,
                   choices=["fa3", "flashinfer", "triton", "torch_native", "flashmla",
                            "trtllm_mha", "intel_amx"])
    p.add_argument("--kv-cache-dtype", default="auto",
                   choices=["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16"])
    p.add_argument("--cuda-graph-backend-decode", default="full",
                   choices=["full", "breakable", "disabled"])
    p.add_argument("--cuda-graph-backend-prefill", default="disabled",
                   choices=["full", "breakable", "disabled"])
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-hierarchical-cache", action="store_true")
    p.add_argument("--hicache-size", type=int, default=0)  # GB of host memory per rank
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path"):
        p.add_argument(flag, default=None)
    for flag in ("--speculative-num-steps", "--speculative-eagle-topk",
                 "--speculative-num-draft-tokens"):
        p.add_argument(flag, type=int, default=None)
    return p


def default_mem_fraction(tp: int) -> float:
    """server_args.py's default by TP size (0.4.x; see the module docstring)."""
    for at_least, fraction in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if tp >= at_least:
            return fraction
    return 0.88


# -- the memory --------------------------------------------------------------------------------

def speculation_of(a: argparse.Namespace, m: Model) -> Speculation | None:
    """--speculative-algorithm as SGLang reads it: EAGLE without a draft path runs the model's
    own MTP layers (DeepSeek-V3 docs), with one an EAGLE head; EAGLE3 and STANDALONE need the
    draft path; NGRAM drafts --speculative-num-draft-tokens, the others --speculative-num-steps
    tokens a step (a top-k 1 chain). Refusals exit 1 (server_args.py's messages, abridged)."""
    algo = a.speculative_algorithm
    if algo is None:
        return None
    if algo == "NGRAM":
        return speculation("ngram", a.speculative_num_draft_tokens or 4)
    path = a.speculative_draft_model_path
    if path is not None and not (Path(path) / "config.json").is_file():
        print(f"ValueError: speculative draft model path {path} does not exist", flush=True)
        raise SystemExit(1)
    kind = {"EAGLE3": "eagle3", "STANDALONE": "draft_model"}.get(
        algo, "eagle" if path else "mtp")
    if kind == "mtp" and not m.mtp_layers or kind != "mtp" and path is None:
        print(f"ValueError: --speculative-algorithm {algo} needs --speculative-draft-model-path "
              "for a model without MTP layers", flush=True)
        raise SystemExit(1)
    return speculation(kind, a.speculative_num_steps or 3)


def shape_of(a: argparse.Namespace, max_running: int,
             spec: Speculation | None = None) -> Shape:
    return Shape(tp=a.tp_size, pp=a.pp_size, dp=a.dp_size, max_seqs=max_running, spec=spec,
                 max_len=a.context_length, kv_fp8=a.kv_cache_dtype.startswith("fp8"),
                 graphs=a.cuda_graph_backend_decode != "disabled",
                 # start_up fills in SGLang's default before anything is served
                 graph_max_batch=a.cuda_graph_max_bs or 1 << 30,
                 # Planted: SGLang's overlap scheduler hides the next batch's CPU work behind
                 # the GPU step, so its host time per step is half vLLM's here (~9% faster
                 # decode for one user): a difference the engine comparison must find.
                 graph_step_s=0.0006)


def size_memory(m: Model, g: Gpu, a: argparse.Namespace) -> Memory:
    """model_runner.py profile_max_num_token: the free memory after loading, less what the
    static fraction leaves to activations, over the bytes of one token's KV."""
    s = shape_of(a, 1)
    weights, per_token = weights_per_gpu(m, s), kv_bytes_per_token(m, s)
    free_after_load = g.memory_bytes - CONTEXT_BYTES - weights
    rest = free_after_load - int(g.memory_bytes * (1 - a.mem_fraction_static))
    return Memory(weights, per_token, rest, max(0, rest) // per_token)


def max_running_requests(a: argparse.Namespace, kv_tokens: int) -> int:
    """model_runner.py: the request pool, from the token pool over the context, 2,048 to
    4,096 (sglang#2468: 56,524 tokens at 32,768 -> 2,048 (+1 in that release); a Qwen3-14B
    log: 298,447 at 40,960 -> 3,730); the flag caps it."""
    pool = min(max(int(kv_tokens / a.context_length * 512), 2048), 4096)
    return min(pool, a.max_running_requests) if a.max_running_requests else pool


# -- the log -----------------------------------------------------------------------------------

def default_graph_max_bs(memory_bytes: int, tp: int) -> int:
    """server_args.py _handle_gpu_memory_settings (0.5.x), by GPU memory in MiB."""
    mib = memory_bytes / 2**20
    for bound, small, large in ((20 * 1024, 8, 8), (35 * 1024, 24, 80), (60 * 1024, 32, 160),
                                (160 * 1024, 256, 512)):
        if mib < bound:
            return small if tp < 4 else large
    return 512


def log(line: str, rank: bool = True) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}{' TP0' if rank else ''}] {line}", flush=True)


def start_up(a: argparse.Namespace, m: Model, g: Gpu, scale: float) -> Memory:
    """SGLang's start-up lines, or its failure (SystemExit 1) when memory does not fit."""
    print(f"SIMULATED SGLang {VERSION} on {g.count} x SIMULATED {g.name} "
          "(tests/sim/sglang_gpu.py): no GPU ran this", flush=True)
    if a.attention_backend is None:
        a.attention_backend = "fa3"
        log("Attention backend not explicitly specified. Use fa3 backend by default.", False)
    if a.cuda_graph_max_bs is None:  # server_args.py: by GPU memory and TP
        a.cuda_graph_max_bs = default_graph_max_bs(g.memory_bytes, a.tp_size)
    if m.heads % a.tp_size:
        log(f"AssertionError: {m.heads} is not divisible by tp_size {a.tp_size}.")
        raise SystemExit(1)
    mem = size_memory(m, g, a)
    total_gb = g.memory_bytes / GIB
    log(f"Load weight begin. avail mem={total_gb - CONTEXT_BYTES / GIB:.2f} GB")
    time.sleep(min(mem.weights_per_gpu / 2e9 * scale, 0.2))
    if mem.weights_per_gpu > g.memory_bytes - CONTEXT_BYTES:
        log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{min(2.0, mem.weights_per_gpu / GIB):.2f} GiB. GPU 0 has a total capacity of "
            f"{total_gb:.2f} GiB of which 0 bytes is free.")
        raise SystemExit(1)
    avail = (g.memory_bytes - CONTEXT_BYTES - mem.weights_per_gpu) / GIB
    dtype = "torch.float8_e4m3fn" if a.kv_cache_dtype.startswith("fp8") else "torch.bfloat16"
    log(f"Load weight end. type={m.architecture}, dtype=torch.bfloat16, avail mem={avail:.2f} "
        f"GB, mem usage={mem.weights_per_gpu / GIB:.2f} GB.")
    if mem.kv_tokens < 1:
        log("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
        raise SystemExit(1)
    half = mem.kv_tokens * mem.kv_bytes_per_token / 2 / GIB
    log(f"KV Cache is allocated. dtype: {dtype}, #tokens: {mem.kv_tokens}, K size: {half:.2f} "
        f"GB, V size: {half:.2f} GB")
    left = avail - 2 * half
    if a.cuda_graph_backend_decode != "disabled":
        log(f"Capture cuda graph begin. This can take up to several minutes. avail mem="
            f"{left:.2f} GB")
        left -= GRAPH_BYTES / GIB
        log(f"Capture cuda graph end. Time elapsed: {2.19 * scale:.2f} s. mem usage="
            f"{GRAPH_BYTES / GIB:.2f} GB. avail mem={left:.2f} GB.")
    log(f"max_total_num_tokens={mem.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
        f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests="
        f"{max_running_requests(a, mem.kv_tokens)}, context_len={a.context_length}, "
        f"available_gpu_mem={left:.2f} GB")
    return mem


# -- serving -----------------------------------------------------------------------------------

def _metrics(engine: Engine, name: str) -> str:
    # python/sglang/srt/metrics/collector.py: gauges and counters under `sglang:`.
    return (f'sglang:num_running_reqs{{model_name="{name}"}} {engine.running()}\n'
            f'sglang:num_requests_total{{model_name="{name}"}} {engine.requests}\n')


def _too_long(limit: int, prompt: int, n: int) -> str:
    return (f"Requested token count exceeds the model's maximum context length of {limit} "
            f"tokens. You requested a total of {prompt + n} tokens: {prompt} tokens from the "
            f"input messages and {n} tokens for the completion. Please reduce the number of "
            "tokens in the input messages or the completion to fit within the limit.")


FRONT = Front(engine="SGLang", version=VERSION, owned_by="sglang (SIMULATED)",
              metrics=_metrics, too_long=_too_long, prompt_logprobs=False,
              native_generate=True)


def as_python(argv: list[str]) -> list[str] | None:
    """`-c SCRIPT` (the adapter's version probe) is answered here (None: done);
    `-m sglang.launch_server ARGS` gives ARGS."""
    if argv[:1] == ["-c"]:
        print(VERSION)
        return None
    if argv[:1] == ["-m"]:
        if argv[1:2] != ["sglang.launch_server"]:
            raise SystemExit(f"SIMULATED SGLang: no module {argv[1:2]}")
        return argv[2:]
    return argv


def main(argv: list[str] | None = None) -> None:
    args = as_python(sys.argv[1:] if argv is None else argv)
    if args is None:
        return
    a = parser().parse_args(args)
    model, gpu = read_model(a.model_path), read_gpu("SGLang")
    a.context_length = a.context_length or model.native_context
    if a.mem_fraction_static is None:
        a.mem_fraction_static = default_mem_fraction(a.tp_size)
    scale = time_scale()
    spec = speculation_of(a, model)
    mem = start_up(a, model, gpu, scale)
    engine = Engine(shape_of(a, max_running_requests(a, mem.kv_tokens), spec), model, gpu,
                    mem, scale)
    shape = engine.shape
    graphs = GRAPH_BYTES if shape.graphs else 0
    publish_gpu_memory(shape.tp * shape.pp * shape.dp, CONTEXT_BYTES + mem.weights_per_gpu
                       + mem.kv_tokens * mem.kv_bytes_per_token + graphs)

    def ready() -> None:
        log(f"INFO:     Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)",
            False)
        log("The server is fired up and ready to roll!", False)
    serve(engine, a.host, a.port, a.served_model_name or a.model_path, FRONT, ready)


if __name__ == "__main__":
    main()
