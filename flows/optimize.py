"""The `optimize` flow: target -> route -> start -> contract -> baseline -> tune -> report.

Issue-2 scope: one engine (the first routed one that is installed), one tuning dimension with
repeated, interleaved trials. Engines are started and stopped only through tasks.engine, and
every engine still running when the flow fails, crashes or is cancelled is stopped by the hooks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.exceptions import MissingContextError
from pydantic import ValidationError

from infopt.engines import adapter_for, process
from infopt.engines.render import render_deployment
from infopt.engines.routing import route, select_available
from infopt.report.rundir import new_run_id, runs_root, trial_dir
from infopt.specs.base import EngineStartError, InfoptError
from infopt.specs.results import OptimizationReport, Trial, TuningOutcome
from infopt.specs.scenarios import ScenarioName
from infopt.specs.serving import AnyServingConfig, EngineName, with_knob
from infopt.specs.workload import Workload
from infopt.troubleshoot.diagnose import contract_preserving_remedy
from infopt.tuning.search import (
    TuningDimension,
    baseline_config,
    decide,
    first_dimension,
    objective_value,
    runnable_candidates,
)
from tasks.benchmark import benchmark, benchmark_scenarios
from tasks.contract import verify_contract
from tasks.engine import diagnose_start, start_engine, stop_engine
from tasks.plan import fit_candidates, label_ceilings
from tasks.report import write_report_task
from tasks.target import inventory_host, profile_model_task, shortlist_task


def _log() -> logging.Logger | logging.LoggerAdapter:
    """The run logger inside a flow/task; a plain logger when a helper is called outside one."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("infopt.flows.optimize")


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


@task(name="decide-tuning")
def decide_tuning(trials: list[Trial], knob: str, baseline_value: str, workload: Workload,
                  seed: int) -> TuningOutcome:
    return decide(trials, knob, baseline_value, workload.objective, seed=seed)


def _mean_context(bench, workload: Workload) -> int:
    """Mean tokens in context while decoding: measured prompt length + half the output."""
    prompts = [lvl.prompt_tokens_mean for lvl in bench.levels if lvl.prompt_tokens_mean]
    prompt = sum(prompts) / len(prompts) if prompts else workload.input_tokens
    return int(prompt + workload.output_tokens / 2)


def _tokenizer_path(model) -> str | None:
    """The checkpoint's tokenizer.json, for exact prompts on engines without a tokenize route."""
    p = Path(model.path)
    return str(p / "tokenizer.json") if (p / "tokenizer.json").is_file() else None


def _start_with_troubleshooting(config, log: Path, model, ts: dict):
    """Start; on a deterministic failure diagnose the log and, if a known failure has a remedy
    that keeps the contract, apply it once. Returns (running | None, config, diagnosis, remedy)."""
    try:
        return start_engine(config, str(log), model.file_bytes), config, None, None
    except EngineStartError as exc:
        _log().warning("start failed: %s", str(exc).splitlines()[0])
        diag = diagnose_start(exc.log_path or str(log), str(config.engine), ts["search"],
                              ts["github_url"])
    remedy = contract_preserving_remedy(diag)
    fixed = None
    if remedy is not None:
        try:
            fixed = config
            for knob, value in remedy.knob_changes.items():
                fixed = with_knob(fixed, knob, value)
        except (ValueError, ValidationError):
            fixed = None  # the remedy names a knob this engine/config does not have
    if fixed is None:
        return None, config, diag, None
    _log().info("applying remedy (keeps the contract): %s", remedy.change)
    retry_log = log.with_name("engine.remedied.log")
    try:
        return start_engine(fixed, str(retry_log), model.file_bytes), fixed, diag, remedy
    except EngineStartError:
        return None, fixed, diagnose_start(str(retry_log), str(config.engine), ts["search"],
                                           ts["github_url"]), remedy


