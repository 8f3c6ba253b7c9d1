"""Where a deployed pod gets the measured weights and the hub token (issue 46, item 7): the
volume the user names, or the hub at the commit that was measured, only when its download was
approved. Rendered by infopt.engines.helm and infopt.engines.render; named in a request's
`deploy` section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from infopt.specs.base import Spec

# Kubernetes object names: a DNS-1123 subdomain (claims, secrets) and a Secret's data key.
_DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
_SECRET_KEY = r"^[-._a-zA-Z0-9]{1,253}$"
# A hub commit: a branch or tag can move to other weights than the ones measured.
_COMMIT = r"^[0-9a-f]{40}$"


class ModelClaim(Spec):
    """A PersistentVolumeClaim holding the model under its own name (the claim's root holds
    `<name>/` for an HF directory, `<name>` for a GGUF file); mounted read-only at the measured
    path's parent directory, so the command's path is unchanged."""

    kind: Literal["claim"] = "claim"
    claim_name: str = Field(pattern=_DNS1123_SUBDOMAIN)


class ModelHostPath(Spec):
    """A directory on every node the pods may land on, holding the model under its own name
    as ModelClaim's root does; mounted read-only at the measured path's parent directory."""

    kind: Literal["host_path"] = "host_path"
    path: str = Field(pattern=r"^/")


class HubDownload(Spec):
    """The hub repository and commit the measured weights were downloaded from. Build it only
    when the download gate approved a download: the pod then fetches the weights itself."""

    kind: Literal["hub"] = "hub"
    hub_id: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: str = Field(pattern=_COMMIT)


class TokenSecret(Spec):
    """An existing Secret holding a hub token (gated models): referenced, never created."""

    secret_name: str = Field(pattern=_DNS1123_SUBDOMAIN)
    key: str = Field("HF_TOKEN", pattern=_SECRET_KEY)




class DeployTarget(Spec):
    """What a rendered deployment needs from the user that the run cannot know: where the
    cluster holds the weights, and the Secret with a hub token for a gated model."""

    model_claim: str | None = Field(None, pattern=_DNS1123_SUBDOMAIN, description=(
        "a PersistentVolumeClaim holding the model under its own name"))
    model_host_path: str | None = Field(None, pattern=r"^/", description=(
        "a directory on every GPU node holding the model under its own name"))
    hf_token_secret: str | None = Field(None, pattern=_DNS1123_SUBDOMAIN, description=(
        "an existing Secret with the key HF_TOKEN (gated models); never created by infopt"))

    @model_validator(mode="after")
    def _one_volume(self) -> DeployTarget:
        if self.model_claim and self.model_host_path:
            raise ValueError("deploy: name either model_claim or model_host_path, not both "
                             "(one volume is mounted at the measured weights' path)")
        return self

    def source(self, hub_id: str | None, revision: str | None, downloaded: bool
               ) -> ModelClaim | ModelHostPath | HubDownload | None:
        """The volume the user named, else the hub at the measured commit when the weights
        were downloaded under an approval (a moving branch could serve other weights)."""
        if self.model_claim:
            return ModelClaim(claim_name=self.model_claim)
        if self.model_host_path:
            return ModelHostPath(path=self.model_host_path)
        if downloaded and hub_id and revision and len(revision) == 40:
            try:
                return HubDownload(hub_id=hub_id, revision=revision)
            except ValueError:
                return None
        return None

    def token(self) -> TokenSecret | None:
        return TokenSecret(secret_name=self.hf_token_secret) if self.hf_token_secret else None
