"""Before any engine starts: does each planned engine's baseline fit this machine? An engine
whose baseline does not is dropped (said in the notes); when none fits, the run writes its
no-fit report (the binding constraint and the smallest alternatives) and stops with it."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger

from flows.engine_tuning import fit_of, start_configs
from infopt.report.nofit_text import nofit_markdown
from infopt.report.provenance import rules
from infopt.runs.rundir import write_report
from infopt.specs.results import EngineFit, NoFitReport
from infopt.tuning.nofit import NothingFits, binding, nothing_fits_message, smallest_gap


def viable_plans(request, plans: list, hw, workload, run_dir: Path, run_id: str
                 ) -> tuple[list, list[str]]:
    """(the plans whose baseline fits, notes on the others); NothingFits when none does."""
    fits = []
    for engine, model, *_ in plans:
        _, baseline = start_configs(request, engine, model, hw)
        fits.append(EngineFit(engine=engine.value, config=baseline,
                              fit=fit_of(model, hw, baseline, workload.target_concurrency)))
    kept = [p for p, f in zip(plans, fits, strict=True) if f.fit.fits]
    notes = [f"{f.engine} not tuned: its baseline does not fit ({binding(f)})"
             for f in fits if not f.fit.fits]
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
