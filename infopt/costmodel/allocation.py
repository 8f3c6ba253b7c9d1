"""The vocabulary of KV-cache budgets (KvBudget, EngineKnobs) and the shared overhead estimates.
Each engine's own allocation rule is a function in its adapter module (EngineAdapter.kv_allocator,
passed to the fit as FitRequest.kv.allocate: the cost model imports no engine);see each adapter's
kv_allocator for the rule it encodes and the upstream source it was read from.

Overheads not read from the checkpoint (CUDA context, activation peak, CUDA graphs) are
estimates, labelled as such in `assumptions`; the upstream startup-log cases measure their error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infopt.specs.inspection import MlpKind, ModelInspection

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
    # None: SGLang's own default for the GPU and shape (infopt.engines.sglang.adapter
    # .default_mem_fraction_static: 0.83 on one H100, lower at high TP)
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float = 0.9  # TensorRT-LLM KvCacheConfig default
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the device
    max_num_seqs: int | None = None
    enforce_eager: bool = False
    cpu_kvcache_space_bytes: int | None = None  # vLLM CPU backend
    device_is_cpu: bool = False
    # llama.cpp -ngl N on a GPU: the first N of the model's layers (weights and their KV) on
    # the device, the rest in host RAM (None: every layer on the device).
    gpu_layers: int | None = None
    # llama.cpp --n-cpu-moe N: the routed experts of the first N layers stay in host RAM (their
    # attention and shared weights on the device). None: no expert is kept on the host.
    cpu_moe_layers: int | None = None


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
    dense_layers = m.mlp_kinds.get(MlpKind.DENSE, 0) if m.mlp_kinds else 0
    if dense_layers and m.params.dense_mlp:
        widths.append(m.params.dense_mlp // (dense_layers * 3 * h))
    inter = max(widths or [4 * h]) / tp
    per_token = (3 * inter + 4 * h) * 2
    logits = max_num_seqs * m.vocab_size / tp * 4
    return int(batched_tokens * per_token + logits)
















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
