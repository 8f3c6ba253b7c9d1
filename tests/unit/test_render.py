"""Container and Kubernetes renderings of a Launch: structure, exposure closed by default, and
acceptance by the real Kubernetes client's models (deserialize + serialize round-trip: a key
the API schema does not know is dropped by the client, so the round-trip would differ)."""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client as k8s

from infopt.engines import ENGINES, render
from infopt.engines.helm import ModelClaim, ModelHostPath
from infopt.engines.launch import Launch
from infopt.engines.sglang import adapter as sglang
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.specs.base import InputError
from infopt.specs.serving import EngineName, SglangConfig, TrtllmConfig, VllmConfig


def _sglang_launch(port=30000):
    cfg = SglangConfig(model_path="/models/Qwen3-8B", served_model_name="qwen",
                       context_length=32768, tp_size=2)
    return sglang.build_launch(cfg, "python3", port)


def _trt_launch():
    cfg = TrtllmConfig(model_path="/models/Llama-3.1-8B", max_seq_len=8192,
                       kv_cache_free_gpu_memory_fraction=0.8,
                       extra_llm_api_options={"kv_cache_config": {"enable_block_reuse": False}})
    return trtllm.build_launch(cfg, "trtllm-serve", 8000)


def _flag(argv, name):
    return argv[argv.index(name) + 1]


# ---------------------------------------------------------------------------------------------
# docker run

def test_container_command_structure():
    launch = _sglang_launch()
    cmd = render.container_command(launch, "lmsysorg/sglang:v0.5.23-cu129", gpus=2)
    assert cmd[:4] == ["docker", "run", "--rm", "--init"]
    assert _flag(cmd, "--gpus") == "2" and _flag(cmd, "--shm-size") == "16g"
    # Published on the host's loopback only: nothing beyond this machine can connect.
    assert _flag(cmd, "-p") == "127.0.0.1:30000:30000"
    assert _flag(cmd, "-e") == "HF_HUB_OFFLINE=1"
    assert _flag(cmd, "-v") == "/models/Qwen3-8B:/models/Qwen3-8B:ro"
    image_at = cmd.index("lmsysorg/sglang:v0.5.23-cu129")
    assert cmd[image_at - 2:image_at] == ["--entrypoint", "python3"]
    engine_argv = cmd[image_at + 1:]
    assert engine_argv[:2] == ["-m", "sglang.launch_server"]
    # Inside the container's namespace the engine binds all of *its* interfaces.
    assert _flag(engine_argv, "--host") == "0.0.0.0" and _flag(engine_argv, "--port") == "30000"
    assert _flag(engine_argv, "--tp-size") == "2"
    assert launch.argv[launch.argv.index("--host") + 1] == "127.0.0.1"  # the Launch is untouched


def test_container_command_cpu_engine_has_no_gpu_flags_and_mounts_side_files():
    cmd = render.container_command(_trt_launch(), "nvcr.io/nvidia/tensorrt-llm/release:1.2.0",
                                   gpus=0)
    assert "--gpus" not in cmd and "--shm-size" not in cmd
    (path,) = _trt_launch().files
    assert f"{path}:{path}:ro" in cmd
    assert _flag(cmd, "--extra_llm_api_options") == path


def test_container_command_refuses_what_it_cannot_mount():
    with pytest.raises(InputError, match="model_path"):
        render.container_command(Launch(argv=["x", "--port", "1"]), "img", 1)
    rel = sglang.build_launch(SglangConfig(model_path="models/q", context_length=64), "p", 1)
    with pytest.raises(InputError, match="absolute"):
        render.container_command(rel, "img", 1)
    with pytest.raises(InputError, match="gpus"):
        render.container_command(_sglang_launch(), "img", -1)


# ---------------------------------------------------------------------------------------------
# Kubernetes

