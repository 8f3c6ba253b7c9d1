"""The simulated TensorRT-LLM GPU engine (tests/sim/trtllm_gpu.py) driven through infopt's own
TensorRT-LLM adapter, as a trial would: started from the adapter's argv (and its options YAML),
its version read by the adapter's `trtllm-serve --help` probe, its KV pool read by infopt's
log parser and compared with the adapter's own KV rule, probed by the API contract, and failing
or degrading the way TensorRT-LLM does when memory does not fit, with infopt's troubleshooting
naming the cause. The GPU is a SIMULATED H100 SXM from infopt's sourced GPU table; the model
configs are the real ones in tests/fixtures/model_configs. No GPU ran any of this."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from infopt.costmodel.allocation import EngineKnobs
from infopt.engines import endpoint_for, process
from infopt.engines.render import write_launch_files
from infopt.engines.trtllm import adapter as trtllm
from infopt.model.local import inspect_hf_dir
from infopt.specs.base import EngineStartError
from infopt.troubleshoot.diagnose import diagnose_file
from tests.fixture_data import MODEL_CONFIGS
from tests.integration.test_sim_vllm_gpu import control, sim_gpu
from tests.sim import gpu_host
from tests.sim import trtllm_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

LLAMA_8B, LLAMA_70B = "meta-llama__Llama-3.1-8B-Instruct", "meta-llama__Meta-Llama-3.1-70B"


@pytest.fixture
def host(tmp_path, monkeypatch):
    """test_sim_vllm_gpu.sim_host for an adapter whose executable is `trtllm-serve` itself
    (sim_host writes a `python`): the wrapper, the GPU in the environment, model folders."""
    monkeypatch.setenv("INFOPT_SIM_GPU", json.dumps(sim_gpu()))
    monkeypatch.setenv("INFOPT_SIM_TIME_SCALE", "0.05")
    exe = sim.write_serve(tmp_path / "sim-trtllm" / "bin")

    def model(name: str) -> Path:
        folder = tmp_path / "models" / name
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(MODEL_CONFIGS / f"{name}.json", folder / "config.json")
        return folder
    return exe, model


def _config(folder: Path, **knobs):
    return control(trtllm, folder, **knobs)


def trtllm_target(folder: Path, context: int):
    from infopt.engines.launch import ServingTarget

    return ServingTarget(model_path=str(folder), served_model_name=folder.name,
                         native_context_tokens=context, usable_cpus=32)


def _sizing(folder: Path, **knobs) -> tuple[sim.Settings, sim.Sizing]:
    """What the stand-in decides for the adapter's argv and YAML, without serving."""
    launch = trtllm.build_launch(_config(folder, **knobs), "trtllm-serve", 8000)
    write_launch_files(launch)
    opts = sim.parse_cli(launch.argv[1:])
    s = sim.settle(opts, sim.read_extra(opts.get("extra_llm_api_options")))
    model, gpu = gpu_host.read_model(str(folder)), gpu_host.Gpu(**sim_gpu())
    return s, sim.size_memory(model, gpu, s, s.max_seq_len)


