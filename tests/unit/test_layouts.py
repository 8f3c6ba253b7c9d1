"""The parallel-layout experiment matrix from the recorded 8-GPU inventories: the link each
topology gives, the layouts in the ladder's order (TP -> PP -> DP -> EP, the TP=1 control
first), each fitted per replica with its decode ceilings, and the command per engine."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.allocation import EngineKnobs
from infopt.costmodel.device import device_from_catalog
from infopt.costmodel.fit import FitRequest
from infopt.costmodel.interconnect import link_from_topology
from infopt.costmodel.layouts import candidate_layouts
from infopt.costmodel.weights import decode_weight_traffic_bytes, path_from_quantization
from infopt.engines import adapter_for
from infopt.engines.config_layout import matrix_for
from infopt.engines.rules import LadderFacts
from infopt.engines.support import kv_options
from infopt.hardware.catalog import match_gpu
from infopt.model.classify import classify_config
from infopt.specs.fit import Envelope, Layout
from infopt.specs.hardware import HardwareInventory
from infopt.specs.ladder import Dimension
from infopt.tuning import decide
from infopt.tuning import dimension_rules as dr
from tests.fake_nvml import recorded_inventory as recorded
from tests.fixture_data import MODEL_CONFIGS

GIB = 2**30


def model(name: str):
    cfg = json.loads((MODEL_CONFIGS / f"{name}.json").read_text())
    hqc = MODEL_CONFIGS / f"{name}.hf_quant_config.json"
    return classify_config(cfg, hf_quant_config=json.loads(hqc.read_text()) if hqc.exists()
                           else None, model=name)


def request(hw: HardwareInventory, m, engine="vllm", concurrency=64, context=8192):
    g = hw.gpus[0]
    dev = device_from_catalog(match_gpu(g.name, g.memory_total_bytes))
    return FitRequest(model=m, device=dev, gpu_count=len(hw.gpus), engine=engine,
                      context_tokens=context, concurrency=concurrency, kv_dtype="auto",
                      weight_path=path_from_quantization(m.quantization, dev.compute_capability),
                      kv=kv_options(engine, None), knobs=EngineKnobs())


def test_the_recorded_topologies_give_their_links():
    h100 = recorded("h100_sxm_8x")
    bw, source = link_from_topology(h100.gpus, h100.gpu_pairs, 450e9)
    assert bw == 450e9 and "NVSwitch: 18 of 18 links" in source
    # 8 x RTX 4090: no NVLink and no peer access; PCIe gen4 x16 = 16 GT/s x 16 x 128/130 / 8.
    rtx = recorded("rtx4090_8x")
    bw, source = link_from_topology(rtx.gpus, rtx.gpu_pairs, None)
    assert bw == pytest.approx(31.5e9, rel=0.001) and "PCIe gen4 x16" in source
    assert "no peer access" in source and "upper bound" in source


def test_layouts_come_tp_then_pp_then_dp_with_the_control_first():
    labels = [lay.label for lay, _ in candidate_layouts(model("nvidia__Llama-3.1-70B-Instruct-FP8"),
                                                    8)]
    assert labels == ["TP=1", "TP=2", "TP=4", "TP=8", "TP=1 PP=8", "TP=2 PP=4", "TP=4 PP=2",
                      "TP=1 DP=8", "TP=2 DP=4", "TP=4 DP=2"]
    # 28 query heads: TP must divide them, so no TP=8 (nor PP/DP built on it).
    qwen = [lay.label for lay, _ in candidate_layouts(model("Qwen__Qwen2.5-7B-Instruct"), 8)]
    assert "TP=8" not in qwen and "TP=4 DP=2" in qwen and "TP=4 PP=2" in qwen
    # EP only for MoE, over TP ranks the expert count divides.
    moe = [lay for lay, _ in candidate_layouts(model("Qwen__Qwen3-30B-A3B"), 8) if lay.ep]
    assert [lay.label for lay in moe] == ["TP=2 EP=2", "TP=4 EP=4", "TP=8 EP=8"]


def test_llama70b_fp8_on_the_recorded_hgx_h100():
    hw, m = recorded("h100_sxm_8x"), model("nvidia__Llama-3.1-70B-Instruct-FP8")
    matrix = matrix_for(request(hw, m), "nvidia/Llama-3.1-70B-Instruct-FP8", hw)
    rows = {r.label: r for r in matrix.rows}
    assert "NVSwitch" in matrix.interconnect
    # 64 x 8,192 tokens x 327,680 B/token (80 layers x 8 KV heads x 128 x 2 x 2 B) = 160 GiB
    # of KV: not on one 80 GB GPU beside 67.7 GiB of weights; TP=4 holds it.
    assert not rows["TP=1"].fits and "GiB per GPU short" in rows["TP=1"].refused
    assert rows["TP=4"].fits and rows["TP=8"].fits
    assert not rows["TP=1 DP=8"].fits and rows["TP=2 DP=4"].fits
    assert rows["TP=2 DP=4"].concurrency_per_replica == 16

    def theo(label):
        return next(c for c in rows[label].ceilings if c.envelope is Envelope.THEORETICAL)

    # PP=8 by hand: each stage steps 8 sequences, reading 1/8 of the weights and its 10 of 80
    # layers' KV (40,960 B/token) at 3.35 TB/s; one hand-off of 8 x 8192 x 2 B per step.
    path = path_from_quantization(m.quantization, "9.0")
    stage_bytes = decode_weight_traffic_bytes(m, path, 8) / 8 + 8 * (8192 + 1) * 40_960
    t_stage = stage_bytes / 3.35e12 + 8 * 8192 * 2 / 450e9
    assert theo("TP=1 PP=8").tokens_per_s == pytest.approx(8 / t_stage, rel=0.01)
    # Decode re-reads each stage's weights per micro-batch: PP trails TP on the same GPUs.
    assert theo("TP=1 PP=8").tokens_per_s < theo("TP=4 PP=2").tokens_per_s < \
        theo("TP=8").tokens_per_s
    assert theo("TP=8").comm_share > theo("TP=2").comm_share > 0
    assert rows["TP=4 PP=2"].command.endswith(
        "--tensor-parallel-size 4 --pipeline-parallel-size 2")
    assert "--data-parallel-size 4" in rows["TP=2 DP=4"].command
    assert "--host 127.0.0.1" in rows["TP=8"].command


def test_moe_on_pcie_4090s_ep_rows_and_engines_without_an_axis():
    hw, m = recorded("rtx4090_8x"), model("Qwen__Qwen3-30B-A3B")
    req = request(hw, m, concurrency=16, context=4096)
    rows = {r.label: r for r in matrix_for(req, "Qwen/Qwen3-30B-A3B", hw).rows}
    assert "--enable-expert-parallel" in rows["TP=8 EP=8"].command

    def comm(label):
        return next(c.comm_share for c in rows[label].ceilings
                    if c.envelope is Envelope.THEORETICAL)

    # top-8 routing: the all-to-alls move 8 rows per token where the all-reduce moved 2.
    assert comm("TP=8 EP=8") > comm("TP=8") > 0
    sgl = {r.label: r for r in matrix_for(
        FitRequest(**{**req.__dict__, "engine": "sglang", "kv": kv_options("sglang", None)}),
        "Qwen/Qwen3-30B-A3B", hw).rows}
    assert "--ep-size 8" in sgl["TP=8 EP=8"].command and "--dp-size 2" in sgl[
        "TP=4 DP=2"].command
    trt = {r.label: r for r in matrix_for(
        FitRequest(**{**req.__dict__, "engine": "trtllm", "kv": kv_options("trtllm", None)}),
        "Qwen/Qwen3-30B-A3B", hw).rows}
    assert trt["TP=4 DP=2"].command is None and "separate servers" in trt[
        "TP=4 DP=2"].command_note
    assert "--ep_size 4" in trt["TP=4 EP=4"].command


def _vllm_layout_step(**incumbent):
    """vLLM's parallel-layout candidates for Llama-3.1-8B on 4 GPUs, from its baseline with
    `incumbent`'s knobs."""
    from infopt.engines.launch import ServingTarget
    from infopt.specs.serving import with_knob

    m = model("meta-llama__Llama-3.1-8B-Instruct")
    f = LadderFacts(target_concurrency=8, usable_cpus=32, physical_cores=16, gpu_count=4,
                    mean_prompt_tokens=512, mean_output_tokens=128, prefix_reuse=False,
                    kv_read_share=0.1, layouts=tuple(candidate_layouts(m, 4)))
    rule = dr.rules_for(adapter_for("vllm"))[Dimension.PARALLEL_LAYOUT]
    cfg = adapter_for("vllm").baseline_config(ServingTarget(
        model_path="/m", served_model_name="m", native_context_tokens=8192, usable_cpus=32))
    for knob, value in incumbent.items():
        cfg = with_knob(cfg, knob, value)
    return cfg, decide.derive(rule, "vllm", cfg, f)


