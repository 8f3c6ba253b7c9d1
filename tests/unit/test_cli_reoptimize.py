"""`infopt accept` and `infopt reoptimize` refuse bad input before Prefect starts: one paragraph
naming what to change, exit status 2, no traceback, nothing written (typer's runner, in
process; the flow itself is tests/flows/test_reoptimize_flow.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infopt.cli import app
from tests.fixture_data import FIXTURES

REPORTS = FIXTURES / "reports"


def _run(*args):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("args, says", [
    (["reoptimize", "--repeats", "1"], "--repeats: Input should be greater than or equal to 2"),
    (["reoptimize", "--confirm-rounds", "9"], "--confirm-rounds"),
    (["reoptimize", "--executable", "/bin/x", "--engine-runtime", "b"], "not both"),
    (["reoptimize", "--executable", "/nonexistent/llama-server"], "not an executable file"),
    (["reoptimize"], "no accepted run in"),
    (["reoptimize", "--baseline-run", "missing"], "holds no report.json"),
    (["accept", "missing"], "holds no report.json"),
])
def test_bad_input_is_one_paragraph_and_exit_2(runs, args, says):
    before = sorted(p.name for p in runs.rglob("*"))
    out = _run(*args, "--runs-dir", str(runs))
    assert out.exit_code == 2, out.output
    assert says in out.output and "Traceback" not in out.output
    assert sorted(p.name for p in runs.rglob("*")) == before  # nothing written


def test_a_winner_without_a_measurement_is_refused(runs):
    report = json.loads((runs / "r1" / "report.json").read_text())
    report["winner_trial_id"] = "t99-never-ran"
    (runs / "r1" / "report.json").write_text(json.dumps(report))
    out = _run("reoptimize", "--baseline-run", "r1", "--runs-dir", str(runs))
    assert out.exit_code == 2 and "accept a run whose winner was measured" in out.output


def test_accept_points_at_the_run(runs):
    out = _run("accept", "r1", "--runs-dir", str(runs))
    assert out.exit_code == 0, out.output
    assert "accepted run r1: llamacpp" in out.output
    assert json.loads((runs / "accepted.json").read_text())["run_id"] == "r1"
