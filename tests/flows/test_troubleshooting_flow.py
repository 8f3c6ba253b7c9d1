"""Issue-first troubleshooting inside the optimize flow, on the real llama-server: a tuning
value that fails deterministically is diagnosed, a catalog remedy that keeps the contract is
applied, and the trial is measured; a failure with no such remedy is recorded, not raised."""

from __future__ import annotations

import pytest

from infopt.bootstrap import default_paths
from infopt.engines import process
from infopt.specs.diagnosis import FailureCategory
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest, TuneOverride
from infopt.specs.serving import LlamaCppConfig
from infopt.specs.traffic import Slo
from infopt.specs.workload import fixed_levels
from tests.githubserver import FakeGitHub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def gguf():
    path = default_paths().gguf
    if not path.exists():
        pytest.fail("bundled model missing: run `make engines`")
    return path


# e2e since the long-context check (issue 50): its q8_0 V cache is a KV-precision change that
# passes the short gate, so this trial builds the long windows at the model's 8,192-token
# context (reference 62 s, floor 97 s on 2 cores) and is judged on them.
@pytest.mark.e2e
def test_quantized_v_cache_without_flash_attn_is_remedied(prefect_api, gguf, tmp_path):
    from flows.optimize import optimize

    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1], target=1, requests=2)
    # With SLOs and no objective the run tunes for goodput (docs/metrics.md): this run also
    # carries that path through the flow to the report.
    slos = [Slo(metric="e2e", percentile=95, max_s=600.0)]
    request = OptimizeRequest(
        model=ModelTarget(path=str(gguf)), workload=wl.traffic.model_copy(update={"slos": slos}),
        budgets=Budgets(repeats=1),
        tune=TuneOverride(knob="cache_type_v", values=["f16", "q8_0"],
                          base_overrides={"flash_attn": "off"}),
        quality_task_items=0, scenarios=[],  # not this test's subject (full context: minutes)
        # The baseline runs flash attention off to provoke the failure: against the control's
        # reference (flash attention on) that moves ~4% of this small model's near-tie tokens
        # (96.0% over 477 tokens on an AVX-512 EPYC, 2026-12-03), which the default 2%
        # tolerance rightly fails. Quality is not this test's subject.
        quality_tolerance=0.1)
    with FakeGitHub() as gh:
        report = optimize(request=request.model_copy(update={"github_url": gh.url}),
                          runs_dir=str(tmp_path))
    q8 = next(t for t in report.trials if t.value == "cache_type_v=q8_0")
    assert q8.diagnosis is not None and "quantized V cache" in q8.diagnosis.root_error
    assert q8.remedy is not None and q8.remedy.preserves_contract
    assert q8.config.flash_attn == "on" and q8.config.cache_type_v == "q8_0"  # contract kept
    # The remedied engine started and the trial went on through its gates: measured, or
    # rejected by the quality gate, which depends on the CPU's kernels (q8_0 V scored 96.1%
    # top-1 agreement against a 98% threshold on an AMX Xeon, 2026-12-02; it passed on AVX2).
    assert q8.engine is not None and q8.quality is not None
    if q8.quality.passed:
        assert q8.failed is None and q8.benchmark is not None
    else:
        assert q8.failed.startswith(("rejected by the quality gate",
                                     "undecided by the quality gate")), q8.failed
        assert q8.benchmark is None
    md = (tmp_path / report.run_id / "report.md").read_text()
    assert "Start failures (issue-first troubleshooting)" in md
    assert report.workload.objective.value == "goodput" and "SLOs of the winner" in md
    winner = next(t for t in report.trials if t.trial_id == report.winner_trial_id)
    # 2 requests well inside 600 s: both good, so goodput is 2 per measured window.
    s = winner.benchmark.scenario("chat")
    assert s.slos[0].met and winner.objective_value == s.goodput_requests_per_s
    assert s.goodput_requests_per_s == pytest.approx(2 / s.level.duration_s)
    assert process.live_pids() == []


