"""Helm values for an engine's own chart, where one exists: the winner's exact flags as the
chart's pass-through arguments, so nothing is re-expressed in the chart's own knobs (which could
drift from what was measured). Pure.

vLLM: the production-stack chart (github.com/vllm-project/production-stack, helm/values.yaml):
`servingEngineSpec.modelSpec[]` with repository/tag, modelURL, replicaCount, requestCPU,
requestMemory, requestGPU and `vllmConfig.extraArgs` (extra command-line arguments to vLLM)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infopt.engines.base import Launch


@dataclass(frozen=True)
class HelmChart:
    chart: str  # as `helm install` names it
    repo_url: str
    source: str  # where the values schema was read
    values: Any  # (launch, name, image, gpus, cpus, memory_gib) -> values dict


# Flags the chart sets itself from modelURL and its container port.
_CHART_OWNS = {"--model", "--host", "--port"}


def _pass_through(argv: list[str]) -> list[str]:
    """argv after the entrypoint and the api_server module, less the flags the chart owns."""
    args = argv[argv.index("vllm.entrypoints.openai.api_server") + 1:] if \
        "vllm.entrypoints.openai.api_server" in argv else argv[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in _CHART_OWNS:
            skip = True
            continue
        out.append(a)
    return out


def vllm_stack_values(launch: Launch, name: str, image: str, gpus: int, cpus: int,
                      memory_gib: int) -> dict[str, Any]:
    repository, _, tag = image.rpartition(":")
    return {"servingEngineSpec": {
        "runtimeClassName": "nvidia" if gpus else "",
        "modelSpec": [{
            "name": name, "repository": repository, "tag": tag,
            "modelURL": launch.model_path, "replicaCount": 1,
            "requestCPU": cpus, "requestMemory": f"{memory_gib}Gi", "requestGPU": gpus,
            "env": [{"name": k, "value": v} for k, v in sorted(launch.env.items())],
            "vllmConfig": {"extraArgs": _pass_through(launch.argv)},
        }]}}


VLLM_STACK = HelmChart(
    chart="vllm/vllm-stack", repo_url="https://vllm-project.github.io/production-stack",
    source="https://github.com/vllm-project/production-stack/blob/main/helm/values.yaml",
    values=vllm_stack_values)
