"""Every Kubernetes object infopt renders, validated offline against Kubernetes' own schemas
(kubernetes-validate 1.37.0 ships them) in strict mode, where a field the API does not know is
an error (the API server would drop it with only a warning):

- infopt.engines.render.kubernetes_manifest: ConfigMap, Deployment, Service, per engine and
  per model source;
- deployments/k8s-gpu-job-template.json: the Job the Prefect Kubernetes worker submits, rendered
  by prefect-kubernetes' own code from the pool's variables (placeholders filled with
  representative values) and prepared for a flow run as the worker does;
- the pod-spec fragments infopt's Helm values hand to the charts, which copy them verbatim into
  their Deployments (volumes, volumeMounts, env, resources, ports).

Pinned to Kubernetes 1.36: the API of the kubernetes client infopt depends on
(pyproject.toml: kubernetes<37, i.e. the 36.x client, Kubernetes 1.36)."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import uuid
from pathlib import Path

import kubernetes_validate
import pytest

from blocks.cluster import ClusterTarget
from infopt.cluster.helm import llmd_values
from infopt.engines import render
from infopt.engines.helm import ModelClaim, ModelHostPath, TokenSecret, vllm_stack_values
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.sglang import adapter as sglang
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.specs.serving import LlamaCppConfig, SglangConfig, TrtllmConfig, VllmConfig

K8S_VERSION = "1.36"
ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deployments" / "k8s-gpu-job-template.json"
# prefect-kubernetes 0.8.0 copies its default template's `parallelism: 1, completions: 1` into
# the *pod* spec (they are Job fields) and its worker refuses a template without them there
# (prefect_kubernetes/worker.py, _get_base_job_manifest / _validate_job_manifest: "Job is
# missing required attributes"). Kubernetes drops them; strict validation names them.
WORKER_REQUIRED_POD_FIELDS = ("completions", "parallelism")


def _strict(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def _error(obj: dict) -> str:
    with pytest.raises(kubernetes_validate.ValidationError) as e:
        _strict(obj)
    return e.value.message


# ---------------------------------------------------------------------------------------------
# kubernetes_manifest

def _launches():
    return {
        "vllm": vllm.build_launch(VllmConfig(model_path="/models/Qwen3-8B", max_model_len=8192,
                                             tensor_parallel_size=2), "python3", 8000),
        "sglang": sglang.build_launch(SglangConfig(model_path="/models/Qwen3-8B",
                                                   context_length=8192), "python3", 30000),
        # Side files: a ConfigMap with them.
        "trtllm": trtllm.build_launch(TrtllmConfig(
            model_path="/models/Llama-3.1-8B", max_seq_len=8192,
            extra_llm_api_options={"kv_cache_config": {"enable_block_reuse": False}}),
            "trtllm-serve", 8000),
        "llamacpp": llamacpp.build_launch(LlamaCppConfig(
            model_path="/models/m.gguf", ctx_per_slot_tokens=4096), "/app/llama-server", 8080),
    }


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
@pytest.mark.parametrize("model", [None, ModelClaim(claim_name="models"),
                                   ModelHostPath(path="/mnt/models")],
                         ids=["image", "claim", "node-dir"])
def test_manifest_objects_are_valid_kubernetes(engine, model):
    gpus = 0 if engine == "llamacpp" else 2
    manifest = render.kubernetes_manifest(_launches()[engine], name=f"w-{engine}",
                                          image="registry.example/engine:1", gpus=gpus,
                                          namespace="inference", model=model)
    kinds = [o["kind"] for o in manifest["items"]]
    assert kinds[-2:] == ["Deployment", "Service"]
    assert ("ConfigMap" in kinds) == (engine == "trtllm")
    for obj in manifest["items"]:
        _strict(obj)


def test_a_misspelt_manifest_field_is_refused():
    items = render.kubernetes_manifest(_launches()["trtllm"], name="w", image="i", gpus=1,
                                       model=ModelClaim(claim_name="models"))["items"]
    cm, dep, svc = (copy.deepcopy(o) for o in items)
    dep["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    assert "'volumeMount' was unexpected" in _error(dep)
    svc["spec"]["selectr"] = {}
    assert "'selectr' was unexpected" in _error(svc)
    cm["dat"] = cm.pop("data")
    assert "'dat' was unexpected" in _error(cm)
    bad = copy.deepcopy(items[1])
    (claim,) = [v for v in bad["spec"]["template"]["spec"]["volumes"] if v["name"] == "model"]
    claim["persistentVolumeClaim"]["claim"] = "x"
    assert "'claim' was unexpected" in _error(bad)


def test_validation_is_offline(monkeypatch):
    """The schemas are the wheel's own files: nothing is fetched."""
    def refuse(*_a, **_k):
        raise AssertionError("kubernetes-validate tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for obj in render.kubernetes_manifest(_launches()["vllm"], name="w", image="i",
                                          gpus=1)["items"]:
        _strict(obj)


