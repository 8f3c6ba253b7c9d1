"""The report's speculative-decoding section, on a recorded run's report: each speculative
trial's drafted and accepted tokens per scenario, "not reported" where the engine gave no
per-request counts (this recording predates reading them), and the trial table's column."""

from __future__ import annotations

import pytest

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


def test_a_speculative_trials_decode_rate_is_its_time_per_token():
    """A verified draft's tokens arrive together, so 1 / median ITL would read thousands of
    tokens/s (seen on llama.cpp: 2,327 against a 127 tok/s ceiling); the decode rate of a
    speculative configuration is 1 / TPOT p50, and its trials stay out of the calibration."""
    from infopt.specs.serving import with_knob
    from infopt.tuning.candidates import level_ceilings

    report = OptimizationReport.model_validate_json(require(REPORT).read_text())
    t = next(t for t in report.trials if t.benchmark is not None and t.role == "baseline")
    drafting = with_knob(t.config, "spec_type", "ngram-simple")
    context = 64
    plain = level_ceilings(report.model, report.hardware, t.config, t.benchmark, context)
    spec = level_ceilings(report.model, report.hardware, drafting, t.benchmark, context)
    assert plain and spec and all("ITL p50" in r.metric for r in plain)
    assert all("TPOT p50, speculative" in r.metric for r in spec)
    lvl = t.benchmark.levels[0]
    batch = spec[0].measured * lvl.tpot_s.p50  # the sequences it ran, a whole number
    assert batch == pytest.approx(round(batch)) and 1 <= round(batch) <= lvl.concurrency
    assert spec[0].measured < plain[0].measured * 10  # not a burst's near-zero gap
