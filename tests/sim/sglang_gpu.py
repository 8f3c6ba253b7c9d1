"""SIMULATED SGLang on a SIMULATED GPU host (issue 32): a stand-in for `python -m
sglang.launch_server ...` where no GPU exists, started from the argv infopt's SGLang adapter
builds (its `python` is a wrapper that runs this file: `write_python`). It

- answers the adapter's version probe (`import importlib.metadata ... version('sglang')`);
- refuses what SGLang's parser refuses among the flags infopt uses: flag names, aliases and
  choices from the sglang-0.5.23 wheel's python/sglang/srt/arg_groups/fields/*.py (a subset:
  tests/integration/test_sglang_argv.py checks each against the real parser), parsed by a plain
  argparse parser that allows abbreviations as SGLang's does (server_args.py
  prepare_server_args), so argparse's "unrecognized arguments" for an unknown flag and
  "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode,
  --cuda-graph-max-bs-prefill" for the spelling 0.5.23 no longer has;
- resolves speculation as SGLang 0.5.23's hooks do (arg_groups/speculative_hook.py): an unset
  --max-running-requests becomes 48 ("Max running requests is reset to 48 for speculative
  decoding"), and NGRAM's --speculative-num-draft-tokens counts the root, so it drafts one
  token fewer (12 when unset);
- sizes memory with SGLang's own rule (model_runner.py profile_max_num_token): the static pool
  is mem_fraction_static x device memory; what the weights and the CUDA context leave of it is
  the KV pool, one token per cell. The default fraction follows server_args.py's rule by TP
  size (0.88 at TP 1 down to 0.79 at TP 16; 0.5 derives it from the reserved memory instead,
  to similar values on 80 GB GPUs): an approximation, stated here;
- prints SGLang's start-up lines with its numbers: "Load weight begin/end ... avail mem ...
  mem usage", "Capture cuda graph begin/end", "max_total_num_tokens=..., max_prefill_tokens=
  ..., max_running_requests=..., context_len=..." and "The server is fired up and ready to
  roll!" (sglang#2468's log), "KV Cache is allocated. dtype: ..., #tokens: N, K size: X GB,
  V size: Y GB" (memory_pool.py, 0.5.23, as infopt.engines.sglang.adapter.kv_from_log quotes it),
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

VERSION = "0.5.23+simulated"
CONTEXT_BYTES = int(0.5 * GIB)  # CUDA context and NCCL buffers, per GPU (a fixed guess)
GRAPH_BYTES = int(0.4 * GIB)  # what capturing the CUDA graphs takes out of the free memory


def write_python(folder: Path) -> str:
    """An executable `python` for infopt's SGLang adapter that runs this stand-in."""
    return _write_python(folder, __file__, "SGLang")


# -- the CLI -----------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    # allow_abbrev as SGLang's own parser (argparse's default): a unique prefix of a flag is
    # that flag, a prefix of two is refused as ambiguous.
    p = argparse.ArgumentParser(prog="sglang serve", description="SIMULATED SGLang",
                                allow_abbrev=True)
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=None)  # by GPU memory
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--schedule-policy", default="fcfs",
                   choices=["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"])
    # fields/parallel.py: each size with its long alias (and --ep)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--pp-size", "--pipeline-parallel-size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", type=int, default=1)
    p.add_argument("--ep-size", "--expert-parallel-size", "--ep", type=int, default=1)
    p.add_argument("--attention-backend", default=None,
                   choices=["fa3", "flashinfer", "triton", "torch_native", "flashmla",
                            "trtllm_mha", "intel_amx"])
    p.add_argument("--kv-cache-dtype", default="auto",
                   choices=["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16"])
    # fields/exec_.py ExecGraph: per phase, no --cuda-graph-max-bs any more
    for phase in ("decode", "prefill"):
        p.add_argument(f"--cuda-graph-backend-{phase}", default=None,
                       choices=["full", "breakable", "disabled"])
        p.add_argument(f"--cuda-graph-max-bs-{phase}", type=int, default=None)
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-hierarchical-cache", "--enable-hicache", action="store_true")
    p.add_argument("--hicache-size", type=int, default=0)  # GB of host memory per rank
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path"):
        p.add_argument(flag, default=None)
    for flag in ("--speculative-num-steps", "--speculative-eagle-topk",
                 "--speculative-num-draft-tokens"):
        p.add_argument(flag, type=int, default=None)
    return p


