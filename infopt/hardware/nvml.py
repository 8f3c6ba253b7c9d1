"""Full NVML probe of NVIDIA GPUs behind a small backend Protocol.

`probe_gpus(backend)` asks a `NvmlBackend` for every field a serving plan depends on (memory,
bus width and clocks -> theoretical bandwidth, compute capability and SM count, power limit,
PCIe link, NVLink per link, topology between every pair, MIG, ECC, driver versions and other
processes on the GPU) and returns a typed `GpuProbeReport`. Every per-field NVML error
(NotSupported, NoPermission, ...) becomes None plus a note, never an exception; no driver gives
an empty report with the reason. `PynvmlBackend` wraps nvidia-ml-py; the tests use a backend
that answers from recorded nvidia-smi/deviceQuery data (tests/fixtures/nvml/).
Backends speak NVML's raw units (bytes, MHz, mW); conversion to Hz and W happens here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol, get_args

from infopt.hardware.catalog import MatchStatus, resolve_gpu
from infopt.hardware.cuda_visible import CudaUnavailable, probe_cuda_totals
from infopt.specs.gpu import (
    GpuPair,
    GpuProbe,
    GpuProbeReport,
    GpuProcess,
    NvLinkPort,
    PcieLink,
    TopologyLevel,
)

ClockKind = Literal["sm", "mem"]
PcieField = Literal["gen_current", "gen_max", "width_current", "width_max"]
RemoteKind = Literal["gpu", "switch", "cpu", "unknown"]
ErrorKind = Literal["not_supported", "no_permission", "invalid_argument", "not_recorded", "other"]

# NVML reports the memory clock so that the per-pin data rate is twice the clock for every memory
# type it drives: HBM2/2e/3/3e are double data rate at the reported clock, and for GDDR6/6X/7
# NVML reports half the per-pin rate (RTX 4090: 10501 MHz <-> 21 Gbps GDDR6X). Checked against
# vendor bandwidth on recorded devices in tests/unit/test_nvml_probe.py (H100 SXM 5120-bit x
# 2619 MHz x 2 = 3.35 TB/s, T4 256-bit x 5001 MHz x 2 = 320 GB/s); NVIDIA/nvbench prints
# "1008 GB/sec (384-bit DDR @10501MHz)" for an RTX 4090 (github.com/NVIDIA/nvbench/pull/207).
MEMORY_DATA_RATE_FACTOR = 2

# CUDA cores per SM by compute capability, from CUDA Samples' _ConvertSMVer2Cores (helper_cuda.h);
# NVML gives cores (nvmlDeviceGetNumGpuCores), engines and rooflines want SMs.
CORES_PER_SM = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
                (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 1): 128, (10, 3): 128, (12, 0): 128,
                (12, 1): 128}

# Vendor bandwidth and the clock-derived figure agree within ~3 % on recorded devices (H100 NVL
# 4.02 vs 3.9 TB/s); beyond this the bus width or clock NVML reported is suspect (early B200
# drivers reported 8192 instead of 7680 bits: github.com/pytorch/ao/pull/4002).
BANDWIDTH_DISAGREEMENT = 0.05

# NVML_NVLINK_MAX_LINKS in nvml.h (18 before CUDA 12.x headers, 36 since); links past a device's
# count answer InvalidArgument, which ends the scan.
NVLINK_MAX_LINKS = 36


class NvmlError(Exception):
    """A per-call NVML failure, already classified."""

    def __init__(self, kind: ErrorKind, message: str = ""):
        super().__init__(message or kind)
        self.kind = kind


class NvmlUnavailable(Exception):
    """NVML cannot start: no library, no driver, no device node."""


class MemoryInfo(NamedTuple):
    total_bytes: int
    free_bytes: int
    used_bytes: int


class ProcessInfo(NamedTuple):
    pid: int
    used_memory_bytes: int | None
    name: str | None = None


class NvmlBackend(Protocol):
    """The NVML calls the probe makes, by device index. Raise NvmlError for a failed call."""

    def init(self) -> None: ...  # raises NvmlUnavailable
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...  # NVML encoding: 12070 = CUDA 12.7
    def device_count(self) -> int: ...
    def name(self, i: int) -> str: ...
    def uuid(self, i: int) -> str: ...
    def pci_bus_id(self, i: int) -> str: ...
    def memory_info(self, i: int) -> MemoryInfo: ...
    def memory_bus_width_bits(self, i: int) -> int: ...
    def clock_mhz(self, i: int, kind: ClockKind) -> int: ...
    def max_clock_mhz(self, i: int, kind: ClockKind) -> int: ...
    def cuda_compute_capability(self, i: int) -> tuple[int, int]: ...
    def num_gpu_cores(self, i: int) -> int: ...
    def power_usage_mw(self, i: int) -> int: ...
    def power_limit_mw(self, i: int) -> int: ...  # enforced
    def power_default_limit_mw(self, i: int) -> int: ...
    def pcie(self, i: int, field: PcieField) -> int: ...
    def mig_mode(self, i: int) -> tuple[bool, bool]: ...  # current, pending
    def ecc_mode(self, i: int) -> tuple[bool, bool]: ...
    def nvlink_active(self, i: int, link: int) -> bool: ...
    def nvlink_remote_kind(self, i: int, link: int) -> RemoteKind: ...
    def nvlink_remote_pci_bus_id(self, i: int, link: int) -> str: ...
    def topology_common_ancestor(self, i: int, j: int) -> TopologyLevel: ...
    def p2p_supported(self, i: int, j: int) -> bool: ...
    def processes(self, i: int, kind: Literal["compute", "graphics"]) -> list[ProcessInfo]: ...
    # Percent of the last sample period in which a kernel ran (sampled during benchmarks).
    def utilization_percent(self, i: int) -> int: ...


def theoretical_bandwidth_bytes_per_s(bus_width_bits: int, memory_clock_hz: float) -> float:
    """Peak DRAM bandwidth from NVML's bus width and max memory clock (see MEMORY_DATA_RATE_FACTOR)."""
    return bus_width_bits / 8 * memory_clock_hz * MEMORY_DATA_RATE_FACTOR


