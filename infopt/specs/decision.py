"""Decisions a run asks a person for instead of ending (issue 49): when no allowed engine's
baseline fits, which constraint may change. Each choice is a computed alternative, checked with
the same plan the run makes (infopt.tuning.nofit_choices), that either resumes the run with a
changed request or stops it (more GPUs, another model: nothing this run can apply). The request
may decide ahead (`on_no_fit`); otherwise the run pauses at a decision gate (flows/gate.py)
while the work that does not depend on the answer goes on, and the report says what ran."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .approval import GateAnswer
from .base import Spec


class ChoiceKind(StrEnum):
    CONTEXT = "context"  # serve a shorter context than the model's native window
    KV_PRECISION = "kv_precision"  # an 8-bit KV cache
    CONCURRENCY = "concurrency"  # fewer concurrent generations at the target load
    MORE_GPUS = "more_gpus"  # stop: a layout over GPUs this host lacks would fit
    ANOTHER_MODEL = "another_model"  # stop: the weights alone exceed the device
    STOP = "stop"  # stop with the no-fit report


class NoFitPolicy(StrEnum):
    """What a run does when nothing fits: ask a person (the default), stop with the no-fit
    report, or take the named kind of change when it is among the computed alternatives."""

    ASK = "ask"
    STOP = "stop"
    CONTEXT = "context"
    KV_PRECISION = "kv_precision"
    CONCURRENCY = "concurrency"


class DecisionChoice(Spec):
    key: str = Field(..., pattern=r"^[a-z0-9][a-z0-9_-]*$")  # what `infopt approve --choice` takes
    kind: ChoiceKind
    title: str  # one line, with the fit's numbers (estimates, labelled)
    resumes: bool  # True: the run goes on with `request_changes` applied; False: it stops
    # The request's fields to change, as a nested partial of OptimizeRequest's JSON form.
    request_changes: dict[str, Any] = Field(default_factory=dict)


class GateWait(Spec):
    """How long a gate waited, and the work that ran meanwhile (each with its own seconds)."""

    gate_key: str
    waited_s: float
    ran_meanwhile: list[str] = Field(default_factory=list)


class ConstraintDecision(Spec):
    """A decision the run needed: what was asked (the binding constraint), the choices offered,
    the answer and where it came from, what was applied, and what ran while it waited."""

    gate_key: str
    question: str
    choices: list[DecisionChoice]
    answer: GateAnswer
    chosen: DecisionChoice
    wait: GateWait | None = None  # None: decided by the request, nothing waited
