"""The API contract as data: one `ContractCheck` per route and feature, each pass, fail,
unsupported or not applicable, with its evidence (the request and an excerpt of the response,
saved beside the trial). Partial support is a failure, never support."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import Spec


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # answered, but not as a client relies on (wrong shape, ignored field)
    UNSUPPORTED = "unsupported"  # refused with a 4xx, or could not be checked, and why
    # The model has no such behaviour (reasoning fields on a model that does not reason), with
    # the evidence; not a server gap, and no remedy would provide it.
    NOT_APPLICABLE = "not applicable"


class ContractCheck(Spec):
    route: str  # the URL path, e.g. /v1/chat/completions
    feature: str  # infopt.contract.openai_chat.CHAT_FEATURES, or "models"
    stream: bool
    status: CheckStatus
    detail: str
    required: bool = False  # the request (or the load generator) depends on it
    evidence: str | None = None  # file with the request and the response excerpt

    @property
    def ok(self) -> bool:
        return self.status is CheckStatus.PASS

    @property
    def gap(self) -> bool:
        """Worth naming: not passed, and either required or something a server could give
        (a model that does not reason lacks nothing unless reasoning was asked for)."""
        return not self.ok and (self.required or self.status is not CheckStatus.NOT_APPLICABLE)

    @property
    def shown(self) -> str:
        """The status as tables print it: gaps in capitals."""
        return self.status.value.upper() if self.gap else self.status.value


class ContractRemedy(Spec):
    """What gives a configuration the features it lacks, as knob changes (engine data:
    EngineAdapter.contract_remedies), with where that was found."""

    features: list[str]  # the checks it provides
    knob_changes: dict[str, bool | int | float | str]
    change: str  # in words, with the engine's flags
    source: str  # the engine's own message, or the documentation page


class ContractGap(Spec):
    """A check a configuration did not pass, and what would provide it (None: nothing known)."""

    feature: str
    status: CheckStatus
    detail: str
    required: bool
    remedy: ContractRemedy | None = None


class ContractOutcome(Spec):
    """What the control (the engine's defaults) and the baseline lacked, and the remedy the
    run applied as a candidate change when the baseline lacked a required feature."""

    control_gaps: list[ContractGap] = Field(default_factory=list)
    baseline_gaps: list[ContractGap] = Field(default_factory=list)  # after any remedy
    first_baseline_gaps: list[ContractGap] = Field(default_factory=list)  # before it
    applied: ContractRemedy | None = None
