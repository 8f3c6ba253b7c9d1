"""`infopt inspect`, `shortlist` and `hardware` through the real console script, against the
fake hub (real huggingface_hub client over real HTTP) and this machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.hubserver import FakeHub

pytestmark = pytest.mark.integration

INFOPT = str(Path(os.sys.executable).parent / "infopt")


@pytest.fixture(scope="module")
def hub():
    with FakeHub() as h:
        yield h


def _run(*args, env=None):
    clean = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_ENDPOINT")}
    return subprocess.run([INFOPT, *args], capture_output=True, text=True, timeout=120,
                          env={**clean, **(env or {})})


def test_inspect_hub_model_json_contract(hub, tmp_path):
    out = _run("inspect", "Qwen/Qwen3-8B", "--json",
               env={"HF_ENDPOINT": hub.endpoint, "XDG_CACHE_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("model", "revision", "architecture", "num_layers", "hidden_size", "vocab_size",
                "native_context_tokens", "attention", "layer_kinds", "sliding_window_tokens",
                "moe", "params_total", "params_active_per_token", "quantization",
                "chat_template_present", "license", "gated"):
        assert key in d, key
    assert d["model"] == "Qwen/Qwen3-8B" and len(d["revision"]) == 40  # pinned to a commit sha
    assert d["attention"]["kind"] == "GQA" and d["num_layers"] == 36
    assert d["moe"] is None and d["quantization"] is None


def test_inspect_gated_model_without_token_says_what_to_do(hub, tmp_path):
    out = _run("inspect", "meta-llama/Llama-3.1-8B-Instruct",
               env={"HF_ENDPOINT": hub.endpoint, "XDG_CACHE_HOME": str(tmp_path)})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "HF_TOKEN" in out.stderr


def test_inspect_unknown_repo_and_unreachable_hub(hub, tmp_path):
    out = _run("inspect", "nobody/does-not-exist",
               env={"HF_ENDPOINT": hub.endpoint, "XDG_CACHE_HOME": str(tmp_path)})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    closed = _run("inspect", "Qwen/Qwen3-8B", "--endpoint", "http://127.0.0.1:9",
                  env={"XDG_CACHE_HOME": str(tmp_path)})
    assert closed.returncode == 2 and "http://127.0.0.1:9" in closed.stderr


def test_inspect_local_gguf(gguf_model):
    out = _run("inspect", str(gguf_model))
    assert out.returncode == 0, out.stderr
    assert "GQA: 9 query / 3 KV heads x 64" in out.stdout and "Native context: 8192" in out.stdout


def test_shortlist_for_a_hopper_gpu(hub, tmp_path):
    out = _run("shortlist", "Qwen/Qwen3-8B", "--device", "cuda:9.0", "--json",
               env={"HF_ENDPOINT": hub.endpoint, "XDG_CACHE_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["candidates"] and all(c["weight_bits"] <= 4 for c in s["candidates"])
    reasons = {r["repo_id"]: r["reason"] for r in s["rejected"]}
    # The repo named AWQ whose config says GPTQ is rejected on its metadata, not its name.
    assert reasons["speedy-quants/Qwen3-8B-AWQ"] in ("name_mismatch", "metadata_inconsistent")


def test_shortlist_bad_device_flag(hub):
    out = _run("shortlist", "Qwen/Qwen3-8B", "--device", "tpu")
    assert out.returncode == 2 and "kind must be one of" in out.stderr


def test_hardware_reports_this_hosts_route():
    """The console script says what the inventory the optimizer plans with finds (NVML): no
    GPU -> the CPU route; GPUs -> each one listed with its memory, and no CPU-route line."""
    from tests.hostfacts import inventory

    out = _run("hardware", "--json")
    assert out.returncode == 0, out.stderr
    hw = json.loads(out.stdout)
    assert "NVML" in hw["gpu_probe"]
    # Measured here (its rate is the machine's: `make bench` reports it), with its noise.
    bw = hw["host_memory_bandwidth"]
    assert bw["median_bytes_per_s"] > 0 and bw["spread"] >= 0
    gpus = inventory().gpus
    assert [(g["index"], g["name"], g["memory_total_bytes"]) for g in hw["gpus"]] == [
        (g.index, g.name, g.memory_total_bytes) for g in gpus]
    text = _run("hardware", "--no-measure").stdout
    assert ("This is the CPU route" in text) == (not gpus), text
    for g in gpus:
        assert f"GPU {g.index}: {g.name}" in text
