"""The `optimize` flow, one `OptimizeRequest` in, a report out: establish the target -> the
control (the engine's defaults) and the baseline, with repeats -> the tuning ladder, one
dimension at a time (flows/ladder.py; every trial persisted, a resumed run skips completed ones)
-> confirm the winner on the task sets and measure it on the standard scenarios -> report.

Engines are started and stopped only inside tasks (run-trial, the scenario step), and every
engine still running when the flow fails, crashes or is cancelled is stopped by the hooks; one
left by a SIGKILLed optimizer is reaped when the next run starts (infopt.engines.registry).
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, get_run_logger

from infopt.bootstrap import default_paths
from infopt.engines import adapter_for, process, registry
from infopt.engines.render import render_deployment
from infopt.engines.routing import route, select_available
from infopt.model.digest import model_digest
from infopt.report.rundir import new_run_id, runs_root, trial_dir
from infopt.specs.base import EngineStartError, InfoptError
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport, Trial
from infopt.specs.scenarios import ScenarioName
from infopt.engines.ladder import WeightVariant
from infopt.specs.serving import with_knob
from infopt.specs.trial import trial_key
from infopt.tuning.ladder import ladder_facts
from infopt.tuning.pareto import closest_to_ceiling, points as pareto_points
from infopt.tuning.search import (
    baseline_config,
    control_config,
    control_gain,
    control_recommendation,
    serving_target,
)
from infopt.tuning.weights import BITS_PER_WEIGHT
from infopt.contract.remedies import contract_gaps, remedy_for_required
from infopt.contract.verify import PROBES as CONTRACT_PROBES, required_for
from infopt.specs.contract import ContractOutcome, ContractRemedy
from flows.download import download_model
from flows.expose import expose_winner
from flows.ladder import LadderRun, climb, control_values, measure_start, weight_approvals
from flows.weights import current_type, weight_variants
from flows.winner import WinnerContext, confirm_winner
from tasks.plan import fit_candidates
from tasks.quality import quality_key, quality_reference
from tasks.report import write_report_task
from tasks.target import inventory_host, profile_model_task, shortlist_task
from tasks.trial import TrialContext


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


def _tokenizer_path(model) -> str | None:
    """The checkpoint's tokenizer.json, for exact prompts on engines without a tokenize route."""
    p = Path(model.path)
    return str(p / "tokenizer.json") if (p / "tokenizer.json").is_file() else None


def _check_scenarios(names: list[str]) -> None:
    known = {n.value for n in ScenarioName} | {"all"}
    if unknown := sorted(set(names) - known):
        # Checked before any engine starts: a typo must not cost a whole tuning run.
        raise InfoptError(f"unknown scenario(s) {unknown}; choose from {sorted(known)}")


def _stop_on_broken_baseline(trial: Trial, run_dir: Path, gaps=()) -> None:
    """Nothing to tune without a baseline that starts, keeps the API contract and passes the
    quality gate."""
    if broken := [g for g in gaps if g.required]:
        raise InfoptError("the baseline failed its API contract: " + "; ".join(
            f"{g.feature} ({g.status.value}): {g.detail}"
            + (f" [would need: {g.remedy.change}]" if g.remedy else " [no known remedy]")
            for g in broken) + (". Applied first: " + "; ".join(c.knob + "=" + str(c.value)
                                for c in trial.changes) if trial.changes else "")
            + ". Evidence: " + str(trial_dir(run_dir, trial.key) / "contract"))
    if trial.quality is not None and not trial.quality.passed:
        raise InfoptError(f"the baseline failed the quality gate: {trial.quality.summary}. "
                          f"Evidence: {run_dir / 'quality'}; loosen quality_tolerance only if "
                          "the floor shows the reference itself is this noisy")
    if trial.benchmark is None:
        d = trial.diagnosis
        out = trial_dir(run_dir, trial.key) / "diagnosis.json"
        if d is not None:
            out.write_text(d.model_dump_json(indent=2))
        links = "; ".join(m.url for m in (d.matches if d else [])[:3])
        raise EngineStartError(
            f"the baseline configuration failed ({trial.failed}). Upstream: "
            f"{links or 'no match'}. Diagnosis: {out}; engine log: "
            f"{trial_dir(run_dir, trial.key) / 'engine.log'}")


class _RemedyNeeded(Exception):
    """The baseline lacks required API features that one known knob change provides."""

    def __init__(self, remedy: ContractRemedy, gaps) -> None:
        super().__init__(remedy.change)
        self.remedy, self.gaps = remedy, gaps


