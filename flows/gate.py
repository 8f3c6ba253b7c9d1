"""The approval gate: a child flow that pauses for a person's answer (the Prefect UI renders
`ApprovalInput` as a form beside the gate's description; `infopt approve` answers from a
terminal); and the decision gate, the same with a choice among computed alternatives instead of
approve/deny (`DecisionInput`, `infopt approve --choice`; flows/decide.py asks it). A pause
that times out fails its flow run even when the exception is caught (notes/prefect.md), so the
pause lives in this child: the child fails, and the parent records a denial (a decision:
"stop") and goes on. The request's pre-authorization (a decision: its on_no_fit) answers
without pausing; nothing else does.

Answering gates from a terminal (`infopt approvals`, `infopt approve`), through the Prefect
API the paused run waits on (PREFECT_API_URL: a real server, since another process answers).

Prefect 3.9 has no `prefect flow-run resume`; its resume route answers HTTP 200 with
`"status": "REJECT"` for bad input, so every answer's orchestration result is checked and a
rejection is an error (the run stays paused)."""

from __future__ import annotations

import getpass
import socket
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from prefect import flow, get_run_logger, runtime
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentFlowRunId,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.client.schemas.responses import SetStateStatus
from prefect.exceptions import ObjectNotFound
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.input.actions import read_flow_run_input
from prefect.input.run_input import keyset_from_paused_state
from pydantic import Field, create_model

from infopt.specs.approval import AnswerSource, GateAnswer, GateRequest
from infopt.specs.base import InputError


class ApprovalInput(RunInput):
    """The form: approve or deny, why, and who answers (recorded in the report)."""

    approved: bool = Field(False, description="on: do what is described above; off: skip it")
    reason: str = Field("", description="why (recorded in the report)")
    answered_by: str = Field("", description="your name (recorded in the report)")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# Who answers a gate the run withdraws (withdraw): the answer's source then says "withdrawn",
# not "person".
WITHDRAWN_BY = "infopt (the run stopped before an answer)"


def _source(answered_by: str) -> AnswerSource:
    return AnswerSource.WITHDRAWN if answered_by == WITHDRAWN_BY else AnswerSource.PERSON


def _answer(gate: GateRequest, **kw) -> GateAnswer:
    return GateAnswer(kind=gate.kind, key=gate.key, title=gate.title, answered_at=_now(), **kw)


@flow(name="approval-gate", flow_run_name="gate-{gate.key}")
def approval_gate(gate: GateRequest, timeout_s: int) -> GateAnswer:
    run_id = str(runtime.flow_run.id)
    get_run_logger().warning(
        "waiting up to %d s for approval of %s gate %r: %s. Answer in the Prefect UI (this "
        "flow run, Resume) or from a terminal: infopt approve %s --gate %s [--deny] "
        "[--reason TEXT]", timeout_s, gate.kind.value, gate.key, gate.title, run_id, gate.key)
    got = pause_flow_run(wait_for_input=ApprovalInput.with_initial_data(
        description=gate.description, approved=False), timeout=timeout_s, poll_interval=2,
        key=gate.key)
    return _answer(gate, approved=got.approved, source=_source(got.answered_by),
                   reason=got.reason, answered_by=got.answered_by or "unnamed (Prefect UI)",
                   flow_run_id=run_id)


class DecisionInput(RunInput):
    """The decision form: which alternative, why, and who answers (recorded in the report).
    Each gate narrows `choice` to its own keys (decision_input)."""

    choice: str = Field(..., description="the alternative to take (the list above says what "
                        "each changes)")
    reason: str = Field("", description="why (recorded in the report)")
    answered_by: str = Field("", description="your name (recorded in the report)")


def decision_input(keys: list[str]) -> type[DecisionInput]:
    """The form for one gate: `choice` one of its keys (a Literal: the UI renders a select and
    the server refuses anything else)."""
    allowed: Any = Literal[tuple(keys)]
    return create_model("DecisionInput", __base__=DecisionInput,
                        choice=(allowed, Field(..., description="the alternative to take (the "
                                               "list above says what each changes)")))


