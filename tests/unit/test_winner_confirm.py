"""The ladder's winner is confirmed on the generative task sets: an incumbent that won on speed
but regresses beyond noise against the reference's answers is excluded and the incumbent before
it is tried, down to the baseline, which is reported as it is and never excluded. (Engines and answers are stand-ins
here; the real run: tests/flows/test_optimize_flow.py.)"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

import flows.winner as winner_mod
from infopt.runs.engine_run import EngineRun
from infopt.specs.quality import Interval, TaskSetResult
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import Trial
from infopt.specs.serving import LlamaCppConfig, with_knob
from infopt.tuning.climb_data import Incumbent

CFG = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)


def _t(value, obj, i):
    return Trial(trial_id=f"t{i}", role="tuning" if value != "1" else "baseline",
                 dimension="scheduling", value=value, repeat=1,
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

    @contextmanager
    def session(cfg, log_path, weights_bytes, **_):  # the "engine" is its config: nothing runs
        started.append(cfg.parallel_slots)
        yield SimpleNamespace(running=cfg, config=cfg)

    monkeypatch.setattr(winner_mod, "engine_session", session)
    monkeypatch.setattr(winner_mod, "get_run_logger", lambda: logging.getLogger("winner"))
    monkeypatch.setattr(winner_mod, "reference_task_sets", lambda *a, **k: _sets(12))
    monkeypatch.setattr(winner_mod, "task_sets",
                        lambda running, cfg, d, key, n: _sets(right[cfg.parallel_slots]))
    monkeypatch.setattr(EngineRun, "quality_key", lambda self, cfg: str(cfg.parallel_slots))
    monkeypatch.setattr(EngineRun, "weights_bytes", lambda self, cfg: 1)
    return right, started


def _ctx(tmp_path: Path) -> dict:
    """confirm_winner's arguments beside the history: the request, the engine's run context,
    the control and the quality reference's key."""
    request = OptimizeRequest(scenarios=[], quality_task_items=12, objective="throughput")
    run = EngineRun(run_dir=str(tmp_path), model=type("M", (), {"file_bytes": 1})(), hw=None,
                    workload=request.tuning_workload(), tokenizer_path=None,
                    engine_version="v", model_digest="d")
    return dict(request=request, run=run, control=CFG, reference_key="ref")


def _inc(slots: int, values, chain):
    trials = [_t(str(slots), v, i) for i, v in enumerate(values)]
    return Incumbent(chain[-1] if chain else "baseline",
                     with_knob(CFG, "parallel_slots", slots), trials, chain=list(chain))


# The ladder accepted 2 slots, then 4: the history of incumbents, the baseline first.
HISTORY = [_inc(1, (100, 101), []), _inc(2, (130, 131), ["parallel_slots=2"]),
           _inc(4, (150, 152), ["parallel_slots=2", "parallel_slots=4"])]


def test_a_fast_winner_that_regresses_is_excluded_and_the_one_before_recommended(world,
                                                                                tmp_path):
    right, started = world
    right.update({4: 2, 2: 11, 1: 12})  # 4 slots: 2/12 against 12/12, p = 0.001
    d = winner_mod.confirm_winner(HISTORY, **_ctx(tmp_path))
    assert d.chosen.label == "parallel_slots=2" and d.winner.value == "2"
    assert started == [4, 2]
    assert d.tasks.passed and len(d.tasks.excluded) == 1
    assert d.tasks.excluded[0].startswith(
        "baseline + parallel_slots=2 + parallel_slots=4: arithmetic: 2/12")


def test_the_baseline_is_reported_as_it_is_never_excluded(world, tmp_path):
    right, started = world
    right.update({4: 1, 2: 1, 1: 1})
    d = winner_mod.confirm_winner(HISTORY, **_ctx(tmp_path))
    assert d.chosen.label == "baseline" and started == [4, 2, 1]
    assert not d.tasks.passed and len(d.tasks.excluded) == 2


def test_within_noise_nothing_is_excluded(world, tmp_path):
    right, started = world
    right.update({4: 11, 2: 12, 1: 12})  # one item lost: p = 0.5
    d = winner_mod.confirm_winner(HISTORY, **_ctx(tmp_path))
    assert d.winner.value == "4" and started == [4] and d.tasks.passed
    assert d.winner.objective_value == 152  # the median trial of two: the upper one


def test_the_fallback_policy_alone_tries_newest_first_and_keeps_the_baseline():
    """infopt.tuning.winner.fallback without engines: the outcomes sent back decide."""
    from infopt.specs.quality import TaskSetOutcome
    from infopt.tuning.winner import fallback

    def outcome(right: int) -> TaskSetOutcome:
        from infopt.quality.taskrun import taskset_verdicts
        return TaskSetOutcome(items_per_set=12, reference=_sets(12), winner_trial_id="t",
                              winner=_sets(right),
                              verdicts=taskset_verdicts(_sets(12), _sets(right), 0.0))

    policy = fallback(HISTORY)
    first = next(policy)
    assert first.incumbent is HISTORY[2] and first.excluded == []
    second = policy.send(outcome(1))
    assert second.incumbent is HISTORY[1] and len(second.excluded) == 1
    third = policy.send(outcome(1))
    assert third.incumbent is HISTORY[0] and len(third.excluded) == 2
    with pytest.raises(StopIteration) as done:
        policy.send(outcome(1))  # the baseline is reported as it is
    assert done.value.value is third
    policy = fallback(HISTORY)
    next(policy)
    with pytest.raises(StopIteration) as done:
        policy.send(None)  # no task sets ran: the newest is accepted
    assert done.value.value.incumbent is HISTORY[2]
