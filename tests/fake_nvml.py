"""A fake NVML backend built from real recorded device data (tests/fixtures/nvml/*.json, each
citing the upstream nvidia-smi dump it was transcribed from). Speaks the NvmlBackend protocol of
infopt.hardware.nvml, so the real probe code runs unchanged on it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Literal

from infopt.hardware.nvml import (
    ClockKind,
    MemoryInfo,
    NvmlError,
    NvmlUnavailable,
    PcieField,
    ProcessInfo,
    RemoteKind,
    probe_gpus,
)
from infopt.specs.gpu import TopologyLevel

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"
MIB = 1 << 20
GIB = 1 << 30

_TOPO_TOKENS = {"X": TopologyLevel.INTERNAL, "PIX": TopologyLevel.SINGLE, "PXB": TopologyLevel.MULTIPLE,
                "PHB": TopologyLevel.HOSTBRIDGE, "NODE": TopologyLevel.NODE, "SYS": TopologyLevel.SYSTEM}


class RecordedBackend:
    """NvmlBackend answering from a fixture of tests/fixtures/nvml/ (transcribed nvidia-smi -q,
    deviceQuery and topo -m output, with upstream URLs). A field recorded as null ("N/A")
    answers NotSupported; a field absent from the recording answers "not recorded"."""

    def __init__(self, data: dict, unavailable: str | None = None):
        self.data, self.devices, self.unavailable = data, data.get("devices", []), unavailable

    @classmethod
    def from_json(cls, path: str | Path) -> "RecordedBackend":
        return cls(json.loads(Path(path).read_text()))

    def init(self) -> None:
        if self.unavailable:
            raise NvmlUnavailable(self.unavailable)

    def shutdown(self) -> None:
        pass

    def _field(self, i: int, key: str):
        device = self.devices[i]
        if key not in device:
            raise NvmlError("not_recorded")
        if device[key] is None:
            raise NvmlError("not_supported")
        return device[key]

    def _sub(self, i: int, key: str, sub: str):
        value = self._field(i, key).get(sub)
        if value is None:
            raise NvmlError("not_supported")
        return value

    def driver_version(self) -> str:
        return self.data["driver_version"]

    def device_count(self) -> int:
        return len(self.devices)

    def name(self, i: int) -> str:
        return self._field(i, "name")

    def uuid(self, i: int) -> str:
        return self._field(i, "uuid")

    def pci_bus_id(self, i: int) -> str:
        return self._field(i, "pci_bus_id")

    def memory_bus_width_bits(self, i: int) -> int:
        return self._field(i, "memory_bus_width_bits")

    def clock_mhz(self, i: int, kind: ClockKind) -> int:
        return self._sub(i, "clocks_mhz", kind)

    def max_clock_mhz(self, i: int, kind: ClockKind) -> int:
        return self._sub(i, "max_clocks_mhz", kind)

    def num_gpu_cores(self, i: int) -> int:
        return self._field(i, "num_gpu_cores")

    def power_usage_mw(self, i: int) -> int:
        return round(self._field(i, "power_draw_w") * 1000)

    def power_limit_mw(self, i: int) -> int:
        return round(self._field(i, "power_limit_w") * 1000)

    def power_default_limit_mw(self, i: int) -> int:
        return round(self._field(i, "power_default_limit_w") * 1000)

    def pcie(self, i: int, field: PcieField) -> int:
        return self._sub(i, "pcie", field)

    def cuda_driver_version(self) -> int:
        if "cuda_driver_version" not in self.data:  # an older nvidia-smi does not print it
            raise NvmlError("not_recorded")
        major, minor = self.data["cuda_driver_version"].split(".")
        return int(major) * 1000 + int(minor) * 10

    def memory_info(self, i: int) -> MemoryInfo:
        return MemoryInfo(self._field(i, "memory_total_mib") * MIB, self._field(i, "memory_free_mib") * MIB,
                          self._field(i, "memory_used_mib") * MIB)

    def utilization_percent(self, i: int) -> int:
        return self._field(i, "utilization_gpu_percent")

    def cuda_compute_capability(self, i: int) -> tuple[int, int]:
        major, minor = self._field(i, "cuda_compute_capability")
        return major, minor

    def mig_mode(self, i: int) -> tuple[bool, bool]:
        mode = self._field(i, "mig_mode")
        return mode["current"] == "Enabled", mode["pending"] == "Enabled"

    def ecc_mode(self, i: int) -> tuple[bool, bool]:
        mode = self._field(i, "ecc_mode")
        return mode["current"] == "Enabled", mode["pending"] == "Enabled"

    def _port(self, i: int, link: int) -> dict:
        ports = self._field(i, "nvlink")
        if link >= len(ports):
            raise NvmlError("invalid_argument")
        return ports[link]

    def nvlink_active(self, i: int, link: int) -> bool:
        return self._port(i, link)["active"]

    def nvlink_remote_kind(self, i: int, link: int) -> RemoteKind:
        if "remote" not in self._port(i, link):
            raise NvmlError("not_recorded")
        return self._port(i, link)["remote"]

    def nvlink_remote_pci_bus_id(self, i: int, link: int) -> str:
        if "remote_pci_bus_id" not in self._port(i, link):
            raise NvmlError("not_recorded")
        return self._port(i, link)["remote_pci_bus_id"]

    def topology_common_ancestor(self, i: int, j: int) -> TopologyLevel:
        if "topology" not in self.data:
            raise NvmlError("not_recorded")
        token = self.data["topology"][i][j]
        if token not in _TOPO_TOKENS:  # "NV18": topo -m hides the PCIe path behind NVLink
            raise NvmlError("not_recorded", f"PCIe path not recorded (topo -m shows {token})")
        return _TOPO_TOKENS[token]

    def p2p_supported(self, i: int, j: int) -> bool:
        if "p2p" not in self.data:
            raise NvmlError("not_recorded")
        return self.data["p2p"][i][j]

    def processes(self, i: int, kind: Literal["compute", "graphics"]) -> list[ProcessInfo]:
        wanted = {"compute": {"C", "C+G"}, "graphics": {"G"}}[kind]
        found = []
        for p in self._field(i, "processes"):
            if p["type"] in wanted:
                used = p.get("used_memory_mib")
                found.append(ProcessInfo(p["pid"], None if used is None else used * MIB, p.get("name")))
        return found


class SimulatedProcessesBackend(RecordedBackend):
    """A recorded host whose compute processes are the SIMULATED engines running on it: each
    writes `{pid}.json` ({device index: bytes}) into `table` at start (tests/sim/gpu_host.py
    publish_gpu_memory), as the driver would list it. Memory in use is their sum per device."""

    def __init__(self, data: dict, table: Path):
        super().__init__(data)
        self.table = table

    def _rows(self) -> list[tuple[int, dict[str, int]]]:
        rows = []
        for f in self.table.glob("*.json"):
            try:
                rows.append((int(f.stem), json.loads(f.read_text())))
            except (ValueError, OSError):
                continue  # written while read: the next sample has it
        return rows

    def processes(self, i: int, kind: Literal["compute", "graphics"]) -> list[ProcessInfo]:
        if kind != "compute":
            return []
        return [ProcessInfo(pid, per[str(i)], "python (SIMULATED engine)")
                for pid, per in self._rows() if str(i) in per]

    def memory_info(self, i: int) -> MemoryInfo:
        total = self._field(i, "memory_total_mib") * MIB
        used = min(total, sum(per.get(str(i), 0) for _, per in self._rows()))
        return MemoryInfo(total, total - used, used)


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def probe(fixture: str, /, **edits):
    """Probe a recording with some fields of its first device changed."""
    data = copy.deepcopy(load(fixture))
    for key, value in edits.items():
        data["devices"][0][key] = value
    return probe_gpus(RecordedBackend(data))



def first_devices(data: dict, n: int) -> dict:
    """The recording as a process sees it with CUDA_VISIBLE_DEVICES=0..n-1: its first n
    devices and their part of the topology."""
    out = copy.deepcopy(data)
    out["devices"] = out["devices"][:n]
    for key in ("topology", "p2p"):
        if key in out:
            out[key] = [row[:n] for row in out[key][:n]]
    out["description"] = f"{data['description']} (its first {n} device(s) visible)"
    return out


def recorded_inventory(fixture: str, visible: int | None = None):
    """A HardwareInventory with this host and the recorded GPUs and topology of `fixture` (what
    `infopt hardware --json` would write on that machine); `visible`: only its first devices
    (first_devices)."""
    from infopt.hardware.host import probe_host
    from infopt.hardware.nvml import probe_gpus
    from infopt.specs.hardware import HardwareInventory

    data = load(fixture)
    rep = probe_gpus(RecordedBackend(first_devices(data, visible) if visible else data))
    return HardwareInventory(host=probe_host(), gpus=rep.devices, gpu_pairs=rep.pairs,
                             gpu_probe=rep.reason or "", accelerator="nvidia")
