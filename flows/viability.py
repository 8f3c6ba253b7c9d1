"""Before any engine starts: does each planned engine's baseline fit this machine? An engine
whose baseline does not is dropped (said in the notes); when none fits, the run writes its
no-fit report (the binding constraint and the smallest alternatives) and stops with it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from prefect import get_run_logger

from flows.engine_tuning import fit_of, start_configs
from infopt.engines import adapter_for
from infopt.model.profile import weights_profile
from infopt.report.nofit_text import nofit_markdown
from infopt.report.provenance import rules
from infopt.runs.rundir import write_report
from infopt.specs.fit import MemoryFit
from infopt.specs.results import EngineFit, NoFitReport
from infopt.specs.workload import longest_request
from infopt.tuning.candidates import fit_config
from infopt.tuning.nofit import NothingFits, binding, nothing_fits_message, smallest_gap
from infopt.tuning.start_shape import StartShape, start_shape, widest_shape


def viable_plans(request, plans: list, hw, workload, run_dir: Path, run_id: str
                 ) -> tuple[list, list[str]]:
    """(the plans that fit, each with the StartShape it starts in as a fifth element; notes on
    the others and on every start that is not one device at the native context); NothingFits
    when none fits."""
    fits, kept, notes = [], [], []
    for plan in plans:
        engine, model, *_ = plan
        shape = _start_shape(request, engine, model, hw, workload)
        # Nothing fits: its numbers on the host's widest layout, where it comes closest.
        sized = shape or _widest(request, engine, model, hw)
        _, baseline = start_configs(request, engine, model, hw, sized)
        fits.append(EngineFit(engine=engine.value, config=baseline,
                              fit=fit_of(model, hw, baseline, workload.target_concurrency)))
        if shape is None:
            notes.append(f"{engine.value} not tuned: its baseline does not fit "
                         f"({binding(fits[-1])})")
            continue
        kept.append((*plan, shape))
        if shape.note:
            get_run_logger().warning("%s: %s", engine.value, shape.note)
            notes.append(f"{engine.value}: {shape.note}")
    if kept:
        return kept, notes
    report = NoFitReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), hardware=hw,
        model=plans[0][1], workload=workload, engines=fits,
        binding=binding(smallest_gap(fits)), provenance=rules(),
        notes=["fits are estimates (infopt.costmodel.fit) made before any engine started; "
               "every alternative was checked with the same memory model and none was applied"])
    md, _ = write_report(run_dir, report, nofit_markdown(report))
    get_run_logger().error("nothing fits: %s", report.binding)
    raise NothingFits(nothing_fits_message(fits, str(md)))


def _widest(request, engine, model, hw) -> StartShape | None:
    if not hw.gpus:
        return None
    native = start_configs(request, engine, model, hw)[1]
    return widest_shape(model.inspection, len(hw.gpus), adapter_for(engine).layout_knobs,
                        native)


def _start_shape(request, engine, model, hw, workload) -> StartShape | None:
    """The shape `engine` starts in (infopt.tuning.start_shape), with the control's own fit
    checked in it; None when nothing fits."""
    def baseline_at(context: int):
        return start_configs(request, engine, model, hw, StartShape(context_tokens=context))[1]

    def fits(config) -> MemoryFit:  # pure: a search makes many fits, not a task run each
        return fit_config(weights_profile(model, config.model_path), hw, config,
                          workload.target_concurrency)

    prompt, output, *_ = longest_request(workload.traffic)
    shape = start_shape(model.inspection, len(hw.gpus),
                        adapter_for(engine).layout_knobs if hw.gpus else None,
                        model.native_context_tokens, request.min_context_tokens,
                        prompt + output, baseline_at, fits)
    if shape is None or not shape.note:
        return shape
    control, _ = start_configs(request, engine, model, hw, shape)
    if fits(control).fits:
        return shape
    return replace(shape, control_is_baseline=True, note=(
        f"{shape.note}; the engine's defaults do not fit even there: the baseline stands in "
        "for the control"))
