"""When no allowed engine's baseline fits: the choices a person is asked for (or the request
decided ahead), each computed from the binding fit and checked by re-planning the run with the
change applied, so a choice that resumes the run is one the run's own plan takes. Pure: the
re-plan comes in as a function.

The kinds, in the order they are offered (the specification's "which constraint may change"):
an 8-bit KV cache (the engine's own first KV-precision candidate), a context shorter than the
native window (the longest that fits, at or above the workload's longest request), fewer
concurrent generations (the most that fit), then the ones this run cannot apply and so stop it:
more GPUs (the fit's tensor-parallel alternative) and another model (the weights alone exceed
the device), and stopping as it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infopt.analysis.monotone import last_true
from infopt.engines import adapter_for
from infopt.engines.rules import LadderFacts
from infopt.specs.approval import GateKind, GateRequest
from infopt.specs.base import InfoptError
from infopt.specs.decision import ChoiceKind, DecisionChoice, NoFitPolicy
from infopt.specs.ladder import Dimension
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import EngineFit
from infopt.specs.workload import longest_request
from infopt.tuning.nofit import binding, smallest_gap

GATE_KEY = "no-fit"

Replan = Callable[[OptimizeRequest], Any]  # the run's plan (infopt.tuning.plan_run.RunPlan)


def nofit_choices(request: OptimizeRequest, fits: list[EngineFit], replan: Replan
                  ) -> list[DecisionChoice]:
    """Every alternative that fits when the run is re-planned with it, then those that stop."""
    out = [c for c in (_kv(request, fits, replan), _context(request, replan),
                       _concurrency(request, replan)) if c is not None]
    return out + _stops(smallest_gap(fits))


def apply_choice(request: OptimizeRequest, choice: DecisionChoice) -> OptimizeRequest:
    """The request with the choice's changes merged in (dicts merge, the rest replaces)."""
    return _changed(request, choice.request_changes)


def _changed(request: OptimizeRequest, changes: dict[str, Any]) -> OptimizeRequest:
    return OptimizeRequest.model_validate(_merge(request.model_dump(mode="json"), changes))


def pre_decided(policy: NoFitPolicy, choices: list[DecisionChoice]
                ) -> tuple[DecisionChoice | None, str]:
    """(the choice the request decided, why) or (None, why) when a person must be asked. A
    change the request named but that is not among the alternatives stops the run."""
    if policy is NoFitPolicy.ASK:
        if not any(c.resumes for c in choices):
            return _stop_choice(choices), ("no change this run can apply would fit: nothing "
                                           "to ask")
        return None, "the request's on_no_fit is ask"
    if policy is NoFitPolicy.STOP:
        return _stop_choice(choices), "the request's on_no_fit is stop"
    found = next((c for c in choices if c.kind.value == policy.value and c.resumes), None)
    if found is None:
        return _stop_choice(choices), (f"the request's on_no_fit is {policy.value}, but no "
                                       f"{policy.value} change fits this host")
    return found, f"the request's on_no_fit is {policy.value}"


def decision_gate(fits: list[EngineFit], choices: list[DecisionChoice]) -> GateRequest:
    question = binding(smallest_gap(fits))
    lines = [f"**Nothing fits.** {question}.", "",
             "Choose which constraint may change (each was checked with the same memory "
             "model; the numbers are estimates):", ""]
    lines += [f"- `{c.key}`: {c.title}" + ("" if c.resumes else " (stops the run)")
              for c in choices]
    return GateRequest(kind=GateKind.DECIDE, key=GATE_KEY,
                       title="nothing fits: choose which constraint may change",
                       description="\n".join(lines),
                       details={c.key: c.title for c in choices})


def _kv(request: OptimizeRequest, fits: list[EngineFit], replan: Replan
        ) -> DecisionChoice | None:
    """The routed engine's own first KV-precision candidate (its ladder rule), as overrides."""
    routed = fits[0]
    rule = next((r for r in adapter_for(routed.engine).ladder
                 if r.dimension is Dimension.KV_PRECISION), None)
    if rule is None:
        return None
    got = rule.derive(routed.config, _bare_facts(request))
    if isinstance(got, str) or not got:
        return None
    cand = got[0]
    changes = {"base_overrides": {**request.base_overrides, **cand.changes}}
    plan = _viable(request, changes, replan)
    if plan is None:
        return None
    f = _routed_fit(plan)
    return DecisionChoice(
        key=f"kv-{cand.label.removeprefix('kv=').replace('_', '-')}".lower(),
        kind=ChoiceKind.KV_PRECISION, resumes=True, request_changes=changes,
        title=f"an 8-bit KV cache ({cand.label}): fits, {f.headroom_bytes / 2**30:.2f} GiB of "
              "KV headroom per device (estimate); the quality gate checks it at the workload's "
              "lengths, not at full context")


