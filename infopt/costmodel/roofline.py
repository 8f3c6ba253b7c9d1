"""Roofline ceilings per phase and per rank (hardware-throughput-ceilings.md, arithmetic checked).

Decode step for `batch` sequences at `context` tokens each, on one TP rank:
  bytes  = weight traffic (executed weights once per step; MoE: shared + expected union of
           experts the batch touches) / tp + KV reads batch x context x kv_bpt + KV writes
           batch x kv_bpt (+ sliding/recurrent state reads)
  flops  = 2 x executed linear params x batch / tp
           + attention 4 x full_layers x context x query_heads x head_dim x batch / tp
           (QK and AV; GQA shrinks KV traffic, not this work; MLA attends over the latent)
  Sparse (indexed) layers, DeepSeek-V3.2: attention reads and attends only min(context,
  index_topk) latents, while the indexer reads every cached key and scores it with each of its
  heads, 2 x index_n_heads x index_head_dim FLOPs per key per layer, whole on every TP rank
  (vLLM replicates the indexer); its FP8 scoring is costed at the path's rate.
  comm   = TP all-reduce: 2 per layer x batch x hidden x 2 bytes x 2 (tp-1)/tp (ring), over the
           interconnect, not overlapped (stated assumption)
  t_step = max(bytes/BW, flops/C) + comm/link; tokens/s = batch x tokens_per_step / t_step
Pipeline stages (pp > 1): each rank holds 1/pp of the layers and, with the pipeline full,
steps a micro-batch of batch/pp sequences, re-reading its weights per micro-batch: tokens/s =
micro-batch / t_stage (why PP trails TP for weight-bound decode). The stage hand-off adds
micro-batch x hidden x 2 bytes per step. Expert parallelism (ep, on the TP ranks): the same
bytes and work per rank for uniform routing (experts split whole instead of sliced); the MLP
all-reduce becomes dispatch + combine all-to-alls of micro-batch x top_k x hidden x 2 bytes x
(ep-1)/ep per MoE layer.
Prefill of one prompt of T tokens: flops = 2 x P x T + 2 x full_layers x T^2 x q_heads x
head_dim (causal QK+AV: 4 x T^2/2; a sparse layer attends min(position, index_topk) tokens, and
its indexer scores the causal T^2/2 pairs), bytes = weights once + T x kv_bpt written.
Windowed layers' (sliding, chunked) attention FLOPs are left out of both phases.

A W4A16 path multiplies at 16-bit rates; FP8/FP4 rates only where the kernel runs them.
"""

from __future__ import annotations

from infopt.costmodel.kv import (
    attended_tokens,
    decode_read_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
)
from infopt.costmodel.weights import decode_weight_traffic_bytes, executed_linear_params
from infopt.specs.fit import (
    Bound,
    CeilingRatio,
    CeilingRow,
    DeviceBudget,
    Envelope,
    Layout,
    WeightPath,
)
from infopt.specs.inspection import AttentionKind, ModelInspection


def step_floor(bytes_moved: float, flops: float, comm_bytes: float, bandwidth: float,
               flops_rate: float, link_bandwidth: float | None) -> tuple[float, float, float,
                                                                         float, Bound]:
    """(t_memory, t_compute, t_comm, t_step, bound) for one step; pure arithmetic."""
    t_mem = bytes_moved / bandwidth
    t_comp = flops / flops_rate
    t_comm = comm_bytes / link_bandwidth if comm_bytes and link_bandwidth else 0.0
    t_step = max(t_mem, t_comp) + t_comm
    if t_comm > max(t_mem, t_comp):
        bound = Bound.COMMUNICATION
    else:
        bound = Bound.MEMORY if t_mem >= t_comp else Bound.COMPUTE
    return t_mem, t_comp, t_comm, t_step, bound


def _attention_dim(m: ModelInspection) -> int:
    a = m.attention
    if a.kind is AttentionKind.MLA and a.kv_lora_rank:
        # Absorbed MLA decode attends over the latent (+ rope part) for every query head.
        return a.kv_lora_rank + (a.qk_rope_head_dim or 0)
    return a.head_dim


def _indexer_flops_per_key(m: ModelInspection) -> int:
    """A sparse layer's indexer scoring one cached key for one query: a dot product of
    index_head_dim per indexer head (DeepSeek-V3.2: 2 x 64 x 128); 0 without an indexer."""
    a = m.attention
    return 2 * (a.index_n_heads or 0) * (a.index_head_dim or 0)


