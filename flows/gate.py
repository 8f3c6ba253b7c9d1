"""The approval gate: a child flow that pauses for a person's answer (the Prefect UI renders
`ApprovalInput` as a form beside the gate's description; `infopt approve` answers from a
terminal). A pause that times out fails its flow run even when the exception is caught
(notes/prefect.md), so the pause lives in this child: the child fails, and the parent records a
denial and goes on. The request's pre-authorization answers without pausing; nothing else does.

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
from dataclasses import dataclass
from typing import Any
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
from pydantic import Field

from infopt.specs.approval import AnswerSource, GateAnswer, GateRequest
from infopt.specs.base import InputError


class ApprovalInput(RunInput):
    """The form: approve or deny, why, and who answers (recorded in the report)."""

    approved: bool = Field(False, description="on: do what is described above; off: skip it")
    reason: str = Field("", description="why (recorded in the report)")
    answered_by: str = Field("", description="your name (recorded in the report)")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


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
    return _answer(gate, approved=got.approved, source=AnswerSource.PERSON,
                   reason=got.reason, answered_by=got.answered_by or "unnamed (Prefect UI)",
                   flow_run_id=run_id)


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
    if read_flow_run_input(keyset["schema"], flow_run_id=run.id) is None:
        return None
    parent = None
    if run.parent_task_run_id:
        parent = str(client.read_task_run(run.parent_task_run_id).flow_run_id)
    description = read_flow_run_input(keyset["description"], flow_run_id=run.id) or ""
    timeout = run.state.state_details.pause_timeout
    return Pending(gate_run_id=str(run.id), parent_run_id=parent,
                   key=run.state.state_details.pause_key or "", description=str(description),
                   timeout_at=timeout.isoformat() if timeout else None)


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


def approve(run_id: str, gate: str | None, approved: bool, reason: str) -> Pending:
    target = _target(run_id, gate)
    resume(target.gate_run_id, {"approved": approved, "reason": reason,
                                "answered_by": answerer()})
    return target
