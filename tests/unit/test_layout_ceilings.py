"""A multi-GPU trial's ceiling is its own layout's (issue 32, item 3): pipeline stages, DP
replicas and expert parallelism priced as the plan's layout matrix prices them, not as the
single-replica TP ceiling; and a DP server's memory fit is one replica's, on all its GPUs.

The benchmark is the real llama.cpp fixture report's (CPU step times standing in for a GPU
run: the arithmetic is tested, not the values); the host a recorded 8x H100 SXM."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.roofline import decode_row, layout_decode_row
from infopt.costmodel.weights import BF16
from infopt.model.classify import classify_config
from infopt.specs.base import InputError
from infopt.specs.fit import Envelope, Layout
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.results import OptimizationReport
from infopt.specs.serving import VllmConfig
from infopt.tuning.candidates import fit_config, level_ceilings, run_device
from infopt.tuning.level_steps import level_steps
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import FIXTURES, MODEL_CONFIGS, require

GIB = 2**30
CONTEXT = 4096  # tokens in context while decoding: KV reads matter beside the weights


def _model(name: str) -> ModelProfile:
    cfg = json.loads((MODEL_CONFIGS / name).read_text())
    return ModelProfile(path="/m", format=ModelFormat.HF, file_bytes=0,
                        inspection=classify_config(cfg, model=name), source="test")


@pytest.fixture(scope="module")
def bench():
    """The fixture's first measured benchmark, its two levels moved to concurrency 1 and 64."""
    report = OptimizationReport.model_validate_json(
        require(FIXTURES / "reports" / "llamacpp-optimize-report.json").read_text())
    b = next(t.benchmark for t in report.trials if t.benchmark is not None)
    moved = [s.model_copy(update={"level": s.level.model_copy(update={"concurrency": c})})
             for s, c in zip(b.scenarios, (1, 64), strict=True)]
    return b.model_copy(update={"scenarios": moved})


@pytest.fixture(scope="module")
def h100x8():
    return recorded_inventory("h100_sxm_8x")


def _vllm(**layout) -> VllmConfig:
    return VllmConfig(model_path="/m", max_model_len=8192, **layout)


def _theoretical(model, hw, config, bench) -> list[float]:
    return [r.ceiling for r in level_ceilings(model, hw, config, bench, CONTEXT)
            if r.envelope is Envelope.THEORETICAL]


LAYOUTS = {"TP1": {}, "PP2": {"pipeline_parallel_size": 2}, "DP2": {"data_parallel_size": 2},
           "TP2": {"tensor_parallel_size": 2},
           "TP2 DP2": {"tensor_parallel_size": 2, "data_parallel_size": 2}}


def test_each_trials_ceiling_is_the_plans_ceiling_for_its_layout(bench, h100x8):
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")
    device, _ = run_device(h100x8)
    for name, knobs in LAYOUTS.items():
        layout = Layout(tp=knobs.get("tensor_parallel_size", 1),
                        pp=knobs.get("pipeline_parallel_size", 1),
                        dp=knobs.get("data_parallel_size", 1))
        plan = [layout_decode_row(m.inspection, BF16, "auto", lvl.concurrency, CONTEXT,
                                  device, Envelope.THEORETICAL, layout).tokens_per_s
                for lvl in bench.levels]
        assert _theoretical(m, h100x8, _vllm(**knobs), bench) == pytest.approx(plan), name


def test_pipeline_and_data_parallel_trials_are_not_priced_as_one_replica(bench, h100x8):
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")
    c = {name: dict(zip((1, 64), _theoretical(m, h100x8, _vllm(**knobs), bench), strict=True))
         for name, knobs in LAYOUTS.items()}
    # One sequence: a second stage or replica adds nothing (the stages take turns, the other
    # replica idles); TP splits the weights it reads.
    assert c["PP2"][1] == pytest.approx(c["TP1"][1], rel=0.01)
    assert c["DP2"][1] == pytest.approx(c["TP1"][1])
    assert c["TP2"][1] > 1.8 * c["TP1"][1]
    # 64 sequences at 4,096 tokens: both split the KV reads, DP re-reads the weights per
    # replica, TP splits them too (priced as the single-replica ceiling, PP and DP read the
    # same as TP1 before).
    assert c["TP1"][64] < c["PP2"][64] and c["TP1"][64] < c["DP2"][64] < c["TP2"][64]
    assert c["TP2 DP2"][64] > c["TP2"][64]


