"""Helm values for serving the measured winner as replicas behind a router, rendered from the
measurement and the capacity plan, and validated against each chart's own values schema
(copied into infopt/cluster/schemas/ with their source and version). Pure.

llm-d (`llm-d-stack` 0.1.0, charts/llm-d-stack at llm-d/llm-d 479aac52): the router's
EndpointPickerConfig with the load-aware (queue-scorer, kv-cache-utilization-scorer) and
prefix-cache-aware (prefix-cache-scorer) scorers at the weights of the chart's
optimized-baseline profile, and one `decode` model-server pool with the winner's exact
arguments and the plan's replica count; a prefill pool only where the measured interference
justified one (otherwise the values say why not).

vLLM production-stack (`vllm-stack` 0.1.12): the winner as a modelSpec (the engine's own chart,
infopt.engines.helm) with the plan's replicaCount, and the router's routingLogic from the policy
that measured best on the session workload (roundrobin, session on X-Session-ID, prefixaware).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator, Draft202012Validator

from infopt.engines import adapter_for
from infopt.engines.base import Launch
from infopt.engines.helm import VLLM_STACK
from infopt.engines.render import container_args
from infopt.specs.cluster import HelmValues

SCHEMAS = Path(__file__).parent / "schemas"
LLMD_SCHEMA = "llm-d-stack-0.1.0.values.schema.json"
VLLM_STACK_SCHEMA = "vllm-stack-0.1.12.values.schema.json"

# llm-d-stack's optimized-baseline profile (values.yaml at 479aac52): the scorers and weights.
LLMD_SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2),
                ("prefix-cache-scorer", 3), ("no-hit-lru-scorer", 2))
# Our measured policies as the production-stack router's routingLogic.
STACK_ROUTING = {"round_robin": "roundrobin", "session_hash": "session",
                 "cache_aware": "prefixaware"}


@cache
def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


def schema_errors(values: dict[str, Any], schema: str) -> list[str]:
    """Every violation of the chart's values schema, as "path: message" (empty: valid)."""
    doc = _schema(schema)
    cls = Draft202012Validator if "2020-12" in doc.get("$schema", "") else Draft7Validator
    return sorted(f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
                  for e in cls(doc).iter_errors(values))


def _picker_config(pd: bool) -> str:
    """The EndpointPickerConfig text, shaped as the chart's profiles write it."""
    plugins = [{"type": name} for name, _ in LLMD_SCORERS]
    profile = [{"pluginRef": name, "weight": w} for name, w in LLMD_SCORERS]
    doc: dict[str, Any] = {"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
                           "plugins": plugins,
                           "schedulingProfiles": [{"name": "default", "plugins": profile}]}
    if pd:  # profiles/pd-disaggregation.yaml: filters pick each pool, decode by active load
        doc["plugins"] = [{"type": "disagg-headers-handler"},
                          {"type": "always-disagg-pd-decider"},
                          {"type": "disagg-profile-handler",
                           "parameters": {"deciderPluginName": "always-disagg-pd-decider"}},
                          {"type": "prefill-filter"}, {"type": "decode-filter"},
                          *plugins, {"type": "active-request-scorer"}]
        doc["schedulingProfiles"] = [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *profile[:3]]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"},
                                           {"pluginRef": "active-request-scorer", "weight": 2},
                                           {"pluginRef": "prefix-cache-scorer",
                                            "weight": 3}]}]
    return yaml.safe_dump(doc, sort_keys=False)


def picker_refs_ok(text: str) -> list[str]:
    """Each scheduling profile's pluginRef names a declared plugin (what the schema cannot
    see inside the YAML string)."""
    doc = yaml.safe_load(text)
    declared = {p["type"] for p in doc["plugins"]}
    return [f"schedulingProfiles/{prof['name']}: {ref['pluginRef']} is not a declared plugin"
            for prof in doc["schedulingProfiles"] for ref in prof["plugins"]
            if ref["pluginRef"] not in declared]


def _resources(gpus: int, cpus: int, memory_gib: int) -> dict[str, Any]:
    amount: dict[str, Any] = {"cpu": str(cpus), "memory": f"{memory_gib}Gi"}
    if gpus:
        amount["nvidia.com/gpu"] = gpus
    return {"requests": dict(amount), "limits": dict(amount)}


