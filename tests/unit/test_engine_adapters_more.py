"""SGLang, TensorRT-LLM and MLX-LM adapters (and vLLM's memory/parallel knobs) against their
documented CLIs. None of these engines runs here, so every expectation cites where the flag,
route, log line or version text was read (see also each adapter's module docstring).
"""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from infopt.engines import ENGINES
from infopt.engines.mlx import adapter as mlx
from infopt.engines.sglang import adapter as sglang
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.specs.base import EngineUnavailableError
from infopt.specs.serving import (
    EngineName,
    MlxConfig,
    SglangConfig,
    TrtllmConfig,
    VllmConfig,
    with_knob,
)

SGLANG_DOC = "https://docs.sglang.io/advanced_features/server_arguments.html"
TRTLLM_DOC = "https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html"
MLX_DOC = "https://github.com/ml-explore/mlx-lm/blob/v0.31.3/mlx_lm/SERVER.md"


def _flag(argv, name):
    return argv[argv.index(name) + 1]


# ---------------------------------------------------------------------------------------------
# Registry

def test_registry_has_all_five_engines_keyed_by_name():
    assert set(ENGINES) == set(EngineName)
    for name, adapter in ENGINES.items():
        assert adapter.name is name
        assert adapter.doc_url.startswith("https://")
        assert adapter.health_path.startswith("/")
    assert ENGINES[EngineName.SGLANG].config_type is SglangConfig
    assert ENGINES[EngineName.TRTLLM].config_type is TrtllmConfig
    assert ENGINES[EngineName.MLX].config_type is MlxConfig


@pytest.mark.parametrize("adapter,var", [(sglang, "INFOPT_SGLANG_PYTHON"),
                                         (trtllm, "INFOPT_TRTLLM_SERVE"),
                                         (mlx, "INFOPT_MLX_PYTHON")])
def test_locate_says_what_to_install_and_which_variable_to_set(adapter, var, monkeypatch,
                                                                tmp_path):
    monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no trtllm-serve on PATH either
    with pytest.raises(EngineUnavailableError, match=var):
        adapter.locate()
    monkeypatch.setenv(var, str(tmp_path / "missing"))
    with pytest.raises(EngineUnavailableError, match="not"):
        adapter.locate()
    exe = tmp_path / "bin"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv(var, str(exe))
    assert adapter.locate() == str(exe)


def test_trtllm_locate_finds_trtllm_serve_on_path(monkeypatch, tmp_path):
    monkeypatch.delenv("INFOPT_TRTLLM_SERVE", raising=False)
    exe = tmp_path / "trtllm-serve"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert trtllm.locate() == str(exe)  # the NGC image puts it on PATH


# ---------------------------------------------------------------------------------------------
# SGLang 0.5.23

def _sglang_full():
    return SglangConfig(
        model_path="/models/Qwen3-8B", served_model_name="qwen", context_length=32768,
        mem_fraction_static=0.85, max_running_requests=64, chunked_prefill_size=4096,
        max_prefill_tokens=16384, kv_cache_dtype="fp8_e4m3", tp_size=2, pp_size=1,
        attention_backend="fa3", disable_cuda_graph=True, enable_torch_compile=True,
        disable_radix_cache=True, speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/eagle3", speculative_num_steps=3,
        speculative_eagle_topk=1, speculative_num_draft_tokens=4)