def default_mem_fraction(a: argparse.Namespace, g: Gpu, mla: bool = False) -> float:
    """arg_groups/memory_hook.py (0.5.23), "Static memory and runtime headroom": GPU memory in
    MB as nvidia-smi reports it (NVML's total), less a reserve for activations (1.5 MB a
    token of the chunked prefill, at least 2,048), 512 MB, TP x PP / 8 GB, the decode graphs
    (2 MB per batch size) and, without PP, the prefill graphs (8 MB each; 1.5 GB for an MLA
    model); at least 10 GB on a GPU above 60 GB. Rounded to 3 places."""
    mb = g.memory_bytes / 2**20
    chunked = a.chunked_prefill_size
    reserved = 512 + max(chunked, 2048) * 1.5 + a.tp_size * a.pp_size / 8 * 1024
    if a.cuda_graph_backend_decode != "disabled":
        reserved += 2 * a.cuda_graph_max_bs_decode
    if a.pp_size == 1 and a.cuda_graph_backend_prefill != "disabled":
        sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32),
                 *range(576, 1025, 64), *range(1280, 4097, 256), *range(4608, chunked + 1, 512)]
        reserved += 1.5 * 1024 if mla else 8 * sum(1 for x in sizes if x <= chunked)
    if mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mb - reserved) / mb, 3)


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
        # speculative_hook.py _handle_ngram: 12 when unset; the count includes the root
        # (kernels/jit/csrc/ngram_corpus/param.h: draft_token_num - 1 tokens drafted).
        return speculation("ngram", (a.speculative_num_draft_tokens or 12) - 1)
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


# speculative_hook.py (0.5.23) _handle_eagle_family / _handle_ngram: "if
# cfg.max_running_requests is None: declare_resolution(..., max_running_requests=48)".
SPECULATIVE_RUNNING_CAP = 48


def retract_line(victims: int, replica) -> None:
    """scheduler.py (0.5.23) when a decode step outgrows the KV pool: its requests go back to
    the queue and the scheduler's new-token ratio is raised (not modelled: printed as is)."""
    log(f"KV cache pool is full. Retract requests. #retracted_reqs: {victims}, "
        f"#new_tokens_gained: {victims}, #new_token_ratio: 0.7000 -> 1.0000")


def reset_running_cap(a: argparse.Namespace) -> None:
    """SGLang's speculative reset: an unset --max-running-requests becomes 48."""
    if a.speculative_algorithm is not None and a.max_running_requests is None:
        a.max_running_requests = SPECULATIVE_RUNNING_CAP
        log("Max running requests is reset to 48 for speculative decoding. You can override "
            "this by explicitly setting --max-running-requests.", False)


def shape_of(a: argparse.Namespace, max_running: int,
             spec: Speculation | None = None) -> Shape:
    return Shape(tp=a.tp_size, pp=a.pp_size, dp=a.dp_size, max_seqs=max_running, spec=spec,
                 max_len=a.context_length, kv_fp8=a.kv_cache_dtype.startswith("fp8"),
                 graphs=a.cuda_graph_backend_decode != "disabled",
                 # start_up fills in SGLang's default before anything is served
                 graph_max_batch=a.cuda_graph_max_bs_decode or 1 << 30,
                 # Planted: SGLang's overlap scheduler hides the next batch's CPU work behind
                 # the GPU step, so its host time per step is half vLLM's here (~9% faster
                 # decode for one user): a difference the engine comparison must find.
                 graph_step_s=0.0006)