def test_a_dp_level_is_its_replicas_side_by_side(bench, h100x8):
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")
    device, _ = run_device(h100x8)
    steps = list(level_steps(m.inspection, device, False, _vllm(data_parallel_size=2), bench,
                             m.native_context_tokens))
    assert [(s.batch, s.replica_batch) for s in steps] == [(1, 1), (64, 32)]
    dp2 = _theoretical(m, h100x8, _vllm(data_parallel_size=2), bench)
    replica = decode_row(m.inspection, steps[1].path, steps[1].kv_dtype, 32, CONTEXT, device,
                         Envelope.THEORETICAL, 1)
    assert dp2[1] == pytest.approx(2 * replica.tokens_per_s)


def test_expert_parallel_prices_the_all_to_all_not_the_mlp_all_reduce(bench, h100x8):
    m = _model("Qwen__Qwen3-30B-A3B.json")
    assert m.inspection.moe is not None
    tp2 = _theoretical(m, h100x8, _vllm(tensor_parallel_size=2), bench)
    ep2 = _theoretical(m, h100x8, _vllm(tensor_parallel_size=2, enable_expert_parallel=True),
                       bench)
    assert tp2 and len(tp2) == len(ep2) and tp2 != ep2


def test_a_pipeline_has_no_attainable_estimate_and_dp_replicas_add_theirs(bench, h100x8):
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")

    def attainable(config):
        return [r.attainable for r in level_ceilings(m, h100x8, config, bench, CONTEXT)
                if r.envelope is Envelope.THEORETICAL]

    assert all(a is not None for a in attainable(_vllm()))
    assert all(a is None for a in attainable(_vllm(pipeline_parallel_size=2)))
    dp2 = attainable(_vllm(data_parallel_size=2))
    assert all(a is not None and a > 0 for a in dp2)


def test_a_dp_server_is_fitted_per_replica_on_all_its_gpus(h100x8):
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")
    # vLLM's max_num_seqs holds per DP rank: 4 per replica, 8 in all at a target of 8.
    dp2 = fit_config(m, h100x8, _vllm(data_parallel_size=2, max_num_seqs=4), 8)
    assert dp2.dp == 2 and dp2.concurrency == 4 and dp2.fits
    assert any("one of 2 data-parallel replicas" in a for a in dp2.assumptions)
    # Without a cap, the target's 8 sequences are shared: 4 each.
    assert fit_config(m, h100x8, _vllm(data_parallel_size=2), 8).concurrency == 4
    assert fit_config(m, h100x8, _vllm(data_parallel_size=8), 8).concurrency == 1
    with pytest.raises(InputError, match="tp x pp x dp 2 = 16 needs that many GPUs; only 8"):
        fit_config(m, h100x8, _vllm(tensor_parallel_size=4, pipeline_parallel_size=2,
                                    data_parallel_size=2), 8)


def test_a_pcie_hosts_trials_price_their_collectives_over_pcie(bench):
    """Issue 50: the flow reads the host's recorded topology as `infopt plan --layouts` does:
    eight RTX 4090s on PCIe gen4 x16 without peer access on some pairs (no NVLink in the
    catalog), so a TP2 trial's ceiling pays its all-reduces at 31.5 GB/s instead of nothing."""
    hw = recorded_inventory("rtx4090_8x")
    dev, _ = run_device(hw)
    assert dev.interconnect_bytes_per_s == pytest.approx(16e9 * 128 / 130 / 8 * 16)
    assert "PCIe gen4 x16" in dev.source and "upper bound" in dev.source
    m = _model("meta-llama__Llama-3.1-8B-Instruct.json")
    tp2 = _vllm(tensor_parallel_size=2)
    priced = _theoretical(m, hw, tp2, bench)
    free = hw.model_copy(update={"gpu_pairs": [], "gpus": [
        g.model_copy(update={"pcie": None}) for g in hw.gpus]})
    assert "communication left out" in run_device(free)[0].source
    assert all(p < f for p, f in zip(priced, _theoretical(m, free, tp2, bench), strict=True))
