"""Typed changes, trial keys and the gain against the control: pure, no engine."""

from __future__ import annotations

import pytest

from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.vllm import adapter as vllm
from infopt.specs.request import OptimizeRequest
from infopt.specs.serving import same_config, with_knob
from infopt.specs.trial import TrialRole, TrialSpec, changes_from, trial_key
from infopt.specs.workload import Objective
from infopt.tuning.control import control_gain

T = ServingTarget(model_path="/m.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)


def test_changes_are_typed_deltas_from_the_control():
    four = with_knob(BASE, "parallel_slots", 4)
    assert {c.knob: (c.control, c.value) for c in changes_from(CONTROL, four)} == {
        "threads": (None, 2), "parallel_slots": (None, 4), "ctx_per_slot_tokens": (None, 8192)}
    assert changes_from(CONTROL, CONTROL) == []
    with pytest.raises(ValueError, match="same engine"):
        changes_from(CONTROL, vllm.control_config(T))


def test_the_control_is_the_baseline_only_when_the_defaults_are():
    assert same_config(vllm.control_config(T), vllm.baseline_config(T))
    assert not same_config(CONTROL, BASE)


def test_trial_key_changes_with_anything_that_changes_the_measurement():
    spec = TrialSpec(trial_id="t01-baseline-r1", role=TrialRole.BASELINE, config=BASE,
                     changes=changes_from(CONTROL, BASE), value="baseline")
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


def test_gain_is_the_winner_against_the_control_with_an_interval():
    g = control_gain([39.0, 38.0, 40.0], [43.0, 44.0, 42.5], Objective.THROUGHPUT)
    assert (g.control_median, g.winner_median) == (39.0, 43.0)
    assert g.ratio == pytest.approx(43.0 / 39.0) and not g.control_is_baseline
    assert g.comparison.verdict == "b_better" and g.comparison.n_a == 3
    worse = control_gain([39.0, 38.0, 40.0], [30.0], Objective.THROUGHPUT)  # never clamped
    assert worse.ratio == pytest.approx(30.0 / 39.0) and worse.comparison is None
    assert "at least 2" in worse.note


def test_gain_says_when_the_baseline_stood_in_for_the_control():
    g = control_gain([10.0, 11.0], [15.0, 16.0], Objective.THROUGHPUT,
                     control_is_baseline=True)
    assert g.control_is_baseline and g.control_median == 10.5 and g.winner_median == 15.5
