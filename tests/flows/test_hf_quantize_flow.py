"""Calibrated local quantization of an HF checkpoint through the whole optimize flow (issue 50):
the bundled SmolLM2's bf16 HF copy on the real vLLM (CPU build), its weights dimension asking
the quantize gate (pre-authorized here) for llm-compressor's W8A8 recipe (SmoothQuant + GPTQ on
a short calibration sample), the variant served by vLLM's CPU build and judged by the quality
gate and the long-context check like any weight candidate.

e2e: the calibration alone takes minutes on 2 cores, and every vLLM start ~35 s eager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infopt.bootstrap import default_paths
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest, QuantizeSettings
from infopt.specs.serving import with_knob
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.vllm, pytest.mark.e2e,
              pytest.mark.timeout(2400)]

# The control eager in one process (as the comparator flow's), serving 2,048 tokens: the
# long-context windows of the model's 8,192 are refused and halved to ~1,000-token prompts
# (the report says so), a minute of vLLM CPU prefill instead of several.
QUICK = {"enforce_eager": True, "cpu_kvcache_space_gib": 1,
         "distributed_executor_backend": "uni", "engine_core_multiprocessing": False,
         "max_model_len": 2048}


@pytest.fixture(scope="module")
def run(prefect_api, tmp_path_factory):
    from flows import optimize as opt
    from infopt.tuning import plan_run as et

    paths = default_paths()
    if not paths.llmc_python.exists():
        pytest.fail("llm-compressor missing: run `make engines-quantize` (make test-e2e does)")
    defaults = et.control_config

    def control(engine, target):  # vLLM's control eager in one process (as the comparator's)
        cfg = defaults(engine, target)
        for knob, value in QUICK.items():
            cfg = with_knob(cfg, knob, value)
        return cfg

    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[2], target=2, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(
        model=ModelTarget(path=str(paths.hf_model)), engines=["vllm"], workload=wl.traffic,
        objective=wl.objective, budgets=Budgets(repeats=1), scenarios=[],
        quality_task_items=0, quality_max_prompts=8, quality_tolerance=0.05,
        dimensions=["weights"], requantize=["W8A8"], authorize=["quantize"],
        quantize=QuantizeSettings(samples=16, max_seq_len=128, budget_s=1800),
        base_overrides=QUICK, github_search=False)
    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(et, "control_config", control)
        report = opt.optimize(request=request, runs_dir=str(runs))
    return report, runs / report.run_id


def test_the_w8a8_variant_is_made_served_by_vllm_cpu_and_judged(run):
    report, run_dir = run
    gate = next(a for a in report.approvals if a.key == "quantize-w8a8")
    assert gate.approved and gate.source.value == "pre-authorized"
    trial = next(t for t in report.trials if t.value and "W8A8" in t.value)
    variant = Path(trial.config.model_path)
    config = json.loads((variant / "config.json").read_text())
    q = config["quantization_config"]
    assert q["quant_method"] == "compressed-tensors" and q["format"] == "int-quantized"
    # vLLM's CPU build loaded it with its int8 kernel, in the trial's own log.
    log = Path(trial.engine.log_path).read_text() if trial.engine else ""
    assert "CompressedTensorsW8A8Int8" in log
    # Judged like any weight candidate: the short gate, then (a weights change) the long one.
    assert trial.quality is not None and trial.quality.decision in ("pass", "fail", "undecided")
    if trial.quality.decision == "pass":
        assert trial.long_context is not None
        assert trial.long_context.reason.startswith("weights (")
    print(f"\nW8A8: {trial.quality.summary}; long: "
          f"{trial.long_context.verdict.summary if trial.long_context else None}")
