"""The `reoptimize` flow: after an engine upgrade, is the accepted configuration still as fast?

1. The accepted run (`infopt accept RUN_ID`, or `baseline_run`) and its request.
2. The installed build's version against the accepted run's, and the package index's newest
   release (infopt.engines.releases): no upgrade -> nothing started (unless `force`).
3. The accepted winner and its runner-up started afresh on the installed build with the same
   request, in rounds of interleaved fresh starts (flows/remeasure.py); each round judged
   against the stored trials with the noise-aware ratio test (infopt.tuning.regression); a
   flagged regression is re-measured until `confirm_rounds` rounds in a row agree.
4. The report (reoptimize.json/.md and a Prefect artifact). A confirmed regression ends the
   flow run Failed (what a schedule's alerting watches), and proposes a re-tune: with
   `retune`, the optimizer runs again with the accepted request, and its winner replaces the
   accepted one only through the promote approval gate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Completed, Failed

from blocks.named import load_engine_runtime, open_results_store, restore_run
from flows.gate import ask
from flows.remeasure import Remeasure, rounds
from infopt.engines import adapter_for, process, registry
from infopt.engines.releases import check_release
from infopt.report.reoptimize_text import render_reoptimize, summary
from infopt.runs.accepted import accept, accepted, load_optimization
from infopt.runs.rundir import atomic_write, new_run_id, runs_root
from infopt.specs.approval import GateKind, GateRequest
from infopt.specs.base import InputError
from infopt.specs.reoptimize import ReoptimizeReport, ReoptimizeRequest
from infopt.tuning.control import higher_is_better
from infopt.tuning.regression import outcome
from infopt.tuning.remeasure import picks


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


@contextmanager
def _executable(adapter, path: str | None) -> Iterator[None]:
    """Point the adapter at the upgraded build for this run (its $INFOPT_* override)."""
    if path is None:
        yield
        return
    if adapter.executable_env is None:
        raise InputError(f"{adapter.name.value} takes no executable override; leave "
                         "`executable` empty")
    before = os.environ.get(adapter.executable_env)
    os.environ[adapter.executable_env] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(adapter.executable_env, None)
        else:
            os.environ[adapter.executable_env] = before


def _picks(stored):
    try:
        return picks(stored)
    except ValueError as exc:  # a report edited by hand, or from a run that measured nothing
        raise InputError(f"{exc}: accept a run whose winner was measured") from None


def _build(request: ReoptimizeRequest, engine: str) -> str | None:
    """The upgraded build's executable: the request's path, or its EngineRuntime block's."""
    if request.engine_runtime is None:
        return request.executable
    runtime = load_engine_runtime(request.engine_runtime)
    if runtime.engine != engine:
        raise InputError(f"EngineRuntime '{request.engine_runtime}' is a {runtime.engine} "
                         f"build, but the accepted run served {engine}: name a {engine} "
                         "runtime")
    exe = runtime.executable()
    if exe is None:
        raise InputError(f"EngineRuntime '{request.engine_runtime}' names an image only; a "
                         "re-measurement on this machine needs its binary_path or venv_path")
    return exe


@flow(name="reoptimize", on_failure=[_stop_engines_hook], on_crashed=[_stop_engines_hook],
      on_cancellation=[_stop_engines_hook])
