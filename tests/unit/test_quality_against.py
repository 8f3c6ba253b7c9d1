"""The report says up front when its quality gate judged against the served checkpoint itself
(issue 50): every change is then measured relative to the served weights, not to the model's
full precision. Rendered from the recorded llama.cpp report."""

from __future__ import annotations

from infopt.report.markdown import render_markdown
from infopt.specs.results import OptimizationReport
from tests.fixture_data import FIXTURES, require

REPORT = OptimizationReport.model_validate_json(
    require(FIXTURES / "reports" / "llamacpp-optimize-report.json").read_text())


def _head(r: OptimizationReport) -> str:
    return render_markdown(r).split("## Runnable configuration")[0]


def test_served_weights_are_said_up_front_and_a_higher_precision_reference_is_not():
    served = _head(REPORT.model_copy(update={"quality_against": "served"}))
    assert "Quality relative to the served weights only" in served
    for other in (None, "the shortlisted Q8_0 from org/m-GGUF (8.5 bits per weight, ...)"):
        assert "served weights only" not in _head(
            REPORT.model_copy(update={"quality_against": other}))
