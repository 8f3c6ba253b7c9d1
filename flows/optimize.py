"""The `optimize` flow, one `OptimizeRequest` in, a report out: establish the target -> per
engine (the routed one, and its comparator when the model is here in a format another allowed
engine serves: flows/engine_tuning.py) the control (the engine's defaults) and the baseline
with repeats, then the tuning ladder one dimension at a time (flows/climb.py; every trial
persisted, a resumed run skips completed ones) -> the better engine's winner, confirmed on the
task sets and measured on the standard scenarios -> report.

Engines are started and stopped only inside tasks (run-trial, the scenario step), and every
engine still running when the flow fails, crashes or is cancelled is stopped by the hooks; one
left by a SIGKILLed optimizer is reaped when the next run starts (infopt.engines.registry).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from blocks.named import open_results_store
from flows.decide import settle_nofit
from flows.engine_tuning import tune_engine
from flows.research import Research
from flows.weights import download_model, fetch_drafters
from flows.winner import finish_winner
from infopt.bootstrap import default_paths
from infopt.engines import adapter_for, process, registry
from infopt.engines.rules import Drafter
from infopt.model.drafters import ladder_drafters, request_drafters
from infopt.report.assemble import assemble_report
from infopt.runs.outcomes import EngineTuning, Target, control_values
from infopt.runs.rundir import atomic_write, new_run_id, runs_root
from infopt.specs.base import EngineUnavailableError, InfoptError
from infopt.specs.hardware import HardwareInventory
from infopt.specs.ladder import Dimension, EngineResult
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport
from infopt.specs.serving import EngineName
from infopt.specs.workload import Workload, check_fits_context
from infopt.tuning.control import higher_is_better
from infopt.tuning.decide import median as lad_median
from infopt.tuning.dimension_rules import climbs
from infopt.tuning.engine_choice import engine_choice
from infopt.tuning.hub_weights import check_checkpoints
from infopt.tuning.plan_run import EnginePlan, other_formats, plan_run
from tasks.report import write_report_task
from tasks.target import (
    calibrate_gpu_task,
    drafter_task,
    inventory_host,
    profile_model_task,
    shortlist_task,
)


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


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
    request = request or OptimizeRequest()
    workload = request.tuning_workload()
    run_id, run_dir = _open_run(request, run_id, runs_dir, results_store)
    t_start = time.monotonic()
    research = Research()
    target = establish_target(request, workload, hardware, research)
    if not target.plan.viable:  # ask which constraint may change (or stop: flows/decide.py)
        request, target = settle_nofit(request, target, run_dir, run_id, research)
        workload = request.tuning_workload()
        target = gather_research(request, target, research)
    tunings, results = _tune_all(request, target.plan.viable, target.hw, workload, run_dir,
                                 t_start, target.shortlist, _drafters(request, target))
    choice = engine_choice(results, higher_is_better(workload.objective), request.seed,
                           request.budgets.min_gain)
    tuned = next(t for t in tunings if t.engine.value == choice.chosen)
    finish = finish_winner(request, workload, tuned, run_dir, target.hw)
    report = assemble_report(run_id, run_dir, request, workload, target, tunings, tuned, choice,
                             finish)
    report = write_report_task(report, str(run_dir))
    get_run_logger().info("report: %s", run_dir / "report.md")
    return report


def _open_run(request: OptimizeRequest, run_id: str | None, runs_dir: str | None,
              results_store: str | None) -> tuple[str, Path]:
    """Reap engines a killed optimizer left, then the run's folder with its request."""
    logger = get_run_logger()
    for stale in registry.reap_stale():
        logger.warning("ended engine group %d left by a killed optimizer: %s", stale.pgid,
                       stale.command[:120])
    run_id = run_id or new_run_id()
    run_dir = runs_root(runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    open_results_store(results_store, run_dir)  # restore this run's files, mirror new ones
    atomic_write(run_dir / "request.json", request.model_dump_json(indent=2))
    logger.info("run %s: results in %s", run_id, run_dir)
    return run_id, run_dir


def establish_target(request: OptimizeRequest, workload: Workload,
                     hardware: HardwareInventory | None,
                     research: Research | None = None) -> Target:
    """The machine (measured once), the model (downloaded behind its gate) and the engines:
    the routed one, then its comparator when the model is here in a format another allowed
    engine serves (the routing rule is a hypothesis; the better measured wins). The hub
    research (shortlist, drafters) is submitted first and goes on while gates wait; a plan
    with an engine to tune collects it at once (gather_research), a no-fit after its
    decision."""
    research = research if research is not None else Research()
    hw = inventory_host(hardware)
    _submit_research(request, hw, workload, research)
    downloaded, download_answers = download_model(request, research)  # behind its gate
    model = profile_model_task(downloaded or request.model.path or str(default_paths().gguf))
    # The CLI checks this before the run folder; a deployment run's form has no such step.
    check_fits_context(request.workload, context_tokens=model.native_context_tokens,
                       what=model.name)
    others = other_formats(request, model, profile_model_task)
    plan = plan_run(request, hw, model, others, workload)
    for p in plan.viable:
        if p.shape.note:
            get_run_logger().warning("%s: %s", p.engine.value, p.shape.note)
    hw = calibrate_gpu_task(hw, [p.engine.value for p in plan.viable])  # once, on GPUs
    target = Target(hw, model, None, plan, download_answers, others=tuple(others))
    return gather_research(request, target, research) if plan.viable else target


def _submit_research(request: OptimizeRequest, hw: HardwareInventory, workload: Workload,
                     research: Research) -> None:
    """The hub reads no gate's answer changes (metadata only, nothing downloaded)."""
    m = request.model
    if not m.hub_id:
        return
    research.futures["shortlist-checkpoints"] = shortlist_task.submit(
        m.hub_id, hw, m.hub_endpoint, target_concurrency=workload.target_concurrency,
        credentials_block=request.credentials_block)
    if hw.gpus and climbs(request, Dimension.SPECULATIVE):
        research.futures["drafter-search"] = drafter_task.submit(
            m.hub_id, m.hub_endpoint, credentials_block=request.credentials_block)


def gather_research(request: OptimizeRequest, target: Target, research: Research) -> Target:
    """The shortlist and drafters (waiting for them), the request's checkpoints checked against
    the shortlist, the drafters fetched (behind the download authorization), every wait."""
    shortlist = research.result("shortlist-checkpoints")
    check_checkpoints(request, shortlist)  # model.try_checkpoints names verified candidates
    drafters = research.result("drafter-search")
    drafter_paths = fetch_drafters(request, drafters) if drafters else {}
    return replace(target, shortlist=shortlist, drafters=drafters, drafter_paths=drafter_paths,
                   waits=list(research.waits))


def _drafters(request: OptimizeRequest, target: Target) -> tuple[Drafter, ...]:
    """The request's own draft models first, then the hub's verified drafters."""
    found = (ladder_drafters(target.drafters, target.drafter_paths) if target.drafters
             else ())
    return request_drafters(request.model.draft_models) + found


def _tune_all(request: OptimizeRequest, plans: tuple[EnginePlan, ...], hw, workload,
              run_dir: Path, t_start: float,
              shortlist, drafters: tuple[Drafter, ...] = ()
              ) -> tuple[list[EngineTuning], list[EngineResult]]:
    """Each planned engine's tuning; one that fails is recorded, and the run fails only when
    none produced a result (with the routed engine's error)."""
    tunings, results, first_error = [], [], None
    for plan in plans:
        engine, role = plan.engine, plan.role
        base: dict[str, Any] = dict(engine=engine.value, role=role, reason=plan.why,
                                    model_path=plan.model.path,
                                    model_format=plan.model.format.value)
        try:
            tn = tune_engine(request, plan, hw, workload, run_dir, t_start, shortlist=shortlist,
                             drafters=drafters)
        except InfoptError as exc:  # a baseline that fails its start, contract or quality
            if role == "routed" and _user_named(engine, exc):
                raise  # the engine the user pointed at is broken: no quiet switch to another
            get_run_logger().warning("%s (%s) produced no result: %s", engine.value, role,
                                     str(exc).splitlines()[0])
            first_error = first_error or exc
            results.append(EngineResult(**base, failed=str(exc).splitlines()[0][:400]))
            continue
        c_values, _ = control_values(tn.run)
        final = tn.chosen
        tunings.append(tn)
        results.append(EngineResult(
            **base, engine_version=tn.version, control_median=lad_median(c_values),
            winner_label=final.winner_label, winner_median=lad_median(final.values),
            winner_values=final.values, launches=len(tn.run.trials), ladder=tn.ladder,
            slos_met=tn.ladder.decision.slos_met if tn.ladder.decision else None))
    if not tunings:
        assert first_error is not None  # every planned engine failed: the first one's error
        raise first_error
    return tunings, results


def _user_named(engine: EngineName, exc: InfoptError) -> bool:
    """Whether the routed engine's failure must end the run instead of leaving the comparator:
    its executable is not the engine (a bad override), or the user chose the executable
    ($INFOPT_LLAMA_SERVER and the like) and it did not start."""
    env = adapter_for(engine).executable_env
    return isinstance(exc, EngineUnavailableError) or bool(env and os.environ.get(env))