def test_failure_without_remedy_is_recorded_not_raised(prefect_api, gguf, tmp_path):
    from prefect import flow

    from infopt.hardware.host import inventory
    from infopt.model.profile import profile_model
    from infopt.runs.engine_run import EngineRun
    from infopt.specs.trial import TrialRole, TrialSpec
    from tasks.trial import run_trial

    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model" * 100)
    spec = TrialSpec(trial_id="t99-bogus", role=TrialRole.TUNING, changes=[],
                     config=LlamaCppConfig(model_path=str(bogus), ctx_per_slot_tokens=512))
    ctx = EngineRun(run_dir=str(tmp_path), model=profile_model(str(gguf)),
                       hw=inventory(measure_bandwidth=False), workload=OptimizeRequest().tuning_workload(),
                       tokenizer_path=None)

    @flow
    def one_trial():
        return run_trial(spec, "t99-bogus-0", None, ctx)

    trial = one_trial()
    assert trial.benchmark is None and trial.failed and trial.contract == []
    assert trial.diagnosis.category in (FailureCategory.NOT_A_MODEL,
                                        FailureCategory.MODEL_NOT_FOUND)
    assert trial.remedy is None
    assert (tmp_path / "trials" / "t99-bogus-0" / "trial.json").is_file()  # failed, but durable


def test_an_env_only_remedy_is_carried_into_later_trials_and_the_manifests(
        prefect_api, gguf, tmp_path, monkeypatch):
    """A start that a known failure's environment-only remedy fixes: the variable becomes part
    of the configuration, so the next trial built from it starts at once (no failed first
    start, no second diagnosis), its key differs, and the rendered container, Kubernetes and
    Helm artifacts carry it. The engine is the real llama-server behind a wrapper that stands
    in for a start needing the variable: without it, it prints the real PyTorch message of
    the catalog's torch-cuda-oom-load-or-profile failure (vllm#11251) and exits."""
    from prefect import flow

    from infopt.engines import adapter_for
    from infopt.engines.llamacpp import adapter as llamacpp
    from infopt.engines.render import render_deployment
    from infopt.hardware.host import inventory
    from infopt.model.profile import profile_model
    from infopt.runs.engine_run import EngineRun
    from infopt.specs.serving import with_knob
    from infopt.specs.trial import TrialRole, TrialSpec, changes_from
    from tasks.trial import run_trial

    real = adapter_for("llamacpp").locate()
    wrapper = tmp_path / "bin" / "llama-server"
    wrapper.parent.mkdir()
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" != "--version" ] && [ -z "$PYTORCH_CUDA_ALLOC_CONF" ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a \
total capacity of 79.15 GiB of which 1.20 GiB is free. (simulated by the test's wrapper)" >&2
  exit 1
fi
exec "{real}" "$@"
""")
    wrapper.chmod(0o755)
    monkeypatch.setenv(llamacpp.ENV_OVERRIDE, str(wrapper))
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    wl = fixed_levels(input_tokens=16, output_tokens=4, levels=[1], target=1, requests=2)
    ctx = EngineRun(run_dir=str(tmp_path), model=profile_model(str(gguf)),
                       hw=inventory(measure_bandwidth=False), workload=wl,
                       tokenizer_path=None)
    control = LlamaCppConfig(model_path=str(gguf), ctx_per_slot_tokens=512)

    @flow
    def two_trials():
        first = run_trial(TrialSpec(trial_id="t1", role=TrialRole.BASELINE, config=control,
                                    changes=[]), "t1-key", None, ctx)
        nxt = with_knob(first.config, "parallel_slots", 2)  # what the climb builds from it
        second = run_trial(TrialSpec(trial_id="t2", role=TrialRole.TUNING, config=nxt,
                                     changes=changes_from(control, nxt)), "t2-key", None, ctx)
        return first, second

    first, second = two_trials()
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert first.failed is None and first.remedy is not None and not first.remedy.knob_changes
    assert first.diagnosis.known_failure_ids[0] == "torch-cuda-oom-load-or-profile"
    assert first.config.env == env and first.benchmark is not None
    assert second.failed is None and second.diagnosis is None and second.remedy is None
    assert second.config.env == env and second.engine.env_overrides == env
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in second.engine.command
    assert "env.PYTORCH_CUDA_ALLOC_CONF" in {c.knob for c in changes_from(control,
                                                                            second.config)}
    assert not (tmp_path / "trials" / "t2-key" / "engine.remedied.log").exists()
    out = render_deployment(second.config, port=8000, gpus=0, cpus=2, model_bytes=10**8,
                            name="winner")
    assert "-e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in out.container_command
    assert "name: PYTORCH_CUDA_ALLOC_CONF" in out.kubernetes_yaml
    assert process.live_pids() == []
