"""Credentials as a Prefect Block with SecretStr fields: saved once (UI or code), loaded by name,
never logged. Tokens fall back to the environment (HF_TOKEN, GITHUB_TOKEN) when no block exists.

The tasks that need a token (the hub's shortlist and downloads, issue search) take the block's
*name* (`OptimizeRequest.credentials_block`) and resolve it here, inside the task: a secret is
never a flow or task parameter, so it is never stored with a run.
"""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from blocks.loading import load_named
from infopt.engines.session import Troubleshooting
from infopt.model.hub import resolve_token
from infopt.specs.request import OptimizeRequest
from infopt.troubleshoot.github import github_token as env_github_token


class InfoptCredentials(Block):
    _block_type_name = "infopt credentials"
    _description = "Tokens for the Hugging Face Hub and GitHub issue search used by infopt."

    hf_token: SecretStr | None = Field(None, description="Hugging Face token (gated models)")
    github_token: SecretStr | None = Field(None, description="GitHub token (issue search)")

    def hf_token_value(self) -> str | None:
        if self.hf_token is not None:
            return self.hf_token.get_secret_value()
        return resolve_token()

    def github_token_value(self) -> str | None:
        if self.github_token is not None:
            return self.github_token.get_secret_value()
        return env_github_token()


def load_credentials(name: str) -> InfoptCredentials:
    return load_named(InfoptCredentials, name, "InfoptCredentials(hf_token=...)",
                      "; or leave it unset to use $HF_TOKEN / $GITHUB_TOKEN")


def hf_token(block: str | None) -> str | None:
    """The Hugging Face token: block `block`'s when named, else $HF_TOKEN."""
    return load_credentials(block).hf_token_value() if block else resolve_token()


def github_token(block: str | None) -> str | None:
    """The GitHub token: block `block`'s when named, else $GITHUB_TOKEN."""
    return load_credentials(block).github_token_value() if block else env_github_token()


def troubleshooting(request: OptimizeRequest) -> Troubleshooting:
    """The request's issue-first troubleshooting, reading the GitHub token from its credentials
    block (or $GITHUB_TOKEN) only when a search runs: what every engine session of a run uses."""
    return Troubleshooting.of(request, f"{__name__}:{github_token.__name__}")
