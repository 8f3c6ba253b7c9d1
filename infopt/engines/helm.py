"""Helm values for an engine's own chart, where one exists, and what every chart's pods need to
reach the measured weights. Pure.

vLLM: the production-stack chart `vllm-stack` 0.1.12 (github.com/vllm-project/production-stack,
helm/ at 01eaf92cb895ececa44ee86083f11522adafbbc9, unchanged at a6c01db0). The winner's flags go
through `vllmConfig.extraArgs` unchanged, except the few the chart renders itself from its own
knobs: those are set from what was measured and taken out of extraArgs, so each flag appears
once in the pod's command. STACK_KEYS says which template lines each key feeds.

Where the weights come from (ModelSource): the pod runs the winner's command, which names the
weights by the path they were measured at, and HF_HUB_OFFLINE=1 forbids any download; so a
volume that holds them must be mounted there (a PersistentVolumeClaim or a node directory the
user names), or, for a hub model whose download was approved, the chart's own download path
(modelURL + modelRevision) at the pinned commit. Without either, the values say the pod cannot
start rather than pretend it can.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from infopt.engines.launch import Launch
from infopt.specs.base import InputError
from infopt.specs.deploy import HubDownload, ModelClaim, ModelHostPath, TokenSecret

STACK_COMMIT = "01eaf92cb895ececa44ee86083f11522adafbbc9"
STACK_TEMPLATE = "helm/templates/deployment-vllm-multi.yaml"

ModelVolume = ModelClaim | ModelHostPath
ModelSource = ModelClaim | ModelHostPath | HubDownload
__all__ = ["HubDownload", "ModelClaim", "ModelHostPath", "ModelSource", "ModelVolume",
           "TokenSecret"]


def model_mount_dir(model_path: str) -> str:
    """Where a ModelVolume is mounted: the measured path's parent directory (never `/`, which
    would hide the image's own files)."""
    parent = PurePosixPath(model_path).parent
    if not PurePosixPath(model_path).is_absolute() or parent == PurePosixPath("/"):
        raise InputError(f"model path '{model_path}' cannot be mounted from a volume: it must "
                         "be absolute and below a directory other than '/' (e.g. "
                         "/models/<name>), the directory the volume is mounted at")
    return str(parent)