def size_memory(m: Model, g: Gpu, a: argparse.Namespace) -> Memory:
    """model_runner.py profile_max_num_token: the free memory after loading, less what the
    static fraction leaves to activations, over the bytes of one token's KV."""
    s = shape_of(a, 1)
    weights, per_token = weights_per_gpu(m, s), kv_bytes_per_token(m, s)
    # torch's view of the device (CUDA's total, a little under NVML's): what is free after
    # loading, less the share the static fraction leaves to activations.
    free_after_load = g.cuda_total_bytes - CONTEXT_BYTES - weights
    rest = free_after_load - int(g.cuda_total_bytes * (1 - a.mem_fraction_static))
    return Memory(weights, per_token, rest, max(0, rest) // per_token)


def max_running_requests(a: argparse.Namespace, kv_tokens: int) -> int:
    """mem_cache/kv_cache_configurator.py resolve_max_num_reqs (0.5.23): the request pool,
    from the token pool over the context x 512, clamped to 2,048..4,096, or the flag; either
    at most half the token pool (sglang#2468: 56,524 tokens at 32,768 -> 2,048 (+1 in that
    release); a Qwen3-14B log: 298,447 at 40,960 -> 3,730)."""
    pool = min(max(int(kv_tokens / a.context_length * 512), 2048), 4096)
    return min(a.max_running_requests or pool, kv_tokens // 2)


# -- the log -----------------------------------------------------------------------------------

def default_graph_max_bs(memory_bytes: int, tp: int, max_running: int | None = None) -> int:
    """arg_groups/memory_hook.py handle_gpu_memory_settings (0.5.23), by GPU memory in MiB,
    as (TP < 4, TP >= 4); an explicit --max-running-requests below it lowers it (the hook
    runs before the speculative one, so the speculative reset to 48 does not)."""
    mib = memory_bytes / 2**20
    found = next(((small if tp < 4 else large) for bound, small, large in (
        (20 * 1024, 8, 8), (35 * 1024, 48, 160), (60 * 1024, 32, 160), (90 * 1024, 256, 512),
        (160 * 1024, 256, 512)) if mib < bound), 512)
    return min(found, max_running) if max_running else found


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
              native_generate=True, flat_errors=True)


def as_python(argv: list[str]) -> list[str] | None:
    """`-c SCRIPT` (the adapter's version probe) is answered here (None: done);
    `-m sglang.launch_server ARGS` gives ARGS."""
    if answer_calibration(argv, "SGLang"):
        return None
    if argv[:1] == ["-c"]:
        print(VERSION)
        return None
    if argv[:1] == ["-m"]:
        if argv[1:2] != ["sglang.launch_server"]:
            raise SystemExit(f"SIMULATED SGLang: no module {argv[1:2]}")
        return argv[2:]
    return argv


def resolve_memory_defaults(a: argparse.Namespace, gpu: Gpu, mla: bool = False) -> None:
    """memory_hook.py's defaults for what the command left unset: the decode graphs' max
    batch and the chunked prefill by GPU memory and TP, then the static share (the graphs'
    reserve is part of it). tests/integration/test_sglang_argv.py holds the result against
    SGLang's own resolution of the same command."""
    if a.cuda_graph_max_bs_decode is None:
        a.cuda_graph_max_bs_decode = default_graph_max_bs(gpu.memory_bytes, a.tp_size,
                                                          a.max_running_requests)
    if a.chunked_prefill_size is None:  # MiB bound, tokens
        mb = gpu.memory_bytes / 2**20
        a.chunked_prefill_size = next(
            (size for bound, size in ((20 * 1024, 2048), (35 * 1024, 4096), (60 * 1024, 4096),
                                      (160 * 1024, 8192)) if mb < bound), 16384)
    if a.mem_fraction_static is None:
        a.mem_fraction_static = default_mem_fraction(a, gpu, mla)


def main(argv: list[str] | None = None) -> None:
    args = as_python(sys.argv[1:] if argv is None else argv)
    if args is None:
        return
    a = parser().parse_args(args)
    model, gpu = read_model(a.model_path), read_gpu("SGLang")
    a.context_length = a.context_length or model.native_context
    scale = time_scale()
    resolve_memory_defaults(a, gpu, model.mla)
    spec = speculation_of(a, model)
    reset_running_cap(a)
    mem = start_up(a, model, gpu, scale)
    engine = Engine(shape_of(a, max_running_requests(a, mem.kv_tokens), spec), model, gpu,
                    mem, scale, on_preempt=retract_line)
    if not a.disable_radix_cache:
        engine.prefix_cache = PrefixCache()
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
