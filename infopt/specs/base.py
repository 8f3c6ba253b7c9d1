"""Base model and error types shared by every stage.

Units live in field names (`_s`, `_bytes`, `_tokens`, `_per_s`); values inside the library are
seconds and bytes, converted only in `infopt.report`.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict


class Spec(BaseModel):
    """Strict model: unknown fields are errors, so a typo in a config never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=False)


class InfoptError(Exception):
    """An error the user can fix. The message says what to change; the CLI prints it, no trace."""


class InputError(InfoptError):
    """A bad input: a path, a name, a number out of range."""


class EngineUnavailableError(InfoptError):
    """An engine binary or environment is missing."""


class EngineOverrideError(EngineUnavailableError):
    """The executable the user named for an engine ($INFOPT_LLAMA_SERVER and the like) is not
    usable: the run stops instead of moving on to another engine."""


class ExposureError(InfoptError):
    """A non-loopback bind without an approved or pre-authorized expose gate."""


class EngineStartError(InfoptError):
    """An engine process failed to become ready. Carries the log path for diagnosis."""

    def __init__(self, message: str, log_path: str | None = None):
        super().__init__(message)
        self.log_path = log_path


class PortTaken(EngineStartError):
    """The engine could not bind its port (another process took it between infopt's pick and
    the engine's bind): transient, retried on another free port."""


class ReadinessTimeout(EngineStartError):
    """The engine did not answer its health route within the readiness timeout: retried once
    (a slow machine), then diagnosed."""


def http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL with a host (for example "
                         "https://pypi.org/pypi)")
    return value


# A base URL infopt will send requests to (a package index, a hub mirror, a GitHub API):
# refused where it is read, not as a connection error later.
HttpUrlText = Annotated[str, AfterValidator(http_url)]
