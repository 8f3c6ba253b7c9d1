"""GPU models: a sourced catalog row (`GpuSpec`) and what the NVML probe found (`GpuProbe`).

Units live in field names: bytes, Hz, W, and per-second rates. Vendor peaks are *dense* (no 2:4
sparsity) and, for FP16/BF16/FP8, with FP32 accumulation, because that is what inference GEMMs
run; GeForce parts run FP32 accumulation at half the FP16-accumulate rate, so their figures
differ from the headline numbers. INT8 is with INT32 accumulation. Memory capacity in vendor
names ("80GB") is binary (80 GiB); bandwidth ("3.35 TB/s") is decimal.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from .base import Spec


class SourceTier(StrEnum):
    """How far a catalog row's figures are from NVIDIA's own statement (weakest figure wins)."""

    VENDOR_CONFIG = "vendor_config"  # NVIDIA-authored machine-readable config (ai-dynamo/aiconfigurator)
    VENDOR_QUOTED = "vendor_quoted"  # NVIDIA datasheet figure, quoted with its URL by code/pages we read
    DERIVED = "derived"  # arithmetic on vendor or recorded figures (sparse/2, SMs x clock x rate)
    SECONDARY = "secondary"  # third-party spec pages only; check before relying on it


class FormFactor(StrEnum):
    SXM = "sxm"
    PCIE = "pcie"
    NVL = "nvl"  # H100 NVL: PCIe card with NVLink bridges
    SUPERCHIP = "superchip"  # Grace-Blackwell: GPU on a CPU+GPU module


class GpuSpec(Spec):
    """One catalog row: vendor peak figures for one SKU, with where they come from."""

    key: str  # stable id, e.g. "h100_sxm5_80gb"
    name: str  # human name
    family: str  # normalized family token used for matching, e.g. "h100", "rtx 4090"
    architecture: str
    form_factor: FormFactor
    compute_capability: str  # "9.0"
    memory_type: str  # "HBM3", "GDDR6X", ...
    memory_gib_nominal: int  # the number in the vendor's name: "80GB" parts carry 80 GiB
    memory_bytes: int  # nominal capacity = memory_gib_nominal x 2**30
    nvml_memory_total_mib: int | None = None  # total NVML/nvidia-smi reported on a recorded device
    memory_bus_width_bits: int | None = None
    bandwidth_bytes_per_s: float
    dense_fp16_flops_per_s: float | None = None
    dense_bf16_flops_per_s: float | None = None
    dense_fp8_flops_per_s: float | None = None
    dense_int8_ops_per_s: float | None = None
    dense_fp4_flops_per_s: float | None = None
    sm_count: int | None = None
    interconnect: str
    nvlink_bytes_per_s_per_direction: float | None = None  # per GPU, all links, one direction
    tdp_w: float | None = None
    aliases: list[str] = Field(default_factory=list)  # exact names seen in NVML / common usage
    source: str
    source_tier: SourceTier
    notes: str = ""


class TopologyLevel(StrEnum):
    """PCIe path between two GPUs, NVML's nvmlGpuTopologyLevel_t (nvidia-smi topo -m letters)."""

    INTERNAL = "internal"  # same board (e.g. dual-GPU card); NVML_TOPOLOGY_INTERNAL
    SINGLE = "single"  # PIX: at most one PCIe switch
    MULTIPLE = "multiple"  # PXB: several PCIe switches, no host bridge
    HOSTBRIDGE = "hostbridge"  # PHB: through a PCIe host bridge (the CPU)
    NODE = "node"  # NODE: across host bridges within one NUMA node
    SYSTEM = "system"  # SYS: across the inter-socket link (QPI/UPI/xGMI)


class PcieLink(Spec):
    gen_current: int | None = None  # idle GPUs drop to gen 1: compare max, not current, for capacity
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


class NvLinkPort(Spec):
    link: int
    active: bool
    remote: Literal["gpu", "switch", "cpu", "unknown"] | None = None
    remote_pci_bus_id: str | None = None


