"""The regression power run's pure parts (bench/verdicts_power.py, bench/verdicts_bench.py's
command line) with planted numbers, no engine: the pace of a build planted a given share slower
(worked by hand), the order of the conditions, a `reoptimize` report as a decision, and the
decisions tabulated into misses, false alarms, exact intervals and rounds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import verdicts_power as vp
from infopt.specs.reoptimize import (
    RegressionCheck,
    ReleaseCheck,
    ReoptimizeReport,
    ReoptimizeRound,
)


@pytest.mark.parametrize(("slowdown", "factor"),
                         [(0.0, 1.0), (0.10, 10 / 9), (0.25, 4 / 3), (0.50, 2.0)])
def test_a_slowdown_is_a_pace_that_many_times_later(slowdown, factor):
    assert vp.pace_factor(slowdown) == pytest.approx(factor)


@pytest.mark.parametrize("slowdown", [-0.1, 1.0, 1.5])
def test_a_slowdown_outside_0_to_1_is_refused(slowdown):
    with pytest.raises(ValueError, match="share of the performance lost"):
        vp.pace_factor(slowdown)


def test_the_baseline_pace_is_the_flow_tests_pace():
    # tests/flows/test_reoptimize_flow.py: ttft = unit, itl = 2 x unit / tokens at factor 1.
    assert vp.paced_times(0.6, 16, 0.0) == pytest.approx((0.6, 0.075))
    # 25% slower: every time 4/3 of that (0.8 s and 0.1 s).
    assert vp.paced_times(0.6, 16, 0.25) == pytest.approx((0.8, 0.1))


@pytest.mark.parametrize("slowdown", vp.SLOWDOWNS)
@pytest.mark.parametrize("events", [1, 2, 17, 19, 40])
def test_the_planted_ratio_holds_for_any_number_of_events(slowdown, events):
    """A paced request's k-th event leaves ttft + k x itl after it arrived (tests/paced_build.py),
    so one of `events` events lasts ttft + (events - 1) x itl. A closed loop of 2 streams does
    2 x tokens per request time: the performance ratio new/old is 1 - slowdown whatever the
    count of SSE events (the role, usage and [DONE] events are paced too)."""
    unit, tokens, streams = 0.45, 16, 2

    def throughput(s: float) -> float:
        ttft, itl = vp.paced_times(unit, tokens, s)
        return streams * tokens / (ttft + (events - 1) * itl)

    assert throughput(slowdown) / throughput(0.0) == pytest.approx(1 - slowdown)


def test_each_trial_starts_one_condition_later():
    orders = [vp.rotated(vp.SLOWDOWNS, i) for i in range(4)]
    assert orders[0] == [0.0, 0.10, 0.25, 0.50]
    assert orders[1] == [0.10, 0.25, 0.50, 0.0]
    assert orders[4 % 4] == vp.rotated(vp.SLOWDOWNS, 4)
    for position in range(4):  # over 4 trials every condition holds every position once
        assert sorted(o[position] for o in orders) == sorted(vp.SLOWDOWNS)


def test_slowdowns_are_read_in_percent():
    assert vp.parse_slowdowns("0,10,25,50") == vp.SLOWDOWNS
    assert vp.parse_slowdowns(" 5 , 20 ") == (0.05, 0.20)
    for bad in ("", "0,100", "-5"):
        with pytest.raises(ValueError):
            vp.parse_slowdowns(bad)


def _check(ratio: float, verdict: str, fresh: list[float] | None = None) -> RegressionCheck:
    return RegressionCheck(label="winner", stored=[10.0, 10.2], fresh=[ratio * 10.1] * 2
                           if fresh is None else fresh, ratio=ratio, ratio_low=ratio * 0.97,
                           ratio_high=ratio * 1.03, relative_sd=0.01, dof=4, verdict=verdict,
                           rule="planted")


def _report(outcome: str, *rounds: list[RegressionCheck]) -> ReoptimizeReport:
    return ReoptimizeReport(
        run_id="reopt-1", created_at="2026-12-07T00:00:00+0000", baseline_run="base",
        engine="llamacpp", stored_version="a", installed_version="b", upgraded=True,
        release=ReleaseCheck(package=None, installed=None, index_url="http://127.0.0.1/pypi"),
        objective="throughput", higher_is_better=True, configs=["winner", "runner-up"],
        rounds=[ReoptimizeRound(round=i, checks=c) for i, c in enumerate(rounds, 1)],
        outcome=outcome, summary=f"planted: {outcome}")


def test_a_report_is_read_as_one_decision():
    confirmed = vp.decision_of(_report("regression", [_check(0.74, "regression"),
                                                      _check(0.76, "no change")],
                                       [_check(0.75, "regression"),
                                        _check(0.75, "regression")]), 0.25, 2, 120.0)
    assert confirmed.decision == "confirmed" and confirmed.rounds == 2
    assert confirmed.flagged == (True, True) and confirmed.ratios == (0.74, 0.76, 0.75, 0.75)
    assert confirmed.record()["decision"] == "confirmed" and confirmed.record()["rounds"] == 2
    # Flagged in the first round, cleared by the second: the flow's outcome is no change.
    cleared = vp.decision_of(_report("no change", [_check(0.9, "regression")],
                                     [_check(0.97, "no change")]), 0.0, 1, 100.0)
    assert cleared.decision == "no regression" and cleared.flagged == (True, False)
    # A build that served nothing is called a regression by the flow, but it is no decision
    # about speed: an error, and its empty check has no ratio.
    dead = vp.decision_of(_report("regression", [_check(0.0, "regression", fresh=[])],
                                  [_check(0.0, "regression", fresh=[])]), 0.1, 1, 30.0)
    assert dead.decision == "error" and dead.ratios == ()
    crashed = vp.decision_of(RuntimeError("engine gone"), 0.5, 3, 5.0)
    assert crashed.decision == "error" and crashed.outcome is None and "engine gone" in crashed.note
    suspected = vp.Decision(0.1, 1, "suspected regression", flagged=(True,))
    assert suspected.decision == "undecided"
    assert vp.Decision(0.0, 1, "improvement", flagged=(False,)).decision == "no regression"


def _d(slowdown: float, outcome: str | None, flagged: tuple[bool, ...], ratio: float = 1.0,
       wall_s: float = 60.0, unmeasured: bool = False) -> vp.Decision:
    return vp.Decision(slowdown, 1, outcome, flagged=flagged, ratios=(ratio,) * len(flagged),
                       unmeasured=unmeasured, wall_s=wall_s)


PLANTED = [
    # the same build: clean; flagged once then cleared; confirmed (a false alarm)
    _d(0.0, "no change", (False,), 1.01, 50), _d(0.0, "no change", (True, False), 0.98, 100),
    _d(0.0, "regression", (True, True), 0.93, 110),
    # 10%: confirmed; missed in the first round; an error (the build served nothing)
    _d(0.10, "regression", (True, True), 0.90, 120), _d(0.10, "no change", (False,), 0.92, 55),
    _d(0.10, "regression", (True, True), 0.0, 20, unmeasured=True),
    # 25%: three confirmed
    *[_d(0.25, "regression", (True, True), r, 130) for r in (0.74, 0.75, 0.76)],
    # 50%: two confirmed, one flow that returned no report
    _d(0.50, "regression", (True, True), 0.50, 140), _d(0.50, "regression", (True, True), 0.49,
                                                        150), _d(0.50, None, ()),
]


def test_decisions_are_tabulated_into_misses_false_alarms_and_rounds():
    rows = {r["slowdown"]: r for r in vp.tabulate(PLANTED, vp.SLOWDOWNS)}
    same, ten, quarter, half = (rows[s] for s in vp.SLOWDOWNS)
    assert same["false_alarms"] == 1 and same["misses"] is None
    assert (same["confirmed"], same["no_regression"], same["undecided"], same["error"]) == \
        (1, 2, 0, 0)
    assert same["first_round_flags"] == 2 and same["rounds"] == {"median": 2, "min": 1, "max": 2}
    assert same["measured_ratio"] == {"median": pytest.approx(0.98), "min": 0.93, "max": 1.01}
    # The error is neither a confirmation nor a miss: 1 confirmed and 1 missed of 2 decisions.
    assert (ten["confirmed"], ten["misses"], ten["error"], ten["false_alarms"]) == (1, 1, 1, None)
    assert ten["confirmed_share"] == 0.5 and ten["rounds_to_confirm"] == \
        {"median": 2, "min": 2, "max": 2}
    assert ten["measured_ratio"] == {"median": pytest.approx(0.90), "min": 0.90, "max": 0.92}
    assert ten["wall_s"] == {"median": 55, "min": 20, "max": 120}  # errors' time counts
    assert quarter["misses"] == 0 and quarter["confirmed_share"] == 1.0
    assert half["decisions"] == 3 and half["error"] == 1 and half["misses"] == 0
    assert half["first_round_flags"] == 2


def test_the_confirmed_share_has_its_exact_interval():
    """Clopper-Pearson at 95%, the edge cases by hand: 0 of n -> [0, 1 - 0.025^(1/n)], n of n
    -> [0.025^(1/n), 1], 1 of 2 -> [1 - 0.975^(1/2), 0.975^(1/2)]."""
    rows = {r["slowdown"]: r for r in vp.tabulate(PLANTED, vp.SLOWDOWNS)}
    assert rows[0.25]["confirmed_interval"] == pytest.approx([0.025 ** (1 / 3), 1.0])
    assert rows[0.50]["confirmed_interval"] == pytest.approx([math.sqrt(0.025), 1.0])
    assert rows[0.10]["confirmed_interval"] == pytest.approx([1 - math.sqrt(0.975),
                                                              math.sqrt(0.975)])
    assert vp.clopper_pearson(0, 3) == pytest.approx([0.0, 1 - 0.025 ** (1 / 3)])  # 0.708
    assert vp.clopper_pearson(0, 0) is None
    empty = vp.tabulate([], (0.0,))[0]
    assert empty["confirmed_share"] is None and empty["confirmed_interval"] is None
    assert empty["rounds"] is None and empty["false_alarms"] == 0


def test_the_table_has_a_row_per_slowdown():
    table = vp.markdown(vp.tabulate(PLANTED, vp.SLOWDOWNS)).splitlines()
    assert len(table) == 2 + 4
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert table[2] == ("| 0% (same build) | 1.00 | 0.980 [0.930, 1.010] | 3 | 1 | 2 | 0 | 0 | "
                        "- | 1 | 33% [1%, 91%] | 2 | 2 of 3 | 100 [50, 110] |")
    assert table[4].startswith("| 25% | 0.75 | 0.750 [0.740, 0.760] | 3 | 3 | 0 | 0 | 0 | 0 | - "
                               "| 100% [29%, 100%] | 2 | 3 of 3 | 130 |")


def test_the_command_line_passes_the_power_run_its_settings(monkeypatch, tmp_path):
    from bench import verdicts_bench

    seen = []
    monkeypatch.setenv("INFOPT_BENCH_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(verdicts_bench, "power", lambda *a: seen.append(a))
    monkeypatch.setattr(verdicts_bench, "checks", lambda: pytest.fail("the checks ran"))
    assert verdicts_bench.main(["--power", "--trials", "5", "--slowdowns", "0,20",
                                "--record", "bench/results/x.json"]) == 0
    assert seen == [(5, (0.0, 0.2), tmp_path / "out", Path("bench/results/x.json"))]
    assert verdicts_bench.main(["--power"]) == 0
    assert seen[1][:2] == (vp.DEFAULT_TRIALS, vp.SLOWDOWNS)
    with pytest.raises(SystemExit):
        verdicts_bench.main(["--power", "--trials", "0"])
    with pytest.raises(SystemExit):
        verdicts_bench.main(["--power", "--slowdowns", "0,100"])
