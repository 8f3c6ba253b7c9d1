"""The `infopt` command. Errors a user can fix print one paragraph and exit 2, never a trace.

Prefect is imported only inside commands, after PREFECT_HOME and friends are set, so
`--prefect-home` takes effect and `infopt --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, cast

import typer
from pydantic import BaseModel
from typer.core import TyperGroup

from infopt.specs.base import InfoptError, InputError, http_url
from infopt.specs.request import MAX_SEQUENCE_TOKENS, Budgets, OptimizeRequest
from infopt.specs.traffic import TrafficSpec

if TYPE_CHECKING:
    from rich.progress import TaskID

    from infopt.specs.serving import EngineName


# Exit statuses: 2 bad input (one paragraph, nothing run or written half); 3 the run completed
# and no configuration meets the SLOs at the target load (its report says which binds).
SLOS_NOT_MET = 3


def _fail(exc: InfoptError) -> None:
    typer.secho(f"infopt: {exc}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


def _allowed(lo: float | None, hi: float | None) -> str:
    """'; allowed: 1 to 20' (or 'at least 1', 'at most 20'); '' for an unbounded value."""
    if lo is not None and hi is not None:
        return f"; allowed: {lo} to {hi}"
    return (f"; allowed: at least {lo}" if lo is not None else
            f"; allowed: at most {hi}" if hi is not None else "")


def _bounds(model: type[BaseModel], field: str) -> dict[str, float]:
    """Typer's min/max for an option from the model field it sets (its ge/le): the option
    refuses, under its own name, exactly what the request would, from one source of bounds."""
    out = {}
    for rule in model.model_fields[field].metadata:
        if getattr(rule, "ge", None) is not None:
            out["min"] = rule.ge
        if getattr(rule, "le", None) is not None:
            out["max"] = rule.le
    return out


class _OneParagraph(TyperGroup):
    """Typer's own refusals of an option value (not a number, outside its min/max, a missing
    option) in the same one-paragraph form and exit status as infopt's, instead of a usage
    box: every bad input reads alike. Typos of option names keep Typer's suggestions."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            cause = exc.__cause__  # Typer converts values with pydantic: its error says why
            if exc.param is None or not hasattr(cause, "errors"):
                _fail(InputError(exc.format_message()))
            err, p = cause.errors()[0], exc.param
            _fail(InputError(f"{p.opts[0]}: {err['msg']} (got {err['input']})"
                             + _allowed(getattr(p, "min", None), getattr(p, "max", None))))


