"""NVML probe against real recorded devices (tests/fixtures/nvml/, each citing its upstream URL).

`RecordedBackend` answers NVML calls from transcribed nvidia-smi -q / deviceQuery / topo -m
output; a pynvml stub checks that the real backend calls functions nvidia-ml-py really has.
"""

from __future__ import annotations

import json
import sys
import types

import pynvml
import pytest

from infopt.hardware.catalog import lookup_gpu
from infopt.hardware.nvml import (
    NvmlError,
    PynvmlBackend,
    cuda_version_string,
    normalize_bus_id,
    nvlink_between,
    probe_gpus,
    sm_count_from_cores,
    theoretical_bandwidth_bytes_per_s,
)
from infopt.specs.gpu import GpuProbe, NvLinkPort, TopologyLevel
from tests.fake_nvml import FIXTURES, GIB, MIB, RecordedBackend, load, probe  # noqa: F401

# --- fixtures are real recordings with their provenance --------------------------------------


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_cites_its_upstream_source(path):
    data = json.loads(path.read_text())
    assert data["sources"] and all(s["url"].startswith("https://github.com/") for s in data["sources"])
    assert data["devices"] and data["driver_version"]
    if "topology" in data:  # nvidia-smi topo -m GPU block: square, X on the diagonal, symmetric
        topo, n = data["topology"], len(data["devices"])
        assert len(topo) == n and all(len(row) == n for row in topo)
        assert all(topo[i][j] == ("X" if i == j else topo[j][i]) for i in range(n) for j in range(n))


# --- pure arithmetic ----------------------------------------------------------------------------

def test_bandwidth_formula_counts_both_clock_edges():
    # 5120-bit HBM3 at 2619 MHz (recorded H100 SXM): 640 B x 2.619e9 x 2
    assert theoretical_bandwidth_bytes_per_s(5120, 2619e6) == pytest.approx(3.35232e12)
    # GDDR6X: NVML's 10501 MHz is half the 21 Gbps pin rate (recorded RTX 4090)
    assert theoretical_bandwidth_bytes_per_s(384, 10501e6) == pytest.approx(1.008096e12)


@pytest.mark.parametrize(("catalog_name", "bus_bits", "max_mem_mhz", "source"), [
    # (bus width from recorded deviceQuery, max memory clock from recorded nvidia-smi -q)
    ("H100 SXM5 80GB", 5120, 2619, "thamada/gls H100SXMx8_deviceQuery.py + _smi.py"),
    ("H100 NVL 94GB", 6144, 2619, "thamada/gls H100NVLx2_*"),
    ("H200 SXM 141GB", 6144, 3201, "thamada/gls H200_*"),
    ("A100 SXM4 80GB", 5120, 1593, "thamada/gls A100SXMx4_* and telegraf a100-sxm4-v12.xml"),
    ("A100 SXM4 40GB", 5120, 1215, "upb-pc2 A100 40GB deviceQuery; NVIDIA/nvidia-docker#1648"),
    ("L40S", 384, 9001, "thamada/gls L40S_*"),
    ("L4", 192, 6251, "thamada/gls L4_*"),
    ("A10", 384, 6251, "thamada/gls A10_*"),
    ("GeForce RTX 4090", 384, 10501, "thamada/gls RTX4090_*"),
    ("GeForce RTX 3090", 384, 9751, "thamada/gls RTX3090_*; telegraf rtx-3090-v12.xml"),
    ("RTX 6000 Ada Generation", 384, 10001, "thamada/gls RTX6000Ada_x8_*"),
    ("GeForce RTX 5090", 512, 14001, "thamada/gls RTX5090_*"),
    ("Tesla V100 SXM2 16GB", 4096, 877, "thamada/gls V100_x8_*"),
    ("B200 HGX 180GB", 7680, 3996, "github.com/pytorch/ao/pull/4002"),
])
def test_clock_derived_bandwidth_matches_vendor_figure(catalog_name, bus_bits, max_mem_mhz, source):
    # HBM2, HBM2e, HBM3, HBM3e, GDDR6, GDDR6X and GDDR7 all take the same factor 2; the largest
    # gap (H100 NVL, +3.1 %) is the vendor quoting a rounder figure than the clocks give.
    spec = lookup_gpu(catalog_name)
    derived = theoretical_bandwidth_bytes_per_s(bus_bits, max_mem_mhz * 1e6)
    assert derived == pytest.approx(spec.bandwidth_bytes_per_s, rel=0.035), source