def _run_trial(config: AnyServingConfig, *, trial_id: str, role: str,
               dimension: str | None, value: str | None, repeat: int, workload: Workload,
               run_dir: Path, model, hw, fit, seed: int, ts: dict, with_contract: bool = False):
    """Start (with troubleshooting) -> (contract) -> benchmark -> stop. A start that still
    fails is recorded with its diagnosis, never raised."""
    log = trial_dir(run_dir, trial_id) / "engine.log"
    running, config, diag, remedy = _start_with_troubleshooting(config, log, model, ts)
    common = dict(trial_id=trial_id, role=role, dimension=dimension, value=value, repeat=repeat,
                  config=config, fit=fit, diagnosis=diag, remedy=remedy)
    if running is None:
        return Trial(**common, engine=None, benchmark=None, objective_value=None,
                     failed=f"{diag.category.value}: {diag.root_error[:300]}"), []
    try:
        checks = verify_contract(running, config.served_model_name) if with_contract else []
        bench = benchmark(running, config.served_model_name, workload, seed, str(run_dir),
                          trial_id, max_input_tokens=model.native_context_tokens,
                          tokenizer_path=_tokenizer_path(model))
    finally:
        stop_engine(running)
    ceilings = label_ceilings(model, hw, config, bench, _mean_context(bench, workload))
    if bench.validation_passed is False:  # measured, but the records failed their checks
        return Trial(**common, engine=running, benchmark=bench, objective_value=None,
                     ceilings=ceilings, failed="record validation: " + "; ".join(
                         bench.validation_failures)[:300]), checks
    return Trial(**common, engine=running, benchmark=bench,
                 objective_value=objective_value(bench, workload), ceilings=ceilings), checks


@flow(name="optimize", on_failure=[_stop_engines_hook], on_crashed=[_stop_engines_hook],
      on_cancellation=[_stop_engines_hook])
