"""The deployments in prefect.yaml, against a real Prefect server: `prefect --no-prompt deploy
--all` creates them with typed parameter schemas (the UI's forms), and a run of the `plan`
deployment executes on a real process worker started here (no engine needed), leaving its
result and artifact on the server."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from infopt.bootstrap import default_paths

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _prefect(env, *args, timeout=180):
    out = subprocess.run([PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.fixture(scope="module")
def deployed(prefect_server):
    env = {**prefect_server, "INFOPT_CHECKOUT": str(ROOT), "PREFECT_LOGGING_LEVEL": "WARNING"}
    for pool in ("infopt-process", "infopt-trials"):
        _prefect(env, "work-pool", "create", pool, "--type", "process", "--overwrite")
    _prefect(env, "work-pool", "create", "infopt-k8s-gpu", "--type", "kubernetes",
             "--base-job-template", str(ROOT / "deployments" / "k8s-gpu-job-template.json"),
             "--overwrite")
    _prefect(env, "--no-prompt", "deploy", "--all")
    return env


@contextmanager
def _client(env):
    """A client of the session's server, without changing this process's settings."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
            get_client(sync_client=True) as client:
        yield client


def _final_state(client, run_id, timeout_s: float = 60.0):
    """The run's state once final (the worker may return before the server records it), or
    the last one seen after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (state := client.read_flow_run(run_id).state).is_final() and \
            time.monotonic() < deadline:
        time.sleep(1)
    return state


def test_deploy_all_creates_the_deployments_with_typed_forms(deployed):
    with _client(deployed) as client:
        opt = client.read_deployment_by_name("optimize/optimize")
        plan = client.read_deployment_by_name("plan/plan")
    assert opt.work_pool_name == plan.work_pool_name == "infopt-process"
    # The UI's form comes from the flow's parameter schema: the request's own fields.
    defs = opt.parameter_openapi_schema.get("definitions", {})
    assert "OptimizeRequest" in defs and "workload" in defs["OptimizeRequest"]["properties"]
    pdefs = plan.parameter_openapi_schema
    assert pdefs["required"] == ["request"]
    assert {"model", "gpu", "concurrency"} <= set(
        pdefs["definitions"]["PlanRequest"]["properties"])
    # The cluster flow's form: its ClusterRequest (routers, replica counts, SLOs).
    with _client(deployed) as client:
        cl = client.read_deployment_by_name("cluster/cluster")
    assert cl.work_pool_name == "infopt-process"
    assert {"routers", "replica_counts", "slos", "target_rate_per_s"} <= set(
        cl.parameter_openapi_schema["definitions"]["ClusterRequest"]["properties"])


def test_reoptimize_is_scheduled_with_per_schedule_parameters(deployed):
    with _client(deployed) as client:
        dep = client.read_deployment_by_name("reoptimize/reoptimize")
        gpu = client.read_deployment_by_name("optimize/optimize-gpu")
    assert dep.work_pool_name == "infopt-process"
    assert "ReoptimizeRequest" in dep.parameter_openapi_schema["definitions"]
    by_slug = {s.slug: s for s in dep.schedules}
    nightly, weekly = by_slug["nightly-check"], by_slug["weekly-forced"]
    assert nightly.schedule.cron == "30 3 * * *" and nightly.schedule.timezone == "Europe/Paris"
    assert nightly.active and nightly.parameters == {"request": {"confirm_rounds": 2,
                                                                 "repeats": 2}}
    assert weekly.schedule.cron == "0 4 * * 0"
    assert weekly.parameters == {"request": {"force": True, "retune": True}}
    # The GPU deployment lands on the Kubernetes pool with the template's GPU variables.
    assert gpu.work_pool_name == "infopt-k8s-gpu"
    assert gpu.job_variables == {"gpu_count": 1, "shm_size": "16Gi"}


@pytest.mark.e2e  # a real process worker runs the flow (with the next: ~65 s)
def test_a_plan_run_executes_on_a_process_worker(deployed):
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    gguf = str(default_paths().gguf)
    with _client(deployed) as client:
        dep = client.read_deployment_by_name("plan/plan")
        run = client.create_flow_run_from_deployment(dep.id, parameters={"request": {
            "model": gguf, "gpu": "H100 SXM", "concurrency": 4}})
    worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", "infopt-process",
                               "--run-once"], cwd=ROOT, env=deployed,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = worker.communicate(timeout=300)
    finally:
        if worker.poll() is None:
            worker.kill()
    with _client(deployed) as client:
        state = _final_state(client, run.id)
        assert state.is_completed(), (state, out[-3000:])
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["infopt-plan"])))
    mine = [a for a in arts if a.flow_run_id == run.id]
    assert mine and "FITS" in mine[0].data and gguf in mine[0].data


@pytest.mark.e2e
def test_an_optimize_run_executes_on_a_process_worker(deployed, tmp_path):
    """The optimize deployment end to end on a real process worker: the request is the
    deployment's typed parameter (as the UI's form sends it), the run climbs a ladder step
    with no candidate on a CPU (parallel layouts), and the report lands in runs_dir."""
    from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
    from infopt.specs.results import OptimizationReport
    from infopt.specs.workload import fixed_levels

    wl = fixed_levels(input_tokens=16, output_tokens=4, levels=[1], target=1, requests=2)
    request = OptimizeRequest(model=ModelTarget(path=str(default_paths().gguf)),
                              workload=wl.traffic, objective=wl.objective,
                              budgets=Budgets(repeats=1), dimensions=["parallel_layout"],
                              scenarios=[], quality_task_items=0)
    with _client(deployed) as client:
        dep = client.read_deployment_by_name("optimize/optimize")
        run = client.create_flow_run_from_deployment(dep.id, parameters={
            "request": request.model_dump(mode="json"), "runs_dir": str(tmp_path)})
    out = subprocess.run([PREFECT, "worker", "start", "--pool", "infopt-process",
                          "--run-once"], cwd=ROOT, env=deployed, capture_output=True,
                         text=True, timeout=600)
    with _client(deployed) as client:
        state = _final_state(client, run.id)
    assert state.is_completed(), (state, out.stdout[-3000:], out.stderr[-3000:])
    [report_json] = list(tmp_path.glob("*/report.json"))
    report = OptimizationReport.model_validate_json(report_json.read_text())
    assert report.engine == "llamacpp" and report.winner_command
    assert {t.role for t in report.trials} == {"control", "baseline"}
    assert all(t.failed is None for t in report.trials)