def test_sglang_argv_every_knob():
    launch = sglang.build_launch(_sglang_full(), "/env/bin/python", 30001)
    argv = launch.argv
    # SGLANG_DOC; python/sglang/srt/arg_groups/fields/*.py in the sglang-0.5.23 wheel.
    assert argv[:3] == ["/env/bin/python", "-m", "sglang.launch_server"]
    assert _flag(argv, "--model-path") == "/models/Qwen3-8B"  # fields/model.py
    assert _flag(argv, "--served-model-name") == "qwen"  # fields/serving.py
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "30001"
    assert _flag(argv, "--context-length") == "32768"  # fields/model.py
    assert _flag(argv, "--mem-fraction-static") == "0.85"  # fields/schedule.py
    assert _flag(argv, "--max-running-requests") == "64"  # fields/schedule.py
    assert _flag(argv, "--chunked-prefill-size") == "4096"  # fields/schedule.py
    assert _flag(argv, "--max-prefill-tokens") == "16384"  # fields/schedule.py
    assert _flag(argv, "--kv-cache-dtype") == "fp8_e4m3"  # fields/model.py choices
    assert _flag(argv, "--tp-size") == "2" and _flag(argv, "--pp-size") == "1"  # fields/parallel
    assert _flag(argv, "--attention-backend") == "fa3"  # fields/exec_.py ExecKernel
    # server_args.py: --disable-cuda-graph is "Deprecated. Use
    # --cuda-graph-backend-{decode,prefill}=disabled instead." (fields/exec_.py ExecGraph)
    assert _flag(argv, "--cuda-graph-backend-decode") == "disabled"
    assert _flag(argv, "--cuda-graph-backend-prefill") == "disabled"
    assert "--disable-cuda-graph" not in argv
    assert "--enable-torch-compile" in argv and "--disable-radix-cache" in argv
    assert _flag(argv, "--speculative-algorithm") == "EAGLE3"  # fields/spec.py
    assert _flag(argv, "--speculative-draft-model-path") == "/models/eagle3"
    assert _flag(argv, "--speculative-num-steps") == "3"
    assert _flag(argv, "--speculative-eagle-topk") == "1"
    assert _flag(argv, "--speculative-num-draft-tokens") == "4"
    assert "--enable-metrics" in argv  # fields/observability.py; /metrics with sglang: names
    assert launch.env == {"HF_HUB_OFFLINE": "1"}
    assert (launch.engine, launch.port, launch.model_path) == ("sglang", 30001,
                                                               "/models/Qwen3-8B")


def test_sglang_defaults_add_no_optional_flags():
    argv = sglang.build_launch(SglangConfig(model_path="/m", context_length=4096), "py", 1).argv
    for flag in ("--mem-fraction-static", "--max-running-requests", "--chunked-prefill-size",
                 "--kv-cache-dtype", "--tp-size", "--attention-backend",
                 "--cuda-graph-backend-decode", "--enable-torch-compile",
                 "--speculative-algorithm"):
        assert flag not in argv
    assert _flag(argv, "--host") == "127.0.0.1"  # never 0.0.0.0 by default


def test_sglang_chunked_prefill_minus_one_disables_it():
    cfg = SglangConfig(model_path="/m", context_length=4096, chunked_prefill_size=-1)
    assert _flag(sglang.build_launch(cfg, "py", 1).argv, "--chunked-prefill-size") == "-1"


@pytest.mark.parametrize("bad", [
    {"max_num_seqs": 4},  # a vLLM knob: unknown to SGLang
    {"gpu_memory_utilization": 0.9},  # ditto
    {"mem_fraction_static": 1.0}, {"mem_fraction_static": 0},
    {"chunked_prefill_size": 0}, {"chunked_prefill_size": -2},
    {"kv_cache_dtype": "fp8"},  # SGLang spells fp8_e4m3 / fp8_e5m2
    {"attention_backend": "xformers"},
    {"speculative_num_steps": 3},  # without an algorithm
    {"speculative_algorithm": "NGRAM", "speculative_draft_model_path": "/d"},
    {"speculative_algorithm": "EAGLE3"},  # needs a draft checkpoint
    {"tp_size": 0},
])
def test_sglang_rejects_unknown_knobs_and_bad_values(bad):
    with pytest.raises(ValidationError):
        SglangConfig(model_path="/m", context_length=4096, **bad)


def test_sglang_context_length_is_required():
    with pytest.raises(ValidationError, match="context_length"):
        SglangConfig(model_path="/m")


# Real lines, each quoted from the thread named beside it.
SGLANG_LOGS = [
    # https://github.com/vllm-project/vllm/issues/21348 (SGLang on 4xH100, TP 4)
    ("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
     367404, 16.46),
    # https://github.com/sgl-project/sglang/pull/29853 (0.5.x format with dtype, per TP rank)
    ("[2026-07-01 15:19:55 TP10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 387968, "
     "K size: 5.92 GB, V size: 5.92 GB\n[2026-07-01 15:19:55 TP10] Memory pool end. "
     "avail mem=11.23 GB\n[2026-07-01 15:19:55 TP14] KV Cache is allocated. dtype: "
     "torch.bfloat16, #tokens: 387968, K size: 5.92 GB, V size: 5.92 GB", 387968, 11.84),
    # https://github.com/sgl-project/sglang/pull/11309 (DeepSeek-V3.2, MLA: one latent pool)
    ("[2025-10-07 23:17:19 DP0 TP0] KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB\n"
     "[2025-10-07 23:17:19 DP0 TP0] Memory pool end. avail mem=37.71 GB", 975424, 43.67),
]


