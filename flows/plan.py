"""The `plan` deployment: memory fit and roofline ceilings for a model on a device and a load,
without starting an engine (what `infopt plan` prints), as a flow whose parameters are a
PlanRequest; the plan is its return value and a markdown artifact."""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from infopt.costmodel.plan import PlanResult, make_plan
from infopt.engines.plan_request import fit_request, load_model
from infopt.model.hub import resolve_token
from infopt.report.plan_text import render_plan
from infopt.specs.plan_request import PlanRequest


@flow(name="plan", log_prints=False)
def plan(request: PlanRequest) -> PlanResult:
    insp, exact = load_model(request.model, request.revision, request.endpoint,
                             resolve_token())
    hw = None
    if request.gpu is None:
        from infopt.hardware.host import inventory

        hw = inventory()  # this worker's own hardware: measures bandwidth and GEMM (~3 s)
    result = make_plan(fit_request(request, insp, exact, hw),
                       prompt_tokens=request.input_tokens,
                       tokens_per_step=request.spec_tokens_per_step,
                       output_tokens=request.output_tokens)
    text = render_plan(result)
    create_markdown_artifact(markdown=f"```\n{text}\n```", key="infopt-plan",
                             description=f"fit and ceilings of {request.model}")
    get_run_logger().info("plan of %s: %s", request.model,
                          "fits" if result.fits else "does not fit")
    return result
