"""What the machine is: host CPU/RAM and measured bandwidth, and GPUs as NVML reports them."""

from __future__ import annotations

from pydantic import Field

from .base import Spec
from .gpu import GpuCalibration, GpuPair, GpuProbe

# One GPU as probed (NVML fields, catalog match, notes); kept under the old name for callers.
GpuDevice = GpuProbe


class HostMemoryBandwidth(Spec):
    """Median and spread of repeated copies; every figure measured here, in bytes/s."""

    median_bytes_per_s: float
    min_bytes_per_s: float
    max_bytes_per_s: float
    spread: float  # (max - min) / median: run-to-run noise of this measurement
    array_bytes: int
    bytes_moved_per_copy: int  # 2 x array_bytes (read + write)
    repeats: int
    threads: int
    llc_bytes: int | None
    exceeds_llc: bool | None  # array >= 2x the last-level cache; False: cache may inflate the
    # figure; None: cache size unknown
    elapsed_s: float


class HostInfo(Spec):
    cpu_model: str
    architecture: str  # platform.machine(): x86_64, aarch64, arm64
    logical_cpus: int
    physical_cores: int | None
    usable_cpus: int  # sched affinity and cgroup quota applied: what an engine can really use
    cgroup_cpu_limit: float | None  # CPUs allowed by cgroup cpu.max, None when unlimited
    cgroup_memory_limit_bytes: int | None = None  # cgroup memory.max, None when unlimited
    isa_features: list[str]  # the subset engines care about (avx2, avx512f, amx_tile, neon, ...)
    numa_nodes: int | None = None
    ram_total_bytes: int
    ram_available_bytes: int
    disk_free_bytes: int | None = None  # where models are cached ($INFOPT_CACHE_DIR)
    disk_path: str | None = None
    os: str
    kernel: str


class HardwareInventory(Spec):
    host: HostInfo
    host_memory_bandwidth: HostMemoryBandwidth | None = None  # measured, None if skipped
    host_gemm_flops_per_s: float | None = None  # measured fp32 numpy GEMM, None if skipped
    # The first GPU's envelope measured with an engine environment's torch, once per run
    # (infopt.hardware.gpu_calibration); None off GPUs or when it could not run.
    gpu_calibration: GpuCalibration | None = None
    gpus: list[GpuProbe]
    gpu_pairs: list[GpuPair] = Field(default_factory=list)
    gpu_driver_version: str | None = None
    gpu_cuda_driver_version: str | None = None
    gpu_notes: list[str] = Field(default_factory=list)
    gpu_probe: str  # how GPUs were looked for and what was found ("NVML: no NVIDIA driver", ...)
    accelerator: str = "none"  # "nvidia", "apple", "amd" or "none": which route applies

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def engine_cpu_isa(self) -> list[str] | None:
        """The ISA the engines' CPU kernels run on, or None when they run on a GPU (then no CPU
        kernel limit applies: infopt.engines.support)."""
        return None if self.gpus else list(self.host.isa_features)
