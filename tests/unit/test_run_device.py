"""The device a run's engines are sized for (infopt.tuning.candidates.run_device) on a recorded
8x H100 host (tests/fixtures/nvml): a catalogued GPU is its catalog row; a GPU the catalog lacks
is what NVML reports of it, never the host's RAM and CPU bandwidth; one NVML gives no memory
for cannot be sized, and the error says what to add."""

from __future__ import annotations

import pytest

from infopt.specs.base import InputError
from infopt.tuning.candidates import run_device
from tests.fake_nvml import recorded_inventory

MIB = 2**20


def _with_first_gpu(**update):
    inv = recorded_inventory("h100_sxm_8x")
    gpus = [inv.gpus[0].model_copy(update=update), *inv.gpus[1:]]
    return inv.model_copy(update={"gpus": gpus})


def test_a_catalogued_gpu_is_sized_from_its_catalog_row():
    device, is_cpu = run_device(recorded_inventory("h100_sxm_8x"))
    assert not is_cpu and device.name == "H100 SXM5 80GB"
    assert device.source.startswith("catalog row") and device.dense_flops_per_s


def test_an_uncatalogued_gpu_is_sized_from_what_nvml_reports_not_from_the_host():
    # An A40 (not in the catalog): 46,068 MiB as NVML reports it, a 384-bit bus at 7,251 MHz.
    hw = _with_first_gpu(name="NVIDIA A40", memory_total_bytes=46068 * MIB, catalog_match=None,
                         theoretical_bandwidth_bytes_per_s=384 / 8 * 7251e6 * 2)
    device, is_cpu = run_device(hw)
    assert not is_cpu
    # CUDA's total, estimated under NVML's 46,068 MiB (no CUDA total was measured here).
    assert 0.98 * 46068 * MIB < device.memory_bytes < 46068 * MIB
    assert device.memory_bytes != hw.host.ram_total_bytes and "estimate" in device.source
    assert device.bandwidth_bytes_per_s == pytest.approx(696.1e9, rel=1e-3)
    assert device.dense_flops_per_s == {} and device.cpu_isa_features is None
    assert "not in infopt's GPU table" in device.name and "NVML" in device.source
    assert "no compute peak" in device.source


def test_an_uncatalogued_gpu_without_a_memory_size_is_refused_saying_what_to_add():
    hw = _with_first_gpu(name="NVIDIA A40", memory_total_bytes=None, catalog_match=None)
    with pytest.raises(InputError, match="add its row") as err:
        run_device(hw)
    assert "'NVIDIA A40'" in str(err.value) and "gpu_catalog.csv" in str(err.value)