def _context(request: OptimizeRequest, replan: Replan) -> DecisionChoice | None:
    i, o, *_ = longest_request(request.workload)
    floor = max(16, i + o)
    if request.min_context_tokens is not None and request.min_context_tokens <= floor:
        return None  # the plan already tried every context the request accepts
    plan = _viable(request, {"min_context_tokens": floor}, replan)
    if plan is None:
        return None
    ctx = plan.viable[0].shape.context_tokens
    if ctx is None:  # fits at the native context once the floor is given: a layout did it
        return None
    changes = {"min_context_tokens": ctx}
    return DecisionChoice(
        key=f"context-{ctx}", kind=ChoiceKind.CONTEXT, resumes=True, request_changes=changes,
        title=f"serve a {ctx:,}-token context instead of the native window: the longest that "
              f"fits (estimate), at or above the workload's longest request ({floor:,} tokens)")


def _concurrency(request: OptimizeRequest, replan: Replan) -> DecisionChoice | None:
    target = request.workload.peak_active_generations
    # the fit shrinks with the load: the most that fits
    best = last_true(1, target - 1, lambda c: _viable(request, _at_concurrency(request, c),
                                                      replan) is not None)
    if best is None:
        return None
    return DecisionChoice(
        key=f"concurrency-{best}", kind=ChoiceKind.CONCURRENCY, resumes=True,
        request_changes=_at_concurrency(request, best),
        title=f"tune for {best} concurrent generation(s) instead of {target}: the most that "
              "fit at the full context (estimate)")


def _at_concurrency(request: OptimizeRequest, c: int) -> dict[str, Any]:
    arrival = request.workload.arrival.model_dump(mode="json")
    if arrival["kind"] == "closed_loop":
        arrival["concurrency"] = c
    elif arrival["kind"] == "sweep" and arrival["over"] == "concurrency":
        arrival["values"] = sorted({v for v in arrival["values"] if v <= c} | {c})
    return {"workload": {"peak_active_generations": c, "arrival": arrival}}


def _stops(best: EngineFit) -> list[DecisionChoice]:
    out = []
    if tp := next((a for a in best.fit.alternatives if a.startswith("tensor parallel")), None):
        out.append(DecisionChoice(key="more-gpus", kind=ChoiceKind.MORE_GPUS, resumes=False,
                                  title=f"more GPUs: {tp} (`infopt plan --gpu-count N` sizes "
                                        "it)"))
    if smaller := next((a for a in best.fit.alternatives if "smaller weight format" in a),
                       None):
        out.append(DecisionChoice(key="another-model", kind=ChoiceKind.ANOTHER_MODEL,
                                  resumes=False, title=f"another model: {smaller}"))
    out.append(DecisionChoice(key="stop", kind=ChoiceKind.STOP, resumes=False,
                              title="stop here with the no-fit report"))
    return out


def _stop_choice(choices: list[DecisionChoice]) -> DecisionChoice:
    return next(c for c in choices if c.kind is ChoiceKind.STOP)


def _viable(request: OptimizeRequest, changes: dict[str, Any], replan: Replan) -> Any:
    """The re-planned run with `changes` when it has an engine to tune; None otherwise (a
    change the request's own checks or the engine's device refuse is not offered)."""
    try:
        plan = replan(_changed(request, changes))
    except (InfoptError, ValueError):
        return None
    return plan if plan.viable else None


def _routed_fit(plan: Any) -> Any:
    engine = plan.viable[0].engine.value
    return next(e.fit for e in plan.fits if e.engine == engine)


def _bare_facts(request: OptimizeRequest) -> LadderFacts:
    """What a KV-precision rule reads: nothing measured yet."""
    return LadderFacts(target_concurrency=request.workload.peak_active_generations,
                       usable_cpus=1, physical_cores=None, gpu_count=0, mean_prompt_tokens=0,
                       mean_output_tokens=0, prefix_reuse=False, kv_read_share=None)


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in changes.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else v
    return out
