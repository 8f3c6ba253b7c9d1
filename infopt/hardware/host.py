"""Read-only probes of the host (CPU, ISA, NUMA, RAM, cgroup limits, disk) plus the NVML GPU
probe (infopt.hardware.nvml) and a measured host memory bandwidth (infopt.hardware.membw).

Pure parsing functions take the text of /proc and /sys files so tests can feed recorded data.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

import psutil

from infopt.bootstrap import default_paths
from infopt.hardware.compute import measure_gemm_flops
from infopt.hardware.membw import measure_host_bandwidth
from infopt.hardware.nvml import probe_gpus
from infopt.specs.hardware import HardwareInventory, HostInfo

# ISA features that change which kernels an engine can use (llama.cpp/ggml and vLLM CPU dispatch).
ENGINE_ISA_FEATURES = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
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


def parse_cgroup_memory_max(text: str) -> int | None:
    """cgroup v2 memory.max ("max" or bytes) -> bytes, None if unlimited."""
    value = text.strip()
    return None if not value or value == "max" else int(value)


def count_numa_nodes(node_dir: str = "/sys/devices/system/node") -> int | None:
    try:
        return sum(1 for p in Path(node_dir).iterdir() if p.name.startswith("node")
                   and p.name[4:].isdigit()) or None
    except OSError:
        return None


def _os_name() -> str:
    if platform.system() == "Linux" and Path("/etc/os-release").exists():
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
        return f"Linux {pretty}".strip()
    if platform.system() == "Darwin":
        return f"Darwin macOS {platform.mac_ver()[0]}".strip()
    return platform.system()


def probe_host(disk_path: Path | None = None) -> HostInfo:
    cpuinfo = _read("/proc/cpuinfo") or ""
    model, isa, physical = parse_cpuinfo(cpuinfo)
    logical = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    cg_text = _read("/sys/fs/cgroup/cpu.max")
    cg_limit = parse_cgroup_cpu_max(cg_text) if cg_text else None
    cg_mem_text = _read("/sys/fs/cgroup/memory.max")
    usable = affinity if cg_limit is None else max(1, min(affinity, int(cg_limit)))
    mem = psutil.virtual_memory()
    disk = disk_path or default_paths().root
    probe_dir = next((p for p in (disk, *disk.parents) if p.exists()), Path("/"))
    return HostInfo(
        cpu_model=model, architecture=platform.machine(), logical_cpus=logical,
        physical_cores=physical, usable_cpus=usable, cgroup_cpu_limit=cg_limit,
        cgroup_memory_limit_bytes=parse_cgroup_memory_max(cg_mem_text) if cg_mem_text else None,
        isa_features=isa, numa_nodes=count_numa_nodes(),
        ram_total_bytes=mem.total, ram_available_bytes=mem.available,
        disk_free_bytes=shutil.disk_usage(probe_dir).free, disk_path=str(probe_dir),
        os=_os_name(), kernel=platform.release(),
    )


def detect_other_accelerators(drm: Path = Path("/sys/class/drm")) -> tuple[str, list[str]]:
    """Apple Silicon and AMD GPUs: what can be read without vendor tools (no NVIDIA
    assumptions: no NVML figures, no CUDA compute capability). `drm`: the kernel's DRM class
    folder (a recorded tree in tests)."""
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return "apple", ["Apple Silicon: unified memory shared by CPU and GPU (MLX-LM route)"]
    found = []
    for vendor in sorted(drm.glob("card*/device/vendor")):
        try:
            if vendor.read_text().strip() == "0x1002":  # PCI vendor id of AMD/ATI
                vram = vendor.parent / "mem_info_vram_total"
                size = f", {int(vram.read_text()) / 2**30:.1f} GiB VRAM" if vram.exists() else ""
                found.append(f"AMD GPU at {vendor.parent.resolve().name}{size}")
        except OSError:
            continue
    return ("amd", found) if found else ("none", [])


def inventory(measure_bandwidth: bool = True) -> HardwareInventory:
    """Host, measured host memory bandwidth (~1.6 s) and GEMM rate (~1 s), GPUs via NVML."""
    report = probe_gpus()
    accel, other = ("nvidia", []) if report.devices else detect_other_accelerators()
    return HardwareInventory(
        host=probe_host(),
        host_memory_bandwidth=measure_host_bandwidth() if measure_bandwidth else None,
        host_gemm_flops_per_s=measure_gemm_flops() if measure_bandwidth else None,
        gpus=report.devices, gpu_pairs=report.pairs, gpu_driver_version=report.driver_version,
        gpu_cuda_driver_version=report.cuda_driver_version, gpu_notes=[*report.notes, *other],
        gpu_probe=report.reason or "", accelerator=accel)
