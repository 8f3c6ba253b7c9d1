"""Credentials as a Prefect Block with SecretStr fields: saved once (UI or code), loaded by name,
never logged. Tokens fall back to the environment (HF_TOKEN, GITHUB_TOKEN) when no block exists.

The tasks that need a token (the hub's shortlist and downloads, issue search) take the block's
*name* (`OptimizeRequest.credentials_block`) and resolve it here, inside the task: a secret is
never a flow or task parameter, so it is never stored with a run.
"""

from __future__ import annotations

import os

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from infopt.specs.base import InputError


class InfoptCredentials(Block):
    _block_type_name = "infopt credentials"
    _description = "Tokens for the Hugging Face Hub and GitHub issue search used by infopt."

    hf_token: SecretStr | None = Field(None, description="Hugging Face token (gated models)")
    github_token: SecretStr | None = Field(None, description="GitHub token (issue search)")

    def hf_token_value(self) -> str | None:
        if self.hf_token is not None:
            return self.hf_token.get_secret_value()
        return os.environ.get("HF_TOKEN") or None

    def github_token_value(self) -> str | None:
        if self.github_token is not None:
            return self.github_token.get_secret_value()
        return os.environ.get("GITHUB_TOKEN") or None


def load_credentials(name: str) -> InfoptCredentials:
    try:
        return InfoptCredentials.load(name)
    except ValueError as exc:  # Prefect's "Unable to find block document named ..."
        raise InputError(f"no InfoptCredentials block named '{name}' ({exc}); save one in the "
                         "Prefect UI (Blocks -> + -> infopt credentials) or with "
                         f"InfoptCredentials(hf_token=...).save('{name}'), or leave it unset "
                         "to use $HF_TOKEN / $GITHUB_TOKEN") from None


def hf_token(block: str | None) -> str | None:
    """The Hugging Face token: block `block`'s when named, else $HF_TOKEN."""
    return load_credentials(block).hf_token_value() if block else (
        os.environ.get("HF_TOKEN", "").strip() or None)


def github_token(block: str | None) -> str | None:
    """The GitHub token: block `block`'s when named, else $GITHUB_TOKEN."""
    return load_credentials(block).github_token_value() if block else (
        os.environ.get("GITHUB_TOKEN") or None)
