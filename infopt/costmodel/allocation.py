"""How each engine turns device memory into a KV-cache budget, as data + small pure functions.

vLLM (GPU, V1, read from vllm/v1/worker/gpu_worker.py determine_available_memory, 0.32):
    kv = total x gpu_memory_utilization - (weights + non-torch + activation peak)
         - CUDA-graph estimate (subtracted since v0.21 unless --enforce-eager)
    then whole blocks of `block_size` tokens (16 on GPU).
vLLM (CPU backend): kv = VLLM_CPU_KVCACHE_SPACE exactly, in blocks of 128 tokens
    (checked: 1 GiB / 23,040 B -> 364 blocks x 128 = 46,592 tokens, the logged figure).
SGLang: kv = total x mem_fraction_static - weights - CUDA context, one token per cell
    (python/sglang/srt/model_executor/model_runner.py profile_max_num_token).
TensorRT-LLM: kv = free memory after weights and activations x free_gpu_memory_fraction (0.9),
    blocks of 32 tokens (tokens_per_block default).
llama.cpp: kv = n_ctx x per-token bytes of the chosen -ctk/-ctv types, fixed by -c; the fit
    check adds weights and a compute buffer.

Overheads not read from the checkpoint (CUDA context, activation peak, CUDA graphs) are
estimates, labelled as such in `assumptions`; the upstream startup-log cases measure their error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infopt.specs.inspection import ModelInspection

GIB = 2**30

# CUDA context + cuBLAS/cuDNN workspaces as vLLM's "non_torch_memory": ~0.2-0.5 GiB at TP=1 in
# upstream logs; NCCL buffers add ~0.3 GiB per rank at TP>1. Estimates.
CUDA_CONTEXT_BYTES = int(0.4 * GIB)
NCCL_BYTES = int(0.3 * GIB)
# vLLM >= 0.21 subtracts its CUDA-graph memory estimate; typical logged values 0.3-1.5 GiB for
# 7-70B models with default capture sizes. Estimate.
CUDA_GRAPH_BYTES = int(0.6 * GIB)
# llama.cpp compute buffer at default -ub 512 for small models: 100-300 MiB. Estimate.
LLAMACPP_COMPUTE_BUFFER_BYTES = int(0.3 * GIB)


@dataclass(frozen=True)
class EngineKnobs:
    gpu_memory_utilization: float = 0.9  # vLLM default
    mem_fraction_static: float = 0.88  # SGLang's default for an 80 GB GPU at TP 1 (varies)
    free_gpu_memory_fraction: float = 0.9  # TensorRT-LLM KvCacheConfig default
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the device
    max_num_seqs: int | None = None
    enforce_eager: bool = False
    cpu_kvcache_space_bytes: int | None = None  # vLLM CPU backend
    device_is_cpu: bool = False


@dataclass(frozen=True)
class KvBudget:
    budget_bytes: int  # what the engine allows itself (utilization applied)
    overhead_bytes: int  # runtime overheads counted against it (estimates)
    kv_budget_bytes: int
    block_tokens: int  # allocation granularity
    assumptions: tuple[str, ...]
    # Engines that allocate every sequence's full context up front (llama.cpp's -c cells), in
    # multiples of this many cells; None: a paged pool sized by the budget.
    upfront_pad_cells: int | None = None


def vllm_default_batched_tokens(memory_bytes: int, device_name: str, is_cpu: bool) -> int:
    """vLLM 0.32 arg_utils defaults for the OpenAI server (LLM class values differ)."""
    if is_cpu:
        return 2048
    if memory_bytes >= 160 * GIB:
        return 16384
    if memory_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 8192
    return 2048


def activation_peak_bytes(m: ModelInspection, batched_tokens: int, max_num_seqs: int,
                          tp: int) -> int:
    """Estimate of vLLM's profiled activation peak: the widest MLP intermediate (gate+up output
    plus the activation) and a few hidden-size buffers for `batched_tokens` tokens in 16-bit,
    plus fp32 logits for `max_num_seqs` sampled rows. Estimate, checked against upstream logs."""
    h = m.hidden_size
    widths = []
    if m.moe:
        widths.append(m.moe.experts_per_token * m.moe.expert_intermediate_size)
    dense_layers = m.mlp_kinds.get("dense", 0) if m.mlp_kinds else 0
    if dense_layers and m.params.dense_mlp:
        widths.append(m.params.dense_mlp // (dense_layers * 3 * h))
    inter = max(widths or [4 * h]) / tp
    per_token = (3 * inter + 4 * h) * 2
    logits = max_num_seqs * m.vocab_size / tp * 4
    return int(batched_tokens * per_token + logits)


def vllm_gpu(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    batched = k.max_num_batched_tokens or vllm_default_batched_tokens(memory_bytes, device, False)
    seqs = k.max_num_seqs or (1024 if batched >= 8192 else 256)
    act = activation_peak_bytes(m, batched, seqs, tp)
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    graphs = 0 if k.enforce_eager else CUDA_GRAPH_BYTES
    budget = int(memory_bytes * k.gpu_memory_utilization)
    overhead = act + ctx + graphs
    return KvBudget(budget, overhead, budget - weights_bytes - overhead, 16, (
        f"vLLM: budget = {k.gpu_memory_utilization:g} x device memory (gpu_memory_utilization)",
        f"activation peak ~{act / GIB:.2f} GiB for max_num_batched_tokens={batched}, "
        f"max_num_seqs={seqs} (estimate)",
        f"CUDA context{' + NCCL' if tp > 1 else ''} ~{ctx / GIB:.2f} GiB (estimate)",
        "CUDA graphs: none (--enforce-eager)" if k.enforce_eager else
        f"CUDA graphs ~{graphs / GIB:.2f} GiB, subtracted by vLLM >= 0.21 (estimate)",
        "blocks of 16 tokens"))


def vllm_cpu(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    space = k.cpu_kvcache_space_bytes or 4 * GIB
    return KvBudget(space, 0, space, 128, (
        f"vLLM CPU: KV space = VLLM_CPU_KVCACHE_SPACE = {space / GIB:g} GiB"
        + ("" if k.cpu_kvcache_space_bytes else " (assumed; set it explicitly)"),
        "blocks of 128 tokens (CPU backend)"))


def sglang(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
           k: EngineKnobs) -> KvBudget:
    budget = int(memory_bytes * k.mem_fraction_static)
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    return KvBudget(budget, ctx, budget - weights_bytes - ctx, 1, (
        f"SGLang: static memory = {k.mem_fraction_static:g} x device memory (mem_fraction_static)",
        f"CUDA context ~{ctx / GIB:.2f} GiB (estimate)", "token-granular KV pool"))


def trtllm(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
           k: EngineKnobs) -> KvBudget:
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    act = activation_peak_bytes(m, k.max_num_batched_tokens or 8192, k.max_num_seqs or 256, tp)
    free = memory_bytes - weights_bytes - ctx - act
    kv = int(free * k.free_gpu_memory_fraction)
    return KvBudget(memory_bytes, ctx + act, kv, 32, (
        f"TensorRT-LLM: KV = {k.free_gpu_memory_fraction:g} x free memory after weights "
        "and activations (free_gpu_memory_fraction)",
        f"activations ~{act / GIB:.2f} GiB, context ~{ctx / GIB:.2f} GiB (estimates)",
        "blocks of 32 tokens"))


def llamacpp(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    overhead = LLAMACPP_COMPUTE_BUFFER_BYTES
    return KvBudget(memory_bytes, overhead, memory_bytes - weights_bytes - overhead, 1, (
        "llama.cpp: KV = -c x per-token bytes of -ctk/-ctv, allocated up front",
        f"compute buffer ~{overhead / GIB:.2f} GiB (estimate)"), upfront_pad_cells=LLAMACPP_CTX_PAD)


def mlx(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
        k: EngineKnobs) -> KvBudget:
    # MLX grows its KV cache on demand in unified memory; macOS lets the GPU wire roughly 75%
    # of RAM by default (iogpu.wired_limit_mb), the practical budget. Estimate.
    budget = int(memory_bytes * 0.75)
    return KvBudget(budget, 0, budget - weights_bytes, 1, (
        "MLX: KV grows on demand in unified memory; budget ~75% of RAM (default GPU wired "
        "limit, estimate)",))


ALLOCATORS = {"vllm": vllm_gpu, "vllm-cpu": vllm_cpu, "sglang": sglang, "trtllm": trtllm,
              "llamacpp": llamacpp, "mlx": mlx}


def allocator_key(engine: str, device_is_cpu: bool) -> str:
    """The allocation scheme: an engine's CPU backend where it has its own ("<engine>-cpu")."""
    cpu = f"{engine}-cpu"
    return cpu if device_is_cpu and cpu in ALLOCATORS else engine


# llama.cpp rounds the KV context up to a multiple of 256 cells (measured here: -c 4000 with
# q8_0 logs 47.81 MiB = 4096 cells x 12,240 B).
LLAMACPP_CTX_PAD = 256


def llamacpp_kv_cells(n_ctx: int) -> int:
    return padded_cells(n_ctx, LLAMACPP_CTX_PAD)


def padded_cells(n_ctx: int, pad: int) -> int:
    return math.ceil(n_ctx / pad) * pad


def round_to_blocks(kv_budget_bytes: float, bytes_per_token: float, block_tokens: int) -> int:
    if kv_budget_bytes <= 0 or bytes_per_token <= 0:
        return 0
    return math.floor(kv_budget_bytes / (bytes_per_token * block_tokens)) * block_tokens
