"""The sourced GPU catalog: row arithmetic and units, coverage, and name matching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infopt.hardware.catalog import (
    CATALOG_PATH,
    MatchStatus,
    load_catalog,
    lookup_gpu,
    match_gpu,
    normalize_gpu_name,
    parse_catalog,
    resolve_gpu,
)
from infopt.specs.base import InputError
from infopt.specs.gpu import SourceTier

MIB = 1 << 20
GIB = 1 << 30
FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvml"

REQUIRED = ["a100_sxm4_40gb", "a100_pcie_40gb", "a100_sxm4_80gb", "a100_pcie_80gb", "h100_sxm5_80gb",
            "h100_pcie_80gb", "h100_nvl_94gb", "h200_sxm_141gb", "h20_96gb", "l4", "l40s", "a10", "a10g",
            "rtx_4090", "rtx_3090", "rtx_6000_ada", "b200", "gb200", "rtx_5090", "t4", "v100_sxm2_16gb"]


# --- rows: units, arithmetic, provenance ----------------------------------------------------------

def test_catalog_covers_the_required_gpus_with_unique_keys():
    keys = [spec.key for spec in load_catalog()]
    assert len(keys) == len(set(keys))
    assert set(REQUIRED) <= set(keys)


@pytest.mark.parametrize("spec", load_catalog(), ids=lambda s: s.key)
def test_row_units_and_provenance(spec):
    assert spec.source and spec.source_tier in SourceTier
    # vendor "GB" of capacity is binary: memory_bytes is that many GiB ...
    assert spec.memory_bytes == spec.memory_gib_nominal * GIB
    # ... and what NVML reported on a real device sits 0-8 % under it (ECC, firmware reserve)
    if spec.nvml_memory_total_mib:
        assert 0.92 <= spec.nvml_memory_total_mib * MIB / spec.memory_bytes <= 1.0
    # bandwidth is decimal bytes/s, not TB/s or GiB/s: 100 GB/s .. 10 TB/s
    assert 1e11 <= spec.bandwidth_bytes_per_s <= 1e13
    # dense rates are per second and ordered as the hardware doubles them per narrower type
    rates = [spec.dense_bf16_flops_per_s or spec.dense_fp16_flops_per_s, spec.dense_fp8_flops_per_s,
             spec.dense_fp4_flops_per_s]
    present = [r for r in rates if r]
    assert all(1e13 <= r <= 2e16 for r in present)
    assert present == sorted(present)
    if spec.dense_fp16_flops_per_s and spec.dense_bf16_flops_per_s:
        assert spec.dense_fp16_flops_per_s == spec.dense_bf16_flops_per_s  # both FP32-accumulate
    if spec.sm_count:
        assert 20 <= spec.sm_count <= 200


def test_dense_not_sparse_rates_for_datasheet_headlines():
    # Datasheets quote "with sparsity": H100 SXM 1,979 BF16, L4 242 BF16, B200 4.5 PF BF16
    assert lookup_gpu("h100_sxm5_80gb").dense_bf16_flops_per_s == pytest.approx(1979e12 / 2)
    assert lookup_gpu("l4").dense_bf16_flops_per_s == pytest.approx(242e12 / 2)
    assert lookup_gpu("b200").dense_bf16_flops_per_s == pytest.approx(4.5e15 / 2)


def test_gaps_are_explicit_not_invented():
    assert lookup_gpu("t4").dense_bf16_flops_per_s is None  # Turing has no BF16
    assert lookup_gpu("a100_sxm4_80gb").dense_fp8_flops_per_s is None  # Ampere has no FP8
    a10g = lookup_gpu("a10g")
    assert a10g.dense_bf16_flops_per_s is None and a10g.source_tier is SourceTier.SECONDARY
    # GeForce FP32-accumulate runs at half the FP16-accumulate rate (Ada whitepaper figures)
    assert lookup_gpu("rtx_4090").dense_bf16_flops_per_s == pytest.approx(165.2e12)


def test_parse_catalog_handles_empty_cells_and_aliases():
    header = CATALOG_PATH.read_text().splitlines()[0]
    row = ("x1,X One,x1,Arch,pcie,8.0,GDDR6,16,17179869184,,,1e11,,,,,,,PCIe,,,A|B,src,secondary,")
    (spec,) = parse_catalog(header + "\n" + row + "\n")
    assert spec.aliases == ["A", "B"] and spec.sm_count is None and spec.dense_fp8_flops_per_s is None


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_recorded_memory_totals_agree_with_catalog(fixture):
    recorded = json.loads(fixture.read_text())
    for device in recorded["devices"]:
        if "memory_total_mib" not in device:  # a host whose memory the source does not give
            assert any("memory" in k for k in recorded.get("not_recorded", [])), fixture
            continue
        spec = match_gpu(device["name"], device["memory_total_mib"] * MIB)
        assert spec is not None, device["name"]
        assert spec.nvml_memory_total_mib == device["memory_total_mib"]


# --- name matching ------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H100 80GB HBM3", "h100_sxm5_80gb"),  # the SXM5 part's NVML name
    ("NVIDIA H100 PCIe", "h100_pcie_80gb"),
    ("NVIDIA H100 NVL", "h100_nvl_94gb"),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
    ("NVIDIA A100-SXM-80GB", "a100_sxm4_80gb"),
    ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100_pcie_40gb"),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb"),
    ("NVIDIA GeForce RTX 4090", "rtx_4090"),
    ("NVIDIA GeForce RTX 3090", "rtx_3090"),
    ("NVIDIA GeForce RTX 5090", "rtx_5090"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx_6000_ada"),
    ("Tesla T4", "t4"),
    ("Tesla V100-SXM2-16GB", "v100_sxm2_16gb"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA A10G", "a10g"),
    ("NVIDIA H200", "h200_sxm_141gb"),
    ("NVIDIA H20", "h20_96gb"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    # common aliases
    ("H100 SXM", "h100_sxm5_80gb"),
    ("H100-SXM5-80GB", "h100_sxm5_80gb"),
    ("h100 sxm5 80 GB", "h100_sxm5_80gb"),
    ("H100 80GB PCIe", "h100_pcie_80gb"),
    ("rtx4090", "rtx_4090"),
    ("RTX 4090", "rtx_4090"),
    ("l40s", "l40s"),
])
def test_nvml_names_and_aliases(name, key):
    spec = match_gpu(name)
    assert (spec.key if spec else None) == key


def test_every_key_name_and_alias_resolves_to_its_row():
    for spec in load_catalog():
        for text in [spec.key, spec.name, *spec.aliases]:
            assert resolve_gpu(text).spec == spec, text


@pytest.mark.parametrize(("name", "candidates"), [
    ("h100", {"h100_sxm5_80gb", "h100_pcie_80gb", "h100_nvl_94gb"}),
    ("A100 80GB", {"a100_sxm4_80gb", "a100_pcie_80gb"}),
    ("A100", {"a100_sxm4_80gb", "a100_pcie_80gb", "a100_sxm4_40gb", "a100_pcie_40gb"}),
    ("NVIDIA A100", {"a100_sxm4_80gb", "a100_pcie_80gb", "a100_sxm4_40gb", "a100_pcie_40gb"}),
    ("V100", {"v100_sxm2_16gb", "v100_sxm2_32gb"}),
])
def test_ambiguous_names_are_reported_not_guessed(name, candidates):
    match = resolve_gpu(name)
    assert match.status is MatchStatus.AMBIGUOUS and match.spec is None
    assert set(match.candidates) == candidates
    assert match_gpu(name) is None


def test_memory_hint_narrows_an_ambiguous_name():
    assert resolve_gpu("A100", memory_bytes=40960 * MIB).candidates == ["a100_sxm4_40gb", "a100_pcie_40gb"]
    assert match_gpu("h100", memory_bytes=95830 * MIB).key == "h100_nvl_94gb"
    assert match_gpu("V100", memory_bytes=16384 * MIB).key == "v100_sxm2_16gb"
    # NVML's total (81559 MiB) is 0.4 GiB under the nominal 80 GiB and still fits
    assert match_gpu("NVIDIA H100 80GB HBM3", memory_bytes=81559 * MIB).key == "h100_sxm5_80gb"


def test_memory_hint_vetoes_an_unknown_variant_of_a_known_family():
    match = resolve_gpu("NVIDIA H20", memory_bytes=143771 * MIB)  # the 141 GB H20 is not catalogued
    assert match.status is MatchStatus.UNKNOWN and match.spec is None
    assert match.reason == "no catalog row for h20 with 140.4 GiB"


@pytest.mark.parametrize("name", [
    "NVIDIA GeForce RTX 4090 D",  # cut-down 4090 for China: fewer SMs
    "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA H20-3e",
    "NVIDIA H800",
    "NVIDIA L40",
    "Quadro RTX 6000",  # Turing, not the Ada RTX 6000
    "NVIDIA RTX A6000",
    "NVIDIA GH200 480GB",
    "NVIDIA H200 NVL",  # only the SXM H200 is catalogued
    "AMD Instinct MI300X",
    "",
])
def test_unknown_devices_are_not_matched(name):
    assert resolve_gpu(name).status is MatchStatus.UNKNOWN


def test_normalization():
    assert normalize_gpu_name("NVIDIA A100-SXM4-80GB") == "nvidia a100 sxm4 80gb"
    assert normalize_gpu_name("h100 PCI-E 80 GB") == "h100 pcie 80gb"
    assert normalize_gpu_name("RTX4090") == "rtx 4090"


def test_lookup_gpu_errors_say_what_to_do():
    with pytest.raises(InputError, match=r"Unknown GPU 'NVIDIA H800'.*Known GPUs: .*H100 SXM5 80GB"):
        lookup_gpu("NVIDIA H800")
    with pytest.raises(InputError, match=r"ambiguous.*'A100 SXM4 80GB', 'A100 PCIe 80GB'.*SXM, PCIe"):
        lookup_gpu("A100 80GB")
    assert lookup_gpu("H100 SXM").key == "h100_sxm5_80gb"
