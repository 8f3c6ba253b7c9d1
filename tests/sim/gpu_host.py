"""The SIMULATED GPU host's common parts (issue 32): what every simulated engine shares once
its own front end (tests/sim/vllm_gpu.py, tests/sim/sglang_gpu.py) has read its CLI, sized its
memory by its own rule and printed its own start-up lines.

- the model, read from its config.json (parameters, KV heads, native context), and the GPU,
  from INFOPT_SIM_GPU (JSON: name, memory_bytes, hbm_bytes_per_s, bf16_flops_per_s, count,
  link_bytes_per_s);
- a timing model: a decode step reads the weights and the batch's KV at HBM speed, TP adds two
  all-reduces per layer over the link, PP stages run one after another, CUDA graphs cut the
  launch overhead; a prefill is compute-bound. Never infopt's cost model;
- continuous batching per data-parallel replica, each with its running-request cap;
- a prefix cache where the engine keeps one (vLLM's automatic prefix caching, SGLang's radix
  cache; TensorRT-LLM's block reuse is not modelled): a prompt's prefill is charged only for
  the tokens past its longest match with the engine's recent prompts, read as the engines do:
  vLLM skips the cache for a request with prompt_logprobs (sampling_params.py: "the output of
  prompt logprobs may less than n_prompt_tokens, we need to skip reading cache"), SGLang reads
  it up to logprob_start_len (schedule_batch.py: max_prefix_len = min(max_prefix_len,
  self.logprob_start_len));
- the OpenAI routes (/v1/models, /v1/completions with return_token_ids and prompt_logprobs,
  /v1/chat/completions whole and streamed with include_usage, exactly max_tokens tokens),
  /health, /version, /tokenize (one token per word) and /metrics in the engine's namespace,
  served by a toy deterministic model whose numerics an FP8 KV cache nudges.

Every duration is multiplied by INFOPT_SIM_TIME_SCALE (default 1); everything printed and
served says SIMULATED. Standard library only: the stand-ins run under any python.
"""

from __future__ import annotations

import functools
import json
import math
import os
import queue
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GIB = 2**30
VOCAB = 64  # the toy model's vocabulary (tokens are ids; text is one letter per id)


