"""The re-optimization's pure parts on a real optimize report (tests/fixtures/reports): what is
re-measured (winner, runner-up, their stored values), the accepted-run pointer, the package
index check over real HTTP (tests/indexserver.py), and the words of the report."""

from __future__ import annotations

import shutil
import statistics

import pytest

from infopt.engines import adapter_for
from infopt.engines.releases import check_release
from infopt.report.reoptimize_text import render_reoptimize, summary
from infopt.runs.accepted import accept, accepted, load_optimization
from infopt.specs.base import InputError
from infopt.specs.reoptimize import (
    ReleaseCheck,
    ReoptimizeReport,
    ReoptimizeRequest,
    ReoptimizeRound,
)
from infopt.specs.results import OptimizationReport
from infopt.tuning.regression import judge
from infopt.tuning.remeasure import config_id, picks, stored_spread_groups
from tests.fixture_data import FIXTURES, require
from tests.indexserver import FakeIndex

REPORTS = FIXTURES / "reports"


@pytest.fixture(scope="module")
def stored() -> OptimizationReport:
    return OptimizationReport.model_validate_json(
        require(REPORTS / "llamacpp-optimize-report.json").read_text())


def test_the_winner_and_the_best_other_configuration_are_re_measured(stored):
    winner, runner = picks(stored)
    by_id = {t.trial_id: t for t in stored.trials}
    assert winner.slot == "winner" and winner.label == stored.winner_label
    assert stored.winner_trial_id in winner.stored_trial_ids
    assert config_id(winner.config) == config_id(by_id[stored.winner_trial_id].config)
    assert winner.stored == [by_id[i].objective_value for i in winner.stored_trial_ids]
    # The runner-up: the best median of the other configurations (throughput: higher).
    others = {}
    for t in stored.trials:
        if config_id(t.config) != config_id(winner.config):
            others.setdefault(config_id(t.config), []).append(t.objective_value)
    best = max(others.values(), key=statistics.median)
    assert runner.slot == "runner-up" and runner.stored == best
    # Every repeated configuration feeds the noise estimate.
    assert sorted(map(sorted, stored_spread_groups(stored))) == sorted(
        map(sorted, [*others.values(), winner.stored]))


def test_a_report_whose_winner_was_not_measured_is_refused(stored):
    broken = stored.model_copy(update={"winner_trial_id": "t99-nothing"})
    with pytest.raises(ValueError, match="no measured objective"):
        picks(broken)


def test_accept_points_at_a_finished_run_and_refuses_others(tmp_path):
    run = tmp_path / "20261202-130649-1142"
    run.mkdir()
    shutil.copy(REPORTS / "llamacpp-optimize-report.json", run / "report.json")
    with pytest.raises(InputError, match="request.json is missing"):
        load_optimization(run)
    shutil.copy(REPORTS / "llamacpp-optimize-request.json", run / "request.json")
    with pytest.raises(InputError, match="no accepted run"):
        accepted(tmp_path)
    acc = accept(tmp_path, run.name, by="test")
    assert accepted(tmp_path) == acc and acc.engine == "llamacpp"
    with pytest.raises(InputError, match="holds no report.json"):
        accept(tmp_path, "not-a-run", by="test")
    assert accepted(tmp_path).run_id == run.name  # a refused accept changes nothing
    (tmp_path / "accepted.json").write_text("{not json")
    with pytest.raises(InputError, match="corrupt"):
        accepted(tmp_path)
    (run / "report.json").write_text('{"kind": "no-fit"}')
    with pytest.raises(InputError, match="not an optimize report"):
        load_optimization(run)


def test_the_index_says_whether_a_newer_release_is_out(tmp_path):
    exe = tmp_path / "0.3.36" / "bin" / "llama-server"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    (tmp_path / "0.3.36" / ".complete").write_text("llama-cpp-python==0.3.36 cpu=abc\n")
    llama = adapter_for("llamacpp")
    with FakeIndex({"llama-cpp-python": ["0.3.36", "0.3.37"]}) as idx:
        newer = check_release(llama, str(exe), idx.url)
        assert (newer.installed, newer.newest, newer.newer_available) == (
            "0.3.36", "0.3.37", True)
        idx.releases["llama-cpp-python"] = ["0.3.36"]
        same = check_release(llama, str(exe), idx.url)
        assert same.newer_available is False and "is the newest" in same.note
        del idx.releases["llama-cpp-python"]
        missing = check_release(llama, str(exe), idx.url)
        assert missing.newest is None and "did not answer" in missing.note and "404" in \
            missing.note
    down = check_release(llama, str(exe), idx.url)  # the server is gone: a note, no failure
    assert down.newest is None and "ConnectError" in down.note


def _report(outcome: str, rounds: list[ReoptimizeRound]) -> ReoptimizeReport:
    return ReoptimizeReport(
        run_id="reopt-1", created_at="2026-12-02T13:00:00+0000", baseline_run="base",
        engine="llamacpp", stored_version="a", installed_version="b", upgraded=True,
        release=ReleaseCheck(package="llama-cpp-python", installed="0.3.36",
                             index_url="http://127.0.0.1/pypi", note="note"),
        objective="throughput", higher_is_better=True, configs=["winner"], rounds=rounds,
        outcome=outcome, summary="")


def test_the_summary_and_markdown_state_the_ratio_its_interval_and_the_rule():
    check = judge("winner", [60.0, 62.0], [38.0, 39.0], [[60.0, 62.0], [38.0, 39.0]],
                  higher_is_better=True, bound=0.95, confidence=0.95)
    rounds = [ReoptimizeRound(round=1, checks=[check]), ReoptimizeRound(round=2,
                                                                        checks=[check])]
    req = ReoptimizeRequest()
    rep = _report("regression", rounds)
    text = summary(rep, req)
    assert "REGRESSION confirmed over 2 round(s)" in text and f"{check.ratio:.3f}x" in text
    assert "infopt optimize --target runs/base/request.json" in text
    md = render_reoptimize(rep.model_copy(update={"summary": text}), req)
    assert "## Round 2" in md and check.rule in md and "wholly under 0.95" in md
    assert "| winner | 60, 62 | 38, 39 |" in md
    assert "no upgrade" in summary(_report("no upgrade", []), req)


def test_a_request_names_one_build():
    with pytest.raises(ValueError, match="not both"):
        ReoptimizeRequest(executable="/x", engine_runtime="y")
    with pytest.raises(ValueError):
        ReoptimizeRequest(repeats=1)  # one start cannot state the noise


def test_a_run_stored_before_the_steady_state_window_is_compared_on_its_own_definition(stored):
    """The stored fixture predates the steady-state throughput (its levels carry none): a fresh
    trial is compared on the whole window's rate, as the stored values were; a fresh trial of
    a run that stored steady-state rates keeps its objective."""
    from infopt.tuning.remeasure import as_stored

    winner, _ = picks(stored)
    assert winner.steady is False
    by_id = {t.trial_id: t for t in stored.trials}
    old = by_id[stored.winner_trial_id]
    target = old.benchmark.workload.target_scenario
    level = old.benchmark.scenario(target).level
    fresh = old.model_copy(update={"objective_value": 999.0})  # as if read from the window
    assert as_stored(fresh, winner) == level.output_tokens_per_s
    assert as_stored(fresh, winner.__class__(**{**winner.__dict__, "steady": True})) == 999.0