def test_sm_count_and_version_helpers():
    assert sm_count_from_cores(16896, (9, 0)) == 132
    assert sm_count_from_cores(6912, (8, 0)) == 108
    assert sm_count_from_cores(2560, (7, 5)) == 40
    assert sm_count_from_cores(1000, (99, 0)) is None
    assert cuda_version_string(12070) == "12.7"
    assert cuda_version_string(11080) == "11.8"
    assert normalize_bus_id("00000000:18:00.0") == normalize_bus_id("0000:18:00.0") == "0000:18:00.0"


# --- recorded devices ---------------------------------------------------------------------------

def test_hgx_h100_eight_gpus_through_nvswitch():
    report = probe_gpus(RecordedBackend.from_json(FIXTURES / "h100_sxm_8x.json"))
    assert report.driver_version == "565.57.01" and report.cuda_driver_version == "12.7"
    assert len(report.devices) == 8 and "8 NVIDIA GPU(s)" in report.reason
    assert len({d.uuid for d in report.devices}) == 8
    gpu = report.devices[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.catalog_match == "h100_sxm5_80gb"
    assert gpu.memory_total_bytes == 81559 * MIB and gpu.memory_used_bytes == 1 * MIB
    assert gpu.compute_capability == "9.0" and gpu.cuda_cores == 16896 and gpu.sm_count == 132
    assert gpu.memory_bus_width_bits == 5120 and gpu.memory_clock_max_hz == 2619_000_000
    assert gpu.theoretical_bandwidth_bytes_per_s == pytest.approx(3.35e12, rel=0.01)
    assert gpu.sm_clock_max_hz == 1980_000_000 and gpu.sm_clock_hz == 345_000_000  # idle
    assert gpu.power_limit_w == 700 and gpu.power_draw_w == pytest.approx(100.89)
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max, gpu.pcie.width_max) == (5, 5, 16)
    assert gpu.mig_enabled is False and gpu.ecc_enabled is True
    assert gpu.processes == [] and not gpu.shared
    assert gpu.active_nvlinks == 18
    assert gpu.notes == []
    assert len(report.pairs) == 28
    assert all(p.nvlink_links == 18 and p.nvlink_via == "switch" and p.p2p_supported for p in report.pairs)
    # topo -m prints NV18 where a PCIe path would be: unknown, and no note since NVLink carries it
    assert all(p.pcie_path is None for p in report.pairs) and report.notes == []


def test_eight_rtx_4090_on_pcie_without_nvlink_or_p2p():
    report = probe_gpus(RecordedBackend.from_json(FIXTURES / "rtx4090_8x.json"))
    gpu = report.devices[0]
    assert gpu.catalog_match == "rtx_4090" and gpu.sm_count == 128
    assert gpu.theoretical_bandwidth_bytes_per_s == pytest.approx(1.008e12, rel=0.001)
    assert gpu.nvlink is None and gpu.mig_enabled is None
    assert any(n.startswith("MIG mode: not supported") for n in gpu.notes)
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max) == (1, 4)  # idle link downclock: no note
    assert not any("PCIe link" in n for n in gpu.notes)
    assert {(p.pcie_path, p.nvlink_links, p.p2p_supported) for p in report.pairs} == {
        (TopologyLevel.SYSTEM, 0, False)}