def _k8s_roundtrip(obj: dict, kind: str) -> dict:
    api = k8s.ApiClient()

    class _Response:  # what ApiClient.deserialize reads: the JSON body
        data = json.dumps(obj)

    model = api.deserialize(_Response(), kind)
    return api.sanitize_for_serialization(model)


def test_kubernetes_manifest_structure():
    manifest = render.kubernetes_manifest(_sglang_launch(), name="qwen-sglang",
                                          image="lmsysorg/sglang:v0.5.23-cu129", gpus=2,
                                          namespace="llm",
                                          model=ModelClaim(claim_name="models"))
    assert manifest["kind"] == "List"
    dep, svc = manifest["items"]
    assert (dep["kind"], svc["kind"]) == ("Deployment", "Service")
    assert dep["metadata"]["namespace"] == svc["metadata"]["namespace"] == "llm"
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["python3"] and c["args"][:2] == ["-m", "sglang.launch_server"]
    assert _flag(c["args"], "--host") == "0.0.0.0"
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert c["env"] == [{"name": "HF_HUB_OFFLINE", "value": "1"}]
    assert c["ports"] == [{"name": "http", "containerPort": 30000, "protocol": "TCP"}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}
            } in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    # In-cluster only: exposing it further is a separately approved step.
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 30000, "targetPort": "http",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"] \
        == dep["spec"]["template"]["metadata"]["labels"]


def test_kubernetes_manifest_is_accepted_by_the_kubernetes_client():
    manifest = render.kubernetes_manifest(_trt_launch(), name="llama-trt", image="img", gpus=1,
                                          model=ModelClaim(claim_name="models"))
    cm, dep, svc = manifest["items"]
    for obj, kind in ((cm, "V1ConfigMap"), (dep, "V1Deployment"), (svc, "V1Service")):
        assert _k8s_roundtrip(obj, kind) == obj, kind
    assert yaml.safe_load(yaml.safe_dump(manifest)) == manifest  # kubectl apply -f takes it


def test_kubernetes_side_files_come_from_a_configmap():
    launch = _trt_launch()
    ((path, text),) = launch.files.items()
    cm, dep, _ = render.kubernetes_manifest(launch, name="llama-trt", image="img", gpus=1)["items"]
    key = path.rsplit("/", 1)[1]
    assert cm["metadata"]["name"] == "llama-trt-files" and cm["data"] == {key: text}
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "engine-files", "mountPath": path, "subPath": key, "readOnly": True} \
        in c["volumeMounts"]
    assert {"name": "engine-files", "configMap": {"name": "llama-trt-files"}} \
        in dep["spec"]["template"]["spec"]["volumes"]
    # No PVC asked for: the image must hold the model, nothing is mounted for it.
    assert all(m["name"] != "model" for m in c["volumeMounts"])


def test_kubernetes_model_from_a_node_directory():
    dep = render.kubernetes_manifest(
        _sglang_launch(), name="q", image="i", gpus=1,
        model=ModelHostPath(path="/mnt/models"))["items"][0]
    pod = dep["spec"]["template"]["spec"]
    # Directory, not DirectoryOrCreate: a node without the weights fails at mount time.
    assert {"name": "model", "hostPath": {"path": "/mnt/models", "type": "Directory"}} \
        in pod["volumes"]
    assert {"name": "model", "mountPath": "/models", "readOnly": True} \
        in pod["containers"][0]["volumeMounts"]
    bare = vllm.build_launch(VllmConfig(model_path="/m", max_model_len=4096), "python3", 8000)
    with pytest.raises(InputError, match="below a directory other than '/'"):
        render.kubernetes_manifest(bare, name="e", image="i", gpus=0,
                                   model=ModelClaim(claim_name="models"))


