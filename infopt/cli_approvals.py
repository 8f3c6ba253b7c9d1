"""`infopt approvals` and `infopt approve`: the terminal side of the approval gates (the other
is the Prefect UI's form). Both talk to the Prefect server the paused run uses."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from infopt.specs.base import InfoptError, InputError


def _server() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise InputError("PREFECT_API_URL is not set: answering a gate needs the Prefect "
                         "server the paused run uses (e.g. export PREFECT_API_URL="
                         "http://127.0.0.1:4200/api after `prefect server start`); a run on "
                         "a temporary server cannot be answered from another process")
    from infopt.console import check_prefect_api

    check_prefect_api("answering a gate", temporary_ok=False)


def register(app: typer.Typer, fail) -> None:
    @app.command()
    def approvals(
        run: Annotated[str | None, typer.Option(help="only the gates of this run (an optimize "
                                                "run or a gate's own run id)")] = None,
        json_out: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """List the gates waiting for an answer, with exactly what each would do."""
        try:
            _server()
            from flows.gate import pending

            found = pending(run)
        except InfoptError as exc:
            fail(exc)
            return
        if json_out:
            typer.echo(json.dumps([p.__dict__ for p in found], indent=2))
            return
        if not found:
            typer.echo("no gate is waiting for an answer")
        for p in found:
            how = (f"--choice {{{','.join(p.choices)}}}" if p.choices else "[--deny]")
            unanswered = "stops" if p.choices else "denied"
            typer.echo(f"gate {p.key}  run {p.gate_run_id}  (optimize run "
                       f"{p.parent_run_id or '-'}; {unanswered} if unanswered by "
                       f"{p.timeout_at or 'never'})\n{p.description}\n  answer: infopt approve "
                       f"{p.gate_run_id} --gate {p.key} {how} [--reason TEXT]\n")

    @app.command()
    def approve(
        run_id: Annotated[str, typer.Argument(help="the paused run (as `infopt approvals` "
                                              "lists it, or its optimize run)")],
        gate: Annotated[str | None, typer.Option(help="the gate's key (checked against the "
                                                 "one waiting)")] = None,
        deny: Annotated[bool, typer.Option("--deny", help="deny instead of approve (a "
                                           "decision gate: stop)")] = False,
        choice: Annotated[str | None, typer.Option(help="a decision gate's answer: one of "
                                                   "the keys `infopt approvals` lists")] = None,
        reason: Annotated[str, typer.Option(help="why (recorded in the report)")] = "",
    ) -> None:
        """Approve (or --deny) one waiting gate, or answer a decision gate with --choice; the
        flow goes on at once."""
        try:
            _server()
            from flows.gate import approve as send

            answered = send(run_id, gate, not deny, reason, choice)
        except InfoptError as exc:
            fail(exc)
            return
        verdict = (f"chose {'stop' if deny else choice} at" if answered.choices else
                   "denied" if deny else "approved")
        typer.echo(f"{verdict} gate {answered.key} of run {answered.gate_run_id}")