# ---------------------------------------------------------------------------------------------
# The work pool's Job

def _job(template: dict, values: dict) -> dict:
    """The Job the worker submits for a flow run: the pool's template rendered with the run's
    job variables, then prepared for the run (env, image, command, names, labels)."""
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.objects import FlowRun
    from prefect_kubernetes.worker import KubernetesWorkerJobConfiguration

    # No server: the template references no blocks or variables, so this client (nothing
    # listens on port 9) is never called.
    client = PrefectClient("http://127.0.0.1:9/api")
    config = asyncio.run(KubernetesWorkerJobConfiguration.from_template_and_values(
        template, values, client=client))
    config.prepare_for_flow_run(FlowRun(id=uuid.uuid4(), flow_id=uuid.uuid4(),
                                        name="brave-otter"))
    return config.job_manifest


def _without_worker_fields(job: dict) -> dict:
    job = copy.deepcopy(job)
    pod = job["spec"]["template"]["spec"]
    for field in WORKER_REQUIRED_POD_FIELDS:
        assert pod.pop(field) == 1
    return job


_TARGET = ClusterTarget(namespace="inference",
                        gpu_node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}])
# The pool's own job variables (prefect.yaml, definitions.work_pools.k8s_gpu), a cluster
# target's, and a run's representative others.
JOB_VALUES = {
    "defaults": {},
    "optimize-gpu": {"gpu_count": 1, "shm_size": "16Gi", **_TARGET.job_variables(),
                     "image": "registry.example/infopt:cuda", "cpu_request": "8",
                     "cpu_limit": "8", "memory_request": "64Gi", "memory_limit": "64Gi",
                     "env": {"INFOPT_CHECKOUT": "/opt/infopt"}, "labels": {"team": "ml"},
                     "annotations": {"infopt/run": "r1"}, "service_account_name": "infopt",
                     "finished_job_ttl": 3600, "backoff_limit": 0,
                     "image_pull_policy": "Always", "name": "infopt-optimize"},
    "cpu-only": {"gpu_count": 0, "node_selector": {}, "tolerations": [], "shm_size": "1Gi"},
}


@pytest.mark.parametrize("case", sorted(JOB_VALUES))
def test_the_work_pool_job_is_valid_kubernetes(case):
    job = _job(json.loads(TEMPLATE.read_text()), JOB_VALUES[case])
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    kubernetes_validate.validate(job, K8S_VERSION, strict=False)
    # Strict mode finds exactly the two fields the worker insists on, nothing of infopt's.
    message = _error(job)
    assert all(f"'{f}'" in message for f in WORKER_REQUIRED_POD_FIELDS), message
    assert "were unexpected" in message and message.count("'") == 4, message
    _strict(_without_worker_fields(job))


def test_the_worker_refuses_a_template_without_its_pod_fields():
    """Why the template keeps the two misplaced fields strict validation names."""
    template = json.loads(TEMPLATE.read_text())
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    for field in WORKER_REQUIRED_POD_FIELDS:
        del pod[field]
    with pytest.raises(ValueError, match="missing required attributes"):
        _job(template, {})