def sm_count_from_cores(cuda_cores: int, compute_capability: tuple[int, int]) -> int | None:
    per_sm = CORES_PER_SM.get(compute_capability)
    return cuda_cores // per_sm if per_sm else None


def cuda_version_string(encoded: int) -> str:
    """NVML's 12070 -> "12.7"."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def normalize_bus_id(bus_id: str) -> str:
    """"00000000:18:00.0" and "0000:18:00.0" -> "0000:18:00.0" (NVML pads the domain to 8 digits)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    return bus_id.strip().lower()


_ERROR_TEXT = {
    "not_supported": "not supported by this GPU or driver",
    "no_permission": "NVML denied permission (run with access to the device, or as root)",
    "invalid_argument": "invalid argument",
    "not_recorded": "not recorded",
}


class _Notes:
    """Collects one note per failed field and returns None for it."""

    def __init__(self, notes: list[str]):
        self.notes = notes

    def get(self, field: str, fn, *args):
        try:
            return fn(*args)
        except NvmlError as exc:
            self.notes.append(f"{field}: {_ERROR_TEXT.get(exc.kind, str(exc))}")
            return None


def _nvlink_ports(backend: NvmlBackend, i: int, notes: list[str]) -> list[NvLinkPort] | None:
    ports: list[NvLinkPort] = []
    for link in range(NVLINK_MAX_LINKS):
        try:
            active = backend.nvlink_active(i, link)
        except NvmlError as exc:
            if link == 0 and exc.kind == "not_supported":
                return None  # no NVLink on this device: normal for PCIe cards, no note
            # Past the last link NVML answers InvalidArgument (some drivers NotSupported): done.
            if link == 0 or exc.kind not in ("invalid_argument", "not_supported"):
                notes.append(f"nvlink link {link}: {_ERROR_TEXT.get(exc.kind, str(exc))}")
            return ports or None
        remote = remote_bus = None
        if active:
            try:
                remote = backend.nvlink_remote_kind(i, link)
            except NvmlError:
                remote = None  # kind is optional: link counting falls back to bus ids
            try:
                remote_bus = backend.nvlink_remote_pci_bus_id(i, link)
            except NvmlError:
                remote_bus = None
        ports.append(NvLinkPort(link=link, active=active, remote=remote, remote_pci_bus_id=remote_bus))
    return ports


