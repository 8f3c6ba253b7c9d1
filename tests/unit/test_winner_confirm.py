"""The winner is confirmed on the generative task sets: a value that won on speed but regresses
beyond noise against the reference's answers is excluded and the decision re-made, down to the
baseline, which is reported as it is and never excluded. (Engines and answers are stand-ins
here; the real run: tests/flows/test_optimize_flow.py.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import flows.winner as winner_mod
from infopt.specs.quality import Interval, TaskSetResult
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import Trial
from infopt.specs.serving import LlamaCppConfig, with_knob
from infopt.tuning.search import decide

CFG = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)


def _t(value, obj, i):
    return Trial(trial_id=f"t{i}", role="tuning" if value != "1" else "baseline",
                 dimension="parallel_slots", value=value, repeat=1,
                 config=with_knob(CFG, "parallel_slots", int(value)), engine=None,
                 benchmark=None, objective_value=obj)


def _sets(right: int, total: int = 12) -> list[TaskSetResult]:
    outcomes = [True] * right + [False] * (total - right)
    return [TaskSetResult(set_name="arithmetic", passed=right, total=total,
                          interval=Interval(low=0, high=1), outcomes=outcomes,
                          answers=[""] * total)]


@pytest.fixture
def world(monkeypatch):
    """Each value's answers on the sets (right out of 12; the reference gets 12)."""
    right: dict[int, int] = {}
    started: list[int] = []
    monkeypatch.setattr(winner_mod, "decide_tuning", lambda trials, knob, base, wl, seed:
                        decide(trials, knob, base, wl.objective, seed=seed))
    monkeypatch.setattr(winner_mod, "start_engine",
                        lambda cfg, log, b: started.append(cfg.parallel_slots) or cfg)
    monkeypatch.setattr(winner_mod, "stop_engine", lambda running: None)
    monkeypatch.setattr(winner_mod, "get_run_logger", lambda: logging.getLogger("winner"))
    monkeypatch.setattr(winner_mod, "reference_task_sets", lambda *a: _sets(12))
    monkeypatch.setattr(winner_mod, "task_sets",
                        lambda running, cfg, d, key, n: _sets(right[cfg.parallel_slots]))
    monkeypatch.setattr(winner_mod, "quality_key", lambda cfg, v, d: str(cfg.parallel_slots))
    return right, started


def _ctx(tmp_path: Path) -> winner_mod.WinnerContext:
    request = OptimizeRequest(scenarios=[], quality_task_items=12, objective="throughput")
    return winner_mod.WinnerContext(
        request=request, workload=request.tuning_workload(),
        model=type("M", (), {"file_bytes": 1})(),
        run_dir=tmp_path, control=CFG, reference_key="ref", engine_version="v",
        model_digest="d")


TRIALS = [_t("1", 100, 0), _t("1", 101, 1), _t("4", 150, 2), _t("4", 152, 3),
          _t("2", 130, 4), _t("2", 131, 5)]


def test_a_fast_value_that_regresses_is_excluded_and_the_next_best_recommended(world,
                                                                                tmp_path):
    right, started = world
    right.update({4: 2, 2: 11, 1: 12})  # 4 slots: 2/12 against 12/12, p = 0.001
    d = winner_mod.decide_and_confirm(TRIALS, "parallel_slots", "1", _ctx(tmp_path))
    assert d.outcome.winner_value == "2" and d.winner.value == "2"
    assert started == [4, 2]
    assert d.tasks.passed and len(d.tasks.excluded) == 1
    assert d.tasks.excluded[0].startswith("parallel_slots=4: arithmetic: 2/12")


def test_the_baseline_is_reported_as_it_is_never_excluded(world, tmp_path):
    right, started = world
    right.update({4: 1, 2: 1, 1: 1})
    d = winner_mod.decide_and_confirm(TRIALS, "parallel_slots", "1", _ctx(tmp_path))
    assert d.winner.value == "1" and started == [4, 2, 1]
    assert not d.tasks.passed and [e.split(":")[0] for e in d.tasks.excluded] == [
        "parallel_slots=4", "parallel_slots=2"]


def test_within_noise_nothing_is_excluded(world, tmp_path):
    right, started = world
    right.update({4: 11, 2: 12, 1: 12})  # one item lost: p = 0.5
    d = winner_mod.decide_and_confirm(TRIALS, "parallel_slots", "1", _ctx(tmp_path))
    assert d.winner.value == "4" and started == [4] and d.tasks.passed
