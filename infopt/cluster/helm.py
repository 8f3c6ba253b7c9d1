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

Both charts' pods must reach the measured weights (infopt.engines.helm.ModelSource) and carry a
hub token only when one is configured; LLMD_KEYS says which llm-d-stack template lines each value
infopt sets feeds.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator, Draft202012Validator

from infopt.engines import adapter_for
from infopt.engines.helm import (
    VLLM_STACK,
    ChartKey,
    HubDownload,
    ModelSource,
    TokenSecret,
    model_volume,
    source_notes,
)
from infopt.engines.launch import Launch
from infopt.engines.render import container_args
from infopt.specs.cluster import HelmValues

SCHEMAS = Path(__file__).parent / "schemas"
LLMD_SCHEMA = "llm-d-stack-0.1.0.values.schema.json"
VLLM_STACK_SCHEMA = "vllm-stack-0.1.12.values.schema.json"

# llm-d-stack's optimized-baseline profile (values.yaml at 479aac52): the scorers and weights.
LLMD_SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2),
                ("prefix-cache-scorer", 3), ("no-hit-lru-scorer", 2))
# llm-d-stack 0.1.0: the values infopt sets because the measured configuration depends on them,
# and the template lines (file:lines at LLMD_COMMIT of llm-d/llm-d) each feeds.
LLMD_COMMIT = "479aac5231d2728de3c87bbb57c65ff3aaab170f"
_LLMD_POOLS = "charts/llm-d-stack/templates/modelserver-deployments.yaml"
LLMD_KEYS = (
    ChartKey("hfToken.enabled", f"{_LLMD_POOLS}:63-71",
             "charts/llm-d-stack/values.yaml:5-10 default it to true, with secretName "
             "llm-d-hf-token and create false: every container then takes HF_TOKEN from a "
             "secretKeyRef (not optional) to a Secret nobody creates, and the kubelet does not "
             "create a container whose Secret is missing (CreateContainerConfigError); false "
             "unless a token Secret is configured"),
    ChartKey("hfToken.secretName", f"{_LLMD_POOLS}:69",
             "the configured Secret (TokenSecret), only with enabled"),
    ChartKey("hfToken.key", f"{_LLMD_POOLS}:70", "its key, only with enabled"),
    ChartKey("modelServers.items[].volumes", f"{_LLMD_POOLS}:16,110-113",
             "the volume holding the measured weights; per pool, because the chart appends a "
             "pool's list to modelServers.defaults.volumes, while setting the defaults' list "
             "would replace the chart's own (its /dev/shm emptyDir of 20Gi among them: Helm "
             "merges maps and replaces lists, helm/helm pkg/chart/common/util/coalesce.go "
             "coalesceTablesFullKey at a97ed11efd1db9fe220e73b7cff4c7299ad881d0)"),
    ChartKey("modelServers.items[].volumeMounts", f"{_LLMD_POOLS}:15,103-106",
             "mounts it read-only at the measured path's parent directory"),
)
# Values infopt must leave to the chart: lists it would replace whole (the defaults' volumes
# and mounts hold /dev/shm, sized for tensor parallelism, and the compile caches).
LLMD_CHART_OWNED = ("modelServers.defaults.volumes", "modelServers.defaults.volumeMounts")

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
                memory_gib: int, prefill_replicas: int | None = None,
                model: ModelSource | None = None,
                token: TokenSecret | None = None) -> dict[str, Any]:
    """llm-d-stack values: the optimized-baseline picker (or the P/D one with a prefill pool)
    in front of the winner's pool. The container runs the winner's own argv (its entrypoint
    as the command), so nothing measured is re-expressed in the chart's knobs. A volume
    `model` is mounted in every pool (LLMD_KEYS); llm-d-stack has no download path of its own
    (the argv names the measured path), so a HubDownload mounts nothing (llmd_notes says so)."""
    repository, _, tag = image.rpartition(":")
    argv = container_args(launch)
    pd = bool(prefill_replicas)
    config = "pd-config.yaml" if pd else "optimized-baseline-plugins.yaml"
    labels = {"llm-d.ai/guide": name, "llm-d.ai/engine-type": launch.engine or "unknown"}
    pool: dict[str, Any] = {"enabled": True, "replicas": replicas, "args": argv[1:],
                            "resources": _resources(gpus, cpus, memory_gib)}
    if model is not None and not isinstance(model, HubDownload):
        volume, mount = model_volume(model, launch.model_path or "")
        pool["volumes"], pool["volumeMounts"] = [volume], [mount]
    items = [{"name": "decode", "role": "decode", **pool}]
    if pd:
        items.insert(0, {"name": "prefill", "role": "prefill", **pool,
                         "replicas": prefill_replicas})
    hf_token: dict[str, Any] = {"enabled": token is not None}
    if token is not None:
        hf_token.update(secretName=token.secret_name, key=token.key)
    return {
        "profile": "pd-disaggregation" if pd else "custom",
        "hfToken": hf_token,
        "routerStandalone": {"enabled": True, "router": {
            "epp": {"pluginsConfigFile": config,
                    "pluginsCustomConfig": {config: _picker_config(pd)}},
            "modelServers": {"matchLabels": {"llm-d.ai/guide": name}}}},
        "routerGateway": {"enabled": False},
        "modelServers": {
            "enabled": True, "defaultLabels": labels,
            "defaults": {"image": {"repository": repository, "tag": tag},
                         "command": [argv[0]],
                         "env": _llmd_env(launch),
                         "ports": [{"name": "modelserver", "containerPort": launch.port,
                                    "protocol": "TCP"}]},
            "items": items}}


