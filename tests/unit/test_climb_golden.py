"""The climb (infopt.tuning.climb) replayed without engines: a recorded real run's trials
(objective values and gate verdicts, tests/fixtures/climb/) sent back through the generator must
give the same trial ids, the same decision per candidate and the same winner as the run made;
synthetic cases pin the policy where the recorded run does not reach (a borderline lossy
change followed by lossless gains, noisy confirmation, a contract re-plan, retries, budgets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from infopt.engines import adapter_for
from infopt.engines.config_layout import config_layout
from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.rules import LadderFacts, WeightVariant
from infopt.specs.contract import CheckStatus, ContractGap, ContractRemedy
from infopt.specs.fit import Layout
from infopt.specs.quality import QualityVerdict
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.serving import ServingConfig
from infopt.specs.trial import TrialRole, TrialSpec
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, climb, drive
from infopt.tuning.dimension_rules import rules_for

FIXTURES = Path(__file__).parents[1] / "fixtures" / "climb"
CONFIG: TypeAdapter = TypeAdapter(ServingConfig)
T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)


def verdict(decision: str, summary: str = "") -> QualityVerdict:
    return QualityVerdict(passed=decision == "pass", decision=decision, candidate=None,
                          floor=None, tolerance=0.02, measures=[], summary=summary or decision)


def trial(spec: TrialSpec, value: float | None, failed: str | None = None,
          quality: str | None = "pass", summary: str = "", trial_id: str | None = None,
          measures: dict | None = None) -> Trial:
    return Trial(trial_id=trial_id or spec.trial_id, role=spec.role.value,
                 dimension=spec.dimension, value=spec.value, repeat=spec.repeat,
                 config=spec.config, engine=None, benchmark=None, objective_value=value,
                 failed=failed, quality=verdict(quality, summary) if quality else None,
                 measures=measures or {})


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
    """A stand-in for the engines: each spec's objective from `values[label]`: a number, a list
    taken in turn by the label's windows (cycling), or a function of the window's index over
    the whole run (planted drift); `ttft` plants a TTFT p50 the same way. Labels in `failed`
    fail with that reason."""

    def __init__(self, values: dict, failed: dict[str, str] | None = None,
                 ttft: dict | None = None) -> None:
        self.values, self.failed, self.specs = values, failed or {}, []
        self.ttft, self.seen = ttft or {}, {}

    def _label(self, spec: TrialSpec) -> str:
        label = "control" if spec.role is TrialRole.CONTROL else spec.value
        if label == "control" and "control" not in self.values:  # the defaults are the baseline
            return "baseline"
        return label

    def _pick(self, table: dict, label: str, k: int):
        v = table.get(label)
        if v is None:
            return None
        if callable(v):
            return v(len(self.specs) - 1)
        return v[k % len(v)] if isinstance(v, list) else v

    def __call__(self, spec: TrialSpec) -> list[Trial]:
        self.specs.append(spec)
        label = self._label(spec)
        if label in self.failed:
            why = self.failed[label]
            return [trial(spec, None, why, "undecided" if why.startswith("undecided") else
                          "fail" if "quality" in why else None)]
        k = self.seen[label] = self.seen.get(label, -1) + 1
        ttft = self._pick(self.ttft, label, k)
        return [trial(spec, self._pick(self.values, label, k),
                      measures={"ttft_p50_s": ttft} if ttft is not None else None)]

    @property
    def ids(self) -> list[str]:
        return [s.trial_id for s in self.specs]


def statuses(outcome: ClimbOutcome) -> dict[str, dict[str, str]]:
    """Each step's candidates and their status; a step of a dimension with several steps (the
    layout families) keyed with its family, as tests/fixtures/climb/record.py records them."""
    return {s.dimension.value + (f" ({s.family})" if s.family else ""):
            {c.candidate.label: c.status for c in s.candidates}
            for s in outcome.ladder.steps if not s.skipped}


# -- the recorded run -------------------------------------------------------------------------

def _recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _replay_plan(rec: dict) -> ClimbPlan:
    f = rec["facts"]
    f["weight_variants"] = tuple(WeightVariant(**w) for w in f["weight_variants"])
    f["layouts"] = tuple((Layout(**layout), why) for layout, why in f["layouts"])
    adapter = adapter_for(rec.get("engine", "llamacpp"))

    def why_pruned(config) -> str | None:  # the run's pruned candidates, by their changes
        label = config_layout(config).label.replace("=", "").replace(" ", "_")
        return next((p["reason"] for p in rec["pruned"]
                     if (label == p["layout"] if p.get("layout") else
                         all(getattr(config, k) == v for k, v in p["changes"].items()))), None)

    return ClimbPlan(
        control=CONFIG.validate_python(rec["control"]),
        baseline=CONFIG.validate_python(rec["baseline"]), engine=adapter.name.value,
        rules=rules_for(adapter, rec["dimensions"]),
        facts=lambda t: LadderFacts(**f), objective=rec["objective"], higher=rec["higher"],
        budgets=Budgets(**rec["budgets"]), seed=rec["seed"], why_pruned=why_pruned,
        clock=lambda: 0.0, window_requests=rec["window_requests"],
        control_ineligible=lambda t: rec["control_ineligible"])


@pytest.mark.parametrize("name", ["demo", "sim_mixtral_8gpu"])
def test_a_recorded_run_replays_to_the_same_trials_decisions_and_winner(name):
    """demo: `make demo`'s llama.cpp run on this CPU. sim_mixtral_8gpu: the simulated 8x H100
    Mixtral-8x7B layout climb (tests/flows/test_sim_gpu_flow.py, e2e), its families in order
    and each judged against the TP winner: replayed here, so its verdicts in `make test` come
    from recorded values, not from the wall clock of sleep-paced servers on shared cores."""
    rec = _recorded(name)
    recorded = rec["trials"]

    def run(spec: TrialSpec) -> list[Trial]:  # the spec's attempts (`-retryN`), as recorded
        ids = [i for i in recorded if i == spec.trial_id or i.startswith(spec.trial_id
                                                                         + "-retry")]
        assert ids, f"the climb asked for {spec.trial_id}, which the run did not run"
        return [trial(spec, recorded[i]["value"], recorded[i]["failed"],
                      recorded[i]["quality"], trial_id=i, measures=recorded[i]["measures"])
                for i in ids]

    outcome, trials = drive(climb(_replay_plan(rec)), run)
    want = rec["expect"]
    assert [t.trial_id for t in trials] == want["ids"]
    assert statuses(outcome) == want["steps"]
    assert outcome.ladder.accepted == want["accepted"]
    assert outcome.ladder.winner_label == want["winner"]
    assert outcome.launches == len(want["ids"])
    assert outcome.ladder.window_requests == want["window"]
    assert outcome.ladder.decision.recommended == want["recommended"]


# -- synthetic cases --------------------------------------------------------------------------

Q8 = WeightVariant("Q8_0", "/v/q8.gguf", 8.5)
SMALL = Budgets(repeats=3, max_rounds=6)


def _candidate(outcome: ClimbOutcome, label: str):
    return next(c for s in outcome.ladder.steps for c in s.candidates
                if c.candidate.label == label)


def test_clear_gains_are_decided_on_paired_rounds_and_carried_forward():
    """Q8_0 weights: the quality gate cannot decide (not accepted); the slots and the
    micro-batch that follow change no tokens and measure better: the ladder moves past, each
    candidate paired round by round with the incumbent it modifies."""
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
        "scheduling": {"parallel_slots=4": "accepted", "parallel_slots=2": "not run"},
        "prefill": {"ubatch_tokens=256": "accepted", "flash_attn=off": "not run"}}
    assert outcome.ladder.winner_label == "baseline + parallel_slots=4 + ubatch_tokens=256"
    assert sim.ids[:14] == [
        # The start: paired rounds, the control first in odd rounds.
        "t00-control-r1", "t01-baseline-r1", "t02-baseline-r2", "t03-control-r2",
        "t04-control-r3", "t05-baseline-r3",
        # Rejected by its gate: its round ends before the incumbent's window.
        "t06-weights=Q8_0-r1",
        # Screens: the candidate, then the incumbent's paired window.
        "t07-parallel_slots=2-r1", "t08-baseline-r4", "t09-parallel_slots=4-r1",
        "t10-baseline-r5",
        # Confirmation: rounds alternate which goes first until the policy decides.
        "t11-baseline-r6", "t12-parallel_slots=4-r2", "t13-parallel_slots=4-r3"]
    slots = _candidate(outcome, "parallel_slots=4")
    assert slots.rounds.state == "gain" and slots.rounds.rounds == 3
    assert slots.values == [70, 71, 69] and len(slots.incumbent_values) == 3
    # Every candidate window is paired against the incumbent it modifies; an incumbent's own
    # windows (and the control's) modify nothing.
    candidates = {c.candidate.label for st in outcome.ladder.steps for c in st.candidates}
    incumbents = [BASE, outcome.history[1].config, outcome.history[2].config]
    for s in sim.specs:
        if s.incumbent is not None:
            assert s.value in candidates, s.trial_id
            parent = BASE if s.dimension in ("weights", "scheduling") else incumbents[1]
            assert s.incumbent == parent, s.trial_id
        else:
            assert s.role is TrialRole.CONTROL or s.config in incumbents, s.trial_id
    weights = outcome.ladder.steps[0].candidates[0]
    assert weights.reason.startswith("undecided by the quality gate")
    # Each round sends its own prompts: both windows of a round share a seed, rounds differ.
    by_round = [s.seed for s in sim.specs[:6]]
    assert by_round == [0, 0, 1, 1, 2, 2]
    d = outcome.ladder.decision
    assert d.recommended == "winner" and d.rounds.state == "gain"
    assert outcome.chosen.label == "ubatch_tokens=256"


def test_a_promising_screen_that_does_not_hold_up_is_not_accepted():
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 52, 48],
               # One lucky screen, then the rounds land on the baseline's values.
               "parallel_slots=2": [58, 47, 53, 50, 49, 51], "parallel_slots=4": [40]})
    outcome, _ = drive(climb(plan(["scheduling"], facts(), budgets=SMALL)), sim)
    step = statuses(outcome)["scheduling"]
    assert step["parallel_slots=2"] in ("undecided", "within noise")
    assert step["parallel_slots=4"] == "worse"
    assert outcome.ladder.winner_label == "baseline" and outcome.ladder.accepted == []
    noisy = _candidate(outcome, "parallel_slots=2")
    # The lucky 58 is far from the others: set aside as the outlier round it is.
    assert 58 not in noisy.values and len(noisy.set_aside) == 1
    assert noisy.rounds.rounds <= SMALL.max_rounds
    if noisy.status == "undecided":  # the report says what the run could have seen
        assert "could have detected a difference of" in noisy.reason


def test_a_tie_on_throughput_goes_to_the_better_ttft():
    """Four slots at the target load of 4 stream no faster than one on this planted machine,
    but one slot queues three requests behind the first: twice the TTFT. The tie is broken by
    TTFT, so the one-slot configuration does not win it."""
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 51, 49, 50],
               "parallel_slots=2": [45], "parallel_slots=4": [50.5, 50, 49.5, 50.2]},
              ttft={"control": 1.0, "baseline": [2.0, 2.1, 1.9], "parallel_slots=2": 1.5,
                    "parallel_slots=4": [1.0, 1.05, 0.95]})
    outcome, _ = drive(climb(plan(["scheduling"], facts(), budgets=SMALL)), sim)
    slots = _candidate(outcome, "parallel_slots=4")
    assert slots.status == "accepted" and slots.rounds.state == "tie_break", slots.reason
    assert "TTFT p50" in slots.reason
    assert outcome.ladder.winner_label == "baseline + parallel_slots=4"


def test_a_gain_only_sequential_rounds_can_decide_is_found():
    """+12% under +-3% noise per window: three rounds leave the interval across 1, further
    rounds decide it; the run says how many it took."""
    noise = [1.0, 1.03, 0.97, 1.02, 0.98, 1.01, 0.99, 1.0]
    inc = [50 * x for x in noise]
    cand = [56 * x for x in reversed(noise)]
    sim = Sim({"control": [40, 41, 40], "baseline": inc, "parallel_slots=2": cand,
               "parallel_slots=4": [30]})
    outcome, _ = drive(climb(plan(["scheduling"], facts(),
                                  budgets=Budgets(repeats=3, max_rounds=8))), sim)
    slots = _candidate(outcome, "parallel_slots=2")
    assert slots.status == "accepted" and slots.rounds.state == "gain"
    assert slots.rounds.rounds > 3, "three rounds already decided: the case plants nothing"


def test_the_defaults_are_recommended_when_nothing_beats_them():
    """The control (eligible) is as fast as everything the ladder kept: the run recommends
    the engine's defaults and says why."""
    sim = Sim({"control": [60, 61, 59], "baseline": [60, 59, 61],
               "parallel_slots=2": [40], "parallel_slots=4": [30]})
    outcome, _ = drive(climb(plan(["scheduling"], facts(),
                                  control_ineligible=lambda t: None)), sim)
    d = outcome.ladder.decision
    assert d.recommended == "control" and outcome.chosen.label == "control"
    assert d.why.startswith("nothing beat the engine's defaults beyond the noise")
    assert d.rounds is not None and d.rounds.rounds >= 3