def _probe_device(backend: NvmlBackend, i: int) -> GpuProbe:
    notes: list[str] = []
    n = _Notes(notes)
    name = n.get("name", backend.name, i) or f"GPU {i}"
    mem = n.get("memory", backend.memory_info, i)
    bus_width = n.get("memory bus width", backend.memory_bus_width_bits, i)
    mem_clock_max = n.get("max memory clock", backend.max_clock_mhz, i, "mem")
    cc = n.get("compute capability", backend.cuda_compute_capability, i)
    cores = n.get("CUDA cores", backend.num_gpu_cores, i)
    mig = n.get("MIG mode", backend.mig_mode, i)
    ecc = n.get("ECC mode", backend.ecc_mode, i)
    pcie_values = {f: n.get(f"PCIe {f.replace('_', ' ')}", backend.pcie, i, f) for f in get_args(PcieField)}
    power = {key: n.get(f"power {key}", fn, i) for key, fn in (
        ("draw", backend.power_usage_mw), ("limit", backend.power_limit_mw),
        ("default limit", backend.power_default_limit_mw))}
    processes: list[GpuProcess] | None = []
    for kind in ("compute", "graphics"):
        found = n.get(f"{kind} processes", backend.processes, i, kind)
        if found is None:
            processes = None
            continue
        if processes is not None:
            processes.extend(GpuProcess(pid=p.pid, kind=kind, name=p.name,
                                        used_memory_bytes=p.used_memory_bytes) for p in found)

    mhz = lambda v: None if v is None else v * 1_000_000  # noqa: E731
    watts = lambda v: None if v is None else v / 1000  # noqa: E731
    bandwidth = (theoretical_bandwidth_bytes_per_s(bus_width, mem_clock_max * 1_000_000)
                 if bus_width and mem_clock_max else None)
    probe = GpuProbe(
        index=i, name=name, uuid=n.get("UUID", backend.uuid, i),
        pci_bus_id=n.get("PCI bus id", backend.pci_bus_id, i),
        memory_total_bytes=mem.total_bytes if mem else None,
        memory_free_bytes=mem.free_bytes if mem else None,
        memory_used_bytes=mem.used_bytes if mem else None,
        memory_bus_width_bits=bus_width,
        memory_clock_hz=mhz(n.get("memory clock", backend.clock_mhz, i, "mem")),
        memory_clock_max_hz=mhz(mem_clock_max),
        theoretical_bandwidth_bytes_per_s=bandwidth,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        cuda_cores=cores,
        sm_count=sm_count_from_cores(cores, cc) if cores and cc else None,
        sm_clock_hz=mhz(n.get("SM clock", backend.clock_mhz, i, "sm")),
        sm_clock_max_hz=mhz(n.get("max SM clock", backend.max_clock_mhz, i, "sm")),
        power_draw_w=watts(power["draw"]), power_limit_w=watts(power["limit"]),
        power_default_limit_w=watts(power["default limit"]),
        pcie=PcieLink(**pcie_values) if any(v is not None for v in pcie_values.values()) else None,
        nvlink=_nvlink_ports(backend, i, notes),
        mig_enabled=mig[0] if mig else None,
        ecc_enabled=ecc[0] if ecc else None,
        processes=processes,
        notes=notes,
    )
    return _annotate(probe)


def _annotate(probe: GpuProbe) -> GpuProbe:
    """Catalog match plus the notes a planner must see: sharing, caps, MIG, narrow links."""
    notes = probe.notes
    match = resolve_gpu(probe.name, probe.memory_total_bytes)
    if match.status is MatchStatus.MATCHED and match.spec:
        spec = match.spec
        probe.catalog_match = spec.key
        bw = probe.theoretical_bandwidth_bytes_per_s
        if bw and abs(bw - spec.bandwidth_bytes_per_s) > BANDWIDTH_DISAGREEMENT * spec.bandwidth_bytes_per_s:
            notes.append(f"bandwidth from bus width and clock ({bw / 1e12:.2f} TB/s) differs from the "
                         f"catalog's {spec.bandwidth_bytes_per_s / 1e12:.2f} TB/s for {spec.name}: "
                         f"check the driver's reported bus width")
    elif match.status is MatchStatus.AMBIGUOUS:
        notes.append(f"catalog: {probe.name!r} fits several entries ({', '.join(match.candidates)}); "
                     f"only measured figures are used")
    else:
        notes.append(f"catalog: unknown device {probe.name!r} ({match.reason}); only measured figures "
                     f"are reported")
    if probe.processes:
        held = sum(p.used_memory_bytes or 0 for p in probe.processes)
        notes.append(f"shared: {len(probe.processes)} other process(es) on this GPU hold "
                     f"{held / (1 << 30):.2f} GiB; free memory and throughput are not the whole GPU's")
    limit, default = probe.power_limit_w, probe.power_default_limit_w
    if limit and default and limit < default:
        notes.append(f"power limit {limit:.0f} W is below the default {default:.0f} W: sustained "
                     f"clocks and compute will be lower")
    if probe.mig_enabled:
        notes.append("MIG enabled: engines see MIG instances, not this whole GPU; memory and SM "
                     "figures here are the whole GPU's")
    if probe.pcie and probe.pcie.width_current and probe.pcie.width_max \
            and probe.pcie.width_current < probe.pcie.width_max:
        notes.append(f"PCIe link runs x{probe.pcie.width_current} of x{probe.pcie.width_max}: "
                     f"host transfers are capped accordingly")
    return probe


