"""The layout a serving configuration runs and the layout matrix `infopt plan --layouts` shows:
read through the engine registry (each adapter's LayoutKnobs, infopt.engines.layout), so this
module sits above the adapters, which import only the knobs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infopt.costmodel.fit import FitRequest
from infopt.costmodel.interconnect import link_from_topology
from infopt.costmodel.layouts import layout_matrix
from infopt.engines import adapter_for
from infopt.engines.launch import ServingTarget, launch_for
from infopt.engines.layout import LayoutKnobs, is_set
from infopt.specs.fit import Layout, LayoutMatrix
from infopt.specs.hardware import HardwareInventory
from infopt.specs.serving import with_knobs


def config_layout(config: Any) -> Layout:
    """The layout one server of `config` runs: its TP, PP and DP ranks as it sets them (1 where
    it sets none; an engine without layout knobs runs on one device), and whether its MoE
    experts are split over them (a switch on vLLM, a size above 1 elsewhere)."""
    knobs = adapter_for(config.engine).layout_knobs or LayoutKnobs()

    def size(field: str | None) -> int:
        return (getattr(config, field, None) or 1) if field is not None else 1

    ep = knobs.ep is not None and is_set(getattr(config, knobs.ep, None))
    return Layout(tp=size(knobs.tp), pp=size(knobs.pp), dp=size(knobs.dp), ep=ep)


def deployed_gpus(config: Any, hw: HardwareInventory) -> int:
    """The GPUs a rendered deployment of `config` requests: its layout's on a GPU host (not
    every GPU the host has), none on a CPU host."""
    return config_layout(config).gpus if hw.gpus else 0


def layout_command(engine: str, target: ServingTarget, changes: dict[str, Any]) -> str:
    """The engine's baseline for `target` with `changes`, as the command its image runs."""
    adapter = adapter_for(engine)
    cfg = with_knobs(adapter.baseline_config(target), changes)
    executable = adapter.container_executable or engine
    return launch_for(adapter, cfg, executable, 8000).command


def matrix_for(r: FitRequest, model_ref: str, hw: HardwareInventory | None,
               decode_context_tokens: int | None = None) -> LayoutMatrix:
    """The layout matrix for the plan's request: the link from `hw`'s recorded topology when
    given (`infopt hardware --json` of the GPU machine), else the catalog's NVLink figure.
    Ceilings at `decode_context_tokens` (the workload's mean context while decoding, from
    infopt.costmodel.plan.decode_context) when lengths were given, else the full context."""
    dev = r.device
    if hw is not None and hw.gpus:
        bw, source = link_from_topology(hw.gpus, hw.gpu_pairs, dev.interconnect_bytes_per_s)
    elif dev.interconnect_bytes_per_s:
        bw, source = dev.interconnect_bytes_per_s, "the catalog's NVLink figure per direction"
    else:
        bw, source = None, ("no link figure in the catalog for this GPU and no recorded "
                            "topology (--inventory): communication left out of the ceilings")
    if bw is not None:
        source = f"{bw / 1e9:.1f} GB/s per direction: {source}"
    r = replace(r, device=dev.model_copy(update={"interconnect_bytes_per_s": bw}))
    knobs = adapter_for(r.engine).layout_knobs or LayoutKnobs(missing="no layout knobs")
    target = ServingTarget(model_path=model_ref, served_model_name=model_ref.rstrip("/")
                           .rsplit("/", 1)[-1].lower(), native_context_tokens=r.context_tokens,
                           usable_cpus=1)
    return layout_matrix(r, knobs.changes, lambda ch: layout_command(r.engine, target, ch),
                         source, decode_context_tokens)
