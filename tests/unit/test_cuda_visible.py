"""Issue 46, item 6: the fit budgets a GPU from the total the engines size against (CUDA's,
cudaMemGetInfo), not NVML's larger one; measured where the driver library answers, else an
observed total from a public log, else an estimate that says so."""

from __future__ import annotations

import ctypes

from infopt.costmodel.device import device_from_catalog
from infopt.hardware.catalog import lookup_gpu
from infopt.hardware.cuda_visible import (
    OBSERVED,
    RESERVE_FRACTION_ESTIMATE,
    CudaUnavailable,
    engine_visible_memory,
    probe_cuda_totals,
)
from infopt.hardware.nvml import probe_gpus
from tests.fake_nvml import RecordedBackend
from tests.fixture_data import FIXTURES

GIB, MIB = 2**30, 2**20


def test_an_h100_is_budgeted_at_the_total_torch_reports_not_nvmls():
    dev = device_from_catalog(lookup_gpu("H100 SXM"))
    # NVML: 81,559 MiB = 79.65 GiB; torch on H100 80GB hosts: "total capacity of 79.11 GiB".
    assert dev.memory_bytes <= 79.11 * GIB < 81559 * MIB
    assert "79.11 GiB" in dev.source and "vllm-project/vllm#27508" in dev.source


def test_a_measured_total_wins_and_an_unobserved_gpu_gets_a_labelled_estimate():
    measured = engine_visible_memory(81559 * MIB, "h100_sxm5_80gb", int(79.2 * GIB))
    assert measured.bytes == int(79.2 * GIB) and "measured here" in measured.source
    est = engine_visible_memory(46068 * MIB, "l40s")
    assert est.bytes == int(46068 * MIB * (1 - RESERVE_FRACTION_ESTIMATE))
    assert "estimate" in est.source
    # The estimate keeps back at least what every observed GPU kept back.
    for o in OBSERVED.values():
        assert RESERVE_FRACTION_ESTIMATE >= 1 - o.total_gib * GIB / (o.nvml_total_mib * MIB)


def test_the_measured_total_reaches_the_budget_through_the_probe():
    totals = {"0000:18:00.0": int(79.19 * GIB)}  # CUDA's spelling of NVML's 00000000:18:00.0
    report = probe_gpus(RecordedBackend.from_json(FIXTURES / "nvml" / "h100_sxm_8x.json"),
                        cuda_totals=lambda: totals)
    by_bus = {d.pci_bus_id: d.cuda_memory_total_bytes for d in report.devices}
    assert by_bus["00000000:18:00.0"] == int(79.19 * GIB)
    assert sum(v is None for v in by_bus.values()) == len(by_bus) - 1


def test_no_driver_library_leaves_a_note_not_an_error():
    def missing() -> dict[str, int]:
        raise CudaUnavailable("no CUDA driver library")
    report = probe_gpus(RecordedBackend.from_json(FIXTURES / "nvml" / "h100_sxm_8x.json"),
                        cuda_totals=missing)
    assert all(d.cuda_memory_total_bytes is None for d in report.devices)
    assert any("CUDA-visible memory not measured" in n for n in report.notes)


class _FakeDriver:
    """The five driver calls, answering through ctypes' byref objects as libcuda would."""

    def __init__(self, totals: list[tuple[str, int]]) -> None:
        self.totals, self.current, self.released = totals, None, []

    def cuInit(self, flags):  # noqa: N802 (the driver API's names)
        return 0

    def cuDeviceGetCount(self, ref):  # noqa: N802
        ref._obj.value = len(self.totals)
        return 0

    def cuDeviceGet(self, ref, i):  # noqa: N802
        ref._obj.value = i
        return 0

    def cuDeviceGetPCIBusId(self, buf, n, dev):  # noqa: N802
        buf.value = self.totals[dev.value][0].encode()
        return 0

    def cuDevicePrimaryCtxRetain(self, ref, dev):  # noqa: N802
        ref._obj.value = 1000 + dev.value
        return 0

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        self.current = ctx.value - 1000
        return 0

    def cuMemGetInfo_v2(self, free, total):  # noqa: N802
        free._obj.value, total._obj.value = 1, self.totals[self.current][1]
        return 0

    def cuDevicePrimaryCtxRelease(self, dev):  # noqa: N802
        self.released.append(dev.value)
        return 0


def test_the_driver_probe_reads_each_devices_total_and_releases_its_context():
    lib = _FakeDriver([("0000:18:00.0", 84_942_979_072), ("0000:2A:00.0", 84_942_979_072)])
    out = probe_cuda_totals(lib)  # type: ignore[arg-type]
    assert out == {"0000:18:00.0": 84_942_979_072, "0000:2A:00.0": 84_942_979_072}
    assert lib.released == [0, 1]


def test_a_driver_error_is_cuda_unavailable():
    class NoDevice(_FakeDriver):
        def cuInit(self, flags):  # noqa: N802
            return 100  # CUDA_ERROR_NO_DEVICE
    try:
        probe_cuda_totals(NoDevice([]))  # type: ignore[arg-type]
    except CudaUnavailable as exc:
        assert "cuInit" in str(exc)
    else:
        raise AssertionError("a failing cuInit must raise CudaUnavailable")
    assert ctypes  # the probe's types are ctypes'