@pytest.mark.parametrize("engine", [EngineName.VLLM, EngineName.SGLANG, EngineName.TRTLLM])
def test_kubernetes_probe_uses_each_adapters_health_path(engine):
    launch = {EngineName.VLLM: vllm.build_launch(VllmConfig(model_path="/models/m",
                                                            max_model_len=4096), "python3", 8000),
              EngineName.SGLANG: _sglang_launch(8000),
              EngineName.TRTLLM: _trt_launch()}[engine]
    dep = render.kubernetes_manifest(launch, name="e", image="i", gpus=1)["items"][-2]
    assert dep["kind"] == "Deployment"
    probe = dep["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"]["path"] == ENGINES[engine].health_path


def test_kubernetes_cpu_engine_requests_no_gpu_and_names_are_checked():
    launch = vllm.build_launch(VllmConfig(model_path="/models/m", max_model_len=4096), "py", 1)
    dep = render.kubernetes_manifest(launch, name="cpu", image="i", gpus=0)["items"][0]
    assert "resources" not in dep["spec"]["template"]["spec"]["containers"][0]
    for bad in ("Qwen", "-x", "a_b", "x" * 64):
        with pytest.raises(InputError, match="Kubernetes name"):
            render.kubernetes_manifest(launch, name=bad, image="i", gpus=0)
    with pytest.raises(InputError, match="engine"):  # no engine: health route unknown
        render.kubernetes_manifest(Launch(argv=["x"], port=1, model_path="/m"), name="x",
                                   image="i", gpus=0)


def test_manifest_objects_do_not_share_state():
    manifest = render.kubernetes_manifest(_sglang_launch(), name="q", image="i", gpus=1)
    dep, svc = manifest["items"]
    dep["metadata"]["labels"]["extra"] = "1"
    assert "extra" not in svc["metadata"]["labels"]


def test_write_launch_files(tmp_path):
    launch = Launch(argv=["x"], files={str(tmp_path / "d" / "a.yaml"): "k: 1\n"})
    (written,) = render.write_launch_files(launch)
    assert written.read_text() == "k: 1\n"
    assert render.write_launch_files(Launch(argv=["x"])) == []


def test_vllm_helm_values_pass_the_winners_exact_flags_through():
    cfg = VllmConfig(model_path="/models/Qwen3-8B", served_model_name="qwen",
                     max_model_len=8192, max_num_seqs=16, tensor_parallel_size=2,
                     kv_cache_dtype="fp8", enforce_eager=True)
    d = render.render_deployment(cfg, port=8000, gpus=2, name="infopt-x", cpus=8,
                                 model_bytes=16 * 2**30)
    assert d.helm_chart == "vllm/vllm-stack"
    spec = yaml.safe_load(d.helm_values_yaml)["servingEngineSpec"]["modelSpec"][0]
    assert spec["modelURL"] == "/models/Qwen3-8B" and spec["requestGPU"] == 2
    assert (spec["repository"], spec["tag"]) == ("vllm/vllm-openai", "v0.32.0")
    assert spec["requestCPU"] == 8 and spec["requestMemory"] == "20Gi"
    # Every flag of the winner's command except those the chart sets itself (model, host,
    # port) and the one it renders from its own knob (TP, which also mounts /dev/shm).
    argv = vllm.build_launch(cfg, "python3", 8000).argv
    flags = argv[argv.index("vllm.entrypoints.openai.api_server") + 1:]
    for owned in ("--model", "--host", "--port", "--tensor-parallel-size"):
        i = flags.index(owned)
        del flags[i:i + 2]
    assert spec["vllmConfig"]["extraArgs"] == flags
    assert spec["vllmConfig"]["tensorParallelSize"] == 2
    assert "--kv-cache-dtype" in flags and "--enforce-eager" in flags
    assert d.image_digest is None and any("by tag only" in n for n in d.notes)


def test_engines_without_a_chart_render_no_helm_values():
    from infopt.specs.serving import LlamaCppConfig

    d = render.render_deployment(LlamaCppConfig(model_path="/m/a.gguf", ctx_per_slot_tokens=4096),
                                 port=8000, gpus=0,
                                 name="infopt-y")
    assert d.helm_chart is None and d.helm_values_yaml is None
