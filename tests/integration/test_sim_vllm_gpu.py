"""The simulated vLLM GPU engine (tests/sim/vllm_gpu.py) driven through infopt's own vLLM
adapter, as a trial would: started from the adapter's argv, read by infopt's log parsers,
probed by the API contract, scored by the quality gate's teacher forcing, and failing the way
vLLM fails when a model does not fit, with infopt's troubleshooting naming the cause. The GPU
is a SIMULATED H100 SXM whose figures come from infopt's sourced GPU table (memory as NVML
reports it, HBM bandwidth, dense BF16, NVLink per direction); the model configs are the real
ones in tests/fixtures/model_configs. No GPU ran any of this."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.launch import ServingTarget
from infopt.engines.vllm import adapter as vllm
from infopt.hardware.catalog import load_catalog
from infopt.specs.base import EngineStartError
from infopt.specs.serving import with_knobs
from infopt.troubleshoot.diagnose import diagnose_file
from tests.fixture_data import MODEL_CONFIGS
from tests.sim import gpu_host
from tests.sim import vllm_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

def sim_gpu(key: str = "h100_sxm5_80gb", count: int = 8) -> dict:
    """The simulated GPU's facts from infopt's sourced GPU table (no NVLink: PCIe Gen4 x16's
    32 GB/s per direction)."""
    g = next(s for s in load_catalog() if s.key == key)
    return {"name": g.name, "memory_bytes": g.nvml_memory_total_mib * 2**20,
            "hbm_bytes_per_s": g.bandwidth_bytes_per_s,
            "bf16_flops_per_s": g.dense_bf16_flops_per_s, "count": count,
            "link_bytes_per_s": g.nvlink_bytes_per_s_per_direction or 32e9,
            "compute_capability": g.compute_capability}


def sim_host(tmp_path: Path, monkeypatch, stand_in) -> tuple[str, object]:
    """A simulated engine's `python` (`stand_in`: a tests/sim engine module), its GPU in the
    environment the engine inherits, and a model folder per fixture config."""
    monkeypatch.setenv("INFOPT_SIM_GPU", json.dumps(sim_gpu()))
    monkeypatch.setenv("INFOPT_SIM_TIME_SCALE", "0.05")
    python = stand_in.write_python(tmp_path / f"sim-{stand_in.__name__.rsplit('.', 1)[-1]}"
                                   / "bin")

    def model(name: str) -> Path:
        folder = tmp_path / "models" / name
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(MODEL_CONFIGS / f"{name}.json", folder / "config.json")
        return folder
    return python, model


def control(adapter_module, folder: Path, **knobs):
    """The engine's control configuration for the model in `folder`, with `knobs` changed."""
    cfg = json.loads((folder / "config.json").read_text())
    t = ServingTarget(model_path=str(folder), served_model_name="m",
                      native_context_tokens=cfg["max_position_embeddings"], usable_cpus=32)
    return with_knobs(adapter_module.control_config(t), knobs)


@pytest.fixture
def host(tmp_path, monkeypatch):
    return sim_host(tmp_path, monkeypatch, sim)


def _config(folder: Path, **knobs):
    return control(vllm, folder, **knobs)


def test_an_8b_model_serves_on_one_simulated_h100_through_the_adapter(host, tmp_path):
    from infopt.contract.verify import verify_endpoint
    from infopt.quality.teacher import build_reference

    python, model = host
    assert vllm.detect_version(python) == sim.VERSION and vllm.build_device(python) == "cuda"
    cfg = _config(model("meta-llama__Llama-3.1-8B-Instruct"), max_model_len=8192)
    running = process.start(vllm.ADAPTER, cfg, python, tmp_path / "engine.log", 16 * 10**9)
    try:
        log = Path(running.log_path).read_text()
        assert "SIMULATED vLLM" in log and "Using FLASH_ATTN attention backend" in log
        kv = vllm.kv_from_log(log)  # infopt's own parser of "GPU KV cache size"
        assert kv is not None and kv.tokens > 8192
        ep = endpoint_for("vllm", running.base_url, "m", running.pid)
        checks = {c.feature: c for c in verify_endpoint(ep, features=(
            "models", "whole", "stream", "include_usage"))}
        assert all(c.ok for c in checks.values()), checks
        ref = build_reference(ep, tokens=8, prompts={"a": "hello there", "b": "1, 2, 3,"})
        assert ref.self_agreement == 1.0  # it scores the tokens it generated
    finally:
        process.stop(running.pid)


def test_weights_beyond_one_gpu_fail_as_cuda_out_of_memory(host, tmp_path):
    python, model = host
    cfg = _config(model("meta-llama__Meta-Llama-3.1-70B"), max_model_len=8192)
    with pytest.raises(EngineStartError) as err:
        process.start(vllm.ADAPTER, cfg, python, tmp_path / "oom.log", 140 * 10**9)
    d = diagnose_file(str(err.value.log_path), "vllm")
    assert d.category.value == "oom" and "CUDA out of memory" in d.root_error


