"""Memory fit of one candidate (model x weight path x engine x device x layout) at the full
requested context and concurrency, with the gap and the smallest alternatives when it does not
fit. Alternatives are options to put to the user: nothing here shortens the context or applies
RoPE scaling on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from infopt.costmodel.allocation import (
    EngineKnobs,
    KvBudget,
    padded_cells,
    round_to_blocks,
)
from infopt.costmodel.kv import (
    kv_bytes_per_token_per_gpu,
    kv_element_bytes,
    state_bytes_per_sequence_per_gpu,
)
from infopt.costmodel.weights import weights_bytes
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget, MemoryFit, WeightPath
from infopt.specs.inspection import ModelInspection

GIB = 2**30


@dataclass(frozen=True)
class KvOptions:
    """The engine's KV cache types as the fit sees them (the cost model imports no engine: the
    caller takes these from the adapter, infopt.engines.support.kv_options): the native type,
    the 8-bit one offered as an alternative, and the types this device cannot run -> why."""

    native: str = "auto"
    eight_bit: str = "fp8"
    refused: Mapping[str, str] = field(default_factory=dict)
    # The engine's allocation rule (EngineAdapter.kv_allocator) and its CPU backend's own, if
    # any: (model, memory bytes, weights bytes per device, tp, device name, EngineKnobs) ->
    # KvBudget. Which one applies is the fit's choice (EngineKnobs.device_is_cpu).
    allocate: Callable[..., KvBudget] | None = None
    allocate_cpu: Callable[..., KvBudget] | None = None


@dataclass(frozen=True)
class FitRequest:
    model: ModelInspection
    device: DeviceBudget
    gpu_count: int
    engine: str
    context_tokens: int
    concurrency: int
    kv_dtype: str
    weight_path: WeightPath
    tp: int = 1
    pp: int = 1
    # DP replicas, each a TP x PP server with its own weights and KV pool: the fit is one
    # replica's (`concurrency` is a replica's), the GPU count must hold them all.
    dp: int = 1
    knobs: EngineKnobs = EngineKnobs()
    exact_weights_bytes: int | None = None  # the checkpoint's real tensor bytes, when known
    kv: KvOptions = KvOptions()
    # The host's RAM, which holds what a partial offload (knobs.gpu_layers) leaves off the
    # device (None: not checked).
    host_memory_bytes: int | None = None


def validate(r: FitRequest) -> None:
    m = r.model
    if r.gpu_count < 1:
        raise InputError(f"gpu count must be at least 1 (got {r.gpu_count}).")
    if r.tp < 1 or r.pp < 1 or r.dp < 1:
        raise InputError(f"tp, pp and dp must be >= 1 (got tp={r.tp}, pp={r.pp}, dp={r.dp}).")
    if r.tp * r.pp * r.dp > r.gpu_count:
        dp = f" x dp {r.dp}" if r.dp > 1 else ""
        raise InputError(f"tp x pp{dp} = {r.tp * r.pp * r.dp} needs that many GPUs; only "
                         f"{r.gpu_count} given. Raise --gpu-count or lower --tp/--pp.")
    if r.context_tokens < 1 or r.concurrency < 1:
        raise InputError("context and concurrency must be >= 1.")
    if r.context_tokens > m.native_context_tokens:
        raise InputError(
            f"context {r.context_tokens} tokens is above the model's native context "
            f"{m.native_context_tokens} (max_position_embeddings). infopt never extends it with "
            "RoPE scaling on its own; ask for at most the native context.")
    heads = m.attention.num_query_heads
    if heads % r.tp:
        ok = [t for t in (1, 2, 4, 8, 16) if heads % t == 0]
        raise InputError(f"tp={r.tp} does not divide the {heads} attention heads; engines "
                         f"require it. Valid tp values: {ok}.")
    kv_element_bytes(r.kv_dtype)  # unknown dtype -> InputError
    if reason := r.kv.refused.get(r.kv_dtype):
        raise InputError(f"{reason}. The engine would refuse to start with it on this machine; "
                         f"plan with --kv-dtype {r.kv.native} instead.")


def plan_fit(r: FitRequest, *, with_alternatives: bool = True) -> MemoryFit:
    validate(r)
    m, dev = r.model, r.device
    is_cpu = r.knobs.device_is_cpu
    if r.kv.allocate is None:
        raise InputError(f"no memory model for engine '{r.engine}': pass FitRequest.kv from "
                         "infopt.engines.support.kv_options (the adapter's allocation rule)")
    shards = r.tp * r.pp
    w_total = weights_bytes(m, r.weight_path, r.exact_weights_bytes)
    # Weights split evenly over TP x PP ranks (embeddings/head replicate or split by engine;
    # an even split is the first-order assumption).
    split = offload_split(m, r.knobs)
    w_rank = int(w_total / shards)
    moe_host = experts_on_host_bytes(r, w_rank, split.device_layers)
    w_gpu = int(w_rank * split.weights_share) - moe_host
    allocate = r.kv.allocate_cpu if is_cpu and r.kv.allocate_cpu else r.kv.allocate
    budget = allocate(m, dev.memory_bytes, w_gpu, r.tp, dev.name, r.knobs)
    # A partial offload keeps the offloaded layers' KV with them (llama.cpp's default
    # --kv-offload): the device holds its layers' share of every token's KV.
    bpt = kv_bytes_per_token_per_gpu(m, r.kv_dtype, r.tp, r.pp) * split.kv_share
    state = state_bytes_per_sequence_per_gpu(m, r.kv_dtype, r.context_tokens, r.tp,
                                             r.pp) * split.kv_share
    per_seq = bpt * r.context_tokens + state
    required = int(per_seq * r.concurrency)
    if pad := budget.upfront_pad_cells:
        # Allocated up front (llama.cpp: -c cells, padded to 256): -c = context x slots keeps
        # every slot at full context. Capacity is that allocation if memory allows it.
        cells = padded_cells(r.context_tokens * r.concurrency, pad)
        required = int(cells * bpt + state * r.concurrency)
        capacity = cells if budget.kv_budget_bytes >= required else \
            round_to_blocks(budget.kv_budget_bytes, bpt + state / r.context_tokens, pad)
    else:
        # Sliding/recurrent state is amortized per token at the requested context.
        capacity = round_to_blocks(budget.kv_budget_bytes, bpt + state / r.context_tokens,
                                   budget.block_tokens)
    headroom = budget.kv_budget_bytes - required
    # On a CPU the host's RAM holds the weights beside the KV pool, and an engine with a fixed
    # KV space (vLLM's VLLM_CPU_KVCACHE_SPACE) does not subtract the weights from it: both
    # must fit. Short by what the weights, the larger of the pool and the need, and the
    # overheads exceed the host's memory.
    host_short = max(0, w_gpu + max(budget.kv_budget_bytes, required) + budget.overhead_bytes
                     - dev.memory_bytes) if is_cpu else 0
    on_host = offloaded_bytes(r, w_rank - w_gpu, required, split.kv_share)
    if on_host and r.host_memory_bytes is not None:
        host_short = max(0, on_host - r.host_memory_bytes)
    fits = headroom >= 0 and budget.kv_budget_bytes > 0 and host_short == 0
    assumptions = [
        f"weights {w_total / GIB:.2f} GiB total ({r.weight_path.label}: "
        f"{r.weight_path.source}){' from the checkpoint' if r.exact_weights_bytes else ''}, "
        f"split evenly over {shards} rank(s)",
        f"KV {bpt:,.0f} B/token/GPU at {r.kv_dtype} over full-attention layers"
        + (f"; {state:,.0f} B/sequence/GPU of sliding-window, attention-chunk or recurrent "
           "state" if state else ""),
        *budget.assumptions,
        *([f"one of {r.dp} data-parallel replicas, each with its own weights and KV pool: "
           f"{r.concurrency} sequence(s) per replica"] if r.dp > 1 else []),
        *([f"the host's {dev.memory_bytes / GIB:.2f} GiB must hold the weights "
           f"({w_gpu / GIB:.2f} GiB) beside the KV pool: {host_short / GIB:.2f} GiB short"]
          if host_short else []),
        *([f"not offered on this device: {r.kv.refused[r.kv.eight_bit]}"]
          if r.kv.eight_bit in r.kv.refused else []),
        *([f"partial offload: {r.knobs.gpu_layers} of {m.num_layers} layers (-ngl: the output "
           f"layer, then the last {split.device_layers} decoder layers with their KV) on the "
           f"device, the rest in host RAM: {on_host / GIB:.2f} GiB of weights and KV "
           + (f"in the host's {r.host_memory_bytes / GIB:.2f} GiB"
              + (f", {host_short / GIB:.2f} GiB short" if host_short else "")
              if r.host_memory_bytes is not None else "(host RAM not checked)")]
          if split.kv_share < 1 else []),
        *([f"--n-cpu-moe {r.knobs.cpu_moe_layers}: the routed experts of the first "
           f"{r.knobs.cpu_moe_layers} layers ({moe_host / GIB:.2f} GiB, the experts' share of "
           "the weights split evenly over the MoE layers) in host RAM"] if moe_host else []),
    ]
    fit = MemoryFit(
        engine=r.engine, gpu=dev.name, gpu_count=r.gpu_count, tp=r.tp, pp=r.pp, dp=r.dp,
        context_tokens=r.context_tokens, concurrency=r.concurrency, kv_dtype=r.kv_dtype,
        weight_path=r.weight_path.label, memory_per_gpu_bytes=dev.memory_bytes,
        budget_bytes_per_gpu=budget.budget_bytes, weights_bytes_per_gpu=w_gpu,
        runtime_overhead_bytes_per_gpu=budget.overhead_bytes,
        kv_budget_bytes_per_gpu=budget.kv_budget_bytes, kv_bytes_per_token_per_gpu=bpt,
        state_bytes_per_sequence_per_gpu=int(state), required_kv_bytes_per_gpu=required,
        kv_capacity_tokens=capacity,
        max_concurrency_at_context=max(0.0, budget.kv_budget_bytes / per_seq) if per_seq else 0.0,
        fits=fits, gap_bytes=0 if fits else max(-headroom, host_short, 0),
        headroom_bytes=headroom, alternatives=[], assumptions=assumptions)
    if not fits and with_alternatives:
        fit = fit.model_copy(update={"alternatives": alternatives(r, fit)})
    return fit


@dataclass(frozen=True)
class OffloadSplit:
    weights_share: float  # of the weights on the device
    kv_share: float  # of each token's KV on the device
    device_layers: int  # decoder layers on the device


def offload_split(m: ModelInspection, knobs: EngineKnobs) -> OffloadSplit:
    """What a partial offload (knobs.gpu_layers: llama.cpp's -ngl N) puts on the device. N counts
    n_layer + 1 offloadable layers with the output layer as the last: llama.cpp's
    src/llama-model.cpp puts layers from i_gpu_start = max(n_layer + 1 - N, 0) on the GPU and
    assigns the output as layer n_layer, so -ngl N holds the output projection and the last
    N - 1 decoder layers; the input embedding stays on the CPU. The output projection is
    lm_head, or a copy of the tied embedding table. A real Vulkan build's buffers agree
    (tests/integration/test_llamacpp_vulkan.py). All on the device unless N <= n_layer."""
    n, layers = knobs.gpu_layers, m.num_layers
    if n is None or knobs.device_is_cpu or n > layers:
        return OffloadSplit(1.0, 1.0, layers)
    if n <= 0:
        return OffloadSplit(0.0, 0.0, 0)
    p, total, on_device = m.params, m.params_total, n - 1
    output = (p.lm_head or p.embedding) / total if total else 0.0
    decoder = max(0.0, 1 - (p.embedding + p.lm_head) / total) if total else 1.0
    return OffloadSplit(min(1.0, output + decoder * on_device / layers), on_device / layers,
                        on_device)


def experts_on_host_bytes(r: FitRequest, w_rank: int, device_layers: int) -> int:
    """The routed-expert weights --n-cpu-moe N keeps in host RAM among the layers on the device:
    llama.cpp offloads the last layers and keeps the experts of the first N on the CPU, so only
    the overlap leaves the device; each MoE layer holds an even share of the experts."""
    n, moe, layers = r.knobs.cpu_moe_layers, r.model.moe, r.model.num_layers
    if not n or moe is None or r.knobs.device_is_cpu or not r.model.params_total:
        return 0
    overlap = max(0, min(n, layers) - (layers - device_layers))
    per_layer = w_rank * r.model.params.routed_experts / r.model.params_total / moe.num_moe_layers
    return int(min(overlap, moe.num_moe_layers) * per_layer)


def offloaded_bytes(r: FitRequest, weights_off_bytes: int, kv_on_device_bytes: int,
                    kv_share: float) -> int:
    """What a partial offload leaves in host RAM: the other layers' weights and their KV."""
    if kv_share >= 1:
        return 0
    kv_total = (kv_bytes_per_token_per_gpu(r.model, r.kv_dtype, r.tp, r.pp) * r.context_tokens
                + state_bytes_per_sequence_per_gpu(r.model, r.kv_dtype, r.context_tokens, r.tp,
                                                   r.pp)) * r.concurrency
    return int(weights_off_bytes + max(0.0, kv_total - kv_on_device_bytes))


def alternatives(r: FitRequest, fit: MemoryFit) -> list[str]:
    """The smallest changes that would fit, each checked with the same model."""
    opts: list[str] = []
    for tp in (2, 4, 8):
        if tp > r.tp and r.model.attention.num_query_heads % tp == 0:
            # Every replica widens: a DP layout needs tp x pp x dp GPUs.
            gpus = tp * r.pp * r.dp
            alt = plan_fit(replace(r, tp=tp, gpu_count=max(r.gpu_count, gpus)),
                           with_alternatives=False)
            if alt.fits:
                opts.append(f"tensor parallel tp={tp} on {gpus} GPUs: fits, KV capacity "
                            f"{alt.kv_capacity_tokens:,} tokens, "
                            f"{alt.max_concurrency_at_context:.1f} sequences at full context")
                break
    low_kv = r.kv.eight_bit
    # Not offered where the device cannot run it (plan_fit's assumptions say why).
    if low_kv not in r.kv.refused and kv_element_bytes(r.kv_dtype) > kv_element_bytes(low_kv):
        alt = plan_fit(replace(r, kv_dtype=low_kv), with_alternatives=False)
        verdict = "fits" if alt.fits else f"still {alt.gap_bytes / GIB:.2f} GiB short per GPU"
        opts.append(f"8-bit KV cache ({low_kv}): {verdict} (check quality at full context "
                    "first)")
    # The weights and runtime alone beyond the budget (or, on a CPU, the host's memory): no
    # KV, concurrency or context change can help.
    over = max(-fit.kv_budget_bytes_per_gpu, fit.weights_bytes_per_gpu
               + fit.runtime_overhead_bytes_per_gpu - fit.memory_per_gpu_bytes)
    if over > 0:
        opts = [o for o in opts if o.startswith("tensor parallel")]
    elif fit.max_concurrency_at_context >= 1:
        opts.append(f"lower concurrency to {int(fit.max_concurrency_at_context)} sequences at "
                    f"the full {r.context_tokens}-token context")
    if over <= 0 and fit.kv_budget_bytes_per_gpu > 0 and r.concurrency > 0:
        per_seq_ctx = int(fit.kv_budget_bytes_per_gpu / max(1.0, fit.kv_bytes_per_token_per_gpu)
                          / r.concurrency)
        if 0 < per_seq_ctx < r.context_tokens:
            opts.append(f"a shorter context of ~{per_seq_ctx:,} tokens at concurrency "
                        f"{r.concurrency} (only if you accept less than the native window)")
    if over > 0:
        opts.append("a smaller weight format (e.g. a 4-bit checkpoint) or a device with more "
                    f"memory: the weights and runtime alone exceed it by {over / GIB:.2f} GiB "
                    "per device")
    return opts