def _attended_pairs(tokens: int, topk: int | None) -> float:
    """(query, key) pairs a causal prefill of `tokens` attends: T^2/2, or with a sparse layer's
    top-k, each query at most k keys (sum of min(i, k): k x T - k^2 / 2 once T > k)."""
    if not topk or tokens <= topk:
        return tokens * tokens / 2
    return topk * tokens - topk * topk / 2


def decode_row(m: ModelInspection, path: WeightPath, kv_dtype: str, batch: int, context: int,
               dev: DeviceBudget, envelope: Envelope, tp: int = 1,
               tokens_per_step: float = 1.0, exact_weights_bytes: int | None = None,
               pp: int = 1, ep: bool = False) -> CeilingRow | None:
    """One decode ceiling row: the step of one TP rank of one pipeline stage (t_step_s, bytes
    and FLOPs are per rank, each stage stepping a micro-batch of ceil(batch / pp)), and the
    replica's rate: every sequence advances `tokens_per_step` tokens per round through the pp
    stages, so batch x tokens_per_step / (pp x t_step) (a pipeline deeper than the batch runs
    stages idle). None when the envelope's rates are unavailable."""
    bw, rates = _rates_by_math(m, path, dev, envelope)
    if bw is None or rates is None:
        return None
    micro = max(1, -(-batch // pp))  # the sequences one stage steps at a time
    w = decode_weight_traffic_bytes(m, path, micro, exact_weights_bytes) / (tp * pp)
    kv_bpt = kv_bytes_per_token_per_gpu(m, kv_dtype, tp, pp)
    kv = (micro * decode_read_bytes_per_sequence_per_gpu(m, kv_dtype, context, tp, pp)
          + micro * kv_bpt * tokens_per_step)
    full = m.kv_cache.full_attention_layers
    flops = {math: 2 * n * micro * tokens_per_step / (tp * pp) for math, (n, _) in rates.items()}
    flops[path.math] += ((4 * full * attended_tokens(m, context) * m.attention.num_query_heads
                          * _attention_dim(m) / tp + full * _indexer_flops_per_key(m) * context)
                         * micro * tokens_per_step / pp)
    comm = _decode_comm(m, micro, tp, pp, ep)
    t_mem, t_comp, t_comm, t_step, bound = step_floor(
        w + kv, sum(flops.values()), comm, bw, _blended_rate(flops, rates),
        dev.interconnect_bytes_per_s)
    emitted = micro * tokens_per_step
    return CeilingRow(phase="decode", envelope=envelope, weight_path=path.label,
                      kv_dtype=kv_dtype, batch=batch, context_tokens=context,
                      bytes_per_step=w + kv, flops_per_step=sum(flops.values()),
                      comm_bytes_per_step=comm,
                      t_memory_s=t_mem, t_compute_s=t_comp, t_comm_s=t_comm, t_step_s=t_step,
                      bound=bound, tokens_per_step=emitted,
                      tokens_per_s=batch * tokens_per_step / (pp * t_step))


def layout_decode_row(m: ModelInspection, path: WeightPath, kv_dtype: str, batch: int,
                      context: int, dev: DeviceBudget, envelope: Envelope, layout: Layout,
                      tokens_per_step: float = 1.0, exact_weights_bytes: int | None = None
                      ) -> CeilingRow | None:
    """The decode ceiling of a whole layout serving `batch` sequences: its DP replicas step
    side by side, each on its share (ceil(batch / dp): the busiest one's step), so the rate is
    every sequence's, batch x tokens_per_step per round of pp stage steps. The row's step,
    bytes and FLOPs stay one rank's."""
    row = decode_row(m, path, kv_dtype, -(-batch // layout.dp), context, dev, envelope,
                     layout.tp, tokens_per_step, exact_weights_bytes, pp=layout.pp,
                     ep=layout.ep)
    if row is None or layout.dp == 1:
        return row
    return row.model_copy(update={
        "batch": batch, "tokens_per_s": batch * tokens_per_step / (layout.pp * row.t_step_s)})


def _decode_comm(m: ModelInspection, micro: int, tp: int, pp: int, ep: bool) -> float:
    """Bytes one rank sends per decode step: TP all-reduces (ring: 2 (tp-1)/tp of the data),
    the PP hand-off, and with EP the MoE layers' all-to-alls instead of their MLP all-reduce."""
    act = micro * m.hidden_size * 2  # one 16-bit activation row per sequence
    layers = m.num_layers / pp
    ring = 2 * (tp - 1) / tp if tp > 1 else 0.0
    moe_layers = m.moe.num_moe_layers / pp if (ep and m.moe) else 0.0
    comm = (2 * layers - moe_layers) * act * ring
    if m.moe and moe_layers and tp > 1:  # moe_layers is 0 without m.moe
        comm += moe_layers * 2 * act * m.moe.experts_per_token * (tp - 1) / tp
    return comm + (act if pp > 1 else 0.0)


def prefill_row(m: ModelInspection, path: WeightPath, kv_dtype: str, prompt_tokens: int,
                dev: DeviceBudget, envelope: Envelope, tp: int = 1,
                exact_weights_bytes: int | None = None) -> CeilingRow | None:
    bw, rates = _rates_by_math(m, path, dev, envelope)
    if bw is None or rates is None:
        return None
    # Every expert is likely touched by a long prompt: read all weights once.
    w = decode_weight_traffic_bytes(m, path, max(prompt_tokens, 1), exact_weights_bytes) / tp
    kv_w = prompt_tokens * kv_bytes_per_token_per_gpu(m, kv_dtype, tp)
    full = m.kv_cache.full_attention_layers
    t = prompt_tokens
    flops = {math: 2 * n * t / tp for math, (n, _) in rates.items()}
    flops[path.math] += full * (
        4 * _attended_pairs(t, m.attention.index_topk) * m.attention.num_query_heads
        * _attention_dim(m) / tp + _indexer_flops_per_key(m) * t * t / 2)
    comm = (2 * m.num_layers * t * m.hidden_size * 2 * 2 * (tp - 1) / tp) if tp > 1 else 0.0
    t_mem, t_comp, t_comm, t_step, bound = step_floor(
        w + kv_w, sum(flops.values()), comm, bw, _blended_rate(flops, rates),
        dev.interconnect_bytes_per_s)
    return CeilingRow(phase="prefill", envelope=envelope, weight_path=path.label,
                      kv_dtype=kv_dtype, batch=1, context_tokens=t, bytes_per_step=w + kv_w,
                      flops_per_step=sum(flops.values()), comm_bytes_per_step=comm, t_memory_s=t_mem,
                      t_compute_s=t_comp, t_comm_s=t_comm, t_step_s=t_step, bound=bound,
                      tokens_per_step=t, tokens_per_s=t / t_step)


def _rates_by_math(m: ModelInspection, path: WeightPath, dev: DeviceBudget, envelope: Envelope
                   ) -> tuple[float | None, dict[str, tuple[int, float]] | None]:
    """(bandwidth, {math: (linear params one token runs at that math, FLOP/s)}); None where a
    rate is unknown. Unconverted modules and a 16-bit head run at bf16 (weights.py)."""
    bw = None
    out: dict[str, tuple[int, float]] = {}
    for math, params in executed_linear_params(m, path).items():
        bw, rate = _rates(dev, envelope, math)
        if bw is None or rate is None:
            return None, None
        out[math] = (params, rate)
    if path.math not in out:
        bw, rate = _rates(dev, envelope, path.math)
        if rate is None:
            return None, None
        out[path.math] = (0, rate)
    return bw, out


def _blended_rate(flops: dict[str, float], rates: dict[str, tuple[int, float]]) -> float:
    """The one rate that gives sum(flops_i / rate_i) as total_flops / rate."""
    seconds = sum(f / rates[math][1] for math, f in flops.items())
    return sum(flops.values()) / seconds if seconds else 1.0


def _rates(dev: DeviceBudget, envelope: Envelope, math: str) -> tuple[float | None, float | None]:
    if envelope is Envelope.THEORETICAL:
        return dev.bandwidth_bytes_per_s, dev.dense_flops_per_s.get(math) or (
            dev.dense_flops_per_s.get("bf16") if math in ("fp16", "fp32") else None)
    return (dev.calibrated_bandwidth_bytes_per_s,
            dev.calibrated_flops_per_s.get(math) or dev.calibrated_flops_per_s.get("any"))


def ceiling_ratio(metric: str, measured: float, row: CeilingRow) -> CeilingRatio:
    """measured / ceiling for a throughput metric (higher is better); never clamped."""
    ratio = measured / row.tokens_per_s
    return CeilingRatio(
        metric=metric, measured=measured, ceiling=row.tokens_per_s, envelope=row.envelope,
        ratio=ratio, flagged=ratio > 1.0, bound=row.bound.value,
        note=("above the ceiling: the cost model's assumptions are wrong for this case "
              "(cache reuse, speculation, or a byte/FLOP count) — review before trusting it")
        if ratio > 1.0 else f"{row.bound.value}-bound estimate")
