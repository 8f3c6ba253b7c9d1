"""The weights gates asked beside the control and the baseline (flows/weight_gates.py, issue
49), on the real Prefect server with no engine started: the bundled GGUF with two local
quantizations requested and not pre-authorized, so each waits at its quantize gate in a
submitted task while the flow's own work (the control's and the baseline's place) goes on; the
answer comes through the same API `infopt approve` uses. What the report's "Decisions and
waits" says follows from when the answer came; a run that stops withdraws the gate still
waiting, and asks no other."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest
from prefect import flow

from infopt.bootstrap import default_paths
from infopt.model.profile import profile_model
from infopt.specs.request import ModelTarget, OptimizeRequest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _request(types: list[str]) -> OptimizeRequest:
    return OptimizeRequest(model=ModelTarget(path=str(default_paths().gguf)),
                           requantize=types, dimensions=["weights"], approval_timeout_s=120)


@flow(name="weight-gates-test")
def _run(work_s: float, stop: bool = False, types: tuple[str, ...] = ("Q8_0", "Q2_K")):
    from flows.weight_gates import ask_weight_gates

    pending = ask_weight_gates(_request(list(types)), None,
                               profile_model(str(default_paths().gguf)),
                               "llamacpp", "test", "sha256:" + "0" * 64, 24 * 2**30)
    assert pending.background  # no shortlisted checkpoint: nothing can change the reference
    time.sleep(work_s)  # the reference, the control and the baseline run here
    if stop:
        pending.withdraw("the baseline is broken")
    return pending.candidates(), pending.waits()


def _deny_each(after_s: float, keys: list[str]) -> threading.Thread:
    """Deny each gate as it pauses, `after_s` after it does (another thread, as a person)."""
    from flows.gate import approve, pending

    def answer():
        for key in keys:
            while not (found := [p for p in pending() if p.key == key]):
                time.sleep(0.2)
            time.sleep(after_s)
            approve(found[0].gate_run_id, key, False, "not this time")

    t = threading.Thread(target=contextvars.copy_context().run, args=(answer,), daemon=True)
    t.start()
    return t


def test_an_answer_after_the_baseline_leaves_the_ladder_waiting(prefect_api):
    _deny_each(1.0, ["quantize-q8-0", "quantize-q2-k"])
    got, waits = _run(0.5)
    assert [(a.key, a.source.value, a.approved) for a in got.answers] == [
        ("quantize-q8-0", "person", False), ("quantize-q2-k", "person", False)]
    assert got.variants == () and "Q8_0, Q2_K: not made" in got.notes[0]
    assert [w.gate_key for w in waits] == ["quantize-q8-0", "quantize-q2-k"]
    assert all(w.waited_s >= 1.0 for w in waits)
    # The flow's work (0.5 s) ended before either answer: it finished while the gates waited,
    # and the ladder waited for the rest.
    for w in waits:
        [said] = w.ran_meanwhile
        assert said.startswith("the quality reference, the control and the baseline "
                               "(finished while waiting; the ladder then waited ")


def test_an_answer_during_the_baseline_costs_the_ladder_nothing(prefect_api):
    _deny_each(0.5, ["quantize-q8-0"])
    got, waits = _run(6.0, types=("Q8_0",))
    assert [w.gate_key for w in waits] == ["quantize-q8-0"]
    assert all(w.ran_meanwhile == ["the quality reference, the control and the baseline "
                                   "(still running at the answer)"] for w in waits)


def test_a_run_that_stops_withdraws_the_waiting_gate_and_asks_no_other(prefect_api):
    t0 = time.monotonic()
    got, waits = _run(1.5, stop=True)
    assert time.monotonic() - t0 < 60  # not the gate's 120 s timeout
    q8, q2 = got.answers
    assert (q8.key, q8.source.value, q8.approved) == ("quantize-q8-0", "withdrawn", False)
    assert q8.reason == "withdrawn: the run stopped (the baseline is broken)"
    assert (q2.key, q2.source.value, q2.reason) == (
        "quantize-q2-k", "withdrawn", "not asked: the run stopped before this gate")
    assert [w.gate_key for w in waits] == ["quantize-q8-0"]