def test_an_8b_model_serves_on_one_simulated_h100_through_the_trtllm_adapter(
        host, tmp_path, monkeypatch):
    from infopt.contract.verify import verify_endpoint

    exe, model = host
    nvml = tmp_path / "nvml"
    nvml.mkdir()
    monkeypatch.setenv("INFOPT_SIM_NVML_DIR", str(nvml))
    assert trtllm.detect_version(exe) == sim.VERSION
    folder = model(LLAMA_8B)
    cfg = _config(folder, extra_llm_api_options={"return_perf_metrics": True})
    running = process.start(trtllm.ADAPTER, cfg, exe, tmp_path / "engine.log", 16 * 10**9)
    try:
        log = Path(running.log_path).read_text()
        assert "SIMULATED TensorRT-LLM" in log and "Application startup complete." in log
        assert f"Uvicorn running on {running.base_url} (Press CTRL+C to quit)" in log
        # The profiling run's temporary cache first (8,192 dummy tokens + 2, in 32-token
        # blocks: 8,224), then the real pool: the parser must take the last line.
        allocated = [ln for ln in log.splitlines() if "for max tokens in paged KV cache" in ln]
        assert len(allocated) == 2 and allocated[0].endswith("(8224).")
        kv = trtllm.kv_from_log(log)
        # 0.9 x (79.65 GiB (NVML's 81,559 MiB) - 14.96 GiB of weights (8.03 B params x 2 bytes)
        # - ~1.5 GiB of context, CUDA graphs and profiling activations) = ~56.9 GiB, at 128 KiB
        # a token (32 layers x 8 KV heads x 128 x 2 x 2 bytes): ~465k tokens.
        assert kv is not None and 455_000 < kv.tokens < 475_000, kv
        # infopt's own rule for TensorRT-LLM (the fit's KV budget) agrees within a few %.
        m = inspect_hf_dir(folder)
        budget = trtllm.kv_allocation(m, sim_gpu()["memory_bytes"], m.params_total * 2, 1,
                                      "cuda", EngineKnobs())
        assert abs(kv.tokens / (budget.kv_budget_bytes / (128 * 1024)) - 1) < 0.03
        ep = endpoint_for("trtllm", running.base_url, cfg.served_model_name, running.pid)
        checks = {c.feature: c for c in verify_endpoint(ep, features=(
            "models", "whole", "stream", "include_usage"))}
        assert all(c.ok for c in checks.values()), checks
        # The defaults (no chunked prefill) refuse a prompt over max_num_tokens (8,192) before
        # scheduling it, with TensorRT-LLM's own message (llm.py BaseLLM._check_arguments).
        long = httpx.post(f"{running.base_url}/v1/chat/completions", timeout=30, json={
            "model": cfg.served_model_name, "max_tokens": 4,
            "messages": [{"role": "user", "content": "hello " * 9000}]})
        assert long.status_code == 400, long.text
        assert long.json()["message"] == (  # TensorRT-LLM's flat ErrorResponse
            "The sum of prompt length (9008.0), query length (0) should not exceed "
            "max_num_tokens (8192)")  # 9,000 words + the chat template's 8 tokens
        text = httpx.get(f"{running.base_url}/prometheus/metrics").text
        assert 'trtllm_request_success_total{model_name="' + cfg.served_model_name in text
        assert httpx.get(f"{running.base_url}/version").json() == {"version": sim.VERSION}
        assert (nvml / f"{running.pid}.json").exists()  # the simulated driver lists it
    finally:
        process.stop(running.pid)


def test_weights_beyond_one_gpu_fail_as_cuda_out_of_memory(host, tmp_path):
    exe, model = host
    cfg = _config(model(LLAMA_70B))  # ~131 GiB of weights on one 80 GB GPU
    with pytest.raises(EngineStartError) as err:
        process.start(trtllm.ADAPTER, cfg, exe, tmp_path / "oom.log", 140 * 10**9)
    d = diagnose_file(str(err.value.log_path), "trtllm")
    assert d.category.value == "oom" and "CUDA out of memory" in d.root_error, d


def test_a_kv_pool_short_of_one_sequence_is_refused_though_trtllm_would_serve_it(host, tmp_path):
    """TensorRT-LLM does not refuse a pool smaller than max_seq_len: it clamps the attention
    window and max_seq_len to the pool and serves the shorter context. infopt refuses the
    start (the native context is never cut silently) and troubleshooting names the cause."""
    exe, model = host
    # 70B at TP 2: ~65.7 GiB of weights per GPU leave 0.9 x ~11.5 GiB of KV at 160 KiB a token
    # (80 layers x 4 KV heads x 128 x 2 x 2 bytes): ~68k tokens, short of 131,072.
    cfg = _config(model(LLAMA_70B), tp_size=2)
    with pytest.raises(EngineStartError) as err:
        process.start(trtllm.ADAPTER, cfg, exe, tmp_path / "kv.log", 140 * 10**9)
    assert "lowered max_seq_len from 131072 to" in str(err.value)
    log = (tmp_path / "kv.log").read_text()
    kv = trtllm.kv_from_log(log)
    assert kv is not None and 60_000 < kv.tokens < 75_000, kv
    assert f"Attention window size 131072 exceeds upper bound {kv.tokens}" in log
    assert f"Adjusted max_seq_len to {kv.tokens}" in log
    assert trtllm.context_shortened(log, cfg) is not None
    d = diagnose_file(str(tmp_path / "kv.log"), "trtllm")
    assert d.category.value == "kv_insufficient", d
    # The context-preserving remedy comes first: more KV memory, not a shorter context.
    assert d.remedies[0].preserves_contract


