"""The optimize flow's use of the cost model: the device a run targets, the fit of each candidate
configuration (to prune those that cannot hold the full context at their concurrency), and the
fraction of the ceiling each measured level reached."""

from __future__ import annotations

from infopt.costmodel.attainable import estimate
from infopt.costmodel.device import device_from_host, device_from_probe, device_of_gpus
from infopt.costmodel.fit import FitRequest, offload_split, plan_fit
from infopt.costmodel.interconnect import link_from_topology
from infopt.costmodel.offload import offloaded_row
from infopt.costmodel.roofline import ceiling_ratio
from infopt.costmodel.weights import path_from_quantization
from infopt.engines import adapter_for
from infopt.engines.config_layout import config_layout
from infopt.engines.layout import replica_sequences
from infopt.engines.support import kv_options
from infopt.hardware.catalog import match_gpu
from infopt.specs.fit import CeilingRatio, CeilingRow, DeviceBudget, Envelope, MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.results import BenchmarkResult
from infopt.specs.serving import AnyServingConfig as Config
from infopt.tuning.level_steps import (
    LevelStep,
    decode_ceiling,
    level_steps,
    mean_lengths,
    theoretical_rows,
)


def run_device(hw: HardwareInventory) -> tuple[DeviceBudget, bool]:
    """The device the flow's engines run on: the first GPU (its catalog row, or what NVML
    reports of a GPU the catalog lacks: never the host's RAM and bandwidth), else this host."""
    if not hw.gpus:
        return device_from_host(hw), True
    g = hw.gpus[0]
    spec = match_gpu(g.name, g.memory_total_bytes)
    dev = device_of_gpus(spec, hw) if spec is not None else device_from_probe(g)
    if len(hw.gpus) < 2:
        return dev, False
    # The link this host's collectives cross, from its recorded topology as `infopt plan`
    # reads it (an H100 PCIe or an L40S box has no NVLink: its PCIe rate, not the catalog's
    # NVLink figure nor nothing).
    bw, source = link_from_topology(hw.gpus, hw.gpu_pairs, dev.interconnect_bytes_per_s)
    return dev.model_copy(update={"interconnect_bytes_per_s": bw,
                                  "source": f"{dev.source}; interconnect: {source}"}), False


def fit_config(model: ModelProfile, hw: HardwareInventory, config: Config,
               target_concurrency: int) -> MemoryFit:
    device, is_cpu = run_device(hw)
    shape = adapter_for(config.engine).memory_shape(config, target_concurrency, is_cpu,
                                                    model.native_context_tokens)
    layout = config_layout(config)
    per_replica = replica_sequences(shape.max_sequences, target_concurrency, layout.dp)
    return plan_fit(FitRequest(
        model=model.inspection, device=device,
        # The host's GPUs: a layout needing more is refused by the fit (FitRequest checks tp x
        # pp x dp against it), not sized as if they existed. A CPU host's ranks are its sockets.
        gpu_count=len(hw.gpus) or layout.gpus,
        engine=str(config.engine), context_tokens=shape.context_tokens,
        concurrency=per_replica, kv_dtype=shape.kv_dtype,
        weight_path=path_from_quantization(model.inspection.quantization,
                                           device.compute_capability),
        knobs=shape.knobs, exact_weights_bytes=model.file_bytes or None,
        tp=layout.tp, pp=layout.pp, dp=layout.dp,
        kv=kv_options(config.engine, device.cpu_isa_features),
        host_memory_bytes=None if is_cpu else hw.host.ram_total_bytes))


def _offloaded(row: CeilingRow, model: ModelProfile, hw: HardwareInventory, config: Config,
               device: DeviceBudget, env: Envelope) -> CeilingRow:
    """A partial offload's row: its host-RAM layers read at the host's measured bandwidth
    (infopt.costmodel.offload); unchanged when every layer is on the GPU or a bandwidth is
    unknown (the whole-GPU row is still an upper bound)."""
    knobs = adapter_for(config.engine).memory_shape(config, 1, False,
                                                    model.native_context_tokens).knobs
    share = offload_split(model.inspection, knobs).weights_share  # the fit's own split
    dev_bw = (device.bandwidth_bytes_per_s if env is Envelope.THEORETICAL
              else device.calibrated_bandwidth_bytes_per_s)
    host = hw.host_memory_bandwidth
    if share >= 1 or not dev_bw or host is None:
        return row
    return offloaded_row(row, share, dev_bw, host.median_bytes_per_s)


def level_ceilings(model: ModelProfile, hw: HardwareInventory, config: Config,
                   bench: BenchmarkResult, mean_context_tokens: int) -> list[CeilingRatio]:
    """Per measured level, the decode rate (streams x 1 / median ITL: decode only, the quantity
    the decode ceiling bounds) as a fraction of each available envelope's decode ceiling at
    that batch and the benchmark's mean context. Unclamped; > 1 is flagged. On a GPU the
    theoretical entry also carries the attainable estimate at that batch (labelled)."""
    device, is_cpu = run_device(hw)
    out: list[CeilingRatio] = []
    for step in level_steps(model.inspection, device, is_cpu, config, bench,
                            model.native_context_tokens):
        measured = step.batch / step.measured_step_s
        for env in (Envelope.THEORETICAL, Envelope.CALIBRATED):
            row = decode_ceiling(model.inspection, device, step, mean_context_tokens, env,
                                 model.file_bytes or None)
            if row is not None and not is_cpu:
                row = _offloaded(row, model, hw, config, device, env)
            if row is not None:
                per = "TPOT p50, speculative" if config.speculates else "ITL p50"
                r = ceiling_ratio(f"decode tokens/s at concurrency {step.concurrency} "
                                  f"(batch {step.batch} x 1/{per})", measured, row)
                out.append(_with_attainable(r, row, model, config.engine, device, step, bench))
    return out


def _with_attainable(r: CeilingRatio, row: CeilingRow, model: ModelProfile, engine: str,
                     device: DeviceBudget, step: LevelStep, bench: BenchmarkResult
                     ) -> CeilingRatio:
    """The theoretical entry with the attainable estimate (GPUs only): one replica's step on
    its share of the batch, its prompts admitted per step from the benchmark's mean prompt and
    output lengths, times the DP replicas. None for a pipeline: the estimate is fitted on
    single-stage steps."""
    if row.envelope is not Envelope.THEORETICAL or not device.compute_capability \
            or step.layout.pp > 1:
        return r
    prompt, output = mean_lengths(bench)
    decode, pre = theoretical_rows(model.inspection, device, step, row.context_tokens, prompt,
                                   model.file_bytes or None)
    est = estimate(decode, model.inspection, engine, device.compute_capability, step.tp,
                   pre.t_compute_s if pre else 0.0, output or None) if decode else None
    if est is None:
        return r
    return r.model_copy(update={"attainable": est.tokens_per_s * step.layout.dp,
                                "attainable_note": est.label})
