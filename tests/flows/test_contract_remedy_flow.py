"""A request that requires a feature the baseline lacks: the engine's known remedy becomes a
candidate change, the run re-plans its baseline around it, and the first baseline, without it,
is kept as the evidence: rejected by the contract, unmeasured. Real llama-server: with --parallel 1 it refuses n=2 (HTTP 400), with
two slots it serves it (recorded in tests/integration/test_llamacpp.py)."""

from __future__ import annotations

import pytest

from infopt.bootstrap import default_paths
from infopt.specs.request import ApiRequirements, Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]


def test_a_required_feature_the_baseline_lacks_is_provided_by_its_remedy(prefect_api,
                                                                           tmp_path):
    from flows.optimize import optimize

    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1, 2], target=2, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(model=ModelTarget(path=str(default_paths().gguf)),
                              workload=wl.traffic, objective=wl.objective,
                              api=ApiRequirements(features=["n"]), budgets=Budgets(repeats=1),
                              scenarios=[], quality_task_items=0,
                              dimensions=["scheduling"])
    report = optimize(request=request, runs_dir=str(tmp_path))
    o = report.contract_outcome
    assert o.applied is not None and o.applied.knob_changes == {"parallel_slots": 2}
    assert [g.feature for g in o.first_baseline_gaps if g.required] == ["n"]
    assert report.baseline_config.parallel_slots == 2
    assert next(c for c in report.contract if c.feature == "n").status.value == "pass"
    # The first baseline (one slot) is kept in the report as the evidence, unmeasured; the
    # control's trial was reused by the re-planned run, not run again.
    one_slot = report.trials[0]
    assert one_slot.trial_id == "t01-baseline-r1-before-remedy"
    assert one_slot.role == "baseline" and one_slot.config.parallel_slots == 1
    assert [t.role for t in report.trials[1:3]] == ["control", "baseline"]
    assert one_slot.benchmark is None and one_slot.failed.startswith(
        "rejected by the API contract: n (unsupported)")
    assert report.winner_config.parallel_slots == 2
    # Two slots already serve the target load of 2: the scheduling step says so.
    step = next(s for s in report.ladder.steps if s.dimension.value == "scheduling")
    assert "already has 2 slots" in step.skipped
    md = (tmp_path / report.run_id / "report.md").read_text()
    assert "the run applied the candidate change `--parallel 2" in md
