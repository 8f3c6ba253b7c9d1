"""The climb (infopt.tuning.climb) replayed without engines: a recorded real run's trials
(objective values and gate verdicts, tests/fixtures/climb/) sent back through the generator must
give the same trial ids, the same decision per candidate and the same winner as the run made;
synthetic cases pin the policy where the recorded run does not reach (a borderline lossy
change followed by lossless gains, noisy confirmation, a contract re-plan, retries, budgets)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from infopt.engines import llamacpp
from infopt.engines.base import ServingTarget
from infopt.engines.ladder import LadderFacts, WeightVariant
from infopt.specs.contract import CheckStatus, ContractGap, ContractRemedy
from infopt.specs.quality import QualityVerdict
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.serving import ServingConfig
from infopt.specs.trial import TrialRole, TrialSpec
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, climb, drive
from infopt.tuning.ladder import rules_for

FIXTURES = Path(__file__).parents[1] / "fixtures" / "climb"
CONFIG: TypeAdapter = TypeAdapter(ServingConfig)
T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)


def verdict(decision: str, summary: str = "") -> QualityVerdict:
    return QualityVerdict(passed=decision == "pass", decision=decision, candidate=None,
                          floor=None, tolerance=0.02, measures=[], summary=summary or decision)


def trial(spec: TrialSpec, value: float | None, failed: str | None = None,
          quality: str | None = "pass", summary: str = "", trial_id: str | None = None
          ) -> Trial:
    return Trial(trial_id=trial_id or spec.trial_id, role=spec.role.value,
                 dimension=spec.dimension, value=spec.value, repeat=spec.repeat,
                 config=spec.config, engine=None, benchmark=None, objective_value=value,
                 failed=failed, quality=verdict(quality, summary) if quality else None)


def facts(**kw) -> LadderFacts:
    base = dict(target_concurrency=4, usable_cpus=2, physical_cores=None, gpu_count=0,
                mean_prompt_tokens=150, mean_output_tokens=64, prefix_reuse=False,
                kv_read_share=0.18)
    return LadderFacts(**{**base, **kw})


def plan(dimensions, f: LadderFacts, **kw) -> ClimbPlan:
    base = dict(control=CONTROL, baseline=BASE, engine="llamacpp",
                rules=rules_for(llamacpp.ADAPTER, dimensions), facts=lambda t: f,
                objective="throughput", higher=True, budgets=Budgets(repeats=3),
                clock=lambda: 0.0)
    return ClimbPlan(**{**base, **kw})


class Sim:
    """A stand-in for the engines: each spec's value from `values[(label, repeat)]`, else
    `values[label]` (a list, one per repeat); labels in `failed` fail with that reason."""

    def __init__(self, values: dict, failed: dict[str, str] | None = None) -> None:
        self.values, self.failed, self.specs = values, failed or {}, []

    def __call__(self, spec: TrialSpec) -> list[Trial]:
        self.specs.append(spec)
        label = "control" if spec.role is TrialRole.CONTROL else spec.value
        if label in self.failed:
            why = self.failed[label]
            return [trial(spec, None, why, "undecided" if why.startswith("undecided") else
                          "fail" if "quality" in why else None)]
        v = self.values[label]
        return [trial(spec, v[spec.repeat - 1] if isinstance(v, list) else v)]

    @property
    def ids(self) -> list[str]:
        return [s.trial_id for s in self.specs]


def statuses(outcome: ClimbOutcome) -> dict[str, dict[str, str]]:
    return {s.dimension.value: {c.candidate.label: c.status for c in s.candidates}
            for s in outcome.ladder.steps if not s.skipped}


# -- the recorded run -------------------------------------------------------------------------

def _recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _replay_plan(rec: dict) -> ClimbPlan:
    f = rec["facts"]
    f["weight_variants"] = tuple(WeightVariant(**w) for w in f["weight_variants"])
    f["layouts"] = tuple(f["layouts"])

    def why_pruned(config) -> str | None:  # the run's pruned candidates, by their changes
        return next((p["reason"] for p in rec["pruned"]
                     if all(getattr(config, k) == v for k, v in p["changes"].items())), None)

    return ClimbPlan(
        control=CONFIG.validate_python(rec["control"]),
        baseline=CONFIG.validate_python(rec["baseline"]), engine="llamacpp",
        rules=rules_for(llamacpp.ADAPTER, rec["dimensions"]),
        facts=lambda t: LadderFacts(**f), objective=rec["objective"], higher=rec["higher"],
        budgets=Budgets(**rec["budgets"]), seed=rec["seed"], why_pruned=why_pruned,
        clock=lambda: 0.0)


def test_a_recorded_run_replays_to_the_same_trials_decisions_and_winner():
    rec = _recorded("demo")
    recorded = rec["trials"]

    def run(spec: TrialSpec) -> list[Trial]:  # the spec's attempts (`-retryN`), as recorded
        ids = [i for i in recorded if i == spec.trial_id or i.startswith(spec.trial_id
                                                                         + "-retry")]
        assert ids, f"the climb asked for {spec.trial_id}, which the run did not run"
        return [trial(spec, recorded[i]["value"], recorded[i]["failed"],
                      recorded[i]["quality"], trial_id=i) for i in ids]

    t0 = time.perf_counter()
    outcome, trials = drive(climb(_replay_plan(rec)), run)
    elapsed = time.perf_counter() - t0
    want = rec["expect"]
    assert [t.trial_id for t in trials] == want["ids"]
    assert statuses(outcome) == want["steps"]
    assert outcome.ladder.accepted == want["accepted"]
    assert outcome.ladder.winner_label == want["winner"]
    assert outcome.launches == len(want["ids"])
    # No engine: a bound no machine misses (the recorded run took 54 min; the replay ~1 s).
    assert elapsed < 30.0, f"the replay took {elapsed:.2f} s"


# -- synthetic cases --------------------------------------------------------------------------

Q8 = WeightVariant("Q8_0", "/v/q8.gguf", 8.5)


def test_a_borderline_lossy_change_does_not_stop_the_lossless_gains_after_it():
    """Q8_0 weights: the quality gate cannot decide (not accepted); the slots and the
    micro-batch that follow change no tokens and measure better: the ladder moves past."""
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 51, 49],
               "parallel_slots=2": [60, 61, 59], "parallel_slots=4": [70, 71, 69],
               "ubatch_tokens=256": [80, 81, 79], "flash_attn=off": [60, 60, 60]},
              failed={"weights=Q8_0": "undecided by the quality gate (not accepted): top-1 "
                                      "agreement 97.9% vs threshold 98.0%, 32 prompts"})
    outcome, _ = drive(climb(plan(["weights", "scheduling", "prefill"],
                                  facts(weight_variants=(Q8,)))), sim)
    # The first accepted (best screen first) ends a step's confirmations: the screened
    # candidates ranked below it are not judged.
    assert statuses(outcome) == {
        "weights": {"weights=Q8_0": "undecided"},
        # Screened lower than the accepted one: kept in the record, confirmation not run.
        "scheduling": {"parallel_slots=4": "accepted", "parallel_slots=2": "not run"},
        "prefill": {"ubatch_tokens=256": "accepted", "flash_attn=off": "not run"}}
    assert outcome.ladder.winner_label == "baseline + parallel_slots=4 + ubatch_tokens=256"
    assert sim.ids == [
        "t00-control-r1", "t01-baseline-r1", "t02-control-r2", "t03-baseline-r2",
        "t04-control-r3", "t05-baseline-r3", "t06-weights=Q8_0-r1",
        "t07-parallel_slots=2-r1", "t08-parallel_slots=4-r1", "t09-parallel_slots=4-r2",
        "t10-parallel_slots=4-r3",
        # The incumbent (slots=4) already has 3 trials: no top-up before the prefill repeats.
        "t11-ubatch_tokens=256-r1", "t12-flash_attn=off-r1", "t13-ubatch_tokens=256-r2",
        "t14-ubatch_tokens=256-r3"]
    # Every candidate is paired against the incumbent it modifies; nothing else is.
    for s in sim.specs:
        if s.role is TrialRole.TUNING:
            parent = (BASE if s.dimension in ("weights", "scheduling") else
                      outcome.history[1].config)
            assert s.incumbent == parent, s.trial_id
        else:
            assert s.incumbent is None, s.trial_id
    weights = outcome.ladder.steps[0].candidates[0]
    assert weights.reason.startswith("undecided by the quality gate")


def test_a_promising_screen_that_does_not_hold_up_under_repeats_is_within_noise():
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 52, 48],
               # One lucky screen, then the repeats land on the baseline's values.
               "parallel_slots=2": [58, 47, 53], "parallel_slots=4": [45, 45, 45]})
    outcome, _ = drive(climb(plan(["scheduling"], facts())), sim)
    step = statuses(outcome)["scheduling"]
    assert step == {"parallel_slots=2": "within noise", "parallel_slots=4": "worse"}
    assert outcome.ladder.winner_label == "baseline" and outcome.ladder.accepted == []
    noisy = next(c for s in outcome.ladder.steps for c in s.candidates
                 if c.candidate.label == "parallel_slots=2")
    assert noisy.values == [58, 47, 53] and "does not clear the noise" in noisy.reason
    # 4 screened below the baseline's worst repeat: never confirmed; 2 was, and did not hold.
    assert sim.ids[6:] == ["t06-parallel_slots=2-r1", "t07-parallel_slots=4-r1",
                           "t08-parallel_slots=2-r2", "t09-parallel_slots=2-r3"]


def test_the_trial_budget_stops_the_climb_between_trials():
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 51, 49],
               "parallel_slots=2": [60, 61, 59], "parallel_slots=4": [70, 71, 69]})
    outcome, _ = drive(climb(plan(["scheduling", "prefill"], facts(),
                                  budgets=Budgets(repeats=3, max_trials=8))), sim)
    assert len(sim.ids) == 8 and outcome.launches == 8
    assert outcome.ladder.stopped == "trial budget spent (8 trials)"
    assert statuses(outcome)["scheduling"]["parallel_slots=4"] == "not run"
    assert outcome.ladder.steps[-1].skipped.startswith("not run: trial budget spent")


def test_the_wall_budget_reads_the_clock_it_is_given():
    now = [0.0]
    sim = Sim({"control": 40, "baseline": 50, "parallel_slots=2": 60, "parallel_slots=4": 70})

    def run(spec):
        now[0] += 10.0  # each trial takes 10 s on this clock
        return sim(spec)

    outcome, _ = drive(climb(plan(["scheduling"], facts(), clock=lambda: now[0],
                                  budgets=Budgets(repeats=3, max_wall_s=65))), run)
    assert outcome.ladder.stopped == "wall-time budget spent (65 s)"
    assert len(sim.ids) == 7  # the sixth trial ended at 60 s; the seventh, at 70 s, is last


def test_a_retried_trial_counts_every_attempt_in_the_ids_that_follow():
    sim = Sim({"control": 40, "baseline": [50, 51, 49], "parallel_slots=2": 60,
               "parallel_slots=4": 70})

    def run(spec):  # the first baseline's engine is killed once, then measures
        out = sim(spec)
        if spec.trial_id == "t01-baseline-r1":
            killed = trial(spec, None, "the engine was killed by signal 9", None)
            return [killed, out[0].model_copy(update={"trial_id": f"{spec.trial_id}-retry1"})]
        return out

    outcome, trials = drive(climb(plan(["scheduling"], facts())), run)
    ids = [t.trial_id for t in trials]
    assert ids[:4] == ["t00-control-r1", "t01-baseline-r1", "t01-baseline-r1-retry1",
                       "t03-control-r2"]
    assert outcome.launches == len(trials)


def test_a_baseline_lacking_a_required_feature_is_re_planned_with_its_remedy():
    remedy = ContractRemedy(features=["n_choices"], knob_changes={"parallel_slots": 2},
                            change="--parallel 2", source="s")
    gap = ContractGap(feature="n_choices", status=CheckStatus.FAIL, detail="n=2 gave 1",
                      required=True, remedy=remedy)
    sim = Sim({"control": 40, "baseline": [50, 51, 49], "parallel_slots=4": 45})
    first = {"t01-baseline-r1"}

    def gaps(t: Trial):  # the first baseline (1 slot) lacks it; the remedied one has it
        return [gap] if t.config.parallel_slots == 1 and t.trial_id in first else []

    outcome, trials = drive(climb(plan(["scheduling"], facts(), gaps=gaps)), sim)
    assert outcome.remedy == remedy and outcome.first_gaps == [gap]
    assert outcome.replanned_after == 2  # the control and the first baseline
    ids = [t.trial_id for t in trials]
    # The re-planned run counts afresh: its control reuses the first's id (and key).
    assert ids[:4] == ["t00-control-r1", "t01-baseline-r1", "t00-control-r1",
                       "t01-baseline-r1"]
    assert trials[3].config.parallel_slots == 2 and outcome.history[0].config.parallel_slots == 2
    assert outcome.launches == len(trials) - 2


@pytest.mark.parametrize("failed, quality", [("did not start: bind", None),
                                             ("rejected by the quality gate: x", "fail")])
def test_a_broken_baseline_stops_before_anything_is_climbed(failed, quality):
    def run(spec):
        if spec.role is TrialRole.BASELINE:
            return [trial(spec, None, failed, quality)]
        return [trial(spec, 40.0)]

    outcome, trials = drive(climb(plan(["scheduling"], facts())), run)
    assert outcome.ladder is None and outcome.broken.trial_id == "t01-baseline-r1"
    assert [t.trial_id for t in trials] == ["t00-control-r1", "t01-baseline-r1"]


def test_the_climb_imports_no_engine_and_no_prefect():
    import subprocess
    import sys

    code = ("import sys, infopt.tuning.climb\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('infopt.engines', 'prefect',"
            " 'tasks', 'flows')))\nprint(bad)\nsys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_engine_kv_capacity_far_from_the_fit_stops_the_climb_with_the_reason():
    """Issue 32 item 11: the fit's KV estimate is checked against the engine's log in every
    trial; beyond KV_STOP_ERROR the ladder stops between trials, saying why."""
    from infopt.costmodel.kv_check import KV_STOP_ERROR
    from infopt.specs.fit import KvCheck

    sim = Sim({"control": [40, 41, 40], "baseline": [50, 51, 49],
               "parallel_slots=2": [60, 61, 59], "parallel_slots=4": [70, 71, 69]})

    def run(spec):
        out = sim(spec)
        if spec.value == "parallel_slots=2":  # the engine allocated 40% less than predicted
            kv = KvCheck(unit="tokens", observed=6_000, predicted=10_000, error=-0.4,
                         line="KV cache size: 6,000 tokens", stops_ladder=0.4 > KV_STOP_ERROR)
            out = [t.model_copy(update={"kv": kv}) for t in out]
        return out

    outcome, _ = drive(climb(plan(["scheduling", "prefill"], facts())), run)
    assert outcome.ladder.stopped.startswith("the engine's KV capacity in t06-parallel_slots=2-r1 "
                                             "is 6,000 tokens against the fit's 10,000 (-40%")
    assert "parallel_slots=4" not in {s.value for s in sim.specs}
    assert outcome.ladder.steps[-1].skipped.startswith("not run: the engine's KV capacity")
