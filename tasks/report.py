"""Write the report files and the Prefect artifacts: the markdown report, a table of every
trial, and a link to each picture."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

from infopt.report.markdown import render_markdown
from infopt.report.plots import write_plots
from infopt.report.provenance import rules
from infopt.report.trial_table import trial_rows
from infopt.runs.rundir import write_report
from infopt.specs.results import NoFitReport, OptimizationReport


@task(name="write-report")
def write_report_task(report: OptimizationReport, run_dir: str) -> OptimizationReport:
    """report.json, report.md and its pictures (plots/), and the Prefect artifact; returns the
    report with its plots listed."""
    report = report.model_copy(update={"plots": write_plots(report, Path(run_dir)),
                                       "provenance": rules()})
    md = render_markdown(report)
    write_report(Path(run_dir), report, md)
    publish_artifacts(report, md, Path(run_dir))
    return report


def publish_artifacts(report: OptimizationReport | NoFitReport, md: str, run_dir: Path
                      ) -> None:
    """The run's Prefect artifacts (keys are stable, so each run adds a version of each)."""
    what = f"run {report.run_id}"
    create_markdown_artifact(markdown=md, key="infopt-report",
                             description=f"infopt optimization report, {what}")
    if not isinstance(report, OptimizationReport):  # a no-fit report: no trial, no picture
        return
    create_table_artifact(table=trial_rows(report), key="infopt-trials",
                          description=f"every trial of {what} (measured; units in the "
                                      "column names)")
    for p in report.plots:
        create_link_artifact(link=(run_dir / p.file).resolve().as_uri(), link_text=p.title,
                             key=f"infopt-plot-{p.name.replace('_', '-')}",
                             description=f"{p.title} ({p.series} series, {p.points} points; "
                                         f"{what})")
