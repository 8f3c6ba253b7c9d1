"""Read-only probes of the host (CPU, ISA, RAM, cgroup limits) and of NVIDIA GPUs via NVML.

Pure parsing functions take the text of /proc and /sys files so tests can feed recorded data.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil

from infopt.specs.hardware import GpuDevice, HardwareInventory, HostInfo

# ISA features that change which kernels an engine can use (llama.cpp/ggml and vLLM CPU dispatch).
ENGINE_ISA_FEATURES = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
    "asimd", "sve", "sve2", "i8mm", "bf16",
)


def parse_cpuinfo(text: str) -> tuple[str, list[str], int | None]:
    """(cpu model, engine-relevant ISA flags, physical core count) from /proc/cpuinfo text."""
    model = ""
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    phys = core = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model", "Hardware") and not model:
            model = value
        elif key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
        elif not line.strip() and phys is not None and core is not None:
            cores.add((phys, core))
            phys = core = None
    if phys is not None and core is not None:
        cores.add((phys, core))
    isa = [f for f in ENGINE_ISA_FEATURES if f in flags]
    return model or platform.processor() or "unknown", isa, (len(cores) or None)


def parse_cgroup_cpu_max(text: str) -> float | None:
    """cgroup v2 cpu.max ("max 100000" or "200000 100000") -> CPUs allowed, None if unlimited."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    return int(parts[0]) / int(parts[1])


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def probe_host() -> HostInfo:
    cpuinfo = _read("/proc/cpuinfo") or ""
    model, isa, physical = parse_cpuinfo(cpuinfo)
    logical = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    cg_text = _read("/sys/fs/cgroup/cpu.max")
    cg_limit = parse_cgroup_cpu_max(cg_text) if cg_text else None
    usable = affinity if cg_limit is None else max(1, min(affinity, int(cg_limit)))
    mem = psutil.virtual_memory()
    return HostInfo(
        cpu_model=model, architecture=platform.machine(), logical_cpus=logical,
        physical_cores=physical, usable_cpus=usable, cgroup_cpu_limit=cg_limit, isa_features=isa,
        ram_total_bytes=mem.total, ram_available_bytes=mem.available,
        os=f"{platform.system()} {platform.freedesktop_os_release().get('PRETTY_NAME', '')}".strip()
        if hasattr(platform, "freedesktop_os_release") and Path("/etc/os-release").exists()
        else platform.system(),
        kernel=platform.release(),
    )


def probe_nvidia_gpus() -> tuple[list[GpuDevice], str]:
    """GPUs through NVML; without a driver, an empty list and the reason, never an exception."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return [], "NVML: nvidia-ml-py not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], f"NVML: no NVIDIA driver or device ({exc})"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append(GpuDevice(
                index=i, name=pynvml.nvmlDeviceGetName(h), uuid=pynvml.nvmlDeviceGetUUID(h),
                memory_total_bytes=mem.total, memory_free_bytes=mem.free,
                compute_capability=f"{major}.{minor}", driver_version=str(driver)))
        return gpus, f"NVML: {len(gpus)} NVIDIA GPU(s), driver {driver}"
    finally:
        pynvml.nvmlShutdown()


def inventory() -> HardwareInventory:
    gpus, how = probe_nvidia_gpus()
    return HardwareInventory(host=probe_host(), gpus=gpus, gpu_probe=how)
