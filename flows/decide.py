"""When no allowed engine's baseline fits: ask which constraint may change instead of ending
(issue 49). The choices are computed and checked by re-planning (infopt.tuning.nofit_choices);
the request may have decided ahead (`on_no_fit`); otherwise the run pauses at a decision gate
(flows/gate.decide, answered in the Prefect UI or with `infopt approve --choice`) while the
submitted hub research goes on (flows/research.py). The decision is kept in the run folder, so
a resumed run applies it without asking again. A choice that stops the run (stop, more GPUs,
another model, nobody answering) ends it with the no-fit report, the decision in it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from prefect import get_run_logger

from flows.gate import decide
from flows.research import Research
from infopt.report.nofit_text import nofit_markdown
from infopt.report.provenance import rules
from infopt.runs.outcomes import Target
from infopt.runs.rundir import atomic_write, write_report
from infopt.specs.approval import AnswerSource, GateAnswer, GateKind
from infopt.specs.decision import ConstraintDecision
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import NoFitReport
from infopt.tuning.nofit import NothingFits, binding, nothing_fits_message, smallest_gap
from infopt.tuning.nofit_choices import (
    GATE_KEY,
    apply_choice,
    decision_gate,
    nofit_choices,
    pre_decided,
)
from infopt.tuning.plan_run import RunPlan, plan_run


def replan(target: Target, request: OptimizeRequest) -> RunPlan:
    return plan_run(request, target.hw, target.model, list(target.others),
                    request.tuning_workload())


def settle_nofit(request: OptimizeRequest, target: Target, run_dir: Path, run_id: str,
                 research: Research) -> tuple[OptimizeRequest, Target]:
    """(the request with the chosen change, the target re-planned with it); raises NothingFits
    (after writing the no-fit report) when the choice stops the run."""
    saved = run_dir / "decisions" / f"{GATE_KEY}.json"
    if saved.is_file():  # a resumed run: decided already
        decision = ConstraintDecision.model_validate_json(saved.read_text())
        get_run_logger().info("no-fit decided earlier in this run: %s", decision.chosen.key)
    else:
        decision = _decide(request, target, research)
        saved.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(saved, decision.model_dump_json(indent=2))
    if not decision.chosen.resumes:
        stop_nothing_fits(target, request, run_dir, run_id, decision)
    decided = apply_choice(request, decision.chosen)
    plan = replan(target, decided)
    if not plan.viable:  # the choice was checked with this same plan when it was offered
        stop_nothing_fits(target, request, run_dir, run_id, decision)
    log = get_run_logger()
    log.warning("nothing fit; going on with %s: %s", decision.chosen.key, decision.chosen.title)
    for p in plan.viable:
        if p.shape.note:
            log.warning("%s: %s", p.engine.value, p.shape.note)
    return decided, replace(target, plan=plan, decisions=[*target.decisions, decision])


def _decide(request: OptimizeRequest, target: Target, research: Research
            ) -> ConstraintDecision:
    fits = list(target.plan.fits)
    choices = nofit_choices(request, fits, lambda r: replan(target, r))
    gate = decision_gate(fits, choices)
    chosen, why = pre_decided(request.on_no_fit, choices)
    if chosen is not None:
        answer = GateAnswer(kind=GateKind.DECIDE, key=gate.key, title=gate.title,
                            approved=True, source=AnswerSource.PRE_DECIDED, reason=why,
                            answered_by="the request" if request.on_no_fit.value != "ask"
                            else "infopt (nothing to ask)", choice=chosen.key,
                            answered_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        return ConstraintDecision(gate_key=gate.key, question=binding(smallest_gap(fits)),
                        choices=choices, answer=answer, chosen=chosen)
    keys = [c.key for c in choices]
    answer = research.during(gate.key, lambda: decide(gate, keys, "stop",
                                                      request.approval_timeout_s),
                             lambda a: True)
    picked = next(c for c in choices if c.key == answer.choice)
    return ConstraintDecision(gate_key=gate.key, question=binding(smallest_gap(fits)), choices=choices,
                    answer=answer, chosen=picked, wait=research.waits[-1])


def stop_nothing_fits(target: Target, request: OptimizeRequest, run_dir: Path, run_id: str,
                      decision: ConstraintDecision | None = None) -> None:
    """No planned engine's baseline fits: the no-fit report (the binding constraint, the
    smallest alternatives, the decision when one was asked) is written and the run stops."""
    fits = list(target.plan.fits)
    said = ([] if decision is None else
            [f"asked which constraint may change; the answer was {decision.chosen.key} "
             f"({decision.answer.source.value}): {decision.chosen.title}"])
    report = NoFitReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=target.hw,
        model=target.model, workload=request.tuning_workload(), engines=fits,
        binding=binding(smallest_gap(fits)), provenance=rules(), decision=decision,
        notes=["fits are estimates (infopt.costmodel.fit) made before any engine started; "
               "every alternative was checked with the same memory model and none was "
               "applied", *said])
    md, _ = write_report(run_dir, report, nofit_markdown(report))
    get_run_logger().error("nothing fits: %s", report.binding)
    raise NothingFits(nothing_fits_message(fits, str(md)))
