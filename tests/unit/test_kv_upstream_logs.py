"""The cost model against real vLLM/SGLang startup logs from upstream issues
(tests/fixtures/kv_logs/cases.json: every number transcribed from the linked thread).

Three checks, from exact to estimated:
  (a) KV bytes per token per GPU: the logged KV memory divided by our per-token figure, block-
      rounded, must give the logged token/block count within 2% (a KV geometry check);
  (b) weights: where the log states the weights' memory, our estimate within 3%;
  (c) end to end: our predicted KV capacity from device memory, utilization and our overhead
      estimates vs the logged capacity. Reported (median and worst error), asserted only in
      direction for the startups that failed for lack of KV memory.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from infopt.costmodel.allocation import EngineKnobs, round_to_blocks
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.kv import kv_bytes_per_token_per_gpu
from infopt.costmodel.weights import path_from_quantization, weights_bytes
from infopt.engines.support import kv_options
from infopt.hardware.catalog import match_gpu
from infopt.model.classify import classify_config
from infopt.specs.fit import DeviceBudget
from tests.fixture_data import MODEL_CONFIGS

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "kv_logs"
CASES = json.loads((FIX / "cases.json").read_text())
MODELS = json.loads((FIX / "models.json").read_text())
GIB = 2**30
# The 8.69 GiB in #13061 is one rank's figure quoted in prose while 81,536 tokens is the engine-
# wide minimum from an error message (see the case notes): the two are not the same measurement.
NOT_COMPARABLE = {"vllm-r1-distill-qwen-14b-2x4090"}


def _model(case):
    spec = MODELS.get(case["model"])
    if spec is None:
        return None
    if "shared" in spec:
        cfg = json.loads((MODEL_CONFIGS / spec["shared"]).read_text())
        cfg.update(spec.get("override", {}))
    else:
        cfg = spec["config"]
    return classify_config(cfg, model=case["model"])


def _logged_tokens(case):
    lg = case["logged"]
    if lg.get("kv_cache_tokens") is not None:
        return lg["kv_cache_tokens"]
    if lg.get("gpu_blocks") is not None:
        return lg["gpu_blocks"] * (case.get("block_size") or 16)  # V0 default block size 16
    return None


GEOMETRY = [c for c in CASES if _model(c) and _logged_tokens(c) and c["id"] not in NOT_COMPARABLE
            and (c["logged"].get("available_kv_gib") or c["logged"].get("k_size_gb"))]


@pytest.mark.parametrize("case", GEOMETRY, ids=[c["id"] for c in GEOMETRY])
def test_kv_bytes_per_token_matches_logged_capacity(case):
    m = _model(case)
    lg = case["logged"]
    bpt = kv_bytes_per_token_per_gpu(m, case["kv_cache_dtype"], case["tp"], case["pp"])
    tokens = _logged_tokens(case)
    if case["engine"] == "sglang":
        # SGLang logs the K pool alone: K bytes per token = half the K+V figure.
        observed = lg["k_size_gb"] * GIB / tokens
        assert abs(observed - bpt / 2) / (bpt / 2) <= 0.02, (case["url"], observed, bpt / 2)
    else:
        predicted = round_to_blocks(lg["available_kv_gib"] * GIB, bpt, 16)
        assert abs(predicted - tokens) / tokens <= 0.02, (case["url"], predicted, tokens)


WEIGHTS = [c for c in CASES if _model(c) and c["logged"].get("weights_gib")]


@pytest.mark.parametrize("case", WEIGHTS, ids=[c["id"] for c in WEIGHTS])
def test_weight_estimate_matches_logged_weights(case):
    m = _model(case)
    path = path_from_quantization(m.quantization, None)
    ours = weights_bytes(m, path) / (case["tp"] * case["pp"]) / GIB
    logged = case["logged"]["weights_gib"]
    assert abs(ours - logged) / logged <= 0.03, (case["url"], ours, logged)


def _device(case) -> DeviceBudget:
    lg = case["logged"]
    spec = match_gpu(case["gpu"], case["gpu_memory_gib"] * GIB)
    if lg.get("total_gpu_memory_gib"):
        mem = int(lg["total_gpu_memory_gib"] * GIB)
    elif spec and spec.nvml_memory_total_mib:
        mem = spec.nvml_memory_total_mib * 2**20
    else:
        mem = case["gpu_memory_gib"] * GIB
    return DeviceBudget(name=case["gpu"], memory_bytes=mem, bandwidth_bytes_per_s=None,
                        dense_flops_per_s={}, source=case["url"])


def _is_v0(case) -> bool:
    """vLLM V0 logs '# GPU blocks'; V1 logs 'GPU KV cache size: N tokens'."""
    return case["engine"] == "vllm" and "GPU KV cache size" not in case["log_excerpt"] and \
        "V1" not in case["notes"]


def _knobs(case, m) -> EngineKnobs:
    base = EngineKnobs(gpu_memory_utilization=case["gpu_memory_utilization"] or 0.9,
                       mem_fraction_static=case["mem_fraction_static"] or 0.88)
    if _is_v0(case):
        # V0 (no chunked prefill) profiled one batch of max_model_len tokens and captured CUDA
        # graphs after sizing the KV cache (nothing subtracted for them).
        return replace(base, max_num_batched_tokens=max(
            2048, case["max_model_len"] or m.native_context_tokens), max_num_seqs=256,
            enforce_eager=True)
    return base


def end_to_end_errors() -> list[tuple[str, int, int, float]]:
    """(case id, predicted tokens, logged tokens, relative error) for every comparable case."""
    out = []
    for case in CASES:
        m, logged = _model(case), _logged_tokens(case)
        if m is None or logged is None or case["id"] in NOT_COMPARABLE:
            continue
        knobs = _knobs(case, m)
        req = FitRequest(model=m, device=_device(case), gpu_count=case["tp"] * case["pp"],
                         engine=case["engine"], context_tokens=min(
                             case["max_model_len"] or 4096, m.native_context_tokens),
                         concurrency=1, kv_dtype=case["kv_cache_dtype"],
                         weight_path=path_from_quantization(m.quantization, None),
                         tp=case["tp"], pp=case["pp"], knobs=knobs,
                         kv=kv_options(case["engine"], None))
        fit = plan_fit(req, with_alternatives=False)
        if logged == 0:  # a failed start: both agree when we also predict no KV room
            err = 0.0 if fit.kv_capacity_tokens == 0 else float("inf")
        else:
            err = (fit.kv_capacity_tokens - logged) / logged
        out.append((case["id"], fit.kv_capacity_tokens, logged, err))
    return out


def test_end_to_end_prediction_error_is_measured_and_reported(capsys):
    rows = end_to_end_errors()
    assert len(rows) >= 8
    finite = [abs(e) for *_, e in rows if e != float("inf")]
    print("\nend-to-end KV capacity, predicted vs logged (upstream startup logs):")
    for cid, pred, logged, err in rows:
        print(f"  {cid:40} predicted {pred:>9,} logged {logged:>9,} error {err:+.1%}")
    print(f"  median |error| {statistics.median(finite):.1%}, worst {max(finite):.1%}")
    assert statistics.median(finite) < 1.0  # sanity: the model is not off by orders of magnitude


def test_failed_startups_are_predicted_not_to_fit():
    # vllm #10517: max_model_len 29,000 on a 24 GB RTX 3090 at 0.9 left room for 23,648 tokens;
    # vllm #13882: a 7B bnb-4bit on an 8 GB RTX 4060 at 0.7 had a negative KV budget.
    for cid in ("vllm-llama31-8b-rtx3090-len29k", "vllm-qwen25-7b-bnb4-rtx4060"):
        case = next(c for c in CASES if c["id"] == cid)
        m = _model(case)
        fit = plan_fit(FitRequest(
            model=m, device=_device(case), gpu_count=1, engine="vllm",
            context_tokens=case["max_model_len"], concurrency=1, kv_dtype="auto",
            weight_path=path_from_quantization(m.quantization, None),
            knobs=_knobs(case, m), kv=kv_options("vllm", None)))
        assert not fit.fits and fit.gap_bytes > 0 and fit.alternatives, cid