def test_defaults_that_fail_a_requirement_give_way_to_the_eligible_winner():
    sim = Sim({"control": [70, 71, 69], "baseline": [60, 59, 61],
               "parallel_slots=2": [40], "parallel_slots=4": [30]})
    why = "they give each sequence 4,096 of the model's 8,192 context tokens"
    outcome, _ = drive(climb(plan(["scheduling"], facts(),
                                  control_ineligible=lambda t: why)), sim)
    d = outcome.ladder.decision
    assert d.recommended == "winner" and d.control_ineligible == why
    assert d.rounds.state in ("worse", "no_gain") and why in d.why
    assert outcome.chosen.label == "baseline"


def test_planted_drift_is_caught_and_the_winner_compared_afresh():
    """The machine halves its speed a third of the way in. Paired rounds still see the
    candidate's +30%; the control at the end is half its start: drift, so the winner is
    compared with the control again, afresh, and the recommendation follows that."""
    def slow(k: int) -> float:
        return 1.0 if k < 12 else 0.5

    sim = Sim({"control": lambda k: 40 * slow(k), "baseline": lambda k: 50 * slow(k),
               "parallel_slots=2": lambda k: 65 * slow(k), "parallel_slots=4": lambda k: 20})
    outcome, _ = drive(climb(plan(["scheduling"], facts())), sim)
    d = outcome.ladder.decision
    assert d.drift is not None and d.drift.moved, d.drift
    assert d.drift.change == pytest.approx(-0.5)
    assert d.reconfirmed is not None and d.reconfirmed.state == "gain"
    assert d.recommended == "winner"
    assert _candidate(outcome, "parallel_slots=2").status == "accepted"


