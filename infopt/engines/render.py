"""A Launch rendered for somewhere other than a local process: a `docker run` argv, a Kubernetes
Deployment + Service, and the engine's side files written to disk.

Pure functions except `write_launch_files`. Build the Launch with the executable as the image
knows it (e.g. `python3` in the vLLM/SGLang images, `trtllm-serve` in the TensorRT-LLM image,
`/app/llama-server` in llama.cpp's server image): the renderings run argv exactly, overriding the
image's entrypoint. MLX-LM needs Apple silicon's Metal and does not run in a Linux container.

Binding: the engine listens on 0.0.0.0 *inside* the container or pod (else nothing outside its
network namespace could reach it: not the published port, not the kubelet's probe), while
exposure stays closed: docker publishes the port on 127.0.0.1 only, and the Kubernetes Service
is ClusterIP (reachable inside the cluster only). Exposure beyond that is a separately approved
step, not something these renderings do.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from infopt.engines import ENGINES, adapter_for
from infopt.engines.helm import (
    HubDownload,
    ModelSource,
    ModelVolume,
    TokenSecret,
    model_volume,
    source_notes,
)
from infopt.engines.launch import Launch, launch_for
from infopt.runs.rundir import atomic_write
from infopt.specs.base import InputError
from infopt.specs.results import DeploymentRendering
from infopt.specs.serving import AnyServingConfig, EngineName

CONTAINER_BIND_HOST = "0.0.0.0"  # inside the container's own network namespace only
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _port(launch: Launch) -> int:
    if launch.port is not None:
        return launch.port
    if "--port" in launch.argv:  # every adapter's engine spells it --port
        return int(launch.argv[launch.argv.index("--port") + 1])
    raise InputError("this Launch names no port; build it with an adapter's build_launch")


def _model_path(launch: Launch) -> str:
    if not launch.model_path:
        raise InputError("this Launch carries no model_path, so the model cannot be mounted; "
                         "build it with an adapter that sets Launch.model_path")
    if not PurePosixPath(launch.model_path).is_absolute():
        raise InputError(f"model path '{launch.model_path}' is not absolute: containers mount "
                         "local weights at the same absolute path (engines never pull from a hub)")
    return launch.model_path


def _health_path(launch: Launch) -> str:
    if launch.engine is None:
        raise InputError("this Launch names no engine, so its health route is unknown; build it "
                         "with an adapter's build_launch")
    return ENGINES[EngineName(launch.engine)].health_path


def container_args(launch: Launch) -> list[str]:
    """argv with the bind host set for a container (see the module docstring)."""
    argv = list(launch.argv)
    if "--host" in argv:
        argv[argv.index("--host") + 1] = CONTAINER_BIND_HOST
    else:
        argv += ["--host", CONTAINER_BIND_HOST]
    return argv


def container_command(launch: Launch, image: str, gpus: int, *, shm_size: str = "16g",
                      name: str | None = None) -> list[str]:
    """`docker run` argv: GPUs, the port on 127.0.0.1 only, env, the model read-only at its own
    path, the engine's side files read-only (write them first with write_launch_files)."""
    if gpus < 0:
        raise InputError(f"gpus must be >= 0, got {gpus}")
    port = _port(launch)
    model = _model_path(launch)
    argv = container_args(launch)
    cmd = ["docker", "run", "--rm", "--init"]
    if name:
        cmd += ["--name", name]
    if gpus:
        # --gpus N takes the first N devices; NCCL between tensor-parallel ranks needs more
        # shared memory than docker's 64 MB default.
        cmd += ["--gpus", str(gpus), "--shm-size", shm_size]
    cmd += ["-p", f"127.0.0.1:{port}:{port}"]
    for key, value in sorted(launch.env.items()):
        cmd += ["-e", f"{key}={value}"]
    cmd += ["-v", f"{model}:{model}:ro"]
    for path in sorted(launch.files):
        cmd += ["-v", f"{path}:{path}:ro"]
    return cmd + ["--entrypoint", argv[0], image, *argv[1:]]


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "inference-engine",
            "app.kubernetes.io/managed-by": "infopt"}


