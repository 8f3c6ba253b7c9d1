"""Plain-text rendering of a HardwareInventory for `infopt hardware` (units converted here)."""

from __future__ import annotations

from infopt.specs.hardware import HardwareInventory

GIB = 2**30


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def render_hardware(hw: HardwareInventory) -> str:
    h = hw.host
    lines = [
        f"CPU: {h.cpu_model} ({h.architecture}), {h.usable_cpus} usable of {h.logical_cpus} "
        f"logical CPUs, {h.physical_cores or '?'} physical cores, {h.numa_nodes or '?'} NUMA "
        f"node(s)" + (f", cgroup limit {h.cgroup_cpu_limit:g} CPUs" if h.cgroup_cpu_limit else ""),
        f"ISA: {', '.join(h.isa_features) or 'none of the engine-relevant features'}",
        f"RAM: {_gib(h.ram_total_bytes)} total, {_gib(h.ram_available_bytes)} available"
        + (f", cgroup limit {_gib(h.cgroup_memory_limit_bytes)}" if h.cgroup_memory_limit_bytes
           else ""),
        f"Disk: {_gib(h.disk_free_bytes)} free at {h.disk_path} (model cache)",
        f"OS: {h.os}, kernel {h.kernel}",
    ]
    bw = hw.host_memory_bandwidth
    if bw:
        lines.append(f"Host memory bandwidth (measured, {bw.threads} threads, {bw.repeats} copies of "
                     f"{bw.array_bytes / 2**20:.0f} MiB): median {bw.median_bytes_per_s / 1e9:.1f} "
                     f"GB/s, range {bw.min_bytes_per_s / 1e9:.1f}-{bw.max_bytes_per_s / 1e9:.1f} GB/s"
                     + ("" if bw.exceeds_llc else " (array not above the last-level cache: may be "
                        "cache-inflated)"))
    if not hw.gpus:
        lines.append(f"GPUs: none ({hw.gpu_probe}). This is the CPU route: llama.cpp first.")
    for g in hw.gpus:
        bw_txt = (f", {g.theoretical_bandwidth_bytes_per_s / 1e12:.2f} TB/s from clocks"
                  if g.theoretical_bandwidth_bytes_per_s else "")
        lines.append(f"GPU {g.index}: {g.name} [{g.catalog_match or 'not in catalog'}], "
                     f"{_gib(g.memory_total_bytes)}, CC {g.compute_capability or '?'}{bw_txt}")
    for pair in hw.gpu_pairs:
        path = pair.pcie_path or "path not recorded"
        lines.append(f"  GPU{pair.a}<->GPU{pair.b}: PCIe {path}, NVLink x"
                     f"{pair.nvlink_links or 0}")
    lines += [f"note: {n}" for n in hw.gpu_notes]
    return "\n".join(lines)