def nvlink_between(a: GpuProbe, b: GpuProbe) -> tuple[int, Literal["direct", "switch"] | None]:
    """Active NVLinks joining two GPUs: direct links to b's bus id, else shared NVSwitch links."""
    if not a.nvlink or not b.nvlink or not b.pci_bus_id:
        return 0, None
    target = normalize_bus_id(b.pci_bus_id)
    direct = sum(1 for p in a.nvlink if p.active and p.remote_pci_bus_id
                 and normalize_bus_id(p.remote_pci_bus_id) == target)
    if direct:
        return direct, "direct"
    a_sw = sum(1 for p in a.nvlink if p.active and p.remote == "switch")
    b_sw = sum(1 for p in b.nvlink if p.active and p.remote == "switch")
    # Every GPU on an NVSwitch fabric reaches every other through its switch links (nvidia-smi
    # topo -m prints NV18 for each H100 SXM pair on HGX boards).
    if a_sw and b_sw:
        return min(a_sw, b_sw), "switch"
    return 0, None


def _probe_pairs(backend: NvmlBackend, devices: list[GpuProbe], notes: list[str]) -> list[GpuPair]:
    pairs = []
    for x, a in enumerate(devices):
        for b in devices[x + 1:]:
            links, via = nvlink_between(a, b)
            try:
                path = backend.topology_common_ancestor(a.index, b.index)
            except NvmlError as exc:
                path = None
                if not links:  # behind NVLink the PCIe path rarely matters; otherwise say so
                    notes.append(f"GPU {a.index}-{b.index} PCIe path: {_ERROR_TEXT.get(exc.kind, str(exc))}")
            try:
                p2p = backend.p2p_supported(a.index, b.index)
            except NvmlError:
                p2p = None
            pairs.append(GpuPair(a=a.index, b=b.index, pcie_path=path, nvlink_links=links,
                                 nvlink_via=via, p2p_supported=p2p))
    return pairs


def probe_gpus(backend: NvmlBackend | None = None,
               cuda_totals: Callable[[], dict[str, int]] | None = None) -> GpuProbeReport:
    """Probe every NVIDIA GPU (default backend: nvidia-ml-py). Never raises for a missing driver
    or an unsupported field; processes are those on the GPUs at probe time, before any engine.
    `cuda_totals` (default: the driver library's cuMemGetInfo, only with the default backend)
    adds each device's CUDA-visible total, matched by PCI bus id."""
    if backend is None:
        backend, cuda_totals = PynvmlBackend(), cuda_totals or probe_cuda_totals
    try:
        backend.init()
    except NvmlUnavailable as exc:
        return GpuProbeReport(reason=f"NVML: no NVIDIA driver or device ({exc})")
    try:
        notes: list[str] = []
        n = _Notes(notes)
        driver = n.get("driver version", backend.driver_version)
        cuda = n.get("CUDA driver version", backend.cuda_driver_version)
        count = n.get("device count", backend.device_count) or 0
        devices = [_probe_device(backend, i) for i in range(count)]
        if devices and cuda_totals is not None:
            _attach_cuda_totals(devices, cuda_totals, notes)
        pairs = _probe_pairs(backend, devices, notes)
        reason = f"NVML: {len(devices)} NVIDIA GPU(s), driver {driver}" if devices else \
            "NVML: driver loaded but no GPU visible (check CUDA_VISIBLE_DEVICES and the container's devices)"
        return GpuProbeReport(devices=devices, pairs=pairs, driver_version=driver,
                              cuda_driver_version=cuda_version_string(cuda) if cuda else None,
                              reason=reason, notes=notes)
    finally:
        backend.shutdown()


