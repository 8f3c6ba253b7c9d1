"""Approval gates as data: what waits for a person before it happens (a download, a local
quantization or calibration, exposing an engine beyond 127.0.0.1, promoting a re-tuned
configuration over the accepted one), and the answer it got, from
the Prefect UI, the terminal (`infopt approve`), a timeout, or the request's pre-authorization.
Every answer is recorded in the trial it concerns and in the report's approvals section."""

from __future__ import annotations

import ipaddress
from enum import StrEnum

from pydantic import Field, SecretStr, field_validator

from .base import Spec


class GateKind(StrEnum):
    DOWNLOAD = "download"
    QUANTIZE = "quantize"
    EXPOSE = "expose"
    PROMOTE = "promote"  # a re-tuned configuration replaces the accepted one (reoptimize)
    DECIDE = "decide"  # a choice among computed alternatives (infopt.specs.decision)


class GateRequest(Spec):
    """One side effect, described exactly, waiting for an answer."""

    kind: GateKind
    key: str = Field(..., pattern=r"^[a-z0-9][a-z0-9-]*$")  # unique in the run, e.g. quantize-q4_0
    title: str  # one line
    description: str  # markdown: exactly what will happen, with sizes, tools and addresses
    details: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


class AnswerSource(StrEnum):
    PRE_AUTHORIZED = "pre-authorized"  # the request's `authorize` / --authorize
    PRE_DECIDED = "pre-decided"  # a decision the request made ahead (its `on_no_fit`)
    PERSON = "person"  # the Prefect UI form or `infopt approve`
    TIMEOUT = "timeout"  # nobody answered in time: denied
    UNANSWERED = "unanswered"  # the gate's run ended otherwise (cancelled, crashed): denied
    WITHDRAWN = "withdrawn"  # the run stopped while the gate waited: denied by the run itself


class GateAnswer(Spec):
    kind: GateKind
    key: str
    title: str
    approved: bool
    source: AnswerSource
    reason: str = ""
    answered_by: str = ""  # who: the name given in the form, or user@host from the terminal
    answered_at: str  # ISO 8601
    flow_run_id: str | None = None  # the gate's own (child) flow run, when one paused
    choice: str | None = None  # a decision gate's chosen alternative (its key)


class ExposeRequest(Spec):
    """Serve beyond localhost: the only way an engine binds another address, and only after
    an approved or pre-authorized expose gate. The engine then always requires an API key."""

    address: str = Field(..., description="the address to bind, e.g. 0.0.0.0 or 10.0.0.5")
    who_can_reach: str = Field("anyone who can route to this address",
                               description="in words, for the gate's description")
    api_key_env: str = Field("INFOPT_ENGINE_API_KEY", pattern=r"^[A-Z_][A-Z0-9_]*$",
                             description="environment variable holding the key (one is "
                             "generated and kept in a Prefect Secret block when it is unset)")

    @field_validator("address")
    @classmethod
    def _ip(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
        except ValueError:
            raise ValueError(f"expose.address {v!r} is not an IP address; give the address "
                             "to bind, e.g. 0.0.0.0 (all interfaces) or one of this host's "
                             "addresses") from None
        return v


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class ExposureGrant(Spec):
    """What lets an engine bind a non-loopback address: the expose gate's approving answer,
    and the API key the engine will then require (a SecretStr: never printed)."""

    address: str
    answer: GateAnswer
    api_key: SecretStr
    key_source: str  # where the key is kept, in words (a Secret block's name, an env var)


class ExposureOutcome(Spec):
    """The expose gate's result for the recommended configuration: when approved, the engine
    was started at the address, its real listening sockets read back, and the API key checked
    (401 without it, 200 with it)."""

    address: str
    port: int | None = None
    approved: bool
    bind_addresses: list[str] = Field(default_factory=list)  # from the socket table
    api_key_env: str | None = None  # the engine's variable the key goes in
    api_key_source: str | None = None  # where the key is kept (never the key)
    auth_check: str | None = None  # the contract's auth probe, in words
    auth_passed: bool | None = None
    command: str | None = None  # the exposed launch (the key is not in it)
    note: str = ""
