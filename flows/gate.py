"""The approval gate: a child flow that pauses for a person's answer (the Prefect UI renders
`ApprovalInput` as a form beside the gate's description; `infopt approve` answers from a
terminal). A pause that times out fails its flow run even when the exception is caught
(notes/prefect.md), so the pause lives in this child: the child fails, and the parent records a
denial and goes on. The request's pre-authorization answers without pausing; nothing else does.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from prefect import flow, get_run_logger, runtime
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import Field

from infopt.specs.approval import AnswerSource, GateAnswer, GateRequest


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
