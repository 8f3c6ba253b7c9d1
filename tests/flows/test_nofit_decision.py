"""The no-fit decision in the flow (issue 49), on a real Prefect server, with no engine started:
a host planted with 512 MiB of RAM (the bundled SmolLM2 GGUF at its native 8,192-token context
needs ~0.57 GiB on llama.cpp by infopt's fit), so nothing fits and the run asks. Decided ahead by
the request, it goes on re-planned with the chosen change; unanswered, it stops with the no-fit
report that records the decision; a resumed run applies the decision it kept without asking
again; work submitted before the gate runs while it waits and the wait says so."""

from __future__ import annotations

import json
import time

import pytest
from prefect import flow, task

from infopt.bootstrap import default_paths
from infopt.hardware.host import inventory
from infopt.model.profile import profile_model
from infopt.runs.outcomes import Target
from infopt.specs.request import OptimizeRequest
from infopt.tuning.nofit import NothingFits
from infopt.tuning.plan_run import plan_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HOST_RAM = 2**29


def _request(**kw) -> OptimizeRequest:
    return OptimizeRequest.model_validate({
        "engines": ["llamacpp"], "scenarios": [], "workload": {
            "name": "w", "input_lengths": {"kind": "fixed", "tokens": 128},
            "output_lengths": {"kind": "fixed", "tokens": 64}, "measured_requests": 4,
            "peak_active_generations": 1, "arrival": {"kind": "closed_loop", "concurrency": 1}},
        **kw})


@pytest.fixture(scope="module")
def planted():
    hw = inventory(measure_bandwidth=False)
    small = hw.model_copy(update={"host": hw.host.model_copy(update={
        "ram_total_bytes": HOST_RAM, "ram_available_bytes": HOST_RAM})})
    return small, profile_model(str(default_paths().gguf))


def _target(planted, request) -> Target:
    hw, model = planted
    plan = plan_run(request, hw, model, [], request.tuning_workload())
    assert not plan.viable  # the planted no-fit
    return Target(hw, model, None, plan, [])


@task
def _slow_research(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def _settle(planted, request, run_dir, slow_s: float = 0.0):
    from flows.decide import settle_nofit
    from flows.research import Research

    @flow(name="nofit-decision-test")
    def run():
        research = Research()
        if slow_s:
            research.futures["slow-research"] = _slow_research.submit(slow_s)
        decided, target = settle_nofit(request, _target(planted, request), run_dir, "r1",
                                       research)
        return decided, target, research

    return run()


def test_decided_ahead_the_run_goes_on_with_the_change(prefect_api, planted, tmp_path):
    decided, target, research = _settle(planted, _request(on_no_fit="context"), tmp_path)
    [d] = target.decisions
    assert d.chosen.kind.value == "context" and d.answer.source.value == "pre-decided"
    ctx = decided.min_context_tokens
    assert d.chosen.key == f"context-{ctx}" and 192 <= ctx < 8192
    [p] = target.plan.viable
    assert p.shape.context_tokens == ctx  # the re-planned start serves the chosen context
    assert research.waits == [] and d.wait is None  # nobody was asked
    kept = json.loads((tmp_path / "decisions" / "no-fit.json").read_text())
    assert kept["chosen"]["key"] == d.chosen.key


def test_a_resumed_run_applies_the_kept_decision_without_asking(prefect_api, planted,
                                                               tmp_path, monkeypatch):
    import flows.decide

    _settle(planted, _request(on_no_fit="kv_precision"), tmp_path)
    monkeypatch.setattr(flows.decide, "decide", lambda *a, **k: pytest.fail("asked again"))
    decided, target, _ = _settle(planted, _request(), tmp_path)  # on_no_fit: ask
    assert decided.base_overrides["cache_type_k"] == "q8_0"
    assert target.decisions[0].chosen.kind.value == "kv_precision"


@pytest.mark.e2e  # waits out a 6 s gate; `make test` keeps the two that do not wait
def test_unanswered_the_run_stops_with_the_decision_in_its_report(prefect_api, planted,
                                                                 tmp_path):
    request = _request(approval_timeout_s=6)
    with pytest.raises(NothingFits):
        _settle(planted, request, tmp_path, slow_s=2.0)
    report = json.loads((tmp_path / "report.json").read_text())
    from infopt.report.provenance import unlabelled

    assert unlabelled(report) == []
    d = report["decision"]
    assert d["answer"]["source"] == "timeout" and d["chosen"]["key"] == "stop"
    assert {c["kind"] for c in d["choices"]} >= {"kv_precision", "context", "stop"}
    # the research submitted before the gate ran while it waited, and the wait says so
    assert d["wait"]["waited_s"] >= 5
    assert d["wait"]["ran_meanwhile"] == ["slow-research (finished while waiting)"]
    md = (tmp_path / "report.md").read_text()
    assert "## Decisions and waits" in md and "Answered `stop` (timeout)" in md
    assert "Ran meanwhile: slow-research (finished while waiting)" in md
