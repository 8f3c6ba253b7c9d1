"""When no allowed engine's baseline fits this machine: the binding constraint in numbers and the
report that says so, with each engine's smallest alternatives (infopt.costmodel.fit checks each
with the same model). Pure; the flow writes it and stops before starting anything."""

from __future__ import annotations

from infopt.specs.base import InfoptError
from infopt.specs.fit import Layout
from infopt.specs.results import EngineFit

GIB = 2**30


class NothingFits(InfoptError):
    """No engine's baseline fits: the run wrote its no-fit report and started nothing."""


def binding(e: EngineFit) -> str:
    f = e.fit
    where = "" if f.tp * f.pp * f.dp == 1 else \
        f" on {Layout(tp=f.tp, pp=f.pp, dp=f.dp).label} ({f.tp * f.pp * f.dp} GPUs)"
    return (f"memory: {e.engine}'s baseline{where} ({f.context_tokens:,}-token context x "
            f"{f.concurrency} sequence(s), {f.kv_dtype} KV, {f.weight_path} weights) needs "
            f"{needed_bytes(e) / GIB:.2f} GiB per device (weights "
            f"{f.weights_bytes_per_gpu / GIB:.2f} GiB + KV {f.required_kv_bytes_per_gpu / GIB:.2f}"
            f" GiB + runtime {f.runtime_overhead_bytes_per_gpu / GIB:.2f} GiB, estimated) on a "
            f"device of {f.memory_per_gpu_bytes / GIB:.2f} GiB: {f.gap_bytes / GIB:.2f} GiB "
            "short")


def needed_bytes(e: EngineFit) -> int:
    f = e.fit
    return (f.weights_bytes_per_gpu + f.required_kv_bytes_per_gpu
            + f.runtime_overhead_bytes_per_gpu)


def smallest_gap(fits: list[EngineFit]) -> EngineFit:
    return min(fits, key=lambda e: e.fit.gap_bytes)


def nothing_fits_message(fits: list[EngineFit], report_path: str) -> str:
    best = smallest_gap(fits)
    options = "; ".join(best.fit.alternatives) or "a machine with more memory"
    return (f"No allowed engine's configuration fits this machine. Binding constraint: "
            f"{binding(best)}. Smallest alternatives: {options}. Change the model "
            f"(model.path, a smaller checkpoint), the context or the load (workload), or "
            f"base_overrides; the report with every engine's fit: {report_path}")
