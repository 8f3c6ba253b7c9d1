"""Plain-text view of a plan (fit + ceilings) for the CLI; units converted here."""

from __future__ import annotations

from infopt.costmodel.plan import NODE_GPUS, PlanResult
from infopt.specs.fit import CeilingRow

GIB = 2**30


def _layers(p: PlanResult) -> str:
    mixers = ", ".join(f"{k} x{n}" for k, n in p.layer_kinds.items())
    mlps = ", ".join(f"{k} x{n}" for k, n in p.mlp_kinds.items())
    blocks = (f"; blocks: {p.skipped_blocks} skipped, {p.linear_replaced_blocks} replaced by "
              "one linear layer" if p.skipped_blocks or p.linear_replaced_blocks else "")
    return f"{mixers}; MLP {mlps}{blocks}"


def render_plan(p: PlanResult) -> str:
    verdict = "FITS" if p.fits else f"DOES NOT FIT: {p.gap_bytes / GIB:.2f} GiB short per GPU"
    lines = [
        f"{p.model} on {p.gpu_count} x {p.gpu} (tp={p.tp}, pp={p.pp}), engine {p.engine}, "
        f"weights {p.weight_path}, KV {p.kv_dtype}",
        f"Layers: {_layers(p)}",
        f"Target: {p.context_tokens:,} tokens x {p.concurrency} sequences -> {verdict}",
        f"  per GPU: memory {p.memory_per_gpu_bytes / GIB:.2f} GiB, engine budget "
        f"{p.budget_bytes_per_gpu / GIB:.2f} GiB, weights {p.weights_bytes_per_gpu / GIB:.2f} GiB, "
        f"runtime {p.runtime_overhead_bytes_per_gpu / GIB:.2f} GiB (estimate), KV budget "
        f"{p.kv_budget_bytes_per_gpu / GIB:.2f} GiB",
        f"  KV {p.kv_bytes_per_token_per_gpu:,.0f} B/token/GPU -> capacity "
        f"{p.kv_capacity_tokens:,} tokens, {p.max_concurrency_at_context:.2f} sequences at "
        "full context",
    ]
    if p.alternatives:
        lines += ["Options (not applied; choose one):", *[f"  - {a}" for a in p.alternatives]]
    which = "the layout asked for" if p.fits else "the smallest layout that fits"
    lines.append(
        f"GPUs to request: {p.gpus_to_request} ({p.gpus_to_request_layout}, {which}; the "
        f"optimize-gpu deployment's `--job-variable gpu_count={p.gpus_to_request}`)"
        if p.gpus_to_request else
        f"GPUs to request: none: no TP/PP layout of up to {NODE_GPUS} GPUs fits this context "
        "and concurrency")
    lines += ["Assumptions:", *[f"  - {a}" for a in p.assumptions], "",
              "Ceilings (upper bounds: the theoretical envelope is what no engine can beat) and "
              "attainable estimates (what a tuned engine is likely to reach; estimates):",
              # Which context the rows assume, said before them: the fit's above may differ.
              f"  decode rows: KV read at {p.decode_context_tokens:,} tokens per sequence "
              f"({p.decode_context_source}); prefill rows: one prompt, `context` tokens long",
              f"  {'phase':8} {'envelope':11} {'weights':26} {'KV':5} {'batch':>5} "
              f"{'context':>7} {'ceiling tok/s':>13} {'estimate tok/s':>14} {'est/ceil':>8} "
              "bound"]
    for r in p.ceilings.rows:
        est = r.estimate
        shown = (f"{est.tokens_per_s:>14,.1f} {est.tokens_per_s / r.tokens_per_s:>8.2f}" if est
                 else f"{'-':>14} {'-':>8}")
        lines.append(f"  {r.phase:8} {r.envelope.value:11} {r.weight_path[:26]:26} "
                     f"{r.kv_dtype:5} {r.batch:>5} {r.context_tokens:>7,} "
                     f"{r.tokens_per_s:>13,.1f} {shown} "
                     f"{r.bound.value}")
    lines += _ttft_lines(p.ceilings.rows)
    labels = sorted({r.estimate.label for r in p.ceilings.rows if r.estimate})
    lines += [f"  estimate: {label}" for label in labels]
    lines += [f"  unavailable: {u}" for u in p.ceilings.unavailable]
    lines += [f"  left out: {u}" for u in p.ceilings.left_out]
    lines += [f"  assumption: {a}" for a in p.ceilings.assumptions]
    return "\n".join(lines)


def _ttft_lines(rows: list[CeilingRow]) -> list[str]:
    """Single-stream TTFT per theoretical prefill row: the floor (no engine beats it) and the
    estimate (what an engine is likely to take; rough, with its error in the label)."""
    pre = [r for r in rows if r.phase == "prefill" and r.envelope.value == "theoretical"]
    if not pre:
        return []
    out = ["  TTFT of one prompt, single stream (floor = the theoretical prefill row; estimate "
           "= labelled below):"]
    for r in pre:
        est = (f", estimate {r.estimate.t_step_s * 1000:,.0f} ms" if r.estimate else "")
        out.append(f"    {r.weight_path[:26]:26} KV {r.kv_dtype:8} {r.context_tokens:>7,} "
                   f"tokens: floor {r.t_step_s * 1000:,.1f} ms ({r.bound.value}-bound){est}")
    return out