@pytest.mark.parametrize("text,tokens,gb", SGLANG_LOGS)
def test_sglang_kv_from_real_log_lines(text, tokens, gb):
    obs = sglang.kv_from_log(text)
    assert obs is not None and obs.tokens == tokens
    assert obs.bytes == pytest.approx(gb * 2**30, rel=1e-9)  # SGLang's GB is 2**30
    assert "KV Cache is allocated" in obs.line


def test_sglang_kv_target_pool_before_draft_pool():
    # https://github.com/noonghunna/club-3090/issues/1261 (speculative: the draft pool follows
    # the target's on the same rank, same #tokens, smaller sizes).
    text = ("[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, "
            "#tokens: 454112, K size: 3.46 GB, V size: 3.46 GB\n"
            "[2026-09-12 00:22:48 TP0] Memory pool end. avail mem=8.40 GB\n"
            "[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, "
            "#tokens: 454112, K size: 1.08 GB, V size: 1.08 GB")
    obs = sglang.kv_from_log(text)
    assert obs.tokens == 454112 and obs.bytes == pytest.approx(6.92 * 2**30)


def test_sglang_kv_old_format_takes_tokens_from_max_total_num_tokens():
    # https://github.com/jerryzsj/my-deepseek-r1/blob/HEAD/README.md (tests/fixtures/kv_logs)
    text = ("[2025-02-04 05:29:17 TP0] KV Cache is allocated. K size: 2.82 GB, V size: 2.82 GB.\n"
            "[2025-02-04 05:29:17 TP0] Memory pool end. avail mem=1.68 GB\n"
            "[2025-02-04 05:29:20 TP0] max_total_num_tokens=105531, chunked_prefill_size=2048")
    obs = sglang.kv_from_log(text)
    assert obs.tokens == 105531 and obs.bytes == pytest.approx(5.64 * 2**30)


def test_sglang_kv_hybrid_takes_the_full_attention_pool():
    # Format of memory_pool.py _finalize_allocation_log with allocation_label "Full"/"SWA"
    # (swa_memory_pool.py, 0.5.23); the numbers are made up.
    text = ("SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 800000, K size: 1.00 GB, "
            "V size: 1.00 GB\nFull KV Cache is allocated. dtype: torch.bfloat16, #tokens: 640000, "
            "K size: 2.00 GB, V size: 2.00 GB")
    assert sglang.kv_from_log(text).tokens == 640000
    assert sglang.kv_from_log("Mamba Cache is allocated. max_mamba_cache_size: 124") is None
    assert sglang.kv_from_log("nothing here") is None


def test_sglang_version_and_forced_length_and_metrics():
    assert sglang.parse_version("0.5.23\n") == "0.5.23"
    assert sglang.parse_version("WARNING something\n0.5.4.post1\n") == "0.5.4.post1"
    assert sglang.parse_version("Traceback ...") == "unknown"
    # protocol.py (0.5.23): min_tokens and ignore_eos on both completion request models.
    assert ENGINES[EngineName.SGLANG].forced_length_fields(9) == {
        "max_tokens": 9, "min_tokens": 9, "ignore_eos": True}
    assert ENGINES[EngineName.SGLANG].metric_prefix == "sglang:"
    assert ENGINES[EngineName.SGLANG].health_path == "/health"  # http_server.py @app.get


def test_sglang_memory_shape_carries_mem_fraction_and_parallelism():
    shape = sglang.memory_shape(_sglang_full(), 128, False)
    assert shape.kv_dtype == "fp8_e4m3" and shape.context_tokens == 32768
    assert shape.max_sequences == 64  # capped by max_running_requests
    assert shape.knobs.mem_fraction_static == 0.85 and shape.knobs.max_num_seqs == 64
    assert (shape.tensor_parallel, shape.pipeline_parallel) == (2, 1)
    default = sglang.memory_shape(SglangConfig(model_path="/m", context_length=4096), 8, False)
    # None: SGLang's own default for the GPU and shape, computed where the GPU is known.
    assert default.max_sequences == 8 and default.knobs.mem_fraction_static is None
    assert sglang.default_mem_fraction_static(81559 * 2**20, 1) == 0.83  # one H100
    assert sglang.default_mem_fraction_static(81559 * 2**20, 8) < 0.83


