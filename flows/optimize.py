"""The `optimize` flow, one `OptimizeRequest` in, a report out: establish the target -> per
engine (the routed one, and its comparator when the model is here in a format another allowed
engine serves: flows/engine_tuning.py) the control (the engine's defaults) and the baseline
with repeats, then the tuning ladder one dimension at a time (flows/ladder.py; every trial
persisted, a resumed run skips completed ones) -> the better engine's winner, confirmed on the
task sets and measured on the standard scenarios -> report.

Engines are started and stopped only inside tasks (run-trial, the scenario step), and every
engine still running when the flow fails, crashes or is cancelled is stopped by the hooks; one
left by a SIGKILLed optimizer is reaped when the next run starts (infopt.engines.registry).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from prefect import flow, get_run_logger

from flows.download import download_model
from flows.engine_tuning import (
    EngineTuning,
    check_overrides,
    fit_of,
    tokenizer_path,
    tune_engine,
    weights_bytes,
)
from flows.expose import expose_winner
from flows.ladder import control_values
from flows.reproduce import reproduction, weights_identity
from flows.store import open_results_store
from flows.viability import viable_plans
from flows.winner import WinnerContext, confirm_winner
from infopt.bootstrap import default_paths
from infopt.contract.remedies import contract_gaps
from infopt.contract.verify import PROBES as CONTRACT_PROBES
from infopt.engines import adapter_for, process, registry, serves
from infopt.engines.base import launch_for
from infopt.engines.render import render_deployment
from infopt.engines.routing import comparator_for, route, select_available
from infopt.runs.rundir import atomic_write, new_run_id, runs_root
from infopt.specs.base import EngineUnavailableError, InfoptError
from infopt.specs.contract import ContractOutcome
from infopt.specs.hardware import HardwareInventory
from infopt.specs.ladder import EngineResult
from infopt.specs.model import ModelProfile
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport, Trial
from infopt.specs.scenarios import ScenarioName
from infopt.specs.serving import EngineName
from infopt.specs.workload import check_fits_context
from infopt.tuning.control import control_gain, control_recommendation, higher_is_better
from infopt.tuning.hub_weights import check_checkpoints
from infopt.tuning.ladder import engine_choice
from infopt.tuning.ladder import median as lad_median
from infopt.tuning.pareto import closest_to_ceiling, config_label
from infopt.tuning.pareto import points as pareto_points
from tasks.kernel import kernel_path_task
from tasks.report import write_report_task
from tasks.target import inventory_host, profile_model_task, shortlist_task


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


def _check_scenarios(names: list[str]) -> None:
    known = {n.value for n in ScenarioName} | {"all"}
    if unknown := sorted(set(names) - known):
        # Checked before any engine starts: a typo must not cost a whole tuning run.
        raise InfoptError(f"unknown scenario(s) {unknown}; choose from {sorted(known)}")


def _control_command(trials: list[Trial], adapter, control) -> str:
    """The command the control trial ran; rendered on a placeholder port if none started."""
    ran = next((t.engine.command for t in trials if t.role == "control" and t.engine), None)
    return ran or launch_for(adapter, control, adapter.locate(), 8000).command


def _other_formats(request: OptimizeRequest, model: ModelProfile) -> list[ModelProfile]:
    """The model's other local formats: the request's, or with no path the bundled HF copy."""
    paths = list(request.model.other_formats)
    if not paths and request.model.path is None and not request.model.download:
        hf = default_paths().hf_model
        paths = [str(hf)] if (hf / "config.json").is_file() else []
    out = [profile_model_task(p) for p in paths]
    return [p for p in out if p.format is not model.format]


@flow(name="optimize", on_failure=[_stop_engines_hook], on_crashed=[_stop_engines_hook],
      on_cancellation=[_stop_engines_hook])
def optimize(request: OptimizeRequest | None = None, run_id: str | None = None,
             runs_dir: str | None = None, results_store: str | None = None,
             hardware: HardwareInventory | None = None) -> OptimizationReport:
    """Optimize serving of `request.model` on this machine for `request.workload`. A run id that
    already has completed trials (a resumed or re-run flow) re-runs none of them. With
    `results_store` (a ResultsStore block's name) the run folder is first restored from that
    store and every trial and report is written there too, so a run resumes on any machine.
    `hardware`: this machine's inventory when the caller measured it already (the CLI's
    pre-flight), so a run measures the host once."""
    logger = get_run_logger()
    request = request or OptimizeRequest()
    workload = request.tuning_workload()
    _check_scenarios(request.scenarios)
    for stale in registry.reap_stale():
        logger.warning("ended engine group %d left by a killed optimizer: %s", stale.pgid,
                       stale.command[:120])
    run_id = run_id or new_run_id()
    run_dir = runs_root(runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    open_results_store(results_store, run_dir)  # restore this run's files, mirror new ones
    atomic_write(run_dir / "request.json", request.model_dump_json(indent=2))
    logger.info("run %s: results in %s", run_id, run_dir)
    t_start = time.monotonic()

    # Establish the target.
    hw = inventory_host(hardware)
    downloaded, download_answers = download_model(request)  # behind the download gate
    model = profile_model_task(downloaded or request.model.path or str(default_paths().gguf))
    # The CLI checks this before the run folder; a deployment run's form has no such step.
    check_fits_context(request.workload, context_tokens=model.native_context_tokens,
                       what=model.name)
    shortlist = (shortlist_task(request.model.hub_id, hw, request.model.hub_endpoint,
                                target_concurrency=workload.target_concurrency,
                                credentials_block=request.credentials_block)
                 if request.model.hub_id else None)
    check_checkpoints(request, shortlist)  # model.try_checkpoints names verified candidates
    routes = route(hw, model, workload.target_concurrency)
    chosen, skipped = select_available(routes, request.engines,
                                       lambda n: adapter_for(n).locate(),
                                       lambda n: serves(n, model.format))

    # The routed engine, then its comparator when the model is here in a format another
    # allowed engine serves (the routing rule is a hypothesis; the better measured wins).
    others = _other_formats(request, model)
    comp, comp_why = comparator_for(
        chosen, [(model.format, routes)] + [(o.format, route(hw, o, workload.target_concurrency))
                                           for o in others],
        request.engines, lambda n: adapter_for(n).locate(), serves)
    plans = [(chosen, model, "routed", "; ".join(r.reason for r in routes
                                                 if r.engine == chosen) or "request.engines")]
    if comp is not None:
        plans.append((comp[0], next(o for o in [model, *others] if o.format is comp[1]),
                      "comparator", comp_why))
    check_overrides(request, [e for e, *_ in plans])
    plans, fit_notes = viable_plans(request, plans, hw, workload, run_dir, run_id)
    tunings, results = _tune_all(request, plans, hw, workload, run_dir, t_start, shortlist)
    choice = engine_choice(results, higher_is_better(workload.objective), request.seed,
                           request.budgets.min_gain)
    tuned = next(t for t in tunings if t.engine.value == choice.chosen)
    adapter = adapter_for(tuned.engine)
    run, trials = tuned.run, [t for tn in tunings for t in tn.trials]
    qualify = len(tunings) > 1  # labels name their engine when two were tuned

    # The winner is confirmed on the task sets against the reference's answers (the engine
    # started once for them and the standard scenarios).
    decision = confirm_winner(tuned.history, WinnerContext(
        request=request, workload=workload, model=tuned.model, run_dir=run_dir,
        control=tuned.control, reference_key=tuned.ref_key, engine_version=tuned.version,
        model_digest=tuned.digest, tokenizer_path=tokenizer_path(tuned.model)))
    chosen_inc, winner = decision.chosen, decision.winner
    kernels = kernel_path_task(winner, str(run_dir), weights_bytes(tuned.model, winner.config))
    exposure, expose_answers = expose_winner(request, winner, tuned.model.file_bytes, run_dir)
    c_values, control_is_baseline = control_values(run)
    gain = control_gain(c_values, chosen_inc.values, workload.objective, seed=request.seed,
                        control_is_baseline=control_is_baseline)
    control_fit = fit_of(tuned.model, hw, tuned.control, workload.target_concurrency)
    gain.recommendation = control_recommendation(gain, control_fit.context_tokens,
                                                 tuned.model.native_context_tokens)

    # Report.
    base_trial = tuned.base_trial
    control_trial = next((t for t in run.trials if t.role == "control"), base_trial)
    label_of = (lambda t: config_label(t, True)) if qualify else None
    report = OptimizationReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=hw,
        model=tuned.model, workload=workload, engine=tuned.engine.value,
        engine_version=tuned.version,
        routing=[f"{r.engine.value}: {r.reason}" for r in routes], shortlist=shortlist,
        pruned=[p for tn in tunings for p in tn.run.pruned], contract=base_trial.contract,
        contract_outcome=ContractOutcome(
            control_gaps=contract_gaps(control_trial.contract, adapter.contract_remedies),
            first_baseline_gaps=tuned.first_gaps, applied=tuned.applied,
            baseline_gaps=contract_gaps(base_trial.contract, adapter.contract_remedies)),
        quality_note=tuned.quality_note, trials=trials, ladder=tuned.ladder,
        winner_label=chosen_inc.winner_label, engines=choice,
        pareto=pareto_points(trials, workload.target_concurrency, label_of),
        closest_to_ceiling=closest_to_ceiling(
            trials, config_label(winner, True) if qualify else chosen_inc.label,
            *([label_of] if label_of else [])),
        winner_trial_id=winner.trial_id, winner_config=winner.config,
        winner_command=winner.engine.command, control_config=tuned.control,
        control_command=_control_command(run.trials, adapter, tuned.control),
        baseline_config=tuned.baseline, gain_vs_control=gain,
        winner_deployment=render_deployment(winner.config, port=8000, gpus=len(hw.gpus),
                                            cpus=hw.host.usable_cpus,
                                            model_bytes=tuned.model.file_bytes,
                                            name=f"infopt-{run_id}".lower()),
        scenarios=decision.scenarios, tasks=decision.tasks, kernel_path=kernels,
        reproduce=reproduction(run_dir, workload, winner, chosen_inc.trials, run.trials),
        winner_weights=weights_identity(winner.config.model_path, request.model.hub_id,
                                        request.model.revision),
        approvals=download_answers + [a for tn in tunings for a in tn.weight_answers]
        + expose_answers, exposure=exposure,
        notes=[f"skipped {s}" for s in skipped] + fit_notes + [
            f"required API feature `{f}`: no contract probe for it yet, so it was NOT checked"
            for f in request.api.features if f not in CONTRACT_PROBES] + [
            *[n for tn in tunings for n in tn.weight_notes],
            *([] if comp else [f"no comparator engine: {comp_why}"]),
            "control: the engine's out-of-the-box defaults on the same workload; every gain is "
            "stated against it",
            "prompts carry unique heads (no prefix-cache reuse beyond the chat template); "
            "prompt lengths are exact by the engine's own tokenizer where it has a tokenize "
            "route (usage.prompt_tokens checked per request); output lengths forced with the "
            "engine's fields and checked against usage",
            f"tuning: {tuned.ladder.rule}"])
    report = write_report_task(report, str(run_dir))
    logger.info("report: %s", run_dir / "report.md")
    return report


def _tune_all(request: OptimizeRequest, plans, hw, workload, run_dir: Path, t_start: float,
              shortlist) -> tuple[list[EngineTuning], list[EngineResult]]:
    """Each planned engine's tuning; one that fails is recorded, and the run fails only when
    none produced a result (with the routed engine's error)."""
    tunings, results, first_error = [], [], None
    for engine, model, role, reason in plans:
        base = dict(engine=engine.value, role=role, reason=reason, model_path=model.path,
                    model_format=model.format.value)
        try:
            tn = tune_engine(request, engine, model, hw, workload, run_dir, t_start,
                             id_prefix="" if role == "routed" else f"{engine.value}-",
                             shortlist=shortlist)
        except InfoptError as exc:  # a baseline that fails its start, contract or quality
            if role == "routed" and _user_named(engine, exc):
                raise  # the engine the user pointed at is broken: no quiet switch to another
            get_run_logger().warning("%s (%s) produced no result: %s", engine.value, role,
                                     str(exc).splitlines()[0])
            first_error = first_error or exc
            results.append(EngineResult(**base, failed=str(exc).splitlines()[0][:400]))
            continue
        c_values, _ = control_values(tn.run)
        final = tn.history[-1]
        tunings.append(tn)
        results.append(EngineResult(
            **base, engine_version=tn.version, control_median=lad_median(c_values),
            winner_label=final.winner_label, winner_median=lad_median(final.values),
            winner_values=final.values, launches=len(tn.run.trials), ladder=tn.ladder))
    if not tunings:
        raise first_error
    return tunings, results


def _user_named(engine: EngineName, exc: InfoptError) -> bool:
    """Whether the routed engine's failure must end the run instead of leaving the comparator:
    its executable is not the engine (a bad override), or the user chose the executable
    ($INFOPT_LLAMA_SERVER and the like) and it did not start."""
    env = adapter_for(engine).executable_env
    return isinstance(exc, EngineUnavailableError) or bool(env and os.environ.get(env))
