"""The chart values every measured configuration depends on (issue 46, item 7): read against the
charts' templates at their pinned commits (infopt.engines.helm.STACK_KEYS, infopt.cluster.helm
.LLMD_KEYS), each value is set from what was measured:

- production-stack emits --no-enable-prefix-caching unless vllmConfig.enablePrefixCaching is
  true, and mounts a /dev/shm volume only when vllmConfig.tensorParallelSize is set;
- neither chart mounts anything at the measured --model path, and HF_HUB_OFFLINE=1 forbids a
  download: a volume the user names is mounted there, or an approved hub download at its commit;
- llm-d-stack's hfToken.enabled defaults to true with a Secret nobody creates: off unless a
  token Secret is configured."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from infopt.cluster.helm import (
    LLMD_CHART_OWNED,
    LLMD_KEYS,
    LLMD_SCHEMA,
    VLLM_STACK_SCHEMA,
    cluster_values,
    llmd_values,
    schema_errors,
    stack_values,
)
from infopt.engines import render
from infopt.engines.helm import (
    STACK_KEYS,
    HubDownload,
    ModelClaim,
    ModelHostPath,
    TokenSecret,
    vllm_stack_values,
)
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.specs.serving import TrtllmConfig, VllmConfig

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CLAIM = ModelClaim(claim_name="models")
NODE_DIR = ModelHostPath(path="/mnt/models")
HUB = HubDownload(hub_id="Qwen/Qwen3-8B", revision=COMMIT)
TOKEN = TokenSecret(secret_name="hf-token")
_PREFIX_FLAGS = {"--enable-prefix-caching", "--no-enable-prefix-caching"}


def _launch(**knobs):
    cfg = VllmConfig(model_path="/models/Qwen3-8B", served_model_name="qwen", max_model_len=8192,
                     **knobs)
    return vllm.build_launch(cfg, "python3", 8000)


def _spec(launch=None, gpus=1, **kw):
    values = vllm_stack_values(launch or _launch(), "qwen", "vllm/vllm-openai:v0.32.0", gpus, 8,
                               24, **kw)
    assert schema_errors(values, VLLM_STACK_SCHEMA) == []
    (spec,) = values["servingEngineSpec"]["modelSpec"]
    return spec


def _get(values, dotted: str):
    """A value by its dotted path; `items[]` reads the first pool."""
    node = values
    for part in dotted.split("."):
        node = node[part[:-2]][0] if part.endswith("[]") else node[part]
    return node


# ---------------------------------------------------------------------------------------------
# production-stack (vllm-stack 0.1.12)

@pytest.mark.parametrize(("measured", "chart"), [(None, True), (True, True), (False, False)])
def test_stack_prefix_caching_is_what_was_measured(measured, chart):
    """deployment-vllm-multi.yaml:157-161: with vllmConfig set, the chart emits
    --no-enable-prefix-caching unless enablePrefixCaching is true. An unset flag measured
    vLLM 0.32's default for a generative model: on."""
    spec = _spec(_launch(enable_prefix_caching=measured))
    cfg = spec["vllmConfig"]
    assert cfg["enablePrefixCaching"] is chart
    # The chart renders the flag; a second copy in extraArgs would only hide which one wins.
    assert not _PREFIX_FLAGS & set(cfg["extraArgs"])


def test_stack_tensor_parallel_pods_get_shared_memory():
    """deployment-vllm-multi.yaml:418-430,464-489: /dev/shm is mounted only when
    vllmConfig.tensorParallelSize is set (otherwise the runtime's 64 MiB)."""
    tp2 = _spec(_launch(tensor_parallel_size=2), gpus=2)["vllmConfig"]
    assert tp2["tensorParallelSize"] == 2
    assert "--tensor-parallel-size" not in tp2["extraArgs"]  # rendered once, by the chart
    # Two GPUs without TP (pipeline ranks) talk through /dev/shm as well; 1 is vLLM's default.
    pp2 = _spec(_launch(pipeline_parallel_size=2), gpus=2)["vllmConfig"]
    assert pp2["tensorParallelSize"] == 1
    assert pp2["extraArgs"][pp2["extraArgs"].index("--pipeline-parallel-size") + 1] == "2"
    assert "tensorParallelSize" not in _spec(gpus=1)["vllmConfig"]


def test_stack_everything_else_still_passes_through():
    launch = _launch(tensor_parallel_size=2, enable_prefix_caching=False, max_num_seqs=16,
                     kv_cache_dtype="fp8")
    args = _spec(launch, gpus=2)["vllmConfig"]["extraArgs"]
    argv = launch.argv[launch.argv.index("vllm.entrypoints.openai.api_server") + 1:]
    moved = {"--model", "--host", "--port", "--tensor-parallel-size"}
    expected, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in moved:
            skip = True
        elif a not in _PREFIX_FLAGS:
            expected.append(a)
    assert args == expected


