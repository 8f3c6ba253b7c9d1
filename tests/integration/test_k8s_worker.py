"""A Kubernetes work pool with infopt's GPU base job template, end to end short of a cluster:
the pool is created from deployments/k8s-gpu-job-template.json on the session's real Prefect
server, a flow run of a deployment on it asks for 2 GPUs, and a real `prefect worker start
--type kubernetes --run-once` submits it to a fake Kubernetes API server (tests/kubeapi.py) over
HTTP. The Job the worker sent is what a GPU node would have been asked to run.

The flow itself never runs: the fake's pod is a stand-in, and prefect-kubernetes 0.8.0's worker
returns once the Job is created (the run's later states come from the pod's own engine)."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.kubeapi import FakeKube

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
TEMPLATE = ROOT / "deployments" / "k8s-gpu-job-template.json"
POOL = "infopt-k8s-gpu-test"
IMAGE = "registry.example/infopt:cuda"
SELECTOR = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "dedicated", "operator": "Equal", "value": "inference",
                "effect": "NoSchedule"}]


def _prefect(env, *args, timeout=120):
    out = subprocess.run([PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@contextmanager
def _client(env):
    """A client of the session's server, without changing this process's settings."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
            get_client(sync_client=True) as client:
        yield client


@pytest.fixture(scope="module")
def gpu_pool(prefect_server):
    """The work pool from the template, and a deployment of `plan` on it (image set there)."""
    env = {**prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}
    _prefect(env, "work-pool", "create", POOL, "--type", "kubernetes",
             "--base-job-template", str(TEMPLATE), "--overwrite")
    with _client(env) as client:
        flow_id = client.create_flow_from_name("plan")
        dep_id = client.create_deployment(
            flow_id=flow_id, name="k8s-gpu", work_pool_name=POOL,
            entrypoint="flows/plan.py:plan", job_variables={"image": IMAGE})
    return env, dep_id


def _worker_env(env: dict, kubeconfig: Path) -> dict:
    worker_env = {**env, "KUBECONFIG": str(kubeconfig),
                  "PREFECT_INTEGRATIONS_KUBERNETES_OBSERVER_ENABLED": "false",
                  "PREFECT_LOGGING_LEVEL": "INFO"}
    # Else the worker would take the in-cluster service account over the kubeconfig.
    for var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        worker_env.pop(var, None)
    return worker_env


def _run_worker_once(env: dict) -> str:
    worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", POOL, "--type",
                               "kubernetes", "--run-once"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, out[-3000:]
    return out


def test_worker_submits_the_gpu_job(gpu_pool, tmp_path):
    env, dep_id = gpu_pool
    with _client(env) as client:
        run = client.create_flow_run_from_deployment(
            dep_id, parameters={"request": {"model": "Qwen/Qwen3-8B", "gpu": "H100 SXM"}},
            job_variables={"gpu_count": 2, "node_selector": SELECTOR,
                           "tolerations": TOLERATIONS, "shm_size": "32Gi"})
    with FakeKube() as kube:
        out = _run_worker_once(_worker_env(env, kube.write_kubeconfig(tmp_path / "kubeconfig")))
    jobs = kube.created_of("Job")
    assert len(jobs) == 1, out[-3000:]
    job = jobs[0]
    assert job["apiVersion"] == "batch/v1" and job["metadata"]["namespace"] == "default"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The worker posts the rendered manifest as is: the count stays a JSON number.
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 2
    assert pod["nodeSelector"] == SELECTOR
    assert pod["tolerations"] == TOLERATIONS
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} \
        in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert container["image"] == IMAGE  # from the deployment's job variables
    env_vars = {e["name"]: e.get("value") for e in container["env"]}
    assert env_vars["PREFECT__FLOW_RUN_ID"] == str(run.id)
    assert job["metadata"]["labels"]["prefect.io/flow-run-id"] == str(run.id)
    # The request came with the kubeconfig's token (the fake answers 401 otherwise) and the
    # worker recorded the Job as the run's infrastructure.
    with _client(env) as client:
        after = client.read_flow_run(run.id)
    assert after.infrastructure_pid == f"default:{job['metadata']['name']}", out[-3000:]
    assert after.state.is_pending(), after.state


def test_the_server_checks_declared_job_variables_only(gpu_pool):
    from prefect.exceptions import PrefectHTTPStatusError

    env, dep_id = gpu_pool
    with _client(env) as client:
        with pytest.raises(PrefectHTTPStatusError) as err:
            client.create_flow_run_from_deployment(dep_id, job_variables={"gpu_count": -1})
        # A name the schema does not declare passes, and the worker would drop it
        # (deployments/README.md): misspelled variables fail silently.
        typo = client.create_flow_run_from_deployment(dep_id, job_variables={"gpus": 2})
        client.delete_flow_run(typo.id)  # so no later worker in the session picks it up
    assert err.value.response.status_code == 422
    assert "gpu_count" in err.value.response.text
