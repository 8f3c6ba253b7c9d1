"""Where a run starts when the baseline does not fit one device at the native context (issue
32, items 4 and 10): the smallest layout that fits at the full native context, else the
longest context the request's min_context_tokens accepts, else nothing (the no-fit report).
On the recorded 8x H100 SXM host and on a CPU host, with the project's own fit."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.layouts import fitting_layouts
from infopt.engines import adapter_for
from infopt.engines.launch import ServingTarget
from infopt.model.classify import classify_config
from infopt.specs.fit import Layout
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import with_knobs
from infopt.tuning.candidates import fit_config
from infopt.tuning.start_shape import CONTEXT_STEP_TOKENS, ShapeKnobs, start_shape
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import MODEL_CONFIGS

GIB = 2**30


def _model(name: str, fmt: ModelFormat = ModelFormat.HF, file_bytes: int = 0) -> ModelProfile:
    cfg = json.loads((MODEL_CONFIGS / f"{name}.json").read_text())
    return ModelProfile(path="/m", format=fmt, file_bytes=file_bytes,
                        inspection=classify_config(cfg, model=name), source="test")


def _shape(m: ModelProfile, hw: HardwareInventory, engine: str, concurrency: int,
           min_context: int | None = None, workload_tokens: int = 1024):
    adapter = adapter_for(engine)

    def baseline_at(context: int):
        return adapter.baseline_config(ServingTarget(
            model_path=m.path, served_model_name="m", native_context_tokens=context,
            usable_cpus=hw.host.usable_cpus))

    def fits(config):
        return fit_config(m, hw, config, concurrency)

    shaping = (ShapeKnobs(adapter.layout_knobs, adapter.offload_knob) if hw.gpus else
               ShapeKnobs())
    shape = start_shape(m.inspection, len(hw.gpus), shaping,
                        m.native_context_tokens, min_context, workload_tokens, baseline_at, fits)
    return shape, baseline_at, fits


def test_a_model_that_fits_one_gpu_starts_there_unchanged():
    hw = recorded_inventory("h100_sxm_8x")
    # One sequence: 16 GiB of KV at 131,072 tokens beside 16 GB of weights.
    shape, *_ = _shape(_model("meta-llama__Llama-3.1-8B-Instruct"), hw, "vllm", 1)
    assert shape is not None and shape.changes == {} and shape.note == ""
    assert shape.layout == Layout() and shape.context_tokens is None


def test_a_70b_model_escalates_to_the_smallest_layout_that_fits_at_native_context():
    hw = recorded_inventory("h100_sxm_8x")
    m = _model("meta-llama__Meta-Llama-3.1-70B")
    shape, baseline_at, fits = _shape(m, hw, "vllm", 8)
    assert shape is not None and shape.context_tokens is None
    native = baseline_at(m.native_context_tokens)
    assert not fits(native).fits  # ~141 GB of BF16 weights on one 80 GB GPU
    assert shape.layout.gpus > 1 and shape.layout.dp == 1
    assert fits(with_knobs(native, shape.changes)).fits
    # Every layout before it in the order (fewer GPUs, or TP before PP) does not fit.
    order = fitting_layouts(m.inspection, 8)
    for earlier in order[:order.index(shape.layout)]:
        ch = adapter_for("vllm").layout_knobs.changes_from(native, earlier)
        assert not fits(with_knobs(native, ch)).fits, earlier
    assert "smallest layout that fits" in shape.note and shape.layout.label in shape.note


def test_fitting_layouts_go_by_gpu_count_tp_before_pipeline_stages():
    m = _model("meta-llama__Meta-Llama-3.1-70B").inspection
    assert fitting_layouts(m, 8) == [Layout(tp=2), Layout(tp=1, pp=2), Layout(tp=4),
                                     Layout(tp=2, pp=2), Layout(tp=1, pp=4), Layout(tp=8),
                                     Layout(tp=4, pp=2), Layout(tp=2, pp=4), Layout(tp=1, pp=8)]
    assert fitting_layouts(m, 1) == []


def test_nothing_fits_without_min_context_and_the_native_context_is_never_cut_silently():
    hw = recorded_inventory("h100_sxm_8x")
    one = hw.model_copy(update={"gpus": hw.gpus[:1], "gpu_pairs": []})
    shape, *_ = _shape(_model("meta-llama__Meta-Llama-3.1-70B"), one, "vllm", 8)
    assert shape is None


def _cpu_host(ram_bytes: int) -> HardwareInventory:
    from infopt.specs.hardware import HostInfo

    return HardwareInventory(
        host=HostInfo(cpu_model="test", architecture="x86_64", logical_cpus=2,
                      physical_cores=2, usable_cpus=2, cgroup_cpu_limit=None, isa_features=[],
                      ram_total_bytes=ram_bytes, ram_available_bytes=ram_bytes, os="Linux",
                      kernel="6"), gpus=[], gpu_probe="none")


def test_min_context_serves_the_longest_context_that_fits_and_no_shorter_than_asked():
    m = _model("meta-llama__Llama-3.1-8B-Instruct", ModelFormat.GGUF, int(4.9 * GIB))
    hw = _cpu_host(16 * GIB)  # 131,072 tokens of f16 KV alone are 16 GiB
    assert _shape(m, hw, "llamacpp", 1)[0] is None  # min_context_tokens not given
    shape, baseline_at, fits = _shape(m, hw, "llamacpp", 1, min_context=8192)
    assert shape is not None and shape.layout == Layout()
    ctx = shape.context_tokens
    assert 8192 <= ctx < m.native_context_tokens and ctx % CONTEXT_STEP_TOKENS == 0
    assert fits(baseline_at(ctx)).fits and not fits(baseline_at(ctx + CONTEXT_STEP_TOKENS)).fits
    assert shape.changes == {"ctx_per_slot_tokens": ctx}  # the control takes it too
    assert f"serving {ctx:,} tokens" in shape.note and "min_context_tokens 8,192" in shape.note
    # A floor above what fits, or a workload longer than what fits: nothing.
    assert _shape(m, hw, "llamacpp", 1, min_context=ctx + 1024)[0] is None
    assert _shape(m, hw, "llamacpp", 1, min_context=8192, workload_tokens=ctx + 1024)[0] is None


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_gpu_engine_escalates_through_its_own_layout_knobs(engine):
    hw = recorded_inventory("h100_sxm_8x")
    shape, baseline_at, fits = _shape(_model("meta-llama__Meta-Llama-3.1-70B"), hw, engine, 8)
    assert shape is not None and shape.layout.gpus > 1
    assert fits(with_knobs(baseline_at(131_072), shape.changes)).fits


def test_the_flow_starts_both_configs_in_the_shape_and_says_when_the_defaults_cannot_fit():
    """infopt.tuning.plan_run's use: the request's min_context_tokens and the workload's longest
    request reach the search; llama.cpp's defaults (4 slots sharing -c) at the shortened
    context per slot need 4x its KV, so the baseline stands in for the control."""
    from infopt.specs.request import ModelTarget, OptimizeRequest
    from infopt.specs.workload import fixed_levels
    from infopt.tuning.plan_run import _start_shape, start_configs

    m = _model("meta-llama__Llama-3.1-8B-Instruct", ModelFormat.GGUF, int(4.9 * GIB))
    m = m.model_copy(update={"path": "/m.gguf"})
    hw = _cpu_host(16 * GIB)
    wl = fixed_levels(input_tokens=2000, output_tokens=200, levels=[1], target=1, requests=2)
    request = OptimizeRequest(model=ModelTarget(path="/m.gguf"), workload=wl.traffic,
                              objective=wl.objective, min_context_tokens=8192)
    shape = _start_shape(request, adapter_for("llamacpp").name, m, hw, wl)
    assert shape is not None and shape.context_tokens >= 8192 and shape.control_is_baseline
    assert "the baseline stands in for the control" in shape.note
    control, baseline = start_configs(request, adapter_for("llamacpp").name, m, hw, shape)
    assert control == baseline and baseline.ctx_per_slot_tokens == shape.context_tokens
    assert fit_config(m, hw, baseline, 1).fits
    # Without min_context_tokens: nothing fits, and the native context stands.
    strict = request.model_copy(update={"min_context_tokens": None})
    assert _start_shape(strict, adapter_for("llamacpp").name, m, hw, wl) is None
    assert start_configs(strict, adapter_for("llamacpp").name, m, hw)[1].ctx_per_slot_tokens \
        == m.native_context_tokens


def test_the_widest_layout_sizes_a_model_that_fits_nowhere():
    """The no-fit report's numbers come from where the model comes closest: TP over every GPU
    (Llama-3.1-70B's 64 query heads split 8 ways), not one GPU."""
    from infopt.tuning.start_shape import widest_shape

    m = _model("meta-llama__Meta-Llama-3.1-70B")
    native = adapter_for("vllm").baseline_config(ServingTarget(
        model_path=m.path, served_model_name="m", native_context_tokens=131072, usable_cpus=2))
    shape = widest_shape(m.inspection, 8, adapter_for("vllm").layout_knobs, native)
    assert shape is not None and shape.layout == Layout(tp=8)
    assert shape.changes == {"tensor_parallel_size": 8}
    assert "TP=8 (8 GPUs), the widest layout" in shape.note
    assert widest_shape(m.inspection, 1, adapter_for("vllm").layout_knobs, native) is None
    assert widest_shape(m.inspection, 8, None, native) is None


def _on_a_4090(name: str, gguf_bytes: int, host_ram_bytes: int):
    """(the model as a GGUF of `gguf_bytes`, one recorded RTX 4090 beside `host_ram_bytes` of
    host RAM, a one-user chat workload, the request for it)."""
    from infopt.specs.request import ModelTarget, OptimizeRequest
    from infopt.specs.workload import fixed_levels

    m = _model(name, ModelFormat.GGUF, gguf_bytes).model_copy(update={"path": "/m.gguf"})
    hw = recorded_inventory("rtx4090_8x", visible=1)
    hw = hw.model_copy(update={"host": hw.host.model_copy(update={
        "ram_total_bytes": host_ram_bytes})})
    wl = fixed_levels(input_tokens=512, output_tokens=128, levels=[1], target=1, requests=2)
    request = OptimizeRequest(model=ModelTarget(path="/m.gguf"), workload=wl.traffic,
                              objective=wl.objective)
    return m, hw, wl, request


def test_llamacpp_starts_a_model_larger_than_the_gpu_with_partial_offload():
    """Issue 49: Llama-3.1-70B as a 42 GB GGUF on one recorded RTX 4090 (24 GB): llama.cpp is
    not pruned; its control and baseline start with the most layers that fit on the GPU
    (-ngl N) and the rest, weights and their KV, in host RAM (checked against the host's)."""
    from infopt.tuning.plan_run import _start_shape, start_configs

    m, hw, wl, request = _on_a_4090("meta-llama__Meta-Llama-3.1-70B", 42 * 10**9, 128 * GIB)
    shape = _start_shape(request, adapter_for("llamacpp").name, m, hw, wl)
    assert shape is not None and shape.context_tokens is None  # the native context stands
    n = shape.changes["n_gpu_layers"]
    assert 0 < n < m.inspection.num_layers and "rest in host RAM" in shape.note
    _, baseline = start_configs(request, adapter_for("llamacpp").name, m, hw, shape)
    fit = fit_config(m, hw, baseline, 1)
    assert fit.fits and fit.weights_bytes_per_gpu < 24 * 10**9
    assert any(a.startswith(f"partial offload: {n} of 80 layers") for a in fit.assumptions)
    # the most that fit: one more layer on the GPU does not
    assert not fit_config(m, hw, with_knobs(baseline, {"n_gpu_layers": n + 1}), 1).fits
    # a host too small for the rest: nothing fits at the native context
    tiny = hw.model_copy(update={"host": hw.host.model_copy(update={"ram_total_bytes": 8 * GIB})})
    assert _start_shape(request, adapter_for("llamacpp").name, m, tiny, wl) is None
    # vLLM has no such knob: on the same host it starts nowhere at TP=1 (one GPU visible)
    assert _start_shape(request, adapter_for("vllm").name, m, hw, wl) is None


def test_the_ladder_climbs_n_gpu_layers_when_an_earlier_step_frees_the_gpu():
    """The partial offload's rule (llama.cpp's parallel_layout dimension): at the start's -ngl
    nothing more fits; once an 8-bit KV cache is the incumbent, its freed memory holds more
    layers, and the rule proposes the most that fit now."""
    from infopt.engines.llamacpp.rules import parallel_layout
    from infopt.tuning.dimension_rules import ladder_facts
    from infopt.tuning.start_shape import most_device_layers

    m, hw, wl, _ = _on_a_4090("meta-llama__Meta-Llama-3.1-70B", 42 * 10**9, 128 * GIB)
    facts = ladder_facts(m, hw, wl, None)
    base = adapter_for("llamacpp").baseline_config(ServingTarget(
        model_path="/m.gguf", served_model_name="m", native_context_tokens=131_072,
        usable_cpus=8))
    n = most_device_layers(80, base, "n_gpu_layers", lambda c: fit_config(m, hw, c, 1))
    assert n is not None and 0 < n < 80
    start = with_knobs(base, {"n_gpu_layers": n})
    said = parallel_layout(start, facts)
    assert isinstance(said, str) and "already the most layers that fit" in said
    q8 = with_knobs(start, {"cache_type_k": "q8_0", "cache_type_v": "q8_0"})
    [cand] = parallel_layout(q8, facts)
    more = cand.changes["n_gpu_layers"]
    assert more > n and fit_config(m, hw, with_knobs(q8, cand.changes), 1).fits


def test_an_moe_model_under_partial_offload_is_offered_its_experts_in_host_ram():
    """Qwen3-30B-A3B as a 32.5 GB Q8_0 GGUF on one recorded RTX 4090 (24 GB): it starts
    with a partial -ngl; the parallel_layout rule also proposes every layer on the GPU with the
    routed experts of the fewest first layers in host RAM (--n-cpu-moe), which the fit checks:
    the fewest that fit, one fewer does not."""
    from infopt.engines.llamacpp.rules import parallel_layout
    from infopt.tuning.dimension_rules import ladder_facts
    from infopt.tuning.plan_run import _start_shape, start_configs

    m, hw, wl, request = _on_a_4090("Qwen__Qwen3-30B-A3B", int(32.5e9), 64 * GIB)
    shape = _start_shape(request, adapter_for("llamacpp").name, m, hw, wl)
    assert shape is not None and isinstance(shape.changes.get("n_gpu_layers"), int)
    _, start = start_configs(request, adapter_for("llamacpp").name, m, hw, shape)
    cands = parallel_layout(start, ladder_facts(m, hw, wl, None))
    assert not isinstance(cands, str)
    moe = next(c for c in cands if "n_cpu_moe" in c.changes)
    n = moe.changes["n_cpu_moe"]
    assert moe.changes["n_gpu_layers"] == "all" and 0 < n < m.inspection.num_layers
    fit = fit_config(m, hw, with_knobs(start, moe.changes), 1)
    assert fit.fits and any(a.startswith(f"--n-cpu-moe {n}:") for a in fit.assumptions)
    fewer = with_knobs(start, {**moe.changes, "n_cpu_moe": n - 1})
    assert not fit_config(m, hw, fewer, 1).fits