def test_options_trtllm_serve_does_not_have_are_refused_like_click_and_pydantic_do(
        host, tmp_path):
    exe, model = host
    folder = model(LLAMA_8B)
    # Every spelling the adapter renders is one of serve.py's (or an alias of one).
    launch = trtllm.build_launch(_config(
        folder, tp_size=2, pp_size=1, ep_size=1, max_batch_size=8, max_num_tokens=4096,
        kv_cache_free_gpu_memory_fraction=0.8,
        extra_llm_api_options={"kv_cache_config": {"dtype": "fp8"}}), exe, 8000)
    opts = sim.parse_cli(launch.argv[1:])
    assert opts["tensor_parallel_size"] == 2 and opts["free_gpu_memory_fraction"] == 0.8
    assert opts["extra_llm_api_options"].startswith(trtllm.EXTRA_OPTIONS_DIR)
    out = subprocess.run([exe, str(folder), "--tensor_paralel_size", "2"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert "Usage: trtllm-serve serve [OPTIONS] MODEL" in out.stderr
    assert "Error: No such option: --tensor_paralel_size" in out.stderr
    bad = tmp_path / "extra.yaml"
    bad.write_text("kv_cache_config:\n  dtype: fp8\nmax_batchsize: 8\n")
    out = subprocess.run([exe, str(folder), "--extra_llm_api_options", str(bad)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "1 validation error for TorchLlmArgs\n[SIMULATED] max_batchsize" in out.stdout
    assert "Extra inputs are not permitted [type=extra_forbidden" in out.stdout
    # A decoding type 1.2's DecodingBaseConfig.from_dict does not know ("Eagle3" came later).
    bad.write_text("speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n")
    out = subprocess.run([exe, str(folder), "--extra_llm_api_options", str(bad)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "ValueError: Invalid decoding type: Eagle3" in out.stdout


def test_an_fp8_kv_cache_doubles_the_kv_tokens(host):
    _, model = host
    folder = model(LLAMA_8B)
    _, base = _sizing(folder)
    s, fp8 = _sizing(folder, extra_llm_api_options={"kv_cache_config": {"dtype": "fp8"}})
    assert s.kv_fp8 and s.fraction == sim.float32(0.9)  # the YAML block keeps the default
    assert fp8.kv_per_token * 2 == base.kv_per_token
    assert abs(fp8.kv_tokens / base.kv_tokens - 2) < 0.001


def test_tp2_halves_the_weights_per_gpu(host):
    _, model = host
    folder = model(LLAMA_8B)
    _, tp1 = _sizing(folder)
    s, tp2 = _sizing(folder, tp_size=2)
    assert s.tp == 2 and abs(2 * tp2.weights - tp1.weights) <= 1
    assert 2 * tp2.kv_per_token == tp1.kv_per_token  # 8 KV heads, 4 per rank
    # Half the weights leave more room per GPU: more than twice the tokens per GPU.
    assert tp2.kv_tokens > 2 * tp1.kv_tokens


def test_speculative_config_is_read_as_the_llm_api_reads_it(tmp_path):
    """TensorRT-LLM 1.2's reading (infopt/engines/data/trtllm-1.2-llm-args.json): NGram drafts
    max_draft_len tokens and needs max_matching_ngram_size > 0 (default 0); MTP drafts
    num_nextn_predict_layers (default 1), whatever max_draft_len says; Eagle (EAGLE-3 on the
    PyTorch backend; 1.2 has no "Eagle3" tag) and DraftTarget need a drafter folder; a planted
    effect yields more tokens a step at a higher step cost."""
    opts = {"model": "m"}
    assert sim.speculation_of(sim.settle(opts, {})) is None
    ngram = sim.speculation_of(sim.settle(opts, {"speculative_config": {
        "decoding_type": "NGram", "max_draft_len": 4, "max_matching_ngram_size": 3}}))
    assert (ngram.kind, ngram.k) == ("ngram", 4) and ngram.tokens_per_step() > 1
    with pytest.raises(SystemExit):  # validate_speculative_config's assert
        sim.speculation_of(sim.settle(opts, {"speculative_config": {
            "decoding_type": "NGram", "max_draft_len": 4}}))
    mtp = {"decoding_type": "MTP", "num_nextn_predict_layers": 3}
    assert sim.speculation_of(sim.settle(opts, {"speculative_config": mtp})).k == 3
    # max_draft_len is overwritten: one draft token, the num_nextn_predict_layers default.
    assert sim.speculation_of(sim.settle(opts, {"speculative_config": {
        "decoding_type": "MTP", "max_draft_len": 4}})).k == 1
    head = tmp_path / "eagle3"
    head.mkdir()
    (head / "config.json").write_text("{}")
    eagle = sim.speculation_of(sim.settle(opts, {"speculative_config": {
        "decoding_type": "Eagle", "max_draft_len": 3, "speculative_model": str(head)}}))
    assert (eagle.kind, eagle.k) == ("eagle3", 3)
    with pytest.raises(SystemExit):
        sim.speculation_of(sim.settle(opts, {"speculative_config": {
            "decoding_type": "DraftTarget", "max_draft_len": 3}}))
    with pytest.raises(ValueError, match="Invalid decoding type: Eagle3"):
        sim.extra_forbidden({"speculative_config": {"decoding_type": "Eagle3",
                                                    "max_draft_len": 3}})
    # A nested block's unknown key is its own model's refusal (built before TorchLlmArgs).
    assert sim.extra_forbidden({"speculative_config": {**mtp, "num_nextn_layers": 2}}) == (
        "MTPDecodingConfig", [("num_nextn_layers", 2)])
    assert sim.extra_forbidden({"cuda_graph_config": {"padding": True}}) == (
        "CudaGraphConfig", [("padding", True)])


def test_the_prompt_cap_follows_max_num_tokens_and_chunked_prefill(host):
    """The adapter's control (the defaults) refuses prompts over 8,192 tokens; its baseline at
    the full 131,072-token context turns chunked prefill on and takes them (llm.py
    BaseLLM._check_arguments reads enable_chunked_prefill); a lower --max_num_tokens without
    chunked prefill lowers the cap."""
    _, model = host
    folder = model(LLAMA_8B)
    s, _ = _sizing(folder)
    assert not s.chunked_prefill and s.max_num_tokens == sim.DEFAULT_MAX_NUM_TOKENS
    assert sim.prompt_refusal(s, 8192) is None
    assert sim.prompt_refusal(s, 8193) == ("The sum of prompt length (8193.0), query length "
                                           "(0) should not exceed max_num_tokens (8192)")
    s, _ = _sizing(folder, max_num_tokens=2048)
    assert "max_num_tokens (2048)" in sim.prompt_refusal(s, 4096)
    cfg = json.loads((folder / "config.json").read_text())
    base = trtllm.baseline_config(trtllm_target(folder, cfg["max_position_embeddings"]))
    launch = trtllm.build_launch(base, "trtllm-serve", 8000)
    write_launch_files(launch)
    opts = sim.parse_cli(launch.argv[1:])
    s = sim.settle(opts, sim.read_extra(opts.get("extra_llm_api_options")))
    assert s.chunked_prefill and sim.prompt_refusal(s, 131_000) is None
