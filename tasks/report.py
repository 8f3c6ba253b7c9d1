"""Write the report files and the Prefect markdown artifact."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact

from infopt.report.markdown import render_markdown
from infopt.report.plots import write_plots
from infopt.report.rundir import write_report
from infopt.specs.results import OptimizationReport


@task(name="write-report")
def write_report_task(report: OptimizationReport, run_dir: str) -> OptimizationReport:
    """report.json, report.md and its pictures (plots/), and the Prefect artifact; returns the
    report with its plots listed."""
    report = report.model_copy(update={"plots": write_plots(report, Path(run_dir))})
    md = render_markdown(report)
    write_report(Path(run_dir), report, md)
    create_markdown_artifact(markdown=md, key="infopt-report",
                             description=f"infopt optimization report, run {report.run_id}")
    return report
