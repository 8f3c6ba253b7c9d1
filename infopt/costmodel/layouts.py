"""The parallel-layout experiment matrix (the ladder's seventh dimension where GPUs are many):
TP -> PP -> DP -> EP (EP for MoE only), with the TP=1 control first, each layout fitted per
replica and given its decode ceilings at the target load, and the engine command that runs it.
Pure: the engine's layout knobs (infopt.engines.layout) and its command come in as functions.

Order and rules from the specification's step 5 and parallelism-patterns.md: TP within a node
for latency (it must divide the attention heads); PP when TP alone does not fit or the link
is slow (it re-reads each stage's weights per micro-batch, so it trails TP for decode); DP for
throughput when one replica fits; EP splits MoE experts whole (the expert count must divide).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.roofline import layout_decode_row
from infopt.specs.base import InputError
from infopt.specs.fit import Envelope, Layout, LayoutCeiling, LayoutMatrix, LayoutRow
from infopt.specs.inspection import ModelInspection

GIB = 2**30


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def fitting_layouts(m: ModelInspection, gpu_count: int) -> list[Layout]:
    """Layouts that add memory per replica, fewest GPUs first: TP over n GPUs, then pipeline
    stages of a smaller TP on the same n (DP replicas each hold the whole model: no help)."""
    heads = m.attention.num_query_heads
    out: list[Layout] = []
    n = 2
    while n <= gpu_count:
        tps = [t for t in (1, 2, 4, 8, 16, 32) if t <= n and n % t == 0 and heads % t == 0]
        out += [Layout(tp=n)] if n in tps else []
        out += [Layout(tp=t, pp=n // t) for t in reversed(tps)
                if t < n and n // t <= m.num_layers]
        n *= 2
    return out


def candidate_layouts(m: ModelInspection, gpu_count: int) -> list[tuple[Layout, str]]:
    """Every layout worth a trial on `gpu_count` GPUs, in the ladder's order, with its reason."""
    heads = m.attention.num_query_heads
    tps = [t for t in _powers_of_two(gpu_count) if heads % t == 0]
    out = [(Layout(), "the TP=1 control: one GPU per replica, no collective")]
    out += [(Layout(tp=t), f"weights and KV heads split over {t} GPUs: two all-reduces per "
             "layer, the lowest per-token latency when the link is fast") for t in tps[1:]]
    for t in tps:
        pp = gpu_count // t
        if 2 <= pp <= m.num_layers:
            out.append((Layout(tp=t, pp=pp), f"{pp} pipeline stages of TP={t}: one hand-off "
                        "per stage instead of all-reduces (slow links, or TP alone does not "
                        "fit); decode re-reads each stage's weights per micro-batch"))
    out += [(Layout(tp=t, dp=gpu_count // t), f"{gpu_count // t} replicas of TP={t}: "
             "throughput across replicas with no collective between them; each holds the "
             "whole model") for t in tps if gpu_count // t >= 2]
    if m.moe:
        out += [(Layout(tp=t, ep=True), f"{m.moe.num_experts} experts split whole over the "
                 f"{t} TP ranks: all-to-all dispatch and combine instead of the MoE layers' "
                 "all-reduce") for t in tps[1:] if m.moe.num_experts % t == 0]
    return out


def _ceilings(r: FitRequest, layout: Layout, context_tokens: int) -> list[LayoutCeiling]:
    out = []
    for env in (Envelope.THEORETICAL, Envelope.CALIBRATED):
        row = layout_decode_row(r.model, r.weight_path, r.kv_dtype, r.concurrency,
                                context_tokens, r.device, env, layout,
                                exact_weights_bytes=r.exact_weights_bytes)
        if row is not None:
            out.append(LayoutCeiling(envelope=env, tokens_per_s=row.tokens_per_s,
                                     bound=row.bound,
                                     comm_share=row.t_comm_s / row.t_step_s))
    return out


ChangesFor = Callable[[Layout], "dict[str, Any] | str"]


def layout_row(r: FitRequest, layout: Layout, why: str, changes_for: ChangesFor,
               command_for: Callable[[dict[str, Any]], str], context_tokens: int) -> LayoutRow:
    per_replica = -(-r.concurrency // layout.dp)
    try:
        fit = plan_fit(replace(r, tp=layout.tp, pp=layout.pp, gpu_count=layout.tp * layout.pp,
                               concurrency=per_replica), with_alternatives=False)
    except InputError as exc:
        return LayoutRow(layout=layout, label=layout.label, why=why,
                         concurrency_per_replica=per_replica, fits=False, refused=str(exc))
    changes = changes_for(layout)
    refused = None if fit.fits else (
        f"does not fit: {fit.gap_bytes / GIB:.2f} GiB per GPU short of {per_replica} "
        f"sequence(s) x {r.context_tokens:,} tokens")
    return LayoutRow(
        layout=layout, label=layout.label, why=why, concurrency_per_replica=per_replica,
        fits=fit.fits, refused=refused,
        kv_capacity_tokens_per_replica=fit.kv_capacity_tokens,
        max_concurrency_at_context=fit.max_concurrency_at_context * layout.dp,
        weights_bytes_per_gpu=fit.weights_bytes_per_gpu,
        ceilings=_ceilings(r, layout, context_tokens),
        command=command_for(changes) if isinstance(changes, dict) else None,
        command_note=changes if isinstance(changes, str) else None)


def layout_matrix(r: FitRequest, changes_for: ChangesFor,
                  command_for: Callable[[dict[str, Any]], str], interconnect: str,
                  decode_context_tokens: int | None = None) -> LayoutMatrix:
    """The matrix for `r` (its gpu_count, concurrency and context; its tp/pp are ignored).
    Ceilings at `decode_context_tokens` (default: the full context, the worst case)."""
    ctx = decode_context_tokens or r.context_tokens
    rows = [layout_row(r, layout, why, changes_for, command_for, ctx)
            for layout, why in candidate_layouts(r.model, r.gpu_count)]
    return LayoutMatrix(
        model=r.model.model, device=r.device, gpu_count=r.gpu_count,
        concurrency=r.concurrency, context_tokens=r.context_tokens, engine=r.engine,
        interconnect=interconnect, rows=rows, assumptions=[
            "fit per replica: weights split evenly over its TP x PP ranks; DP replicas each "
            "take an equal share of the concurrency (rounded up)",
            f"decode ceilings at {ctx:,} tokens of context per sequence, summed over replicas; "
            "upper bounds, not predictions (launch, scheduling and load imbalance ignored)",
            "PP: the pipeline kept full with micro-batches of concurrency/PP sequences",
            "EP: the same bytes and work per rank as TP for uniformly routed tokens; it trades "
            "the MoE all-reduce for all-to-alls, and real routing skew is left to measurement",
            "DP attention with EP (vLLM --data-parallel-size with --enable-expert-parallel) "
            "replicates attention and shards only experts: not in this matrix's memory model"])