@pytest.mark.parametrize(("source", "volume"), [
    (CLAIM, {"name": "model", "persistentVolumeClaim": {"claimName": "models",
                                                        "readOnly": True}}),
    (NODE_DIR, {"name": "model", "hostPath": {"path": "/mnt/models", "type": "Directory"}}),
])
def test_stack_mounts_the_named_volume_at_the_measured_path(source, volume):
    spec = _spec(model=source)
    assert spec["modelURL"] == "/models/Qwen3-8B"
    assert spec["extraVolumes"] == [volume]
    assert spec["extraVolumeMounts"] == [{"name": "model", "mountPath": "/models",
                                          "readOnly": True}]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in spec["env"]  # local weights: offline
    assert "modelRevision" not in spec and "hf_token" not in spec


def test_stack_downloads_an_approved_hub_model_at_its_commit():
    spec = _spec(model=HUB, token=TOKEN)
    assert (spec["modelURL"], spec["modelRevision"]) == ("Qwen/Qwen3-8B", COMMIT)
    assert all(e["name"] != "HF_HUB_OFFLINE" for e in spec["env"])  # else no download
    assert "extraVolumes" not in spec
    assert spec["hf_token"] == {"secretName": "hf-token", "secretKey": "HF_TOKEN"}
    with pytest.raises(ValidationError):  # a branch can move to other weights
        HubDownload(hub_id="Qwen/Qwen3-8B", revision="main")


def test_stack_token_only_when_configured():
    assert "hf_token" not in _spec(model=CLAIM)
    assert _spec(model=CLAIM, token=TokenSecret(secret_name="hub", key="token"))[
        "hf_token"] == {"secretName": "hub", "secretKey": "token"}


def test_render_deployment_passes_the_source_and_says_when_it_cannot_deploy():
    cfg = VllmConfig(model_path="/models/Qwen3-8B", max_model_len=8192, tensor_parallel_size=2)
    bare = render.render_deployment(cfg, port=8000, gpus=2, name="w")
    assert any(n.startswith("NOT DEPLOYABLE") for n in bare.notes)
    d = render.render_deployment(cfg, port=8000, gpus=2, name="w", model=CLAIM, token=TOKEN)
    spec = yaml.safe_load(d.helm_values_yaml)["servingEngineSpec"]["modelSpec"][0]
    assert spec["extraVolumes"][0]["persistentVolumeClaim"]["claimName"] == "models"
    assert spec["vllmConfig"]["tensorParallelSize"] == 2 and "hf_token" in spec
    assert "claimName: models" in d.kubernetes_yaml  # the manifest mounts the same claim
    assert not any(n.startswith("NOT DEPLOYABLE") for n in d.notes)
    hub = render.render_deployment(cfg, port=8000, gpus=2, name="w", model=HUB)
    assert "modelRevision: " + COMMIT in hub.helm_values_yaml
    assert "claimName" not in hub.kubernetes_yaml


# ---------------------------------------------------------------------------------------------
# llm-d-stack 0.1.0

def _llmd(**kw):
    kw.setdefault("replicas", 2)
    values = llmd_values(_launch(), name="qwen", image="vllm/vllm-openai:v0.32.0", gpus=1,
                         cpus=8, memory_gib=24, **kw)
    assert schema_errors(values, LLMD_SCHEMA) == []
    return values


def test_llmd_hf_token_is_off_unless_a_secret_is_configured():
    """values.yaml:5-10 defaults hfToken.enabled to true, and modelserver-deployments.yaml:63-71
    then points HF_TOKEN at Secret llm-d-hf-token, which nothing creates."""
    assert _llmd()["hfToken"] == {"enabled": False}
    assert _llmd(token=TOKEN)["hfToken"] == {"enabled": True, "secretName": "hf-token",
                                             "key": "HF_TOKEN"}


def test_llmd_every_pool_mounts_the_named_volume_and_the_charts_shm_stays():
    v = _llmd(model=CLAIM, prefill_replicas=3)
    for pool in v["modelServers"]["items"]:
        assert pool["volumes"] == [{"name": "model", "persistentVolumeClaim": {
            "claimName": "models", "readOnly": True}}]
        assert pool["volumeMounts"] == [{"name": "model", "mountPath": "/models",
                                         "readOnly": True}]
    # The chart's defaults lists (its 20Gi /dev/shm among them) are appended to, never
    # replaced: Helm replaces a list a values file sets.
    defaults = v["modelServers"]["defaults"]
    assert not {k.rsplit(".", 1)[1] for k in LLMD_CHART_OWNED} & set(defaults)


def test_llmd_keeps_the_charts_default_env_beside_the_launchs():
    """values.yaml (479aac5) defaults.env is [USER=llm-d]; setting defaults.env replaces the
    list, so infopt's list must carry it as well as the launch's HF_HUB_OFFLINE."""
    env = {e["name"]: e["value"] for e in _llmd(model=CLAIM)["modelServers"]["defaults"]["env"]}
    assert env["USER"] == "llm-d" and env["HF_HUB_OFFLINE"] == "1"