def test_a100_with_mig_enabled_is_flagged():
    report = probe_gpus(RecordedBackend.from_json(FIXTURES / "a100_sxm4_80gb_mig.json"))
    gpu = report.devices[0]
    assert gpu.catalog_match == "a100_sxm4_80gb" and gpu.mig_enabled is True
    assert any(n.startswith("MIG enabled") for n in gpu.notes)
    assert gpu.power_limit_w == 500  # this HGX board runs above the 400 W datasheet TDP
    assert gpu.nvlink is None and "nvlink link 0: not recorded" in gpu.notes


def test_power_capped_rtx_3090_and_missing_ecc():
    gpu = probe_gpus(RecordedBackend.from_json(FIXTURES / "rtx3090_power_capped.json")).devices[0]
    assert gpu.catalog_match == "rtx_3090" and gpu.sm_count == 82
    assert (gpu.power_limit_w, gpu.power_default_limit_w) == (200, 350)
    assert any("power limit 200 W is below the default 350 W" in n for n in gpu.notes)
    assert gpu.ecc_enabled is None and "ECC mode: not supported by this GPU or driver" in gpu.notes


def test_shared_t4_reports_other_processes_and_unrecorded_fields():
    gpu = probe_gpus(RecordedBackend.from_json(FIXTURES / "tesla_t4_shared.json")).devices[0]
    assert gpu.catalog_match == "t4" and gpu.shared
    assert [(p.pid, p.kind, p.name, p.used_memory_bytes) for p in gpu.processes] == [
        (5762, "compute", "python", 1005 * MIB), (675, "graphics", "/usr/lib/xorg/Xorg", 22 * MIB)]
    assert any(n.startswith("shared: 2 other process(es)") for n in gpu.notes)
    # bus width and compute capability were not recorded: None plus a note, no crash
    assert gpu.memory_bus_width_bits is None and gpu.theoretical_bandwidth_bytes_per_s is None
    assert gpu.compute_capability is None and gpu.sm_count is None
    assert "memory bus width: not recorded" in gpu.notes
    assert any("x8 of x16" in n for n in gpu.notes)


# --- failure paths ------------------------------------------------------------------------------

def test_no_driver_gives_empty_report_with_reason():
    report = probe_gpus(RecordedBackend({"devices": []}, unavailable="Driver Not Loaded"))
    assert report.devices == [] and "Driver Not Loaded" in report.reason


def test_real_backend_without_driver_does_not_raise():
    report = probe_gpus(PynvmlBackend())
    if report.devices:
        pytest.skip("this machine has an NVIDIA driver")
    assert report.reason.startswith("NVML: no NVIDIA driver or device")


def test_unknown_device_keeps_measured_figures():
    gpu = probe("h100_sxm_8x", name="NVIDIA H800").devices[0]
    assert gpu.catalog_match is None
    assert any("unknown device 'NVIDIA H800'" in n for n in gpu.notes)
    assert gpu.theoretical_bandwidth_bytes_per_s == pytest.approx(3.352e12, rel=0.001)


def test_ambiguous_name_is_not_guessed():
    gpu = probe("a100_sxm4_80gb_mig", name="NVIDIA A100").devices[0]
    assert gpu.catalog_match is None
    assert any("fits several entries (a100_sxm4_80gb, a100_pcie_80gb)" in n for n in gpu.notes)


def test_reported_bus_width_disagreeing_with_catalog_is_flagged():
    gpu = probe("h100_sxm_8x", memory_bus_width_bits=6144).devices[0]
    assert gpu.catalog_match == "h100_sxm5_80gb"
    assert any("differs from the catalog's 3.35 TB/s" in n for n in gpu.notes)


class DeniedProcesses(RecordedBackend):
    def processes(self, i, kind):
        raise NvmlError("no_permission")

    def topology_common_ancestor(self, i, j):
        raise NvmlError("not_supported")


def test_no_permission_becomes_none_and_a_note():
    report = probe_gpus(DeniedProcesses(load("rtx4090_8x")))
    gpu = report.devices[0]
    assert gpu.processes is None and not gpu.shared
    assert any(n.startswith("compute processes: NVML denied permission") for n in gpu.notes)
    assert report.pairs[0].pcie_path is None
    assert "GPU 0-1 PCIe path: not supported by this GPU or driver" in report.notes