def _attach_cuda_totals(devices: list[GpuProbe], cuda_totals: Callable[[], dict[str, int]],
                        notes: list[str]) -> None:
    try:
        totals = cuda_totals()
    except CudaUnavailable as exc:
        notes.append(f"CUDA-visible memory not measured: {exc}; the fit uses an observed or "
                     "estimated total (infopt.hardware.cuda_visible)")
        return
    by_bus = {normalize_bus_id(bus): total for bus, total in totals.items()}
    for d in devices:
        if d.pci_bus_id:
            d.cuda_memory_total_bytes = by_bus.get(normalize_bus_id(d.pci_bus_id))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)  # older bindings return bytes


class PynvmlBackend:
    """NvmlBackend over nvidia-ml-py (module `pynvml`), imported only when a probe starts."""

    def __init__(self) -> None:
        # The pynvml module once init() ran, None before: untyped (no stubs), so Any.
        self._nvml: Any = None
        self._handles: dict[int, object] = {}

    def init(self) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise NvmlUnavailable("nvidia-ml-py not installed") from exc
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(str(exc)) from exc
        self._nvml = pynvml

    def shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass  # shutting down a half-initialized library is not worth a failure
        self._nvml, self._handles = None, {}

    def _call(self, function: str, *args):
        nvml = self._nvml
        try:
            return getattr(nvml, function)(*args)
        except AttributeError as exc:  # binding older than the call
            raise NvmlError("not_supported", f"{function} missing in nvidia-ml-py") from exc
        except nvml.NVMLError as exc:
            kinds: dict[int, ErrorKind] = {nvml.NVML_ERROR_NOT_SUPPORTED: "not_supported",
                                           nvml.NVML_ERROR_FUNCTION_NOT_FOUND: "not_supported",
                                           nvml.NVML_ERROR_NO_PERMISSION: "no_permission",
                                           nvml.NVML_ERROR_INVALID_ARGUMENT: "invalid_argument"}
            raise NvmlError(kinds.get(exc.value, "other"), str(exc)) from exc

    def _handle(self, i: int):
        if i not in self._handles:
            self._handles[i] = self._call("nvmlDeviceGetHandleByIndex", i)
        return self._handles[i]

    def _dev(self, function: str, i: int, *args):
        return self._call(function, self._handle(i), *args)

    def _clock(self, kind: ClockKind) -> int:
        return self._nvml.NVML_CLOCK_SM if kind == "sm" else self._nvml.NVML_CLOCK_MEM

    def driver_version(self) -> str:
        return _text(self._call("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> int:
        return int(self._call("nvmlSystemGetCudaDriverVersion"))

    def device_count(self) -> int:
        return int(self._call("nvmlDeviceGetCount"))

    def name(self, i: int) -> str:
        return _text(self._dev("nvmlDeviceGetName", i))

    def uuid(self, i: int) -> str:
        return _text(self._dev("nvmlDeviceGetUUID", i))

    def pci_bus_id(self, i: int) -> str:
        return _text(self._dev("nvmlDeviceGetPciInfo", i).busId)

    def memory_bus_width_bits(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetMemoryBusWidth", i))

    def clock_mhz(self, i: int, kind: ClockKind) -> int:
        return int(self._dev("nvmlDeviceGetClockInfo", i, self._clock(kind)))

    def max_clock_mhz(self, i: int, kind: ClockKind) -> int:
        return int(self._dev("nvmlDeviceGetMaxClockInfo", i, self._clock(kind)))

    def num_gpu_cores(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetNumGpuCores", i))

    def power_usage_mw(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetPowerUsage", i))

    def power_limit_mw(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetEnforcedPowerLimit", i))

    def power_default_limit_mw(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetPowerManagementDefaultLimit", i))

    def nvlink_remote_pci_bus_id(self, i: int, link: int) -> str:
        return _text(self._dev("nvmlDeviceGetNvLinkRemotePciInfo", i, link).busId)

    def memory_info(self, i: int) -> MemoryInfo:
        try:  # v2 reports driver-reserved memory apart from `used`, as nvidia-smi does
            m = self._dev("nvmlDeviceGetMemoryInfo", i, self._nvml.nvmlMemory_v2)
        except NvmlError:
            m = self._dev("nvmlDeviceGetMemoryInfo", i)
        return MemoryInfo(int(m.total), int(m.free), int(m.used))

    def cuda_compute_capability(self, i: int) -> tuple[int, int]:
        major, minor = self._dev("nvmlDeviceGetCudaComputeCapability", i)
        return int(major), int(minor)

    def pcie(self, i: int, field: PcieField) -> int:
        function = {"gen_current": "nvmlDeviceGetCurrPcieLinkGeneration",
                    "gen_max": "nvmlDeviceGetMaxPcieLinkGeneration",
                    "width_current": "nvmlDeviceGetCurrPcieLinkWidth",
                    "width_max": "nvmlDeviceGetMaxPcieLinkWidth"}[field]
        return int(self._dev(function, i))

    def mig_mode(self, i: int) -> tuple[bool, bool]:
        current, pending = self._dev("nvmlDeviceGetMigMode", i)
        return current == self._nvml.NVML_DEVICE_MIG_ENABLE, pending == self._nvml.NVML_DEVICE_MIG_ENABLE

    def ecc_mode(self, i: int) -> tuple[bool, bool]:
        current, pending = self._dev("nvmlDeviceGetEccMode", i)
        return current == self._nvml.NVML_FEATURE_ENABLED, pending == self._nvml.NVML_FEATURE_ENABLED

    def nvlink_active(self, i: int, link: int) -> bool:
        return self._dev("nvmlDeviceGetNvLinkState", i, link) == self._nvml.NVML_FEATURE_ENABLED

    def nvlink_remote_kind(self, i: int, link: int) -> RemoteKind:
        kind = self._dev("nvmlDeviceGetNvLinkRemoteDeviceType", i, link)
        kinds: dict[int, RemoteKind] = {self._nvml.NVML_NVLINK_DEVICE_TYPE_GPU: "gpu",
                                        self._nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH: "switch",
                                        self._nvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU: "cpu"}
        return kinds.get(kind, "unknown")

    def topology_common_ancestor(self, i: int, j: int) -> TopologyLevel:
        level = self._dev("nvmlDeviceGetTopologyCommonAncestor", i, self._handle(j))
        nvml = self._nvml
        levels = {nvml.NVML_TOPOLOGY_INTERNAL: TopologyLevel.INTERNAL,
                  nvml.NVML_TOPOLOGY_SINGLE: TopologyLevel.SINGLE,
                  nvml.NVML_TOPOLOGY_MULTIPLE: TopologyLevel.MULTIPLE,
                  nvml.NVML_TOPOLOGY_HOSTBRIDGE: TopologyLevel.HOSTBRIDGE,
                  nvml.NVML_TOPOLOGY_NODE: TopologyLevel.NODE,
                  nvml.NVML_TOPOLOGY_SYSTEM: TopologyLevel.SYSTEM}
        if level not in levels:
            raise NvmlError("other", f"unknown topology level {level}")
        return levels[level]

    def p2p_supported(self, i: int, j: int) -> bool:
        status = self._dev("nvmlDeviceGetP2PStatus", i, self._handle(j), self._nvml.NVML_P2P_CAPS_INDEX_READ)
        return status == self._nvml.NVML_P2P_STATUS_OK

    def utilization_percent(self, i: int) -> int:
        return int(self._dev("nvmlDeviceGetUtilizationRates", i).gpu)

    def processes(self, i: int, kind: Literal["compute", "graphics"]) -> list[ProcessInfo]:
        function = ("nvmlDeviceGetComputeRunningProcesses" if kind == "compute"
                    else "nvmlDeviceGetGraphicsRunningProcesses")
        found = []
        for p in self._dev(function, i):
            try:
                name = _text(self._call("nvmlSystemGetProcessName", p.pid))
            except NvmlError:
                name = None  # the pid lives in another PID namespace
            found.append(ProcessInfo(int(p.pid), p.usedGpuMemory, name))
        return found