def test_a_full_context_beyond_the_kv_left_fails_with_vllms_kv_error(host, tmp_path):
    python, model = host
    # 70B at TP=2: ~66 GiB of weights per GPU leaves ~4 GiB of KV, short of one 131,072-token
    # request (160 KiB a token per GPU).
    cfg = _config(model("meta-llama__Meta-Llama-3.1-70B"), tensor_parallel_size=2)
    with pytest.raises(EngineStartError) as err:
        process.start(vllm.ADAPTER, cfg, python, tmp_path / "kv.log", 140 * 10**9)
    d = diagnose_file(str(err.value.log_path), "vllm")
    assert d.category.value == "kv_insufficient", d
    assert "max seq len (131072)" in d.root_error
    # The remedy that keeps the context is offered; shrinking it is not contract-preserving.
    assert any(r.preserves_contract for r in d.remedies)


def test_the_step_time_follows_batch_tp_kv_dtype_and_cuda_graphs():
    """The timing model has something for the ladder to find, in the directions the hardware
    gives (its own arithmetic, not infopt's cost model)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(MODEL_CONFIGS / "meta-llama__Meta-Llama-3.1-70B.json",
                    Path(d) / "config.json")
        model = gpu_host.read_model(d)
    gpu = gpu_host.Gpu(**sim_gpu())

    def step(batch=1, ctx=2048, **flags):
        argv = ["--model", "x", "--max-model-len", "8192", *sum(
            ([f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
             for k, v in flags.items()), [])]
        a = sim.parser().parse_args(argv)
        return gpu_host.step_s(model, gpu, sim.shape_of(a), sim.size_memory(model, gpu, a), batch, ctx)

    assert step(tensor_parallel_size=4) < step(tensor_parallel_size=2)
    assert step(batch=64, tensor_parallel_size=4) > step(batch=1, tensor_parallel_size=4)
    assert step(batch=64, tensor_parallel_size=4, kv_cache_dtype="fp8") < \
        step(batch=64, tensor_parallel_size=4)
    assert step(tensor_parallel_size=4, enforce_eager=True) > step(tensor_parallel_size=4)
    # PP stages run one after another for a token: no faster than TP=1 at batch 1.
    assert step(pipeline_parallel_size=4) >= step(tensor_parallel_size=1) * 0.99


def test_a_flag_vllm_does_not_have_is_refused_like_its_parser_refuses_it(host, tmp_path):
    import subprocess

    python, model = host
    folder = model("meta-llama__Llama-3.1-8B-Instruct")
    out = subprocess.run([python, "-m", "vllm.entrypoints.openai.api_server", "--model",
                          str(folder), "--tensor-paralel-size", "2"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "unrecognized arguments: --tensor-paralel-size" in out.stderr


@pytest.mark.parametrize(("gpu", "verdict", "kernel"), [
    ("h100_sxm5_80gb", "as expected", "CutlassFp8BlockScaledMMKernel"),
    ("l40s", "fallback", "MarlinFP8ScaledMMLinearKernel")])
def test_a_block_fp8_checkpoints_kernel_is_read_from_the_log_and_judged(
        host, tmp_path, monkeypatch, gpu, verdict, kernel):
    """Issue 50: the stand-in picks the kernel by vLLM 0.32's own CUDA lists and gates (block
    FP8: CUTLASS needs CC 9.0, so an L40S at 8.9 falls back to Marlin W8A16 with vLLM's
    warning); infopt reads the line from the trial's own log and its support matrix, which
    expects native FP8 from CC 8.9, flags the L40S case."""
    from infopt.runs.load_evidence import kernel_check, own_log
    from infopt.specs.checkpoint import CheckpointFormat, DeviceKind, DeviceTarget

    python, model = host
    g = sim_gpu(gpu, count=1)
    monkeypatch.setenv("INFOPT_SIM_GPU", json.dumps(g))
    cfg = _config(model("Qwen__Qwen3-30B-A3B-FP8"), max_model_len=4096)
    running = process.start(vllm.ADAPTER, cfg, python, tmp_path / "engine.log", 31 * 10**9)
    try:
        got = kernel_check(cfg, own_log(running.log_path, tmp_path), CheckpointFormat.FP8,
                           DeviceTarget(kind=DeviceKind.CUDA,
                                        compute_capability=g["compute_capability"]))
    finally:
        process.stop(running.pid)
    assert got.finding.verdict.value == verdict and got.finding.found == [kernel]
    assert got.finding.flagged == (verdict == "fallback")
