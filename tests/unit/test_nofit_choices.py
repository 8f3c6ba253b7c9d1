"""The no-fit decision's choices (issue 49): computed from the binding fit and checked by
re-planning the run with each change, on the recorded 1x L40S host and the real Llama-3.1-8B
architecture (bf16 weights: 16 GB beside a 131,072-token KV per sequence); what the request
decides ahead; the decision gate's form."""

from __future__ import annotations

import json

import pytest

from flows.gate import _choices, decision_input
from infopt.model.classify import classify_config
from infopt.specs.decision import ChoiceKind, NoFitPolicy
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.request import OptimizeRequest
from infopt.tuning.nofit_choices import apply_choice, decision_gate, nofit_choices, pre_decided
from infopt.tuning.plan_run import plan_run
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import MODEL_CONFIGS

NAME = "meta-llama__Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def host():
    hw = recorded_inventory("l40s_1x")
    cfg = json.loads((MODEL_CONFIGS / f"{NAME}.json").read_text())
    model = ModelProfile(path="/m", format=ModelFormat.HF, file_bytes=0, source="test",
                         inspection=classify_config(cfg, model=NAME))
    return hw, model


def _request(concurrency: int, **kw) -> OptimizeRequest:
    return OptimizeRequest.model_validate({
        "engines": ["vllm"], "workload": {
            "name": "w", "input_lengths": {"kind": "fixed", "tokens": 1024},
            "output_lengths": {"kind": "fixed", "tokens": 256}, "measured_requests": 8,
            "peak_active_generations": concurrency,
            "arrival": {"kind": "closed_loop", "concurrency": concurrency}}, **kw})


def _choices_for(host, request):
    hw, model = host

    def replan(r):
        return plan_run(r, hw, model, [], r.tuning_workload(), locate=lambda n: "/bin/true")

    plan = replan(request)
    assert not plan.viable  # the planted no-fit
    return nofit_choices(request, list(plan.fits), replan), replan, plan


def test_each_choice_that_resumes_is_one_the_run_plan_takes(host):
    request = _request(2)
    choices, replan, _ = _choices_for(host, request)
    kinds = [c.kind for c in choices]
    assert kinds == [ChoiceKind.KV_PRECISION, ChoiceKind.CONTEXT, ChoiceKind.CONCURRENCY,
                     ChoiceKind.MORE_GPUS, ChoiceKind.STOP]
    for c in choices:
        if c.resumes:
            assert replan(apply_choice(request, c)).viable, c.key
        else:
            assert c.request_changes == {}
    kv, context, concurrency = choices[:3]
    assert kv.key == "kv-fp8" and kv.request_changes == {"base_overrides":
                                                         {"kv_cache_dtype": "fp8"}}
    ctx = context.request_changes["min_context_tokens"]
    assert context.key == f"context-{ctx}" and 1280 <= ctx < 131072 and ctx % 256 == 0
    # the longest: one step longer does not fit
    longer = apply_choice(request, context.model_copy(
        update={"request_changes": {"min_context_tokens": ctx + 256}}))
    assert not replan(longer).viable
    assert concurrency.key == "concurrency-1"
    decided = apply_choice(request, concurrency)
    assert decided.workload.peak_active_generations == 1
    assert decided.workload.arrival.concurrency == 1


def test_a_change_that_would_still_be_short_is_not_offered(host):
    """At three sequences, fp8 KV is still 0.34 GiB short on the L40S (the fit says so): only
    what fits is a choice."""
    choices, _, plan = _choices_for(host, _request(3))
    assert any("still" in a and "short" in a for a in plan.fits[0].fit.alternatives)
    assert ChoiceKind.KV_PRECISION not in [c.kind for c in choices]
    assert ChoiceKind.CONTEXT in [c.kind for c in choices]


def test_the_most_concurrent_generations_that_fit_by_bisection(host):
    """At 32 the bisection lands on the most that fit (1 at the full context here), and the
    choice applied to the request keeps the closed loop at the same load."""
    choices, replan, _ = _choices_for(host, _request(32))
    c = next(c for c in choices if c.kind is ChoiceKind.CONCURRENCY)
    n = c.request_changes["workload"]["peak_active_generations"]
    assert replan(apply_choice(_request(32), c)).viable
    assert not replan(_request(n + 1)).viable


def test_base_overrides_merge_and_the_request_is_revalidated(host):
    request = _request(2, base_overrides={"enforce_eager": True})
    choices, *_ = _choices_for(host, request)
    kv = next(c for c in choices if c.kind is ChoiceKind.KV_PRECISION)
    assert apply_choice(request, kv).base_overrides == {"enforce_eager": True,
                                                        "kv_cache_dtype": "fp8"}


def test_what_the_request_decides_ahead(host):
    choices, *_ = _choices_for(host, _request(2))
    assert pre_decided(NoFitPolicy.ASK, choices) == (None, "the request's on_no_fit is ask")
    chosen, why = pre_decided(NoFitPolicy.CONTEXT, choices)
    assert chosen is not None and chosen.kind is ChoiceKind.CONTEXT and "context" in why
    chosen, why = pre_decided(NoFitPolicy.STOP, choices)
    assert chosen is not None and chosen.key == "stop"
    only_stops = [c for c in choices if not c.resumes]
    chosen, why = pre_decided(NoFitPolicy.KV_PRECISION, only_stops)
    assert chosen is not None and chosen.key == "stop" and "no kv_precision change fits" in why
    chosen, why = pre_decided(NoFitPolicy.ASK, only_stops)
    assert chosen is not None and chosen.key == "stop" and "nothing to ask" in why


def test_the_gate_form_offers_exactly_the_computed_keys(host):
    choices, _, plan = _choices_for(host, _request(2))
    gate = decision_gate(list(plan.fits), choices)
    assert gate.kind.value == "decide" and gate.key == "no-fit"
    for c in choices:
        assert f"`{c.key}`" in gate.description
    assert "GiB short" in gate.description  # the binding constraint, in numbers
    form = decision_input([c.key for c in choices])
    assert _choices(form.model_json_schema()) == tuple(c.key for c in choices)
    with pytest.raises(ValueError):
        form(choice="not-offered")
