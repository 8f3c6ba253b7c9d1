"""A request that requires a feature the baseline lacks: the engine's known remedy becomes a
candidate change, the run re-plans around it, and a candidate without it is rejected by the
contract, unmeasured. Real llama-server: with --parallel 1 it refuses n=2 (HTTP 400), with
two slots it serves it (recorded in tests/integration/test_llamacpp.py)."""

from __future__ import annotations

import pytest

from infopt.bootstrap import default_paths
from infopt.specs.request import ApiRequirements, Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_a_required_feature_the_baseline_lacks_is_provided_by_its_remedy(prefect_api,
                                                                           tmp_path):
    from flows.optimize import optimize

    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1, 2], target=2, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(model=ModelTarget(path=str(default_paths().gguf)),
                              workload=wl.traffic, objective=wl.objective,
                              api=ApiRequirements(features=["n"]), budgets=Budgets(repeats=1),
                              scenarios=[], quality_task_items=0)
    report = optimize(request=request, runs_dir=str(tmp_path))
    o = report.contract_outcome
    assert o.applied is not None and o.applied.knob_changes == {"parallel_slots": 2}
    assert [g.feature for g in o.first_baseline_gaps if g.required] == ["n"]
    assert report.baseline_config.parallel_slots == 2
    assert next(c for c in report.contract if c.feature == "n").status.value == "pass"
    one_slot = next(t for t in report.trials if t.value == "1")
    assert one_slot.benchmark is None and one_slot.failed.startswith(
        "rejected by the API contract: n (unsupported)")
    assert report.tuning.winner_value == "2"
    md = (tmp_path / report.run_id / "report.md").read_text()
    assert "the run applied the candidate change `--parallel 2" in md
