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
- fails the way vLLM fails when memory does not fit: the weights beyond a GPU give PyTorch's
  "CUDA out of memory. Tried to allocate"; KV short of one max_model_len request gives V1's
  "To serve at least one request with the models's max seq len" ValueError
  (tests/fixtures/engine_logs/vllm_v1_kv_insufficient_enginecore.log), so troubleshooting runs;
- serves /health, /version, /v1/models, /tokenize, /metrics, /v1/completions (return_token_ids,
  prompt_logprobs: a toy deterministic model, its numerics nudged by an FP8 KV cache) and
  /v1/chat/completions (whole and streamed, include_usage, exactly max_tokens tokens), with
  continuous batching per DP replica and a step time that depends on the batch, TP, PP, KV
  dtype and CUDA graphs (weights and KV read at HBM speed, TP's all-reduces over the link).

Every duration is multiplied by INFOPT_SIM_TIME_SCALE (default 1) so tests run a 70B in seconds;
everything it prints and serves says SIMULATED. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GIB = 2**30
VERSION = "0.32.0+simulated"
VOCAB = 64  # the toy model's vocabulary (tokens are ids; text is one letter per id)
ACTIVATION_BYTES = int(1.5 * GIB)  # the profiling run's peak, per GPU (a fixed guess)
GRAPH_BYTES = int(0.5 * GIB)  # "Estimated CUDA graph memory", unless --enforce-eager
BLOCK_TOKENS = 16


def write_python(folder: Path) -> str:
    """An executable `python` for infopt's vLLM adapter that runs this stand-in."""
    path = folder / "python"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n# SIMULATED vLLM (tests/sim/vllm_gpu.py)\n'
                    f'exec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    path.chmod(0o755)
    return str(path)


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
    return p


# -- the model and the memory ------------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    params: int
    bytes_per_param: float
    native_context: int


def read_model(folder: str) -> Model:
    c = json.loads((Path(folder) / "config.json").read_text())
    c = {**c.get("text_config", {}), **c}
    hidden, layers = c["hidden_size"], c["num_hidden_layers"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or hidden // heads
    experts = c.get("num_local_experts") or c.get("num_experts") or 1
    ffn = c.get("moe_intermediate_size") if experts > 1 and c.get("moe_intermediate_size") \
        else c.get("intermediate_size", 4 * hidden)
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    embed = c["vocab_size"] * hidden * (1 if c.get("tie_word_embeddings") else 2)
    params = embed + layers * (attn + experts * 3 * hidden * ffn)
    quant = (c.get("quantization_config") or {}).get("quant_method", "")
    return Model(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                 head_dim=head_dim, params=params,
                 bytes_per_param=1.0 if "fp8" in quant else 2.0,
                 native_context=c.get("max_position_embeddings", 4096))


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    count: int
    link_bytes_per_s: float


def read_gpu() -> Gpu:
    raw = os.environ.get("INFOPT_SIM_GPU")
    if not raw:
        raise SystemExit("SIMULATED vLLM: INFOPT_SIM_GPU is not set (the simulated host's GPU)")
    return Gpu(**json.loads(raw))


@dataclass(frozen=True)
class Memory:
    weights_per_gpu: int
    kv_bytes_per_token: int  # one GPU's share
    available_kv: int
    kv_tokens: int


def size_memory(m: Model, g: Gpu, a: argparse.Namespace) -> Memory:
    shards = a.tensor_parallel_size * a.pipeline_parallel_size
    weights = int(m.params * m.bytes_per_param / shards)
    kv_bytes = 1 if a.kv_cache_dtype.startswith("fp8") else 2
    heads_here = max(1, m.kv_heads // a.tensor_parallel_size)
    per_token = 2 * math.ceil(m.layers / a.pipeline_parallel_size) * heads_here * \
        m.head_dim * kv_bytes
    budget = int(g.memory_bytes * a.gpu_memory_utilization)
    available = budget - weights - ACTIVATION_BYTES - (0 if a.enforce_eager else GRAPH_BYTES)
    tokens = max(0, available) // per_token // BLOCK_TOKENS * BLOCK_TOKENS
    return Memory(weights, per_token, available, tokens)


# -- the log -----------------------------------------------------------------------------------

def log(line: str, who: str = "EngineCore_DP0", level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"({who} pid={os.getpid()}) {level} {stamp} {line}", flush=True)


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
    budget = g.memory_bytes * a.gpu_memory_utilization
    if mem.weights_per_gpu > budget:
        total = g.memory_bytes / GIB
        log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{min(2.0, mem.weights_per_gpu / GIB):.2f} GiB. GPU 0 has a total capacity of "
            f"{total:.2f} GiB of which 0 bytes is free.", "Worker_TP0", "ERROR")
        raise SystemExit(1)
    log(f"[default_loader.py:384] Loading weights took {load_s:.2f} seconds", "Worker_TP0")
    log(f"[gpu_model_runner.py:4879] Model loading took {mem.weights_per_gpu / GIB:.2f} GiB "
        f"memory and {load_s + 0.5:.6f} seconds", "Worker_TP0")
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


# -- the timing model --------------------------------------------------------------------------

def step_s(m: Model, g: Gpu, a: argparse.Namespace, mem: Memory, batch: int,
           context: int) -> float:
    """One decode step of `batch` sequences at `context` tokens: the weights and the KV read
    at 85% of HBM speed, TP's two all-reduces per layer over the link, a launch overhead per
    step (eager: per kernel; CUDA graphs: one replay). PP stages run one after another for a
    token, so PP adds no speed at batch 1."""
    read = mem.weights_per_gpu * a.pipeline_parallel_size + \
        batch * context * mem.kv_bytes_per_token * a.pipeline_parallel_size
    t = read / (0.85 * g.hbm_bytes_per_s)
    if a.tensor_parallel_size > 1:
        msg = batch * m.hidden * 2
        t += 2 * m.layers * (msg / g.link_bytes_per_s + 8e-6)
    return t + (0.004 if a.enforce_eager else 0.0012)


def prefill_s(m: Model, g: Gpu, a: argparse.Namespace, tokens: int) -> float:
    return 2 * m.params * tokens / (a.tensor_parallel_size * 0.5 * g.bf16_flops_per_s)


# -- the toy numerics (the quality gate's scores) -----------------------------------------------

def logprobs(prefix: list[int], fp8_kv: bool) -> list[float]:
    h = sum((i + 1) * t for i, t in enumerate(prefix[-4:])) % VOCAB
    if fp8_kv and (sum(prefix) % 29 == 0):  # a coarser KV flips some near-ties
        h = (h + 1) % VOCAB
    logits = [-abs(v - h) * 0.7 for v in range(VOCAB)]
    z = math.log(sum(math.exp(x) for x in logits))
    return [x - z for x in logits]


def tokenize(text: str) -> list[int]:
    """One token per whitespace-separated word (ids: a stable hash of the word), roughly what
    a BPE tokenizer gives the load generator's word prompts."""
    import zlib

    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


# -- the engine: continuous batching per DP replica -----------------------------------------------

class Replica(threading.Thread):
    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.e, self.waiting, self.running = engine, queue.Queue(), []
        self.lock = threading.Lock()

    def submit(self, prompt_tokens: int, max_tokens: int) -> queue.Queue:
        out: queue.Queue = queue.Queue()
        self.waiting.put({"prompt": prompt_tokens, "left": max_tokens, "out": out, "ctx":
                          prompt_tokens})
        return out

    def run(self) -> None:
        e = self.e
        while True:
            if not self.running:
                self.running.append(self.waiting.get())
            while len(self.running) < e.args.max_num_seqs and not self.waiting.empty():
                self.running.append(self.waiting.get_nowait())
            fresh = [r for r in self.running if r["ctx"] == r["prompt"]]
            pause = sum(prefill_s(e.model, e.gpu, e.args, r["prompt"]) for r in fresh)
            ctx = max(r["ctx"] for r in self.running)
            pause += step_s(e.model, e.gpu, e.args, e.mem, len(self.running), ctx)
            time.sleep(pause * e.scale)
            e.steps += 1
            for r in list(self.running):
                r["ctx"] += 1
                r["left"] -= 1
                r["out"].put(r["left"] == 0)
                if r["left"] == 0:
                    self.running.remove(r)


class Engine:
    def __init__(self, args, model, gpu, mem, scale) -> None:
        self.args, self.model, self.gpu, self.mem, self.scale = args, model, gpu, mem, scale
        self.replicas = [Replica(self) for _ in range(args.data_parallel_size)]
        self.next, self.steps, self.requests = 0, 0, 0
        self.lock = threading.Lock()
        for r in self.replicas:
            r.start()

    def replica(self) -> Replica:
        with self.lock:
            self.next, self.requests = self.next + 1, self.requests + 1
            return self.replicas[self.next % len(self.replicas)]

    def running(self) -> int:
        return sum(len(r.running) for r in self.replicas)


# -- HTTP ---------------------------------------------------------------------------------------

def handler(engine: Engine, name: str) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:
            pass

        def _json(self, obj, status: int = 200) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _text(self, text: str) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json({})
            elif self.path == "/version":
                self._json({"version": VERSION})
            elif self.path == "/v1/models":
                self._json({"object": "list", "data": [{
                    "id": name, "object": "model", "owned_by": "vllm (SIMULATED)",
                    "max_model_len": engine.args.max_model_len}]})
            elif self.path == "/metrics":
                self._text(f'vllm:num_requests_running{{model_name="{name}"}} '
                           f"{engine.running()}\n"
                           f'vllm:request_success_total{{model_name="{name}"}} '
                           f"{engine.requests}\n")
            else:
                self._json({"error": {"message": "Not Found", "code": 404}}, 404)

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            routes = {"/tokenize": self._tokenize, "/v1/completions": self._completions,
                      "/v1/chat/completions": self._chat}
            route = routes.get(self.path)
            if route is None:
                self._json({"error": {"message": "Not Found", "code": 404}}, 404)
            elif req.get("model", name) != name:
                self._json({"error": {"message": f"The model `{req.get('model')}` does not "
                                      "exist.", "type": "NotFoundError", "code": 404}}, 404)
            else:
                try:
                    route(req)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    # vLLM validates the body before scheduling: a 400, never a dropped line.
                    self._json({"error": {"message": f"[SIMULATED] invalid request: {exc!r}",
                                          "type": "BadRequestError", "code": 400}}, 400)

        def _tokenize(self, req) -> None:
            toks = tokenize(req.get("prompt", ""))
            self._json({"count": len(toks), "max_model_len": engine.args.max_model_len,
                        "tokens": toks})

        def _decode(self, prompt: list[int], n: int) -> list[int]:
            fp8 = engine.args.kv_cache_dtype.startswith("fp8")
            out, seq = [], list(prompt)
            for _ in range(n):
                lp = logprobs(seq, fp8)
                tok = max(range(VOCAB), key=lambda v: lp[v])
                out.append(tok)
                seq.append(tok)
            return out

        def _completions(self, req) -> None:
            prompt = req["prompt"] if isinstance(req["prompt"], list) else \
                tokenize(req["prompt"])
            n = int(req.get("max_tokens") or 16)
            if self._too_long(len(prompt), n):
                return
            done = engine.replica().submit(len(prompt), n)
            while not done.get():
                pass
            ids = self._decode(prompt, n)
            choice = {"index": 0, "text": "".join(chr(97 + t % 26) for t in ids),
                      "finish_reason": "length"}
            if req.get("return_token_ids"):
                choice["token_ids"] = ids
            k = req.get("prompt_logprobs")
            if k is not None:
                fp8 = engine.args.kv_cache_dtype.startswith("fp8")
                rows: list[dict | None] = [None]
                for i in range(1, len(prompt)):
                    lp = logprobs(prompt[:i], fp8)
                    order = sorted(range(VOCAB), key=lambda v: -lp[v])
                    keep = {str(v): {"logprob": lp[v], "rank": order.index(v) + 1}
                            for v in order[:k]}
                    keep[str(prompt[i])] = {"logprob": lp[prompt[i]],
                                            "rank": order.index(prompt[i]) + 1}
                    rows.append(keep)
                choice["prompt_logprobs"] = rows
            self._json({"id": "cmpl-sim", "object": "text_completion", "model": name,
                        "choices": [choice], "usage": {
                            "prompt_tokens": len(prompt), "completion_tokens": n,
                            "total_tokens": len(prompt) + n}})

        def _too_long(self, prompt: int, n: int) -> bool:
            limit = engine.args.max_model_len
            if prompt + n <= limit:
                return False
            self._json({"error": {"message": f"This model's maximum context length is {limit} "
                                  f"tokens. However, you requested {prompt + n} tokens "
                                  f"({prompt} in the messages, {n} in the completion). Please "
                                  "reduce the length of the messages or completion.",
                                  "type": "BadRequestError", "param": "messages",
                                  "code": 400}}, 400)
            return True

        def _chat(self, req) -> None:
            messages = req["messages"]
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise TypeError("messages must be a list of objects")
            text = " ".join(str(m.get("content", "")) for m in messages)
            prompt = len(tokenize(text)) + 8  # the chat template's tokens
            n = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            if self._too_long(prompt, n):
                return
            done = engine.replica().submit(prompt, n)
            usage = {"prompt_tokens": prompt, "completion_tokens": n,
                     "total_tokens": prompt + n}
            head = {"id": "chatcmpl-sim", "created": int(time.time()), "model": name}
            if not req.get("stream"):
                while not done.get():
                    pass
                self._json({**head, "object": "chat.completion", "choices": [{
                    "index": 0, "finish_reason": "length", "message": {
                        "role": "assistant", "content": "tok " * n}}], "usage": usage})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = {**head, "object": "chat.completion.chunk"}
            first, last = True, False
            while not last:
                last = done.get()
                delta = {"content": "tok "} | ({"role": "assistant"} if first else {})
                self._event({**chunk, "choices": [{
                    "index": 0, "delta": delta, "finish_reason": "length" if last else None}]})
                first = False
            if (req.get("stream_options") or {}).get("include_usage"):
                self._event({**chunk, "choices": [], "usage": usage})
            self._send_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _event(self, obj) -> None:
            self._send_chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

        def _send_chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.flush()

    return H


def as_python(argv: list[str]) -> list[str] | None:
    """The adapter runs this as a `python`: `-c SCRIPT` (its version and build-device probes)
    is answered here (None: done); `-m vllm.entrypoints.openai.api_server ARGS` gives ARGS."""
    if argv[:1] == ["-c"]:
        print("cuda" if "nvidia-cuda-runtime" in argv[1] else VERSION)
        return None
    if argv[:1] == ["-m"]:
        if argv[1:2] != ["vllm.entrypoints.openai.api_server"]:
            raise SystemExit(f"SIMULATED vLLM: no module {argv[1:2]}")
        return argv[2:]
    return argv


class Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a benchmark opening 16 connections at once would
    # lose SYNs to it and wait out the 1 s retransmit (uvicorn, vLLM's server, allows 2048).
    request_queue_size = 2048


def main(argv: list[str] | None = None) -> None:
    args = as_python(sys.argv[1:] if argv is None else argv)
    if args is None:
        return
    a = parser().parse_args(args)
    model, gpu = read_model(a.model), read_gpu()
    a.max_model_len = a.max_model_len or model.native_context
    scale = float(os.environ.get("INFOPT_SIM_TIME_SCALE", "1"))
    mem = start_up(a, model, gpu, scale)
    name = a.served_model_name or a.model
    engine = Engine(a, model, gpu, mem, scale)
    server = Server((a.host, a.port), handler(engine, name))
    server.daemon_threads = True
    print(f"(APIServer pid={os.getpid()}) INFO {time.strftime('%m-%d %H:%M:%S')} "
          f"[api_server.py:1880] Starting vLLM API server 0 on http://{a.host}:{a.port}",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
