"""Answering gates from a terminal (`infopt approvals`, `infopt approve`), through the Prefect
API the paused run waits on (PREFECT_API_URL: a real server, since another process answers).

Prefect 3.9 has no `prefect flow-run resume`; its resume route answers HTTP 200 with
`"status": "REJECT"` for bad input, so every answer's orchestration result is checked and a
rejection is an error (the run stays paused)."""

from __future__ import annotations

import getpass
import socket
from dataclasses import dataclass
from uuid import UUID

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
from prefect.input.actions import read_flow_run_input
from prefect.input.run_input import keyset_from_paused_state

from infopt.specs.base import InputError


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


def resume(gate_run_id: str, run_input: dict) -> None:
    """Send the answer; a rejection by the server (HTTP 200, status REJECT) is an error."""
    with get_client(sync_client=True) as client:
        result = client.resume_flow_run(_uuid(gate_run_id), run_input=run_input)
    if result.status == SetStateStatus.REJECT:
        raise InputError(f"the Prefect server rejected the answer for run {gate_run_id} "
                         f"({result.details.reason}); the run is still paused: fix the answer "
                         "and send it again")
    if result.status != SetStateStatus.ACCEPT:  # ABORT/WAIT: nothing was answered
        raise InputError(f"the Prefect server did not take the answer for run {gate_run_id} "
                         f"({result.status.value}: {result.details.reason}); the run is still "
                         "paused: send it again with `infopt approve`")


def approve(run_id: str, gate: str | None, approved: bool, reason: str) -> Pending:
    target = _target(run_id, gate)
    resume(target.gate_run_id, {"approved": approved, "reason": reason,
                                "answered_by": answerer()})
    return target