def test_sglang_timeout_grows_with_weights_and_torch_compile():
    base = SglangConfig(model_path="/m", context_length=4096)
    compiled = base.model_copy(update={"enable_torch_compile": True})
    assert sglang.readiness_timeout_s(2**30, compiled) > sglang.readiness_timeout_s(2**30, base)
    assert sglang.readiness_timeout_s(10 * 2**30, base) > sglang.readiness_timeout_s(0, base)


# ---------------------------------------------------------------------------------------------
# TensorRT-LLM 1.x trtllm-serve

def _trt_full(**over):
    data = dict(model_path="/models/Llama-3.1-8B", max_seq_len=131072, max_batch_size=32,
                max_num_tokens=8192, tp_size=2, pp_size=1, kv_cache_free_gpu_memory_fraction=0.85,
                extra_llm_api_options={
                    "kv_cache_config": {"enable_block_reuse": False, "dtype": "fp8"},
                    "cuda_graph_config": {"enable_padding": True, "max_batch_size": 32},
                    "enable_attention_dp": False, "disable_overlap_scheduler": False,
                    "enable_chunked_prefill": True, "print_iter_log": True,
                    "return_perf_metrics": True})
    data.update(over)
    return TrtllmConfig(**data)


def test_trtllm_argv_every_knob():
    launch = trtllm.build_launch(_trt_full(), "/usr/local/bin/trtllm-serve", 8123)
    argv = launch.argv
    # TRTLLM_DOC; tensorrt_llm/commands/serve.py @00209af1 (click options; old spellings kept as
    # aliases: https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html).
    assert argv[:2] == ["/usr/local/bin/trtllm-serve", "/models/Llama-3.1-8B"]  # MODEL argument
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "8123"
    assert _flag(argv, "--backend") == "pytorch"
    assert _flag(argv, "--max_seq_len") == "131072"
    assert _flag(argv, "--max_batch_size") == "32"
    assert _flag(argv, "--max_num_tokens") == "8192"
    assert _flag(argv, "--tp_size") == "2" and _flag(argv, "--pp_size") == "1"
    assert _flag(argv, "--kv_cache_free_gpu_memory_fraction") == "0.85"
    path = _flag(argv, "--extra_llm_api_options")
    assert launch.files == {path: launch.files[path]}
    doc = yaml.safe_load(launch.files[path])  # trtllm-serve reads it with yaml.safe_load
    assert doc == {
        "kv_cache_config": {"enable_block_reuse": False, "dtype": "fp8",
                            # copied: a YAML kv_cache_config replaces the CLI-built one
                            # (llm_args.py update_llm_args_with_extra_dict)
                            "free_gpu_memory_fraction": 0.85},
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": 32},
        "enable_attention_dp": False, "disable_overlap_scheduler": False,
        "enable_chunked_prefill": True, "print_iter_log": True, "return_perf_metrics": True}
    assert launch.env == {"HF_HUB_OFFLINE": "1"}
    assert launch.engine == "trtllm" and launch.model_path == "/models/Llama-3.1-8B"


def test_trtllm_extra_options_file_is_content_addressed_and_absent_when_unset():
    a = trtllm.build_launch(_trt_full(), "t", 1)
    b = trtllm.build_launch(_trt_full(extra_llm_api_options={"print_iter_log": True}), "t", 1)
    assert set(a.files) != set(b.files)
    plain = trtllm.build_launch(TrtllmConfig(model_path="/m/x", max_seq_len=4096), "t", 1)
    assert plain.files == {} and "--extra_llm_api_options" not in plain.argv
    for flag in ("--max_batch_size", "--max_num_tokens", "--tp_size",
                 "--kv_cache_free_gpu_memory_fraction"):
        assert flag not in plain.argv
    # Without a kv_cache_config block the fraction stays a flag only.
    only = TrtllmConfig(model_path="/m/x", max_seq_len=4096,
                        kv_cache_free_gpu_memory_fraction=0.5,
                        extra_llm_api_options={"print_iter_log": True})
    assert trtllm.extra_options(only) == {"print_iter_log": True}


def test_trtllm_tensorrt_backend():
    cfg = TrtllmConfig(model_path="/engines/llama", max_seq_len=4096, backend="tensorrt",
                       extra_llm_api_options={"kv_cache_config": {"enable_block_reuse": True}})
    assert _flag(trtllm.build_launch(cfg, "t", 1).argv, "--backend") == "tensorrt"


