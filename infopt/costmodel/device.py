"""DeviceBudget from a catalog GPU (vendor peaks: the theoretical envelope), from what NVML
reports of a GPU the catalog lacks (its memory and bus bandwidth; no compute peak), or from this
host (measured bandwidth and GEMM rate: the calibrated envelope; no sourced vendor peak for an
arbitrary CPU, so its theoretical envelope is reported unavailable, never guessed)."""

from __future__ import annotations

from infopt.hardware.cuda_visible import engine_visible_memory
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget
from infopt.specs.gpu import GpuProbe, GpuSpec
from infopt.specs.hardware import HardwareInventory


def device_from_catalog(spec: GpuSpec, calibrated_bandwidth: float | None = None,
                        calibrated_flops: dict[str, float] | None = None,
                        measured_cuda_total_bytes: int | None = None) -> DeviceBudget:
    rates = {k: v for k, v in {
        "bf16": spec.dense_bf16_flops_per_s, "fp16": spec.dense_fp16_flops_per_s,
        "fp8": spec.dense_fp8_flops_per_s, "int8": spec.dense_int8_ops_per_s,
        "fp4": spec.dense_fp4_flops_per_s}.items() if v}
    # Engines size against CUDA's total, a little under NVML's, itself under the nominal size.
    nvml = spec.nvml_memory_total_mib * 2**20 if spec.nvml_memory_total_mib else spec.memory_bytes
    mem = engine_visible_memory(nvml, spec.key, measured_cuda_total_bytes)
    return DeviceBudget(
        name=spec.name, memory_bytes=mem.bytes, bandwidth_bytes_per_s=spec.bandwidth_bytes_per_s,
        dense_flops_per_s=rates, compute_capability=spec.compute_capability,
        interconnect_bytes_per_s=spec.nvlink_bytes_per_s_per_direction,
        calibrated_bandwidth_bytes_per_s=calibrated_bandwidth,
        calibrated_flops_per_s=calibrated_flops or {},
        source=f"catalog row {spec.key} ({spec.source_tier.value}): {spec.source[:160]}"
               + f"; memory: {mem.source}")


def device_of_gpus(spec: GpuSpec, hw: HardwareInventory) -> DeviceBudget:
    """The catalog row of the host's first GPU, with the host's measured CUDA totals and its
    run's calibration (HardwareInventory.gpu_calibration) as the calibrated envelope."""
    cal = hw.gpu_calibration
    dev = device_from_catalog(
        spec, measured_cuda_total_bytes=smallest_cuda_total(hw),
        calibrated_bandwidth=cal.copy_bytes_per_s.median if cal else None,
        calibrated_flops={k: r.median for k, r in cal.gemm_flops_per_s.items()} if cal else None)
    return dev.model_copy(update={"source": f"{dev.source}; {cal.source}"}) if cal else dev


def smallest_cuda_total(hw: HardwareInventory) -> int | None:
    """The smallest measured CUDA-visible total among the host's GPUs (a layout fits when its
    fullest GPU does); None unless every GPU was measured."""
    totals = [g.cuda_memory_total_bytes for g in hw.gpus]
    return min(totals) if totals and all(totals) else None  # type: ignore[type-var]


def device_from_host(hw: HardwareInventory) -> DeviceBudget:
    h = hw.host
    gemm_flops_per_s = hw.host_gemm_flops_per_s
    bw = hw.host_memory_bandwidth
    return DeviceBudget(
        name=f"CPU {h.cpu_model} ({h.usable_cpus} usable CPUs)",
        memory_bytes=h.cgroup_memory_limit_bytes or h.ram_total_bytes,
        bandwidth_bytes_per_s=None, dense_flops_per_s={},
        calibrated_bandwidth_bytes_per_s=bw.median_bytes_per_s if bw else None,
        calibrated_flops_per_s={"any": gemm_flops_per_s} if gemm_flops_per_s else {},
        cpu_isa_features=hw.engine_cpu_isa,
        source="host: measured memory-copy bandwidth and fp32 GEMM rate (numpy); no vendor "
               "peak for this CPU, so no theoretical envelope")


def device_from_probe(g: GpuProbe) -> DeviceBudget:
    """A GPU infopt's catalog does not list, sized from what NVML reports of it: its memory
    (what the engines size against), and as bandwidth the bus width x the maximum memory clock
    x 2 when NVML gave both. No compute peak: NVML reports no per-SM rate, so the compute
    ceiling is unavailable rather than guessed. Without its memory it cannot be sized at all."""
    if not g.memory_total_bytes:
        raise InputError(
            f"GPU {g.index} '{g.name}' is not in infopt's sourced GPU table and NVML reported "
            "no memory size for it, so no configuration can be sized for it: add its row "
            "(memory, bandwidth and dense rates with their source) to the GPU table "
            "(infopt/hardware/gpu_catalog.csv), or run where NVML reports its memory.")
    bw = g.theoretical_bandwidth_bytes_per_s
    mem = engine_visible_memory(g.memory_total_bytes, None, g.cuda_memory_total_bytes)
    return DeviceBudget(
        name=f"{g.name} (not in infopt's GPU table)", memory_bytes=mem.bytes,
        bandwidth_bytes_per_s=bw, dense_flops_per_s={},
        compute_capability=g.compute_capability,
        source=f"memory: {mem.source}; NVML as this machine reports it"
               + (": bus bandwidth (bus width x max memory clock x 2)" if bw else "")
               + "; no compute peak (the GPU is not in infopt's sourced table; add its row to "
                 "get one)")