def write_python(folder: Path, engine_file: str, label: str, name: str = "python") -> str:
    """An executable `python` (or `name`: TensorRT-LLM's adapter runs its console script) for
    an infopt adapter that runs the stand-in `engine_file`."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n# SIMULATED {label} ({Path(engine_file).name})\n'
                    f'exec "{sys.executable}" "{Path(engine_file).resolve()}" "$@"\n')
    path.chmod(0o755)
    return str(path)


# -- the model and the GPU ---------------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    architecture: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    params: int
    bytes_per_param: float
    native_context: int
    mtp_layers: int = 0  # num_nextn_predict_layers / mtp_num_hidden_layers
    mla: bool = False  # multi-head latent attention (config.json kv_lora_rank)


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
    return Model(architecture=(c.get("architectures") or ["LlamaForCausalLM"])[0],
                 layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                 head_dim=head_dim, params=params,
                 bytes_per_param=1.0 if "fp8" in quant else 2.0,
                 native_context=c.get("max_position_embeddings", 4096),
                 mtp_layers=c.get("num_nextn_predict_layers") or c.get("mtp_num_hidden_layers")
                 or 0, mla=bool(c.get("kv_lora_rank")))


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int  # NVML's total (nvidia-smi's)
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    count: int
    link_bytes_per_s: float
    # cudaMemGetInfo's total, what the engines size against (torch.cuda.mem_get_info in vLLM's
    # MemorySnapshot, SGLang's get_available_gpu_memory, TensorRT-LLM's free-memory profile): a
    # little under NVML's, the driver's own share left out. None: NVML's less 0.7%, H100's
    # share (79.11 GiB of 81,559 MiB, vllm-project/vllm#27508).
    cuda_memory_bytes: int | None = None
    compute_capability: str | None = None  # "9.0": which kernels the engine's gates let run

    @property
    def cuda_total_bytes(self) -> int:
        return self.cuda_memory_bytes or int(self.memory_bytes * (1 - 0.0067))


def read_gpu(engine: str) -> Gpu:
    raw = os.environ.get("INFOPT_SIM_GPU")
    if not raw:
        raise SystemExit(f"SIMULATED {engine}: INFOPT_SIM_GPU is not set (the simulated "
                         "host's GPU)")
    return Gpu(**json.loads(raw))


# -- the GPU envelope calibration ----------------------------------------------------------------

# PLANTED fractions of the simulated GPU's peaks the "measured" rates come out at: what an H100
# SXM's device-to-device copy and cuBLAS GEMMs reach in public runs, roughly (a copy ~85% of the
# HBM peak; bf16 ~70% of the dense peak), never measured here. Each answer says SIMULATED.
SIM_COPY_SHARE = 0.85
SIM_GEMM_SHARE = {"bf16": 0.70, "fp16": 0.70, "fp8": 0.65, "int8": 0.60}


def answer_calibration(argv: list[str], engine: str) -> bool:
    """infopt/hardware/gpu_calibrate.py run with this stand-in as the engine's python: print
    a SIMULATED result in the script's own format (True: answered)."""
    args = argv[1:] if argv[:1] == ["-P"] else argv  # python's -P, as infopt runs it
    if not args or not args[0].endswith("gpu_calibrate.py"):
        return False
    gpu = read_gpu(engine)
    cc = float(gpu.compute_capability or "9.0")
    peaks = {"bf16": gpu.bf16_flops_per_s, "fp16": gpu.bf16_flops_per_s}
    skipped = {}
    if cc >= 8.9:
        peaks["fp8"] = 2 * gpu.bf16_flops_per_s
    else:  # torch._scaled_mm's own refusal below Ada
        skipped["fp8"] = ("RuntimeError: torch._scaled_mm is only supported on CUDA devices "
                          "with compute capability >= 9.0 or 8.9, or ROCm MI300+")
    peaks["int8"] = 2 * gpu.bf16_flops_per_s

    def rate(x: float) -> dict:
        return {"median": x, "min": 0.97 * x, "max": 1.01 * x, "repeats": 10}
    print(json.dumps({
        "torch": "2.9.0+cu128 (SIMULATED)", "cuda": "12.8", "device": gpu.name,
        "capability": gpu.compute_capability, "copy_mib": 1024, "gemm_n": 8192,
        "copy_bytes_per_s": rate(SIM_COPY_SHARE * gpu.hbm_bytes_per_s),
        "gemm": {k: rate(SIM_GEMM_SHARE[k] * v) for k, v in peaks.items()},
        "skipped": skipped,
        "simulated": f"{engine} stand-in: planted shares of the simulated GPU's peaks"}))
    return True


# -- what the engine front end decided ----------------------------------------------------------

@dataclass(frozen=True)
class Speculation:
    """A PLANTED speculative effect: each step drafts `k` tokens per sequence, accepted one by
    one with probability `acceptance` until the first rejection, plus the target's own token;
    drafting costs `draft_cost` of a target step per drafted token and verifying each drafted
    token 4% of one. The acceptances are planted per drafter kind (PLANTED_ACCEPTANCE), not
    measured anywhere: they make the trade-off between draft length and acceptance real
    enough for the ladder's series to have something to find."""

    kind: str
    k: int
    acceptance: float
    draft_cost: float

    def tokens_per_step(self) -> float:
        a = self.acceptance
        return (1 - a ** (self.k + 1)) / (1 - a)

    def step_factor(self) -> float:
        return 1 + self.k * (self.draft_cost + 0.04)


# Planted (SIMULATED): the word prompts of the load generator rarely repeat, so n-gram lookup
# is seldom accepted; trained heads and draft models much more often.
PLANTED_ACCEPTANCE = {"ngram": (0.35, 0.0), "mtp": (0.8, 0.03), "eagle3": (0.75, 0.04),
                      "eagle": (0.7, 0.04), "draft_model": (0.65, 0.1)}


def speculation(kind: str, k: int) -> Speculation:
    acceptance, cost = PLANTED_ACCEPTANCE[kind]
    return Speculation(kind, k, acceptance, cost)


