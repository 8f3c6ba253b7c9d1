"""The cluster's Helm values, rendered from a winner's own launch and the plan's replica count,
validate against the charts' values schemas as copied (llm-d-stack 0.1.0, vllm-stack 0.1.12);
a broken value is caught by the same schemas, and the picker config's references resolve."""

from __future__ import annotations

import yaml

from infopt.cluster.helm import (
    LLMD_SCHEMA,
    VLLM_STACK_SCHEMA,
    llmd_values,
    picker_refs_ok,
    schema_errors,
    stack_values,
)
from infopt.engines.launch import ServingTarget, launch_for
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.render import container_args
from infopt.engines.vllm import adapter as vllm


def _launch(adapter, path: str):
    t = ServingTarget(model_path=path, served_model_name="m", native_context_tokens=8192,
                      usable_cpus=8)
    return launch_for(adapter, adapter.baseline_config(t), adapter.container_executable or "x",
                      8000)


def test_llmd_values_validate_and_carry_the_winner_and_the_plan():
    launch = _launch(vllm.ADAPTER, "/models/Qwen3-8B")
    v = llmd_values(launch, name="qwen3-8b", image=vllm.ADAPTER.container_image, replicas=3,
                    gpus=1, cpus=8, memory_gib=24)
    assert schema_errors(v, LLMD_SCHEMA) == []
    (pool,) = v["modelServers"]["items"]
    assert pool["role"] == "decode" and pool["replicas"] == 3
    # The winner's exact argv (bound for a container), not re-expressed in the chart's knobs.
    assert pool["args"] == container_args(launch)[1:] and "0.0.0.0" in pool["args"]
    cfg = v["routerStandalone"]["router"]["epp"]["pluginsCustomConfig"][
        "optimized-baseline-plugins.yaml"]
    scorers = {p["pluginRef"]: p["weight"]
               for p in yaml.safe_load(cfg)["schedulingProfiles"][0]["plugins"]}
    assert scorers["prefix-cache-scorer"] == 3 and scorers["queue-scorer"] == 2
    assert picker_refs_ok(cfg) == []
    pd = llmd_values(launch, name="qwen3-8b", image="i:t", replicas=2, gpus=1, cpus=8,
                     memory_gib=24, prefill_replicas=4)
    assert schema_errors(pd, LLMD_SCHEMA) == [] and pd["profile"] == "pd-disaggregation"
    assert [i["role"] for i in pd["modelServers"]["items"]] == ["prefill", "decode"]
    assert picker_refs_ok(pd["routerStandalone"]["router"]["epp"]["pluginsCustomConfig"][
        "pd-config.yaml"]) == []


def test_a_llamacpp_winner_renders_its_own_command_for_llmd():
    launch = _launch(llamacpp.ADAPTER, "/models/m.gguf")
    v = llmd_values(launch, name="smollm2", image=llamacpp.ADAPTER.container_image,
                    replicas=2, gpus=0, cpus=1, memory_gib=1)
    assert schema_errors(v, LLMD_SCHEMA) == []
    assert v["modelServers"]["defaults"]["command"] == [llamacpp.ADAPTER.container_executable]
    assert "nvidia.com/gpu" not in v["modelServers"]["items"][0]["resources"]["limits"]


def test_production_stack_values_validate_with_the_measured_routing():
    launch = _launch(vllm.ADAPTER, "/models/Qwen3-8B")
    v = stack_values(launch, name="qwen3-8b", image=vllm.ADAPTER.container_image, replicas=4,
                     gpus=1, cpus=8, memory_gib=24, policy="session_hash")
    assert schema_errors(v, VLLM_STACK_SCHEMA) == []
    assert v["routerSpec"] == {"routingLogic": "session", "sessionKey": "x-session-id"}
    assert v["servingEngineSpec"]["modelSpec"][0]["replicaCount"] == 4


def test_the_schemas_catch_a_broken_value():
    launch = _launch(vllm.ADAPTER, "/models/Qwen3-8B")
    v = llmd_values(launch, name="x", image="i:t", replicas=1, gpus=1, cpus=1, memory_gib=1)
    v["modelServers"]["items"][0].update(name="Decode_Pool", replicas=-1)
    errors = schema_errors(v, LLMD_SCHEMA)
    assert any("does not match" in e for e in errors) and any("-1" in e for e in errors)
    s = stack_values(launch, name="x", image="i:t", replicas=1, gpus=1, cpus=1, memory_gib=1,
                     policy="round_robin")
    s["routerSpec"]["routingLogic"] = "fastest"
    assert any("routerSpec/routingLogic" in e for e in schema_errors(s, VLLM_STACK_SCHEMA))
    assert picker_refs_ok("plugins: [{type: a}]\nschedulingProfiles: [{name: d, plugins: "
                          "[{pluginRef: b}]}]\n") == [
        "schedulingProfiles/d: b is not a declared plugin"]


def test_cluster_values_validate_each_chart_and_say_what_they_assume():
    from infopt.cluster.helm import cluster_values

    common = dict(name="m", replicas=2, gpus=1, cpus=8, memory_gib=24, policy="cache_aware",
                  prefill_replicas=None, why_no_prefill="interference not measured")
    out = cluster_values(_launch(vllm.ADAPTER, "/models/Qwen3-8B"),
                         image=vllm.ADAPTER.container_image, **common)
    assert [h.chart for h in out] == ["llm-d-stack 0.1.0", "vllm-stack 0.1.12"]
    assert all(h.errors == [] for h in out)
    assert any("no prefill pool: interference not measured" in n for n in out[0].notes)
    assert "routingLogic: prefixaware" in out[1].values_yaml
    # The production-stack chart serves vLLM only: a llama.cpp winner gets llm-d's values.
    cpu = cluster_values(_launch(llamacpp.ADAPTER, "/models/m.gguf"),
                         image=llamacpp.ADAPTER.container_image, **common)
    assert [h.chart for h in cpu] == ["llm-d-stack 0.1.0"] and cpu[0].errors == []
