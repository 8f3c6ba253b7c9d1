"""The simulated SGLang GPU engine (tests/sim/sglang_gpu.py) driven through infopt's own SGLang
adapter, as a trial would: started from the adapter's argv, its version read by the adapter's
probe, its KV pool read by infopt's log parser and compared with the fit, probed by the API
contract, and failing the way SGLang fails when memory does not fit, with infopt's
troubleshooting naming the cause. The GPU is a SIMULATED H100 SXM from infopt's sourced GPU
table; the model configs are the real ones in tests/fixtures/model_configs. No GPU ran any of
this."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from infopt.engines import endpoint_for, identify_engine, process
from infopt.engines.sglang import adapter as sglang
from infopt.specs.base import EngineStartError
from infopt.troubleshoot.diagnose import diagnose_file
from tests.fixture_data import MODEL_CONFIGS
from tests.integration.test_sim_vllm_gpu import control, sim_gpu, sim_host
from tests.sim import gpu_host
from tests.sim import sglang_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def host(tmp_path, monkeypatch):
    return sim_host(tmp_path, monkeypatch, sim)


def _config(folder: Path, **knobs):
    return control(sglang, folder, **knobs)


def test_an_8b_model_serves_on_one_simulated_h100_through_the_sglang_adapter(host, tmp_path):
    from infopt.contract.verify import verify_endpoint
    from infopt.quality.teacher import build_reference

    python, model = host
    assert sglang.detect_version(python) == sim.VERSION
    cfg = _config(model("meta-llama__Llama-3.1-8B-Instruct"))
    running = process.start(sglang.ADAPTER, cfg, python, tmp_path / "engine.log", 16 * 10**9)
    try:
        log = Path(running.log_path).read_text()
        assert "SIMULATED SGLang" in log and "The server is fired up and ready to roll!" in log
        kv = sglang.kv_from_log(log)  # infopt's own parser of "KV Cache is allocated"
        # 0.88 x 79.6 GiB (NVML's 81,559 MiB) - 0.5 GiB context - ~15 GiB of weights = ~54.5
        # GiB at 128 KiB a token (32 layers x 8 KV heads x 128 x 2 x 2 bytes): ~446k tokens.
        assert kv is not None and 400_000 < kv.tokens < 500_000, kv
        assert "max_running_requests=2048" in log  # 446k / 131,072 x 512 < 2,048: the floor
        ep = endpoint_for("sglang", running.base_url, "m", running.pid)
        checks = {c.feature: c for c in verify_endpoint(ep, features=(
            "models", "whole", "stream", "include_usage"))}
        assert all(c.ok for c in checks.values()), checks
        # The quality gate's teacher forcing through SGLang's native /generate: the engine
        # scores the tokens it generated, and a server without the route fails loudly.
        ref = build_reference(ep, tokens=8, prompts={"a": "hello there", "b": "1, 2, 3,"})
        assert ref.self_agreement == 1.0 and "SGLang /generate" in ep.scoring.how
        # `infopt quality` against a bare URL knows it for SGLang (GET /get_model_info).
        assert identify_engine(running.base_url) == "sglang"
    finally:
        process.stop(running.pid)


def test_a_static_pool_the_weights_fill_fails_with_sglangs_not_enough_memory(host, tmp_path):
    python, model = host
    # 70B at TP 2: ~66 GiB of weights per GPU, against 0.5 x 79.6 GiB of static pool.
    cfg = _config(model("meta-llama__Meta-Llama-3.1-70B"), tp_size=2, mem_fraction_static=0.5)
    with pytest.raises(EngineStartError) as err:
        process.start(sglang.ADAPTER, cfg, python, tmp_path / "nem.log", 140 * 10**9)
    d = diagnose_file(str(err.value.log_path), "sglang")
    assert d.category.value in ("oom", "kv_insufficient"), d
    assert "Not enough memory" in d.root_error
    assert any("mem-fraction-static" in r.change or "mem_fraction_static" in r.change
               for r in d.remedies), d.remedies


def test_weights_beyond_one_gpu_fail_as_cuda_out_of_memory(host, tmp_path):
    python, model = host
    cfg = _config(model("meta-llama__Meta-Llama-3.1-70B"))
    with pytest.raises(EngineStartError) as err:
        process.start(sglang.ADAPTER, cfg, python, tmp_path / "oom.log", 140 * 10**9)
    d = diagnose_file(str(err.value.log_path), "sglang")
    assert d.category.value == "oom" and "CUDA out of memory" in d.root_error


def test_the_default_static_fraction_follows_sglangs_memory_rule():
    import argparse

    from tests.sim.gpu_host import Gpu

    h100 = Gpu(name="H100", memory_bytes=81559 * 2**20, hbm_bytes_per_s=3.35e12,
               bf16_flops_per_s=9.9e14, count=8, link_bytes_per_s=4.5e11)

    def frac(tp: int, pp: int = 1, graphs: str | None = None) -> float:
        a = argparse.Namespace(tp_size=tp, pp_size=pp, chunked_prefill_size=8192,
                               cuda_graph_backend_decode=graphs, cuda_graph_backend_prefill=graphs,
                               cuda_graph_max_bs_decode=256 if tp < 4 else 512)
        return sim.default_mem_fraction(a, h100)
    # 0.5.23 on one H100: 512 + 1.5 x 8192 + 128 + 2 x 256 + 8 x 49 prefill graphs MB.
    assert frac(1) == 0.83
    assert frac(8) < frac(4) < frac(2) < frac(1)  # TP's share and larger decode graphs
    assert frac(1, graphs="disabled") > frac(1)
    # infopt's fit assumes the same share (tests/integration/test_sglang_argv.py checks both
    # against SGLang's own resolution).
    assert sglang.default_mem_fraction_static(81559 * 2**20, 1) == frac(1)


def test_disabled_cuda_graphs_slow_the_simulated_step():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json",
                    Path(d) / "config.json")
        model = gpu_host.read_model(d)
    gpu = gpu_host.Gpu(**sim_gpu())

    def step(*flags: str) -> float:
        a = sim.parser().parse_args(["--model-path", "x", "--context-length", "8192",
                                     "--mem-fraction-static", "0.88", *flags])
        return gpu_host.step_s(model, gpu, sim.shape_of(a, 8), sim.size_memory(model, gpu, a),
                               8, 2048)

    assert step("--cuda-graph-backend-decode", "disabled") > step()
    assert step("--kv-cache-dtype", "fp8_e4m3") < step()


def test_a_flag_sglang_does_not_have_is_refused_like_its_parser_refuses_it(host):
    python, model = host
    folder = model("meta-llama__Llama-3.1-8B-Instruct")

    def launch(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([python, "-m", "sglang.launch_server", "--model-path",
                               str(folder), *flags], capture_output=True, text=True, timeout=30)
    out = launch("--tensor-paralel-size", "2")
    assert out.returncode == 2 and "unrecognized arguments: --tensor-paralel-size" in out.stderr
    # 0.5.23 has only the per-phase spellings: the old one is an ambiguous abbreviation, as
    # SGLang's parser (abbreviations allowed) answers it.
    out = launch("--cuda-graph-max-bs", "64")
    assert out.returncode == 2 and ("ambiguous option: --cuda-graph-max-bs could match "
                                    "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
                                    in out.stderr), out.stderr


def test_speculation_without_a_cap_runs_at_sglangs_48_and_the_decode_graphs_stay():
    """speculative_hook.py resets an unset --max-running-requests to 48, after the memory
    hook sized the decode graphs (so they stay at the GPU's default); an explicit cap stays."""
    a = sim.parser().parse_args(["--model-path", "x", "--speculative-algorithm", "NGRAM",
                                 "--context-length", "8192"])
    sim.reset_running_cap(a)
    assert a.max_running_requests == 48
    assert sim.max_running_requests(a, 10**6) == 48  # not the pool's 4,096
    kept = sim.parser().parse_args(["--model-path", "x", "--speculative-algorithm", "NGRAM",
                                    "--max-running-requests", "600"])
    sim.reset_running_cap(kept)
    assert kept.max_running_requests == 600
    plain = sim.parser().parse_args(["--model-path", "x"])
    sim.reset_running_cap(plain)
    assert plain.max_running_requests is None
    h100 = 81559 * 2**20
    assert sim.default_graph_max_bs(h100, 1) == 256 and sim.default_graph_max_bs(h100, 8) == 512
    assert sim.default_graph_max_bs(h100, 1, 64) == 64


def test_speculation_is_read_as_sglang_reads_its_flags():
    """NGRAM drafts its draft tokens less the root, EAGLE without a draft path needs the model's own MTP
    layers (DeepSeek-V3's num_nextn_predict_layers), EAGLE3 needs a draft path; a planted
    speculative effect yields more tokens a step at a higher step cost."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json",
                    Path(d) / "config.json")
        llama = gpu_host.read_model(d)
        shutil.copy(MODEL_CONFIGS / "deepseek-ai__DeepSeek-V3.json", Path(d) / "config.json")
        deepseek = gpu_host.read_model(d)

    def spec(model, *flags: str):
        a = sim.parser().parse_args(["--model-path", "x", *flags])
        return sim.speculation_of(a, model)

    assert spec(llama) is None
    ngram = spec(llama, "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4")
    assert (ngram.kind, ngram.k) == ("ngram", 3)  # the count includes the root
    assert spec(llama, "--speculative-algorithm", "NGRAM").k == 11  # SGLang's default 12
    assert ngram.tokens_per_step() > 1 and ngram.step_factor() > 1
    mtp = spec(deepseek, "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1")
    assert (mtp.kind, mtp.k) == ("mtp", 1) and deepseek.mtp_layers == 1
    for bad in (("--speculative-algorithm", "EAGLE"), ("--speculative-algorithm", "EAGLE3")):
        with pytest.raises(SystemExit):
            spec(llama, *bad)  # no MTP layers, no draft path