def _flags_show_no_type() -> None:
    """Typer 0.2x prints every option's type in --help, flags included (`--json <bool>`): a
    flag takes no value, so it shows none (the other options keep `<int>`, `<str>`)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "infopt_flags", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich.infopt_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_type()
app = typer.Typer(cls=_OneParagraph, add_completion=False, no_args_is_help=False, help=(
    "Self-hosted LLM inference optimizer: from a measured baseline to a verified best serving "
    "configuration, with the evidence."))


def _prefect_env(prefect_home: str | None) -> None:
    if prefect_home:
        os.environ["PREFECT_HOME"] = os.path.abspath(os.path.expanduser(prefect_home))
    # Offline by default: no telemetry calls (they fail and warn on a closed network).
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The temporary server can take ~20 s to start on 2 cores (notes/prefect.md).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


@app.callback()
def _main() -> None:
    """infopt: measure, tune and report LLM serving configurations."""
    from infopt.engines.registry import reap_stale

    # An optimizer killed with SIGKILL could not stop its engine: end it now, before anything
    # else competes with it for the machine.
    for entry in reap_stale():
        typer.secho(f"infopt: ended engine process group {entry.pgid} left running by a killed "
                    f"optimizer (pid {entry.owner_pid}): {entry.command[:100]}", err=True,
                    fg=typer.colors.YELLOW)


def _fixed(tokens: int | None) -> dict | None:
    return None if tokens is None else {"kind": "fixed", "tokens": tokens}


def _scenario_names(value: str | None) -> list[str] | None:
    """--scenarios as the request's list ('none' -> []). The request refuses unknown names too;
    this names the flag the user typed."""
    if value is None:
        return None
    if value.strip() in ("", "none"):
        return []
    from infopt.specs.scenarios import ScenarioName

    names, known = [x.strip() for x in value.split(",")], [n.value for n in ScenarioName]
    if unknown := [n for n in names if n not in ("all", *known)]:
        raise InputError(f"--scenarios {value!r}: unknown scenario(s) {unknown}; give 'all', "
                         f"'none' or a comma list of {', '.join(known)}")
    return names


# The model a command is about is its first argument (`infopt inspect MODEL`, `infopt plan
# MODEL`); `--model MODEL` says the same on every such command, so a spelling learnt on one works
# on the others. (`infopt verify --model` is another concept: the name a server serves under.)
MODEL_HELP = "hub id ORG/NAME, a local HF directory or a GGUF"
MODEL_OPTION_HELP = "the same as the MODEL argument, as an option"


def _model_once(positional: str | None, option: str | None, command: str) -> str | None:
    """The model given as the argument or as --model (at most once), or InputError."""
    if positional is not None and option is not None and positional != option:
        raise InputError(f"the model is given twice ({positional!r} and --model {option!r}); "
                         f"give it once, as `infopt {command} MODEL`")
    return positional if positional is not None else option


def _one_model(positional: str | None, option: str | None, command: str) -> str:
    """The model given as the argument or as --model (once), or InputError saying how."""
    model = _model_once(positional, option, command)
    if model is None:  # an empty one is the reader's to refuse, with its own words
        raise InputError(f"no model given to `infopt {command}`; name it as the first argument, "
                         f"e.g. `infopt {command} Qwen/Qwen3-8B` (or --model Qwen/Qwen3-8B): "
                         f"{MODEL_HELP}")
    return model


def _set(tree: dict, dotted: str, value) -> None:
    """tree[a][b] = value for 'a.b', creating the mappings on the way."""
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = tree.get(p)
        tree[p] = node = dict(node) if isinstance(node, dict) else {}
        tree = node
    tree[leaf] = value


def _request_data(target: str | None, resume: str | None, runs_dir: str | None) -> tuple[dict, str]:
    """The request fields before CLI overrides: a target file, a resumed run's request, or
    nothing (every default: the demo)."""
    from infopt.runs.rundir import runs_root
    from infopt.specs.request_file import read_request_data

    # An empty value is a mistake, not "no value": it must not start the demo instead.
    if target is not None and not target.strip():
        raise InputError("--target '': empty; give a YAML target file (see examples/targets/), "
                         "or leave the option out for the demo")
    if resume is not None and not resume.strip():
        raise InputError("--resume '': empty; give the run id a run printed (its folder under "
                         "--runs-dir), or leave the option out to start a new run")
    if resume:
        saved = runs_root(runs_dir) / resume / "request.json"
        if not saved.is_file():
            raise InfoptError(f"no run '{resume}' to resume: {saved} does not exist. Give the "
                              "run id printed by the run (its folder under --runs-dir).")
        import json

        return (read_request_data(target) if target else json.loads(saved.read_text()),
                target or str(saved))
    return (read_request_data(target), target) if target else ({}, "command line")


@app.command()
def optimize(
    model_arg: Annotated[str | None, typer.Argument(
        metavar="MODEL", show_default=False, help="the same as --model")] = None,
    target: Annotated[str | None, typer.Option(help="YAML target file (an OptimizeRequest; "
                                               "see examples/targets/); flags override it")] = None,
    resume: Annotated[str | None, typer.Option(help="a run id: finish that run, re-running no "
                                               "completed trial")] = None,
    model: Annotated[str | None, typer.Option(help="GGUF file or HF model directory; default: "
                                              "the bundled SmolLM2-135M-Instruct (make engines)")] = None,
    engine: Annotated[str | None, typer.Option(help="allow only this engine (llamacpp, vllm) "
                                               "instead of the routed order")] = None,
    runs_dir: Annotated[str | None, typer.Option(help="where run folders go; default "
                                                 "$INFOPT_RUNS_DIR or ./runs")] = None,
    results_store: Annotated[str | None, typer.Option(
        help="a ResultsStore block's name: every trial and report is also written there, and "
             "--resume restores the run from it first (so it resumes on another machine)")
    ] = None,
    prefect_home: Annotated[str | None, typer.Option(help="PREFECT_HOME for this run")] = None,
    port: Annotated[int | None, typer.Option(**_bounds(OptimizeRequest, "port"),
                                             help="a fixed engine port on 127.0.0.1; default: "
                                             "a free one")] = None,
    requests: Annotated[int | None, typer.Option(**_bounds(TrafficSpec, "measured_requests"),
                                                 help="measured requests per scenario of the "
                                                 "workload (workload.measured_requests)")] = None,
    repeats: Annotated[int | None, typer.Option(**_bounds(Budgets, "repeats"),
                                                help="runs per candidate (default 3)")] = None,
    input_tokens: Annotated[int | None, typer.Option(min=1, max=MAX_SEQUENCE_TOKENS,
                                                     help="fixed prompt length, tokens "
                                                     "(default 128)")] = None,
    output_tokens: Annotated[int | None, typer.Option(min=1, max=MAX_SEQUENCE_TOKENS,
                                                      help="fixed, forced output length, "
                                                      "tokens (default 64)")] = None,
    concurrency: Annotated[int | None, typer.Option(
        **_bounds(TrafficSpec, "peak_active_generations"),
        help="peak active generations: the target load, measured beside a single stream "
             "(default 1)")] = None,
    objective: Annotated[str | None, typer.Option(help="goodput (needs workload.slos), "
                                                  "throughput or latency; default: goodput "
                                                  "with SLOs, else latency for one user, else "
                                                  "throughput")] = None,
    api_route: Annotated[str | None, typer.Option(
        "--route", help="API route the tuning levels use: chat_completions, completions, "
                        "responses, anthropic_messages")] = None,
    scenarios: Annotated[str | None, typer.Option(help="measure the winner on the standard "
                                                  "scenarios: 'all', 'none', or a comma list "
                                                  "of short, medium, full-context, "
                                                  "single-stream, target-concurrency")] = None,
    scenario_requests: Annotated[int | None, typer.Option(
        **_bounds(OptimizeRequest, "scenario_requests"),
        help="measured requests per scenario (default 4)")] = None,
    authorize: Annotated[str | None, typer.Option(help="pre-authorize side effects, a comma "
                                                  "list of download, quantize, expose "
                                                  "(recorded as such in the report); the "
                                                  "others wait at their gates")] = None,
    credentials_block: Annotated[str | None, typer.Option(
        help="an InfoptCredentials block's name: the Hugging Face and GitHub tokens the run "
             "uses (default: $HF_TOKEN, $GITHUB_TOKEN)")] = None,
    dimensions: Annotated[str | None, typer.Option(help="the tuning ladder's dimensions to "
                                                   "climb, a comma list of weights, "
                                                   "kv_precision, scheduling, prefill, "
                                                   "compilation, prefix_caching, "
                                                   "parallel_layout, speculative (default: "
                                                   "all, in that order)")] = None,
    on_no_fit: Annotated[str | None, typer.Option(
        help="when nothing fits: ask (a decision gate with the computed alternatives, the "
             "default), stop, or take a change ahead: context, kv_precision, concurrency")
    ] = None,
) -> None:
    """Run the optimize flow (default: this host, the bundled model, a chat workload)."""
    _prefect_env(prefect_home)
    try:
        model = _model_once(model_arg, model, "optimize")
        from infopt.bootstrap import default_paths
        from infopt.engines.process import check_port_free
        from infopt.hardware.host import inventory
        from infopt.model.drafters import check_draft_models
        from infopt.model.profile import profile_model
        from infopt.runs.rundir import runs_root
        from infopt.specs.request_file import parse_request
        from infopt.specs.traffic import RouteName
        from infopt.specs.workload import check_fits_context

        _writable_dir(runs_root(runs_dir), "--runs-dir" if runs_dir else
                      "the runs folder ($INFOPT_RUNS_DIR or ./runs)")
        if resume and results_store:  # the run folder may exist only in the store
            from blocks.named import restore_run

            restore_run(results_store, runs_root(runs_dir) / resume)
        data, source = _request_data(target, resume, runs_dir)
        if "workload" not in data:  # flags below adjust the default workload, not replace it
            from infopt.specs.workload import interactive_traffic

            data["workload"] = interactive_traffic().model_dump(mode="json")
        for dotted, value in (
                # `is not None`: an empty --engine or --route is refused by name, not ignored.
                ("model.path", model), ("engines", None if engine is None else [engine]),
                ("port", port), ("workload.measured_requests", requests),
                ("budgets.repeats", repeats), ("objective", objective),
                ("workload.input_lengths", _fixed(input_tokens)),
                ("workload.output_lengths", _fixed(output_tokens)),
                ("workload.routes", None if api_route is None else [{"route": api_route}]),
                ("scenario_requests", scenario_requests),
                ("credentials_block", credentials_block),
                ("authorize", None if authorize is None else
                 [x.strip() for x in authorize.split(",") if x.strip()]),
                ("dimensions", None if dimensions is None else
                 [x.strip() for x in dimensions.split(",") if x.strip()]),
                ("scenarios", _scenario_names(scenarios)), ("on_no_fit", on_no_fit)):
            if value is not None:
                _set(data, dotted, value)
        if concurrency is not None:  # the target load, and the single stream beside it
            _set(data, "workload.peak_active_generations", concurrency)
            _set(data, "workload.arrival", {"kind": "closed_loop", "concurrency": 1}
                 if concurrency == 1 else {"kind": "sweep", "over": "concurrency",
                                           "values": sorted({1, concurrency})})
        if api_route in {r.value for r in RouteName}:  # a bad name is reported once, below
            _set(data, "api.routes", [api_route])
        request = parse_request(data, source)
        if (asks := request.unauthorized_gates()) and not os.environ.get("PREFECT_API_URL"):
            raise InfoptError(
                f"this run stops at {' and '.join(asks)} gate(s) for a person's answer, but "
                "PREFECT_API_URL is not set, so it would run on a temporary Prefect server that "
                "no UI or other terminal can reach: start one (`prefect server start`, then "
                "export PREFECT_API_URL=http://127.0.0.1:4200/api) and answer in its UI or with "
                f"`infopt approve`, or pre-authorize with --authorize {','.join(asks)}")
        # Pre-flight, before Prefect starts: a bad model, a busy port or a missing engine is
        # reported in one paragraph here instead of as a failed flow run.
        from infopt.console import check_prefect_api

        check_prefect_api("the run")
        if request.port is not None:
            check_port_free("127.0.0.1", request.port)
        if request.credentials_block:  # a missing block: one paragraph now, not mid-run
            from blocks.credentials import load_credentials

            load_credentials(request.credentials_block)
        if results_store and not resume:  # (a resumed run was restored from it above)
            from blocks.named import load_results_store

            load_results_store(results_store)
        # The hardware, measured once for the run (bandwidth, GEMM rate): the flow reuses it.
        hw = inventory()
        if not request.model.download:  # a model still to download is checked once it is here
            profile = profile_model(request.model.path or str(default_paths().gguf))
            # Before the run folder: a prompt longer than the model's context would be
            # clipped to fit, a workload other than the one asked for.
            check_fits_context(request.workload, context_tokens=profile.native_context_tokens,
                               what=profile.name)
            check_draft_models(request.model.draft_models, profile)
            _preflight_plan(request, hw, profile)
        from flows.optimize import optimize as optimize_flow
        from infopt.console import hide_user_error_traces

        hide_user_error_traces()  # the flow's InfoptError is printed below, as one paragraph
        report = optimize_flow(request=request, run_id=resume, runs_dir=runs_dir,
                               results_store=results_store, hardware=hw)
    except InfoptError as exc:
        _fail(exc)
        return
    from infopt.runs.rundir import runs_root

    run_dir = runs_root(runs_dir) / report.run_id
    gain = report.gain_vs_control
    if gain is not None and gain.ratio is not None:
        typer.echo(f"\nagainst the engine's defaults: {gain.ratio:.2f}x {gain.objective} "
                   f"({gain.note})")
    typer.echo(f"\nwinner: {report.winner_command}")
    typer.echo(f"report: {run_dir / 'report.md'}\n        {run_dir / 'report.json'}")
    typer.echo(f"run id: {report.run_id} (infopt optimize --resume {report.run_id})")
    if report.slos is not None and not report.slos.met:
        typer.secho(f"infopt: no configuration meets the SLOs at the target load: "
                    f"{report.slos.binding}. The report leads with the loads that were measured "
                    "and the smallest viable alternatives.", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=SLOS_NOT_MET)


def _preflight_plan(request, hw, profile):
    """The run's plan as the flow will make it (infopt.tuning.plan_run, the same engines and
    the same rule for finding them), so a bad path among the other formats, an override no
    planned engine has, or a missing engine is one paragraph here and not a failed flow run;
    then the routed engine's own version report: an executable that hangs or is not the
    engine is reported now, not as a quiet switch to another engine mid-run."""
    from infopt.engines import adapter_for
    from infopt.model.profile import profile_model
    from infopt.tuning.plan_run import host_locate, other_formats, plan_run

    others = other_formats(request, profile, profile_model)
    plan = plan_run(request, hw, profile, others, request.tuning_workload())
    if not plan.viable:
        _asks_without_server(request, plan, lambda r: plan_run(r, hw, profile, others,
                                                               r.tuning_workload()))
    routed = plan.engines[0]
    adapter_for(routed).detect_version(host_locate(hw)(routed.value))
    return plan


def _asks_without_server(request, plan, replan) -> None:
    """Nothing fits and the run would ask which constraint may change: that needs a server
    another terminal or the UI can reach (the gates' rule, checked before anything starts)."""
    from infopt.tuning.nofit import binding, smallest_gap
    from infopt.tuning.nofit_choices import nofit_choices, pre_decided

    if os.environ.get("PREFECT_API_URL"):
        return
    choices = nofit_choices(request, list(plan.fits), replan)
    if pre_decided(request.on_no_fit, choices)[0] is not None:
        return  # decided ahead, or nothing to ask: no gate
    raise InfoptError(
        f"nothing fits ({binding(smallest_gap(list(plan.fits)))}), and the run would stop at a "
        "decision gate to ask which constraint may change, but PREFECT_API_URL is not set, so "
        "no UI or other terminal could answer it: start a server (`prefect server start`, "
        "then export PREFECT_API_URL=http://127.0.0.1:4200/api), or decide ahead with "
        "--on-no-fit and one of: " + "; ".join(f"{c.kind.value} ({c.title})" for c in choices
                                                if c.resumes) + "; or stop")


@app.command()
def hardware(json_out: Annotated[bool, typer.Option("--json")] = False,
             measure: Annotated[bool, typer.Option(help="measure host memory bandwidth "
                                                   "(~2 s)")] = True) -> None:
    """Describe this machine: host CPU/RAM/disk, measured bandwidth, GPUs (NVML)."""
    from infopt.hardware.host import inventory
    from infopt.report.hardware_text import render_hardware

    hw = inventory(measure_bandwidth=measure)
    typer.echo(hw.model_dump_json(indent=2) if json_out else render_hardware(hw))


def _hub_token(credentials_block: str | None) -> str | None:
    """HF token from a saved InfoptCredentials block when named, else $HF_TOKEN. Never printed."""
    if credentials_block:
        _prefect_env(None)
        from blocks.credentials import hf_token

        return hf_token(credentials_block)
    from infopt.model.hub import resolve_token

    return resolve_token()


@app.command()
def inspect(
    model: Annotated[str | None, typer.Argument(help=MODEL_HELP, metavar="MODEL",
                                                show_default=False)] = None,
    model_option: Annotated[str | None, typer.Option("--model", help=MODEL_OPTION_HELP)] = None,
    revision: Annotated[str | None, typer.Option(help="branch, tag or commit (hub only)")] = None,
    endpoint: Annotated[str | None, typer.Option(help="hub URL; default $HF_ENDPOINT or "
                                                 "huggingface.co")] = None,
    credentials_block: Annotated[str | None, typer.Option(help="InfoptCredentials block "
                                                          "holding the HF token")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Classify a model from its configuration: attention, layer kinds, MoE, parameters, KV."""
    import json

    from infopt.report.model_text import render_inspection

    try:
        model = _one_model(model, model_option, "inspect")
        from infopt.engines.plan_request import is_local

        if is_local(model):
            from infopt.model.local import inspect_local

            if revision:
                raise InfoptError("--revision applies to hub models only; a local path is "
                                  "already one exact revision")
            insp, facts = inspect_local(model), None
        else:
            from infopt.model.hub import default_cache_dir, fetch_model_facts, to_inspection

            facts = fetch_model_facts(model, cache_dir=default_cache_dir(), revision=revision,
                                      endpoint=endpoint, token=_hub_token(credentials_block))
            insp = to_inspection(facts)
    except InfoptError as exc:
        _fail(exc)
        return
    if json_out:
        typer.echo(json.dumps(insp.model_dump(mode="json"), indent=2))
        return
    typer.echo(render_inspection(insp))
    if facts is not None:
        typer.echo(f"Hub: {facts.endpoint}, commit {facts.commit_sha}, "
                   f"{len(facts.files)} files" + (f", base {', '.join(facts.base_models)}"
                                                  if facts.base_models else ""))


@app.command()
def shortlist(
    model: Annotated[str | None, typer.Argument(help="the exact base model, hub id ORG/NAME",
                                                metavar="MODEL", show_default=False)] = None,
    model_option: Annotated[str | None, typer.Option("--model", help=MODEL_OPTION_HELP)] = None,
    revision: Annotated[str | None, typer.Option()] = None,
    endpoint: Annotated[str | None, typer.Option()] = None,
    max_bits: Annotated[int, typer.Option(min=2, max=16, help="widest weight precision "
                                          "searched (default 4, per the specification)")] = 4,
    device: Annotated[str | None, typer.Option(help="cuda:CC (e.g. cuda:9.0), cpu or metal; "
                                               "default: this machine")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=4096, help="peak active generations: "
                                             "ties go to the engine routed first for it")] = 1,
    credentials_block: Annotated[str | None, typer.Option()] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Find quantized variants of MODEL on the hub, verified from their metadata, and rank them."""
    from infopt.engines.routing import engine_order_for
    from infopt.model.hub import default_cache_dir
    from infopt.model.shortlist import build_shortlist, device_from_inventory
    from infopt.report.model_text import render_shortlist

    try:
        model = _one_model(model, model_option, "shortlist")
        target = _device_target(device)
        if target is None:
            from infopt.hardware.host import inventory

            target = device_from_inventory(inventory(measure_bandwidth=False))
        result = build_shortlist(model, device=target, cache_dir=default_cache_dir(),
                                 revision=revision, endpoint=endpoint,
                                 token=_hub_token(credentials_block), max_weight_bits=max_bits,
                                 engine_order=engine_order_for(target, concurrency))
    except InfoptError as exc:
        _fail(exc)
        return
    typer.echo(result.model_dump_json(indent=2) if json_out else render_shortlist(result))


def _load_model(model: str, revision: str | None, endpoint: str | None,
                credentials_block: str | None):
    """(ModelInspection, exact weight bytes or None) from a local path or the hub."""
    from infopt.engines.plan_request import is_local, load_model

    return load_model(model, revision, endpoint,
                      None if is_local(model) else _hub_token(credentials_block))


@app.command()
def plan(
    model: Annotated[str | None, typer.Argument(help=MODEL_HELP, metavar="MODEL",
                                                show_default=False)] = None,
    model_option: Annotated[str | None, typer.Option("--model", help=MODEL_OPTION_HELP)] = None,
    gpu: Annotated[str | None, typer.Option(help="catalog GPU name or alias (e.g. 'H100 SXM'); "
                                            "default: the detected hardware")] = None,
    gpu_count: Annotated[int | None, typer.Option(help="GPUs available (default: detected, "
                                                  "or tp x pp)")] = None,
    engine: Annotated[str | None, typer.Option(help="vllm, sglang, trtllm, llamacpp")] = None,
    context: Annotated[int | None, typer.Option(help="tokens per sequence; default: the "
                                                "model's native context")] = None,
    concurrency: Annotated[int, typer.Option(help="simultaneous active sequences")] = 1,
    kv_dtype: Annotated[str, typer.Option(help="auto, fp8, f16, q8_0, ...")] = "auto",
    weight_dtype: Annotated[str | None, typer.Option(help="bf16, fp8, int4, nvfp4, mxfp4 or a "
                                                     "GGUF type; default: the checkpoint's")] = None,
    tp: Annotated[int, typer.Option()] = 1,
    pp: Annotated[int, typer.Option()] = 1,
    gpu_memory_utilization: Annotated[float, typer.Option(min=0.05, max=1.0)] = 0.9,
    mem_fraction_static: Annotated[float | None, typer.Option(
        min=0.05, max=1.0, help="SGLang's static share; default: SGLang's own for the GPU")] = None,
    spec_tokens_per_step: Annotated[float, typer.Option(
        min=1.0, help="speculative decoding: expected verified tokens per step (1 = off)")] = 1.0,
    input_tokens: Annotated[int | None, typer.Option(
        help="prompt tokens per request (default: --workload's mean, else 1,024 assumed); "
             "given, the ceilings and estimates read KV at prompt + half the output")] = None,
    output_tokens: Annotated[int | None, typer.Option(
        help="output tokens per request (default: --workload's mean, else 256 assumed)")] = None,
    workload: Annotated[str | None, typer.Option(
        help="a workload file: its mean prompt and output lengths, at which the ceilings and "
             "estimates are read (the fit stays at --context)")] = None,
    revision: Annotated[str | None, typer.Option()] = None,
    endpoint: Annotated[str | None, typer.Option()] = None,
    credentials_block: Annotated[str | None, typer.Option()] = None,
    inventory: Annotated[str | None, typer.Option(
        help="an `infopt hardware --json` file recorded on the target machine: its GPUs and "
             "their topology instead of this host's")] = None,
    layouts: Annotated[bool, typer.Option(
        "--layouts", help="the parallel-layout experiment matrix (TP, PP, DP, EP) over the "
                          "GPUs, each fitted with its ceilings and command")] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Memory fit at full context x concurrency, and roofline ceilings and attainable
    estimates at the workload's lengths (the full context when none are given), without
    launching."""
    from pydantic import ValidationError

    from infopt.costmodel.plan import make_plan
    from infopt.engines.plan_request import fit_request
    from infopt.report.plan_text import render_plan
    from infopt.specs.plan_request import PlanRequest

    try:
        model = _one_model(model, model_option, "plan")
        try:
            p = PlanRequest(model=model, revision=revision, endpoint=endpoint, gpu=gpu,
                            gpu_count=gpu_count,
                            engine=cast("EngineName | None", engine),  # pydantic checks the name
                            context_tokens=context,
                            concurrency=concurrency, kv_dtype=kv_dtype,
                            weight_dtype=weight_dtype, tp=tp, pp=pp,
                            gpu_memory_utilization=gpu_memory_utilization,
                            mem_fraction_static=mem_fraction_static,
                            spec_tokens_per_step=spec_tokens_per_step,
                            input_tokens=input_tokens, output_tokens=output_tokens)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0])
            b = _bounds(PlanRequest, field)
            raise InputError(f"--{field.replace('_tokens', '').replace('_', '-')}: "
                             f"{first['msg']} (got {first['input']!r})"
                             + _allowed(b.get("min"), b.get("max"))) from None
        # The local files first: a bad path is named before the hub is asked for the model.
        prompt, output = p.input_tokens, p.output_tokens
        lengths_from = "requests as given"
        if workload is not None and not (prompt and output):
            from infopt.loadgen.schedule import mean_lengths
            from infopt.specs.traffic_file import load_traffic

            mean_in, mean_out = mean_lengths(load_traffic(workload))
            prompt, output = prompt or mean_in, output or mean_out
            lengths_from = f"{workload}'s mean lengths (20,000 draws with its seed)"
        hw = _inventory_file(inventory) if inventory else None
        insp, exact = _load_model(model, revision, endpoint, credentials_block)
        if gpu is None and hw is None:
            from infopt.hardware.host import inventory as host_inventory

            hw = host_inventory()  # measures host bandwidth and GEMM rate (~3 s)
        req = fit_request(p, insp, exact, hw)
        if layouts:
            from infopt.costmodel.plan import decode_context, request_lengths
            from infopt.engines.config_layout import matrix_for
            from infopt.report.layout_text import render_layouts

            lengths = request_lengths(req.context_tokens, prompt, output, lengths_from)
            matrix = matrix_for(req, model, hw, decode_context(req.context_tokens, lengths)[0])
            typer.echo(matrix.model_dump_json(indent=2) if json_out else render_layouts(matrix))
            return
        result = make_plan(req, prompt_tokens=prompt, tokens_per_step=spec_tokens_per_step,
                           output_tokens=output, lengths_from=lengths_from)
    except InfoptError as exc:
        _fail(exc)
        return
    typer.echo(result.model_dump_json(indent=2) if json_out else render_plan(result))


def _inventory_file(path: str):
    """A recorded HardwareInventory (`infopt hardware --json`), read where it is given."""
    from pathlib import Path

    from pydantic import ValidationError

    from infopt.specs.hardware import HardwareInventory

    try:
        return HardwareInventory.model_validate_json(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"--inventory {path}: cannot read it ({exc.strerror}). Give the file "
                         "`infopt hardware --json > FILE` wrote on the target machine.") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"--inventory {path} is not an `infopt hardware --json` inventory: "
                         f"{'.'.join(map(str, first['loc'])) or 'the file'}: {first['msg']}. "
                         "Record it with `infopt hardware --json > FILE` on the target "
                         "machine.") from None


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="the run id `infopt optimize` printed, or the "
                                          "run's folder (runs/<id>)")],
    runs_dir: Annotated[str | None, typer.Option(help="where runs are kept (default "
                                                 "$INFOPT_RUNS_DIR or ./runs)")] = None,
) -> None:
    """Re-render report.md and its pictures from a finished run's report.json (no engine), and
    its Prefect artifacts when a Prefect API is configured."""
    from infopt.report.rerender import rerender

    try:
        md, rendered, text = rerender(run_id, runs_dir)
    except InfoptError as exc:
        _fail(exc)
    typer.echo(md)
    api = os.environ.get("PREFECT_API_URL")
    if not api:  # an ephemeral server's artifacts would vanish with it
        typer.echo("Prefect artifacts: not published (PREFECT_API_URL is not set)")
        return
    from tasks.report import publish_artifacts

    publish_artifacts(rendered, text, md.parent)
    plots = getattr(rendered, "plots", [])
    typer.echo(f"Prefect artifacts: infopt-report, infopt-trials and {len(plots)} "
               f"plot link(s) published to {api}")


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="the earlier run (A): its id or its folder")],
    run_b: Annotated[str, typer.Argument(help="the later run (B), on the same workload")],
    runs_dir: Annotated[str | None, typer.Option(help="where runs are kept (default "
                                                 "$INFOPT_RUNS_DIR or ./runs)")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Two finished runs side by side: winner and control, per metric, B - A with intervals."""
    from infopt.report.compare_runs import compare_runs, render_comparison

    try:
        rc = compare_runs(run_a, run_b, runs_dir)
    except InfoptError as exc:
        _fail(exc)
        return
    typer.echo(rc.model_dump_json(indent=2) if json_out else render_comparison(rc))


@app.command()
def diagnose(
    logfile: Annotated[str, typer.Argument(help="an engine log (e.g. runs/<id>/trials/<t>/engine.log)")],
    engine: Annotated[str, typer.Option(help="vllm, sglang, trtllm, llamacpp, mlx")] = "unknown",
    search: Annotated[bool, typer.Option(help="search upstream GitHub issues")] = True,
    github_url: Annotated[str | None, typer.Option(help="GitHub API base URL; default "
                                                   "$INFOPT_GITHUB_API or api.github.com")] = None,
    github_token_to_url: Annotated[bool, typer.Option(
        help="send the GitHub token to --github-url too (a GitHub Enterprise host you trust); "
             "without it the token goes to api.github.com only")] = False,
    credentials_block: Annotated[str | None, typer.Option()] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Find the root error of a failed engine start, known failures and upstream issues."""
    from infopt.report.diagnosis_text import render_diagnosis
    from infopt.troubleshoot.diagnose import diagnose_file
    from infopt.troubleshoot.github import github_token

    try:
        from infopt.engines import ENGINES

        if engine != "unknown" and engine not in ENGINES:  # read as data: no silent default
            known = ", ".join(sorted(e.value for e in ENGINES))
            raise InputError(f"--engine {engine!r} is not an engine infopt knows; choose one of "
                             f"{known}, or leave it out to diagnose the log by its content "
                             "alone")
        if github_url is not None:
            try:
                http_url(github_url)
            except ValueError as exc:
                raise InputError(f"--github-url: {exc}") from None
        token = github_token()
        if credentials_block:  # a missing block is one paragraph (InputError), not a trace
            _prefect_env(None)
            from blocks.credentials import github_token as block_token

            token = block_token(credentials_block)
        d = diagnose_file(logfile, engine, search=search, github_url=github_url,
                          github_token=token, github_token_to_url=github_token_to_url,
                          log=_stderr_logger() if search else None)
    except InfoptError as exc:
        _fail(exc)
        return
    typer.echo(d.model_dump_json(indent=2) if json_out else render_diagnosis(d))


def _stderr_logger():
    """A logger whose INFO lines reach the terminal: what leaves the machine is said there."""
    import logging

    log = logging.getLogger("infopt.cli")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("infopt: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def _endpoint(endpoint: str, model: str, engine: str | None):
    """--endpoint/--model/--engine as an Endpoint, checked where they are read (a URL that is
    not one, an empty name). A named engine brings its wire facts (forced-length fields,
    per-chunk counts, keep-alive, tokenize route); an unnamed server gets the generic ones."""
    from urllib.parse import urlsplit

    from infopt.specs.endpoint import Endpoint

    url = urlsplit(endpoint)
    try:
        ok = url.scheme in ("http", "https") and bool(url.hostname) and url.port != 0
    except ValueError:  # urllib's answer to a port outside 0-65535
        ok = False
    if not ok:
        raise InputError(f"--endpoint {endpoint!r} is not an http(s) URL with a host and a "
                         "valid port; give the server's base URL, e.g. http://127.0.0.1:8000")
    if not model.strip():
        raise InputError("--model '': empty; give the name the server serves the model under "
                         "(its GET /v1/models lists it)")
    if engine is not None:  # an empty name is refused by endpoint_for, not taken as generic
        from infopt.engines import endpoint_for

        return endpoint_for(engine, endpoint, model)
    return Endpoint(base_url=endpoint, model=model)


@app.command()
def verify(
    endpoint: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible server")],
    model: Annotated[str | None, typer.Option(help="the served model name; default: the one "
                                              "the server lists, when it lists one")] = None,
    require: Annotated[str | None, typer.Option(help="comma list of features that must pass "
                                                "(beyond models, whole, stream, "
                                                "include_usage), e.g. tools_required,"
                                                "json_schema,responses_stream,"
                                                "messages_count_tokens; all: see --json")] = None,
    engine: Annotated[str | None, typer.Option(help="the engine behind the endpoint, for its "
                                               "forced-length fields (default: generic)")] = None,
    evidence: Annotated[str | None, typer.Option(help="folder for each check's request and "
                                                 "response excerpt")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="environment variable holding the "
                                                    "API key (never printed)")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Probe an endpoint's API contract (Chat Completions with tools and structured output,
    Responses, Anthropic Messages, auth and error shapes) through the official openai and
    anthropic SDKs; exit 1 when a required check does not pass."""
    import json
    from pathlib import Path

    from infopt.contract.verify import only_served_model, verify_endpoint

    try:
        key = _api_key(api_key_env)
        if model is None:
            _endpoint(endpoint, "-", engine)  # the URL and engine checked before it is asked
            model = only_served_model(endpoint, key)
        required = tuple(x.strip() for x in require.split(",") if x.strip()) if require else ()
        checks = verify_endpoint(_endpoint(endpoint, model, engine), required=required,
                             api_key=key, evidence_dir=Path(evidence) if evidence else None)
    except InfoptError as exc:
        _fail(exc)
        return
    if json_out:
        typer.echo(json.dumps([c.model_dump(mode="json") for c in checks], indent=2))
    else:
        for c in checks:
            typer.echo(f"{c.route:22} {c.feature:28} {c.shown:15}"
                       f"{'required ' if c.required else '         '}{c.detail}")
    if broken := [c.feature for c in checks if c.required and not c.ok]:
        typer.echo(f"required check(s) not passed: {', '.join(broken)}", err=True)
        raise typer.Exit(1)


def _api_key(env_name: str | None) -> str | None:
    if not env_name:
        return None
    if not (key := os.environ.get(env_name)):
        raise InfoptError(f"--api-key-env {env_name}: that environment variable is not set; "
                          "export it or leave the option out")
    return key


def _writable_dir(path: str | os.PathLike, option: str):
    """A folder the command will create or write into, checked before any long work and left
    as it was: an empty folder is made and removed where the path's first missing part would
    go (os.access says yes to root everywhere, even under /proc)."""
    import tempfile
    from pathlib import Path

    p = Path(path).expanduser().absolute()
    existing = next(a for a in (p, *p.parents) if a.exists())
    try:
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot write there ({existing}: "
                         f"{exc.strerror or exc}); give a folder you can write to") from None
    return p


def _writable_file(path: str | None, option: str):
    """A file the command will write, checked before any long work."""
    from pathlib import Path

    if path is None:
        return None
    p = Path(path).expanduser()
    if not p.parent.is_dir():
        raise InfoptError(f"{option} {path}: cannot write there (the folder {p.parent} is "
                          "missing or not writable); give a path in a writable folder")
    _writable_dir(p.parent, option)  # tried, not os.access: that says yes to root everywhere
    return p


@app.command()
def quality(
    reference: Annotated[str, typer.Option(help="base URL of the reference: the highest "
                                           "precision of the model that fits")],
    candidate: Annotated[str, typer.Option(help="base URL of the configuration to judge")],
    floor: Annotated[str | None, typer.Option(help="base URL of a fresh restart of the "
                                              "reference: sets the noise floor")] = None,
    model: Annotated[str | None, typer.Option(help="served model name (default: the one "
                                              "each server lists)")] = None,
    reference_engine: Annotated[str | None, typer.Option(help="llamacpp or vllm (default: "
                                                         "detected)")] = None,
    candidate_engine: Annotated[str | None, typer.Option(help="llamacpp or vllm (default: "
                                                         "detected)")] = None,
    tolerance: Annotated[float, typer.Option(min=0.0, max=1.0, help="largest accepted drop "
                                             "from the floor, as a fraction")] = 0.02,
    tokens: Annotated[int, typer.Option(min=1, max=1024, help="greedy reference tokens per "
                                        "prompt")] = 32,
    top_k: Annotated[int, typer.Option(min=1, max=20, help="top-k kept per position")] = 8,
    max_prompts: Annotated[int, typer.Option(min=8, max=48, help="the most prompts of the "
                                             "pool scored to decide: 8, then 16, 32 ... "
                                             "until the interval clears the threshold")] = 32,
    tasks: Annotated[int, typer.Option(min=0, max=100, help="items per generative task set "
                                       "(arithmetic, facts, JSON schema, needle, French, "
                                       "code) run on both; 0: token fidelity only")] = 0,
    reference_file: Annotated[str | None, typer.Option(help="read the reference from this "
                                                       "file, or build and save it there")] = None,
    lm_eval: Annotated[str | None, typer.Option(help="lm-evaluation-harness tasks (comma "
                                                "separated, generative) run on both through "
                                                "chat completions; needs `make lm-eval`")] = None,
    lm_eval_limit: Annotated[int | None, typer.Option(min=1, help="items per lm-eval task")] = None,
    lm_eval_include: Annotated[str | None, typer.Option(help="folder of your own lm-eval "
                                                        "task YAMLs")] = None,
    lm_eval_out: Annotated[str | None, typer.Option(help="folder for lm-eval's results "
                                                    "(default: a new temporary folder)")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="environment variable holding the "
                                                    "API key (never printed)")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Token fidelity of a candidate against a reference under teacher forcing (top-1
    agreement with its interval, delta-p, perplexity ratio, a KL lower bound), and with
    --tasks the generative task sets (alone, for a server without exact token scoring); exit
    1 when the candidate regressed beyond the tolerance, or when the prompt budget could not
    decide (undecided is not a pass)."""
    from infopt.quality.check import check_quality, quality_endpoint

    try:
        key, ref_file = _api_key(api_key_env), _writable_file(reference_file, "--reference-file")
        lm = _lm_eval_request(lm_eval, lm_eval_limit, lm_eval_include, lm_eval_out)
        alone = tasks > 0 or lm is not None  # judged without token scoring if need be
        ends = [quality_endpoint(u, model, e, tasks_only_ok=alone) for u, e in (
            (reference, reference_engine), (candidate, candidate_engine))]
        floor_end = (quality_endpoint(floor, model, reference_engine, tasks_only_ok=alone)
                     if floor else None)
        _, verdict = check_quality(
            ends[0], ends[1], floor=floor_end, tolerance=tolerance, tokens=tokens, top_k=top_k,
            reference_file=ref_file, api_key=key, task_items=tasks, lm_eval=lm,
            max_prompts=max_prompts, progress=None if json_out else lambda m: typer.echo(f"  {m}", err=True))
    except InfoptError as exc:
        _fail(exc)
        return
    if json_out:
        typer.echo(verdict.model_dump_json(indent=2))
    else:
        from infopt.report.quality_text import render_verdict

        typer.echo(render_verdict(verdict))
    if not verdict.passed:
        raise typer.Exit(1)


def _lm_eval_request(tasks: str | None, limit: int | None, include: str | None,
                     out: str | None):
    import tempfile
    from pathlib import Path

    from infopt.quality.check import LmEvalRequest

    if tasks is None:
        if include or limit or out:
            raise InfoptError("--lm-eval-limit, --lm-eval-include and --lm-eval-out go with "
                             "--lm-eval TASKS; name the tasks too")
        return None
    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        raise InfoptError(f"--lm-eval {tasks!r} names no task; give e.g. --lm-eval gsm8k")
    if include and not Path(include).is_dir():
        raise InfoptError(f"--lm-eval-include {include}: no such folder; give the folder "
                         "holding your task YAML files")
    folder = Path(out).expanduser() if out else Path(tempfile.mkdtemp(prefix="infopt-lm-eval-"))
    try:  # checked before any long work
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InfoptError(f"--lm-eval-out {out}: cannot create it ({exc.strerror or exc}); "
                          "give a writable folder") from None
    return LmEvalRequest(tasks=names, out_dir=folder, limit=limit,
                         include=Path(include) if include else None)


@app.command()
def bench(
    endpoint: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible server")],
    model: Annotated[str, typer.Option(help="the served model name")],
    workload: Annotated[str, typer.Option(help="workload YAML (see examples/workloads)")],
    engine: Annotated[str | None, typer.Option(help="the engine behind the endpoint, for its "
                                               "forced-length fields (default: generic)")] = None,
    out: Annotated[str | None, typer.Option(help="folder for requests.parquet and "
                                            "summary.json")] = None,
    max_input_tokens: Annotated[int, typer.Option(min=1, max=MAX_SEQUENCE_TOKENS,
                                                  help="the longest prompt the workload may "
                                                       "ask for, tokens (a longer one is "
                                                       "refused, never clipped)")] = 8192,
    tokenizer: Annotated[str | None, typer.Option(
        help="the model's tokenizer.json (or its HF folder), for exact prompt lengths when "
             "the engine has no tokenize route")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Benchmark any OpenAI-compatible endpoint with a workload file (standalone); exit 1 when
    it ran but its numbers are not evidence (every request failed, or the records failed
    validation), 2 for bad input or a URL that is no OpenAI-compatible server."""
    from infopt.loadgen.bench_command import run_workload_file
    from infopt.report.bench_text import bench_failure, render_bench

    bar = None
    try:
        # An unnamed server gets no per-chunk counting (an unknown field could be rejected),
        # so its chunk counts are assumed, and flagged.
        ep = _endpoint(endpoint, model, engine)
        if out is not None:  # checked now, not after the whole measurement
            _writable_dir(out, "--out")
        bar = None if json_out else _ProgressBar()
        result = run_workload_file(ep, workload, out_dir=out, max_input_tokens=max_input_tokens,
                                   tokenizer=tokenizer, progress=bar)
    except InfoptError as exc:
        _fail(exc)
        return
    finally:
        if bar is not None:
            bar.close()
    typer.echo(result.model_dump_json(indent=2) if json_out else render_bench(result))
    if reason := bench_failure(result):
        typer.secho(f"infopt: {reason}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1)


class _ProgressBar:
    """A progress bar on stderr per measured phase (a sweep has one per scenario)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._progress = Progress("measured requests", BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True),
                                  transient=False)
        self._task: TaskID | None = None
        self._last = 0

    def __call__(self, done: int, total: int) -> None:
        if self._task is None or done < self._last:  # a new phase started
            self._progress.start()
            self._task = self._progress.add_task("", total=total)
        self._progress.update(self._task, completed=done, total=total)
        self._last = done

    def close(self) -> None:
        self._progress.stop()


def _device_target(spec: str | None):
    from infopt.specs.checkpoint import DeviceKind, DeviceTarget

    if spec is None:
        return None
    kind, _, cc = spec.partition(":")
    try:
        dk = DeviceKind(kind)
    except ValueError:
        raise InfoptError(f"--device '{spec}': kind must be one of "
                          f"{[k.value for k in DeviceKind]} (cuda takes :CC, e.g. cuda:9.0)") from None
    if dk.value == "cuda" and not cc:
        raise InfoptError("--device cuda needs a compute capability, e.g. cuda:8.9")
    return DeviceTarget(kind=dk, compute_capability=cc or None)


from infopt.cli_approvals import register as _register_approvals  # noqa: E402

_register_approvals(app, _fail)

from infopt.cli_reoptimize import register as _register_reoptimize  # noqa: E402

_register_reoptimize(app, _fail)

from infopt.cli_cluster import register as _register_cluster  # noqa: E402

_register_cluster(app, _fail)


def main() -> None:  # pragma: no cover - console entry for `python -m infopt.cli`
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