@dataclass(frozen=True)
class Shape:
    """The serving shape, whatever the engine calls its flags."""

    tp: int
    pp: int
    dp: int
    max_seqs: int  # running requests per DP replica
    max_len: int  # tokens per request (prompt + output)
    kv_fp8: bool
    graphs: bool  # CUDA graphs captured (else eager launches)
    # Host time per step with graphs (s): a planted, engine-specific figure, not a measured one.
    graph_step_s: float = 0.0012
    spec: Speculation | None = None  # speculative decoding, when configured
    # The largest decode batch captured as a graph; a larger batch launches eagerly.
    graph_max_batch: int = 1 << 30


@dataclass(frozen=True)
class Memory:
    weights_per_gpu: int
    kv_bytes_per_token: int  # one GPU's share
    available_kv: int
    kv_tokens: int


def weights_per_gpu(m: Model, s: Shape) -> int:
    return int(m.params * m.bytes_per_param / (s.tp * s.pp))


def kv_bytes_per_token(m: Model, s: Shape) -> int:
    """K and V of one token on one GPU: its PP stage's layers, its TP share of the KV heads
    (replicated when there are fewer KV heads than ranks)."""
    heads_here = max(1, m.kv_heads // s.tp)
    return 2 * math.ceil(m.layers / s.pp) * heads_here * m.head_dim * (1 if s.kv_fp8 else 2)


# -- the timing model --------------------------------------------------------------------------

def step_s(m: Model, g: Gpu, s: Shape, mem: Memory, batch: int, context: int) -> float:
    """One decode step of `batch` sequences at `context` tokens: the weights and the KV read
    at 85% of HBM speed, TP's two all-reduces per layer over the link, a launch overhead per
    step (eager: per kernel; CUDA graphs: one replay). PP stages run one after another for a
    token, so PP adds no speed at batch 1."""
    read = mem.weights_per_gpu * s.pp + batch * context * mem.kv_bytes_per_token * s.pp
    t = read / (0.85 * g.hbm_bytes_per_s)
    if s.tp > 1:
        msg = batch * m.hidden * 2
        t += 2 * m.layers * (msg / g.link_bytes_per_s + 8e-6)
    return t + (s.graph_step_s if s.graphs and batch <= s.graph_max_batch else 0.004)


def prefill_s(m: Model, g: Gpu, s: Shape, tokens: int) -> float:
    return 2 * m.params * tokens / (s.tp * 0.5 * g.bf16_flops_per_s)


# -- the toy numerics (the quality gate's scores) -----------------------------------------------

def logprobs(prefix: list[int], fp8_kv: bool) -> list[float]:
    return list(_row(_peak(prefix[-4:], sum(prefix), fp8_kv))[0])


def _peak(last4: list[int], total: int, fp8_kv: bool) -> int:
    """The toy model's top token after a prefix: a hash of its last four tokens, moved by one
    where a coarser KV flips some near-ties (the prefix's sum decides where)."""
    h = sum((i + 1) * t for i, t in enumerate(last4)) % VOCAB
    if fp8_kv and total % 29 == 0:
        h = (h + 1) % VOCAB
    return h


@functools.lru_cache(maxsize=VOCAB)
def _row(h: int) -> tuple[tuple[float, ...], tuple[int, ...], dict[int, int]]:
    """(logprobs, ids by rank, rank of each id) of the distribution peaked at `h`: only VOCAB
    of them exist, so a 64k-token prompt's rows cost a lookup each (the long-context check's
    windows are half of a 131,072-token context)."""
    logits = [-abs(v - h) * 0.7 for v in range(VOCAB)]
    z = math.log(sum(math.exp(x) for x in logits))
    lp = tuple(x - z for x in logits)
    order = tuple(sorted(range(VOCAB), key=lambda v: -lp[v]))
    return lp, order, {v: r + 1 for r, v in enumerate(order)}


def _prefix_rows(seq: list[int], start: int, stop: int, fp8_kv: bool):
    """The distribution before each position in [start, stop) (start >= 1), in one pass."""
    total = sum(seq[:start])
    for i in range(start, stop):
        yield i, _row(_peak(seq[max(0, i - 4):i], total, fp8_kv))
        total += seq[i]


def tokenize(text: str) -> list[int]:
    """One token per whitespace-separated word (ids: a stable hash of the word), roughly what
    a BPE tokenizer gives the load generator's word prompts."""
    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


def greedy(prompt: list[int], n: int, fp8_kv: bool) -> list[int]:
    out, seq = [], list(prompt)
    for _ in range(n):
        lp = logprobs(seq, fp8_kv)
        tok = max(range(VOCAB), key=lambda v: lp[v])
        out.append(tok)
        seq.append(tok)
    return out


# -- the engine: continuous batching per DP replica -----------------------------------------------

class Replica(threading.Thread):
    """Continuous batching over one KV pool of `mem.kv_tokens` tokens (issue 46: the pool binds,
    so a candidate that admits more than its pool holds shows it):
    - a waiting request is admitted only while the pool holds its prompt (vLLM V1 and SGLang
      allocate the prompt's blocks at admission), or its prompt and every output token when
      the engine reserves them up front (`Engine.reserve_outputs`: TensorRT-LLM's default
      GUARANTEED_NO_EVICT capacity scheduler); the rest wait in arrival order;
    - when a decode step needs more tokens than the pool has left, the newest running request
      is preempted (vLLM V1 scheduler.py: `self.running.pop()`; SGLang retracts), goes back to
      the front of the queue and is recomputed (a prefill of its prompt and its output so far)
      when readmitted; the front end's `Engine.on_preempt` prints the engine's own line."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.e, self.waiting, self.running = engine, queue.Queue(), []
        self.queued: list[dict] = []  # taken off `waiting`, not yet admitted (first: oldest)

    def submit(self, prompt_tokens: int, max_tokens: int, cached: int = 0) -> queue.Queue:
        """Queue a request; `cached`: its prompt tokens the prefix cache holds (its first
        prefill computes only the rest; a recompute after preemption computes them all)."""
        out: queue.Queue = queue.Queue()
        self.waiting.put({"prompt": prompt_tokens, "left": max_tokens, "out": out, "ctx":
                          prompt_tokens, "credit": 0.0, "recompute": False, "cached": cached})
        return out

    def _tokens_this_step(self, r: dict) -> int:
        """1 without speculation; else the planted expected tokens a step, carried as credit
        so each request gets their long-run mean, and the drafted/accepted counters move."""
        spec = self.e.shape.spec
        if spec is None:
            return 1
        r["credit"] += spec.tokens_per_step()
        n = max(1, min(int(r["credit"]), r["left"]))
        r["credit"] -= n
        with self.e.lock:
            self.e.drafted += spec.k
            self.e.accepted += min(n - 1, spec.k)
            self.e.verified += 1
        return n

    def _held(self, r: dict) -> int:
        return r["ctx"] + (r["left"] if self.e.reserve_outputs else 0)

    def _admit(self) -> None:
        if not self.running and not self.queued:
            self.queued.append(self.waiting.get())
        while not self.waiting.empty():
            self.queued.append(self.waiting.get_nowait())
        used = sum(self._held(r) for r in self.running)
        while self.queued and len(self.running) < self.e.shape.max_seqs:
            r = self.queued[0]
            if self.running and used + self._held(r) > self.e.pool_tokens:
                break  # it waits for the pool (a lone request always runs: max_len fits)
            used += self._held(self.queued.pop(0))
            self.running.append(r)
        self.e.peak_running = max(self.e.peak_running, self.e.running())

    def _preempt(self) -> None:
        if self.e.reserve_outputs:
            return
        victims = 0
        while len(self.running) > 1 and sum(r["ctx"] for r in self.running) > self.e.pool_tokens:
            r = self.running.pop()
            r["recompute"] = True
            self.queued.insert(0, r)
            victims += 1
        if victims:
            with self.e.lock:
                self.e.preemptions += victims
            if self.e.on_preempt is not None:
                self.e.on_preempt(victims, self)

    def run(self) -> None:
        e = self.e
        while True:
            self._admit()
            fresh = [r for r in self.running if r["ctx"] == r["prompt"] or r["recompute"]]
            computed = [r["ctx"] - r["cached"] for r in fresh]
            pause = sum(prefill_s(e.model, e.gpu, e.shape, t) for t in computed)
            with e.lock:
                e.prefill_tokens += sum(computed)
            for r in fresh:
                r["recompute"], r["cached"] = False, 0
            ctx = max(r["ctx"] for r in self.running)
            step = step_s(e.model, e.gpu, e.shape, e.mem, len(self.running), ctx)
            pause += step * (e.shape.spec.step_factor() if e.shape.spec else 1)
            time.sleep(pause * e.scale)
            e.steps += 1
            for r in list(self.running):
                for _ in range(self._tokens_this_step(r)):
                    r["ctx"] += 1
                    r["left"] -= 1
                    r["out"].put(r["left"] == 0)
                if r["left"] == 0:
                    self.running.remove(r)
            self._preempt()


class PrefixCache:
    """The prompts an engine served last, for its prefix cache: a new prompt's cached tokens
    are its longest common prefix with any of them (capped by what the request may read), at
    least one token always computed. Bounded: the engines evict the least recently used
    blocks; here the oldest prompts go."""

    KEPT = 16
    BLOCK = 256  # compared a block at a time: a 64k-token prompt's match costs microseconds

    def __init__(self) -> None:
        self.prompts: list[list[int]] = []
        self.lock = threading.Lock()

    def hit(self, prompt: list[int], readable: int) -> int:
        """The cached tokens of `prompt` (at most `readable`), remembering it."""
        with self.lock:
            best = max((self._common(p, prompt) for p in self.prompts), default=0)
            self.prompts = [*self.prompts[-(self.KEPT - 1):], list(prompt)]
        return max(0, min(best, readable, len(prompt) - 1))

    @classmethod
    def _common(cls, a: list[int], b: list[int]) -> int:
        n, i = min(len(a), len(b)), 0
        while i + cls.BLOCK <= n and a[i:i + cls.BLOCK] == b[i:i + cls.BLOCK]:
            i += cls.BLOCK
        while i < n and a[i] == b[i]:
            i += 1
        return i


class Engine:
    def __init__(self, shape: Shape, model: Model, gpu: Gpu, mem: Memory, scale: float,
                 on_preempt: Callable[[int, Replica], None] | None = None,
                 reserve_outputs: bool = False) -> None:
        self.shape, self.model, self.gpu, self.mem, self.scale = shape, model, gpu, mem, scale
        self.on_preempt, self.reserve_outputs = on_preempt, reserve_outputs
        # Each DP replica has a pool of its own; a pool of 0 tokens (a front end that did not
        # size one) does not bind.
        self.pool_tokens = mem.kv_tokens or (1 << 62)
        self.preemptions = 0  # over the engine's life (vLLM: vllm:num_preemptions_total)
        self.peak_running = 0  # the most requests running at once, over the engine's life
        self.replicas = [Replica(self) for _ in range(shape.dp)]
        self.next, self.steps, self.requests = 0, 0, 0
        self.drafted, self.accepted = 0, 0  # speculative tokens, over the engine's life
        self.verified = 0  # verification steps (a sequence's step), over the engine's life
        self.lock = threading.Lock()
        self.prefix_cache: PrefixCache | None = None  # set by a front end whose engine keeps one
        self.prefill_tokens = 0  # prompt tokens computed (not read from the cache), over its life
        for r in self.replicas:
            r.start()

    def replica(self) -> Replica:
        with self.lock:
            self.next, self.requests = self.next + 1, self.requests + 1
            return self.replicas[self.next % len(self.replicas)]

    def running(self) -> int:
        return sum(len(r.running) for r in self.replicas)

    def waiting(self) -> int:
        return sum(len(r.queued) + r.waiting.qsize() for r in self.replicas)


# -- HTTP ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Front:
    """What the HTTP side says differently per engine."""

    engine: str  # "vLLM", "SGLang"
    version: str
    owned_by: str
    metrics: Callable[[Engine, str], str]  # the /metrics text
    too_long: Callable[[int, int, int], str]  # (limit, prompt, completion) -> error message
    # vLLM's prompt_logprobs extension on /v1/completions (SGLang's completions lack it).
    prompt_logprobs: bool = True
    # SGLang's native /generate: input_ids in, output_ids and input/output logprobs out.
    native_generate: bool = False
    # The error body: vLLM nests OpenAI's object ({"error": {...}}); SGLang (serving_base.py
    # create_error_response) and TensorRT-LLM (openai_server.py) answer their ErrorResponse
    # flat: {"object": "error", "message", "type", "param", "code"}.
    flat_errors: bool = False


def handler(engine: Engine, name: str, front: Front) -> type[BaseHTTPRequestHandler]:
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

        def _error(self, message: str, status: int, type_: str = "BadRequestError",
                   param: str | None = None) -> None:
            err = {"message": message, "type": type_, "param": param, "code": status}
            self._json({"object": "error", **err} if front.flat_errors else {"error": err},
                       status)

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
                self._json({"version": front.version})
            elif self.path == "/get_server_info" and front.native_generate:
                state = ({"avg_spec_accept_length": 1 + engine.accepted / engine.verified}
                         if engine.shape.spec is not None and engine.verified else {})
                self._json({"version": front.version, "internal_states": [state]})
            elif self.path == "/get_model_info" and front.native_generate:
                self._json({"model_path": name, "tokenizer_path": name, "is_generation": True})
            elif self.path == "/v1/models":
                self._json({"object": "list", "data": [{
                    "id": name, "object": "model", "owned_by": front.owned_by,
                    "max_model_len": engine.shape.max_len}]})
            elif self.path == "/metrics":
                self._text(front.metrics(engine, name))
            else:
                self._error("Not Found", 404, "NotFoundError")

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            routes = {"/tokenize": self._tokenize, "/v1/completions": self._completions,
                      "/v1/chat/completions": self._chat}
            if front.native_generate:
                routes["/generate"] = self._generate
            route = routes.get(self.path)
            if route is None:
                self._error("Not Found", 404, "NotFoundError")
            elif req.get("model", name) != name:
                self._error(f"The model `{req.get('model')}` does not exist.", 404,
                            "NotFoundError")
            else:
                try:
                    route(req)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    # The servers validate the body before scheduling: a 400, never a
                    # dropped line.
                    self._error(f"[SIMULATED] invalid request: {exc!r}", 400)

        def _tokenize(self, req) -> None:
            toks = tokenize(req.get("prompt", ""))
            self._json({"count": len(toks), "max_model_len": engine.shape.max_len,
                        "tokens": toks})

        def _decode(self, prompt: list[int], n: int, readable: int) -> list[int] | None:
            """The n greedy tokens after `prompt`, once the batching engine has run them
            (None: the request was too long and has been answered with the error);
            `readable`: how many of its tokens the request may read from a prefix cache."""
            if self._too_long(len(prompt), n):
                return None
            cache = engine.prefix_cache
            cached = cache.hit(prompt, readable) if cache is not None else 0
            done = engine.replica().submit(len(prompt), n, cached)
            while not done.get():
                pass
            return greedy(prompt, n, engine.shape.kv_fp8)

        def _completions(self, req) -> None:
            prompt = req["prompt"] if isinstance(req["prompt"], list) else \
                tokenize(req["prompt"])
            n = int(req.get("max_tokens") or 16)
            k = req.get("prompt_logprobs") if front.prompt_logprobs else None
            ids = self._decode(prompt, n, 0 if k is not None else len(prompt))
            if ids is None:
                return
            fp8 = engine.shape.kv_fp8
            choice = {"index": 0, "text": "".join(chr(97 + t % 26) for t in ids),
                      "finish_reason": "length"}
            if req.get("return_token_ids"):
                choice["token_ids"] = ids
            if k is not None:
                choice["prompt_logprobs"] = self._prompt_logprobs(prompt, int(k), fp8)
            self._json({"id": "cmpl-sim", "object": "text_completion", "model": name,
                        "choices": [choice], "usage": {
                            "prompt_tokens": len(prompt), "completion_tokens": n,
                            "total_tokens": len(prompt) + n}})

        def _generate(self, req) -> None:
            """SGLang's /generate (io_struct.py GenerateReqInput): logprobs from
            logprob_start_len as [logprob, token id, None] (None text: return_text_in_logprobs
            off), the first prompt token's logprob None, top lists likewise."""
            prompt = req["input_ids"] if "input_ids" in req else tokenize(req["text"])
            sp = req.get("sampling_params") or {}
            n = int(sp.get("max_new_tokens", 128))
            start = int(req.get("logprob_start_len", -1))
            start = len(prompt) - 1 if start < 0 else start
            ids = self._decode(prompt, n, start if req.get("return_logprob") else len(prompt))
            if ids is None:
                return
            fp8 = engine.shape.kv_fp8
            meta = {"id": "sim", "finish_reason": {"type": "length", "length": n},
                    "prompt_tokens": len(prompt), "completion_tokens": n, "cached_tokens": 0}
            if req.get("return_logprob"):
                k = int(req.get("top_logprobs_num") or 0)
                seq = prompt + ids
                rows = self._positions(seq, start, k, fp8)
                cut = len(prompt) - start
                meta.update(input_token_logprobs=[r[0] for r in rows[:cut]],
                            output_token_logprobs=[r[0] for r in rows[cut:]])
                if k:
                    meta.update(input_top_logprobs=[r[1] for r in rows[:cut]],
                                output_top_logprobs=[r[1] for r in rows[cut:]])
            self._json({"text": "".join(chr(97 + t % 26) for t in ids), "output_ids": ids,
                        "meta_info": meta})

        @staticmethod
        def _positions(seq: list[int], start: int, k: int, fp8: bool) -> list:
            rows: list = [([None, seq[0], None], None)] if start == 0 else []
            for i, (lp, order, _) in _prefix_rows(seq, max(start, 1), len(seq), fp8):
                rows.append(([lp[seq[i]], seq[i], None], [[lp[v], v, None] for v in order[:k]]))
            return rows

        @staticmethod
        def _prompt_logprobs(prompt: list[int], k: int, fp8: bool) -> list[dict | None]:
            rows: list[dict | None] = [None]
            for i, (lp, order, rank) in _prefix_rows(prompt, 1, len(prompt), fp8):
                keep = {str(v): {"logprob": lp[v], "rank": rank[v]} for v in order[:k]}
                keep[str(prompt[i])] = {"logprob": lp[prompt[i]], "rank": rank[prompt[i]]}
                rows.append(keep)
            return rows

        def _too_long(self, prompt: int, n: int) -> bool:
            limit = engine.shape.max_len
            if prompt + n <= limit:
                return False
            self._error(front.too_long(limit, prompt, n), 400, param="messages")
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
            running = (req.get("stream_options") or {}).get("continuous_usage_stats")
            first, last, sent = True, False, 0
            while not last:
                last, k = done.get(), 1
                while not last and not done.empty():  # a step's tokens: one chunk, as vLLM
                    last, k = done.get_nowait(), k + 1  # streams a verified draft
                sent += k
                delta = {"content": "tok " * k} | ({"role": "assistant"} if first else {})
                extra = {"usage": {"prompt_tokens": prompt, "completion_tokens": sent,
                                   "total_tokens": prompt + sent}} if running else {}
                self._event({**chunk, **extra, "choices": [{
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


class Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a benchmark opening 16 connections at once would
    # lose SYNs to it and wait out the 1 s retransmit (uvicorn, the engines' server, allows
    # 2048).
    request_queue_size = 2048


def serve(engine: Engine, host: str, port: int, name: str, front: Front,
          ready: Callable[[], None]) -> None:
    """Bind, print the engine's ready line(s) (`ready`), serve until killed."""
    server = Server((host, port), handler(engine, name, front))
    server.daemon_threads = True
    ready()
    server.serve_forever()


def publish_gpu_memory(devices: int, bytes_per_device: int) -> None:
    """What the driver would list for this process: `bytes_per_device` on devices 0..n-1, as
    `{pid}.json` in INFOPT_SIM_NVML_DIR (read by tests/fake_nvml.SimulatedProcessesBackend);
    nothing when unset."""
    folder = os.environ.get("INFOPT_SIM_NVML_DIR")
    if not folder:
        return
    table = {str(i): bytes_per_device for i in range(devices)}
    tmp = Path(folder) / f".{os.getpid()}.tmp"
    tmp.write_text(json.dumps(table))
    tmp.replace(Path(folder) / f"{os.getpid()}.json")


def time_scale() -> float:
    return float(os.environ.get("INFOPT_SIM_TIME_SCALE", "1"))