@flow(name="decision-gate", flow_run_name="gate-{gate.key}")
def decision_gate(gate: GateRequest, keys: list[str], default: str,
                  timeout_s: int) -> GateAnswer:
    run_id = str(runtime.flow_run.id)
    get_run_logger().warning(
        "waiting up to %d s for a decision at gate %r: %s. Answer in the Prefect UI (this "
        "flow run, Resume) or from a terminal: infopt approve %s --gate %s --choice KEY "
        "(one of %s)", timeout_s, gate.key, gate.title, run_id, gate.key, ", ".join(keys))
    got = pause_flow_run(wait_for_input=decision_input(keys).with_initial_data(
        description=gate.description, choice=default), timeout=timeout_s, poll_interval=2,
        key=gate.key)
    return _answer(gate, approved=True, source=_source(got.answered_by),
                   choice=got.choice,
                   reason=got.reason, answered_by=got.answered_by or "unnamed (Prefect UI)",
                   flow_run_id=run_id)


def decide(gate: GateRequest, keys: list[str], default: str, timeout_s: int) -> GateAnswer:
    """A person's choice among `keys`, or `default` (recorded as unanswered) when nobody
    answered within `timeout_s`."""
    state = decision_gate(gate, keys, default, timeout_s, return_state=True)
    if state.is_completed():
        return state.result()
    timed_out = "never resumed" in (state.message or "")
    why = (f"no answer within {timeout_s} s" if timed_out else
           f"the gate did not complete ({state.type.value}: {state.message})")
    get_run_logger().warning("decision gate %r: %s; taking %r", gate.key, why, default)
    return _answer(gate, approved=False, choice=default, reason=why,
                   source=AnswerSource.TIMEOUT if timed_out else AnswerSource.UNANSWERED,
                   flow_run_id=str(state.state_details.flow_run_id or "") or None)


def ask(gate: GateRequest, authorized: Collection[str], timeout_s: int) -> GateAnswer:
    """The answer to one gate: pre-authorized, a person's, or a denial when nobody answered
    within `timeout_s` (recorded as such; the caller skips the action and goes on)."""
    if gate.kind.value in authorized:
        get_run_logger().info("%s gate %r pre-authorized by the request: %s", gate.kind.value,
                              gate.key, gate.title)
        return _answer(gate, approved=True, source=AnswerSource.PRE_AUTHORIZED,
                       reason="pre-authorized by the request's `authorize`",
                       answered_by="the request")
    state = approval_gate(gate, timeout_s, return_state=True)
    if state.is_completed():
        return state.result()
    # Prefect fails a pause that timed out with "The flow was failed and never resumed."
    timed_out = "never resumed" in (state.message or "")
    why = (f"no answer within {timeout_s} s" if timed_out else
           f"the gate did not complete ({state.type.value}: {state.message})")
    get_run_logger().warning("%s gate %r: %s; denied, the action is skipped", gate.kind.value,
                             gate.key, why)
    return _answer(gate, approved=False, reason=why,
                   source=AnswerSource.TIMEOUT if timed_out else AnswerSource.UNANSWERED,
                   flow_run_id=str(state.state_details.flow_run_id or "") or None)


@dataclass(frozen=True)
class Pending:
    gate_run_id: str  # the paused gate's own flow run: what `infopt approve` answers
    parent_run_id: str | None  # the optimize run it belongs to
    key: str  # the gate's key (its pause key)
    description: str
    timeout_at: str | None
    choices: tuple[str, ...] = field(default=())  # a decision gate's keys; () for approve/deny


def _uuid(run_id: str) -> UUID:
    try:
        return UUID(run_id)
    except ValueError:
        raise InputError(f"{run_id!r} is not a flow run id; `infopt approvals` lists the "
                         "runs waiting for an answer") from None


def _paused_filter(**kw) -> FlowRunFilter:
    return FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
        any_=[StateType.PAUSED])), **kw)


def _describe(client, run) -> Pending | None:
    """None while the gate is not answerable yet: Prefect sets the run PAUSED before it saves
    the form's schema (prefect/flow_runs.py), and until then the server aborts an answer
    ("Run input schema not found") and the UI shows a resume dialog without the form."""
    keyset = keyset_from_paused_state(run.state)
    schema = read_flow_run_input(keyset["schema"], flow_run_id=run.id)
    if schema is None:
        return None
    parent = None
    if run.parent_task_run_id:
        parent = str(client.read_task_run(run.parent_task_run_id).flow_run_id)
    description = read_flow_run_input(keyset["description"], flow_run_id=run.id) or ""
    timeout = run.state.state_details.pause_timeout
    return Pending(gate_run_id=str(run.id), parent_run_id=parent,
                   key=run.state.state_details.pause_key or "", description=str(description),
                   timeout_at=timeout.isoformat() if timeout else None,
                   choices=_choices(schema))


