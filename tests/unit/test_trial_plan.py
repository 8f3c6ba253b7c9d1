"""The trial plan, trial keys and the gain against the control: pure, no engine."""

from __future__ import annotations

import pytest

from infopt.engines import llamacpp, vllm
from infopt.engines.base import ServingTarget
from infopt.specs.results import Trial
from infopt.specs.trial import TrialRole, changes_from, trial_key
from infopt.specs.request import OptimizeRequest
from infopt.specs.workload import Objective
from infopt.tuning.plan import plan_trials
from infopt.tuning.search import control_gain

T = ServingTarget(model_path="/m.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)


def test_each_round_runs_the_control_then_rotated_candidates():
    specs = plan_trials(CONTROL, BASE, "parallel_slots", [1, 2, 4], repeats=3, seed=7)
    got = [(s.role.value, s.value, s.repeat) for s in specs]
    assert got == [
        ("control", None, 1), ("baseline", "1", 1), ("tuning", "2", 1), ("tuning", "4", 1),
        ("control", None, 2), ("tuning", "2", 2), ("tuning", "4", 2), ("baseline", "1", 2),
        ("control", None, 3), ("tuning", "4", 3), ("baseline", "1", 3), ("tuning", "2", 3)]
    assert [s.with_contract for s in specs].count(True) == 1 and specs[1].with_contract
    assert len({s.trial_id for s in specs}) == len(specs) and all(s.seed == 7 for s in specs)


def test_changes_are_typed_deltas_from_the_control():
    specs = plan_trials(CONTROL, BASE, "parallel_slots", [1, 4], repeats=1, seed=0)
    four = next(s for s in specs if s.value == "4")
    assert {c.knob: (c.control, c.value) for c in four.changes} == {
        "threads": (None, 2), "parallel_slots": (None, 4), "ctx_per_slot_tokens": (None, 8192)}
    assert specs[0].changes == []
    with pytest.raises(ValueError, match="same engine"):
        changes_from(CONTROL, vllm.control_config(T))


def test_no_separate_control_when_the_defaults_are_the_baseline():
    c = vllm.control_config(T)
    specs = plan_trials(c, vllm.baseline_config(T), "max_num_seqs", [1, 2], repeats=2, seed=0)
    assert TrialRole.CONTROL not in {s.role for s in specs}
    # vLLM's own max_num_seqs (unset) is the baseline's value, tried beside 1 and 2.
    assert [(s.role.value, s.value) for s in specs[:3]] == [
        ("baseline", "None"), ("tuning", "1"), ("tuning", "2")] and len(specs) == 6


def test_trial_key_changes_with_anything_that_changes_the_measurement():
    spec = plan_trials(CONTROL, BASE, "parallel_slots", [1], repeats=1, seed=0)[1]
    wl = OptimizeRequest().tuning_workload()
    key = trial_key(spec, wl, "v1", "sha256:aa")
    assert key.startswith(spec.trial_id + "-") and key == trial_key(spec, wl, "v1", "sha256:aa")
    others = {trial_key(spec, wl, "v2", "sha256:aa"), trial_key(spec, wl, "v1", "sha256:bb"),
              trial_key(spec, wl.model_copy(update={"traffic": wl.traffic.model_copy(
                  update={"measured_requests": 9})}), "v1", "sha256:aa"),
              trial_key(spec.model_copy(update={"seed": 1}), wl, "v1", "sha256:aa"),
              trial_key(spec.model_copy(update={"config": spec.config.model_copy(
                  update={"threads": 1})}), wl, "v1", "sha256:aa")}
    assert key not in others and len(others) == 5
    # The port is picked free per start: it does not make a different trial.
    moved = spec.model_copy(update={"config": spec.config.model_copy(update={"port": 9999})})
    assert trial_key(moved, wl, "v1", "sha256:aa") == key


def _trial(role: str, value: str | None, obj: float, i: int) -> Trial:
    return Trial(trial_id=f"t{i}", role=role, dimension="parallel_slots", value=value, repeat=1,
                 config=BASE, engine=None, benchmark=None, objective_value=obj)


def test_gain_is_the_winner_against_the_control_with_an_interval():
    trials = [_trial("control", None, 39.0, 0), _trial("control", None, 38.0, 1),
              _trial("control", None, 40.0, 2), _trial("tuning", "4", 43.0, 3),
              _trial("tuning", "4", 44.0, 4), _trial("tuning", "4", 42.5, 5),
              _trial("baseline", "1", 30.0, 6)]
    g = control_gain(trials, "4", Objective.THROUGHPUT)
    assert (g.control_median, g.winner_median) == (39.0, 43.0)
    assert g.ratio == pytest.approx(43.0 / 39.0) and not g.control_is_baseline
    assert g.comparison.verdict == "b_better" and g.comparison.n_a == 3
    worse = control_gain(trials, "1", Objective.THROUGHPUT)  # never clamped at 1
    assert worse.ratio == pytest.approx(30.0 / 39.0) and worse.comparison is None
    assert "at least 2" in worse.note


def test_gain_uses_the_baseline_when_it_is_the_control():
    trials = [_trial("baseline", "1", 10.0, 0), _trial("baseline", "1", 11.0, 1),
              _trial("tuning", "2", 15.0, 2), _trial("tuning", "2", 16.0, 3)]
    g = control_gain(trials, "2", Objective.THROUGHPUT)
    assert g.control_is_baseline and g.control_median == 10.5 and g.winner_median == 15.5
