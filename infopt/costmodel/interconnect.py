"""The GPU-to-GPU link a layout's collectives cross, from a recorded inventory's topology: NVLink
on every pair -> the catalog's NVLink figure scaled to the fewest links any pair has; otherwise
the PCIe links' nominal rate (per direction, after line encoding). Without peer access NCCL
stages through host memory, so the PCIe figure is then an upper bound, said so."""

from __future__ import annotations

from infopt.specs.gpu import GpuPair, GpuProbe

# PCIe per-lane payload rate per direction, bytes/s: gen3 8 GT/s and gen4 16 GT/s and gen5
# 32 GT/s with 128b/130b encoding (PCI-SIG base specifications).
PCIE_LANE_BYTES_PER_S = {3: 8e9 * 128 / 130 / 8, 4: 16e9 * 128 / 130 / 8,
                         5: 32e9 * 128 / 130 / 8}


def pcie_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    rate = PCIE_LANE_BYTES_PER_S.get(gen or 0)
    return rate * width if rate and width else None


def link_from_topology(devices: list[GpuProbe], pairs: list[GpuPair],
                       catalog_nvlink_bytes_per_s: float | None
                       ) -> tuple[float | None, str]:
    """(bytes/s per direction between ranks, where the figure comes from)."""
    if len(devices) < 2:
        return catalog_nvlink_bytes_per_s, "one GPU: no collective"
    links = [p.nvlink_links for p in pairs]
    per_device = max((d.active_nvlinks or 0) for d in devices)
    if pairs and min(links) > 0 and catalog_nvlink_bytes_per_s and per_device:
        fewest = min(links)
        via = "NVSwitch" if all(p.nvlink_via == "switch" for p in pairs) else "direct NVLink"
        bw = catalog_nvlink_bytes_per_s * min(1.0, fewest / per_device)
        return bw, (f"{via}: {fewest} of {per_device} links on every pair (recorded topology) "
                    f"x the catalog's {catalog_nvlink_bytes_per_s / 1e9:.0f} GB/s per "
                    "direction")
    rates = [pcie_bytes_per_s(d.pcie.gen_max, d.pcie.width_max) if d.pcie else None
             for d in devices]
    known = [r for r in rates if r is not None]
    if len(known) < len(rates) or not rates:
        return None, ("no NVLink on every pair and no PCIe generation/width recorded: "
                      "communication left out of the ceilings")
    bw = min(known)
    # Every device has a PCIe link here (a missing one left its rate None above).
    pcie_links = [d.pcie for d in devices if d.pcie is not None]
    slowest = min(pcie_links, key=lambda x: pcie_bytes_per_s(x.gen_max, x.width_max) or 0)
    no_p2p = any(p.p2p_supported is False for p in pairs)
    return bw, (f"PCIe gen{slowest.gen_max} x{slowest.width_max}: {bw / 1e9:.1f} GB/s per "
                "direction nominal (recorded links)" + (
                    "; no peer access between some pairs, so NCCL stages through host "
                    "memory: an upper bound" if no_p2p else ""))
