"""How an engine spells a multi-GPU layout: the config fields for tensor, pipeline, data and
expert parallelism, declared by each adapter as data (the layout matrix and the ladder's
parallel-layout rule ask it, never an engine name). Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from infopt.costmodel.fit import FitRequest
from infopt.engines.base import ServingTarget, launch_for
from infopt.specs.fit import Layout, LayoutMatrix
from infopt.specs.hardware import HardwareInventory


@dataclass(frozen=True)
class LayoutKnobs:
    """Config fields per axis; None: the engine has no such axis in one server, and `missing`
    says what it offers instead."""

    tp: str | None = None
    pp: str | None = None
    dp: str | None = None
    ep: str | None = None
    ep_is_flag: bool = False  # vLLM: a switch over the TP (x DP) ranks; others: a size
    missing: str = ""
    # Where the engine places its ranks on GPUs (`rank_placement` computes it): the source
    # that shows TP ranks adjacent, pipeline stages strided by TP and replicas outermost.
    rank_order: str = ""

    def changes(self, layout: Layout) -> dict[str, Any] | str:
        """The knob changes that run `layout` (axes at 1 are left at the engine's default), or
        why this engine cannot run it as one server."""
        out: dict[str, Any] = {}
        for axis, field, size in (("TP", self.tp, layout.tp), ("PP", self.pp, layout.pp),
                                  ("DP", self.dp, layout.dp)):
            if size > 1:
                if field is None:
                    return f"no {axis} in one server: {self.missing}"
                out[field] = size
        if layout.ep:
            if self.ep is None:
                return f"no expert parallelism: {self.missing}"
            out[self.ep] = True if self.ep_is_flag else layout.tp * layout.dp
        return out

    def changes_from(self, config: Any, layout: Layout) -> dict[str, Any] | str:
        """`changes(layout)` for an incumbent `config`: an axis the layout leaves at 1 that
        `config` sets is reset to the field's default (None, or a switch's False), so the
        candidate runs `layout` and not its product with the incumbent's (TP1_PP8 from a TP=4
        incumbent is 8 GPUs, not 32)."""
        out = self.changes(layout)
        if isinstance(out, str):
            return out
        for field in (self.tp, self.pp, self.dp, self.ep):
            if field is not None and field not in out and _is_set(getattr(config, field, None)):
                out[field] = type(config).model_fields[field].default
        return out


def rank_placement(layout: Layout) -> list[str]:
    """Which GPUs (by visible index) each replica's pipeline stages run on: TP ranks adjacent,
    PP groups strided by TP, DP replicas outermost, the order vLLM, SGLang and TensorRT-LLM
    share (each adapter's `LayoutKnobs.rank_order` cites its source). One line per replica."""
    out = []
    for replica in range(layout.dp):
        first = replica * layout.tp * layout.pp
        stages = [",".join(str(first + s * layout.tp + r) for r in range(layout.tp))
                  for s in range(layout.pp)]
        where = (f"GPUs {stages[0]}" if layout.pp == 1 else
                 "; ".join(f"stage {s} on GPUs {g}" for s, g in enumerate(stages)))
        out.append(f"replica {replica}: {where}")
    return out


def _is_set(value: Any) -> bool:
    """An axis knob away from its default: a size above 1, or a switch on (True == 1 in
    Python, so a switch is not a size)."""
    return bool(value) if isinstance(value, bool) else (value or 1) > 1


def config_layout(config: Any) -> Layout:
    """The layout one server of `config` runs: its TP, PP and DP ranks as it sets them (1 where
    it sets none; an engine without layout knobs runs on one device), and whether its MoE
    experts are split over them (a switch on vLLM, a size above 1 elsewhere)."""
    from infopt.engines import adapter_for

    knobs = adapter_for(config.engine).layout_knobs or LayoutKnobs()

    def size(field: str | None) -> int:
        return (getattr(config, field, None) or 1) if field is not None else 1

    ep = knobs.ep is not None and _is_set(getattr(config, knobs.ep, None))
    return Layout(tp=size(knobs.tp), pp=size(knobs.pp), dp=size(knobs.dp), ep=ep)


def running_sequences(cap: int, concurrency: int, dp: int) -> int:
    """The sequences a server runs at once at `concurrency`: `cap` is its running-sequence cap
    (MemoryShape.max_sequences), and a DP server's cap (vLLM's max_num_seqs, SGLang's max
    running requests) holds per replica, each replica having its own scheduler."""
    return min(concurrency, cap * dp)


def replica_sequences(cap: int, target_concurrency: int, dp: int) -> int:
    """The sequences one replica is sized for: the config's cap (what it allocates, already
    bounded by the target where the engine allocates as it goes), or a DP replica's share of
    what the server runs at the target."""
    return cap if dp == 1 else -(-running_sequences(cap, target_concurrency, dp) // dp)


def deployed_gpus(config: Any, hw: HardwareInventory) -> int:
    """The GPUs a rendered deployment of `config` requests: its layout's on a GPU host (not
    every GPU the host has), none on a CPU host."""
    return config_layout(config).gpus if hw.gpus else 0


def layout_command(engine: str, target: ServingTarget, changes: dict[str, Any]) -> str:
    """The engine's baseline for `target` with `changes`, as the command its image runs."""
    from infopt.engines import adapter_for
    from infopt.specs.serving import with_knobs

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
    from infopt.costmodel.interconnect import link_from_topology
    from infopt.costmodel.layouts import layout_matrix
    from infopt.engines import adapter_for

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
