"""`ClusterTarget`: where a Kubernetes run goes (kubeconfig context, namespace, the GPU nodes'
labels and taints), saved once and loaded by name.

`job_variables()` gives the deployment run's job variables under the names the base job
template (deployments/k8s-gpu-job-template.json) declares: `namespace`, `node_selector`,
`tolerations`. The kubeconfig context picks the cluster for commands run from here
(`kubectl_args()`); a worker reaches its cluster through its own configuration.
"""

from __future__ import annotations

import re
from typing import Any

from prefect.blocks.core import Block
from pydantic import Field, field_validator

# Kubernetes' own rules (DNS-1123 label; core/v1 Toleration fields and values).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_TOLERATION_FIELDS = {"key", "operator", "value", "effect", "tolerationSeconds"}
_OPERATORS = {"Exists", "Equal"}
_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}


class ClusterTarget(Block):
    _block_type_name = "infopt cluster target"
    _description = "A Kubernetes cluster's GPU nodes for infopt runs."

    kube_context: str | None = Field(None, description="kubeconfig context (None: the "
                                                       "current one)")
    namespace: str = Field("default", description="namespace the run's Job is created in")
    gpu_node_selector: dict[str, str] = Field(
        default_factory=dict, description="labels of the GPU nodes, e.g. "
                                          "{\"nvidia.com/gpu.present\": \"true\"}")
    tolerations: list[dict[str, Any]] = Field(
        default_factory=list, description="tolerations of the GPU nodes' taints (Kubernetes "
                                          "Toleration objects)")

    @field_validator("namespace")
    @classmethod
    def _namespace_name(cls, v: str) -> str:
        if not _NAMESPACE.match(v):
            raise ValueError(f"namespace '{v}' is not a Kubernetes name: lowercase letters, "
                             "digits and '-', at most 63, starting and ending alphanumeric")
        return v

    @field_validator("tolerations")
    @classmethod
    def _toleration_shape(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, t in enumerate(v):
            if extra := sorted(set(t) - _TOLERATION_FIELDS):
                raise ValueError(f"tolerations[{i}] has unknown field(s) {extra}: use "
                                 f"{sorted(_TOLERATION_FIELDS)}")
            if t.get("operator", "Equal") not in _OPERATORS:
                raise ValueError(f"tolerations[{i}].operator is {t['operator']!r}: use "
                                 "Exists or Equal")
            if t.get("operator") == "Exists" and t.get("value"):
                raise ValueError(f"tolerations[{i}]: operator Exists takes no value")
            if t.get("effect") and t["effect"] not in _EFFECTS:
                raise ValueError(f"tolerations[{i}].effect is {t['effect']!r}: use one of "
                                 f"{sorted(_EFFECTS)} (or leave it out for all)")
        return v

    def job_variables(self) -> dict[str, Any]:
        """`job_variables` for a deployment run on the Kubernetes work pool."""
        return {"namespace": self.namespace, "node_selector": dict(self.gpu_node_selector),
                "tolerations": [dict(t) for t in self.tolerations]}

    def kubectl_args(self) -> list[str]:
        """--context/--namespace for kubectl or helm run against this target."""
        ctx = ["--context", self.kube_context] if self.kube_context else []
        return [*ctx, "--namespace", self.namespace]
