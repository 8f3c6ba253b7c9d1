"""The gates inside a real optimize run (real llama-server, real Prefect test server), all
pre-authorized by the request so nothing waits: two local weight variants made with the real
llama-quantize behind the quantize gate (Q8_0 passes the quality gate and is measured; Q2_K
fails it and is rejected unmeasured), and the winner exposed on 0.0.0.0 behind the expose gate
with a generated API key (kept in a Prefect Secret block, never in the run's files)."""

from __future__ import annotations

import pytest

from infopt.bootstrap import default_paths
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def run(prefect_api, tmp_path_factory):
    from flows.optimize import optimize

    runs = tmp_path_factory.mktemp("runs")
    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1], target=1, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(
        model=ModelTarget(path=str(default_paths().gguf)), workload=wl.traffic,
        objective=wl.objective, budgets=Budgets(repeats=1), scenarios=[],
        quality_task_items=0, quality_tolerance=0.05, requantize=["Q8_0", "Q2_K"],
        authorize=["quantize", "expose"], expose={"address": "0.0.0.0"},
        dimensions=["weights"])
    report = optimize(request=request, runs_dir=str(runs))
    return report, runs / report.run_id


def test_each_variant_passed_its_gate_and_the_quality_gate_decided(run):
    report, _ = run
    gates = {a.key: a for a in report.approvals}
    assert set(gates) == {"quantize-q8-0", "quantize-q2-k", "expose-winner"}
    assert all(a.approved and a.source.value == "pre-authorized" for a in gates.values())
    weights = {t.value: t for t in report.trials if t.dimension == "weights"}
    assert set(weights) == {"weights=Q8_0", "weights=Q2_K"}
    q8, q2 = weights["weights=Q8_0"], weights["weights=Q2_K"]
    assert q8.quality.passed and q8.benchmark is not None
    assert not q2.quality.passed and q2.benchmark is None
    assert q2.failed.startswith("rejected by the quality gate")
    assert [a.key for a in q8.approvals] == ["quantize-q8-0"]
    assert q8.config.model_path.endswith("-Q8_0.gguf")
    # The weights step of the ladder: Q2_K stopped by the gate; one repeat cannot tell a
    # gain from noise, so Q8_0 is not accepted.
    step = report.ladder.steps[0]
    status = {c.candidate.label: c.status for c in step.candidates}
    assert status["weights=Q2_K"] == "gate" and status["weights=Q8_0"] in ("within noise",
                                                                           "worse")
    assert report.winner_label == "baseline"


def test_the_winner_was_exposed_with_a_key_that_appears_nowhere(run):
    from prefect.blocks.system import Secret

    report, run_dir = run
    e = report.exposure
    assert e.approved and e.bind_addresses == [f"0.0.0.0:{e.port}"]
    assert e.auth_passed and e.api_key_env == "LLAMA_API_KEY"
    assert e.api_key_source.startswith("Prefect Secret block infopt-engine-api-key")
    key = Secret.load("infopt-engine-api-key").get()
    assert len(key) >= 32
    for f in run_dir.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".md", ".log", ".jsonl", ".txt"):
            assert key not in f.read_text(errors="replace"), f
    md = (run_dir / "report.md").read_text()
    assert "## Approvals" in md and "pre-authorized" in md
    assert f"listening on 0.0.0.0:{e.port}" in md
    assert "all on loopback" in md  # the trials themselves