class GpuProcess(Spec):
    """Another process holding memory on the GPU: a shared GPU changes what can be promised."""

    pid: int
    kind: Literal["compute", "graphics"]
    name: str | None = None  # None when the pid lives in another namespace (containers)
    used_memory_bytes: int | None = None  # None where NVML withholds it (containers, no permission)


class GpuProbe(Spec):
    """One GPU as NVML reports it. A None field was not supported or not permitted: see notes."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    catalog_match: str | None = None  # GpuSpec.key, or None when unknown or ambiguous (see notes)
    memory_total_bytes: int | None = None
    # cuMemGetInfo's total: what vLLM and SGLang size against (infopt.hardware.cuda_visible);
    # None where it was not measured (no driver library, or the probe is NVML's alone).
    cuda_memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_bus_width_bits: int | None = None
    memory_clock_hz: int | None = None
    memory_clock_max_hz: int | None = None
    theoretical_bandwidth_bytes_per_s: float | None = None  # bus width x max memory clock x 2
    compute_capability: str | None = None
    cuda_cores: int | None = None
    sm_count: int | None = None
    sm_clock_hz: int | None = None
    sm_clock_max_hz: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None  # enforced limit; may be below the default (capped board)
    power_default_limit_w: float | None = None
    pcie: PcieLink | None = None
    nvlink: list[NvLinkPort] | None = None  # None: NVLink not supported on this device
    mig_enabled: bool | None = None
    ecc_enabled: bool | None = None
    processes: list[GpuProcess] | None = None  # None: could not be listed
    notes: list[str] = Field(default_factory=list)

    @property
    def shared(self) -> bool:
        """True when other processes hold memory on this GPU."""
        return bool(self.processes)

    @property
    def active_nvlinks(self) -> int:
        return sum(1 for port in self.nvlink or [] if port.active)


class GpuPair(Spec):
    """How two GPUs reach each other: PCIe path and NVLink link count (0 = none found)."""

    a: int
    b: int
    pcie_path: TopologyLevel | None = None
    nvlink_links: int = 0
    nvlink_via: Literal["direct", "switch"] | None = None
    p2p_supported: bool | None = None  # CUDA peer access; GeForce drivers disable it (NCCL then
    # stages through host memory)


class MeasuredRate(Spec):
    """A rate timed over repeats after a warm-up: its median and range."""

    median: float
    min: float
    max: float
    repeats: int


class GpuCalibration(Spec):
    """The GPU envelope measured once per run with an engine environment's own torch
    (infopt/hardware/gpu_calibrate.py): a device-to-device copy and a dense GEMM per dtype.
    The calibrated envelope of the ceilings; the catalog's peaks stay the theoretical one."""

    device_name: str
    compute_capability: str | None
    torch_version: str
    cuda_version: str | None
    python: str  # the engine environment's interpreter that ran it
    copy_mib: int
    copy_bytes_per_s: MeasuredRate  # 2 x the copy's size per copy (a read and a write)
    gemm_n: int  # m = n = k
    gemm_flops_per_s: dict[str, MeasuredRate]  # "bf16", "fp16", "fp8", "int8"
    skipped: dict[str, str] = Field(default_factory=dict)  # dtype -> torch's reason
    # Set when a simulated host answered (its stand-in's label): never a GPU's measurement.
    simulated: str | None = None

    @property
    def source(self) -> str:
        sim = f"SIMULATED ({self.simulated}): " if self.simulated else ""
        return (f"{sim}calibrated on {self.device_name} with torch {self.torch_version} of "
                f"{self.python}: a {self.copy_mib} MiB device-to-device copy and "
                f"{self.gemm_n}^3 GEMMs, medians of {self.copy_bytes_per_s.repeats} "
                "(infopt/hardware/gpu_calibrate.py)")


class GpuProbeReport(Spec):
    """Everything the NVML probe found. No driver: empty devices and the reason."""

    devices: list[GpuProbe] = Field(default_factory=list)
    pairs: list[GpuPair] = Field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # "12.7": the newest CUDA the driver supports
    reason: str  # how GPUs were looked for and what was found
    notes: list[str] = Field(default_factory=list)