def test_an_unset_shm_size_is_sent_as_null():
    """shm_size null (no size limit) renders `sizeLimit: null`, which the API server decodes
    as unset (a null JSON value into an optional pointer field); the JSON schema's
    int-or-string quantity matches null in both of its oneOf branches and so refuses it: the
    only null in the Job, validated once it is removed."""
    job = _without_worker_fields(_job(json.loads(TEMPLATE.read_text()), {"shm_size": None}))
    (volume,) = job["spec"]["template"]["spec"]["volumes"]
    assert volume["emptyDir"]["sizeLimit"] is None
    assert "sizeLimit" in json.dumps(_error_path(job))
    del volume["emptyDir"]["sizeLimit"]
    assert "null" not in json.dumps(job)
    _strict(job)


def _error_path(obj: dict) -> list:
    with pytest.raises(kubernetes_validate.ValidationError) as e:
        _strict(obj)
    return list(e.value.path)


def test_a_misspelt_job_field_is_refused():
    template = json.loads(TEMPLATE.read_text())
    container = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"][
        "containers"][0]
    container["volumeMounts"][0]["mountpath"] = container["volumeMounts"][0].pop("mountPath")
    job = _without_worker_fields(_job(template, JOB_VALUES["optimize-gpu"]))
    message = _error(job)
    assert "'mountpath' was unexpected" in message or "'mountPath' is a required" in message


# ---------------------------------------------------------------------------------------------
# The pod-spec fragments in the Helm values (the charts copy them verbatim)

def _pod(containers: list[dict], volumes: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fragment"},
            "spec": {"containers": containers, "volumes": volumes}}


def _stack_pod(**kw) -> dict:
    values = vllm_stack_values(_launches()["vllm"], "qwen", "vllm/vllm-openai:v0.32.0", 2, 8, 24,
                               **kw)
    spec = values["servingEngineSpec"]["modelSpec"][0]
    # deployment-vllm-multi.yaml:281-283 (env), 440-442 (extraVolumeMounts), 501-503
    # (extraVolumes): toYaml of the values, unchanged.
    return _pod([{"name": "vllm", "image": "i", "env": spec["env"],
                  "volumeMounts": spec.get("extraVolumeMounts", [])}],
                spec.get("extraVolumes", []))


def _llmd_pods(**kw) -> list[dict]:
    v = llmd_values(_launches()["vllm"], name="qwen", image="i:t", replicas=2, gpus=2, cpus=8,
                    memory_gib=24, prefill_replicas=2, **kw)
    d = v["modelServers"]["defaults"]
    # modelserver-deployments.yaml: env (72-77), ports (79-82), resources (83-86),
    # volumeMounts (103-106), volumes (110-113), each toYaml of the values.
    return [_pod([{"name": "modelserver", "image": "i", "command": d["command"],
                   "args": item["args"], "env": d["env"], "ports": d["ports"],
                   "resources": item["resources"],
                   "volumeMounts": item.get("volumeMounts", [])}],
                 item.get("volumes", [])) for item in v["modelServers"]["items"]]


@pytest.mark.parametrize("model", [None, ModelClaim(claim_name="models"),
                                   ModelHostPath(path="/mnt/models")],
                         ids=["none", "claim", "node-dir"])
def test_helm_value_fragments_are_valid_pod_spec_parts(model):
    token = TokenSecret(secret_name="hf-token")
    _strict(_stack_pod(model=model, token=token))
    for pod in _llmd_pods(model=model, token=token):
        _strict(pod)


def test_a_misspelt_fragment_field_is_refused():
    pod = _stack_pod(model=ModelClaim(claim_name="models"))
    pod["spec"]["containers"][0]["volumeMounts"][0]["readonly"] = True
    assert "'readonly' was unexpected" in _error(pod)