def kubernetes_manifest(launch: Launch, *, name: str, image: str, gpus: int,
                        namespace: str = "default", model: ModelVolume | None = None
                        ) -> dict[str, Any]:
    """A v1 List: Deployment (one replica, `nvidia.com/gpu` limits, readiness probe on the
    engine's health route) + ClusterIP Service, and a ConfigMap when the engine reads side files.

    With `model` (a claim or a node directory holding models by name, e.g. /models/<name>), it
    is mounted read-only at the model path's parent directory; without it the image must hold
    the model. Every object validates against Kubernetes 1.36's schemas in strict mode
    (tests/unit/test_k8s_schemas.py).
    """
    if not _DNS1123.match(name) or len(name) > 63:
        raise InputError(f"'{name}' is not a valid Kubernetes name: lower-case letters, digits "
                         "and '-', starting and ending with a letter or digit, at most 63 chars")
    if gpus < 0:
        raise InputError(f"gpus must be >= 0, got {gpus}")
    port = _port(launch)
    model_path = _model_path(launch)
    health = _health_path(launch)
    argv = container_args(launch)
    labels = _labels(name)
    meta = {"name": name, "namespace": namespace, "labels": labels}

    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if model is not None:
        volume, mount = model_volume(model, model_path)
        volumes.append(volume)
        mounts.append(mount)
    items: list[dict[str, Any]] = []
    if launch.files:
        data: dict[str, str] = {}
        for path, text in sorted(launch.files.items()):
            key = PurePosixPath(path).name
            if not _CONFIGMAP_KEY.match(key) or key in data:
                raise InputError(f"side file '{path}' cannot be a ConfigMap key (name clash or "
                                 "characters outside [-._a-zA-Z0-9])")
            data[key] = text
            mounts.append({"name": "engine-files", "mountPath": path, "subPath": key,
                           "readOnly": True})
        volumes.append({"name": "engine-files", "configMap": {"name": f"{name}-files"}})
        items.append({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {**meta, "name": f"{name}-files"}, "data": data})

    container: dict[str, Any] = {
        "name": "engine",
        "image": image,
        "command": [argv[0]],
        "args": argv[1:],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [{"name": k, "value": v} for k, v in sorted(launch.env.items())],
        # Readiness only: a slow load marks the pod not-ready instead of restarting it (no
        # liveness probe for that reason); the Service sends traffic only once it answers 200.
        "readinessProbe": {"httpGet": {"path": health, "port": "http"},
                           "initialDelaySeconds": 10, "periodSeconds": 10,
                           "timeoutSeconds": 5, "failureThreshold": 3},
        "volumeMounts": mounts,
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [container], "volumes": volumes}},
        },
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": meta,
        "spec": {"type": "ClusterIP", "selector": labels,
                 "ports": [{"name": "http", "port": port, "targetPort": "http",
                            "protocol": "TCP"}]},
    }
    # Through JSON: the objects above share label/metadata dicts (deepcopy would keep that
    # sharing); the result is plain data a caller may edit one object of freely.
    return json.loads(json.dumps({"apiVersion": "v1", "kind": "List",
                                  "items": [*items, deployment, service]}))


def write_launch_files(launch: Launch) -> list[Path]:
    """Write the engine's side files (Launch.files) where its argv expects them; call before
    starting the process (or before `docker run`, which mounts them)."""
    written = []
    for path, text in sorted(launch.files.items()):
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, text)
        written.append(p)
    return written


def render_deployment(config: AnyServingConfig, port: int, gpus: int, name: str, cpus: int = 1,
                      model_bytes: int = 0, *, model: ModelSource | None = None,
                      token: TokenSecret | None = None) -> DeploymentRendering | None:
    """The winner as a `docker run` command, a Kubernetes manifest and, where the engine has
    its own chart, Helm values (YAML), for the report. None when the engine has no Linux
    container image (MLX-LM). `model`: where a pod gets the measured weights (a volume for
    the manifest and the chart; a hub download for the chart only); `token`: an existing
    Secret with a hub token, for the chart."""
    import yaml

    adapter = adapter_for(config.engine)
    if not adapter.container_image or not adapter.container_executable:
        return None
    image = adapter.container_image
    launch = launch_for(adapter, config, adapter.container_executable, port)
    cmd = container_command(launch, image, gpus, name=name)
    volume = None if isinstance(model, HubDownload) else model
    manifest = kubernetes_manifest(launch, name=name, image=image, gpus=gpus, model=volume)
    notes = [f"image `{image}` by tag only: its digest is not known here (no registry "
             "access); pin it as IMAGE@sha256:... from `docker buildx imagetools inspect "
             f"{image}`, and check the image's engine build is the version this run measured",
             "the Service is ClusterIP: exposure beyond the cluster is a separate, approved "
             "step"]
    helm = adapter.helm_chart
    values = None
    if helm is not None:
        memory_gib = int(model_bytes / 2**30) + 4  # the weights plus 4 GiB: an estimate
        values = yaml.safe_dump(helm.values(launch, name, image, gpus, cpus, memory_gib,
                                            model=model, token=token), sort_keys=False)
        notes.append(f"Helm: `helm repo add vllm {helm.repo_url}` then `helm install {name} "
                     f"{helm.chart} -f values.yaml` (values schema: {helm.source}); the "
                     f"winner's flags pass through unchanged as extraArgs, except prefix "
                     f"caching and tensor parallelism, which the chart renders from "
                     f"vllmConfig (set as measured); requestMemory ({memory_gib} Gi) is the "
                     f"weights plus 4 GiB, an estimate")
    # The weights: the same volume for the manifest and the chart; a hub download is the
    # chart's alone (the manifest runs the measured command, offline).
    notes += source_notes(model, launch.model_path)
    if isinstance(model, HubDownload):
        notes.append("the Kubernetes manifest mounts no weights for a hub download: its image "
                     f"must hold {launch.model_path}")
    return DeploymentRendering(
        image=image, container_command=shlex.join(cmd),
        kubernetes_yaml=yaml.safe_dump(manifest, sort_keys=False),
        helm_chart=helm.chart if helm else None, helm_values_yaml=values, notes=notes)
