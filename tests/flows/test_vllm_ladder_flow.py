"""A short tuning ladder on the real vLLM (CPU build) and the bf16 SmolLM2: the KV precision
step (FP8 is pruned with vLLM's own reason where the CPU lacks its kernels, and started and
judged by the quality gate where it has them) and the scheduling step (the running-sequence
cap at the target load), through the whole optimize flow.

vLLM's defaults compile the model (~141 s to start on 2 cores, against ~37 s eager): here the
control and the baseline run eager, so the run costs a few eager starts; the compiled path is
the compilation dimension's subject, measured by `make demo`-style runs, not by this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.bootstrap import default_paths
from infopt.engines import process
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.serving import with_knob
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.vllm, pytest.mark.timeout(1200)]


def test_a_short_ladder_on_vllm(prefect_api, monkeypatch, tmp_path):
    from flows import optimize as opt
    from infopt.engines.support import unsupported_config
    from infopt.hardware.host import parse_cpuinfo

    hf = default_paths().hf_model
    if not (hf / "config.json").is_file():
        pytest.fail("converted bf16 model missing: run `make engines`")
    # Eager, and a 1 GiB KV space: without VLLM_CPU_KVCACHE_SPACE vLLM 0.32 CPU claims 92% of
    # the NUMA node's memory and refuses to start beside the session's other vLLM server
    # ("Available memory on node 0 (9.33/11.46 GiB) on startup is less than desired").
    defaults = opt.control_config
    monkeypatch.setattr(opt, "control_config", lambda engine, target: with_knob(with_knob(
        defaults(engine, target), "enforce_eager", True), "cpu_kvcache_space_gib", 1))
    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[2], target=2, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(
        model=ModelTarget(path=str(hf)), engines=["vllm"], workload=wl.traffic,
        objective=wl.objective, budgets=Budgets(repeats=1), scenarios=[],
        quality_task_items=0, dimensions=["kv_precision", "scheduling"],
        base_overrides={"enforce_eager": True, "cpu_kvcache_space_gib": 1},
        github_search=False)
    report = opt.optimize(request=request, runs_dir=str(tmp_path))

    assert report.engine == "vllm" and report.engine_version.startswith("0.32")
    assert report.gain_vs_control.control_is_baseline  # the (eager) defaults are the baseline
    steps = {s.dimension.value: s for s in report.ladder.steps}
    kv = steps["kv_precision"].candidates
    assert [c.candidate.label for c in kv] == ["kv=fp8"]
    _, isa, _ = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    if unsupported_config(with_knob(report.baseline_config, "kv_cache_dtype", "fp8"), isa):
        assert kv[0].status == "pruned" and "AVX-512 or AMX" in kv[0].reason
        assert not any(t.value == "kv=fp8" for t in report.trials)  # no engine started
    else:  # started, judged by the quality gate against the 16-bit reference, then measured
        fp8 = next(t for t in report.trials if t.value == "kv=fp8")
        assert fp8.quality is not None and fp8.config.kv_cache_dtype == "fp8"
        assert kv[0].status in ("gate", "worse", "within noise")
    sched = steps["scheduling"].candidates
    assert [c.candidate.label for c in sched] == ["max_num_seqs=2"]
    cap = next(t for t in report.trials if t.value == "max_num_seqs=2")
    assert cap.benchmark is not None and cap.quality.passed
    assert "--max-num-seqs 2" in cap.engine.command and "--enforce-eager" in cap.engine.command
    # One repeat each: no change can be told from noise, so the baseline is the winner.
    assert report.winner_label == "baseline" and report.ladder.accepted == []
    for d in ("weights", "prefill", "compilation"):
        assert "not asked for" in steps[d].skipped
    assert "| scheduling |" in (tmp_path / report.run_id / "report.md").read_text()
    assert process.live_pids() == []
