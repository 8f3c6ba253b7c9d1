"""`ResultsStore`: where run folders are copied as they are written (a local path or an fsspec
URL such as s3://bucket/prefix), so a run whose pod loses its disk resumes elsewhere.

Options that are not secret (endpoint_url, region, config_kwargs...) go in `storage_options`;
credentials go in the SecretStr fields `key`, `secret` and `token`, which Prefect stores
encrypted and prints as ********** (repr, logs, `model_dump_json`). With none given, the
backend finds credentials itself (e.g. $AWS_ACCESS_KEY_ID or an instance role for S3).
The store logic is plain Python: infopt.runs.store.RunStore.
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import Field, SecretStr, field_validator

from infopt.runs.store import RunStore

# Option names that carry credentials in fsspec backends (s3fs, gcsfs, adlfs...): refused in
# the plain `storage_options`, where they would be saved and shown unencrypted.
_SECRET_WORDS = ("key", "secret", "token", "password", "credential", "connection_string")


class ResultsStore(Block):
    _block_type_name = "infopt results store"
    _description = ("Where infopt copies run folders (trials, reports) as they are written: a "
                    "local path or an fsspec URL such as s3://bucket/prefix.")

    url: str = Field(description="a local path or an fsspec URL, e.g. s3://bucket/infopt-runs")
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="fsspec options that are not secret, e.g. "
                                          "{\"endpoint_url\": \"http://minio:9000\"}")
    key: SecretStr | None = Field(None, description="access key id (S3: key)")
    secret: SecretStr | None = Field(None, description="secret access key (S3: secret)")
    token: SecretStr | None = Field(None, description="session token, if the key needs one")

    @field_validator("url")
    @classmethod
    def _known_protocol(cls, v: str) -> str:
        from fsspec import available_protocols
        from fsspec.core import split_protocol

        v = v.strip()
        if not v:
            raise ValueError("url is empty: give a local path or an fsspec URL such as "
                             "s3://bucket/prefix")
        protocol, _ = split_protocol(v)
        if protocol is not None and protocol not in available_protocols():
            raise ValueError(f"url {v!r}: fsspec knows no protocol '{protocol}://' (s3, gcs, "
                             "az, file, ... or a plain local path)")
        return v

    @field_validator("storage_options")
    @classmethod
    def _no_plain_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        if bad := sorted(k for k in v if any(w in k.lower() for w in _SECRET_WORDS)):
            raise ValueError(f"storage_options {bad} look like credentials, which would be "
                             "saved unencrypted: put them in the key / secret / token fields")
        return v

    def run_store(self) -> RunStore:
        """The store as infopt's report code uses it (secrets revealed only to fsspec)."""
        secrets = {name: field.get_secret_value()
                   for name, field in (("key", self.key), ("secret", self.secret),
                                       ("token", self.token)) if field is not None}
        return RunStore(self.url, self.storage_options, secrets)
