"""`infopt report RUN_ID`: report.md and the pictures of a finished run, re-rendered from its
report.json and the records files beside it (after an infopt upgrade, or when the pictures
were deleted). Nothing is measured again."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from infopt.report.markdown import render_markdown
from infopt.report.nofit_text import nofit_markdown
from infopt.report.plots import write_plots
from infopt.report.provenance import rules
from infopt.runs.rundir import locate_run, write_report
from infopt.specs.base import InputError
from infopt.specs.results import NoFitReport, OptimizationReport


def load_run(run_id: str, runs_dir: str | None = None
             ) -> tuple[Path, OptimizationReport | NoFitReport]:
    """(the run's folder, its report), or InputError saying what to pass. `run_id`: the id, or
    the run folder's path (infopt.runs.rundir.locate_run)."""
    root, run_id = locate_run(run_id, runs_dir)
    run_dir = root / run_id
    path = run_dir / "report.json"
    if not path.is_file():
        why = ("it has no report.json yet: a run still in progress or interrupted; "
               f"`infopt optimize --resume {run_id}` finishes it" if run_dir.is_dir() else
               "no such folder")
        raise InputError(f"no finished run '{run_id}' under {root} ({why}). Give a run id "
                         "printed by `infopt optimize` (its folder under --runs-dir or "
                         "$INFOPT_RUNS_DIR), or the run folder's path (runs/<id>).")
    try:
        text = path.read_text()
        if '"kind": "no-fit"' in text[:200]:  # a run that stopped before any engine started
            return run_dir, NoFitReport.model_validate_json(text)
        return run_dir, OptimizationReport.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"{path} is not a report this infopt can read "
                         f"({'.'.join(map(str, first['loc']))}: {first['msg']}): written by "
                         "another version, or edited by hand.") from None


def load_measured_run(run_id: str, runs_dir: str | None = None
                      ) -> tuple[Path, OptimizationReport]:
    """load_run for what needs measurements: a run that stopped before any engine started
    (nothing fit) is refused in one paragraph."""
    run_dir, report = load_run(run_id, runs_dir)
    if isinstance(report, NoFitReport):
        raise InputError(f"run '{run_dir.name}' measured nothing: it stopped before any engine "
                         f"started ({report.binding}). Give a run whose report has trials.")
    return run_dir, report


def rerender(run_id: str, runs_dir: str | None = None
             ) -> tuple[Path, OptimizationReport | NoFitReport, str]:
    """(report.md's path, the report with its plots, the markdown)."""
    run_dir, report = load_run(run_id, runs_dir)
    if isinstance(report, NoFitReport):
        report = report.model_copy(update={"provenance": rules()})
        text = nofit_markdown(report)
        md, _ = write_report(run_dir, report, text)
        return md, report, text
    report = report.model_copy(update={"plots": write_plots(report, run_dir),
                                       "provenance": rules()})
    text = render_markdown(report)
    md, _ = write_report(run_dir, report, text)
    return md, report, text