def test_direct_nvlink_pairs_count_links_to_the_peer_bus_id():
    # Constructed: two PCIe cards joined by a bridge, as NVML describes them (remote type GPU).
    def ports(peer: str, active: int) -> list[NvLinkPort]:
        return [NvLinkPort(link=k, active=k < active, remote="gpu", remote_pci_bus_id=peer) for k in range(12)]

    a = GpuProbe(index=0, name="a", pci_bus_id="00000000:AD:00.0", nvlink=ports("00000000:CE:00.0", 12))
    b = GpuProbe(index=1, name="b", pci_bus_id="0000:ce:00.0", nvlink=ports("00000000:AD:00.0", 11))
    assert nvlink_between(a, b) == (12, "direct")
    assert nvlink_between(b, GpuProbe(index=2, name="c", pci_bus_id="0000:01:00.0")) == (0, None)


# --- the real backend's wiring, against a pynvml stub -----------------------------------------

class _Obj(types.SimpleNamespace):
    pass


def _eighteen_links(handle, link):
    if link >= 18:  # what NVML answers past the last link
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return pynvml.NVML_FEATURE_ENABLED


def _stub_pynvml(calls: list[str]) -> types.ModuleType:
    """A module with pynvml's constants and error classes, answering one H100-like device."""
    stub = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith("NVML_") or name.startswith("NVMLError") or name == "nvmlMemory_v2":
            setattr(stub, name, getattr(pynvml, name))

    def answer(name, value):
        def fn(*args):
            calls.append(name)
            if isinstance(value, Exception):
                raise value
            return value(*args) if callable(value) else value
        setattr(stub, name, fn)

    not_supported = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    for name, value in {
        "nvmlInit": None, "nvmlShutdown": None, "nvmlSystemGetDriverVersion": "565.57.01",
        "nvmlSystemGetCudaDriverVersion": 12070, "nvmlDeviceGetCount": 2,
        "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
        "nvmlDeviceGetName": "NVIDIA H100 80GB HBM3", "nvmlDeviceGetUUID": b"GPU-1",
        "nvmlDeviceGetPciInfo": lambda h: _Obj(busId=b"00000000:18:00.0" if h == "h0" else "0000:2A:00.0"),
        "nvmlDeviceGetMemoryInfo": lambda h, v=None: _Obj(total=81559 * MIB, free=81106 * MIB, used=MIB),
        "nvmlDeviceGetMemoryBusWidth": 5120,
        "nvmlDeviceGetClockInfo": lambda h, c: 345 if c == pynvml.NVML_CLOCK_SM else 2619,
        "nvmlDeviceGetMaxClockInfo": lambda h, c: 1980 if c == pynvml.NVML_CLOCK_SM else 2619,
        "nvmlDeviceGetCudaComputeCapability": (9, 0), "nvmlDeviceGetNumGpuCores": 16896,
        "nvmlDeviceGetPowerUsage": 100890, "nvmlDeviceGetEnforcedPowerLimit": 700000,
        "nvmlDeviceGetPowerManagementDefaultLimit": 700000,
        "nvmlDeviceGetCurrPcieLinkGeneration": 5, "nvmlDeviceGetMaxPcieLinkGeneration": 5,
        "nvmlDeviceGetCurrPcieLinkWidth": 16, "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetMigMode": (pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_DISABLE),
        "nvmlDeviceGetEccMode": not_supported,
        "nvmlDeviceGetNvLinkState": _eighteen_links,
        "nvmlDeviceGetNvLinkRemoteDeviceType": pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH,
        "nvmlDeviceGetNvLinkRemotePciInfo": lambda h, link: _Obj(busId="00000000:05:00.0"),
        "nvmlDeviceGetTopologyCommonAncestor": pynvml.NVML_TOPOLOGY_SYSTEM,
        "nvmlDeviceGetP2PStatus": pynvml.NVML_P2P_STATUS_OK,
        "nvmlDeviceGetComputeRunningProcesses": [_Obj(pid=4242, usedGpuMemory=2 * GIB)],
        "nvmlDeviceGetGraphicsRunningProcesses": [],
        "nvmlSystemGetProcessName": pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND),
    }.items():
        answer(name, value)
    return stub