# llm-d-stack's values.yaml (479aac5) modelServers.defaults.env: [{name: USER, value: llm-d}].
# Helm replaces a list whole, so setting defaults.env drops it unless it is repeated here; the
# images run as a user with no passwd entry, where USER is what getpass.getuser() (torch's
# compile caches) falls back on.
_LLMD_DEFAULT_ENV = {"USER": "llm-d"}


def _llmd_env(launch: Launch) -> list[dict[str, str]]:
    env = {**_LLMD_DEFAULT_ENV, **launch.env}
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def llmd_notes(launch: Launch, model: ModelSource | None) -> list[str]:
    """Why llm-d's pods could not start as rendered, if they could not."""
    if isinstance(model, HubDownload):
        return [f"NOT DEPLOYABLE as rendered: llm-d-stack runs the measured command, which "
                f"reads the model at {launch.model_path} with HF_HUB_OFFLINE=1; the chart has "
                "no download path of its own: name a PersistentVolumeClaim or node directory "
                "holding the weights"]
    notes = source_notes(model, launch.model_path)
    if launch.files:  # e.g. TensorRT-LLM's --extra_llm_api_options YAML
        notes.append("NOT DEPLOYABLE as rendered: the command reads "
                     f"{', '.join(sorted(launch.files))}, which llm-d-stack 0.1.0 cannot "
                     "carry (no ConfigMap of its own): mount them from a ConfigMap through "
                     "modelServers.items[].volumes")
    return notes


def stack_values(launch: Launch, *, name: str, image: str, replicas: int, gpus: int, cpus: int,
                 memory_gib: int, policy: str, model: ModelSource | None = None,
                 token: TokenSecret | None = None) -> dict[str, Any]:
    """vllm-stack values: the winner's modelSpec at the plan's replica count and the router's
    routing logic from the measured policy."""
    values = VLLM_STACK.values(launch, name, image, gpus, cpus, memory_gib, model=model,
                               token=token)
    values["servingEngineSpec"]["modelSpec"][0]["replicaCount"] = replicas
    router: dict[str, Any] = {"routingLogic": STACK_ROUTING.get(policy, "roundrobin")}
    if router["routingLogic"] == "session":
        router["sessionKey"] = "x-session-id"
    values["routerSpec"] = router
    return values


def cluster_values(launch: Launch, *, name: str, image: str, replicas: int, gpus: int,
                   cpus: int, memory_gib: int, policy: str, prefill_replicas: int | None,
                   why_no_prefill: str | None, model: ModelSource | None = None,
                   token: TokenSecret | None = None) -> list[HelmValues]:
    """llm-d's values, and the production stack's where the winner's engine has that chart as
    its own (EngineAdapter.helm_chart: vLLM's), each validated. `model`: where the pods get
    the measured weights (None: nowhere, and the notes say the pods cannot start)."""
    common: dict[str, Any] = dict(name=name, image=image, replicas=replicas, gpus=gpus, cpus=cpus,
                  memory_gib=memory_gib, model=model, token=token)
    llmd = llmd_values(launch, prefill_replicas=prefill_replicas, **common)
    picker = next(iter(llmd["routerStandalone"]["router"]["epp"]["pluginsCustomConfig"]
                       .values()))
    notes = [f"{replicas} replica(s): the capacity plan's estimate; resources: the weights "
             f"plus 4 GiB of memory ({memory_gib} Gi), an estimate",
             "scorers: llm-d-stack's optimized-baseline weights (queue 2, KV utilization 2, "
             "prefix cache 3, no-hit LRU 2): load- and prefix-cache-aware"]
    if why_no_prefill:
        notes.append(f"no prefill pool: {why_no_prefill}")
    notes += llmd_notes(launch, model)
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
                   f"measured best on the session workload ({policy})",
                   *source_notes(model, launch.model_path)]))
    return out