def model_volume(source: ModelVolume, model_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a pod volume, the container's mount of it) that put the model at `model_path`,
    read-only: what each chart copies verbatim into its pod spec."""
    if isinstance(source, ModelClaim):
        volume: dict[str, Any] = {"name": "model", "persistentVolumeClaim": {
            "claimName": source.claim_name, "readOnly": True}}
    else:
        # Directory, not DirectoryOrCreate: a node without the weights fails the pod at
        # mount time instead of starting the engine on an empty directory.
        volume = {"name": "model", "hostPath": {"path": source.path, "type": "Directory"}}
    return volume, {"name": "model", "mountPath": model_mount_dir(model_path), "readOnly": True}


def without_offline(env: dict[str, str]) -> dict[str, str]:
    """The launch's environment for a pod that downloads the weights itself: HF_HUB_OFFLINE=1
    (set by the adapters: the optimizer never lets an engine reach a hub) would forbid it."""
    return {k: v for k, v in env.items() if k != "HF_HUB_OFFLINE"}


def source_notes(model: ModelSource | None, model_path: str | None) -> list[str]:
    """What the values assume about the weights, or why the pods cannot start."""
    if model is None:
        return [f"NOT DEPLOYABLE as rendered: nothing puts the model at {model_path} in the "
                "pod (the command reads it there and HF_HUB_OFFLINE=1 forbids a download); "
                "name a PersistentVolumeClaim or node directory holding it, or an approved "
                "hub download"]
    if isinstance(model, HubDownload):
        # HF_HOME is /tmp in the container without pvcStorage (STACK_TEMPLATE:226-233).
        return [f"weights: downloaded by each pod from {model.hub_id} at commit "
                f"{model.revision} (approved download); the container's HF_HOME is not "
                "persistent, so every new pod downloads them again"]
    where = (f"claim {model.claim_name}" if isinstance(model, ModelClaim)
             else f"node directory {model.path}")
    return [f"weights: {where}, mounted read-only at {model_mount_dir(model_path or '')} "
            f"(it must hold {PurePosixPath(model_path or '').name})"]


@dataclass(frozen=True)
class ChartKey:
    """One value infopt sets because the measured configuration depends on it, and the chart
    template lines it feeds (file:lines at the chart's pinned commit)."""

    key: str
    feeds: str
    why: str


# vllm-stack 0.1.12 (production-stack helm/ at STACK_COMMIT); keys under
# servingEngineSpec.modelSpec[].
STACK_KEYS = (
    ChartKey("vllmConfig.enablePrefixCaching", f"{STACK_TEMPLATE}:149,157-161",
             "once vllmConfig is set (extraArgs live there) the chart always emits "
             "--enable-prefix-caching or, when this key is false or absent, "
             "--no-enable-prefix-caching: set to what was measured"),
    ChartKey("vllmConfig.tensorParallelSize", f"{STACK_TEMPLATE}:170-173,418-430,464-489",
             "emits --tensor-parallel-size and is the chart's only switch for the in-memory "
             "/dev/shm volume (sizeLimit shmSize, default 20Gi); without it the pod has the "
             "container runtime's 64 MiB, too little for NCCL and vLLM's multi-process "
             "workers"),
    ChartKey("extraVolumes", f"{STACK_TEMPLATE}:464-466,501-503",
             "the volume holding the measured weights (ModelClaim, ModelHostPath)"),
    ChartKey("extraVolumeMounts", f"{STACK_TEMPLATE}:418-420,440-442",
             "mounts it read-only at the measured path's parent directory"),
    ChartKey("modelURL", f"{STACK_TEMPLATE}:134",
             "`vllm serve <modelURL>`: the measured path, or the hub id (HubDownload)"),
    ChartKey("modelRevision", f"{STACK_TEMPLATE}:200-203",
             "--revision: the hub commit the measured weights came from (HubDownload)"),
    ChartKey("hf_token", f"{STACK_TEMPLATE}:248-260",
             "HF_TOKEN from an existing Secret, only when one is configured"),
    ChartKey("env", f"{STACK_TEMPLATE}:281-283",
             "the launch's environment (without HF_HUB_OFFLINE for a HubDownload)"),
)


@dataclass(frozen=True)
class HelmChart:
    chart: str  # as `helm install` names it
    repo_url: str
    source: str  # where the values schema was read
    values: Any  # (launch, name, image, gpus, cpus, memory_gib, *, model, token) -> dict


# Flags the chart sets itself from modelURL and its container port (template lines 127-138).
_CHART_OWNS = {"--model", "--host", "--port"}
_PREFIX_ON, _PREFIX_OFF = "--enable-prefix-caching", "--no-enable-prefix-caching"
_TP = "--tensor-parallel-size"


def _pass_through(argv: list[str]) -> list[str]:
    """argv after the entrypoint and the api_server module, less the flags the chart owns."""
    args = argv[argv.index("vllm.entrypoints.openai.api_server") + 1:] if \
        "vllm.entrypoints.openai.api_server" in argv else argv[1:]
    return _without(args, set(), _CHART_OWNS)


def _measured_prefix_caching(args: list[str]) -> bool:
    """Whether the measured engine cached prefixes: the last of the two flags wins (argparse),
    and with neither vLLM 0.32 enables it for a generative decoder or hybrid model
    (vllm/engine/arg_utils.py:3021-3022 takes ModelConfig.is_prefix_caching_supported,
    vllm/config/model.py:2258-2273, v0.32.0). Attention-free and encoder-decoder models
    default to off there; infopt's tuning ladder reads an unset flag as on as well."""
    flags = [a for a in args if a in (_PREFIX_ON, _PREFIX_OFF)]
    return not flags or flags[-1] == _PREFIX_ON


def _flag_value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def _without(args: list[str], flags: set[str], valued: set[str]) -> list[str]:
    """args less `flags` (switches) and `valued` (each with its value)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif a not in flags:
            out.append(a)
    return out


def vllm_stack_values(launch: Launch, name: str, image: str, gpus: int, cpus: int,
                      memory_gib: int, *, model: ModelSource | None = None,
                      token: TokenSecret | None = None) -> dict[str, Any]:
    """vllm-stack values running the winner's flags (STACK_KEYS: what is set and why)."""
    repository, _, tag = image.rpartition(":")
    args = _pass_through(launch.argv)
    vllm_config: dict[str, Any] = {"enablePrefixCaching": _measured_prefix_caching(args)}
    tp = _flag_value(args, _TP)
    if tp is not None or gpus > 1:
        # More than one GPU (TP, PP or DP ranks) talk through /dev/shm; 1 is vLLM's own
        # default, so a pod with several GPUs and no TP flag runs the same command.
        vllm_config["tensorParallelSize"] = int(tp) if tp is not None else 1
    vllm_config["extraArgs"] = _without(args, {_PREFIX_ON, _PREFIX_OFF}, {_TP})
    env = without_offline(launch.env) if isinstance(model, HubDownload) else launch.env
    spec: dict[str, Any] = {
        "name": name, "repository": repository, "tag": tag,
        "modelURL": model.hub_id if isinstance(model, HubDownload) else launch.model_path,
        "replicaCount": 1, "requestCPU": cpus, "requestMemory": f"{memory_gib}Gi",
        "requestGPU": gpus,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "vllmConfig": vllm_config}
    if isinstance(model, HubDownload):
        spec["modelRevision"] = model.revision
    elif model is not None:
        volume, mount = model_volume(model, launch.model_path or "")
        spec["extraVolumes"], spec["extraVolumeMounts"] = [volume], [mount]
    if token is not None:
        spec["hf_token"] = {"secretName": token.secret_name, "secretKey": token.key}
    return {"servingEngineSpec": {"runtimeClassName": "nvidia" if gpus else "",
                                  "modelSpec": [spec]}}


VLLM_STACK = HelmChart(
    chart="vllm/vllm-stack", repo_url="https://vllm-project.github.io/production-stack",
    source="https://github.com/vllm-project/production-stack/blob/"
           f"{STACK_COMMIT}/helm/values.yaml",
    values=vllm_stack_values)