def test_pynvml_backend_calls_real_functions_and_converts_units(monkeypatch):
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", _stub_pynvml(calls))
    report = probe_gpus(PynvmlBackend())
    assert all(hasattr(pynvml, name) for name in set(calls)), "a call nvidia-ml-py does not have"
    gpu = report.devices[0]
    assert (report.driver_version, report.cuda_driver_version) == ("565.57.01", "12.7")
    assert gpu.uuid == "GPU-1" and gpu.pci_bus_id == "00000000:18:00.0"
    assert gpu.catalog_match == "h100_sxm5_80gb" and gpu.sm_count == 132
    assert gpu.power_draw_w == pytest.approx(100.89) and gpu.memory_clock_max_hz == 2619_000_000
    assert gpu.ecc_enabled is None and "ECC mode: not supported by this GPU or driver" in gpu.notes
    assert gpu.active_nvlinks == 18 and gpu.nvlink[0].remote == "switch"
    assert gpu.processes[0].pid == 4242 and gpu.processes[0].name is None
    assert report.pairs[0].pcie_path is TopologyLevel.SYSTEM and report.pairs[0].nvlink_links == 18
    assert calls[-1] == "nvmlShutdown"


def test_pynvml_errors_map_to_kinds():
    backend = PynvmlBackend()
    stub = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR") or name == "NVMLError":
            setattr(stub, name, getattr(pynvml, name))
    for code, kind in [(pynvml.NVML_ERROR_NOT_SUPPORTED, "not_supported"),
                       (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "not_supported"),
                       (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission"),
                       (pynvml.NVML_ERROR_INVALID_ARGUMENT, "invalid_argument"),
                       (pynvml.NVML_ERROR_GPU_IS_LOST, "other")]:
        def fails(*_, code=code):
            raise pynvml.NVMLError(code)
        stub.nvmlDeviceGetNumGpuCores = fails
        backend._nvml = stub
        with pytest.raises(NvmlError) as info:
            backend._call("nvmlDeviceGetNumGpuCores", "h")
        assert info.value.kind == kind
    with pytest.raises(NvmlError) as info:
        backend._call("nvmlDeviceGetSomethingFromTheFuture")
    assert info.value.kind == "not_supported"


def test_benchmark_gpu_sampler_sums_memory_and_averages_utilization():
    """The sampler the load generator runs beside a measured phase, on a recorded 8x H100
    dump with utilization added per device (NVML's nvmlDeviceGetUtilizationRates)."""
    import copy
    import json

    from infopt.loadgen.monitor import GpuSampler
    from tests.fake_nvml import FIXTURES, MIB, RecordedBackend

    data = json.loads((FIXTURES / "h100_sxm_8x.json").read_text())
    for i, d in enumerate(data["devices"]):
        d["utilization_gpu_percent"] = 10 * i
    sampler = GpuSampler(RecordedBackend(copy.deepcopy(data)))
    sampler.open()
    util, used = sampler.sample()
    assert sampler.count == 8 and util == sum(10 * i for i in range(8)) / 8
    assert used == sum(d["memory_used_mib"] for d in data["devices"]) * MIB
    # A device without the field (MIG instances do not report it): memory only.
    del data["devices"][3]["utilization_gpu_percent"]
    s2 = GpuSampler(RecordedBackend(data))
    s2.open()
    assert s2.sample()[0] is None
    # No driver: no samples, nothing invented.
    none = GpuSampler(RecordedBackend(data, unavailable="no driver"))
    none.open()
    assert none.sample() is None