def test_no_drift_is_claimed_on_a_steady_machine():
    sim = Sim({"control": [40, 41, 40, 39], "baseline": [50, 51, 49],
               "parallel_slots=2": [65, 66, 64], "parallel_slots=4": [20]})
    outcome, _ = drive(climb(plan(["scheduling"], facts())), sim)
    d = outcome.ladder.decision
    assert d.drift is not None and not d.drift.moved and d.reconfirmed is None


def test_the_window_is_sized_from_the_noise_of_the_start():
    """+-10% between paired windows at the start against a 5% target: the windows after it
    count more requests, up to the budget's cap, and every later spec carries the size."""
    sim = Sim({"control": [40, 44, 36], "baseline": [50, 45, 55],
               "parallel_slots=2": [40], "parallel_slots=4": [30]})
    outcome, _ = drive(climb(plan(["scheduling"], facts(), window_requests=8)), sim)
    assert outcome.ladder.window_requests == 32  # capped at 4x the workload's 8
    assert "capped by budgets.max_window_scale" in outcome.ladder.window_why
    assert all(s.measured_requests is None for s in sim.specs[:6])
    assert all(s.measured_requests == 32 for s in sim.specs[6:])


def test_progress_counts_trials_and_estimates_the_time_left():
    now, seen = [0.0], []
    sim = Sim({"control": 40, "baseline": [50, 51, 49], "parallel_slots=2": 60,
               "parallel_slots=4": 70})

    def run(spec):
        now[0] += 10.0
        return sim(spec)

    drive(climb(plan(["scheduling"], facts(), clock=lambda: now[0],
                     progress=seen.append)), run)
    assert [p.trial for p in seen] == list(range(1, len(seen) + 1))
    assert seen[0].eta_s is None and seen[1].eta_s is not None
    assert seen[-1].planned >= seen[-1].trial and seen[-1].phase == "decision"
    assert seen[3].elapsed_s == pytest.approx(30.0)
    assert "trial 4 of ~" in seen[3].line()


