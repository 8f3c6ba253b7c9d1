"""`infopt accept` and `infopt reoptimize`: mark the configuration a person deployed, and
re-measure it after an engine upgrade (the `reoptimize` deployment runs the same flow on a
schedule). Exit status: 0 no regression, 1 a confirmed regression, 2 bad input."""

from __future__ import annotations

from typing import Annotated

import typer

from infopt.specs.base import InfoptError


def _request(**fields):
    from pydantic import ValidationError

    from infopt.specs.base import InputError
    from infopt.specs.reoptimize import ReoptimizeRequest

    try:
        return ReoptimizeRequest.model_validate({k: v for k, v in fields.items()
                                                 if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err["loc"]:  # a rule across flags: its message names them
            raise InputError(err["msg"].removeprefix("Value error, ")) from None
        flag = "--" + str(err["loc"][0]).replace("_", "-")
        raise InputError(f"{flag}: {err['msg']} (got {err.get('input')!r})") from None


def _preflight(request, runs_dir: str | None) -> None:
    """What can be checked before Prefect starts, so bad input is one paragraph, not a failed
    flow run: the accepted run and its files (unless they come from a results store), the
    upgraded build's executable, and the blocks named (these ask the Prefect API, but start
    no flow run and write nothing)."""
    import os

    from infopt.runs.accepted import accepted, load_optimization
    from infopt.runs.rundir import runs_root
    from infopt.specs.base import InputError

    if request.executable and not os.access(request.executable, os.X_OK):
        raise InputError(f"--executable {request.executable}: not an executable file; give "
                         "the upgraded engine's binary (or interpreter)")
    if request.results_store or request.engine_runtime:  # a missing block: one paragraph now
        from blocks.named import load_engine_runtime, load_results_store

        if request.results_store:
            load_results_store(request.results_store)
        if request.engine_runtime:
            load_engine_runtime(request.engine_runtime)
    if request.results_store is None:
        from infopt.tuning.remeasure import picks

        root = runs_root(runs_dir)
        report, _ = load_optimization(root / (request.baseline_run or accepted(root).run_id))
        try:
            picks(report)
        except ValueError as exc:
            raise InputError(f"{exc}: accept a run whose winner was measured") from None


def register(app: typer.Typer, fail) -> None:
    @app.command()
    def accept(
        run_id: Annotated[str, typer.Argument(help="the optimize run you deployed: its id, or "
                                                "its folder's path (runs/<id>)")],
        runs_dir: Annotated[str | None, typer.Option(help="the runs root; default "
                                                     "$INFOPT_RUNS_DIR or ./runs")] = None,
    ) -> None:
        """Make RUN_ID the accepted run: the one `infopt reoptimize` re-measures."""
        from infopt.runs.accepted import accept as accept_run
        from infopt.runs.rundir import locate_run

        try:
            acc = accept_run(*locate_run(run_id, runs_dir), by="infopt accept")
        except InfoptError as exc:
            fail(exc)
            return
        typer.echo(f"accepted run {acc.run_id}: {acc.engine} {acc.engine_version}, "
                   f"winner {acc.winner_label}")

    @app.command()
    def reoptimize(
        baseline_run: Annotated[str | None, typer.Option(help="the run to re-measure; default: "
                                                         "the accepted run")] = None,
        executable: Annotated[str | None, typer.Option(help="the upgraded engine's executable "
                                                       "or interpreter")] = None,
        engine_runtime: Annotated[str | None, typer.Option(help="an EngineRuntime block: the "
                                                           "upgraded build")] = None,
        results_store: Annotated[str | None, typer.Option(help="a ResultsStore block: where "
                                                          "runs are kept")] = None,
        index_url: Annotated[str | None, typer.Option(help="package index JSON API base "
                                                      "(default https://pypi.org/pypi)")] = None,
        repeats: Annotated[int | None, typer.Option(help="fresh starts per configuration per "
                                                    "round (default 2)")] = None,
        confirm_rounds: Annotated[int | None, typer.Option(help="rounds in a row that must "
                                                           "flag a regression (default 2)")] = None,
        force: Annotated[bool, typer.Option("--force", help="re-measure even when the "
                                            "version did not change")] = False,
        retune: Annotated[bool, typer.Option("--retune", help="on a confirmed regression, "
                                             "optimize again; promotion waits at its gate")] = False,
        authorize_promote: Annotated[bool, typer.Option(
            "--authorize-promote", help="pre-authorize promoting the re-tune's winner")] = False,
        runs_dir: Annotated[str | None, typer.Option(help="the runs root")] = None,
    ) -> None:
        """Re-measure the accepted configuration on the installed engine build."""
        import os

        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        try:
            request = _request(baseline_run=baseline_run, executable=executable,
                               engine_runtime=engine_runtime, results_store=results_store,
                               index_url=index_url, repeats=repeats,
                               confirm_rounds=confirm_rounds, force=force, retune=retune,
                               authorize=["promote"] if authorize_promote else None)
            _preflight(request, runs_dir)
            from flows.reoptimize import reoptimize as reoptimize_flow
            from infopt.console import check_prefect_api, hide_user_error_traces

            check_prefect_api("the re-measurement")

            hide_user_error_traces()  # the flow's InfoptError is printed as one paragraph

            from infopt.runs.rundir import runs_root

            state = reoptimize_flow(request=request, runs_dir=runs_dir, return_state=True)
            result = _result(state)
        except InfoptError as exc:
            fail(exc)
            return
        typer.echo(result.summary)
        typer.echo(f"report: {runs_root(runs_dir) / result.run_id / 'reoptimize.md'}")
        if result.outcome == "regression":
            raise typer.Exit(1)


def _result(state):
    """The flow's ReoptimizeReport (its run ends Failed on a confirmed regression); an error
    raised inside the flow is raised again here as itself (an InputError: one paragraph)."""
    from infopt.specs.reoptimize import ReoptimizeReport

    data = state.result(raise_on_failure=False)
    if isinstance(data, ReoptimizeReport):
        return data
    if isinstance(data, BaseException):
        raise data
    raise InfoptError(f"the reoptimize flow ended {state.type.value}: {state.message}")
