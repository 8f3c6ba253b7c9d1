"""`infopt plan` through the real console script: the --json contract, catalog names and
aliases, the CPU route on this host, and the impossible inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixture_data import MODEL_CONFIGS

pytestmark = pytest.mark.integration
INFOPT = str(Path(os.sys.executable).parent / "infopt")


def _run(*args):
    return subprocess.run([INFOPT, "plan", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama31-8b")
    shutil.copy(MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json", d / "config.json")
    return d


@pytest.mark.parametrize("gpu", ["H100 SXM", "H100-SXM5-80GB", "NVIDIA H100 80GB HBM3"])
def test_plan_json_contract_and_gpu_aliases(llama_dir, gpu):
    out = _run("--model", str(llama_dir), "--gpu", gpu, "--concurrency", "8", "--context",
               "32768", "--engine", "vllm", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("weights_bytes_per_gpu", "kv_bytes_per_token_per_gpu", "kv_capacity_tokens",
                "max_concurrency_at_context", "fits", "gap_bytes", "alternatives",
                "assumptions"):
        assert key in d
    assert d["gpu"] == "H100 SXM5 80GB" and d["kv_bytes_per_token_per_gpu"] == 131072
    assert d["fits"] and d["ceilings"]["rows"]
    assert d["gpus_to_request"] == 1 and d["gpus_to_request_layout"] == "TP=1"


def test_plan_names_the_gpus_the_optimize_gpu_deployment_should_request(llama_dir):
    """8 sequences at the full 131,072 tokens need 128 GiB of KV: the smallest layout that
    fits is the one the plan's own alternatives name, and a plan of it fits."""
    out = _run("--model", str(llama_dir), "--gpu", "H100 SXM", "--concurrency", "8",
               "--engine", "vllm", "--json")
    d = json.loads(out.stdout)
    n = d["gpus_to_request"]
    assert not d["fits"] and n > 1 and d["gpus_to_request_layout"] == f"TP={n}"
    assert any(a.startswith(f"tensor parallel tp={n} on {n} GPUs: fits") for a in d["alternatives"])
    smaller = _run("--model", str(llama_dir), "--gpu", "H100 SXM", "--concurrency", "8",
                   "--engine", "vllm", "--tp", str(n // 2), "--gpu-count", str(n // 2), "--json")
    assert not json.loads(smaller.stdout)["fits"]
    text = _run("--model", str(llama_dir), "--gpu", "H100 SXM", "--concurrency", "8",
                "--engine", "vllm").stdout
    assert f"`--job-variable gpu_count={n}`" in text
    # Nothing fits on a node of 8 L4s: said, not a number.
    l4 = json.loads(_run("--model", str(llama_dir), "--gpu", "L4", "--concurrency", "16",
                         "--json").stdout)
    assert l4["gpus_to_request"] is None


def test_plan_does_not_fit_gives_gap_and_options(llama_dir):
    out = _run("--model", str(llama_dir), "--gpu", "L4", "--concurrency", "16", "--json")
    d = json.loads(out.stdout)
    assert not d["fits"] and d["gap_bytes"] > 0 and d["alternatives"]
    assert d["context_tokens"] == 131072  # full native context unless asked otherwise


def test_plan_on_this_cpu_host_with_the_bundled_gguf(gguf_model):
    out = _run("--model", str(gguf_model), "--concurrency", "4", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["engine"] == "llamacpp" and d["fits"]
    assert d["ceilings"]["unavailable"] and "theoretical" in d["ceilings"]["unavailable"][0]
    assert {r["envelope"] for r in d["ceilings"]["rows"]} == {"calibrated"}


@pytest.mark.parametrize("args,needle", [
    (["--gpu", "H100 SXM", "--context", "200000"], "native context"),
    (["--gpu", "H100 SXM", "--gpu-count", "0"], "--gpu-count: Input should be greater than "
                                                 "or equal to 1"),
    (["--gpu", "H100 SXM", "--context", "0"], "--context: Input should be greater than or "
                                              "equal to 1"),
    (["--gpu", "H100 SXM", "--engine", "foo"], "--engine: Input should be 'vllm'"),
    (["--gpu", "Voodoo 5 6000"], "H100 SXM5 80GB"),  # unknown name lists the known ones
    (["--gpu", "H100 SXM", "--tp", "3", "--gpu-count", "3"], "does not divide"),
    (["--gpu", "H100 SXM", "--weight-dtype", "fp7"], "unknown --weight-dtype"),
])
def test_impossible_inputs(llama_dir, args, needle):
    out = _run("--model", str(llama_dir), *args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert needle in out.stderr, out.stderr


def test_plan_layouts_from_a_recorded_8_gpu_inventory(llama_dir, tmp_path):
    from tests.fake_nvml import recorded_inventory

    inv = tmp_path / "hgx.json"
    inv.write_text(recorded_inventory("h100_sxm_8x").model_dump_json())
    out = _run("--model", str(llama_dir), "--inventory", str(inv), "--layouts",
               "--concurrency", "32", "--context", "32768")
    assert out.returncode == 0, out.stderr
    assert "on 8 x H100 SXM5 80GB" in out.stdout and "NVSwitch" in out.stdout
    rows = [ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith("  TP=")]
    assert rows[:4] == ["TP=1", "TP=2", "TP=4", "TP=8"] and len(rows) == 10
    assert "--tensor-parallel-size 8" in out.stdout
    d = json.loads(_run("--model", str(llama_dir), "--inventory", str(inv), "--layouts",
                        "--concurrency", "32", "--context", "32768", "--json").stdout)
    assert d["gpu_count"] == 8 and all(r["ceilings"] for r in d["rows"])


@pytest.mark.parametrize("content,says", [("{not json", "is not an `infopt hardware --json`"),
                                          (None, "cannot read it")])
def test_plan_bad_inventory_is_one_paragraph_and_exit_2(llama_dir, tmp_path, content, says):
    inv = tmp_path / "inv.json"
    if content is not None:
        inv.write_text(content)
    out = _run("--model", str(llama_dir), "--inventory", str(inv), "--layouts")
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("name, kind, extrapolated", [
    ("Qwen__Qwen3.5-397B-A17B", "linear_attention", "linear_attention layers"),
    ("nvidia__Llama-3_3-Nemotron-Super-49B-v1", "full_attention",
     "skipped or linear-replaced blocks"),
    ("google__gemma-3-27b-it", "sliding_attention", None)])
def test_held_out_families_plan_with_an_estimate_that_says_what_it_has_not_seen(
        tmp_path, name, kind, extrapolated):
    shutil.copy(MODEL_CONFIGS / f"{name}.json", tmp_path / "config.json")
    out = _run("--model", str(tmp_path), "--gpu", "H200 SXM", "--tp", "8", "--concurrency",
               "16", "--context", "32768", "--engine", "vllm", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["fits"] and d["layer_kinds"][kind] > 0
    decode = [r for r in d["ceilings"]["rows"] if r["phase"] == "decode"]
    assert decode and all(0 < r["estimate"]["tokens_per_s"] < r["tokens_per_s"]
                          for r in decode)
    label = decode[0]["estimate"]["label"]
    assert ("extrapolated" not in label) if extrapolated is None else (extrapolated in label)
    # The text the CLI prints without --json, from the same result (one process per family).
    from infopt.costmodel.plan import PlanResult
    from infopt.report.plan_text import render_plan

    line = render_plan(PlanResult.model_validate(d)).splitlines()[1]
    assert line.startswith("Layers: ") and kind in line


def _estimate_at(d: dict, batch: int) -> dict:
    return next(r for r in d["ceilings"]["rows"] if r["phase"] == "decode" and r["batch"] == batch
                and r["envelope"] == "theoretical" and r["kv_dtype"] == "auto"
                and r["weight_path"] == "BF16")


def test_plan_prices_the_workloads_lengths_and_says_when_it_assumes_them(llama_dir, tmp_path):
    """Issue 32: at a 1,536-token context the plan took the prompt as the whole context and the
    output as one token, pricing a full prefill into every decode step (a batch-8 estimate
    collapsing to a fraction of its ceiling). Given the lengths, or a workload file, it prices
    one prefill per request; without them it says what it assumed."""
    base = ("--model", str(llama_dir), "--gpu", "H100 SXM", "--concurrency", "8", "--context",
            "1536", "--engine", "vllm", "--json")
    given = json.loads(_run(*base, "--input-tokens", "1024", "--output-tokens", "512").stdout)
    row = _estimate_at(given, 8)
    assert row["estimate"]["tokens_per_s"] > 0.3 * row["tokens_per_s"]
    assert any("1,024 prompt + 512 output tokens" in a
               for a in given["ceilings"]["assumptions"])
    assumed = json.loads(_run(*base).stdout)
    assert any(a.startswith("lengths: ASSUMED requests of 1,024 prompt + 256 output")
               for a in assumed["ceilings"]["assumptions"])
    wl = tmp_path / "wl.yaml"
    wl.write_text("name: w\ninput_lengths: {kind: fixed, tokens: 700}\n"
                  "output_lengths: {kind: fixed, tokens: 300}\nmeasured_requests: 10\n")
    from_file = json.loads(_run(*base, "--workload", str(wl)).stdout)
    assert any("wl.yaml's mean lengths" in a and "700 prompt + 300 output" in a
               for a in from_file["ceilings"]["assumptions"])
    too_long = _run(*base, "--input-tokens", "1024", "--output-tokens", "1024")
    assert too_long.returncode == 2 and "more than the 1,536-token context" in too_long.stderr
    bad = _run(*base, "--workload", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
