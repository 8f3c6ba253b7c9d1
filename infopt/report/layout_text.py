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


def measured_layout_lines(trials) -> list[str]:
    """Each measured trial of a multi-GPU layout: where its ranks ran (the engine's rank
    order) and the GPU memory each device held (NVML, per device: a layout fits when its
    fullest GPU does, which the sum over GPUs hides)."""
    from infopt.engines.config_layout import config_layout
    from infopt.engines.layout import rank_placement

    rows, orders = [], {}
    for t in trials:
        layout = config_layout(t.config)
        if layout.gpus <= 1 and not t.gpu_memory_by_device_bytes:
            continue
        per = t.gpu_memory_by_device_bytes or {}
        memory = (", ".join(f"GPU {i}: {b / GIB:.1f}" for i, b in sorted(per.items()))
                  if per else "not read (no NVML)")
        fullest = f"{max(per.values()) / GIB:.1f}" if per else "-"
        value = "-" if t.objective_value is None else f"{t.objective_value:.4g}"
        orders[t.config.engine] = _rank_order(t.config.engine)
        rows.append(f"| {t.trial_id} | {layout.label} | {'<br>'.join(rank_placement(layout))} "
                    f"| {memory} | {fullest} | {value} |")
    if not rows:
        return []
    return ["", "### Parallel layouts measured: rank placement and GPU memory per device", "",
            "Rank placement in the engine's order (TP ranks adjacent, pipeline stages strided "
            "by TP, replicas outermost) over the visible GPUs ("
            + "; ".join(f"{e}: {o}" for e, o in orders.items())
            + "); memory as NVML reported it for the engine's processes after the benchmark "
            "(GiB).", "",
            "| trial | layout | ranks | GPU memory per device (GiB) | fullest GPU (GiB) | "
            "objective |", "|---|---|---|---|---:|---:|", *rows]


def _rank_order(engine: str) -> str:
    from infopt.engines import adapter_for

    knobs = adapter_for(engine).layout_knobs
    return (knobs.rank_order if knobs is not None else "") or "its source is not recorded"
