"""The SLOs as a hard gate (issue 49): pooled over a configuration's trials at the target load
and judged with the exact share interval (met, missed, undecided; undecided is not accepted); a
candidate that misses cannot replace its incumbent, a winner that misses is not recommended over
defaults that meet them, an engine that misses is not chosen over one that meets them, and when
nothing meets them the binding SLO and the smallest viable alternatives are named."""

from __future__ import annotations

from infopt.specs.cluster import Verdict
from infopt.specs.ladder import EngineResult
from infopt.specs.paired import FinalDecision
from infopt.specs.results import (
    BenchmarkResult,
    LevelResult,
    Percentiles,
    ScenarioResult,
    SloResult,
    Trial,
)
from infopt.specs.traffic import Slo
from infopt.specs.trial import TrialSpec
from infopt.specs.workload import Workload, fixed_levels
from infopt.tuning.climb import climb, drive
from infopt.tuning.engine_choice import engine_choice
from infopt.tuning.slo_gate import Measured, binding, slo_gate, slo_outcome, with_slos
from tests.unit.test_climb_golden import Sim, facts, plan, statuses

P = Percentiles(n=0, p50=None, p95=None, p99=None, mean=None, low_sample_p95=True)
SLO = Slo(metric="ttft", percentile=90, max_s=0.5)
PLAIN = fixed_levels(input_tokens=8, output_tokens=5, levels=[1, 4], target=4, requests=20)
WL = Workload(traffic=PLAIN.traffic.model_copy(update={"slos": [SLO]}), objective=PLAIN.objective)


def _scenario(name: str, concurrency: int, requests: int, meeting: int, observed: float
              ) -> ScenarioResult:
    level = LevelResult(concurrency=concurrency, requests=requests, errors=0,
                        lengths_not_reached=0, duration_s=10.0, ttft_s=P, itl_s=P, e2e_s=P,
                        output_tokens_total=0, output_tokens_per_s=0.0, requests_per_s=1.0)
    slo = SloResult(metric="ttft", percentile=90, max_s=0.5, observed_s=observed,
                    samples=requests, met=observed <= 0.5,
                    requests_meeting_fraction=meeting / requests)
    return ScenarioResult(name=name, arrival="closed", level=level, slos=[slo],
                          goodput_requests_per_s=1.0, slo_violated=observed > 0.5,
                          validation_passed=True, validation_failures=[], errors_by_kind={},
                          records_path=None)


def with_bench(t: Trial, at_target: tuple[int, int], at_one: tuple[int, int] = (20, 20)
               ) -> Trial:
    """`t` measured: (requests, meeting) at the target load (4) and at one stream."""
    (n4, m4), (n1, m1) = at_target, at_one
    c1, c4 = (s.name for s in WL.scenarios())
    bench = BenchmarkResult(workload=WL, scenarios=[
        _scenario(c1, 1, n1, m1, 0.1 if m1 == n1 else 0.9),
        _scenario(c4, 4, n4, m4, 0.3 if m4 >= 0.95 * n4 else 1.7)])
    return t.model_copy(update={"benchmark": bench,
                                "objective_value": t.objective_value or 1.0})


def _trial(tid: str = "t") -> Trial:
    from tests.unit.test_climb_golden import BASE

    return Trial(trial_id=tid, role="baseline", dimension=None, value=None, repeat=1,
                 config=BASE, engine=None, benchmark=None, objective_value=1.0)


def test_one_trial_too_short_to_decide_is_undecided_and_its_rounds_pooled_decide_it():
    one = slo_gate([with_bench(_trial(), (20, 20))])
    assert one is not None and one.verdict is Verdict.UNDECIDED and not one.passed
    # 20 of 20 within 0.5 s: the share's 90% one-sided lower bound is 0.891, under the 90%
    # the SLO needs; three rounds (60 of 60) put it at 0.962.
    three = slo_gate([with_bench(_trial(f"t{i}"), (20, 20)) for i in range(3)])
    assert three is not None and three.verdict is Verdict.MEETS and three.passed
    assert (three.checks[0].requests, three.checks[0].meeting) == (60, 60)
    assert three.concurrency == 4  # the target load, not the single stream


def test_a_missed_slo_names_which_by_how_much_and_at_which_load():
    gate = slo_gate([with_bench(_trial(f"t{i}"), (20, 5)) for i in range(2)])
    assert gate is not None and gate.verdict is Verdict.MISSES
    text = binding(gate)
    assert "ttft p90 <= 0.5 s missed at the target load (4 concurrent generations" in text
    assert "1.7 s measured (+240%)" in text and "10 of 40 requests" in text


