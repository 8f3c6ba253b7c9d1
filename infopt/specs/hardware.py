"""What the machine is: host CPU/RAM/disk and GPUs (bytes, Hz, counts)."""

from __future__ import annotations

from .base import Spec


class GpuDevice(Spec):
    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int
    memory_free_bytes: int | None = None
    compute_capability: str | None = None
    driver_version: str | None = None


class HostInfo(Spec):
    cpu_model: str
    architecture: str  # platform.machine(): x86_64, aarch64, arm64
    logical_cpus: int
    physical_cores: int | None
    usable_cpus: int  # sched affinity and cgroup quota applied: what an engine can really use
    cgroup_cpu_limit: float | None  # CPUs allowed by cgroup cpu.max, None when unlimited
    isa_features: list[str]  # the subset engines care about (avx2, avx512f, amx_tile, neon, ...)
    ram_total_bytes: int
    ram_available_bytes: int
    os: str
    kernel: str


class HardwareInventory(Spec):
    host: HostInfo
    gpus: list[GpuDevice]
    gpu_probe: str  # how GPUs were looked for and what was found ("NVML: no NVIDIA driver", ...)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)