def _choices(schema: Any) -> tuple[str, ...]:  # noqa: ANN401 - a JSON schema
    """A decision form's keys: its `choice` property's enum (a Literal's JSON schema)."""
    prop = (schema.get("properties") or {}).get("choice") if isinstance(schema, dict) else None
    if not prop:
        return ()
    return tuple(prop.get("enum") or ([prop["const"]] if "const" in prop else []))


def pending(run_id: str | None = None) -> list[Pending]:
    """Paused gates; with `run_id`, those of that run (a gate's own run, or its parent's)."""
    with get_client(sync_client=True) as client:
        if run_id is None:
            runs = client.read_flow_runs(flow_run_filter=_paused_filter())
        else:
            rid = _uuid(run_id)
            runs = (client.read_flow_runs(flow_run_filter=_paused_filter(
                        id=FlowRunFilterId(any_=[rid])))
                    or client.read_flow_runs(flow_run_filter=_paused_filter(
                        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[rid]))))
        return [p for r in runs if (p := _describe(client, r)) is not None]


def _target(run_id: str, gate: str | None) -> Pending:
    found = pending(run_id)
    if gate is not None:
        found = [p for p in found if p.key == gate]
    if len(found) == 1:
        return found[0]
    with get_client(sync_client=True) as client:
        try:
            state = client.read_flow_run(_uuid(run_id)).state
        except ObjectNotFound:
            raise InputError(f"no flow run {run_id} on this Prefect server; `infopt "
                             "approvals` lists the runs waiting for an answer") from None
    if not found and gate is not None:
        raise InputError(f"run {run_id} has no gate {gate!r} waiting for an answer; "
                         "`infopt approvals --run " + run_id + "` lists its gates")
    if not found:
        raise InputError(f"run {run_id} is not waiting for an answer (state "
                         f"{state.type.value if state else 'unknown'})")
    raise InputError(f"run {run_id} has {len(found)} gates waiting ({[p.key for p in found]}); "
                     "name one with --gate KEY")


def answerer() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()} (infopt approve)"


def _reason(result: Any) -> str:  # noqa: ANN401 - prefect's OrchestrationResult
    """The server's reason (an ACCEPT's details have none)."""
    return str(getattr(result.details, "reason", None) or "no reason given")


def resume(gate_run_id: str, run_input: dict) -> None:
    """Send the answer; a rejection by the server (HTTP 200, status REJECT) is an error."""
    with get_client(sync_client=True) as client:
        result = client.resume_flow_run(_uuid(gate_run_id), run_input=run_input)
    if result.status == SetStateStatus.REJECT:
        raise InputError(f"the Prefect server rejected the answer for run {gate_run_id} "
                         f"({_reason(result)}); the run is still paused: fix the answer "
                         "and send it again")
    if result.status != SetStateStatus.ACCEPT:  # ABORT/WAIT: nothing was answered
        raise InputError(f"the Prefect server did not take the answer for run {gate_run_id} "
                         f"({result.status.value}: {_reason(result)}); the run is still "
                         "paused: send it again with `infopt approve`")


def withdraw(run_id: str, reason: str) -> list[str]:
    """Deny every gate of `run_id` still waiting (a decision: "stop"), so that the run, which
    stopped for another reason, does not wait out their timeouts; the keys answered."""
    answered = []
    for p in pending(run_id):
        answer = {"reason": reason, "answered_by": WITHDRAWN_BY,
                  **({"choice": "stop"} if p.choices else {"approved": False})}
        try:
            resume(p.gate_run_id, answer)
        except InputError:  # answered meanwhile by a person: theirs stands
            continue
        answered.append(p.key)
    return answered


def approve(run_id: str, gate: str | None, approved: bool, reason: str,
            choice: str | None = None) -> Pending:
    """Answer one waiting gate: approve/deny, or for a decision gate a `choice` among its keys
    (--deny there means "stop")."""
    target = _target(run_id, gate)
    answer: dict[str, Any] = {"reason": reason, "answered_by": answerer()}
    if target.choices:
        choice = choice if approved else "stop"
        if choice not in target.choices:
            raise InputError(
                f"gate {target.key!r} of run {target.gate_run_id} is a decision: give "
                f"--choice with one of {list(target.choices)} (`infopt approvals` says what "
                "each changes)" + ("" if choice is None else f"; {choice!r} is not one"))
        answer["choice"] = choice
    elif choice is not None:
        raise InputError(f"gate {target.key!r} of run {target.gate_run_id} asks to approve or "
                         "deny, not to choose: drop --choice (add --deny to deny)")
    else:
        answer["approved"] = approved
    resume(target.gate_run_id, answer)
    return target