def test_no_slos_no_gate():
    t = with_bench(_trial(), (20, 20))
    t = t.model_copy(update={"benchmark": t.benchmark.model_copy(update={"scenarios": [
        s.model_copy(update={"slos": []}) for s in t.benchmark.scenarios]})})
    assert slo_gate([t]) is None and slo_gate([_trial()]) is None


def _decision(rec: str) -> FinalDecision:
    return FinalDecision(recommended=rec, winner_label="baseline + x", why="planted")


def test_a_winner_that_misses_is_not_recommended_over_defaults_that_meet():
    meets = slo_gate([with_bench(_trial(f"m{i}"), (20, 20)) for i in range(3)])
    misses = slo_gate([with_bench(_trial(f"x{i}"), (20, 5)) for i in range(3)])
    d = with_slos(_decision("winner"), misses, meets)
    assert d.recommended == "control" and d.slos_met is True
    assert d.why.startswith("the ladder's winner misses the SLOs")
    assert with_slos(_decision("control"), meets, meets).slos_met is True
    both = with_slos(_decision("winner"), misses, misses)
    assert both.recommended == "winner" and both.slos_met is False
    assert both.slo_binding is not None and "missed at the target load" in both.slo_binding
    assert with_slos(_decision("winner"), None, None).slos_met is None


def test_an_engine_that_misses_the_slos_is_not_chosen_over_one_that_meets_them():
    def result(engine: str, role: str, values: list[float], met: bool | None) -> EngineResult:
        return EngineResult(engine=engine, role=role, reason="r", model_path="/m",
                            model_format="gguf", winner_label="w", winner_median=values[0],
                            winner_values=values, slos_met=met)

    fast_miss = result("vllm", "comparator", [200.0, 201.0, 199.0], False)
    slow_meet = result("llamacpp", "routed", [100.0, 101.0, 99.0], True)
    got = engine_choice([slow_meet, fast_miss], True, 0, 0.0)
    assert got.chosen == "llamacpp" and "misses the SLOs" in got.reason
    got = engine_choice([result("llamacpp", "routed", [100.0, 101.0, 99.0], False),
                         result("vllm", "comparator", [90.0, 91.0, 89.0], True)], True, 0, 0.0)
    assert got.chosen == "vllm"
    # Neither meets them (or no SLOs): speed decides as before.
    assert engine_choice([result("llamacpp", "routed", [100.0, 101.0, 99.0], False),
                          fast_miss], True, 0, 0.0).chosen == "vllm"


def test_a_candidate_that_beats_its_incumbent_but_misses_the_slos_cannot_replace_it():
    sim = Sim({"control": 40, "baseline": [50, 51, 49], "parallel_slots=2": 70,
               "parallel_slots=4": 90})

    def run(spec: TrialSpec) -> list[Trial]:  # more slots: faster, and over the TTFT SLO
        t = sim(spec)[0]
        missing = spec.value in ("parallel_slots=2", "parallel_slots=4")
        return [with_bench(t, (20, 4) if missing else (20, 20))]

    outcome, _ = drive(climb(plan(["scheduling"], facts())), run)
    steps = statuses(outcome)["scheduling"]
    assert steps["parallel_slots=2"] == "gate" or steps["parallel_slots=4"] == "gate"
    assert "accepted" not in steps.values()
    rejected = next(c for s in outcome.ladder.steps for c in s.candidates if c.status == "gate")
    assert "misses the SLOs" in rejected.reason and "at the target load" in rejected.reason
    assert outcome.chosen is not None and outcome.chosen.chain == []  # slots stay the defaults
    assert outcome.ladder.decision.slos_met is True


def test_when_nothing_meets_the_slos_the_alternatives_come_from_the_measured_loads():
    # Every trial misses at 4 streams and meets at one: fewer concurrent generations is the
    # measured alternative, with the replicas it implies labelled an estimate.
    trials = [with_bench(_trial(f"w{i}"), (20, 2), (20, 20)) for i in range(3)]
    control = [with_bench(_trial(f"c{i}"), (20, 3), (20, 20)) for i in range(3)]
    got = slo_outcome(Measured("baseline + x", trials), [Measured("the engine's defaults", control)], 4,
                      "org/model")
    assert got is not None and not got.met
    assert got.binding.startswith("baseline + x: ttft p90 <= 0.5 s missed")
    assert any("meets at 1 concurrent generation" in x or "met at 1" in x for x in got.loads)
    fewer = got.alternatives[0]
    assert fewer.startswith("fewer concurrent generations:") and "4 replicas" in fewer
    assert "an estimate" in fewer
    assert any(a.startswith("more GPUs: `infopt plan --model org/model") for a in got.alternatives)
    assert slo_outcome(Measured("w", [with_bench(_trial(f"m{i}"), (20, 20)) for i in range(3)]), [],
                       4, "m") == got.model_copy(update={"met": True, "binding": None,
                                                         "loads": [], "alternatives": []})
