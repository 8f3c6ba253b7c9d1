"""The CLI's pre-flight and the optimize flow plan a run with the same function
(infopt.tuning.plan_run) and the same rule for finding engines, so on a GPU host they pick the
same engines and starts. Before, the pre-flight located engines with `adapter.locate()` and the
flow with `locate_for_host`, so where only a CPU build of the routed engine was installed the
pre-flight probed it while the flow passed it over for another engine. On the SIMULATED host of
tests/flows/test_sim_gpu_flow.py (the recorded H100 inventory, the simulated engines)."""

from __future__ import annotations

import pytest
from prefect import flow

from infopt import cli
from infopt.model.profile import profile_model
from infopt.specs.request import ModelTarget, OptimizeRequest
from infopt.specs.serving import EngineName
from infopt.specs.workload import fixed_levels
from tests.fake_nvml import recorded_inventory
from tests.flows.test_sim_gpu_flow import _sim_host, _sim_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _both_plans(tmp_path, model, gpus: int, engines=None):
    """(the CLI pre-flight's plan, the flow's plan) for one request on one host."""
    from flows.optimize import establish_target

    wl = fixed_levels(input_tokens=256, output_tokens=16, levels=[2], target=2, requests=4)
    request = OptimizeRequest(model=ModelTarget(path=str(model)), engines=engines,
                              workload=wl.traffic, objective=wl.objective, scenarios=[],
                              quality_task_items=0, github_search=False)
    hw = recorded_inventory("h100_sxm_8x", visible=gpus)

    @flow(name="establish-target-only")
    def flow_plan():
        return establish_target(request, request.tuning_workload(), hw).plan

    return cli._preflight_plan(request, hw, profile_model(str(model))), flow_plan()


def test_the_pre_flight_and_the_flow_plan_the_same_gpu_run(prefect_api, tmp_path):
    model = _sim_model(tmp_path / "Llama-3.1-8B-Instruct", "meta-llama__Llama-3.1-8B-Instruct")
    mp = _sim_host(tmp_path, 1)
    try:
        ours, theirs = _both_plans(tmp_path, model, gpus=1)
    finally:
        mp.undo()
    assert ours == theirs
    assert ours.engines[0] is EngineName.VLLM and ours.viable[0].role == "routed", ours.notes
    assert ours.viable[0].shape.layout.gpus == 1


def test_a_cpu_build_is_passed_over_by_both(prefect_api, tmp_path, monkeypatch):
    """vLLM as `make engines` installs it on this machine (a CPU build), or none: both pass it
    over on a GPU host and plan the simulated SGLang."""
    model = _sim_model(tmp_path / "Llama-3.1-8B-Instruct", "meta-llama__Llama-3.1-8B-Instruct")
    mp = _sim_host(tmp_path, 1)
    mp.delenv("INFOPT_VLLM_PYTHON")
    try:
        ours, theirs = _both_plans(tmp_path, model, gpus=1, engines=["vllm", "sglang"])
    finally:
        mp.undo()
    assert ours == theirs
    assert ours.engines[0] is EngineName.SGLANG
    assert any(s.startswith("vllm") for s in ours.skipped), ours.skipped