def test_vllms_ladder_takes_the_matrix_as_its_parallel_layout_step():
    _, out = _vllm_layout_step()
    assert [c.label for c in out] == ["TP2", "TP4", "TP1_PP4", "TP2_PP2", "TP1_DP4",
                                      "TP2_DP2"]
    assert out[3].changes == {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    assert Layout(tp=2, dp=2).gpus == 4


def test_a_layout_candidate_runs_its_own_layout_not_its_product_with_the_incumbents():
    """From a TP=4 incumbent, TP1_PP4 resets the tensor-parallel size: 4 GPUs, not 16."""
    from infopt.specs.serving import with_knob

    tp4, derived = _vllm_layout_step(tensor_parallel_size=4)
    out = {c.label: c for c in derived}
    assert "TP4" not in out  # the incumbent's own layout
    assert out["TP1_PP4"].changes == {"tensor_parallel_size": None, "pipeline_parallel_size": 4}
    assert out["TP2_DP2"].changes == {"tensor_parallel_size": 2, "data_parallel_size": 2}
    for c in out.values():
        cfg = tp4
        for knob, value in c.changes.items():
            cfg = with_knob(cfg, knob, value)
        ranks = ((cfg.tensor_parallel_size or 1) * (cfg.pipeline_parallel_size or 1)
                 * (cfg.data_parallel_size or 1))
        assert ranks <= 4, (c.label, c.changes)



def test_the_rendered_deployment_requests_the_winners_layout_not_every_host_gpu():
    from infopt.engines.config_layout import deployed_gpus
    from infopt.engines.render import render_deployment
    from infopt.specs.serving import LlamaCppConfig, VllmConfig

    hw = recorded("h100_sxm_8x")
    tp2 = VllmConfig(model_path="/m", max_model_len=8192, tensor_parallel_size=2)
    assert deployed_gpus(tp2, hw) == 2
    assert deployed_gpus(tp2.model_copy(update={"pipeline_parallel_size": 2,
                                               "data_parallel_size": 2}), hw) == 8
    assert deployed_gpus(VllmConfig(model_path="/m", max_model_len=8192), hw) == 1
    assert deployed_gpus(LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=4096),
                         hw) == 1  # no layout knobs
    cpu = hw.model_copy(update={"gpus": []})
    assert deployed_gpus(tp2, cpu) == 0
    d = render_deployment(tp2, port=8000, gpus=deployed_gpus(tp2, hw), name="w")
    assert "--gpus 2" in d.container_command and "nvidia.com/gpu: '2'" in d.kubernetes_yaml


def test_an_incumbents_expert_parallel_switch_is_reset_and_read_as_a_switch():
    """vLLM's --enable-expert-parallel is a switch: True is not a size of 1 (True == 1 in
    Python), so a layout without EP turns it off and the config reads as EP."""
    from infopt.engines.config_layout import config_layout
    from infopt.engines.vllm.rules import LAYOUT
    from infopt.specs.serving import VllmConfig

    ep = VllmConfig(model_path="/m", max_model_len=8192, tensor_parallel_size=2,
                    enable_expert_parallel=True)
    assert config_layout(ep) == Layout(tp=2, ep=True)
    off = LAYOUT.changes_from(ep, Layout(tp=4))
    assert off == {"tensor_parallel_size": 4, "enable_expert_parallel": False}
    assert config_layout(ep.model_copy(update=off)) == Layout(tp=4)
    assert LAYOUT.changes_from(ep, Layout(tp=4, ep=True)) == {"tensor_parallel_size": 4,
                                                              "enable_expert_parallel": True}
