"""The flows run in this process against the session's one real Prefect server
(tests/conftest.py: `prefect server start`, shared with the tests that drive it from other
processes; one server instead of two saves its ~20 s start)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def prefect_api(prefect_server):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        yield


@pytest.fixture(scope="session")
def optimized_run(prefect_api, tmp_path_factory):
    """One optimize run on the real llama-server and SmolLM2 GGUF, with a reduced request
    count: tests/flows/test_optimize_flow.py asserts on its report, and the reoptimize tests
    re-measure its winner and runner-up (one run instead of two)."""
    from flows.optimize import optimize
    from infopt.bootstrap import default_paths
    from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
    from infopt.specs.workload import fixed_levels
    from tests.hubserver import FakeHub

    gguf = default_paths().gguf
    if not gguf.exists():
        pytest.fail("bundled model missing: run `make engines`")
    runs = tmp_path_factory.mktemp("runs")
    wl = fixed_levels(input_tokens=48, output_tokens=16, levels=[1, 2], target=2, requests=4,
                      cooldown_s=1.0)
    with FakeHub() as hub:  # the shortlist stage talks to the real hub client over real HTTP
        request = OptimizeRequest(
            model=ModelTarget(path=str(gguf), hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                              hub_endpoint=hub.endpoint),
            workload=wl.traffic, objective=wl.objective,
            # Two paired rounds per comparison and the workload's own window: the flow's
            # plumbing, not its statistics (those are replayed in tests/unit/test_climb_*).
            budgets=Budgets(repeats=2, max_rounds=2, max_window_scale=1.0),
            scenarios=["short"], scenario_requests=2, quality_task_items=2,
            # A short ladder: KV precision and the running-request cap (the other dimensions
            # are recorded as not asked for; tests/flows/test_gated_flow.py climbs weights).
            dimensions=["kv_precision", "scheduling"])
        report = optimize(request=request, runs_dir=str(runs))
    return report, runs / report.run_id
