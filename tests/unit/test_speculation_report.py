"""The report's speculative-decoding section, on a recorded run's report: each speculative
trial's drafted and accepted tokens per scenario, "not reported" where the engine gave no
per-request counts (this recording predates reading them), and the trial table's column."""

from __future__ import annotations

from infopt.report.markdown import render_markdown
from infopt.report.trial_table import trial_rows
from infopt.specs.results import OptimizationReport
from tests.fixture_data import FIXTURES, require

REPORT = FIXTURES / "reports" / "llamacpp-optimize-report.json"


def _with_drafts(report: OptimizationReport) -> OptimizationReport:
    """The recorded report with its first measured tuning trial made a draft-model trial that
    drafted 40 tokens per scenario and had 30 accepted."""
    trials = list(report.trials)
    i = next(i for i, t in enumerate(trials) if t.benchmark is not None and t.role == "tuning")
    t = trials[i]
    assert t.benchmark is not None
    scenarios = [s.model_copy(update={"level": s.level.model_copy(update={
        "draft_tokens_total": 40, "draft_tokens_accepted_total": 30})})
        for s in t.benchmark.scenarios]
    trials[i] = t.model_copy(update={
        "dimension": "speculative", "value": "spec=draft_model-q2.gguf-4",
        "benchmark": t.benchmark.model_copy(update={"scenarios": scenarios})})
    return report.model_copy(update={"trials": trials})


def test_acceptance_per_scenario_beside_the_objective():
    report = _with_drafts(OptimizationReport.model_validate_json(require(REPORT).read_text()))
    md = render_markdown(report)
    section = md.split("## Speculative decoding (measured)")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if "spec=draft_model-q2.gguf-4" in line]
    assert rows and all("| 40 | 30 | 75.0% |" in row for row in rows)
    assert "acceptance explains the outcome, it does not decide it" in section
    table = {r["change"]: r for r in trial_rows(report)}
    assert table["spec=draft_model-q2.gguf-4"]["draft tokens accepted (%)"] == 75.0


def test_no_section_without_a_speculative_trial():
    report = OptimizationReport.model_validate_json(require(REPORT).read_text())
    report = report.model_copy(update={"trials": [t for t in report.trials
                                                  if t.dimension != "speculative"]})
    assert "## Speculative decoding" not in render_markdown(report)