@pytest.mark.parametrize("bad", [
    {"max_num_seqs": 4},  # vLLM's knob
    {"gpu_memory_utilization": 0.9},
    {"kv_cache_free_gpu_memory_fraction": 0}, {"kv_cache_free_gpu_memory_fraction": 1.2},
    {"backend": "trt"},  # our closed choice is the canonical name
    {"max_batch_size": 0},
    {"extra_llm_api_options": {"kv_cache_config": {"free_gpu_memory_fraction": 0.5}}},
    {"extra_llm_api_options": {"no_such_option": True}},
    {"extra_llm_api_options": {"kv_cache_config": {"dtype": "int4"}}},
    # PyTorch-only options with the TensorRT backend
    {"backend": "tensorrt", "extra_llm_api_options": {"cuda_graph_config": {}}},
    {"backend": "tensorrt", "extra_llm_api_options": {"kv_cache_config": {"dtype": "fp8"}}},
    {"served_model_name": "other"},  # trtllm-serve cannot rename the model
])
def test_trtllm_rejects_unknown_knobs_and_bad_values(bad):
    data = {"model_path": "/m/llama", "max_seq_len": 4096, **bad}
    with pytest.raises(ValidationError):
        TrtllmConfig(**data)


def test_trtllm_served_name_is_the_model_directory_name():
    # openai_server.py: `self.model = Path(model).name` for a local directory.
    assert TrtllmConfig(model_path="/models/Llama-3.1-8B/", max_seq_len=4096
                        ).served_model_name == "Llama-3.1-8B"
    cfg = TrtllmConfig(model_path="/models/x", served_model_name="x", max_seq_len=4096)
    assert with_knob(cfg, "max_batch_size", 8).served_model_name == "x"


def test_trtllm_kv_from_real_log_line():
    # https://github.com/triton-inference-server/tutorials/pull/150 (TRT-LLM PyTorch backend)
    text = ("[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 65 [window size=2051], tokens "
            "per block=32, primary blocks=116617, secondary blocks=0\n"
            "[TensorRT-LLM][INFO] Number of tokens per block: 32.\n"
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 78.30 GiB for max tokens in paged KV "
            "cache (3731744).\n")
    obs = trtllm.kv_from_log(text)
    assert obs.tokens == 3731744 == 116617 * 32
    assert obs.bytes == pytest.approx(78.30 * 2**30)


def test_trtllm_kv_takes_the_last_allocation_and_reads_the_0x_format():
    # The PyTorch backend allocates a small profiling cache first; format of
    # kvCacheManager.cpp TLLM_LOG_INFO("[MemUsageChange] Allocated %0.2f GiB ... (%d).").
    text = ("[MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224).\n"
            "[MemUsageChange] Allocated 62.99 GiB for max tokens in paged KV cache (294848).")
    assert trtllm.kv_from_log(text).tokens == 294848
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1400 (0.8, C++ runtime)
    old = ("[TensorRT-LLM][INFO] Allocate 69524783104 bytes for k/v cache. \n"
           "[TensorRT-LLM][INFO] Using 132608 tokens in paged KV cache.")
    assert trtllm.kv_from_log(old).tokens == 132608
    assert trtllm.kv_from_log("no kv here") is None


def test_trtllm_version_forced_length_metrics_health():
    # tensorrt_llm/__init__.py: print(f"[TensorRT-LLM] TensorRT LLM version: {__version__}")
    text = "[TensorRT-LLM] TensorRT LLM version: 1.2.0rc5\nUsage: trtllm-serve [OPTIONS] ..."
    assert trtllm.parse_version(text) == "1.2.0rc5"
    assert trtllm.parse_version("[TensorRT-LLM] TensorRT-LLM version: 0.21.0") == "0.21.0"
    assert trtllm.parse_version("bash: trtllm-serve: not found") == "unknown"
    # serve/openai_protocol.py: ignore_eos, min_tokens; chat max_completion_tokens alias
    # max_tokens. Request models are extra="forbid": nothing else may be sent.
    assert ENGINES[EngineName.TRTLLM].forced_length_fields(5) == {
        "max_tokens": 5, "min_tokens": 5, "ignore_eos": True}
    assert ENGINES[EngineName.TRTLLM].metric_prefix == "trtllm_"  # metrics/collector.py
    assert ENGINES[EngineName.TRTLLM].health_path == "/health"  # openai_server.py


