"""The `infopt` command. Errors a user can fix print one paragraph and exit 2, never a trace.

Prefect is imported only inside commands, after PREFECT_HOME and friends are set, so
`--prefect-home` takes effect and `infopt --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from infopt.specs.base import InfoptError

app = typer.Typer(add_completion=False, no_args_is_help=False, help=(
    "Self-hosted LLM inference optimizer: from a measured baseline to a verified best serving "
    "configuration, with the evidence."))


def _prefect_env(prefect_home: str | None) -> None:
    if prefect_home:
        os.environ["PREFECT_HOME"] = os.path.abspath(os.path.expanduser(prefect_home))
    # Offline by default: no telemetry calls (they fail and warn on a closed network).
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The temporary server can take ~20 s to start on 2 cores (notes/prefect.md).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _fail(exc: InfoptError) -> None:
    typer.secho(f"infopt: {exc}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


@app.callback()
def _main() -> None:
    """infopt: measure, tune and report LLM serving configurations."""


@app.command()
def optimize(
    model: Annotated[str | None, typer.Option(help="GGUF file or HF model directory; default: "
                                              "the bundled SmolLM2-135M-Instruct (make engines)")] = None,
    engine: Annotated[str | None, typer.Option(help="force an engine (llamacpp, vllm) instead "
                                               "of routing")] = None,
    runs_dir: Annotated[str | None, typer.Option(help="where run folders go; default "
                                                 "$INFOPT_RUNS_DIR or ./runs")] = None,
    prefect_home: Annotated[str | None, typer.Option(help="PREFECT_HOME for this run")] = None,
    port: Annotated[int | None, typer.Option(help="engine port on 127.0.0.1; default: a free "
                                             "one")] = None,
    requests: Annotated[int, typer.Option(min=1, help="measured requests per concurrency "
                                          "level")] = 12,
    repeats: Annotated[int, typer.Option(min=1, help="runs per tuning value")] = 3,
    input_tokens: Annotated[int, typer.Option(min=1)] = 128,
    output_tokens: Annotated[int, typer.Option(min=2)] = 64,
    concurrency: Annotated[int, typer.Option(min=1, help="target concurrency")] = 4,
    objective: Annotated[str, typer.Option(help="throughput or latency")] = "throughput",
) -> None:
    """Run the optimize flow (default: this host, the bundled model, a chat workload)."""
    _prefect_env(prefect_home)
    try:
        from infopt.bootstrap import default_paths
        from infopt.engines import adapter_for
        from infopt.engines.process import check_port_free
        from infopt.engines.routing import route, select_available
        from infopt.hardware.host import inventory
        from infopt.model.profile import profile_model
        from infopt.specs.serving import EngineName
        from infopt.specs.workload import Objective, Workload

        try:
            eng = EngineName(engine) if engine else None
            obj = Objective(objective)
        except ValueError as exc:
            raise InfoptError(f"{exc}; engines: {[e.value for e in EngineName]}, objectives: "
                              f"{[o.value for o in Objective]}") from None
        # Pre-flight, before Prefect starts: a bad model, a busy port or a missing engine is
        # reported in one paragraph here instead of as a failed flow run.
        model_path = model or str(default_paths().gguf)
        profile = profile_model(model_path)
        if port is not None:
            check_port_free("127.0.0.1", port)
        select_available(route(inventory(), profile, concurrency), eng,
                         lambda n: adapter_for(n).locate())
        levels = sorted({1, concurrency})
        wl = Workload(input_tokens=input_tokens, output_tokens=output_tokens,
                      concurrency_levels=levels, target_concurrency=concurrency,
                      requests_per_level=requests, objective=obj)
        from flows.optimize import optimize as optimize_flow

        report = optimize_flow(model_path=model_path, workload=wl, runs_dir=runs_dir,
                               engine=eng, repeats=repeats, port=port)
    except InfoptError as exc:
        _fail(exc)
        return
    from infopt.report.rundir import runs_root

    run_dir = runs_root(runs_dir) / report.run_id
    typer.echo(f"\nwinner: {report.winner_command}")
    typer.echo(f"report: {run_dir / 'report.md'}\n        {run_dir / 'report.json'}")


@app.command()
def hardware(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Describe this machine (host CPU/RAM, GPUs)."""
    from infopt.hardware.host import inventory

    hw = inventory()
    if json_out:
        typer.echo(hw.model_dump_json(indent=2))
        return
    h = hw.host
    typer.echo(f"CPU: {h.cpu_model} ({h.architecture}), {h.usable_cpus} usable of "
               f"{h.logical_cpus} logical CPUs; ISA: {', '.join(h.isa_features)}")
    typer.echo(f"RAM: {h.ram_total_bytes / 2**30:.1f} GiB total, "
               f"{h.ram_available_bytes / 2**30:.1f} GiB available; {h.os}, kernel {h.kernel}")
    typer.echo(f"GPUs: {len(hw.gpus)} ({hw.gpu_probe})")
    for g in hw.gpus:
        typer.echo(f"  [{g.index}] {g.name}, {g.memory_total_bytes / 2**30:.1f} GiB, "
                   f"CC {g.compute_capability}")


def main() -> None:  # pragma: no cover - console entry for `python -m infopt.cli`
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
