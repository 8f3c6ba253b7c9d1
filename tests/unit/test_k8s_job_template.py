"""deployments/k8s-gpu-job-template.json, the Kubernetes work pool's base job template with GPU
variables, rendered by prefect-kubernetes' own code (what the worker does before it creates the
Job): job variables land where Kubernetes reads them, the defaults make a schedulable GPU Job,
and the worker's default template, by contrast, drops them without a word."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deployments" / "k8s-gpu-job-template.json"
ADDED = {"gpu_count", "node_selector", "tolerations", "shm_size"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _template() -> dict:
    return json.loads(TEMPLATE.read_text())


def _default_template() -> dict:
    from prefect_kubernetes.worker import KubernetesWorker

    return KubernetesWorker.get_default_base_job_template()


def _render(template: dict, values: dict) -> dict:
    """The Job manifest the worker would build from the pool's template and a run's job
    variables."""
    from prefect.client.orchestration import PrefectClient
    from prefect_kubernetes.worker import KubernetesWorkerJobConfiguration

    # Without a client, rendering starts a temporary Prefect server (~11 s). The template
    # references no blocks or variables, so this client is never called: nothing listens on
    # port 9, and a call would fail the test.
    client = PrefectClient("http://127.0.0.1:9/api")
    config = asyncio.run(KubernetesWorkerJobConfiguration.from_template_and_values(
        template, values, client=client))
    return config.job_manifest


def _pod(manifest: dict) -> dict:
    return manifest["spec"]["template"]["spec"]


def test_every_added_variable_is_declared_and_referenced():
    from prefect.server.schemas.actions import validate_base_job_template
    from prefect.utilities.templating import find_placeholders

    tpl = _template()
    validate_base_job_template(tpl)  # what the server checks on `work-pool create`
    used = {p.name for p in find_placeholders(tpl["job_configuration"])}
    declared = set(tpl["variables"]["properties"])
    # The server only checks used <= declared; a declared but unused variable is the silent
    # drop this template exists to avoid.
    assert used == declared
    assert ADDED <= declared
    # It extends the worker's default: nothing of the default is lost.
    assert set(_default_template()["variables"]["properties"]) <= declared


def test_job_variables_render_into_the_job():
    selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    tolerations = [GPU_TOLERATION, {"key": "dedicated", "operator": "Equal",
                                    "value": "inference", "effect": "NoSchedule"}]
    manifest = _render(_template(), {
        "gpu_count": 2, "node_selector": selector, "tolerations": tolerations,
        "shm_size": "32Gi", "image": "registry.example/infopt:cuda", "cpu_request": "8",
        "memory_request": "64Gi", "namespace": "inference"})
    pod = _pod(manifest)
    container = pod["containers"][0]
    res = container["resources"]
    # The whole-string placeholder keeps the variable's JSON type: an int, which Kubernetes
    # takes as a quantity. Requests must equal limits for extended resources.
    assert res["limits"]["nvidia.com/gpu"] == 2
    assert res["requests"]["nvidia.com/gpu"] == 2
    assert res["requests"]["cpu"] == "8" and res["requests"]["memory"] == "64Gi"
    assert pod["nodeSelector"] == selector
    assert pod["tolerations"] == tolerations
    assert pod["volumes"] == [{"name": "dshm",
                               "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert container["image"] == "registry.example/infopt:cuda"
    assert manifest["metadata"]["namespace"] == "inference"
    assert manifest["kind"] == "Job" and manifest["apiVersion"] == "batch/v1"


def test_defaults_make_a_one_gpu_job_on_a_gpu_node():
    pod = _pod(_render(_template(), {}))
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert container["resources"]["requests"] == {"nvidia.com/gpu": 1}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert pod["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    # No image set: the key is absent and the worker fills in Prefect's image at submission.
    assert "image" not in container


def test_a_cpu_only_run_can_opt_out():
    pod = _pod(_render(_template(), {"gpu_count": 0, "node_selector": {}, "tolerations": [],
                                     "shm_size": None}))
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 0}
    assert pod["nodeSelector"] == {} and pod["tolerations"] == []
    # A null size is sent as null, which Kubernetes reads as unset: the in-memory volume is
    # bounded by the pod's memory only.
    assert pod["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": None}


def test_the_default_template_drops_gpu_variables_silently():
    """Why the custom template exists: with the worker's default, a run asking for GPUs gets a
    Job with none, and nothing fails."""
    manifest = _render(_default_template(), {
        "gpu_count": 2, "node_selector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [GPU_TOLERATION], "image": "registry.example/infopt:cuda"})
    pod = _pod(manifest)
    container = pod["containers"][0]
    assert container["image"] == "registry.example/infopt:cuda"  # known variables do render
    assert "nvidia.com/gpu" not in json.dumps(manifest)
    assert "nodeSelector" not in pod and "tolerations" not in pod and "volumes" not in pod


@pytest.mark.parametrize("name", sorted(ADDED))
def test_added_variables_are_documented(name):
    prop = _template()["variables"]["properties"][name]
    assert prop.get("title") and len(prop.get("description", "")) > 40
    assert "default" in prop
