"""`infopt cluster`: how many replicas of the accepted configuration, behind which router, serve
this traffic within these SLOs (the `cluster` deployment runs the same flow). Exit status: 0 a
report was written, 2 bad input."""

from __future__ import annotations

from typing import Annotated

import typer

from infopt.specs.base import InfoptError


def _slo(text: str):
    """"ttft:p90:0.5" -> an Slo (metric, percentile, max seconds)."""
    from infopt.specs.base import InputError
    from infopt.specs.traffic import Slo

    parts = text.split(":")
    try:
        metric, pct, max_s = parts
        return Slo.model_validate({"metric": metric, "percentile": int(pct.lstrip("p")),
                                   "max_s": float(max_s)})
    except ValueError:
        raise InputError(f"--slo {text!r}: write METRIC:pPERCENTILE:SECONDS, e.g. ttft:p90:0.5 "
                         "(metric ttft, itl, tpot or e2e; percentile 50, 90, 95 or 99)") from None


# The request's fields the command names differently.
_FLAGS = {"routers": "--router", "policies": "--policy", "replica_counts": "--replicas",
          "slos": "--slo", "target_rate_per_s": "--target-rate"}


def _request(**fields):
    from pydantic import ValidationError

    from infopt.specs.base import InputError
    from infopt.specs.cluster import ClusterRequest

    try:
        return ClusterRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        flag = _FLAGS.get(field, "--" + field.replace("_", "-")) if field else "the request"
        raise InputError(f"{flag}: {err['msg'].removeprefix('Value error, ')}") from None


def _preflight(request, runs_dir: str | None) -> None:
    """The accepted run and its SLOs, checked before Prefect starts."""
    from infopt.runs.accepted import accepted, load_optimization
    from infopt.runs.rundir import runs_root
    from infopt.specs.base import InputError

    root = runs_root(runs_dir)
    report, _ = load_optimization(root / (request.baseline_run or accepted(root).run_id))
    if not (request.slos or report.workload.traffic.slos):
        raise InputError("the accepted run's workload states no SLOs: give them with --slo "
                         "METRIC:pPERCENTILE:SECONDS (e.g. --slo ttft:p90:1.0)")


def register(app: typer.Typer, fail) -> None:
    @app.command()
    def cluster(
        slo: Annotated[list[str] | None, typer.Option(
            help="an SLO the boundary is searched for, METRIC:pPERCENTILE:SECONDS (repeat); "
                 "default: the accepted run's")] = None,
        replicas: Annotated[list[int] | None, typer.Option(
            help="replica counts to measure (repeat; 1 is always measured)")] = None,
        router: Annotated[list[str] | None, typer.Option(
            help="vllm-router or sglang-router (repeat; default both)")] = None,
        policy: Annotated[list[str] | None, typer.Option(
            help="round_robin, load_aware, cache_aware, session_hash (repeat; default "
                 "all)")] = None,
        target_rate: Annotated[float | None, typer.Option(
            help="requests/s the capacity plan sizes for")] = None,
        burst_factor: Annotated[float | None, typer.Option(
            help="the plan sizes for the target times this (default 1.5)")] = None,
        probe_requests: Annotated[int | None, typer.Option(
            help="measured requests per boundary probe (default 40)")] = None,
        baseline_run: Annotated[str | None, typer.Option(
            help="the run whose winner is served; default: the accepted run")] = None,
        runs_dir: Annotated[str | None, typer.Option(help="the runs root")] = None,
    ) -> None:
        """Replicas of the accepted configuration behind real routers: the SLO boundary, the
        router table and a capacity plan validated against measured replica counts."""
        import os

        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        try:
            request = _request(slos=[_slo(s) for s in slo] if slo else None,
                               replica_counts=replicas, routers=router, policies=policy,
                               target_rate_per_s=target_rate, burst_factor=burst_factor,
                               probe_requests=probe_requests, baseline_run=baseline_run)
            _preflight(request, runs_dir)
            from flows.cluster import cluster as cluster_flow
            from infopt.console import check_prefect_api, hide_user_error_traces
            from infopt.runs.rundir import runs_root

            check_prefect_api("the cluster measurement")
            hide_user_error_traces()
            state = cluster_flow(request=request, runs_dir=runs_dir, return_state=True)
            report = state.result(raise_on_failure=False)
            if isinstance(report, BaseException):
                raise report
        except InfoptError as exc:
            fail(exc)
            return
        plan = report.plan
        if plan is not None and plan.replicas is not None:
            typer.echo(f"capacity plan (estimate): {plan.replicas} replica(s) for "
                       f"{plan.peak_rate_per_s:.3g} requests/s")
        typer.echo(f"report: {runs_root(runs_dir) / report.run_id / 'cluster.md'}")