def test_trtllm_memory_shape():
    shape = trtllm.memory_shape(_trt_full(), 16, False)
    assert shape.kv_dtype == "fp8" and shape.context_tokens == 131072
    assert shape.max_sequences == 16  # target below max_batch_size
    assert shape.knobs.free_gpu_memory_fraction == 0.85
    assert shape.knobs.max_num_batched_tokens == 8192 and shape.knobs.max_num_seqs == 32
    assert shape.tensor_parallel == 2
    plain = trtllm.memory_shape(TrtllmConfig(model_path="/m/x", max_seq_len=4096), 4, False)
    assert plain.kv_dtype == "auto" and plain.knobs.free_gpu_memory_fraction == 0.9


# ---------------------------------------------------------------------------------------------
# MLX-LM 0.31.3

def test_mlx_argv_every_knob():
    cfg = MlxConfig(model_path="/Users/me/models/Qwen3-4B-4bit", context_tokens=40960,
                    max_tokens=2048, decode_concurrency=16, prompt_concurrency=4,
                    prefill_step_size=1024, prompt_cache_size=4, prompt_cache_bytes=8 * 10**9,
                    draft_model_path="/Users/me/models/Qwen3-0.6B-4bit", num_draft_tokens=2)
    launch = mlx.build_launch(cfg, "/env/bin/python", 8080)
    argv = launch.argv
    # MLX_DOC; mlx_lm/server.py main() and mlx_lm/cli.py at v0.31.3.
    assert argv[:4] == ["/env/bin/python", "-m", "mlx_lm", "server"]
    assert _flag(argv, "--model") == "/Users/me/models/Qwen3-4B-4bit"
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "8080"
    assert _flag(argv, "--max-tokens") == "2048"
    assert _flag(argv, "--decode-concurrency") == "16"
    assert _flag(argv, "--prompt-concurrency") == "4"
    assert _flag(argv, "--prefill-step-size") == "1024"
    assert _flag(argv, "--prompt-cache-size") == "4"
    assert _flag(argv, "--prompt-cache-bytes") == "8000000000"  # _parse_size: bare = bytes
    assert _flag(argv, "--draft-model") == "/Users/me/models/Qwen3-0.6B-4bit"
    assert _flag(argv, "--num-draft-tokens") == "2"
    assert "--context-tokens" not in argv and "40960" not in argv  # planning only, no flag
    assert launch.env == {"HF_HUB_OFFLINE": "1"} and launch.engine == "mlx"


def test_mlx_defaults_add_no_optional_flags():
    argv = mlx.build_launch(MlxConfig(model_path="/m", context_tokens=4096), "py", 1).argv
    assert argv == ["py", "-m", "mlx_lm", "server", "--model", "/m", "--host", "127.0.0.1",
                    "--port", "1"]


@pytest.mark.parametrize("bad", [
    {"max_num_seqs": 2}, {"mem_fraction_static": 0.8},  # other engines' knobs
    {"decode_concurrency": 0}, {"max_tokens": 0},
    {"num_draft_tokens": 3},  # without draft_model_path
    {"served_model_name": "chat"},  # the server would try to load a model at path "chat"
])
def test_mlx_rejects_unknown_knobs_and_bad_values(bad):
    with pytest.raises(ValidationError):
        MlxConfig(model_path="/m", context_tokens=4096, **bad)


def test_mlx_served_name_is_the_model_path_or_default_model():
    assert MlxConfig(model_path="/m", context_tokens=4096).served_model_name == "/m"
    assert MlxConfig(model_path="/m", context_tokens=4096,
                     served_model_name="default_model").served_model_name == "default_model"


def test_mlx_version_kv_forced_length_metrics_and_shape():
    # cli.py: `python -m mlx_lm --version` prints __version__ ("0.31.3" in _version.py).
    assert mlx.parse_version("0.31.3\n") == "0.31.3"
    assert mlx.parse_version("ModuleNotFoundError: No module named 'mlx'") == "unknown"
    assert mlx.kv_from_log("INFO - Starting httpd at 127.0.0.1 on port 8080...") is None
    # No ignore_eos / min_tokens in server.py's request handling: max_tokens only.
    assert ENGINES[EngineName.MLX].forced_length_fields(7) == {"max_tokens": 7}
    assert ENGINES[EngineName.MLX].metric_prefix == ""
    assert ENGINES[EngineName.MLX].health_path == "/health"  # server.py do_GET
    cfg = MlxConfig(model_path="/m", context_tokens=4096)
    assert mlx.memory_shape(cfg, 64, False).max_sequences == 32  # --decode-concurrency default
    drafted = MlxConfig(model_path="/m", context_tokens=4096, draft_model_path="/d")
    assert mlx.memory_shape(drafted, 8, False).max_sequences == 1  # no batching with a draft