def optimize(model_path: str, workload: Workload | None = None, runs_dir: str | None = None,
             engine: EngineName | None = None, repeats: int = 3, port: int | None = None,
             seed: int = 0, run_id: str | None = None, base_model: str | None = None,
             hub_endpoint: str | None = None, tune_knob: str | None = None,
             tune_values: list[int | float | str | bool] | None = None,
             base_overrides: dict[str, int | float | str | bool] | None = None,
             github_search: bool = True, github_url: str | None = None,
             scenarios: Sequence[str] | None = ("all",), scenario_requests: int | None = 4
             ) -> OptimizationReport:
    """Optimize serving of the local checkpoint `model_path`. `base_model` (a hub id) adds the
    checkpoint shortlist of its quantized variants to the report (metadata only; downloading a
    candidate needs an approval, which a later stage adds). `scenarios`: the standard scenarios
    the winner is measured on ("all", some names, or [] / None for none)."""
    logger = get_run_logger()
    workload = workload or Workload()
    if repeats < 1:
        raise InfoptError(f"repeats must be >= 1 (got {repeats})")
    known = {n.value for n in ScenarioName} | {"all"}
    if unknown := sorted(set(scenarios or []) - known):
        # Checked before any engine starts: a typo must not cost a whole tuning run.
        raise InfoptError(f"unknown scenario(s) {unknown}; choose from {sorted(known)}")
    run_id = run_id or new_run_id()
    run_dir = runs_root(runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    logger.info("run %s: results in %s", run_id, run_dir)

    hw = inventory_host()
    model = profile_model_task(model_path)
    shortlist = shortlist_task(base_model, hw, hub_endpoint) if base_model else None
    routes = route(hw, model, workload.target_concurrency)
    routing_text = [f"{r.engine.value}: {r.reason}" for r in routes]
    chosen, skipped = select_available(routes, engine, lambda n: adapter_for(n).locate())
    notes = [f"skipped {s}" for s in skipped]

    # Clients address the model by its file/directory name, e.g. "smollm2-135m-instruct.q4_1".
    served_name = Path(model.path).name.removesuffix(".gguf").lower()
    base_cfg = baseline_config(chosen, model, hw, served_name=served_name, port=port)
    for knob, v in (base_overrides or {}).items():
        base_cfg = with_knob(base_cfg, knob, v)
    dim = first_dimension(base_cfg, workload)
    if tune_knob:  # a user-chosen dimension instead of the default ladder's first one
        if not tune_values:
            raise InfoptError(f"tune_knob '{tune_knob}' needs tune_values to try")
        dim = TuningDimension(knob=tune_knob, values=list(tune_values), why="chosen by the user")
    ts = {"search": github_search, "github_url": github_url}
    base_value = str(getattr(base_cfg, dim.knob))
    # Leave out what this CPU cannot run, then fit every candidate at the full context before
    # launching any: prune what cannot fit.
    configs, pruned = runnable_candidates(
        {str(v): with_knob(base_cfg, dim.knob, v) for v in dim.values},
        None if hw.gpus else hw.host.isa_features)
    if base_value not in configs:
        raise InfoptError("the baseline configuration cannot run on this machine: " + pruned[0])
    fits = dict(zip(configs, fit_candidates(model, hw, list(configs.values()),
                                            workload.target_concurrency)))
    unfit = [f"{dim.knob}={v}: {fits[v].gap_bytes / 2**30:.2f} GiB short per device; options: "
             + "; ".join(fits[v].alternatives) for v in configs if not fits[v].fits]
    if not fits[base_value].fits:
        raise InfoptError("the baseline configuration does not fit at the model's full context: "
                          + unfit[0])
    pruned += unfit
    values = [v for v in dim.values if str(v) in configs and fits[str(v)].fits]

    # Baseline: contract first (a config that breaks the API is not a candidate), then measure.
    baseline, contract = _run_trial(
        base_cfg, trial_id="t00-baseline", role="baseline", dimension=dim.knob, value=base_value,
        repeat=1, workload=workload, run_dir=run_dir, model=model, hw=hw,
        fit=fits[base_value], seed=seed, ts=ts, with_contract=True)
    if baseline.benchmark is None:
        # Nothing to tune without a baseline: keep the diagnosis on disk and stop cleanly.
        d = baseline.diagnosis
        out = trial_dir(run_dir, baseline.trial_id) / "diagnosis.json"
        if d is not None:
            out.write_text(d.model_dump_json(indent=2))
        links = "; ".join(m.url for m in (d.matches if d else [])[:3])
        raise EngineStartError(
            f"the baseline configuration failed to start ({baseline.failed}). Upstream: "
            f"{links or 'no match'}. Diagnosis: {out}; engine log: "
            f"{trial_dir(run_dir, baseline.trial_id) / 'engine.log'}")
    if not all(c.ok for c in contract):
        raise InfoptError("the baseline failed its API contract: " +
                          "; ".join(f"stream={c.stream}: {c.detail}" for c in contract if not c.ok))
    trials = [baseline]

    # Tuning: interleave values within each round so slow drift hits every value alike.
    n = 1
    for rnd in range(1, repeats + 1):
        order = values[(rnd - 1) % len(values):] + values[:(rnd - 1) % len(values)]
        for v in order:
            if str(v) == base_value and rnd == 1:
                continue  # the baseline trial is this value's first repeat
            t, _ = _run_trial(configs[str(v)], trial_id=f"t{n:02d}-{dim.knob}-{v}-r{rnd}",
                              role="tuning", dimension=dim.knob, value=str(v), repeat=rnd,
                              workload=workload, run_dir=run_dir, model=model, hw=hw,
                              fit=fits[str(v)], seed=seed + 1000 * n, ts=ts)
            trials.append(t)
            n += 1
    outcome = decide_tuning(trials, dim.knob, base_value, workload, seed)

    # Winner: among trials of the chosen value, the one at that value's median objective.
    chosen_trials = sorted((t for t in trials if t.value == outcome.winner_value
                            and t.objective_value is not None),
                           key=lambda t: t.objective_value)
    winner = chosen_trials[len(chosen_trials) // 2]
    version = winner.engine.version if winner.engine else "unknown"
    scenario_results = []
    if scenarios:  # the winner on the standard scenarios; ["all"] = every one of them
        logger.info("measuring the winner (%s) on the standard scenarios", winner.trial_id)
        running = start_engine(winner.config, str(trial_dir(run_dir, "t-scenarios") /
                                                  "engine.log"), model.file_bytes)
        try:
            scenario_results = benchmark_scenarios(
                running, winner.config.served_model_name, model.native_context_tokens,
                workload.target_concurrency, scenario_requests, seed, str(run_dir),
                "t-scenarios", None if "all" in scenarios else scenarios,
                tokenizer_path=_tokenizer_path(model))
        finally:
            stop_engine(running)
    deployment = render_deployment(winner.config, port=8000, gpus=len(hw.gpus),
                                   name=f"infopt-{run_id}".lower())
    report = OptimizationReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=hw, model=model,
        workload=workload, engine=chosen.value, engine_version=version, routing=routing_text,
        shortlist=shortlist, pruned=pruned,
        contract=contract, trials=trials, tuning=outcome, winner_trial_id=winner.trial_id,
        winner_config=winner.config, winner_command=winner.engine.command,
        winner_deployment=deployment, scenarios=scenario_results, notes=notes + [
            f"dimension `{dim.knob}`: {dim.why}",
            "prompts carry unique heads (no prefix-cache reuse beyond the chat template); "
            "prompt lengths are exact by the engine's own tokenizer where it has a tokenize "
            "route (usage.prompt_tokens checked per request); output lengths forced with the "
            "engine's fields and checked against usage",
            f"tuning decision: {outcome.rule}"])
    path = write_report_task(report, str(run_dir))
    logger.info("report: %s", path)
    return report
