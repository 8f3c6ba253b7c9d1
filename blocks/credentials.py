"""Credentials as a Prefect Block with SecretStr fields: saved once (UI or code), loaded by name,
never logged. Tokens fall back to the environment (HF_TOKEN, GITHUB_TOKEN) when no block exists.
"""

from __future__ import annotations

import os

from prefect.blocks.core import Block
from pydantic import Field, SecretStr


class InfoptCredentials(Block):
    _block_type_name = "infopt credentials"
    _description = "Tokens for the Hugging Face Hub and GitHub issue search used by infopt."

    hf_token: SecretStr | None = Field(None, description="Hugging Face token (gated models)")
    github_token: SecretStr | None = Field(None, description="GitHub token (issue search)")

    def hf_token_value(self) -> str | None:
        if self.hf_token is not None:
            return self.hf_token.get_secret_value()
        return os.environ.get("HF_TOKEN")