def _remedy_or_stop(trial: Trial, run_dir: Path, allow_remedy: bool) -> None:
    gaps = contract_gaps(trial.contract, adapter_for(trial.config.engine).contract_remedies)
    remedy = remedy_for_required(gaps)
    if allow_remedy and remedy is not None:
        raise _RemedyNeeded(remedy, gaps)
    _stop_on_broken_baseline(trial, run_dir, gaps)


def _with_changes(config, knob_changes: dict):
    for knob, value in knob_changes.items():
        config = with_knob(config, knob, value)
    return config


def _control_command(trials: list[Trial], adapter, control) -> str:
    """The command the control trial ran; rendered on a placeholder port if none started."""
    ran = next((t.engine.command for t in trials if t.role == "control" and t.engine), None)
    return ran or adapter.build_launch(control, adapter.locate(), 8000).command


@flow(name="optimize", on_failure=[_stop_engines_hook], on_crashed=[_stop_engines_hook],
      on_cancellation=[_stop_engines_hook])
def optimize(request: OptimizeRequest | None = None, run_id: str | None = None,
             runs_dir: str | None = None) -> OptimizationReport:
    """Optimize serving of `request.model` on this machine for `request.workload`. A run id that
    already has completed trials (a resumed or re-run flow) re-runs none of them."""
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
    (run_dir / "request.json").write_text(request.model_dump_json(indent=2))
    logger.info("run %s: results in %s", run_id, run_dir)
    t_start = time.monotonic()

    # Establish the target.
    hw = inventory_host()
    downloaded, download_answers = download_model(request)  # behind the download gate
    model = profile_model_task(downloaded or request.model.path or str(default_paths().gguf))
    shortlist = (shortlist_task(request.model.hub_id, hw, request.model.hub_endpoint,
                                target_concurrency=workload.target_concurrency)
                 if request.model.hub_id else None)
    routes = route(hw, model, workload.target_concurrency)
    chosen, skipped = select_available(routes, request.engines,
                                       lambda n: adapter_for(n).locate())
    adapter = adapter_for(chosen)

    # The control (the engine's defaults) and the baseline (the simplest correct config).
    # Clients address the model by its file/directory name, e.g. "smollm2-135m-instruct.q4_1".
    served_name = Path(model.path).name.removesuffix(".gguf").lower()
    target = serving_target(model, hw, served_name=served_name, port=request.port)
    control, baseline = control_config(chosen, target), baseline_config(chosen, target)
    overrides = {**request.base_overrides,
                 **(request.tune.base_overrides if request.tune else {})}
    for knob, v in overrides.items():
        baseline = with_knob(baseline, knob, v)
    version = adapter.detect_version(adapter.locate())
    digest = model_digest(model.path)
    # The quality reference: the run's highest precision, the control (the checkpoint's own
    # weights, the engine's default 16-bit KV); started once, with a restart for the floor.
    ref_key = quality_key(control, version, digest)
    reference, quality_note = quality_reference(control, str(run_dir / "quality"),
                                                model.file_bytes, ref_key)
    gate = f"{ref_key}:{request.quality_tolerance}" if reference else ""
    ctx = TrialContext(run_dir=str(run_dir), model=model, hw=hw, workload=workload,
                       contract_required=required_for(
                           [str(r) for r in request.api.routes], request.api.features),
                       tokenizer_path=_tokenizer_path(model),
                       github_search=request.github_search, github_url=request.github_url,
                       contract_every_trial=True, quality_reference=reference,
                       quality_tolerance=request.quality_tolerance, engine_version=version,
                       model_digest=digest)

    # Weight variants to make here: their quantize gates are asked now, before any trial, so
    # a person answers at the start; they are the ladder's weights dimension.
    variants, answers, weight_notes = weight_variants(request, model, chosen.value, version,
                                                      digest)
    quantize_answers = list(answers.values())

    # The control and the baseline, with repeats: each trial persisted under its key. A
    # baseline lacking required API features that one known change provides is re-planned
    # once with that change (the control's trials are reused by key).
    run = LadderRun(request=request, ctx=ctx, control=control, t_start=t_start,
                    key=lambda s: trial_key(s, workload, version, digest, gate),
                    fit=lambda c: _fit(model, hw, c, workload.target_concurrency))
    applied, first_gaps, superseded = None, [], []
    try:
        incumbent = measure_start(run, baseline, lambda t: _remedy_or_stop(t, run_dir, True))
    except _RemedyNeeded as need:
        logger.warning("the baseline lacks required API features; candidate change: %s",
                       need.remedy.change)
        applied, first_gaps = need.remedy, need.gaps
        superseded, run.trials = run.trials, []
        baseline = _with_changes(baseline, need.remedy.knob_changes)
        incumbent = measure_start(run, baseline,
                                  lambda t: _remedy_or_stop(t, run_dir, False))
        superseded = _superseded(superseded, run.trials)
    base_trial = incumbent.trials[0]

    # The ladder: every dimension in order from the baseline.
    facts = ladder_facts(model, hw, workload, base_trial, tuple(
        WeightVariant(fmt, str(path), BITS_PER_WEIGHT.get(fmt)) for fmt, path in
        variants.items()), "; ".join(weight_notes) or None, current_type(model))
    ladder, history = climb(run, incumbent, facts, weight_approvals(variants, answers))
    trials = run.trials

    # The winner is confirmed on the task sets against the reference's answers (the engine
    # started once for them and the standard scenarios).
    decision = confirm_winner(history, WinnerContext(
        request=request, workload=workload, model=model, run_dir=run_dir, control=control,
        reference_key=ref_key if reference else None, engine_version=version,
        model_digest=digest, tokenizer_path=_tokenizer_path(model)))
    chosen_inc, winner = decision.chosen, decision.winner
    exposure, expose_answers = expose_winner(request, winner, model.file_bytes, run_dir)
    c_values, control_is_baseline = control_values(run)
    gain = control_gain(c_values, chosen_inc.values, workload.objective, seed=request.seed,
                        control_is_baseline=control_is_baseline)
    control_fit = _fit(model, hw, control, workload.target_concurrency)
    gain.recommendation = control_recommendation(gain, control_fit.context_tokens,
                                                 model.native_context_tokens)

    # Report.
    control_trial = next((t for t in trials if t.role == "control"), base_trial)
    outcome_contract = ContractOutcome(
        control_gaps=contract_gaps(control_trial.contract, adapter.contract_remedies),
        first_baseline_gaps=first_gaps, applied=applied,
        baseline_gaps=contract_gaps(base_trial.contract, adapter.contract_remedies))
    report = OptimizationReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=hw, model=model,
        workload=workload, engine=chosen.value, engine_version=version,
        routing=[f"{r.engine.value}: {r.reason}" for r in routes], shortlist=shortlist,
        pruned=run.pruned, contract=base_trial.contract, contract_outcome=outcome_contract,
        quality_note=quality_note, trials=superseded + trials, ladder=ladder,
        winner_label=chosen_inc.winner_label,
        pareto=pareto_points(trials, workload.target_concurrency),
        closest_to_ceiling=closest_to_ceiling(trials, chosen_inc.label),
        winner_trial_id=winner.trial_id, winner_config=winner.config,
        winner_command=winner.engine.command, control_config=control,
        control_command=_control_command(trials, adapter, control),
        baseline_config=baseline, gain_vs_control=gain,
        winner_deployment=render_deployment(winner.config, port=8000, gpus=len(hw.gpus),
                                            name=f"infopt-{run_id}".lower()),
        scenarios=decision.scenarios, tasks=decision.tasks,
        approvals=download_answers + quantize_answers + expose_answers, exposure=exposure,
        notes=[f"skipped {s}" for s in skipped] + [
            f"required API feature `{f}`: no contract probe for it yet, so it was NOT checked"
            for f in request.api.features if f not in CONTRACT_PROBES] + [
            *weight_notes,
            "control: the engine's out-of-the-box defaults on the same workload; every gain is "
            "stated against it",
            "prompts carry unique heads (no prefix-cache reuse beyond the chat template); "
            "prompt lengths are exact by the engine's own tokenizer where it has a tokenize "
            "route (usage.prompt_tokens checked per request); output lengths forced with the "
            "engine's fields and checked against usage",
            f"tuning: {ladder.rule}"])
    path = write_report_task(report, str(run_dir))
    logger.info("report: %s", path)
    return report


def _superseded(before: list[Trial], after: list[Trial]) -> list[Trial]:
    """The first attempt's trials the re-planned run did not reuse (the baseline without the
    remedy: the report's evidence), renamed so no trial id appears twice."""
    reused = {t.key for t in after}
    return [t.model_copy(update={"trial_id": f"{t.trial_id}-before-remedy"})
            for t in before if t.key not in reused]


def _fit(model, hw, config, target_concurrency: int):
    """The fit of `config`, with its own weight file's size when it changes the weights."""
    if config.model_path != model.path and Path(config.model_path).is_file():
        model = model.model_copy(update={"file_bytes": Path(config.model_path).stat().st_size})
    return fit_candidates(model, hw, [config], target_concurrency)[0]