def test_the_trial_budget_stops_the_climb_between_rounds():
    sim = Sim({"control": [40, 41, 40], "baseline": [50, 51, 49],
               "parallel_slots=2": [60, 61, 59], "parallel_slots=4": [70, 71, 69]})
    outcome, _ = drive(climb(plan(["scheduling", "prefill"], facts(),
                                  budgets=Budgets(repeats=3, max_trials=8))), sim)
    assert outcome.ladder.stopped == "trial budget spent (8 trials)"
    assert statuses(outcome)["scheduling"]["parallel_slots=4"] == "not run"
    assert outcome.ladder.steps[-1].skipped.startswith("not run: trial budget spent")
    # The decision still gets its rounds: the answer needs them.
    assert outcome.ladder.decision.rounds.rounds == 3


def test_the_wall_budget_reads_the_clock_it_is_given():
    now = [0.0]
    sim = Sim({"control": 40, "baseline": 50, "parallel_slots=2": 60, "parallel_slots=4": 70})

    def run(spec):
        now[0] += 10.0  # each trial takes 10 s on this clock
        return sim(spec)

    outcome, _ = drive(climb(plan(["scheduling"], facts(), clock=lambda: now[0],
                                  budgets=Budgets(repeats=3, max_wall_s=65))), run)
    assert outcome.ladder.stopped == "wall-time budget spent (65 s)"
    # The sixth trial ended at 60 s; the seventh (a screen) ends its round with the
    # incumbent's window; then the decision's three rounds.
    assert len(sim.ids) == 8 + 6


