"""Plain-text view of the parallel-layout experiment matrix (`infopt plan --layouts`)."""

from __future__ import annotations

from infopt.specs.fit import Envelope, LayoutMatrix, LayoutRow

GIB = 2**30


def _ceiling(row: LayoutRow, env: Envelope) -> str:
    c = next((c for c in row.ceilings if c.envelope is env), None)
    return "-" if c is None else f"{c.tokens_per_s:,.0f} {c.bound.value[:4]}" + (
        f" ({c.comm_share:.0%} comm)" if c.comm_share >= 0.005 else "")


def render_layouts(m: LayoutMatrix) -> str:
    lines = [f"Parallel layouts for {m.model} on {m.gpu_count} x {m.device.name}, engine "
             f"{m.engine}: {m.concurrency} sequence(s) x {m.context_tokens:,} tokens",
             f"Interconnect: {m.interconnect}",
             "Decode ceilings are upper bounds (estimates, output tokens/s over all replicas); "
             "each layout is an experiment to measure, in this order:",
             f"  {'layout':16} {'fits':4} {'weights/GPU':>11} {'KV tok/replica':>14} "
             f"{'max seqs':>8} {'theoretical':>22} {'calibrated':>18}"]
    for r in m.rows:
        weights = f"{r.weights_bytes_per_gpu / GIB:.1f} GiB" if r.weights_bytes_per_gpu else "-"
        kv = f"{r.kv_capacity_tokens_per_replica:,}" if r.kv_capacity_tokens_per_replica \
            is not None else "-"
        seqs = f"{r.max_concurrency_at_context:.1f}" if r.max_concurrency_at_context \
            is not None else "-"
        lines.append(f"  {r.label:16} {'yes' if r.fits else 'no':4} {weights:>11} {kv:>14} "
                     f"{seqs:>8} {_ceiling(r, Envelope.THEORETICAL):>22} "
                     f"{_ceiling(r, Envelope.CALIBRATED):>18}")
        lines.append(f"      why: {r.why}")
        if r.refused:
            lines.append(f"      refused: {r.refused}")
        if r.command:
            lines.append(f"      run: {r.command}")
        elif r.command_note:
            lines.append(f"      engine: {r.command_note}")
    lines += ["Assumptions:", *[f"  - {a}" for a in m.assumptions]]
    return "\n".join(lines)