def llmd_values(launch: Launch, *, name: str, image: str, replicas: int, gpus: int, cpus: int,
                memory_gib: int, prefill_replicas: int | None = None) -> dict[str, Any]:
    """llm-d-stack values: the optimized-baseline picker (or the P/D one with a prefill pool)
    in front of the winner's pool. The container runs the winner's own argv (its entrypoint
    as the command), so nothing measured is re-expressed in the chart's knobs."""
    repository, _, tag = image.rpartition(":")
    argv = container_args(launch)
    pd = bool(prefill_replicas)
    config = "pd-config.yaml" if pd else "optimized-baseline-plugins.yaml"
    labels = {"llm-d.ai/guide": name, "llm-d.ai/engine-type": launch.engine or "unknown"}
    pool = {"enabled": True, "replicas": replicas, "args": argv[1:],
            "resources": _resources(gpus, cpus, memory_gib)}
    items = [{"name": "decode", "role": "decode", **pool}]
    if pd:
        items.insert(0, {"name": "prefill", "role": "prefill", **pool,
                         "replicas": prefill_replicas})
    return {
        "profile": "pd-disaggregation" if pd else "custom",
        "routerStandalone": {"enabled": True, "router": {
            "epp": {"pluginsConfigFile": config,
                    "pluginsCustomConfig": {config: _picker_config(pd)}},
            "modelServers": {"matchLabels": {"llm-d.ai/guide": name}}}},
        "routerGateway": {"enabled": False},
        "modelServers": {
            "enabled": True, "defaultLabels": labels,
            "defaults": {"image": {"repository": repository, "tag": tag},
                         "command": [argv[0]],
                         "env": [{"name": k, "value": v} for k, v in sorted(launch.env.items())],
                         "ports": [{"name": "modelserver", "containerPort": launch.port,
                                    "protocol": "TCP"}]},
            "items": items}}


def stack_values(launch: Launch, *, name: str, image: str, replicas: int, gpus: int, cpus: int,
                 memory_gib: int, policy: str) -> dict[str, Any]:
    """vllm-stack values: the winner's modelSpec at the plan's replica count and the router's
    routing logic from the measured policy."""
    values = VLLM_STACK.values(launch, name, image, gpus, cpus, memory_gib)
    values["servingEngineSpec"]["modelSpec"][0]["replicaCount"] = replicas
    router: dict[str, Any] = {"routingLogic": STACK_ROUTING.get(policy, "roundrobin")}
    if router["routingLogic"] == "session":
        router["sessionKey"] = "x-session-id"
    values["routerSpec"] = router
    return values


def cluster_values(launch: Launch, *, name: str, image: str, replicas: int, gpus: int,
                   cpus: int, memory_gib: int, policy: str, prefill_replicas: int | None,
                   why_no_prefill: str | None) -> list[HelmValues]:
    """llm-d's values, and the production stack's where the winner's engine has that chart as
    its own (EngineAdapter.helm_chart: vLLM's), each validated."""
    common: dict[str, Any] = dict(name=name, image=image, replicas=replicas, gpus=gpus, cpus=cpus,
                  memory_gib=memory_gib)
    llmd = llmd_values(launch, prefill_replicas=prefill_replicas, **common)
    picker = next(iter(llmd["routerStandalone"]["router"]["epp"]["pluginsCustomConfig"]
                       .values()))
    notes = [f"{replicas} replica(s): the capacity plan's estimate; resources: the weights "
             f"plus 4 GiB of memory ({memory_gib} Gi), an estimate",
             "scorers: llm-d-stack's optimized-baseline weights (queue 2, KV utilization 2, "
             "prefix cache 3, no-hit LRU 2): load- and prefix-cache-aware"]
    if why_no_prefill:
        notes.append(f"no prefill pool: {why_no_prefill}")
    out = [HelmValues(chart="llm-d-stack 0.1.0", schema_file=LLMD_SCHEMA,
                      values_yaml=yaml.safe_dump(llmd, sort_keys=False),
                      errors=schema_errors(llmd, LLMD_SCHEMA) + picker_refs_ok(picker),
                      notes=notes)]
    if launch.engine and adapter_for(launch.engine).helm_chart is VLLM_STACK:
        stack = stack_values(launch, policy=policy, **common)
        out.append(HelmValues(
            chart="vllm-stack 0.1.12", schema_file=VLLM_STACK_SCHEMA,
            values_yaml=yaml.safe_dump(stack, sort_keys=False),
            errors=schema_errors(stack, VLLM_STACK_SCHEMA),
            notes=[f"routingLogic {stack['routerSpec']['routingLogic']}: the policy that "
                   f"measured best on the session workload ({policy})"]))
    return out
