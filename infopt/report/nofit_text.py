"""report.md when nothing fits (infopt.tuning.nofit): the binding constraint, each engine's fit
in numbers, and the smallest alternatives; no engine was started."""

from __future__ import annotations

from infopt.report.decisions_text import decisions_lines
from infopt.report.provenance import provenance_lines
from infopt.specs.results import NoFitReport
from infopt.tuning.nofit import binding, needed_bytes

GIB = 2**30


def nofit_markdown(r: NoFitReport) -> str:
    m, h = r.model, r.hardware.host
    lines = [f"# No configuration fits: {m.name} on this machine", "",
             f"Run `{r.run_id}`, {r.created_at}. Nothing was started: every allowed engine's "
             "baseline (its simplest correct configuration at the model's full context and "
             "the workload's target load) needs more memory than this machine gives it.", "",
             f"**Binding constraint:** {r.binding}.", "",
             f"- Model: `{m.path}` ({m.weight_format}, {m.file_bytes / 1e9:.2f} GB on disk, "
             f"native context {m.native_context_tokens:,} tokens)",
             f"- Host: {h.cpu_model}, {h.ram_total_bytes / GIB:.1f} GiB RAM "
             f"({h.ram_available_bytes / GIB:.1f} GiB available); GPUs: "
             f"{len(r.hardware.gpus)}", ""]
    for e in r.engines:
        f = e.fit
        lines += [f"## {e.engine}", "", binding(e) + ".", "",
                  "| weights GiB | KV needed GiB | runtime GiB | needed GiB | device GiB | "
                  "KV pool GiB | short GiB |", "|---|---|---|---|---|---|---|",
                  f"| {f.weights_bytes_per_gpu / GIB:.2f} | "
                  f"{f.required_kv_bytes_per_gpu / GIB:.2f} | "
                  f"{f.runtime_overhead_bytes_per_gpu / GIB:.2f} | "
                  f"{needed_bytes(e) / GIB:.2f} | {f.memory_per_gpu_bytes / GIB:.2f} | "
                  f"{f.kv_budget_bytes_per_gpu / GIB:.2f} | {f.gap_bytes / GIB:.2f} |", "",
                  "Smallest alternatives (estimated, each checked with the same memory model; "
                  "none applied):", "",
                  *([f"- {a}" for a in f.alternatives] or ["- none at this model size: a "
                                                           "machine with more memory"]),
                  "", "Assumptions:", "", *[f"- {a}" for a in f.assumptions], ""]
    lines += decisions_lines([r.decision] if r.decision else [],
                             [r.decision.wait] if r.decision and r.decision.wait else [])
    if r.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in r.notes], ""]
    lines += provenance_lines(r.provenance)
    return "\n".join(lines)