def reoptimize(request: ReoptimizeRequest | None = None, runs_dir: str | None = None,
               run_id: str | None = None):
    """Re-measure the accepted configuration on the installed engine build; flag a regression."""
    log = get_run_logger()
    request = request or ReoptimizeRequest()
    registry.reap_stale()
    root = runs_root(runs_dir)
    base_id = request.baseline_run or accepted(root).run_id
    if request.results_store:  # the accepted run may have been made on another machine
        restore_run(request.results_store, root / base_id)
    stored, stored_request = load_optimization(root / base_id)
    adapter = adapter_for(stored.engine)
    build = _build(request, stored.engine)  # None: the installed one
    with _executable(adapter, build):
        exe = adapter.locate()
        installed = adapter.detect_version(exe)
        release = check_release(adapter, exe, request.index_url)
        run_id = run_id or f"reopt-{new_run_id()}"
        run_dir = root / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        open_results_store(request.results_store, run_dir)
        atomic_write(run_dir / "reoptimize-request.json", request.model_dump_json(indent=2))
        upgraded = installed != stored.engine_version
        log.info("%s: accepted run %s on %s, installed %s (%s)", stored.engine, base_id,
                 stored.engine_version, installed, release.note)
        m = Remeasure(stored_dir=root / base_id, run_dir=run_dir, report=stored,
                      request=stored_request, version=installed, picks=_picks(stored))
        measured = rounds(m, request) if upgraded or request.force else []
    result = ReoptimizeReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), baseline_run=base_id,
        engine=stored.engine, stored_version=stored.engine_version, installed_version=installed,
        upgraded=upgraded, release=release, objective=stored.workload.objective.value,
        higher_is_better=higher_is_better(stored.workload.objective),
        configs=[p.label for p in m.picks], rounds=measured, trials=m.trials,
        outcome=outcome(measured, request.confirm_rounds) if measured else "no upgrade",
        summary="", notes=m.notes)
    result = result.model_copy(update={"summary": summary(result, request)})
    if result.outcome == "regression" and request.retune:
        with _executable(adapter, build):  # the re-tune runs on the build that regressed
            result = _retune(result, stored_request, root, request)
    _write(result, run_dir, request)
    log.info("reoptimize %s: %s", run_id, result.summary)
    if result.outcome == "regression":
        return Failed(message=result.summary, data=result)
    return Completed(message=result.summary, data=result)


def _write(result: ReoptimizeReport, run_dir, request: ReoptimizeRequest) -> None:
    md = render_reoptimize(result, request)
    atomic_write(run_dir / "reoptimize.json", result.model_dump_json(indent=2))
    atomic_write(run_dir / "reoptimize.md", md)
    create_markdown_artifact(markdown=md, key="infopt-reoptimize",
                             description=f"re-optimization {result.run_id}: {result.outcome}")


def _retune(result: ReoptimizeReport, stored_request, root, request: ReoptimizeRequest
            ) -> ReoptimizeReport:
    """Run the optimizer again with the accepted request; its winner is promoted (becomes the
    accepted run) only through the promote gate."""
    from flows.optimize import optimize  # the whole loop: imported only when a re-tune runs

    retuned = optimize(request=stored_request, runs_dir=str(root))
    return promote(result, retuned, root, request)


def promote(result: ReoptimizeReport, retuned, root, request: ReoptimizeRequest
            ) -> ReoptimizeReport:
    """The promote gate: approved (or pre-authorized) -> the re-tune's run becomes the
    accepted one; the answer is recorded in the report either way."""
    gate = GateRequest(
        kind=GateKind.PROMOTE, key="promote-retune",
        title=f"promote re-tuned run {retuned.run_id}",
        description=(f"After the regression of **{result.engine} {result.installed_version}** "
                     f"on the accepted run `{result.baseline_run}`, the re-tune "
                     f"`{retuned.run_id}` recommends `{retuned.winner_label}`: "
                     f"`{retuned.winner_command}`. Approve to make it the accepted run "
                     f"(`{root}/accepted.json`), which later re-optimizations re-measure."),
        details={"retune_run": retuned.run_id, "winner": retuned.winner_label})
    answer = ask(gate, request.authorize, request.approval_timeout_s)
    if answer.approved:
        accept(root, retuned.run_id, by=f"promoted ({answer.source.value}: "
                                         f"{answer.answered_by or 'unnamed'})")
    note = (f"re-tune {retuned.run_id}: winner {retuned.winner_label}; "
            + ("promoted to the accepted run" if answer.approved else
               f"not promoted ({answer.reason or answer.source.value})"))
    return result.model_copy(update={"retune_run": retuned.run_id, "promoted": answer.approved,
                                     "promotion": answer, "notes": [*result.notes, note]})
