"""Argv/env rendering of the adapters, against the documented flags (see adapter docstrings)."""

from infopt.engines import ENGINES
from infopt.engines.launch import Launch
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.vllm import adapter as vllm
from infopt.specs.serving import EngineName, LlamaCppConfig, VllmConfig


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def test_llamacpp_argv_full_context_per_slot_and_localhost():
    cfg = LlamaCppConfig(model_path="/m/x.gguf", served_model_name="x", parallel_slots=4,
                         ctx_per_slot_tokens=8192, threads=2, flash_attn="on",
                         cache_type_k="q8_0", cache_type_v="q8_0", batch_tokens=512,
                         ubatch_tokens=128)
    argv = llamacpp.build_launch(cfg, "/bin/llama-server", 8123).argv
    assert argv[0] == "/bin/llama-server"
    assert _flag(argv, "-m") == "/m/x.gguf"
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "8123"
    assert _flag(argv, "-c") == str(4 * 8192)  # 4 slots x full 8192 native context
    assert _flag(argv, "--parallel") == "4" and _flag(argv, "-t") == "2"
    assert _flag(argv, "-fa") == "on"
    assert _flag(argv, "-ctk") == "q8_0" and _flag(argv, "-ctv") == "q8_0"
    assert _flag(argv, "-b") == "512" and _flag(argv, "-ub") == "128"
    assert "--metrics" in argv and _flag(argv, "--alias") == "x"


def test_llamacpp_optional_flags_absent_when_unset():
    cfg = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=2048)
    argv = llamacpp.build_launch(cfg, "llama-server", 1).argv
    for flag in ("-t", "-b", "-ub"):
        assert flag not in argv


def test_vllm_argv_and_env():
    cfg = VllmConfig(model_path="/m", served_model_name="s", max_model_len=4096, max_num_seqs=2,
                     max_num_batched_tokens=1024, kv_cache_dtype="fp8", enforce_eager=True,
                     enable_prefix_caching=False, cpu_kvcache_space_gib=2)
    launch = vllm.build_launch(cfg, "/v/bin/python", 9000)
    argv = launch.argv
    assert argv[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(argv, "--max-model-len") == "4096" and _flag(argv, "--max-num-seqs") == "2"
    assert _flag(argv, "--max-num-batched-tokens") == "1024"
    assert _flag(argv, "--kv-cache-dtype") == "fp8"
    assert "--enforce-eager" in argv and "--no-enable-prefix-caching" in argv
    assert _flag(argv, "--host") == "127.0.0.1"
    assert launch.env == {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert launch.command.startswith("HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=2 /v/bin/python")


def test_vllm_defaults_add_no_optional_flags():
    argv = vllm.build_launch(VllmConfig(model_path="/m", max_model_len=2048), "py", 1).argv
    for flag in ("--max-num-seqs", "--kv-cache-dtype", "--enforce-eager",
                 "--enable-prefix-caching", "--no-enable-prefix-caching"):
        assert flag not in argv


def test_command_is_shell_quoted():
    assert Launch(argv=["a b", "c"], env={"X": "1 2"}).command == "X='1 2' 'a b' c"


def test_registry_is_keyed_by_engine_name():
    for name, adapter in ENGINES.items():
        assert adapter.name is name
    assert ENGINES[EngineName.LLAMACPP].forced_length_fields(7) == {"max_tokens": 7,
                                                                     "ignore_eos": True}


def test_llamacpp_version_parsing():
    text = "load_backend: ...\nversion: 7123 (a1b2c3d)\nbuilt with cc (Debian 12.2.0) for x86_64"
    assert llamacpp.parse_version(text) == "7123 (a1b2c3d)"
    # Recorded from the llama.cpp vendored in llama-cpp-python 0.3.36:
    vendored = "version: 0.5.0-dev (build 1, commit 0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64"
    assert llamacpp.parse_version(vendored) == "0.5.0-dev (build 1, commit 0c1e570)"
    assert llamacpp.parse_version("garbage") == "unknown"


def test_vllm_cpu_kv_space_is_whole_gib():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):  # vLLM 0.32 int()-parses the variable
        VllmConfig(model_path="/m", max_model_len=2048, cpu_kvcache_space_gib=0.5)