# ---------------------------------------------------------------------------------------------
# vLLM: memory utilization and parallelism (https://docs.vllm.ai/en/latest/configuration/
# engine_args.html; also read from the vLLM 0.32 CPU build's --help=all here)

def test_vllm_memory_and_parallel_flags():
    cfg = VllmConfig(model_path="/m", max_model_len=8192, gpu_memory_utilization=0.95,
                     tensor_parallel_size=4, pipeline_parallel_size=2)
    launch = vllm.build_launch(cfg, "py", 9)
    assert _flag(launch.argv, "--gpu-memory-utilization") == "0.95"
    assert _flag(launch.argv, "--tensor-parallel-size") == "4"
    assert _flag(launch.argv, "--pipeline-parallel-size") == "2"
    assert launch.engine == "vllm" and launch.port == 9 and launch.model_path == "/m"
    shape = vllm.memory_shape(cfg, 8, False)
    assert shape.knobs.gpu_memory_utilization == 0.95
    assert (shape.tensor_parallel, shape.pipeline_parallel) == (4, 2)
    plain = vllm.memory_shape(VllmConfig(model_path="/m", max_model_len=8192), 8, False)
    assert plain.knobs.gpu_memory_utilization == 0.9 and plain.tensor_parallel == 1
    for flag in ("--gpu-memory-utilization", "--tensor-parallel-size",
                 "--pipeline-parallel-size"):
        assert flag not in vllm.build_launch(VllmConfig(model_path="/m", max_model_len=16), "p",
                                             1).argv


@pytest.mark.parametrize("bad", [{"gpu_memory_utilization": 0}, {"gpu_memory_utilization": 1.5},
                                 {"tensor_parallel_size": 0}, {"pipeline_parallel_size": 0}])
def test_vllm_rejects_bad_memory_and_parallel_values(bad):
    with pytest.raises(ValidationError):
        VllmConfig(model_path="/m", max_model_len=4096, **bad)


def test_with_knob_on_the_new_engines():
    s = with_knob(SglangConfig(model_path="/m", context_length=4096), "max_running_requests", 8)
    assert isinstance(s, SglangConfig) and s.max_running_requests == 8
    with pytest.raises(ValueError, match="no knob 'max_num_seqs'"):
        with_knob(s, "max_num_seqs", 8)
    m = with_knob(MlxConfig(model_path="/m", context_tokens=4096), "decode_concurrency", 4)
    assert isinstance(m, MlxConfig) and m.decode_concurrency == 4
    with pytest.raises(ValidationError):
        with_knob(m, "decode_concurrency", 0)


def test_trtllm_shortening_max_seq_len_is_seen_only_for_the_served_pool():
    """TensorRT-LLM sizes a small pool for its profiling run (which may clamp max_seq_len)
    and then the real one; only a clamp of the real one shortens what is served."""
    from infopt.engines.trtllm import adapter as trtllm
    from infopt.specs.serving import TrtllmConfig

    cfg = TrtllmConfig(model_path="/m", served_model_name="m", max_seq_len=131072)
    warn = ("[TRT-LLM] [W] Attention window size 131072 exceeds upper bound {n} for available "
            "blocks. Reducing to {n}.\n[TRT-LLM] [W] Adjusted max_seq_len to {n}\n")
    alloc = ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated {g} GiB for max tokens in paged "
             "KV cache ({n}).\n")
    profiling = warn.format(n=8224) + alloc.format(g="1.00", n=8224)
    fits = profiling + "[TRT-LLM] [I] Peak memory ...\n" + alloc.format(g="56.85", n=465728)
    assert trtllm.context_shortened(fits, cfg) is None
    short = profiling + warn.format(n=68000) + alloc.format(g="10.38", n=68000)
    assert "from 131072 to 68000" in trtllm.context_shortened(short, cfg)
    served = fits + "[TRT-LLM] [I] max_seq_len=65536, max_num_requests=2048\n"
    assert "to 65536" in trtllm.context_shortened(served, cfg)
