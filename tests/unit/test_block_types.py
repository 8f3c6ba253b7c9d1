"""The Blocks' own rules, without a Prefect server: EngineRuntime (one build, a known engine, the
adapter's override variable), ClusterTarget (job variables under the template's names),
ResultsStore (secrets never printed unless asked for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from blocks import ClusterTarget, EngineRuntime, ResultsStore
from infopt.engines import ENGINES
from infopt.specs.base import InputError

# -- EngineRuntime ----------------------------------------------------------------------------

@pytest.mark.parametrize("sources", [{}, {"binary_path": "/b", "image": "img:1"},
                                     {"binary_path": "/b", "venv_path": "/v", "image": "i"}])
def test_engine_runtime_takes_exactly_one_build(sources):
    with pytest.raises(ValidationError, match="exactly one of binary_path, venv_path or image"):
        EngineRuntime(engine="vllm", version="0.11.0", **sources)


def test_unknown_engine_is_refused_with_the_known_ones():
    with pytest.raises(ValidationError, match="unknown engine 'tgi': choose one of .*vllm"):
        EngineRuntime(engine="tgi", version="1", image="ghcr.io/x/tgi:1")


def test_a_venv_for_an_engine_not_installed_by_pip_is_refused():
    with pytest.raises(ValidationError, match="llamacpp is not installed as a Python package"):
        EngineRuntime(engine="llamacpp", version="0.3.36", venv_path="/opt/llama")


def test_env_overrides_point_the_adapters_own_variable_at_the_build():
    vllm = EngineRuntime(engine="vllm", version="0.11.0", venv_path="/opt/vllm-0.11")
    assert vllm.env_overrides() == {"INFOPT_VLLM_PYTHON": "/opt/vllm-0.11/bin/python"}
    trt = EngineRuntime(engine="trtllm", version="1.2.0", venv_path="/opt/trt")
    assert trt.env_overrides() == {"INFOPT_TRTLLM_SERVE": "/opt/trt/bin/trtllm-serve"}
    llama = EngineRuntime(engine="llamacpp", version="0.3.36", binary_path="/opt/llama-server")
    assert llama.env_overrides() == {"INFOPT_LLAMA_SERVER": "/opt/llama-server"}
    # Each override is the variable the adapter's locate() reads: no engine branch in between.
    for engine, adapter in ENGINES.items():
        rt = EngineRuntime(engine=engine.value, version="1", binary_path="/x/exe")
        assert rt.env_overrides() == {adapter.executable_env: "/x/exe"}


def test_an_image_build_overrides_nothing_here_and_becomes_the_image_job_variable():
    rt = EngineRuntime(engine="sglang", version="0.5.23", image="lmsysorg/sglang:v0.5.23")
    assert rt.env_overrides() == {}
    assert rt.job_variables() == {"image": "lmsysorg/sglang:v0.5.23"}


def test_the_block_and_the_located_build_must_agree_on_the_release(tmp_path: Path,
                                                                   monkeypatch):
    # A `make engines` llama.cpp build: <cache>/bin/llama-server, its release in <cache>/.complete
    exe = tmp_path / "bin" / "llama-server"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / ".complete").write_text("llama-cpp-python==0.3.36 cpu=avx2\n")
    EngineRuntime(engine="llamacpp", version="0.3.36", binary_path=str(exe)).check_version()
    with pytest.raises(InputError, match="is release 0.3.36, but the block says 0.3.40"):
        EngineRuntime(engine="llamacpp", version="0.3.40", binary_path=str(exe)).check_version()
    # The override makes the adapter locate exactly this build.
    rt = EngineRuntime(engine="llamacpp", version="0.3.36", binary_path=str(exe))
    for var, value in rt.env_overrides().items():
        monkeypatch.setenv(var, value)
    assert ENGINES[rt.engine].locate() == str(exe)


# -- ClusterTarget ----------------------------------------------------------------------------

def test_cluster_target_gives_the_templates_job_variables():
    target = ClusterTarget(
        kube_context="gpu-prod", namespace="inference",
        gpu_node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert target.job_variables() == {
        "namespace": "inference",
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}]}
    assert target.kubectl_args() == ["--context", "gpu-prod", "--namespace", "inference"]
    assert ClusterTarget().kubectl_args() == ["--namespace", "default"]


@pytest.mark.parametrize("bad, message", [
    ({"namespace": "GPU_Jobs"}, "not a Kubernetes name"),
    ({"tolerations": [{"key": "a", "operator": "In"}]}, "operator is 'In'"),
    ({"tolerations": [{"key": "a", "effect": "NoRun"}]}, "effect is 'NoRun'"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "takes no value"),
    ({"tolerations": [{"key": "a", "toleration_seconds": 5}]}, "unknown field"),
])
def test_cluster_target_refuses_what_kubernetes_would(bad, message):
    with pytest.raises(ValidationError, match=message):
        ClusterTarget(**bad)


# -- ResultsStore -----------------------------------------------------------------------------

def test_results_store_secrets_never_print_unless_revealed():
    store = ResultsStore(url="s3://runs/infopt", key="AKIAEXAMPLEKEY",
                         secret="wJalrXUtnFEMIexamplesecret",
                         storage_options={"endpoint_url": "http://127.0.0.1:9000"})
    for text in (repr(store), str(store), store.model_dump_json(), str(store.model_dump())):
        assert "AKIAEXAMPLEKEY" not in text and "wJalrXUtnFEMIexamplesecret" not in text
        assert "127.0.0.1:9000" in text  # the non-secret options stay readable
    revealed = store.model_dump_json(context={"include_secrets": True})
    assert "AKIAEXAMPLEKEY" in revealed and "wJalrXUtnFEMIexamplesecret" in revealed
    run_store = store.run_store()
    assert "wJalrXUtnFEMIexamplesecret" not in repr(run_store) + str(run_store.record())
    assert run_store.record() == {"url": "s3://runs/infopt",
                                  "storage_options": {"endpoint_url": "http://127.0.0.1:9000"}}


def test_results_store_refuses_credentials_in_plain_options_and_unknown_protocols():
    with pytest.raises(ValidationError, match=r"\['aws_secret_access_key'\] look like "
                                              "credentials.*key / secret / token"):
        ResultsStore(url="s3://b/p", storage_options={"aws_secret_access_key": "x"})
    with pytest.raises(ValidationError, match="fsspec knows no protocol 'nosuch://'"):
        ResultsStore(url="nosuch://b/p")
    with pytest.raises(ValidationError, match="url is empty"):
        ResultsStore(url="  ")


def test_job_variables_are_ones_the_kubernetes_template_declares():
    import json

    template = Path(__file__).resolve().parents[2] / "deployments" / "k8s-gpu-job-template.json"
    declared = set(json.loads(template.read_text())["variables"]["properties"])
    target = ClusterTarget(gpu_node_selector={"gpu": "yes"})
    image = EngineRuntime(engine="vllm", version="0.32.0", image="vllm/vllm-openai:v0.32.0")
    # The default template silently drops unknown job variables: a name typo must fail here.
    assert set(target.job_variables()) | set(image.job_variables()) <= declared
