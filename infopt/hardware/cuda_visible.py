"""The memory an engine sizes against: CUDA's total, not NVML's (issue 46, item 6).

vLLM (`vllm/utils/mem_utils.py` MemorySnapshot: `torch.cuda.mem_get_info()`) and SGLang
(`sglang/srt/utils.py` get_available_gpu_memory / get_device_memory_capacity:
`torch.cuda.mem_get_info`) take a device's total from cudaMemGetInfo, which leaves out what the
driver keeps for itself; NVML's (nvidia-smi's) total includes it. On an H100 80GB NVML says
81,559 MiB (79.65 GiB) while torch's out-of-memory message says "GPU 0 has a total capacity of
79.11 GiB": budgeting from NVML's figure is 0.5 GiB per GPU optimistic, and a borderline fit
predicted to fit meets vLLM's "To serve at least one request ..." at start.

Three sources, best first, each named in the budget's source line:
1. measured here: cuMemGetInfo through the driver library (`probe_cuda_totals`), per device;
2. observed: the total torch printed on a recorded device of that catalog row (a public log);
3. estimated: NVML's total less the largest share any observed row kept back (labelled).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class Observed:
    total_gib: float  # torch's "total capacity of X GiB" (cudaMemGetInfo's total, 2 decimals)
    nvml_total_mib: int  # nvidia-smi's total on the same kind of device
    source: str


# Public logs that print torch's total for a known device. Where several drivers gave several
# totals the lowest is kept (the fit must hold on all of them).
OBSERVED: dict[str, Observed] = {
    "h100_sxm5_80gb": Observed(79.11, 81559, (
        "vllm-project/vllm#27508 and #12756 (H100 80GB: \"GPU 0 has a total capacity of "
        "79.11 GiB\"); 79.19 GiB also seen on other drivers, the lowest kept")),
    "h100_pcie_80gb": Observed(79.11, 81559, (
        "as the H100 SXM row (same 81,559 MiB under NVML): vllm-project/vllm#27508, #12756")),
    "rtx_4090": Observed(23.68, 24564, (
        "zai-org/CogVideo#36 (RTX 4090: \"23.68 GiB total capacity\")")),
}

# The estimate for a row nobody observed: the largest fraction an observed row kept back
# (RTX 4090: 1 - 23.68 GiB / 24,564 MiB = 1.3%; H100: 0.7%). Pessimistic for big HBM parts,
# which is the safe side for a fit; a measured total replaces it.
RESERVE_FRACTION_ESTIMATE = max(1 - o.total_gib * GIB / (o.nvml_total_mib * MIB)
                                for o in OBSERVED.values())


@dataclass(frozen=True)
class VisibleMemory:
    bytes: int
    source: str


def engine_visible_memory(nvml_total_bytes: int, catalog_key: str | None = None,
                          measured_bytes: int | None = None) -> VisibleMemory:
    """The total an engine sizes against for one GPU whose NVML total is `nvml_total_bytes`."""
    if measured_bytes:
        return VisibleMemory(measured_bytes, "measured here (cuMemGetInfo's total, what "
                             "torch.cuda.mem_get_info reports)")
    seen = OBSERVED.get(catalog_key or "")
    if seen is not None:
        return VisibleMemory(int(seen.total_gib * GIB), f"CUDA-visible total observed on this "
                             f"GPU: {seen.total_gib:.2f} GiB ({seen.source})")
    reserve = RESERVE_FRACTION_ESTIMATE
    return VisibleMemory(int(nvml_total_bytes * (1 - reserve)), (
        f"CUDA-visible total estimated as NVML's less {reserve:.1%} (the largest share an "
        "observed GPU kept back; estimate)"))


# -- measuring it: the CUDA driver API, no torch needed ------------------------------------------

class CudaUnavailable(Exception):
    pass


def _driver() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaUnavailable(f"no CUDA driver library ({exc})") from exc


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CudaUnavailable(f"{what} returned CUresult {status}")


def probe_cuda_totals(lib: ctypes.CDLL | None = None) -> dict[str, int]:
    """cuMemGetInfo's total per device, keyed by CUDA's PCI bus id ("0000:17:00.0"),
    through each device's primary context (released afterwards: the context costs a few hundred
    MiB while it lives). CUDA numbers devices fastest-first, NVML by bus, hence the bus-id key.
    Raises CudaUnavailable where there is no driver or no device."""
    lib = lib or _driver()
    _check(lib.cuInit(0), "cuInit")
    count = ctypes.c_int()
    _check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    out: dict[str, int] = {}
    for i in range(count.value):
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        _check(lib.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
        bus = ctypes.create_string_buffer(32)
        _check(lib.cuDeviceGetPCIBusId(bus, 32, dev), "cuDeviceGetPCIBusId")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        try:
            _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            _check(lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
            out[bus.value.decode()] = total.value
        finally:
            lib.cuDevicePrimaryCtxRelease(dev)
    return out