def test_a_retried_trial_counts_every_attempt_in_the_ids_that_follow():
    sim = Sim({"control": 40, "baseline": [50, 51, 49], "parallel_slots=2": 60,
               "parallel_slots=4": 70})

    def run(spec):  # the first baseline's engine is killed once; the climb asks again
        if spec.trial_id == "t01-baseline-r1":
            killed = trial(spec, None, "the engine was killed by signal 9", None)
            return [killed.model_copy(update={"killed_by_signal": 9})]
        return sim(spec)

    outcome, trials = drive(climb(plan(["scheduling"], facts())), run)
    ids = [t.trial_id for t in trials]
    assert ids[:4] == ["t00-control-r1", "t01-baseline-r1", "t01-baseline-r1-retry1",
                       "t03-baseline-r2"]
    assert outcome.launches == len(trials)
    assert [t.trial_id for t in outcome.trials] == ids  # the outcome carries every attempt


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


def test_a_disturbed_incumbent_window_is_set_aside_and_measured_again():
    """As in make demo's first run on the AVX-512 EPYC: one baseline window at 65 tok/s among
    its 100-115 (the machine hiccupped), against four slots' steady +18%. The round is set
    aside, kept in the record, and the gain is decided on the clean rounds."""
    base = [107, 111, 110, 108, 109, 65, 111, 106, 108, 109, 107, 110]
    sim = Sim({"control": [109, 112, 109], "baseline": base,
               "parallel_slots=2": [80], "parallel_slots=4": [126, 126, 124, 125, 121, 125, 126]})
    outcome, _ = drive(climb(plan(["scheduling"], facts())), sim)
    slots = _candidate(outcome, "parallel_slots=4")
    assert slots.status == "accepted", slots.reason
    assert len(slots.set_aside) == 1 and "65 " not in slots.set_aside[0]
    assert " vs 65" in slots.set_aside[0]
    assert 65 not in slots.incumbent_values
