"""PCIe-only hosts recorded from public dumps (tests/fixtures/nvml/l40s_1x.json and
a100_pcie_8x.json, each citing its upstream URLs), read through the real NVML probe: the GPU
catalog row matched, memory as NVML reports it, no NVLink assumed anywhere, and the link figure
the layout ceilings would use. What a recording lacks must come back as None plus a note, never
as a guessed value."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.device import device_from_catalog
from infopt.costmodel.interconnect import link_from_topology
from infopt.hardware.catalog import match_gpu
from infopt.hardware.nvml import normalize_bus_id, probe_gpus
from infopt.report.hardware_text import render_hardware
from tests.fake_nvml import FIXTURES, MIB, RecordedBackend, first_devices, load, recorded_inventory

NEW_FIXTURES = ("l40s_1x", "a100_pcie_8x")


def _probe(name: str):
    return probe_gpus(RecordedBackend.from_json(FIXTURES / f"{name}.json"))


# --- the recordings themselves ------------------------------------------------------------------

@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_not_recorded_fields_are_absent_and_recorded_ones_present(name):
    # A field listed as not recorded must be missing (the loader then answers "not recorded"),
    # and nothing missing may go unlisted: the list is the honest inventory of the gaps.
    data = load(name)
    gaps = set(data["not_recorded"])
    per_device = {"uuid", "memory_total_mib", "memory_used_mib", "memory_free_mib",
                  "memory_bus_width_bits", "clocks_mhz", "max_clocks_mhz", "cuda_compute_capability",
                  "num_gpu_cores", "power_draw_w", "power_limit_w", "power_default_limit_w", "pcie",
                  "mig_mode", "ecc_mode", "processes", "nvlink"}
    for device in data["devices"]:
        assert not gaps & device.keys()
        assert per_device - device.keys() <= gaps
    if len(data["devices"]) > 1:  # pairs exist: their topology and peer access are recorded or listed
        assert {"topology", "p2p"} - data.keys() <= gaps
    assert all(s["url"].startswith("https://github.com/") and s["what"] for s in data["sources"])


def test_the_pcie_hosts_record_no_nvlink_links():
    # PCIe-only boxes: the L40S has no NVLink (NVML NotSupported, recorded as null); the 8x A100
    # PCIe host's NVLink state is not on record at all. Neither carries an active link.
    assert load("l40s_1x")["devices"][0]["nvlink"] is None
    assert all("nvlink" not in d for d in load("a100_pcie_8x")["devices"])
    assert "nvlink" in load("a100_pcie_8x")["not_recorded"]


# --- 1x L40S: thamada/gls L40S_smi.py + L40S_deviceQuery.py -------------------------------------

def test_l40s_probe_reads_the_recorded_device():
    report = _probe("l40s_1x")
    assert report.driver_version == "550.127.05" and report.cuda_driver_version == "12.4"
    assert len(report.devices) == 1 and "1 NVIDIA GPU(s)" in report.reason
    gpu = report.devices[0]
    assert gpu.name == "NVIDIA L40S" and gpu.catalog_match == "l40s"
    assert gpu.uuid == "GPU-1db6b1cf-de5e-b497-caca-1a027578d587"
    assert normalize_bus_id(gpu.pci_bus_id) == "0000:a1:00.0"
    # NVML's own figures (bytes): 46068 MiB total, 1 MiB used, 45589 MiB free (479 MiB reserved)
    assert gpu.memory_total_bytes == 46068 * MIB == 48_305_799_168
    assert gpu.memory_used_bytes == 1 * MIB and gpu.memory_free_bytes == 45589 * MIB
    assert gpu.compute_capability == "8.9" and gpu.cuda_cores == 18176 and gpu.sm_count == 142
    # 384-bit GDDR6 at NVML's 9001 MHz max memory clock: 384/8 x 9001e6 x 2 = 864.1 GB/s, within
    # the catalog's 864 GB/s, so no bandwidth-disagreement note
    assert gpu.memory_bus_width_bits == 384 and gpu.memory_clock_max_hz == 9001_000_000
    assert gpu.theoretical_bandwidth_bytes_per_s == pytest.approx(864.096e9)
    assert gpu.sm_clock_max_hz == 2520_000_000 and gpu.sm_clock_hz == 210_000_000  # idle
    assert gpu.power_draw_w == pytest.approx(33.44)
    assert gpu.power_limit_w == gpu.power_default_limit_w == 350
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max, gpu.pcie.width_current, gpu.pcie.width_max) \
        == (1, 4, 16, 16)  # idle link at gen 1: capacity is read from gen_max, no note
    assert gpu.ecc_enabled is True and gpu.processes == [] and not gpu.shared
    # No NVLink on an L40S: NVML NotSupported at link 0 means "none", without a note
    assert gpu.nvlink is None and gpu.active_nvlinks == 0
    # MIG is N/A on the L40S: None plus the one note this device gets
    assert gpu.mig_enabled is None
    assert gpu.notes == ["MIG mode: not supported by this GPU or driver"]
    assert report.pairs == [] and report.notes == []


def test_l40s_inventory_sizes_from_nvml_and_uses_no_interconnect():
    hw = recorded_inventory("l40s_1x")
    assert hw.accelerator == "nvidia" and len(hw.gpus) == 1 and hw.gpu_pairs == []
    gpu = hw.gpus[0]
    spec = match_gpu(gpu.name, gpu.memory_total_bytes)
    assert spec is not None and spec.key == "l40s" and spec.form_factor == "pcie"
    assert spec.nvlink_bytes_per_s_per_direction is None
    dev = device_from_catalog(spec)
    # The catalog's NVML size is the recorded one; the budget is CUDA's total, estimated a
    # little under it (nobody has recorded an L40S's CUDA total), and says so.
    assert spec.nvml_memory_total_mib * 2**20 == gpu.memory_total_bytes
    assert 0.98 * gpu.memory_total_bytes < dev.memory_bytes < gpu.memory_total_bytes
    assert "estimate" in dev.source
    assert dev.interconnect_bytes_per_s is None
    bw, source = link_from_topology(hw.gpus, hw.gpu_pairs, spec.nvlink_bytes_per_s_per_direction)
    assert bw is None and source == "one GPU: no collective"
    text = render_hardware(hw)
    assert "GPU 0: NVIDIA L40S [l40s], 45.0 GiB, CC 8.9, 0.86 TB/s from clocks" in text
    assert "<->" not in text and "NVLink" not in text


# --- 8x A100 80GB PCIe: NVIDIA/nccl#841 device list, driver from ggml-org/llama.cpp#4747 -------

BUS_IDS = ["0000:01:00.0", "0000:23:00.0", "0000:41:00.0", "0000:61:00.0", "0000:81:00.0",
           "0000:a1:00.0", "0000:c1:00.0", "0000:e1:00.0"]


def test_a100_pcie_probe_matches_the_pcie_row_by_name_and_invents_nothing():
    report = _probe("a100_pcie_8x")
    assert report.driver_version == "535.129.03" and report.cuda_driver_version == "12.2"
    assert len(report.devices) == 8 and "8 NVIDIA GPU(s)" in report.reason
    assert [normalize_bus_id(d.pci_bus_id) for d in report.devices] == BUS_IDS
    for gpu in report.devices:
        assert gpu.name == "NVIDIA A100 80GB PCIe"
        # the exact NVML name is an alias of the PCIe row: no SXM4 row, no ambiguity note
        assert gpu.catalog_match == "a100_pcie_80gb"
        assert not any(n.startswith("catalog:") for n in gpu.notes)
        # nothing but names and bus ids is on record: None plus a note for every other field
        assert gpu.memory_total_bytes is None and "memory: not recorded" in gpu.notes
        assert gpu.uuid is None and "UUID: not recorded" in gpu.notes
        assert gpu.pcie is None and "PCIe gen max: not recorded" in gpu.notes
        assert gpu.theoretical_bandwidth_bytes_per_s is None and gpu.sm_count is None
        assert gpu.power_limit_w is None and gpu.mig_enabled is None and gpu.ecc_enabled is None
        assert gpu.processes is None
        # NVLink state unknown: no ports, no active links, and it says so
        assert gpu.nvlink is None and gpu.active_nvlinks == 0
        assert "nvlink link 0: not recorded" in gpu.notes


def test_a100_pcie_pairs_are_not_nvlink_and_the_path_is_reported_unknown():
    report = _probe("a100_pcie_8x")
    assert len(report.pairs) == 28
    assert {(p.nvlink_links, p.nvlink_via, p.pcie_path, p.p2p_supported) for p in report.pairs} \
        == {(0, None, None, None)}
    # no topo -m on record: every pair's PCIe path is reported unknown rather than guessed
    assert len(report.notes) == 28
    assert all(n.endswith("PCIe path: not recorded") for n in report.notes)


def test_a100_pcie_link_for_layouts_is_never_nvlink():
    hw = recorded_inventory("a100_pcie_8x")
    assert len(hw.gpus) == 8 and len(hw.gpu_pairs) == 28
    spec = match_gpu(hw.gpus[0].name, hw.gpus[0].memory_total_bytes)
    assert spec is not None and spec.key == "a100_pcie_80gb" and spec.form_factor == "pcie"
    # the PCIe row carries no NVLink figure, so neither the catalog nor the topology yields one
    assert spec.nvlink_bytes_per_s_per_direction is None
    assert device_from_catalog(spec).interconnect_bytes_per_s is None
    bw, source = link_from_topology(hw.gpus, hw.gpu_pairs, spec.nvlink_bytes_per_s_per_direction)
    # without the PCIe generation/width on record there is no figure at all (not NVLink's)
    assert bw is None
    assert source.startswith("no NVLink on every pair and no PCIe generation/width recorded")
    # even handed an NVLink figure, PCIe-only pairs (0 links) never take it
    bw, source = link_from_topology(hw.gpus, hw.gpu_pairs, 300e9)
    assert bw is None and "NVLink" in source and "NVSwitch" not in source
    text = render_hardware(hw)
    assert "GPU 0: NVIDIA A100 80GB PCIe [a100_pcie_80gb]" in text
    assert "GPU0<->GPU1: PCIe path not recorded, NVLink x0" in text


def test_a100_pcie_visible_subset_keeps_its_pairs_pcie():
    sub = probe_gpus(RecordedBackend(first_devices(load("a100_pcie_8x"), 2)))
    assert [normalize_bus_id(d.pci_bus_id) for d in sub.devices] == BUS_IDS[:2]
    assert [(p.a, p.b, p.nvlink_links) for p in sub.pairs] == [(0, 1, 0)]


def test_fixture_json_is_what_the_loader_reads():
    # both recordings load through the same loader the existing fixtures use
    for name in NEW_FIXTURES:
        data = json.loads((FIXTURES / f"{name}.json").read_text())
        assert data["fixture"] == name and data["devices"] and data["driver_version"]
        assert [d["index"] for d in data["devices"]] == list(range(len(data["devices"])))