def test_llmd_has_no_download_path_and_says_so():
    v = _llmd(model=HUB)
    assert "volumes" not in v["modelServers"]["items"][0]
    out = cluster_values(_launch(), name="m", image="i:t", replicas=2, gpus=1, cpus=8,
                         memory_gib=24, policy="round_robin", prefill_replicas=None,
                         why_no_prefill="not measured", model=HUB)
    llmd, stack = out
    assert any(n.startswith("NOT DEPLOYABLE") and "no download path" in n for n in llmd.notes)
    assert not any(n.startswith("NOT DEPLOYABLE") for n in stack.notes)
    assert "modelRevision: " + COMMIT in stack.values_yaml
    assert llmd.errors == stack.errors == []


def test_cluster_values_without_a_source_say_the_pods_cannot_start():
    common = dict(name="m", image="i:t", replicas=2, gpus=1, cpus=8, memory_gib=24,
                  policy="cache_aware", prefill_replicas=None, why_no_prefill="not measured")
    for h in cluster_values(_launch(), **common):
        assert any(n.startswith("NOT DEPLOYABLE") and "/models/Qwen3-8B" in n for n in h.notes)
    for h in cluster_values(_launch(), model=NODE_DIR, **common):
        assert not any(n.startswith("NOT DEPLOYABLE") for n in h.notes), h.notes
        assert "hostPath" in h.values_yaml and h.errors == []


def test_llmd_side_files_are_named_as_a_blocker():
    cfg = TrtllmConfig(model_path="/models/Llama-3.1-8B", max_seq_len=8192,
                       extra_llm_api_options={"kv_cache_config": {"enable_block_reuse": False}})
    launch = trtllm.build_launch(cfg, "trtllm-serve", 8000)
    (h,) = cluster_values(launch, name="m", image="i:t", replicas=1, gpus=1, cpus=8,
                          memory_gib=24, policy="round_robin", prefill_replicas=None,
                          why_no_prefill=None, model=CLAIM)
    (path,) = launch.files
    assert any(n.startswith("NOT DEPLOYABLE") and path in n for n in h.notes)


# ---------------------------------------------------------------------------------------------
# The tables of chart keys: each key is one infopt sets, and it feeds the pinned template.

def test_every_stack_key_is_set_in_some_rendering():
    specs = [_spec(_launch(tensor_parallel_size=2), gpus=2, model=CLAIM, token=TOKEN),
             _spec(model=HUB)]
    for k in STACK_KEYS:
        assert any(k.key.split(".")[0] in s and (("." not in k.key) or
                   k.key.split(".")[1] in s[k.key.split(".")[0]]) for s in specs), k.key
        assert k.feeds.startswith("helm/templates/deployment-vllm-multi.yaml:")


def test_every_llmd_key_is_set_in_some_rendering():
    rendered = [_llmd(model=CLAIM, token=TOKEN)]
    for k in LLMD_KEYS:
        assert any(_get(v, k.key) is not None for v in rendered), k.key
        assert k.feeds.startswith("charts/llm-d-stack/templates/modelserver-deployments.yaml:")


def test_stack_values_route_and_scale_with_a_source():
    v = stack_values(_launch(), name="m", image="i:t", replicas=3, gpus=1, cpus=8,
                     memory_gib=24, policy="session_hash", model=CLAIM)
    assert schema_errors(v, VLLM_STACK_SCHEMA) == []
    spec = v["servingEngineSpec"]["modelSpec"][0]
    assert spec["replicaCount"] == 3 and spec["extraVolumes"]


def test_every_key_infopt_sets_is_spelt_as_the_chart_spells_it():
    """A misspelt key is no schema error there (modelSpec items allow any key) and the chart
    would ignore it: each key must be one the copied values schema declares."""
    import json

    from infopt.cluster.helm import SCHEMAS

    schema = json.loads((SCHEMAS / VLLM_STACK_SCHEMA).read_text())
    props = schema["properties"]["servingEngineSpec"]["properties"]["modelSpec"]["items"][
        "properties"]
    specs = [_spec(_launch(tensor_parallel_size=2), gpus=2, model=CLAIM, token=TOKEN),
             _spec(model=HUB, token=TOKEN)]
    for s in specs:
        assert set(s) <= set(props), set(s) - set(props)
        assert set(s["vllmConfig"]) <= set(props["vllmConfig"]["properties"])
        assert set(s["hf_token"]) <= set(props["hf_token"]["properties"])
    for k in STACK_KEYS:
        head, _, tail = k.key.partition(".")
        assert head in props and (not tail or tail in props[head]["properties"]), k.key
    llmd = json.loads((SCHEMAS / LLMD_SCHEMA).read_text())["properties"]
    assert set(_llmd(token=TOKEN)["hfToken"]) <= set(llmd["hfToken"]["properties"])
